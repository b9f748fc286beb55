/*
 * test_algos.c — the multi-host AllReduce algorithms (tree, recursive
 * doubling, Rabenseifner, hier) and the host order of rings and chains.
 *
 * The simulator proves each new algorithm for n = 1..33 ranks on several
 * host layouts (one host, hosts of 1, 2, 4 and 8 ranks, hosts of uneven
 * sizes, ranks alternating between two hosts), counts of 1, odd, several
 * slices and several chunks long, slices of 1, 3 and 16, in place and out
 * of place, at the capacity weft_schedule_min_capacity promises. The structural tests pin down the
 * shapes: the double binary tree's fan-out and interior sets, recursive
 * doubling's rounds, Rabenseifner's traffic, hier's layout condition, and
 * rings that cross each host boundary once.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "sim.h"

static weft_coll_args_t args(int n, int rank, size_t count, size_t slice, const int *host_of, int nhosts) {
  weft_coll_args_t a = {.coll = WEFT_COLL_ALLREDUCE, .nranks = n, .rank = rank, .count = count, .slice = slice,
                        .host_of = nhosts ? host_of : NULL, .nhosts = nhosts ? nhosts : 1};
  return a;
}

// Simulate `algo` over n = 1..nmax on every layout it fits.
static void sweep(weft_algo_t algo, int nmax) {
  char err[2048];
  int runs = 0, host_of[WEFT_SIM_MAX_RANKS];
  for (int n = 1; n <= nmax; n++)
    for (int li = 0; li < weft_sim_nlayouts; li++) {
      int nhosts = weft_sim_layout_fill(&weft_sim_layouts[li], n, host_of);
      weft_coll_args_t probe = args(n, 0, 1, 1, host_of, nhosts);
      if (!weft_algo_fits(algo, &probe, NULL, 0)) continue;
      size_t slices[] = {1, 3, 16};
      for (int si = 0; si < 3; si++) {
        size_t slice = slices[si], counts[] = {1, 2 * (size_t)n + 1, 5 * slice + 3, 16 * (size_t)n + 7};
        for (int ci = 0; ci < 4; ci++)
          for (int ip = 0; ip < 2; ip++) {
            weft_sim_config_t c = {0};
            c.coll = WEFT_COLL_ALLREDUCE;
            c.algo = algo;
            c.nranks = n;
            c.count = counts[ci];
            c.slice = slice;
            c.capacity = weft_schedule_min_capacity(algo, slice);
            c.in_place = ip;
            c.random_runs = n <= 8 ? 4 : 1;
            c.host_of = nhosts ? host_of : NULL;
            c.nhosts = nhosts;
            cr_assert_eq(weft_sim_run(&c, err, sizeof(err)), ncclSuccess, "%s", err);
            runs++;
          }
      }
    }
  cr_assert_geq(runs, nmax * 12, "only %d configurations ran", runs);
}

Test(algos_sim, tree, .timeout = 120) { sweep(WEFT_ALGO_TREE, 33); }
Test(algos_sim, recursive, .timeout = 120) { sweep(WEFT_ALGO_RECURSIVE, 33); }
Test(algos_sim, rabenseifner, .timeout = 120) { sweep(WEFT_ALGO_RABENSEIFNER, 33); }
Test(algos_sim, hier, .timeout = 120) { sweep(WEFT_ALGO_HIER, 33); }
Test(algos_sim, host_ordered_rings_and_chains, .timeout = 120) {
  sweep(WEFT_ALGO_RING, 17);
  char err[2048];
  int host_of[WEFT_SIM_MAX_RANKS];
  for (int n = 1; n <= 12; n++)
    for (int li = 0; li < weft_sim_nlayouts; li++) {
      int nhosts = weft_sim_layout_fill(&weft_sim_layouts[li], n, host_of);
      for (int coll = 0; coll < WEFT_NUM_COLLS; coll++) {
        weft_algo_t algo = coll == WEFT_COLL_BROADCAST || coll == WEFT_COLL_REDUCE ? WEFT_ALGO_CHAIN : WEFT_ALGO_RING;
        if (!weft_algo_supports(algo, (weft_coll_t)coll)) continue;
        for (int root = 0; root < n; root += n > 3 ? n / 3 : 1) {
          weft_sim_config_t c = {.coll = (weft_coll_t)coll, .algo = algo, .nranks = n, .root = root,
                                 .count = 2 * (size_t)n + 3, .slice = 4,
                                 .capacity = weft_schedule_min_capacity(algo, 4), .random_runs = 1,
                                 .host_of = nhosts ? host_of : NULL, .nhosts = nhosts};
          cr_assert_eq(weft_sim_run(&c, err, sizeof(err)), ncclSuccess, "%s", err);
        }
      }
    }
}

// A ring order a communicator chose from its topology (each host's ranks
// side by side, shuffled within the host): every schedule that follows the
// layout must still be exact, on every host layout.
static int shuffled_order(int n, const int *host_of, int nhosts, unsigned *seed, int *order, int *pos) {
  int k = 0;
  for (int h = 0; h < (nhosts ? nhosts : 1); h++) {
    int first = k;
    for (int r = 0; r < n; r++)
      if (!nhosts || host_of[r] == h) order[k++] = r;
    for (int i = k - 1; i > first; i--) {  // Fisher-Yates within the host
      *seed = *seed * 1103515245u + 12345u;
      int j = first + (int)((*seed >> 16) % (unsigned)(i - first + 1)), x = order[i];
      order[i] = order[j], order[j] = x;
    }
  }
  for (int p = 0; p < n; p++) pos[order[p]] = p;
  for (int p = 0; p < n; p++)
    if (order[p] != p) return 1;
  return 0;
}

Test(algos_sim, topology_ordered_schedules, .timeout = 240) {
  static const weft_algo_t algos[] = {WEFT_ALGO_RING, WEFT_ALGO_CHAIN, WEFT_ALGO_TREE, WEFT_ALGO_RECURSIVE,
                                      WEFT_ALGO_RABENSEIFNER, WEFT_ALGO_HIER};
  char err[2048];
  int host_of[WEFT_SIM_MAX_RANKS], order[WEFT_SIM_MAX_RANKS], pos[WEFT_SIM_MAX_RANKS], runs = 0, shuffled = 0;
  unsigned seed = 12345;
  for (int n = 2; n <= 12; n++)
    for (int li = 0; li < weft_sim_nlayouts; li++) {
      int nhosts = weft_sim_layout_fill(&weft_sim_layouts[li], n, host_of);
      shuffled += shuffled_order(n, host_of, nhosts, &seed, order, pos);
      for (size_t ai = 0; ai < sizeof(algos) / sizeof(algos[0]); ai++)
        for (int coll = 0; coll < WEFT_NUM_COLLS; coll++) {
          if (!weft_algo_supports(algos[ai], (weft_coll_t)coll)) continue;
          weft_sim_config_t c = {.coll = (weft_coll_t)coll, .algo = algos[ai], .nranks = n, .root = n - 1,
                                 .count = 2 * (size_t)n + 3, .slice = 4,
                                 .capacity = weft_schedule_min_capacity(algos[ai], 4), .random_runs = 1,
                                 .host_of = nhosts ? host_of : NULL, .nhosts = nhosts, .order = order, .pos = pos};
          weft_coll_args_t probe = args(n, 0, 1, 1, host_of, nhosts);
          if (!weft_algo_fits(algos[ai], &probe, NULL, 0)) continue;
          for (int ip = 0; ip < 2; ip++) {
            c.in_place = ip;
            cr_assert_eq(weft_sim_run(&c, err, sizeof(err)), ncclSuccess, "%s", err);
            runs++;
          }
        }
    }
  cr_assert_geq(shuffled, 50, "only %d orders differed from rank order", shuffled);
  cr_assert_geq(runs, 500, "only %d configurations ran", runs);
}

// An order that is not a permutation, or splits a host, is refused.
Test(algos_sim, rejects_bad_orders, .timeout = 10) {
  int host_of[4] = {0, 0, 1, 1}, order[4] = {0, 2, 1, 3}, pos[4] = {0, 2, 1, 3};
  char err[2048];
  weft_sim_config_t c = {.coll = WEFT_COLL_ALLREDUCE, .algo = WEFT_ALGO_RING, .nranks = 4, .count = 9, .slice = 4,
                         .capacity = 8, .random_runs = 1, .host_of = host_of, .nhosts = 2, .order = order,
                         .pos = pos};
  cr_assert_eq(weft_sim_run(&c, err, sizeof(err)), ncclInvalidArgument);
  cr_assert(strstr(err, "follows host"), "%s", err);
  int dup[4] = {0, 0, 2, 3};
  c.order = dup;
  cr_assert_eq(weft_sim_run(&c, err, sizeof(err)), ncclInvalidArgument);
  int good[4] = {1, 0, 3, 2}, good_pos[4] = {1, 0, 3, 2};
  c.order = good, c.pos = good_pos;
  cr_assert_eq(weft_sim_run(&c, err, sizeof(err)), ncclSuccess, "%s", err);
}

// One slice of room suffices for the tree and the recursive schedules;
// hier is made of rings and needs two.
Test(algos_sim, capacities, .timeout = 30) {
  cr_assert_eq(weft_schedule_min_capacity(WEFT_ALGO_TREE, 8), 8);
  cr_assert_eq(weft_schedule_min_capacity(WEFT_ALGO_RECURSIVE, 8), 8);
  cr_assert_eq(weft_schedule_min_capacity(WEFT_ALGO_RABENSEIFNER, 8), 8);
  cr_assert_eq(weft_schedule_min_capacity(WEFT_ALGO_HIER, 8), 16);
  int host_of[8] = {0, 0, 0, 0, 1, 1, 1, 1};
  char err[2048];
  weft_sim_config_t c = {.coll = WEFT_COLL_ALLREDUCE, .algo = WEFT_ALGO_HIER, .nranks = 8, .count = 512,
                         .slice = 8, .capacity = 8, .random_runs = 1, .host_of = host_of, .nhosts = 2};
  cr_assert_eq(weft_sim_run(&c, err, sizeof(err)), ncclInternalError, "hier with one slice of room");
  cr_assert(strstr(err, "deadlock"), "%s", err);
  c.capacity = 9;
  cr_assert_eq(weft_sim_run(&c, err, sizeof(err)), ncclSuccess, "%s", err);
}

Test(algos_sim, rejects_bad_layouts, .timeout = 10) {
  int host_of[4] = {0, 0, 2, 1};
  char err[512];
  weft_sim_config_t c = {.coll = WEFT_COLL_ALLREDUCE, .algo = WEFT_ALGO_TREE, .nranks = 4, .count = 10,
                         .slice = 4, .capacity = 4, .host_of = host_of, .nhosts = 2};
  cr_assert_eq(weft_sim_run(&c, err, sizeof(err)), ncclInvalidArgument);
  cr_assert(strstr(err, "host 2"), "%s", err);
  int uneven[5] = {0, 0, 0, 1, 1};
  c.nranks = 5, c.host_of = uneven, c.algo = WEFT_ALGO_HIER;
  cr_assert_eq(weft_sim_run(&c, err, sizeof(err)), ncclInvalidArgument);
  cr_assert(strstr(err, "same number of ranks"), "%s", err);
}

/* ---- shapes ---- */

static weft_schedule_t build(weft_coll_args_t a, weft_algo_t algo) {
  weft_schedule_t s = {0};
  cr_assert_eq(weft_schedule_build(&a, algo, &s), ncclSuccess, "%s rank %d of %d", weft_algo_name(algo), a.rank,
               a.nranks);
  return s;
}

// Parent and children of each rank in each tree, read off the reduction
// steps: tree t carries elements [t*count/2, (t+1)*count/2).
typedef struct {
  int parent[2], nchild[2], child[2][4];
} tree_roles_t;

static void tree_roles(int n, size_t count, const int *host_of, int nhosts, tree_roles_t *roles, int *lanes) {
  for (int r = 0; r < n; r++) {
    weft_schedule_t s = build(args(n, r, count, 1 << 20, host_of, nhosts), WEFT_ALGO_TREE);
    tree_roles_t *x = &roles[r];
    memset(x, 0, sizeof(*x));
    x->parent[0] = x->parent[1] = -1;
    lanes[r] = (int)s.nlanes;
    for (uint32_t i = 0; i < s.nsteps; i++) {
      const weft_step_t *st = &s.steps[i];
      int t = st->src_off >= count / 2;  // reduction steps read their piece at src_off
      if (st->kind == WEFT_STEP_RECV_REDUCE || st->kind == WEFT_STEP_RECV_REDUCE_SEND) {
        int dup = 0;
        for (int c = 0; c < x->nchild[t]; c++) dup |= x->child[t][c] == st->recv_peer;
        cr_assert_lt(x->nchild[t], 4);
        if (!dup) x->child[t][x->nchild[t]++] = st->recv_peer;
      }
      int up = st->kind == WEFT_STEP_RECV_REDUCE_SEND ||
               (st->kind == WEFT_STEP_SEND && (st->flags & WEFT_STEP_REDUCE_INPUT));
      if (up) {
        cr_assert(x->parent[t] < 0 || x->parent[t] == st->send_peer, "rank %d has two parents in tree %d", r, t);
        x->parent[t] = st->send_peer;
      }
    }
    weft_schedule_free(&s);
  }
}

// Both trees span every rank from one root, fan out at most 2, and (with at
// least 4 nodes of one rank each) no rank is interior in both.
static void check_trees(int n, const int *host_of, int nhosts, int single_rank_nodes) {
  tree_roles_t roles[WEFT_SIM_MAX_RANKS];
  int lanes[WEFT_SIM_MAX_RANKS];
  size_t count = 32 * (size_t)n;  // halves of 16n elements: count / 2 is the split
  tree_roles(n, count, host_of, nhosts, roles, lanes);
  for (int t = 0; t < 2; t++) {
    int roots = 0;
    for (int r = 0; r < n; r++) {
      cr_assert_leq(roles[r].nchild[t], 2, "n=%d rank %d has %d children in tree %d", n, r, roles[r].nchild[t], t);
      roots += roles[r].parent[t] < 0;
      int up = r, hops = 0;  // every rank reaches the root
      while (roles[up].parent[t] >= 0 && hops <= n) up = roles[up].parent[t], hops++;
      cr_assert_leq(hops, n - 1, "n=%d tree %d has a cycle through rank %d", n, t, r);
      for (int c = 0; c < roles[r].nchild[t]; c++)
        cr_assert_eq(roles[roles[r].child[t][c]].parent[t], r, "n=%d tree %d: child and parent disagree", n, t);
    }
    cr_assert_eq(roots, 1, "n=%d tree %d has %d roots", n, t, roots);
  }
  int nodes = nhosts ? nhosts : n;
  for (int r = 0; r < n && single_rank_nodes && nodes >= 4; r++) {
    cr_assert(roles[r].nchild[0] == 0 || roles[r].nchild[1] == 0, "n=%d rank %d is interior in both trees", n, r);
    cr_assert_eq(lanes[r], 2, "n=%d: disjoint trees get a lane each", n);
  }
}

Test(algos_shape, double_binary_tree, .timeout = 60) {
  int host_of[WEFT_SIM_MAX_RANKS];
  for (int n = 2; n <= WEFT_SIM_MAX_RANKS; n++) {
    check_trees(n, NULL, 0, 1);
    for (int r = 0; r < n; r++) host_of[r] = r;  // a host per rank: trees over hosts
    check_trees(n, host_of, n, 1);
    for (int k = 2; k <= 8; k *= 2) {  // chains inside hosts
      int nhosts = weft_sim_layout_fill(&(weft_sim_layout_t){WEFT_SIM_HOSTS_OF_K, k}, n, host_of);
      check_trees(n, host_of, nhosts, 0);
    }
  }
}

static int floor_log2(int n) {
  int l = 0;
  while ((2 << l) <= n) l++;
  return l;
}

Test(algos_shape, recursive_doubling_rounds, .timeout = 30) {
  for (int n = 2; n <= WEFT_SIM_MAX_RANKS; n++) {
    int pow2 = (n & (n - 1)) == 0, rounds = floor_log2(n), most = 0, folded = 0;
    for (int r = 0; r < n; r++) {
      weft_schedule_t s = build(args(n, r, 100, 128, NULL, 0), WEFT_ALGO_RECURSIVE);
      int plain_recv = 0;  // only a folded rank receives without reducing: the result
      for (uint32_t i = 0; i < s.nsteps; i++) plain_recv += s.steps[i].kind == WEFT_STEP_RECV;
      if ((int)s.nsteps > most) most = (int)s.nsteps;
      if (plain_recv) {
        folded++;
        cr_assert_eq(s.nsteps, 2, "n=%d: a folded rank sends its input and receives the result", n);
      }
      cr_assert_eq(s.nlanes, 1);
      weft_schedule_free(&s);
    }
    // A core takes its own operand (a copy, or the fold), then sends and
    // reduces once per round, then unfolds.
    cr_assert_eq(most, 1 + 2 * rounds + (pow2 ? 0 : 1), "n=%d: %d steps", n, most);
    cr_assert_eq(folded, n - (1 << rounds), "n=%d: %d ranks fold in", n, folded);
  }
}

Test(algos_shape, rabenseifner_traffic, .timeout = 30) {
  for (int p = 2; p <= 32; p *= 2) {
    size_t count = 64 * (size_t)p;  // p blocks of 64 elements
    for (int r = 0; r < p; r++) {
      weft_schedule_t s = build(args(p, r, count, 16, NULL, 0), WEFT_ALGO_RABENSEIFNER);
      uint64_t sent = 0;
      int peers[WEFT_SIM_MAX_RANKS] = {0}, npeers = 0;
      for (uint32_t i = 0; i < s.nsteps; i++) {
        if (s.steps[i].send_peer < 0) continue;
        sent += s.steps[i].count;
        npeers += !peers[s.steps[i].send_peer]++;
      }
      // Halving then doubling: 2 (p-1)/p of the buffer out, to log2(p) partners.
      cr_assert_eq(sent, 2 * count * (size_t)(p - 1) / (size_t)p, "p=%d rank %d sent %llu", p, r,
                   (unsigned long long)sent);
      cr_assert_eq(npeers, floor_log2(p));
      weft_schedule_free(&s);
    }
  }
}

Test(algos_shape, hier_needs_even_hosts, .timeout = 10) {
  int uneven[6] = {0, 0, 0, 1, 1, 2}, even[6] = {0, 0, 1, 1, 2, 2};
  char why[160];
  weft_coll_args_t a = args(6, 0, 100, 16, uneven, 3);
  cr_assert(!weft_algo_fits(WEFT_ALGO_HIER, &a, why, sizeof(why)));
  cr_assert(strstr(why, "host 0 has 3, host 1 has 2"), "%s", why);
  cr_assert(weft_algo_fits(WEFT_ALGO_TREE, &a, NULL, 0));
  weft_schedule_t s = {0};
  cr_assert_eq(weft_schedule_build(&a, WEFT_ALGO_HIER, &s), ncclInvalidArgument);
  cr_assert_eq(s.nsteps, 0);
  a.host_of = even;
  cr_assert(weft_algo_fits(WEFT_ALGO_HIER, &a, why, sizeof(why)));
  s = build(a, WEFT_ALGO_HIER);
  cr_assert_gt(s.nsteps, 0);
  weft_schedule_free(&s);
}

static int same_schedule(const weft_schedule_t *x, const weft_schedule_t *y) {
  return x->nsteps == y->nsteps && x->nlanes == y->nlanes &&
         memcmp(x->steps, y->steps, x->nsteps * sizeof(*x->steps)) == 0 &&
         memcmp(x->lanes, y->lanes, x->nlanes * sizeof(*x->lanes)) == 0;
}

// hier on one host is the ring; rings and chains are unchanged when the
// hosts are already contiguous.
Test(algos_shape, unchanged_where_hosts_are_contiguous, .timeout = 30) {
  int host_of[12];
  for (int n = 1; n <= 12; n++)
    for (int k = 1; k <= 4; k++) {
      int nhosts = weft_sim_layout_fill(&(weft_sim_layout_t){WEFT_SIM_HOSTS_OF_K, k}, n, host_of);
      for (int coll = 0; coll < WEFT_NUM_COLLS; coll++)
        for (int algo = WEFT_ALGO_RING; algo <= WEFT_ALGO_CHAIN; algo++) {
          if (!weft_algo_supports((weft_algo_t)algo, (weft_coll_t)coll)) continue;
          for (int r = 0; r < n; r++) {
            weft_coll_args_t a = args(n, r, 3 * (size_t)n + 5, 7, NULL, 0);
            a.coll = (weft_coll_t)coll;
            a.root = n / 2;
            weft_schedule_t flat = build(a, (weft_algo_t)algo);
            a.host_of = host_of, a.nhosts = nhosts;
            weft_schedule_t hosted = build(a, (weft_algo_t)algo);
            cr_assert(same_schedule(&flat, &hosted), "%s/%s n=%d rank %d", weft_coll_name(a.coll),
                      weft_algo_name((weft_algo_t)algo), n, r);
            weft_schedule_free(&flat);
            weft_schedule_free(&hosted);
          }
        }
      weft_coll_args_t a = args(n, 0, 100, 7, NULL, 0);
      for (a.rank = 0; a.rank < n; a.rank++) {
        weft_schedule_t ring = build(a, WEFT_ALGO_RING), hier = build(a, WEFT_ALGO_HIER);
        cr_assert(same_schedule(&ring, &hier), "hier on one host, n=%d rank %d", n, a.rank);
        weft_schedule_free(&ring);
        weft_schedule_free(&hier);
      }
    }
}

// With ranks spread over hosts out of order, the ring still visits each
// host's ranks together: it leaves each host exactly once.
Test(algos_shape, ring_crosses_each_host_once, .timeout = 10) {
  int host_of[12];
  for (int n = 4; n <= 12; n++)
    for (int h = 2; h <= 4 && h <= n; h++) {
      for (int r = 0; r < n; r++) host_of[r] = r % h;
      int crossings = 0;
      for (int r = 0; r < n; r++) {
        weft_schedule_t s = build(args(n, r, 64 * (size_t)n, 1024, host_of, h), WEFT_ALGO_RING);
        int next = s.steps[0].send_peer;
        for (uint32_t i = 0; i < s.nsteps; i++)
          if (s.steps[i].send_peer >= 0) cr_assert_eq(s.steps[i].send_peer, next, "one successor per rank");
        crossings += host_of[next] != host_of[r];
        weft_schedule_free(&s);
      }
      cr_assert_eq(crossings, h, "n=%d on %d hosts: the ring crosses hosts %d times", n, h, crossings);
    }
}

// Rings and chains follow the order the communicator brings (its topology's
// ring), not rank order: each rank sends only to the rank after it there.
Test(algos_shape, ring_and_chain_follow_the_given_order, .timeout = 10) {
  int host_of[8] = {0, 0, 0, 0, 1, 1, 1, 1}, order[8] = {0, 2, 1, 3, 6, 4, 7, 5}, pos[8];
  for (int p = 0; p < 8; p++) pos[order[p]] = p;
  for (int hosts = 1; hosts <= 2; hosts++)
    for (int r = 0; r < 8; r++) {
      weft_coll_args_t a = args(8, r, 64 * 8, 1024, host_of, hosts == 2 ? 2 : 0);
      a.order = order, a.pos = pos;
      int next = order[(pos[r] + 1) % 8];
      weft_schedule_t s = build(a, WEFT_ALGO_RING);
      for (uint32_t i = 0; i < s.nsteps; i++)
        if (s.steps[i].send_peer >= 0) cr_assert_eq(s.steps[i].send_peer, next, "rank %d sends to its successor", r);
      weft_schedule_free(&s);
      a.coll = WEFT_COLL_BROADCAST;
      a.root = order[0];
      s = build(a, WEFT_ALGO_CHAIN);
      for (uint32_t i = 0; i < s.nsteps; i++)
        if (s.steps[i].send_peer >= 0) cr_assert_eq(s.steps[i].send_peer, next, "chain: rank %d", r);
      cr_assert(pos[r] < 7 || s.nsteps == 0 || s.steps[0].send_peer < 0, "the chain ends at position 7");
      weft_schedule_free(&s);
    }
}
