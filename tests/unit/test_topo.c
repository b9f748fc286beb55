/*
 * test_topo.c — NCCL topology XML files: what each machine contains, each
 * GPU's nearest NIC and path class, the ring bottleneck the specification
 * implies, round trips through a dump, and clear errors on bad input.
 *
 * Files: the XML files in tests/topologies/ (written from published
 * specifications) and the real machines' files beside the repository
 * (../shared/topologies, or WEFT_SHARED_TOPOLOGIES; not part of it, so
 * those checks are skipped where the files are absent). Tests run from the
 * repository root.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "topo.h"

#define DIR "tests/topologies/"

// A real machine's file from beside the repository, or NULL (skip_if_absent: skip the test).
static const char *shared_file(const char *name, char *buf, size_t len, int skip_if_absent) {
  const char *dir = getenv("WEFT_SHARED_TOPOLOGIES");
  snprintf(buf, len, "%s/%s", dir ? dir : "../shared/topologies", name);
  if (access(buf, R_OK) == 0) return buf;
  if (skip_if_absent) cr_skip_test("%s is not here (real machines' files are not in the repository)", buf);
  return NULL;
}

static weft_topo_t *load(const char *path) {
  char err[512] = "";
  weft_topo_t *t = weft_topo_load_xml(path, err, sizeof(err));
  cr_assert_not_null(t, "%s: %s", path, err);
  return t;
}

static void expect_counts(const weft_topo_t *t, int gpus, int nics, int nvs, int numa) {
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_GPU), gpus, "GPUs");
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_NIC), nics, "NICs");
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_NVS), nvs, "NVSwitches");
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_CPU), numa, "NUMA nodes");
}

static double ring_bw(const weft_topo_t *t) {
  weft_topo_plan_t plan;
  cr_assert_eq(weft_topo_search(t, 0, &plan), 0);
  double bw = plan.ring.bottleneck;
  weft_topo_plan_free(&plan);
  return bw;
}

// The nearest NIC of the GPU at gpu_busid is nic_busid (or the port name),
// through a path of class cls.
static void expect_nic(const weft_topo_t *t, const char *gpu_busid, const char *nic_label, weft_path_class_t cls) {
  int nic[64], g = 0, gpu = weft_topo_find_busid(t, gpu_busid);
  cr_assert_geq(gpu, 0, "no GPU %s", gpu_busid);
  int n = weft_topo_nearest_nics(t, nic, 64);
  for (int i = 0; i < gpu; i++) g += t->nodes[i].kind == WEFT_TOPO_GPU;
  cr_assert_lt(g, n);
  cr_assert_geq(nic[g], 0, "GPU %s has no NIC", gpu_busid);
  char label[64];
  weft_topo_label(t, nic[g], label, sizeof(label));
  cr_expect_str_eq(label, nic_label, "GPU %s", gpu_busid);
  weft_topo_path_t p;
  cr_assert_eq(weft_topo_path(t, gpu, nic[g], &p), 0);
  cr_expect_eq(p.cls, cls, "GPU %s -> NIC %s: %s", gpu_busid, label, weft_path_class_name(p.cls));
}

static void expect_round_trip(const char *path) {
  weft_topo_t *a = load(path);
  char out[] = "/tmp/weft-topo-XXXXXX";
  int fd = mkstemp(out);
  cr_assert_geq(fd, 0);
  close(fd);
  char err[512] = "";
  cr_assert_eq(weft_topo_dump_xml(a, out, err, sizeof(err)), 0, "%s", err);
  weft_topo_t *b = load(out);
  char *sa = weft_topo_signature(a), *sb = weft_topo_signature(b);
  cr_expect_str_eq(sa, sb, "%s: dump and reload differ", path);
  // A second dump is byte-identical to the first.
  char out2[] = "/tmp/weft-topo-XXXXXX";
  fd = mkstemp(out2);
  close(fd);
  cr_assert_eq(weft_topo_dump_xml(b, out2, err, sizeof(err)), 0, "%s", err);
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "cmp -s %s %s", out, out2);
  cr_expect_eq(system(cmd), 0, "second dump differs");
  free(sa);
  free(sb);
  unlink(out);
  unlink(out2);
  weft_topo_free(a);
  weft_topo_free(b);
}

// DGX H100: every GPU reaches every other through the 4 NVSwitches over all
// 18 of its NVLink4 links (5 + 4 + 4 + 5), at NCCL's 20.6 GB/s per link:
// 18 x 20.6 = 370.8 GB/s per direction; a ring uses each GPU's links once
// per direction.
Test(topo_xml, dgx_h100, .timeout = 30) {
  weft_topo_t *t = load(DIR "dgx-h100.xml");
  expect_counts(t, 8, 8, 4, 2);
  expect_nic(t, "0000:19:00.0", "0000:1a:00.0", WEFT_PATH_PIX);
  expect_nic(t, "0000:dc:00.0", "0000:dd:00.0", WEFT_PATH_PIX);
  weft_topo_path_t p;
  cr_assert_eq(weft_topo_path(t, weft_topo_find_busid(t, "0000:19:00.0"), weft_topo_find_busid(t, "0000:dc:00.0"), &p), 0);
  cr_expect_eq(p.cls, WEFT_PATH_NVL);
  cr_expect_float_eq(p.bw, 370.8, 1e-6);
  cr_expect_float_eq(ring_bw(t), 18 * 20.6, 1e-6);
  weft_topo_free(t);
}

// DGX A100: 12 NVLink3 links per GPU, 2 to each of 6 NVSwitches, 20 GB/s
// each: 6 x min(2 x 20, 2 x 20) = 240 GB/s between any two GPUs and per ring.
Test(topo_xml, dgx_a100, .timeout = 30) {
  weft_topo_t *t = load(DIR "dgx-a100.xml");
  expect_counts(t, 8, 8, 6, 2);
  // Two GPUs and two NICs per PCIe switch: one NIC each.
  expect_nic(t, "0000:07:00.0", "0000:0b:00.0", WEFT_PATH_PIX);
  expect_nic(t, "0000:0f:00.0", "0000:0c:00.0", WEFT_PATH_PIX);
  cr_expect_float_eq(ring_bw(t), 240.0, 1e-6);
  weft_topo_free(t);
}

// PCIe-only: GPUs behind Gen5 x16 switches (48 GB/s) on 2 Sapphire Rapids
// sockets (UPI 22 GB/s). The best ring crosses the socket link once per
// direction, so 22 GB/s; a ring crossing it twice would get 11.
Test(topo_xml, pcie_8gpu, .timeout = 30) {
  weft_topo_t *t = load(DIR "pcie-8gpu.xml");
  expect_counts(t, 8, 2, 0, 2);
  expect_nic(t, "0000:12:00.0", "0000:14:00.0", WEFT_PATH_PIX);
  expect_nic(t, "0000:52:00.0", "0000:14:00.0", WEFT_PATH_PHB);
  expect_nic(t, "0000:d3:00.0", "0000:94:00.0", WEFT_PATH_PHB);
  int g[4] = {weft_topo_find_busid(t, "0000:12:00.0"), weft_topo_find_busid(t, "0000:13:00.0"),
              weft_topo_find_busid(t, "0000:52:00.0"), weft_topo_find_busid(t, "0000:92:00.0")};
  weft_topo_path_t p;
  cr_assert_eq(weft_topo_path(t, g[0], g[1], &p), 0);
  cr_expect_eq(p.cls, WEFT_PATH_PIX);
  cr_assert_eq(weft_topo_path(t, g[0], g[2], &p), 0);
  cr_expect_eq(p.cls, WEFT_PATH_PHB);
  cr_assert_eq(weft_topo_path(t, g[0], g[3], &p), 0);
  cr_expect_eq(p.cls, WEFT_PATH_SYS);
  cr_expect_float_eq(p.bw, 22.0, 1e-6);
  cr_expect_float_eq(ring_bw(t), 22.0, 1e-6);
  // Zig-zagging between the sockets shares the socket link among hops.
  int zigzag[4] = {g[0], g[3], g[1], weft_topo_find_busid(t, "0000:93:00.0")};
  cr_expect_float_eq(weft_topo_order_bw(t, zigzag, 4, 1), 11.0, 1e-6);
  weft_topo_free(t);
}

// CPU-only, 2 Skylake sockets (UPI 10 GB/s), cores numbered alternately.
// Ranks on cores in order alternate sockets; the ring sorted by NUMA node
// crosses the socket link once per direction: 10 GB/s. In rank order every
// hop would cross it, 20 per direction: 0.5 GB/s.
Test(topo_xml, cpu_2socket, .timeout = 30) {
  weft_topo_t *t = load(DIR "cpu-2socket.xml");
  expect_counts(t, 0, 1, 0, 2);
  weft_topo_plan_t plan;
  cr_assert_eq(weft_topo_search(t, 0, &plan), 0);
  cr_expect_eq(plan.ring.n, 40);
  cr_expect(plan.ring.is_ranks);
  cr_expect_float_eq(plan.ring.bottleneck, 10.0, 1e-6);
  for (int i = 0; i < 20; i++) cr_expect_eq(plan.rank_numa[plan.ring.members[i]], 0);
  weft_topo_plan_free(&plan);
  int cpus[40], node1 = -1; // the CPU node of each rank, in rank order
  for (int i = 1; i < t->nnodes; i++)
    if (t->nodes[i].kind == WEFT_TOPO_CPU) node1 = i;
  for (int r = 0; r < 40; r++) cpus[r] = r % 2 ? node1 : 0;
  cr_expect_float_eq(weft_topo_order_bw(t, cpus, 40, 1), 0.5, 1e-6);
  weft_topo_free(t);
}

// Azure NDv4 (PCI-only file): 4 NUMA nodes of AMD Rome (16 GB/s between
// them), each with a bridge holding 2 GPUs and 2 InfiniBand NICs at Gen4 x16
// (24 GB/s). No NVLink is described, so the ring runs over PCIe and the
// NUMA links, each crossed once per direction: 16 GB/s.
Test(topo_xml, azure_ndv4, .timeout = 30) {
  char path[512];
  weft_topo_t *t = load(shared_file("azure-ndv4-a100.xml", path, sizeof(path), 1));
  expect_counts(t, 8, 8, 0, 4);
  expect_nic(t, "0003:00:00.0", "0103:00:00.0", WEFT_PATH_PIX);
  expect_nic(t, "0004:00:00.0", "0104:00:00.0", WEFT_PATH_PIX);
  expect_nic(t, "000c:00:00.0", "0106:00:00.0", WEFT_PATH_PIX);
  // NICs without ports get one at the HDR rate of their Gen4 slot.
  int port = -1;
  for (int i = 0; i < t->nnodes; i++)
    if (t->nodes[i].kind == WEFT_TOPO_NET) port = i;
  cr_assert_geq(port, 0);
  cr_expect_eq(t->nodes[port].net_mbps, 200000);
  cr_expect_float_eq(ring_bw(t), 16.0, 1e-6);
  weft_topo_free(t);
}

// Azure NCv4: 4 GPUs each on its own NUMA node, PCIe link unknown (NCCL's
// Gen3 x16 default, 12 GB/s), a GPU's NVLink to itself (ignored), one
// virtual NIC on NUMA 0. Ring: min(12 PCIe, 16 AMD) = 12 GB/s.
Test(topo_xml, azure_ncv4, .timeout = 30) {
  char path[512];
  weft_topo_t *t = load(shared_file("azure-ncv4-a100.xml", path, sizeof(path), 1));
  expect_counts(t, 4, 1, 0, 4);
  cr_expect_eq(t->nlinks, 4 + 2 + 6, "4 GPU links, NIC and port, 6 between NUMA nodes: no NVLink");
  expect_nic(t, "0001:00:00.0", "eth0", WEFT_PATH_PHB);
  expect_nic(t, "0003:00:00.0", "eth0", WEFT_PATH_SYS);
  cr_expect_float_eq(ring_bw(t), 12.0, 1e-6);
  weft_topo_free(t);
}

Test(topo_xml, round_trips, .timeout = 30) {
  char a[512], b[512];
  const char *files[] = {DIR "dgx-h100.xml", DIR "dgx-a100.xml", DIR "pcie-8gpu.xml", DIR "cpu-2socket.xml",
                         shared_file("azure-ndv4-a100.xml", a, sizeof(a), 0),
                         shared_file("azure-ncv4-a100.xml", b, sizeof(b), 0)};
  for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
    if (files[i] != NULL) expect_round_trip(files[i]);
}

static void expect_error(const char *text, const char *needle) {
  char err[512] = "";
  weft_topo_t *t = weft_topo_load_xml_mem(text, strlen(text), "test.xml", err, sizeof(err));
  cr_expect_null(t, "loaded: %s", text);
  weft_topo_free(t);
  cr_expect(strstr(err, needle) != NULL, "error '%s' lacks '%s'", err, needle);
}

Test(topo_xml, bad_input_gives_clear_errors, .timeout = 30) {
  char err[512] = "";
  cr_expect_null(weft_topo_load_xml("tests/topologies/no-such-file.xml", err, sizeof(err)));
  cr_expect(strstr(err, "No such file") != NULL, "%s", err);
  expect_error("<system><cpu numaid=\"0\"><pci busid=", "not a readable XML file");
  expect_error("<topology/>", "expected NCCL's <system>");
  expect_error("<system version=\"1\"/>", "no CPU");
  expect_error("", "not a readable XML file");
  // Odd but well-formed input loads: unknown elements, bad numbers, a GPU
  // linked to a GPU that is not described, deep nesting.
  const char *odd = "<system><cpu numaid=\"x\" affinity=\"zz\"><foo/><pci busid=\"bad\" class=\"0x030200\" "
                    "link_width=\"-3\"><gpu><nvlink target=\"0000:99:00.0\" count=\"2\" tclass=\"0x030200\"/>"
                    "</gpu></pci><pci><pci><pci class=\"0x020000\"/></pci></pci></cpu></system>";
  weft_topo_t *t = weft_topo_load_xml_mem(odd, strlen(odd), "odd.xml", err, sizeof(err));
  cr_assert_not_null(t, "%s", err);
  expect_counts(t, 1, 1, 0, 1);
  weft_topo_plan_t plan;
  cr_expect_eq(weft_topo_search(t, 0, &plan), 0);
  weft_topo_plan_free(&plan);
  weft_topo_free(t);
}

Test(topo_xml, bandwidth_conventions, .timeout = 10) {
  cr_expect_float_eq(weft_topo_pci_bw("8.0 GT/s PCIe", 16), 12.0, 1e-9);
  cr_expect_float_eq(weft_topo_pci_bw("16 GT/s", 16), 24.0, 1e-9);
  cr_expect_float_eq(weft_topo_pci_bw("32.0 GT/s PCIe", 8), 24.0, 1e-9);
  cr_expect_float_eq(weft_topo_pci_bw("", 0), 12.0, 1e-9);
  cr_expect_float_eq(weft_topo_nvlink_bw(90), 20.6, 1e-9);
  cr_expect_float_eq(weft_topo_nvlink_bw(80), 20.0, 1e-9);
  cr_expect_float_eq(weft_topo_nvlink_bw(60), 18.0, 1e-9);
  cr_expect_float_eq(weft_topo_nvlink_bw(100), 40.1, 1e-9);
}
