/*
 * test_topo_nic.c — which network device each rank uses
 * (weft_topo_nic_pick, topology/topo_nic.c) on the test topologies: each
 * GPU's own NIC on DGX H100 and A100, NICs named only by PCI bus id
 * (Azure NDv4), interfaces named in an hwloc file, a CPU-only host,
 * NUMA nodes with one or several NICs each (rails), narrowed device
 * lists, devices the topology does not know, and bad arguments.
 *
 * Files: tests/topologies/ and the real machines' files beside the
 * repository (../shared/topologies, or WEFT_SHARED_TOPOLOGIES; skipped
 * where absent). Tests run from the repository root.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "topo.h"

#define DIR "tests/topologies/"

static const char *shared_file(const char *name, char *buf, size_t len) {
  const char *dir = getenv("WEFT_SHARED_TOPOLOGIES");
  snprintf(buf, len, "%s/%s", dir ? dir : "../shared/topologies", name);
  if (access(buf, R_OK) != 0) cr_skip_test("%s is not here (real machines' files are not in the repository)", buf);
  return buf;
}

static weft_topo_t *load(const char *path) {
  char err[512] = "";
  weft_topo_t *t = weft_topo_load_xml(path, err, sizeof(err));
  cr_assert_not_null(t, "%s: %s", path, err);
  return t;
}

static weft_topo_t *load_text(const char *xml) {
  char err[512] = "";
  weft_topo_t *t = weft_topo_load_xml_mem(xml, strlen(xml), "inline", err, sizeof(err));
  cr_assert_not_null(t, "%s", err);
  return t;
}

// The device local rank r of n picks; the pick must succeed.
static weft_topo_nic_pick_t pick(const weft_topo_t *t, int r, int n, const char *gpu, const weft_topo_netdev_t *d,
                                 int nd) {
  weft_topo_nic_pick_t p;
  cr_assert_eq(weft_topo_nic_pick(t, r, n, gpu, d, nd, &p), 0, "rank %d of %d: %s", r, n, p.why);
  cr_assert(p.dev >= 0 && p.dev < nd, "rank %d of %d: device %d of %d", r, n, p.dev, nd);
  return p;
}

static const char *picked(const weft_topo_t *t, int r, int n, const weft_topo_netdev_t *d, int nd) {
  return d[pick(t, r, n, NULL, d, nd).dev].name;
}

// RDMA ports as the verbs backend lists them: mlx5_0:1 .. mlx5_<n-1>:1, in
// the order given by `order` (NULL: in order).
static void ib_ports(weft_topo_netdev_t *d, char (*names)[16], int n, const int *order) {
  for (int i = 0; i < n; i++) {
    snprintf(names[i], sizeof(names[i]), "mlx5_%d", order ? order[i] : i);
    d[i] = (weft_topo_netdev_t){names[i], 1, NULL};
  }
}

// DGX H100: GPU g and NIC mlx5_g share a PCIe switch, so local rank g uses
// mlx5_g however the backend orders its devices; 16 ranks share GPUs.
Test(topo_nic, dgx_h100_gpu_to_its_nic, .timeout = 30) {
  weft_topo_t *t = load(DIR "dgx-h100.xml");
  char names[8][16];
  weft_topo_netdev_t d[8];
  int order[8] = {5, 2, 7, 0, 3, 6, 1, 4};
  ib_ports(d, names, 8, order);
  for (int r = 0; r < 16; r++) {
    weft_topo_nic_pick_t p = pick(t, r, 16, NULL, d, 8);
    char want[16];
    snprintf(want, sizeof(want), "mlx5_%d", r % 8);
    cr_expect_str_eq(d[p.dev].name, want, "local rank %d (%s)", r, p.why);
    cr_expect_geq(p.gpu, 0);
    cr_expect_geq(p.nic, 0);
    cr_expect(strstr(p.why, "nearest its GPU") != NULL, "%s", p.why);
    cr_expect_eq(p.numa, r % 8 < 4 ? 0 : 1, "local rank %d", r);
  }
  // A GPU named by bus id wins over the local rank: GPU 0000:ac:00.0 is GPU 5.
  weft_topo_nic_pick_t p = pick(t, 0, 8, "0000:AC:00.0", d, 8);
  cr_expect_str_eq(d[p.dev].name, "mlx5_5");
  weft_topo_free(t);
}

// The nearest NIC among all NICs is the one weft_topo_nearest_nics gives.
Test(topo_nic, nearest_among_all_is_nearest_nics, .timeout = 30) {
  const char *files[] = {DIR "dgx-h100.xml", DIR "dgx-a100.xml", DIR "pcie-8gpu.xml"};
  for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
    weft_topo_t *t = load(files[f]);
    int a[64], b[64];
    int n = weft_topo_nearest_nics(t, a, 64);
    cr_assert_eq(weft_topo_nearest_nics_among(t, NULL, b, 64), n);
    for (int g = 0; g < n; g++) cr_expect_eq(a[g], b[g], "%s GPU %d", files[f], g);
    weft_topo_free(t);
  }
}

// DGX A100: two GPUs and two NICs per PCIe switch; the two GPUs take one
// NIC each, so 8 ranks use 8 NICs.
Test(topo_nic, dgx_a100_spreads_gpus_of_a_switch, .timeout = 30) {
  weft_topo_t *t = load(DIR "dgx-a100.xml");
  char names[8][16];
  weft_topo_netdev_t d[8];
  ib_ports(d, names, 8, NULL);
  int used[8] = {0};
  for (int r = 0; r < 8; r++) {
    weft_topo_nic_pick_t p = pick(t, r, 8, NULL, d, 8);
    used[p.dev]++;
    cr_expect_eq(p.dev / 2, r / 2, "local rank %d uses %s, not a NIC of its switch", r, d[p.dev].name);
  }
  for (int i = 0; i < 8; i++) cr_expect_eq(used[i], 1, "mlx5_%d used by %d ranks", i, used[i]);
  weft_topo_free(t);
}

// NCCL_IB_HCA narrowed to two NICs, one per socket: each GPU takes the one
// on its own socket.
Test(topo_nic, dgx_h100_narrowed_to_two, .timeout = 30) {
  weft_topo_t *t = load(DIR "dgx-h100.xml");
  weft_topo_netdev_t d[2] = {{"mlx5_4", 1, NULL}, {"mlx5_1", 1, NULL}};
  for (int r = 0; r < 8; r++)
    cr_expect_str_eq(picked(t, r, 8, d, 2), r < 4 ? "mlx5_1" : "mlx5_4", "local rank %d", r);
  weft_topo_free(t);
}

// Ports: a device's other port is not this one; a device named by bus id
// alone (or by another function of the same adapter) is found.
Test(topo_nic, matching_by_port_and_bus_id, .timeout = 30) {
  weft_topo_t *t = load(DIR "dgx-h100.xml");
  int nic0 = weft_topo_netdev_match(t, &(weft_topo_netdev_t){"mlx5_0", 0, NULL});
  cr_assert_geq(nic0, 0);
  cr_expect_eq(weft_topo_netdev_match(t, &(weft_topo_netdev_t){"mlx5_0", 1, NULL}), nic0);
  cr_expect_eq(weft_topo_netdev_match(t, &(weft_topo_netdev_t){"mlx5_0", 2, NULL}), -1);
  cr_expect_eq(weft_topo_netdev_match(t, &(weft_topo_netdev_t){"ib7", 0, "0000:1a:00.0"}), nic0);
  cr_expect_eq(weft_topo_netdev_match(t, &(weft_topo_netdev_t){"ib7", 0, "0000:1A:00.1"}), nic0);
  cr_expect_eq(weft_topo_netdev_match(t, &(weft_topo_netdev_t){"ib7", 0, "0000:19:00.0"}), -1, "that is a GPU");
  cr_expect_eq(weft_topo_netdev_match(t, &(weft_topo_netdev_t){"eth0", 0, ""}), -1);
  weft_topo_free(t);
}

// Devices the topology does not know keep the old choice, device 0; known
// ones are preferred to unknown ones; one device is always device 0.
Test(topo_nic, unknown_devices_and_one_device, .timeout = 30) {
  weft_topo_t *t = load(DIR "dgx-h100.xml");
  weft_topo_netdev_t unknown[2] = {{"lo", 0, NULL}, {"docker0", 0, NULL}};
  weft_topo_nic_pick_t p = pick(t, 3, 8, NULL, unknown, 2);
  cr_expect_eq(p.dev, 0);
  cr_expect_eq(p.nic, -1);
  cr_expect(strstr(p.why, "no device is in the topology") != NULL, "%s", p.why);

  weft_topo_netdev_t mixed[3] = {{"eth9", 0, NULL}, {"lo", 0, NULL}, {"mlx5_6", 1, NULL}};
  for (int r = 0; r < 8; r++) cr_expect_eq(pick(t, r, 8, NULL, mixed, 3).dev, 2, "local rank %d", r);

  weft_topo_netdev_t one[1] = {{"mlx5_6", 1, NULL}};
  p = pick(t, 0, 8, NULL, one, 1);
  cr_expect_eq(p.dev, 0);
  cr_expect_str_eq(p.why, "the only device");

  p = pick(NULL, 1, 2, NULL, mixed, 3);  // no topology
  cr_expect_eq(p.dev, 0);
  weft_topo_free(t);
}

// Azure NDv4: NICs known only by PCI bus id; each NUMA node's two GPUs take
// its two NICs, one each (as weft_topo_nearest_nics pairs them).
Test(topo_nic, azure_ndv4_by_bus_id, .timeout = 30) {
  char path[512];
  weft_topo_t *t = load(shared_file("azure-ndv4-a100.xml", path, sizeof(path)));
  const char *nics[8] = {"0101:00:00.0", "0102:00:00.0", "0103:00:00.0", "0104:00:00.0",
                         "0105:00:00.0", "0106:00:00.0", "0107:00:00.0", "0108:00:00.0"};
  weft_topo_netdev_t d[8];
  for (int i = 0; i < 8; i++) d[i] = (weft_topo_netdev_t){"mlx5_ib", 1, nics[i]};
  const struct {
    const char *gpu, *nic;
  } want[] = {{"0003:00:00.0", "0103:00:00.0"}, {"0004:00:00.0", "0104:00:00.0"}, {"000c:00:00.0", "0106:00:00.0"}};
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
    weft_topo_nic_pick_t p = pick(t, 0, 8, want[i].gpu, d, 8);
    cr_expect_str_eq(d[p.dev].busid, want[i].nic, "GPU %s (%s)", want[i].gpu, p.why);
  }
  int used[8] = {0};
  for (int r = 0; r < 8; r++) used[pick(t, r, 8, NULL, d, 8).dev]++;
  for (int i = 0; i < 8; i++) cr_expect_eq(used[i], 1, "NIC %s used by %d ranks", nics[i], used[i]);
  weft_topo_free(t);
}

// An hwloc file whose NICs are the interfaces eth0 and eth1 (socket
// devices) and one RDMA device: a GPU with the RDMA device beside it takes
// it; the two GPUs that see the interfaces at equal distance take one each.
Test(topo_nic, hwloc_interfaces_by_name, .timeout = 30) {
  char path[512], err[512] = "";
  weft_topo_t *t = weft_topo_load_hwloc(shared_file("hwloc-2socket-pci.xml", path, sizeof(path)), err, sizeof(err));
  cr_assert_not_null(t, "%s", err);
  weft_topo_netdev_t socks[2] = {{"eth0", 0, NULL}, {"eth1", 0, NULL}};
  int a = pick(t, 0, 3, NULL, socks, 2).dev, b = pick(t, 1, 3, NULL, socks, 2).dev;
  cr_expect_neq(a, b, "GPUs 0 and 1 both use %s", socks[a].name);
  weft_topo_netdev_t all[3] = {{"eth0", 0, NULL}, {"eth1", 0, NULL}, {"mlx5_0", 1, NULL}};
  cr_expect_str_eq(picked(t, 2, 3, all, 3), "mlx5_0");
  weft_topo_free(t);
}

// A CPU-only host with its one NIC on socket 0: every rank uses it, not the
// interface the topology does not know.
Test(topo_nic, cpu_2socket_one_nic, .timeout = 30) {
  weft_topo_t *t = load(DIR "cpu-2socket.xml");
  weft_topo_netdev_t d[2] = {{"eth0", 0, NULL}, {"mlx5_0", 1, NULL}};
  for (int n = 1; n <= 4; n++)
    for (int r = 0; r < n; r++) cr_expect_str_eq(picked(t, r, n, d, 2), "mlx5_0", "local rank %d of %d", r, n);
  weft_topo_free(t);
}

// Two NUMA nodes with one virtual NIC each (what the multi-host test
// writes): a rank on node k uses node k's NIC, whatever the device order.
static const char *two_nodes_one_nic_each =
    "<system version=\"1\">"
    " <cpu numaid=\"0\" affinity=\"0000000f\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"85\">"
    "  <nic><net name=\"wv0\" dev=\"0\" speed=\"10000\" port=\"0\"/></nic>"
    " </cpu>"
    " <cpu numaid=\"1\" affinity=\"000000f0\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"85\">"
    "  <nic><net name=\"wv1\" dev=\"1\" speed=\"10000\" port=\"0\"/></nic>"
    " </cpu>"
    "</system>";

Test(topo_nic, numa_nodes_one_nic_each, .timeout = 30) {
  weft_topo_t *t = load_text(two_nodes_one_nic_each);
  weft_topo_netdev_t d[3] = {{"lo", 0, NULL}, {"wv1", 0, NULL}, {"wv0", 0, NULL}};
  weft_topo_nic_pick_t p = pick(t, 0, 2, NULL, d, 3);
  cr_expect_str_eq(d[p.dev].name, "wv0");
  cr_expect_eq(p.numa, 0);
  cr_expect_str_eq(p.why, "nearest its NUMA node 0");
  p = pick(t, 1, 2, NULL, d, 3);
  cr_expect_str_eq(d[p.dev].name, "wv1");
  cr_expect_eq(p.numa, 1);
  cr_expect_str_eq(p.why, "nearest its NUMA node 1");
  // Four ranks: two per node.
  const char *want4[4] = {"wv0", "wv0", "wv1", "wv1"};
  for (int r = 0; r < 4; r++) cr_expect_str_eq(picked(t, r, 4, d, 3), want4[r], "local rank %d of 4", r);
  // One rank spans both nodes: both NICs are as near; it takes the first in
  // the topology's order, whatever the backend's order.
  cr_expect_str_eq(picked(t, 0, 1, d, 3), "wv0");
  // NCCL_SOCKET_IFNAME narrowed to wv1: everyone uses it.
  weft_topo_netdev_t narrow[2] = {{"lo", 0, NULL}, {"wv1", 0, NULL}};
  for (int r = 0; r < 2; r++) cr_expect_str_eq(picked(t, r, 2, narrow, 2), "wv1", "local rank %d", r);
  weft_topo_free(t);
}

// Two NICs on each of two nodes: the ranks of a node take them in turn
// (rails), and a node without NICs borrows the other node's in turn too.
static const char *two_nodes_two_nics_each =
    "<system version=\"1\">"
    " <cpu numaid=\"0\" affinity=\"0000000f\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"85\">"
    "  <nic><net name=\"ra0\" dev=\"0\" speed=\"10000\" port=\"0\"/></nic>"
    "  <nic><net name=\"ra1\" dev=\"1\" speed=\"10000\" port=\"0\"/></nic>"
    " </cpu>"
    " <cpu numaid=\"1\" affinity=\"000000f0\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"85\">"
    "  <nic><net name=\"rb0\" dev=\"2\" speed=\"10000\" port=\"0\"/></nic>"
    "  <nic><net name=\"rb1\" dev=\"3\" speed=\"10000\" port=\"0\"/></nic>"
    " </cpu>"
    "</system>";

Test(topo_nic, rails_per_numa_node, .timeout = 30) {
  weft_topo_t *t = load_text(two_nodes_two_nics_each);
  weft_topo_netdev_t d[4] = {{"rb1", 0, NULL}, {"ra0", 0, NULL}, {"rb0", 0, NULL}, {"ra1", 0, NULL}};
  const char *want4[4] = {"ra0", "ra1", "rb0", "rb1"};
  for (int r = 0; r < 4; r++) {
    weft_topo_nic_pick_t p = pick(t, r, 4, NULL, d, 4);
    cr_expect_str_eq(d[p.dev].name, want4[r], "local rank %d of 4 (%s)", r, p.why);
    cr_expect_eq(p.rails, 2);
    cr_expect_eq(p.rail, r % 2);
  }
  const char *want8[8] = {"ra0", "ra1", "ra0", "ra1", "rb0", "rb1", "rb0", "rb1"};
  for (int r = 0; r < 8; r++) cr_expect_str_eq(picked(t, r, 8, d, 4), want8[r], "local rank %d of 8", r);
  // Only node 0's NICs offered: rank 1 (node 1) is as far from both, as is
  // rank 0 near; each takes its turn.
  weft_topo_netdev_t a[2] = {{"ra0", 0, NULL}, {"ra1", 0, NULL}};
  cr_expect_str_eq(picked(t, 0, 2, a, 2), "ra0");
  cr_expect_str_eq(picked(t, 1, 2, a, 2), "ra1");
  weft_topo_free(t);
}

Test(topo_nic, narrowed_node_shares_its_one_nic, .timeout = 30) {
  weft_topo_t *t = load_text(two_nodes_two_nics_each);
  weft_topo_netdev_t d[3] = {{"ra0", 0, NULL}, {"ra1", 0, NULL}, {"rb1", 0, NULL}};
  // Node 1 offers only rb1: its two ranks both use it; node 0's take turns.
  const char *want[4] = {"ra0", "ra1", "rb1", "rb1"};
  for (int r = 0; r < 4; r++) cr_expect_str_eq(picked(t, r, 4, d, 3), want[r], "local rank %d of 4", r);
  weft_topo_free(t);
}

// Without CPU affinity nothing says where a rank runs: ranks take the
// known devices in turn.
Test(topo_nic, no_affinity_spreads, .timeout = 30) {
  weft_topo_t *t = load_text("<system version=\"1\"><cpu numaid=\"0\">"
                             "<nic><net name=\"n0\" port=\"0\"/></nic><nic><net name=\"n1\" port=\"0\"/></nic>"
                             "</cpu></system>");
  weft_topo_netdev_t d[3] = {{"lo", 0, NULL}, {"n0", 0, NULL}, {"n1", 0, NULL}};
  for (int r = 0; r < 4; r++) {
    weft_topo_nic_pick_t p = pick(t, r, 4, NULL, d, 3);
    cr_expect_str_eq(d[p.dev].name, r % 2 ? "n1" : "n0", "local rank %d (%s)", r, p.why);
  }
  weft_topo_free(t);
}

Test(topo_nic, bad_arguments, .timeout = 10) {
  weft_topo_t *t = load(DIR "cpu-2socket.xml");
  weft_topo_netdev_t d[1] = {{"mlx5_0", 1, NULL}};
  weft_topo_nic_pick_t p;
  cr_expect_eq(weft_topo_nic_pick(t, 0, 1, NULL, d, 0, &p), -1);
  cr_expect_eq(weft_topo_nic_pick(t, 0, 1, NULL, NULL, 1, &p), -1);
  cr_expect_eq(weft_topo_nic_pick(t, 2, 2, NULL, d, 1, &p), -1);
  cr_expect(strstr(p.why, "local rank 2 of 2") != NULL, "%s", p.why);
  cr_expect_eq(weft_topo_nic_pick(t, -1, 2, NULL, d, 1, &p), -1);
  cr_expect_eq(weft_topo_nic_pick(t, 0, 1, NULL, d, 1, NULL), -1);
  cr_expect_eq(weft_topo_netdev_match(NULL, d), -1);
  weft_topo_free(t);
}
