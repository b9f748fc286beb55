/*
 * test_sim_cost.c — what `weft-sim cost` shows at scale, checked on the
 * cost model itself (weft_cost_call and weft_tuner_choose, which the tool
 * calls): on a two-level cluster the tree's small-message latency grows
 * with log(hosts) and the ring's with hosts, a large ring AllReduce runs at
 * the network's bandwidth, and the tuner prices its way to a log-depth
 * algorithm for tiny messages across a thousand hosts.
 *
 * Two ranks per host keep the largest case (2048 hosts, 4096 ranks) to a
 * fraction of a second: the replay builds every rank's schedule.
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "cost.h"
#include "tuner.h"

#define PER_HOST 2
#define SLICE 131072  // the tuner's slice with weft's default connection buffers (float32)

// 8 x H100-like links: NVLink inside a host, the NICs of a host between hosts.
static const weft_links_t h100 = {{1.0e-6, 450e9, 0}, {5.0e-6, 400e9, 0}};

// host_of for `hosts` hosts of PER_HOST consecutive ranks (freed by the caller).
static int *hosts_of(int hosts) {
  int *h = malloc((size_t)hosts * PER_HOST * sizeof(int));
  cr_assert_not_null(h);
  for (int r = 0; r < hosts * PER_HOST; r++) h[r] = r / PER_HOST;
  return h;
}

static double allreduce_seconds(weft_algo_t algo, int hosts, size_t bytes, const weft_links_t *links) {
  int *host_of = hosts_of(hosts);
  weft_coll_args_t a = {.coll = WEFT_COLL_ALLREDUCE, .nranks = hosts * PER_HOST, .count = bytes / 4,
                        .slice = SLICE, .host_of = host_of, .nhosts = hosts};
  double t = 0;
  cr_assert_eq(weft_cost_call(&a, algo, 4, links, &t), ncclSuccess, "%s on %d hosts, %zu bytes",
               weft_algo_name(algo), hosts, bytes);
  free(host_of);
  cr_assert(t > 0, "%s on %d hosts: %g s", weft_algo_name(algo), hosts, t);
  return t;
}

Test(sim_cost, small_message_latency_tree_grows_like_log_hosts_ring_like_hosts, .timeout = 60) {
  double tree16 = allreduce_seconds(WEFT_ALGO_TREE, 16, 8, &h100);
  double tree256 = allreduce_seconds(WEFT_ALGO_TREE, 256, 8, &h100);
  double tree2048 = allreduce_seconds(WEFT_ALGO_TREE, 2048, 8, &h100);
  double ring16 = allreduce_seconds(WEFT_ALGO_RING, 16, 8, &h100);
  double ring256 = allreduce_seconds(WEFT_ALGO_RING, 256, 8, &h100);
  double ring2048 = allreduce_seconds(WEFT_ALGO_RING, 2048, 8, &h100);
  // 16 -> 256 -> 2048 hosts: x16 then x8 hosts, log2 4 -> 8 -> 11.
  cr_expect(tree256 > tree16 && tree2048 > tree256, "tree: %g %g %g us", tree16 * 1e6, tree256 * 1e6,
            tree2048 * 1e6);
  cr_expect(tree256 / tree16 < 3, "tree 16 -> 256 hosts: x%.2f, not like log(hosts)", tree256 / tree16);
  cr_expect(tree2048 / tree16 < 4.5, "tree 16 -> 2048 hosts: x%.2f, not like log(hosts)", tree2048 / tree16);
  cr_expect(ring256 / ring16 > 12 && ring256 / ring16 < 20, "ring 16 -> 256 hosts: x%.2f, not like hosts",
            ring256 / ring16);
  cr_expect(ring2048 / ring16 > 100 && ring2048 / ring16 < 160, "ring 16 -> 2048 hosts: x%.2f, not like hosts",
            ring2048 / ring16);
  cr_expect(tree2048 < ring2048 / 20, "tree %g us vs ring %g us at 2048 hosts", tree2048 * 1e6, ring2048 * 1e6);
}

Test(sim_cost, large_ring_runs_at_the_network_bandwidth, .timeout = 60) {
  // weft's default links (shared memory, 10 Gb/s TCP): a 512 KiB slice
  // takes ~17x the network's alpha, so the ring should stream.
  static const weft_links_t tcp = WEFT_LINKS_DEFAULT;
  int hosts = 4, n = hosts * PER_HOST;
  size_t bytes = 256u << 20;
  double t = allreduce_seconds(WEFT_ALGO_RING, hosts, bytes, &tcp);
  double busbw = (double)bytes / t * 2.0 * (n - 1) / n;
  cr_expect(busbw <= tcp.inter.bandwidth * 1.0001, "ring busbw %.3f GB/s above the link's %.3f GB/s", busbw * 1e-9,
            tcp.inter.bandwidth * 1e-9);
  cr_expect(busbw >= 0.85 * tcp.inter.bandwidth, "ring busbw %.3f GB/s, under 85%% of the link's %.3f GB/s",
            busbw * 1e-9, tcp.inter.bandwidth * 1e-9);
}

static weft_algo_t tuner_pick(int hosts, size_t bytes, const weft_links_t *links) {
  int *host_of = hosts_of(hosts);
  weft_tuner_params_t p = {.slot_bytes = 65536, .nslots = 16, .oneshot_max = 16384, .links = links};
  weft_coll_args_t a = {.coll = WEFT_COLL_ALLREDUCE, .nranks = hosts * PER_HOST, .count = bytes / 4,
                        .host_of = host_of, .nhosts = hosts};
  weft_algo_t algo = WEFT_NUM_ALGOS;
  cr_assert_eq(weft_tuner_choose(&p, &a, 4, &algo), ncclSuccess);
  cr_expect_eq(a.slice, SLICE, "the tuner's slice: %zu", a.slice);
  free(host_of);
  return algo;
}

Test(sim_cost, tuner_takes_a_log_depth_algorithm_for_tiny_messages_at_scale, .timeout = 60) {
  weft_algo_t algo = tuner_pick(1024, 8, &h100);
  cr_expect(algo == WEFT_ALGO_TREE || algo == WEFT_ALGO_RECURSIVE || algo == WEFT_ALGO_RABENSEIFNER,
            "8 B on 1024 hosts: the tuner picks %s", weft_algo_name(algo));
  // The ring's 2(n-1) hops must be what it avoids: priced, the ring is far slower.
  double ring = allreduce_seconds(WEFT_ALGO_RING, 1024, 8, &h100);
  double picked = allreduce_seconds(algo, 1024, 8, &h100);
  cr_expect(picked < ring / 10, "%s %g us vs ring %g us", weft_algo_name(algo), picked * 1e6, ring * 1e6);
  // And for a large message on a few hosts, a bandwidth-optimal schedule.
  algo = tuner_pick(4, 256u << 20, &h100);
  cr_expect(algo == WEFT_ALGO_RING || algo == WEFT_ALGO_RABENSEIFNER || algo == WEFT_ALGO_HIER,
            "256 MiB on 4 hosts: the tuner picks %s", weft_algo_name(algo));
}
