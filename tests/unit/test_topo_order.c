/*
 * test_topo_order.c — where ranks sit (weft_topo_place) and the ring a
 * host's ranks form (weft_topo_rank_order), on the test topologies: the
 * function a communicator's init runs (src/core/comm_order.c), checked
 * without processes.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "topo.h"

#define DIR "tests/topologies/"

static weft_topo_t *load(const char *path) {
  char err[512] = "";
  weft_topo_t *t = weft_topo_load_xml(path, err, sizeof(err));
  cr_assert_not_null(t, "%s: %s", path, err);
  return t;
}

static int gpu(const weft_topo_t *t, const char *busid) {
  int g = weft_topo_place(t, busid, NULL, 0);
  cr_assert_geq(g, 0, "no GPU %s", busid);
  return g;
}

// How often consecutive members (closed ring) differ in group[].
static int changes(const int *order, int n, const int *group) {
  int k = 0;
  for (int p = 0; p < n; p++) k += group[order[p]] != group[order[(p + 1) % n]];
  return k;
}

Test(topo_order, place_by_gpu_and_by_cpus, .timeout = 10) {
  weft_topo_t *t = load(DIR "cpu-2socket.xml");
  int even[] = {0, 2, 4}, odd[] = {1, 3}, both[] = {0, 1}, absent[] = {4000};
  int s0 = weft_topo_place(t, NULL, even, 3), s1 = weft_topo_place(t, "", odd, 2);
  cr_assert_geq(s0, 0);
  cr_assert_geq(s1, 0);
  cr_expect_neq(s0, s1);
  cr_expect_eq(t->nodes[s0].kind, WEFT_TOPO_CPU);
  cr_expect_eq(t->nodes[s0].numa, 0);
  cr_expect_eq(t->nodes[s1].numa, 1);
  cr_expect_eq(weft_topo_place(t, NULL, both, 2), -1, "CPUs of two sockets: no one place");
  cr_expect_eq(weft_topo_place(t, NULL, absent, 1), -1);
  cr_expect_eq(weft_topo_place(t, NULL, NULL, 0), -1);
  weft_topo_free(t);
  t = load(DIR "pcie-8gpu.xml");
  int g = weft_topo_place(t, "0000:92:00.0", even, 3);
  cr_assert_geq(g, 0);
  cr_expect_eq(t->nodes[g].kind, WEFT_TOPO_GPU, "a GPU rank sits at its GPU, whatever its CPUs");
  cr_expect_eq(weft_topo_place(t, "0000:92:0.0", NULL, 0), g, "bus ids are normalised");
  cr_expect_eq(weft_topo_place(t, "0000:77:00.0", NULL, 0), -1, "a GPU not in the file");
  weft_topo_free(t);
}

// Ranks seated on the PCIe server's GPUs switch by switch in turn: the ring
// puts each switch's pair side by side and crosses sockets once each way.
Test(topo_order, pcie_server_pairs_switches, .timeout = 30) {
  weft_topo_t *t = load(DIR "pcie-8gpu.xml");
  const char *seat[8] = {"0000:12:00.0", "0000:52:00.0", "0000:92:00.0", "0000:d2:00.0",
                         "0000:13:00.0", "0000:53:00.0", "0000:93:00.0", "0000:d3:00.0"};
  int sw[8] = {0, 1, 2, 3, 0, 1, 2, 3}, sock[8] = {0, 0, 1, 1, 0, 0, 1, 1}, place[8], order[8];
  for (int r = 0; r < 8; r++) place[r] = gpu(t, seat[r]);
  double bw = 0;
  cr_assert_eq(weft_topo_rank_order(t, place, 8, order, &bw), 1, "reordered");
  cr_expect_eq(changes(order, 8, sw), 4, "each switch's GPUs side by side");
  cr_expect_eq(changes(order, 8, sock), 2, "one socket crossing each way");
  int identity[8] = {0, 1, 2, 3, 4, 5, 6, 7}, nodes[8];
  for (int p = 0; p < 8; p++) nodes[p] = place[order[p]];
  double rank_order_bw = weft_topo_order_bw(t, place, 8, 1);
  cr_expect_float_eq(bw, weft_topo_order_bw(t, nodes, 8, 1), 1e-9);
  cr_expect_gt(bw, rank_order_bw, "the ring is better than rank order (%.1f vs %.1f GB/s)", bw, rank_order_bw);
  // It starts at a rank whose GPU shares a switch with a NIC (switch A or C).
  cr_expect(sw[order[0]] == 0 || sw[order[0]] == 2, "starts at rank %d on switch %d", order[0], sw[order[0]]);
  // Seated in bus order, rank order is already the best ring: kept.
  const char *bus_order[8] = {"0000:12:00.0", "0000:13:00.0", "0000:52:00.0", "0000:53:00.0",
                              "0000:92:00.0", "0000:93:00.0", "0000:d2:00.0", "0000:d3:00.0"};
  for (int r = 0; r < 8; r++) place[r] = gpu(t, bus_order[r]);
  cr_expect_eq(weft_topo_rank_order(t, place, 8, order, NULL), 0);
  cr_expect_arr_eq(order, identity, sizeof(order));
  weft_topo_free(t);
}

// On an NVSwitch machine every ring is as good: rank order stays, however
// the ranks are seated.
Test(topo_order, nvswitch_keeps_rank_order, .timeout = 30) {
  weft_topo_t *t = load(DIR "dgx-h100.xml");
  const char *seat[8] = {"0000:dc:00.0", "0000:19:00.0", "0000:bb:00.0", "0000:2b:00.0",
                         "0000:9b:00.0", "0000:3b:00.0", "0000:ac:00.0", "0000:5e:00.0"};
  int place[8], order[8], identity[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  for (int r = 0; r < 8; r++) place[r] = gpu(t, seat[r]);
  double bw = 0;
  cr_expect_eq(weft_topo_rank_order(t, place, 8, order, &bw), 0);
  cr_expect_arr_eq(order, identity, sizeof(order));
  cr_expect_gt(bw, 100, "an NVSwitch ring: %.1f GB/s", bw);
  weft_topo_free(t);
}

// Host-memory ranks bound alternately to two sockets: one crossing each way;
// several ranks on one node stay in rank order among themselves.
Test(topo_order, cpu_ranks_grouped_by_socket, .timeout = 30) {
  weft_topo_t *t = load(DIR "cpu-2socket.xml");
  int c0[] = {0}, c1[] = {1}, place[6], order[6], sock[6];
  for (int r = 0; r < 6; r++) {
    place[r] = weft_topo_place(t, NULL, r % 2 ? c1 : c0, 1);
    sock[r] = r % 2;
  }
  cr_assert_eq(weft_topo_rank_order(t, place, 6, order, NULL), 1);
  cr_expect_eq(changes(order, 6, sock), 2);
  for (int p = 0; p < 6; p++)
    for (int q = p + 1; q < 6; q++)
      if (sock[order[p]] == sock[order[q]] && (q == p + 1))
        cr_expect_lt(order[p], order[q], "ranks of one socket in rank order: %d before %d", order[p], order[q]);
  weft_topo_free(t);
}

// Nothing to go on: rank order.
Test(topo_order, unknown_or_alike_places_keep_rank_order, .timeout = 10) {
  weft_topo_t *t = load(DIR "cpu-2socket.xml");
  int c0[] = {0}, c1[] = {1}, order[4], identity[4] = {0, 1, 2, 3};
  int s0 = weft_topo_place(t, NULL, c0, 1), s1 = weft_topo_place(t, NULL, c1, 1);
  int unknown[4] = {s0, s1, -1, s1}, alike[4] = {s0, s0, s0, s0};
  cr_expect_eq(weft_topo_rank_order(t, unknown, 4, order, NULL), 0);
  cr_expect_arr_eq(order, identity, sizeof(order));
  cr_expect_eq(weft_topo_rank_order(t, alike, 4, order, NULL), 0);
  cr_expect_arr_eq(order, identity, sizeof(order));
  int two[2] = {s1, s0};
  cr_expect_eq(weft_topo_rank_order(t, two, 2, order, NULL), 0, "two ranks: one ring");
  weft_topo_free(t);
}
