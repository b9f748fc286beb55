/*
 * test_algos_numa.c — the NUMA-hierarchical AllReduce (WEFT_ALGO_NUMA,
 * "numa": hier.c's schedule over (host, NUMA node) groups) and the tuner's
 * rule for it.
 *
 * The simulator proves it for n = 1..24 ranks on one host, hosts of 4 and
 * of 8 and alternating hosts, each cut into NUMA nodes every way the sweep
 * layouts cut (nodes of 1, 2, 4, 8 ranks, uneven, alternating), at counts
 * of 1, odd, several slices and several shards, slices of 1, 3 and 16, in
 * place and out of place; uneven splits are refused, not run. The shape
 * tests count what crosses between NUMA nodes (each element once per
 * direction, against about twice that for the NUMA-sorted ring), and check
 * that without NUMA groups it is hier (the ring on one host). The tuner's
 * rule is checked on stated layouts and on the 2-socket machines'
 * topology files: ranks placed by WEFT_BIND's plan, their NUMA nodes
 * read back from the graph as the communicator reads them (comm_order.c).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layout.h"
#include "sim.h"
#include "topo.h"
#include "tuner.h"

static weft_coll_args_t args(int n, int rank, size_t count, const int *numa_of, int nnuma) {
  return (weft_coll_args_t){.coll = WEFT_COLL_ALLREDUCE, .nranks = n, .rank = rank, .count = count, .slice = 64,
                            .nhosts = 1, .numa_of = nnuma ? numa_of : NULL, .nnuma = nnuma};
}

static weft_schedule_t build(weft_coll_args_t a, weft_algo_t algo) {
  weft_schedule_t s = {0};
  cr_assert_eq(weft_schedule_build(&a, algo, &s), ncclSuccess, "%s rank %d of %d", weft_algo_name(algo), a.rank,
               a.nranks);
  return s;
}

Test(algos_numa, sim_every_split, .timeout = 60) {
  static const int host_layouts[] = {0, 3, 4, 6};  // one host, hosts of 4, of 8, alternating
  char err[2048];
  int runs = 0, refused = 0, host_of[WEFT_SIM_MAX_RANKS], numa_of[WEFT_SIM_MAX_RANKS];
  for (int n = 1; n <= 24; n++)
    for (size_t hi = 0; hi < sizeof(host_layouts) / sizeof(host_layouts[0]); hi++)
      for (int si = 1; si < weft_sim_nlayouts; si++) {
        int nhosts = weft_sim_layout_fill(&weft_sim_layouts[host_layouts[hi]], n, host_of);
        int nnuma = weft_sim_numa_fill(&weft_sim_layouts[si], nhosts ? host_of : NULL, nhosts, n, numa_of);
        if (nnuma == 0) continue;  // no host split: hier, swept in test_algos.c
        weft_coll_args_t probe = args(n, 0, 1, numa_of, nnuma);
        probe.host_of = nhosts ? host_of : NULL;
        probe.nhosts = nhosts ? nhosts : 1;
        if (!weft_algo_fits(WEFT_ALGO_NUMA, &probe, NULL, 0)) {
          weft_schedule_t s = {0};
          cr_assert_eq(weft_schedule_build(&probe, WEFT_ALGO_NUMA, &s), ncclInvalidArgument);
          refused++;
          continue;
        }
        size_t slices[] = {1, 3, 16};
        for (int li = 0; li < 3; li++) {
          size_t slice = slices[li], counts[] = {1, 2 * (size_t)n + 1, 5 * slice + 3, 16 * (size_t)n + 7};
          for (int ci = 0; ci < 4; ci++)
            for (int ip = 0; ip < 2; ip++) {
              weft_sim_config_t c = {.coll = WEFT_COLL_ALLREDUCE, .algo = WEFT_ALGO_NUMA, .nranks = n,
                                     .count = counts[ci], .slice = slice,
                                     .capacity = weft_schedule_min_capacity(WEFT_ALGO_NUMA, slice), .in_place = ip,
                                     .random_runs = n <= 8 ? 3 : 1, .host_of = nhosts ? host_of : NULL,
                                     .nhosts = nhosts, .numa_of = numa_of, .nnuma = nnuma};
              cr_assert_eq(weft_sim_run(&c, err, sizeof(err)), ncclSuccess, "%s", err);
              runs++;
            }
        }
      }
  cr_assert_geq(runs, 1000, "only %d configurations ran", runs);
  cr_assert_gt(refused, 0, "no uneven split was tried");
}

Test(algos_numa, groups_are_numbered_host_by_host, .timeout = 10) {
  int host_of[6] = {0, 0, 0, 0, 1, 1}, numa[6] = {1, 0, 1, 0, 3, 3}, of[6];
  cr_assert_eq(weft_layout_numa_groups(host_of, 2, numa, 6, of), 3);
  int want[6] = {1, 0, 1, 0, 2, 2};
  for (int r = 0; r < 6; r++) cr_expect_eq(of[r], want[r], "rank %d in group %d", r, of[r]);
  int one_node[6] = {0, 0, 0, 0, 5, 5};
  cr_expect_eq(weft_layout_numa_groups(host_of, 2, one_node, 6, of), 0, "no host spans two nodes");
  numa[2] = -1;
  cr_expect_eq(weft_layout_numa_groups(host_of, 2, numa, 6, of), 0, "a rank's node unknown");
  int alt[4] = {0, 1, 0, 1};
  cr_expect_eq(weft_layout_numa_groups(NULL, 1, alt, 4, of), 2, "one host");
}

// Elements every rank's schedule sends to a rank of another NUMA group.
static size_t crossing(weft_algo_t algo, int n, size_t count, const int *numa_of, int nnuma) {
  size_t total = 0;
  for (int r = 0; r < n; r++) {
    weft_coll_args_t a = args(n, r, count, numa_of, nnuma);
    if (algo == WEFT_ALGO_RING) a.order = a.pos = NULL;
    weft_schedule_t s = build(a, algo);
    for (uint32_t i = 0; i < s.nsteps; i++)
      if (s.steps[i].send_peer >= 0 && numa_of[s.steps[i].send_peer] != numa_of[r]) total += s.steps[i].count;
    weft_schedule_free(&s);
  }
  return total;
}

// Two NUMA nodes of k ranks: numa sends each element across once per
// direction; a ring sorted by node 2 (n - 1) / n of it per direction.
Test(algos_numa, crosses_the_socket_link_once_per_direction, .timeout = 30) {
  const size_t count = 1 << 14;
  for (int k = 2; k <= 8; k *= 2) {
    int n = 2 * k, sorted[16], alt[16];
    for (int r = 0; r < n; r++) sorted[r] = r / k, alt[r] = r % 2;
    size_t numa = crossing(WEFT_ALGO_NUMA, n, count, sorted, 2);
    cr_expect_eq(numa, 2 * count, "%d ranks on 2 nodes: %zu elements cross, not 2 x %zu", n, numa, count);
    cr_expect_eq(crossing(WEFT_ALGO_NUMA, n, count, alt, 2), 2 * count, "alternating nodes, %d ranks", n);
    size_t ring = crossing(WEFT_ALGO_RING, n, count, sorted, 2);
    cr_expect_eq(ring, 2 * 2 * count * (size_t)(n - 1) / (size_t)n, "ring over %d ranks", n);
  }
}

static int same_schedule(const weft_schedule_t *x, const weft_schedule_t *y) {
  return x->nsteps == y->nsteps && x->nlanes == y->nlanes &&
         memcmp(x->steps, y->steps, sizeof(*x->steps) * x->nsteps) == 0;
}

// Without NUMA groups numa is hier: the ring on one host, hier's stages across hosts.
Test(algos_numa, without_groups_it_is_hier, .timeout = 10) {
  int host_of[8] = {0, 0, 0, 0, 1, 1, 1, 1};
  for (int r = 0; r < 8; r++) {
    weft_coll_args_t a = args(8, r, 1000, NULL, 0);
    weft_schedule_t x = build(a, WEFT_ALGO_NUMA), y = build(a, WEFT_ALGO_RING);
    cr_expect(same_schedule(&x, &y), "one host, rank %d", r);
    weft_schedule_free(&x);
    weft_schedule_free(&y);
    a.host_of = host_of, a.nhosts = 2;
    x = build(a, WEFT_ALGO_NUMA), y = build(a, WEFT_ALGO_HIER);
    cr_expect(same_schedule(&x, &y), "two hosts, rank %d", r);
    weft_schedule_free(&x);
    weft_schedule_free(&y);
  }
}

Test(algos_numa, uneven_nodes_are_refused_in_words, .timeout = 10) {
  int numa_of[5] = {0, 0, 0, 1, 1};
  char why[160];
  weft_coll_args_t a = args(5, 0, 100, numa_of, 2);
  cr_assert(!weft_algo_fits(WEFT_ALGO_NUMA, &a, why, sizeof(why)));
  cr_expect(strstr(why, "NUMA node 0 has 3, NUMA node 1 has 2"), "%s", why);
  cr_expect(weft_algo_fits(WEFT_ALGO_HIER, &a, NULL, 0), "hier looks at hosts only");
}

static weft_algo_t choose(const char *spec, const int *host_of, int nhosts, const int *numa_of, int nnuma, int n,
                          size_t bytes) {
  weft_tuner_params_t p = {.slot_bytes = 65536, .nslots = 8, .oneshot_max = 16384, .algo_spec = spec,
                           .ll_max = 4096};
  weft_coll_args_t a = args(n, 0, bytes / 4, numa_of, nnuma);
  a.host_of = host_of, a.nhosts = nhosts;
  weft_algo_t algo = WEFT_NUM_ALGOS;
  cr_assert_eq(weft_tuner_choose(&p, &a, 4, &algo), ncclSuccess);
  return algo;
}

Test(algos_numa, tuner_rule, .timeout = 30) {
  int two_by_four[8] = {0, 0, 0, 0, 1, 1, 1, 1}, one_each[2] = {0, 1}, uneven[5] = {0, 0, 0, 1, 1};
  cr_expect_eq(choose(NULL, NULL, 1, two_by_four, 2, 8, 1 << 20), WEFT_ALGO_NUMA, "2 nodes x 4, 1 MiB");
  cr_expect_eq(choose(NULL, NULL, 1, two_by_four, 2, 8, 64 << 10), WEFT_ALGO_NUMA, "2 nodes x 4, 64 KiB");
  cr_expect_eq(choose(NULL, NULL, 1, two_by_four, 2, 8, 1024), WEFT_ALGO_ONESHOT, "small: one hop");
  cr_expect_eq(choose(NULL, NULL, 1, NULL, 0, 8, 1 << 20), WEFT_ALGO_RING, "one NUMA node: the ring");
  cr_expect_eq(choose(NULL, NULL, 1, one_each, 2, 2, 1 << 20), WEFT_ALGO_RING, "one rank per node: the ring");
  cr_expect_eq(choose(NULL, NULL, 1, uneven, 2, 5, 1 << 20), WEFT_ALGO_RING, "3 + 2 ranks: the ring");
  cr_expect_eq(choose("ring", NULL, 1, two_by_four, 2, 8, 1 << 20), WEFT_ALGO_RING, "NCCL_ALGO=ring");
  cr_expect_eq(choose("^numa", NULL, 1, two_by_four, 2, 8, 1 << 20), WEFT_ALGO_RING, "NCCL_ALGO=^numa");
  cr_expect_eq(choose("numa", NULL, 1, two_by_four, 2, 8, 1024), WEFT_ALGO_NUMA, "forced, small");
  cr_expect_neq(choose("numa", NULL, 1, uneven, 2, 5, 1 << 20), WEFT_ALGO_NUMA, "forced on 3 + 2: weft's choice");
  // Across hosts the cost model has no socket link: numa only when it is all NCCL_ALGO allows.
  int hosts[16], groups[16];
  for (int r = 0; r < 16; r++) hosts[r] = r / 8, groups[r] = r / 4;
  for (size_t bytes = 4; bytes <= (16u << 20); bytes *= 16)
    cr_expect_neq(choose(NULL, hosts, 2, groups, 4, 16, bytes), WEFT_ALGO_NUMA, "2 hosts, %zu bytes", bytes);
  cr_expect_eq(choose("numa", hosts, 2, groups, 4, 16, 1 << 20), WEFT_ALGO_NUMA, "2 hosts, forced");
}

// A 2-socket machine's file, from the repository or beside it (skipped when absent).
static weft_topo_t *load_machine(const char *file, int hwloc) {
  char path[512], err[512] = "";
  const char *dir = getenv("WEFT_SHARED_TOPOLOGIES");
  snprintf(path, sizeof(path), "%s/%s", hwloc ? (dir ? dir : "../shared/topologies") : "tests/topologies", file);
  if (access(path, R_OK) != 0) cr_skip_test("%s is not here (real machines' files are not in the repository)", path);
  weft_topo_t *t = hwloc ? weft_topo_load_hwloc(path, err, sizeof(err)) : weft_topo_load_xml(path, err, sizeof(err));
  cr_assert_not_null(t, "%s: %s", path, err);
  return t;
}

// n ranks placed by WEFT_BIND's plan on t; their NUMA nodes as the
// communicator reads them (the node holding every CPU of the rank).
static int numa_groups_on(const weft_topo_t *t, int n, int *numa_of) {
  int numa[16];
  for (int r = 0; r < n; r++) {
    weft_topo_bind_t b;
    char err[256] = "";
    cr_assert_eq(weft_topo_bind_plan(t, r, n, NULL, 0, &b, err, sizeof(err)), 0, "%s", err);
    int place = weft_topo_place(t, NULL, b.cpus, b.ncpus);
    numa[r] = place >= 0 ? t->nodes[place].numa : -1;
    weft_topo_bind_free(&b);
  }
  return weft_layout_numa_groups(NULL, 1, numa, n, numa_of);
}

// Two sockets, ranks placed by WEFT_BIND's plan: numa for a large
// AllReduce where the ranks of `numa_at` (bit n: n ranks) split evenly, 2 or
// more per socket, the ring elsewhere; the schedule proven there by the
// simulator.
static void two_socket_machine(weft_topo_t *t, unsigned numa_at) {
  cr_assert_eq(weft_topo_count(t, WEFT_TOPO_CPU), 2);
  char err[2048];
  for (int n = 2; n <= 8; n++) {
    int numa_of[16], nnuma = numa_groups_on(t, n, numa_of);
    cr_assert_eq(nnuma, 2, "%d ranks spread over both sockets", n);
    weft_algo_t want = numa_at & (1u << n) ? WEFT_ALGO_NUMA : WEFT_ALGO_RING;
    weft_algo_t got = choose(NULL, NULL, 1, numa_of, nnuma, n, 1 << 20);
    cr_expect_eq(got, want, "%d ranks, 1 MiB: %s", n, weft_algo_name(got));
    if (want != WEFT_ALGO_NUMA) continue;
    weft_sim_config_t c = {.coll = WEFT_COLL_ALLREDUCE, .algo = WEFT_ALGO_NUMA, .nranks = n, .count = 1000,
                           .slice = 7, .capacity = 14, .random_runs = 2, .numa_of = numa_of, .nnuma = nnuma};
    cr_expect_eq(weft_sim_run(&c, err, sizeof(err)), ncclSuccess, "%s", err);
  }
  weft_topo_free(t);
}

// No GPUs: WEFT_BIND splits n ranks over the sockets as evenly as it can.
Test(algos_numa, cpu_2socket_xml, .timeout = 30) {
  two_socket_machine(load_machine("cpu-2socket.xml", 0), 1u << 4 | 1u << 6 | 1u << 8);
}

// Three GPUs, one on socket 0 and two on socket 1: rank r follows GPU r mod
// 3, so only 4 ranks (GPUs 0, 1, 2, 0) split evenly.
Test(algos_numa, hwloc_2socket_pci, .timeout = 30) {
  two_socket_machine(load_machine("hwloc-2socket-pci.xml", 1), 1u << 4);
}
