/*
 * fuzz_topo.c — libFuzzer target: topology files (NCCL_TOPO_FILE's NCCL XML,
 * WEFT_HWLOC_XML's hwloc 2 and 3 XML) and everything that consumes the graph
 * a file produced.
 *
 * Each input is handed, unchanged, to weft_topo_load_xml_mem (libxml2, from
 * memory) and to weft's hwloc 3 -> 2 translation (weft_hwloc_xml_v2, from a
 * temporary file, as WEFT_HWLOC_XML names one). So the project's topology
 * files (tests/topologies/) serve as seeds as they are.
 *
 * The whole hwloc loader (weft_topo_load_hwloc: hwloc's own XML import, then
 * weft's conversion of hwloc's objects) runs only with FUZZ_TOPO_HWLOC=1:
 * hwloc 2.9's importer trusts its files and crashes inside libhwloc on
 * malformed ones (tests/fuzz/crashers/hwloc-xml-import-null-deref.xml), which
 * would stop every bounded run on a bug that is not weft's. A graph that loads is then used the way
 * weft-topo and communicator init use one: signature, tree/dot/JSON output,
 * paths from the first node, nearest NICs, ring/tree search, CPU binding
 * plan, and a dump to NCCL XML that must load again.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "topo.h"
#include "topo_hwloc_compat.h"

static char dir[] = "/tmp/weft-fuzz-topo-XXXXXX";
static char hwloc_path[PATH_MAX], dump_path[PATH_MAX];
static FILE *sink;
static int whole_hwloc;  // FUZZ_TOPO_HWLOC=1

static void cleanup(void) {
  unlink(hwloc_path);
  unlink(dump_path);
  rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_setup_process();
  setenv("HWLOC_HIDE_ERRORS", "1", 1);  // hwloc's own complaints about bad files
  if (mkdtemp(dir) == NULL || (sink = fopen("/dev/null", "w")) == NULL) {
    perror("fuzz_topo: setup");
    abort();
  }
  snprintf(hwloc_path, sizeof(hwloc_path), "%s/hwloc.xml", dir);
  snprintf(dump_path, sizeof(dump_path), "%s/dump.xml", dir);
  atexit(cleanup);
  const char *h = getenv("FUZZ_TOPO_HWLOC");
  whole_hwloc = h != NULL && strcmp(h, "1") == 0;
  return 0;
}

static void use_graph(weft_topo_t *t) {
  char err[512];
  free(weft_topo_signature(t));
  weft_topo_print_tree(t, sink);
  weft_topo_print_dot(t, sink);
  for (int i = 0; i < t->nnodes && i < 256; i++) {
    weft_topo_path_t path;
    weft_topo_path(t, 0, i, &path);
  }
  int nic[64];
  weft_topo_nearest_nics(t, nic, 64);
  weft_topo_plan_t plan;
  memset(&plan, 0, sizeof(plan));
  if (weft_topo_search(t, 4, &plan) == 0) {
    weft_topo_print_plan(t, &plan, sink);
    weft_topo_print_json(t, &plan, NULL, sink);
    weft_topo_plan_free(&plan);
  }
  weft_topo_bind_t bind;
  memset(&bind, 0, sizeof(bind));
  if (weft_topo_bind_plan(t, 1, 3, NULL, 0, &bind, err, sizeof(err)) == 0) weft_topo_bind_free(&bind);

  // What was loaded must survive a dump and a reload.
  if (weft_topo_dump_xml(t, dump_path, err, sizeof(err)) == 0) {
    weft_topo_t *again = weft_topo_load_xml(dump_path, err, sizeof(err));
    if (again == NULL) {
      fprintf(stderr, "fuzz_topo: the dump of a loaded graph does not load: %s\n", err);
      abort();
    }
    weft_topo_free(again);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[512];
  weft_topo_t *t = weft_topo_load_xml_mem((const char *)data, size, "fuzz.xml", err, sizeof(err));
  if (t != NULL) {
    use_graph(t);
    weft_topo_free(t);
  }

  FILE *f = fopen(hwloc_path, "wb");
  if (f == NULL) abort();
  fwrite(data, 1, size, f);
  fclose(f);
  size_t v2len = 0;
  char *v2 = weft_hwloc_xml_v2(hwloc_path, &v2len);
  if (v2 != NULL && strlen(v2) != v2len) abort();
  free(v2);
  if (!whole_hwloc) return 0;
  t = weft_topo_load_hwloc(hwloc_path, err, sizeof(err));
  if (t != NULL) {
    use_graph(t);
    weft_topo_free(t);
  }
  return 0;
}
