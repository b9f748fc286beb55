/*
 * test_topo_hwloc.c — topologies from hwloc: an hwloc XML file made here
 * from a synthetic description, the real machines' hwloc XML files beside
 * the repository (../shared/topologies, or WEFT_SHARED_TOPOLOGIES; hwloc 3
 * format, read through the translation; skipped where they are absent, as
 * they are not part of the repository), detection of this machine, and the
 * environment knobs NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE / WEFT_HWLOC_XML.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hwloc.h>

#include "env.h"
#include "topo.h"

// A real machine's file from beside the repository, or the test is skipped.
static const char *shared_file(const char *name, char *buf, size_t len) {
  const char *dir = getenv("WEFT_SHARED_TOPOLOGIES");
  snprintf(buf, len, "%s/%s", dir ? dir : "../shared/topologies", name);
  if (access(buf, R_OK) != 0) cr_skip_test("%s is not here (real machines' files are not in the repository)", buf);
  return buf;
}

// An hwloc XML file of `synthetic` (hwloc's synthetic syntax) in a temp file.
static void synthetic_xml(const char *synthetic, char *path) {
  hwloc_topology_t h;
  cr_assert_eq(hwloc_topology_init(&h), 0);
  cr_assert_eq(hwloc_topology_set_synthetic(h, synthetic), 0, "%s", synthetic);
  cr_assert_eq(hwloc_topology_load(h), 0);
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  cr_assert_eq(hwloc_topology_export_xml(h, path, 0), 0);
  hwloc_topology_destroy(h);
}

static weft_topo_t *load_hwloc(const char *path) {
  char err[512] = "";
  weft_topo_t *t = weft_topo_load_hwloc(path, err, sizeof(err));
  cr_assert_not_null(t, "%s: %s", path ? path : "this machine", err);
  return t;
}

static double ring_bw(const weft_topo_t *t) {
  weft_topo_plan_t plan;
  cr_assert_eq(weft_topo_search(t, 0, &plan), 0);
  double bw = plan.ring.bottleneck;
  weft_topo_plan_free(&plan);
  return bw;
}

static void expect_round_trip(const weft_topo_t *a) {
  char out[] = "/tmp/weft-topo-XXXXXX", err[512] = "";
  int fd = mkstemp(out);
  cr_assert_geq(fd, 0);
  close(fd);
  cr_assert_eq(weft_topo_dump_xml(a, out, err, sizeof(err)), 0, "%s", err);
  weft_topo_t *b = weft_topo_load_xml(out, err, sizeof(err));
  cr_assert_not_null(b, "%s", err);
  char *sa = weft_topo_signature(a), *sb = weft_topo_signature(b);
  cr_expect_str_eq(sa, sb);
  free(sa);
  free(sb);
  weft_topo_free(b);
  unlink(out);
}

// 2 Sandy Bridge sockets (inter-socket 6 GB/s, NCCL's pre-Skylake figure),
// Tesla GPUs: one on socket 0, two on socket 1; PCIe links unknown (12 GB/s).
// The ring crosses the socket link once per direction: 6 GB/s.
Test(topo_hwloc, two_socket_pci, .timeout = 30) {
  char path[512];
  weft_topo_t *t = load_hwloc(shared_file("hwloc-2socket-pci.xml", path, sizeof(path)));
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_CPU), 2);
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_GPU), 3); // the AMD GPU and the VGA are not NVIDIA GPUs
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_NIC), 3);
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_NVS), 0);
  int nic[8];
  cr_assert_eq(weft_topo_nearest_nics(t, nic, 8), 3);
  char label[64];
  weft_topo_path_t p;
  cr_expect_str_eq(weft_topo_label(t, nic[2], label, sizeof(label)), "0000:04:00.0");
  cr_assert_eq(weft_topo_path(t, weft_topo_find_busid(t, "0000:84:00.0"), nic[2], &p), 0);
  cr_expect_eq(p.cls, WEFT_PATH_PIX);
  cr_assert_eq(weft_topo_path(t, weft_topo_find_busid(t, "0000:03:00.0"), nic[0], &p), 0);
  cr_expect_eq(p.cls, WEFT_PATH_SYS);
  cr_expect_float_eq(ring_bw(t), 6.0, 1e-6);
  expect_round_trip(t);
  weft_topo_free(t);
}

// POWER8 with 4 P100 (sm 60): GPU pairs joined by 2 NVLinks (hwloc: 40000
// MB/s = 2 x 20000) and each GPU by 2 to its CPU; each link is worth hwloc's
// 20 GB/s, more than NCCL's 18 for sm 60; sockets joined at 32 GB/s. Ring:
// 40 inside a pair, 40 -> 32 -> 40 across: 32 GB/s.
Test(topo_hwloc, power8_nvlink, .timeout = 30) {
  char path[512];
  weft_topo_t *t = load_hwloc(shared_file("hwloc-power8-gpus.xml", path, sizeof(path)));
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_CPU), 2);
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_GPU), 4);
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_NIC), 0);
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_NVS), 0);
  weft_topo_path_t p;
  cr_assert_eq(weft_topo_path(t, weft_topo_find_busid(t, "0002:01:00.0"), weft_topo_find_busid(t, "0003:01:00.0"), &p), 0);
  cr_expect_eq(p.cls, WEFT_PATH_NVL);
  cr_expect_float_eq(p.bw, 40.0, 1e-6);
  cr_assert_eq(weft_topo_path(t, weft_topo_find_busid(t, "0003:01:00.0"), weft_topo_find_busid(t, "000a:01:00.0"), &p), 0);
  cr_expect_eq(p.cls, WEFT_PATH_SYS);
  cr_expect_float_eq(p.bw, 32.0, 1e-6);
  cr_expect_float_eq(ring_bw(t), 32.0, 1e-6);
  expect_round_trip(t);
  weft_topo_free(t);
}

static int up_interfaces(void) {
  DIR *d = opendir("/sys/class/net");
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.' || strcmp(e->d_name, "lo") == 0) continue;
    char path[300], state[32] = "";
    snprintf(path, sizeof(path), "/sys/class/net/%s/operstate", e->d_name);
    FILE *f = fopen(path, "r");
    if (f && fgets(state, sizeof(state), f) && strncmp(state, "down", 4) != 0) n++;
    if (f) fclose(f);
  }
  if (d) closedir(d);
  return n;
}

Test(topo_hwloc, detects_this_machine, .timeout = 30) {
  unsetenv("HWLOC_XMLFILE");
  weft_topo_t *t = load_hwloc(NULL);
  int cpus = 0, cores = 0, buf[1];
  for (int i = 0; i < t->nnodes; i++)
    if (t->nodes[i].kind == WEFT_TOPO_CPU) cpus++, cores += weft_topo_cpu_cores(t, i, buf, 0);
  cr_expect_geq(cpus, 1);
  cr_expect_geq(cores, 1);
  if (up_interfaces() > 0) cr_expect_geq(weft_topo_count(t, WEFT_TOPO_NET), 1, "network interfaces not reported");
  weft_topo_plan_t plan;
  cr_assert_eq(weft_topo_search(t, 4, &plan), 0);
  cr_expect_eq(plan.ring.n, weft_topo_count(t, WEFT_TOPO_GPU) ? weft_topo_count(t, WEFT_TOPO_GPU) : 4);
  cr_expect_gt(plan.ring.bottleneck, 0);
  weft_topo_plan_free(&plan);
  expect_round_trip(t);
  weft_topo_free(t);
}

Test(topo_hwloc, missing_and_bad_files_give_errors, .timeout = 30) {
  char err[512] = "", bad[] = "/tmp/weft-hwloc-XXXXXX";
  cr_expect_null(weft_topo_load_hwloc("tests/topologies/no-such.xml", err, sizeof(err)));
  cr_expect(strstr(err, "No such file") != NULL, "%s", err);
  int fd = mkstemp(bad);
  cr_assert_geq(fd, 0);
  cr_assert_eq(write(fd, "<topology version=\"3.0\"><object", 32), 32);
  close(fd);
  cr_expect_null(weft_topo_load_hwloc(bad, err, sizeof(err)));
  cr_expect(strstr(err, bad) != NULL, "%s", err);
  unlink(bad);
}

Test(topo_hwloc, environment_selects_and_dumps, .timeout = 30) {
  char dump[] = "/tmp/weft-dump-XXXXXX", err[512] = "";
  int fd = mkstemp(dump);
  cr_assert_geq(fd, 0);
  close(fd);
  setenv("NCCL_TOPO_FILE", "tests/topologies/dgx-h100.xml", 1);
  setenv("NCCL_TOPO_DUMP_FILE", dump, 1);
  weft_env_reset();
  weft_topo_t *t = weft_topo_from_env(err, sizeof(err));
  cr_assert_not_null(t, "%s", err);
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_GPU), 8);
  weft_topo_t *d = weft_topo_load_xml(dump, err, sizeof(err));
  cr_assert_not_null(d, "%s", err);
  cr_expect_eq(weft_topo_count(d, WEFT_TOPO_NVS), 4);
  weft_topo_free(d);
  weft_topo_free(t);
  unsetenv("NCCL_TOPO_FILE");
  unsetenv("NCCL_TOPO_DUMP_FILE");
  char xml[] = "/tmp/weft-hwloc-XXXXXX";
  synthetic_xml("pack:2 numa:1 core:3 pu:1", xml);
  setenv("WEFT_HWLOC_XML", xml, 1);
  weft_env_reset();
  t = weft_topo_from_env(err, sizeof(err));
  cr_assert_not_null(t, "%s", err);
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_CPU), 2);
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_GPU), 0);
  weft_topo_free(t);
  unsetenv("WEFT_HWLOC_XML");
  weft_env_reset();
  unlink(dump);
  unlink(xml);
}

// hwloc's own XML of a 2-package machine (one NUMA node each, 4 cores): two
// CPU nodes, no devices; it round-trips through NCCL XML.
Test(topo_hwloc, synthetic_two_packages, .timeout = 30) {
  char xml[] = "/tmp/weft-hwloc-XXXXXX";
  synthetic_xml("pack:2 numa:1 core:4 pu:1", xml);
  weft_topo_t *t = load_hwloc(xml);
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_CPU), 2);
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_GPU), 0);
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_NIC), 0);
  expect_round_trip(t);
  weft_topo_free(t);
  unlink(xml);
}
