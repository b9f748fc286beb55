/*
 * test_topo_nvlink.c — NVLinks from hwloc's distance matrices: the
 * heterogeneous NVLinkBandwidth matrix of an NVSwitch machine (GPUs' OS
 * devices and NVSwitches' PCI devices, switch-to-switch values where the
 * baseboards are joined), the same machine described without the
 * switch-to-switch values (as hwloc's NVML backend writes it: the switch
 * groups are joined as one fabric), hwloc's own DGX-2 file where
 * WEFT_TEST_HWLOC_DGX2 names it (not part of the repository: skipped
 * without it), NCCL's XML naming NVSwitches only as NVLink targets, and
 * matrices weft does not read (named in an INFO line).
 *
 * tests/topologies/hgx2-16gpu-hwloc.xml is an HGX-2 class machine written
 * from its published architecture: 16 V100 (NVLink 2, 25 GB/s per link and
 * direction as hwloc counts it), two baseboards of 8 GPUs and 6 NVSwitches,
 * each GPU with one NVLink to each switch of its board, each switch joined
 * by 8 links to its counterpart on the other board. Expected: six 25 GB/s
 * NVLinks per GPU, every GPU pair NVL at 6 x 25 = 150 GB/s (the fabric's
 * flow: on one board over the 6 shared switches, across boards over the 6
 * switch pairs), and a ring bottleneck of 150 GB/s (to 1e-6: every hop's
 * links are its own in each direction). Tests run from the repository root.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hwloc.h>

#include "env.h"
#include "log_capture.h"
#include "topo.h"

#define HGX2 "tests/topologies/hgx2-16gpu-hwloc.xml"

static weft_topo_t *load_hwloc(const char *path) {
  char err[512] = "";
  weft_topo_t *t = weft_topo_load_hwloc(path, err, sizeof(err));
  cr_assert_not_null(t, "%s: %s", path, err);
  return t;
}

static double ring_bw(const weft_topo_t *t) {
  weft_topo_plan_t plan;
  cr_assert_eq(weft_topo_search(t, 0, &plan), 0);
  double bw = plan.ring.bottleneck;
  weft_topo_plan_free(&plan);
  return bw;
}

static void expect_same(const weft_topo_t *a, const weft_topo_t *b, const char *what) {
  char *sa = weft_topo_signature(a), *sb = weft_topo_signature(b);
  cr_assert_not_null(sa);
  cr_assert_not_null(sb);
  cr_expect_str_eq(sa, sb, "%s: dump and reload differ", what);
  free(sa);
  free(sb);
}

// Dump as NCCL XML, load it back: the same graph.
static void expect_round_trip(const weft_topo_t *a, const char *what) {
  char out[] = "/tmp/weft-nvlink-XXXXXX", err[512] = "";
  int fd = mkstemp(out);
  cr_assert_geq(fd, 0);
  close(fd);
  cr_assert_eq(weft_topo_dump_xml(a, out, err, sizeof(err)), 0, "%s", err);
  weft_topo_t *b = weft_topo_load_xml(out, err, sizeof(err));
  cr_assert_not_null(b, "%s", err);
  expect_same(a, b, what);
  weft_topo_free(b);
  unlink(out);
}

// Every GPU has `links` NVLinks of `per_link` GB/s, one to each of as many NVSwitches.
static void expect_gpu_links(const weft_topo_t *t, int links, double per_link) {
  for (int g = 0; g < t->nnodes; g++) {
    if (t->nodes[g].kind != WEFT_TOPO_GPU) continue;
    int n = 0, switches = 0;
    for (int i = 0; i < t->nodes[g].nadj; i++) {
      const weft_topo_link_t *l = &t->links[t->nodes[g].adj[i]];
      if (l->kind != WEFT_LINK_NVL) continue;
      int other = l->a == g ? l->b : l->a;
      switches += t->nodes[other].kind == WEFT_TOPO_NVS;
      n += l->count;
      cr_expect_float_eq(l->bw / l->count, per_link, 1e-6, "GPU %s: %.3f GB/s per link", t->nodes[g].busid,
                         l->bw / l->count);
    }
    cr_expect_eq(n, links, "GPU %s: %d NVLinks", t->nodes[g].busid, n);
    cr_expect_eq(switches, links, "GPU %s: NVLinks to %d switches", t->nodes[g].busid, switches);
  }
}

// Every pair of GPUs: class NVL at bw GB/s.
static void expect_all_pairs(const weft_topo_t *t, double bw) {
  int pairs = 0;
  for (int a = 0; a < t->nnodes; a++)
    for (int b = 0; b < t->nnodes; b++) {
      if (a == b || t->nodes[a].kind != WEFT_TOPO_GPU || t->nodes[b].kind != WEFT_TOPO_GPU) continue;
      weft_topo_path_t p;
      cr_assert_eq(weft_topo_path(t, a, b, &p), 0);
      cr_expect_eq(p.cls, WEFT_PATH_NVL, "%s -> %s: %s", t->nodes[a].busid, t->nodes[b].busid,
                   weft_path_class_name(p.cls));
      cr_expect_float_eq(p.bw, bw, 1e-6, "%s -> %s: %.3f GB/s", t->nodes[a].busid, t->nodes[b].busid, p.bw);
      pairs++;
    }
  cr_expect_eq(pairs, 16 * 15);
}

// From GPU a to GPU b (on the other board) through two NVSwitches.
static void expect_across_switches(const weft_topo_t *t, const char *a, const char *b) {
  weft_topo_path_t p;
  cr_assert_eq(weft_topo_path(t, weft_topo_find_busid(t, a), weft_topo_find_busid(t, b), &p), 0);
  cr_expect_eq(p.nhops, 3, "%s -> %s: %d hops", a, b, p.nhops);
  cr_expect_eq(t->nodes[p.nodes[1]].kind, WEFT_TOPO_NVS);
  cr_expect_eq(t->nodes[p.nodes[2]].kind, WEFT_TOPO_NVS);
}

static int count_switch_links(const weft_topo_t *t) {
  int n = 0;
  for (int l = 0; l < t->nlinks; l++)
    n += t->links[l].kind == WEFT_LINK_NVL && t->nodes[t->links[l].a].kind == WEFT_TOPO_NVS &&
         t->nodes[t->links[l].b].kind == WEFT_TOPO_NVS;
  return n;
}

Test(topo_nvlink, hgx2_own_file, .timeout = 60) {
  weft_topo_t *t = load_hwloc(HGX2);
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_CPU), 2);
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_GPU), 16);
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_NVS), 12);
  expect_gpu_links(t, 6, 25.0);
  cr_expect_eq(count_switch_links(t), 6, "switch pairs joined");
  int s = weft_topo_find_busid(t, "0000:22:00.0"), s2 = weft_topo_find_busid(t, "0000:a2:00.0");
  for (int i = 0; i < t->nodes[s].nadj; i++) {
    const weft_topo_link_t *l = &t->links[t->nodes[s].adj[i]];
    if (l->a == s2 || l->b == s2) {
      cr_expect_eq(l->count, 8);
      cr_expect_float_eq(l->bw, 200.0, 1e-6);
    }
  }
  expect_all_pairs(t, 150.0);
  expect_across_switches(t, "0000:12:00.0", "0000:92:00.0");
  cr_expect_float_eq(ring_bw(t), 150.0, 1e-6);
  expect_round_trip(t, HGX2);
  weft_topo_free(t);
}

// WEFT_HWLOC_XML and NCCL_TOPO_DUMP_FILE: the dump loads back as the same
// graph, switch-to-switch links (<nvswitchlink>) and per-link MB/s included.
Test(topo_nvlink, hgx2_dump_file_loads_back, .timeout = 60) {
  char dump[] = "/tmp/weft-nvlink-dump-XXXXXX", err[512] = "";
  int fd = mkstemp(dump);
  cr_assert_geq(fd, 0);
  close(fd);
  setenv("WEFT_HWLOC_XML", HGX2, 1);
  setenv("NCCL_TOPO_DUMP_FILE", dump, 1);
  weft_env_reset();
  weft_topo_t *t = weft_topo_from_env(err, sizeof(err));
  cr_assert_not_null(t, "%s", err);
  weft_topo_t *d = weft_topo_load_xml(dump, err, sizeof(err));
  cr_assert_not_null(d, "%s", err);
  expect_same(t, d, dump);
  cr_expect_eq(count_switch_links(d), 6);
  cr_expect_float_eq(ring_bw(d), 150.0, 1e-6);
  FILE *f = fopen(dump, "r");
  cr_assert_not_null(f);
  char line[512];
  int switch_links = 0, with_bw = 0;
  while (fgets(line, sizeof(line), f)) {
    switch_links += strstr(line, "<nvswitchlink ") != NULL;
    with_bw += strstr(line, "<nvlink ") && strstr(line, "bw=\"25000\"");
  }
  fclose(f);
  cr_expect_eq(switch_links, 12, "each switch lists its link to its counterpart");
  cr_expect_eq(with_bw, 96, "16 GPUs x 6 NVLinks at 25000 MB/s");
  weft_topo_free(d);
  weft_topo_free(t);
  unsetenv("WEFT_HWLOC_XML");
  unsetenv("NCCL_TOPO_DUMP_FILE");
  weft_env_reset();
  unlink(dump);
}

#if HWLOC_API_VERSION >= 0x00020500
// The file at `in` with its NVLinkBandwidth matrix written again with the
// values between PCI devices (the switch-to-switch ones) left out, into `out`.
static void without_switch_links(const char *in, char *out) {
  hwloc_topology_t h;
  cr_assert_eq(hwloc_topology_init(&h), 0);
  hwloc_topology_set_all_types_filter(h, HWLOC_TYPE_FILTER_KEEP_ALL);
  cr_assert_eq(hwloc_topology_set_xml(h, in), 0);
  cr_assert_eq(hwloc_topology_load(h), 0);
  unsigned nr = 1;
  struct hwloc_distances_s *d = NULL;
  cr_assert_eq(hwloc_distances_get_by_name(h, "NVLinkBandwidth", &nr, &d, 0), 0);
  cr_assert_eq(nr, 1);
  unsigned n = d->nbobjs;
  hwloc_obj_t *objs = malloc(n * sizeof(*objs));
  hwloc_uint64_t *values = malloc((size_t)n * n * sizeof(*values));
  cr_assert(objs && values);
  memcpy(objs, d->objs, n * sizeof(*objs));
  int dropped = 0;
  for (unsigned i = 0; i < n; i++)
    for (unsigned j = 0; j < n; j++) {
      values[i * n + j] = d->values[i * n + j];
      if (i != j && objs[i]->type == HWLOC_OBJ_PCI_DEVICE && objs[j]->type == HWLOC_OBJ_PCI_DEVICE &&
          values[i * n + j]) {
        values[i * n + j] = 0;
        dropped++;
      }
    }
  cr_assert_eq(dropped, 12, "6 switch pairs, both directions");
  cr_assert_eq(hwloc_distances_release_remove(h, d), 0);
  hwloc_distances_add_handle_t add = hwloc_distances_add_create(
      h, "NVLinkBandwidth", HWLOC_DISTANCES_KIND_FROM_OS | HWLOC_DISTANCES_KIND_MEANS_BANDWIDTH, 0);
  cr_assert_not_null(add);
  cr_assert_eq(hwloc_distances_add_values(h, add, n, objs, values, 0), 0);
  cr_assert_eq(hwloc_distances_add_commit(h, add, 0), 0);
  int fd = mkstemp(out);
  cr_assert_geq(fd, 0);
  close(fd);
  cr_assert_eq(hwloc_topology_export_xml(h, out, 0), 0);
  free(objs);
  free(values);
  hwloc_topology_destroy(h);
}
#endif

// As hwloc's NVML backend writes it (NVML reports GPUs' links only): two
// groups of switches with nothing between them. They are joined as one
// fabric, as NCCL counts every NVSwitch as one: each switch of the second
// board to its counterpart (bus id order), as wide as its 8 GPU links.
Test(topo_nvlink, hgx2_without_switch_links, .timeout = 60) {
#if HWLOC_API_VERSION >= 0x00020500
  char path[] = "/tmp/weft-nvlink-hwloc-XXXXXX";
  without_switch_links(HGX2, path);
  log_to_file("nvlink", "GRAPH");
  weft_topo_t *t = load_hwloc(path);
  cr_expect_eq(log_count("2 groups of NVSwitches"), 1, "the joining is logged");
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_NVS), 12);
  expect_gpu_links(t, 6, 25.0);
  cr_expect_eq(count_switch_links(t), 6);
  expect_all_pairs(t, 150.0);
  expect_across_switches(t, "0000:19:00.0", "0000:99:00.0");
  cr_expect_float_eq(ring_bw(t), 150.0, 1e-6);
  expect_round_trip(t, path);
  weft_topo_free(t);
  unlink(path);
  unlink(log_path);
#else
  cr_skip_test("hwloc %x has no API to add a distance matrix (2.5 does)", HWLOC_API_VERSION);
#endif
}

// hwloc's own DGX-2 file (hwloc's tests/hwloc/xml/nvidiaDGX2.xml, hwloc 3
// format), named by WEFT_TEST_HWLOC_DGX2. Its NVLinkBandwidth holds no
// switch-to-switch values, and one NVSwitch reads PCI class 0 (hwloc still
// marks it subtype NVSwitch): 12 switches all the same, six 25 GB/s links
// per GPU, the boards joined as in the test above.
Test(topo_nvlink, hwloc_dgx2_file, .timeout = 60) {
  const char *path = getenv("WEFT_TEST_HWLOC_DGX2");
  if (!path || !*path) cr_skip_test("WEFT_TEST_HWLOC_DGX2 is not set (hwloc's nvidiaDGX2.xml is not in the repository)");
  log_to_file("nvlink-dgx2", "GRAPH");
  weft_topo_t *t = load_hwloc(path);
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_CPU), 2);
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_GPU), 16);
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_NVS), 12);
  cr_expect_eq(log_count("is an NVSwitch to hwloc but reads class 0x0000"), 1);
  expect_gpu_links(t, 6, 25.0);
  cr_expect_eq(count_switch_links(t), 6);
  expect_all_pairs(t, 150.0);
  expect_across_switches(t, "0000:34:00.0", "0000:b7:00.0");
  cr_expect_float_eq(ring_bw(t), 150.0, 1e-6);
  expect_round_trip(t, path);
  weft_topo_free(t);
  unlink(log_path);
}

// Matrices other than NVLinkBandwidth are left alone, each named at INFO.
Test(topo_nvlink, other_matrices_are_named_and_ignored, .timeout = 30) {
#if HWLOC_API_VERSION >= 0x00020500
  hwloc_topology_t h;
  cr_assert_eq(hwloc_topology_init(&h), 0);
  cr_assert_eq(hwloc_topology_set_synthetic(h, "pack:2 numa:1 core:2 pu:1"), 0);
  cr_assert_eq(hwloc_topology_load(h), 0);
  hwloc_obj_t numa[2] = {hwloc_get_obj_by_type(h, HWLOC_OBJ_NUMANODE, 0),
                         hwloc_get_obj_by_type(h, HWLOC_OBJ_NUMANODE, 1)};
  const char *names[] = {"WeftTestBandwidth", "XGMIBandwidth"};
  for (int k = 0; k < 2; k++) {
    hwloc_uint64_t values[4] = {100000, 20000, 20000, 100000};
    hwloc_distances_add_handle_t add = hwloc_distances_add_create(
        h, names[k], HWLOC_DISTANCES_KIND_FROM_USER | HWLOC_DISTANCES_KIND_MEANS_BANDWIDTH, 0);
    cr_assert_not_null(add);
    cr_assert_eq(hwloc_distances_add_values(h, add, 2, numa, values, 0), 0);
    cr_assert_eq(hwloc_distances_add_commit(h, add, 0), 0);
  }
  char path[] = "/tmp/weft-nvlink-other-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  cr_assert_eq(hwloc_topology_export_xml(h, path, 0), 0);
  hwloc_topology_destroy(h);
  log_to_file("nvlink-other", "GRAPH");
  weft_topo_t *t = load_hwloc(path);
  cr_expect_eq(log_count("hwloc distance matrix WeftTestBandwidth (2 objects) ignored: not a matrix weft reads"), 1);
  cr_expect_eq(log_count("hwloc distance matrix XGMIBandwidth (2 objects) ignored: AMD GPUs"), 1);
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_CPU), 2);
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_GPU), 0);
  for (int l = 0; l < t->nlinks; l++) cr_expect_neq(t->links[l].kind, WEFT_LINK_NVL, "no NVLink from other matrices");
  weft_topo_free(t);
  unlink(path);
  unlink(log_path);
#else
  cr_skip_test("hwloc %x has no API to add a distance matrix (2.5 does)", HWLOC_API_VERSION);
#endif
}

// NCCL's own XML of such a machine names the switches only as NVLink
// targets (not PCI devices): the two groups are joined the same way. Four
// V100 (NCCL's 20 GB/s per link), two on switches fe:00/fe:01, two on
// fe:10/fe:11: the joins fe:00-fe:10 and fe:01-fe:11 carry each switch's 2
// GPU links (40 GB/s), every pair is NVL at 2 x 20 = 40 GB/s, and so is the ring.
Test(topo_nvlink, nccl_xml_switch_groups_joined, .timeout = 30) {
  static const char head[] = "<system version=\"1\"><cpu numaid=\"0\" affinity=\"0000000f\" arch=\"x86_64\" "
                             "vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"85\">";
  char xml[4096];
  size_t off = (size_t)snprintf(xml, sizeof(xml), "%s", head);
  for (int g = 0; g < 4; g++)
    off += (size_t)snprintf(xml + off, sizeof(xml) - off,
                            "<pci busid=\"0000:%02x:00.0\" class=\"0x030200\" vendor=\"0x10de\" device=\"0x1db8\" "
                            "link_speed=\"8.0 GT/s PCIe\" link_width=\"16\"><gpu dev=\"%d\" sm=\"70\" rank=\"%d\" gdr=\"1\">"
                            "<nvlink target=\"ffff:fe:%d0.0\" count=\"1\" tclass=\"0x068000\"/>"
                            "<nvlink target=\"ffff:fe:%d1.0\" count=\"1\" tclass=\"0x068000\"/></gpu></pci>",
                            0x10 + g, g, g, g / 2, g / 2);
  snprintf(xml + off, sizeof(xml) - off, "</cpu></system>");
  char err[512] = "";
  weft_topo_t *t = weft_topo_load_xml_mem(xml, strlen(xml), "four-v100", err, sizeof(err));
  cr_assert_not_null(t, "%s", err);
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_NVS), 4);
  cr_expect_eq(count_switch_links(t), 2);
  for (int l = 0; l < t->nlinks; l++) {
    const weft_topo_link_t *k = &t->links[l];
    if (k->kind != WEFT_LINK_NVL || t->nodes[k->a].kind != WEFT_TOPO_NVS || t->nodes[k->b].kind != WEFT_TOPO_NVS)
      continue;
    cr_expect_eq(k->count, 2);
    cr_expect_float_eq(k->bw, 40.0, 1e-6);
    cr_expect_eq(t->nodes[k->a].busid[9], t->nodes[k->b].busid[9], "%s joined to %s", t->nodes[k->a].busid,
                 t->nodes[k->b].busid); // fe:x0 with fe:y0, fe:x1 with fe:y1
  }
  for (int a = 0; a < 4; a++)
    for (int b = 0; b < 4; b++) {
      if (a == b) continue;
      char ga[16], gb[16];
      snprintf(ga, sizeof(ga), "0000:%02x:00.0", 0x10 + a);
      snprintf(gb, sizeof(gb), "0000:%02x:00.0", 0x10 + b);
      weft_topo_path_t p;
      cr_assert_eq(weft_topo_path(t, weft_topo_find_busid(t, ga), weft_topo_find_busid(t, gb), &p), 0);
      cr_expect_eq(p.cls, WEFT_PATH_NVL, "%s -> %s", ga, gb);
      cr_expect_float_eq(p.bw, 40.0, 1e-6, "%s -> %s: %.3f", ga, gb, p.bw);
    }
  cr_expect_float_eq(ring_bw(t), 40.0, 1e-6);
  expect_round_trip(t, "four-v100");
  weft_topo_free(t);
}
