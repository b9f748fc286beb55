/*
 * weft_topo.c — weft-topo: shows the topology weft sees and the rings and
 * trees it builds from it.
 *
 *   weft-topo                      detect this machine (or what NCCL_TOPO_FILE,
 *                                  WEFT_HWLOC_XML, HWLOC_XMLFILE name)
 *   weft-topo --topo-file F        load a NCCL topology XML file
 *   weft-topo --hwloc-xml F        load an hwloc XML file
 *   --dot                          print a Graphviz graph (dot -Tpng)
 *   --json                         print a machine-readable summary
 *   --xml F                        also write the topology as NCCL XML to F
 *   --ranks N                      CPU-only hosts: rings over N ranks
 *
 * Without --dot or --json it prints the system as an indented tree with the
 * bandwidth of every link, each GPU's nearest NIC, then the ring and tree
 * with their bottleneck bandwidth (GB/s per direction), and the CPUs this
 * process is bound to. Detection also says what NVML and libibverbs added.
 */
#include "topo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out) {
  fprintf(out, "usage: weft-topo [--topo-file F | --hwloc-xml F] [--dot | --json] [--xml F] [--ranks N]\n");
}

int main(int argc, char **argv) {
  const char *topo_file = NULL, *hwloc_xml = NULL, *xml_out = NULL;
  int dot = 0, json = 0, nranks = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int has_value = i + 1 < argc;
    if (strcmp(a, "--topo-file") == 0 && has_value)
      topo_file = argv[++i];
    else if (strcmp(a, "--hwloc-xml") == 0 && has_value)
      hwloc_xml = argv[++i];
    else if (strcmp(a, "--xml") == 0 && has_value)
      xml_out = argv[++i];
    else if (strcmp(a, "--ranks") == 0 && has_value)
      nranks = atoi(argv[++i]);
    else if (strcmp(a, "--dot") == 0)
      dot = 1;
    else if (strcmp(a, "--json") == 0)
      json = 1;
    else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "weft-topo: unknown or incomplete argument '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (topo_file && hwloc_xml) {
    fprintf(stderr, "weft-topo: give --topo-file or --hwloc-xml, not both\n");
    return 2;
  }
  char err[512] = "";
  weft_topo_t *t = topo_file   ? weft_topo_load_xml(topo_file, err, sizeof(err))
                   : hwloc_xml ? weft_topo_load_hwloc(hwloc_xml, err, sizeof(err))
                               : weft_topo_from_env(err, sizeof(err));
  if (!t) {
    fprintf(stderr, "weft-topo: %s\n", err);
    return 1;
  }
  int rc = 0;
  weft_topo_plan_t plan;
  if (weft_topo_search(t, nranks, &plan)) {
    fprintf(stderr, "weft-topo: out of memory searching rings\n");
    weft_topo_free(t);
    return 1;
  }
  if (xml_out && weft_topo_dump_xml(t, xml_out, err, sizeof(err))) {
    fprintf(stderr, "weft-topo: %s\n", err);
    rc = 1;
  }
  weft_topo_cpubind_t bind;
  weft_topo_cpubind_get(&bind); // "unknown" when hwloc cannot say
  if (dot)
    weft_topo_print_dot(t, stdout);
  else if (json)
    weft_topo_print_json(t, &plan, &bind, stdout);
  else {
    weft_topo_print_tree(t, stdout);
    weft_topo_print_plan(t, &plan, stdout);
    weft_topo_print_cpubind(&bind, stdout);
  }
  weft_topo_plan_free(&plan);
  weft_topo_free(t);
  return rc;
}
