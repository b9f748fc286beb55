/*
 * test_sim.c — every built-in schedule, simulated; and proof that the
 * simulator rejects broken ones.
 *
 * The sweep runs each collective with each of its algorithms for n = 1..64
 * ranks, in place and out of place, over counts around n and slices that
 * cut them unevenly; small n get the full grid, large n a thinner one so the
 * suite stays fast. The negative tests hand the simulator schedules with one
 * deliberate defect each and check it names that defect.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

static int rooted(weft_coll_t c) {
  return c == WEFT_COLL_BROADCAST || c == WEFT_COLL_REDUCE || c == WEFT_COLL_GATHER ||
         c == WEFT_COLL_SCATTER || c == WEFT_COLL_SEND || c == WEFT_COLL_RECV;
}

// Is NCCL's count per rank, so that a call moves about n * count elements?
static int per_rank_volume(weft_coll_t c) {
  return c == WEFT_COLL_ALLGATHER || c == WEFT_COLL_REDUCESCATTER || c == WEFT_COLL_ALLTOALL ||
         c == WEFT_COLL_GATHER || c == WEFT_COLL_SCATTER;
}

// Appends v to a small set unless present.
static int add_unique(size_t *set, int n, size_t v) {
  for (int i = 0; i < n; i++)
    if (set[i] == v) return n;
  set[n] = v;
  return n + 1;
}

// The grid for n ranks: full up to 8, thinner beyond, thinnest where a
// call's traffic grows with n * count.
static void sweep_n(weft_coll_t coll, weft_algo_t algo, int n, int *runs) {
  size_t counts[8], slices[3], roots[3];
  int nc = 0, ns = 0, nr = 0, ncap, big_slice_only = 0;
  size_t un = (size_t)n;
  if (n <= 8) {
    size_t cc[] = {0, 1, un - 1, un, un + 1, 3 * un + 5, 1000};
    for (int i = 0; i < 7; i++) nc = add_unique(counts, nc, cc[i]);
    slices[ns++] = 1, slices[ns++] = 7, slices[ns++] = 64;
    ncap = 2;
    nr = add_unique(roots, nr, 0);
    nr = add_unique(roots, nr, un - 1);
    nr = add_unique(roots, nr, un / 2);
  } else if (n <= 16) {
    counts[nc++] = 1, counts[nc++] = un, counts[nc++] = 3 * un + 5, counts[nc++] = 1000;
    slices[ns++] = 7, slices[ns++] = 64;
    ncap = 1;
    roots[nr++] = 0, roots[nr++] = un - 1;
  } else if (per_rank_volume(coll)) {
    // Traffic grows with n * count: two counts.
    counts[nc++] = 1, counts[nc++] = un + 1;
    slices[ns++] = 7;
    ncap = 1;
    roots[nr++] = un / 2;
  } else {
    counts[nc++] = 1, counts[nc++] = un + 1, counts[nc++] = 3 * un + 5, counts[nc++] = 1000;
    slices[ns++] = 7, slices[ns++] = 64;
    ncap = 1;
    roots[nr++] = 0, roots[nr++] = un / 2;
    big_slice_only = 2;  // the two larger counts go in slices of 64
  }
  if (!rooted(coll)) nr = 1;
  char err[2048];
  for (int ci = 0; ci < nc; ci++)
    for (int si = 0; si < ns; si++) {
      if (big_slice_only && (ci < big_slice_only) != (si == 0)) continue;
      for (int cap = 0; cap < ncap; cap++)
        for (int ri = 0; ri < nr; ri++)
          for (int ip = 0; ip < 2; ip++) {
            size_t slice = slices[si];
            size_t capacity = weft_schedule_min_capacity(algo, slice) + (size_t)cap * slice;
            ncclResult_t rc = weft_sim_check(coll, algo, n, (int)roots[ri], counts[ci], slice,
                                             capacity, ip, err, sizeof(err));
            cr_assert_eq(rc, ncclSuccess, "%s", err);
            (*runs)++;
          }
    }
}

static void sweep(weft_coll_t coll) {
  int algos = 0, runs = 0;
  for (int a = 0; a < WEFT_NUM_ALGOS; a++) {
    if (!weft_algo_supports((weft_algo_t)a, coll)) continue;
    algos++;
    for (int n = 1; n <= WEFT_SIM_MAX_RANKS; n++) sweep_n(coll, (weft_algo_t)a, n, &runs);
  }
  cr_assert_geq(algos, 1, "no algorithm runs %s", weft_coll_name(coll));
  cr_assert_geq(runs, 64 * 4, "only %d configurations ran", runs);
}

Test(sim_sweep, allreduce, .timeout = 120) { sweep(WEFT_COLL_ALLREDUCE); }
Test(sim_sweep, broadcast, .timeout = 120) { sweep(WEFT_COLL_BROADCAST); }
Test(sim_sweep, reduce, .timeout = 120) { sweep(WEFT_COLL_REDUCE); }
Test(sim_sweep, allgather, .timeout = 120) { sweep(WEFT_COLL_ALLGATHER); }
Test(sim_sweep, reducescatter, .timeout = 120) { sweep(WEFT_COLL_REDUCESCATTER); }
Test(sim_sweep, alltoall, .timeout = 120) { sweep(WEFT_COLL_ALLTOALL); }
Test(sim_sweep, gather, .timeout = 120) { sweep(WEFT_COLL_GATHER); }
Test(sim_sweep, scatter, .timeout = 120) { sweep(WEFT_COLL_SCATTER); }
Test(sim_sweep, send, .timeout = 120) { sweep(WEFT_COLL_SEND); }
Test(sim_sweep, recv, .timeout = 120) { sweep(WEFT_COLL_RECV); }

// Many random interleavings of small cases, each with its own seed.
Test(sim_sweep, random_interleavings, .timeout = 60) {
  static const struct {
    weft_coll_t c;
    weft_algo_t a;
  } cases[] = {{WEFT_COLL_ALLREDUCE, WEFT_ALGO_RING},  {WEFT_COLL_REDUCESCATTER, WEFT_ALGO_RING},
               {WEFT_COLL_ALLGATHER, WEFT_ALGO_RING},  {WEFT_COLL_REDUCE, WEFT_ALGO_CHAIN},
               {WEFT_COLL_BROADCAST, WEFT_ALGO_CHAIN}, {WEFT_COLL_ALLTOALL, WEFT_ALGO_DIRECT},
               {WEFT_COLL_GATHER, WEFT_ALGO_DIRECT},   {WEFT_COLL_SCATTER, WEFT_ALGO_DIRECT},
               {WEFT_COLL_SEND, WEFT_ALGO_DIRECT}};
  char err[2048];
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    for (int n = 2; n <= 8; n++)
      for (int ip = 0; ip < 2; ip++) {
        weft_sim_config_t c = {0};
        c.coll = cases[i].c;
        c.algo = cases[i].a;
        c.nranks = n;
        c.root = n - 1;
        c.count = (size_t)(5 * n + 3);
        c.slice = 3;
        c.capacity = weft_schedule_min_capacity(c.algo, c.slice);
        c.in_place = ip;
        c.random_runs = 40;
        c.seed = 1000 + i * 10 + (size_t)n;
        cr_assert_eq(weft_sim_run(&c, err, sizeof(err)), ncclSuccess, "%s", err);
      }
}

// A ring needs room for more than one slice per connection: with exactly one
// slice, every rank holds a full connection and waits for room in the next.
Test(sim_sweep, ring_capacity_bound, .timeout = 30) {
  char err[2048];
  for (int n = 3; n <= 8; n++) {
    for (int c = 0; c < WEFT_NUM_COLLS; c++) {
      if (!weft_algo_supports(WEFT_ALGO_RING, (weft_coll_t)c)) continue;
      size_t count = 64 * (size_t)n;
      cr_assert_eq(
          weft_sim_check((weft_coll_t)c, WEFT_ALGO_RING, n, 0, count, 8, 9, 0, err, sizeof(err)),
          ncclSuccess, "slice + 1 elements of room should do: %s", err);
      cr_assert_eq(
          weft_sim_check((weft_coll_t)c, WEFT_ALGO_RING, n, 0, count, 8, 8, 0, err, sizeof(err)),
          ncclInternalError, "%s n=%d with capacity == slice should deadlock",
          weft_coll_name((weft_coll_t)c), n);
      cr_assert(strstr(err, "deadlock"), "%s", err);
    }
  }
  cr_assert_eq(weft_schedule_min_capacity(WEFT_ALGO_RING, 8), 16);
  cr_assert_eq(weft_schedule_min_capacity(WEFT_ALGO_CHAIN, 8), 8);
  cr_assert_eq(weft_schedule_min_capacity(WEFT_ALGO_DIRECT, 8), 8);
}

Test(sim_config, rejects_what_it_cannot_simulate, .timeout = 10) {
  char err[512];
  cr_assert_eq(
      weft_sim_check(WEFT_COLL_ALLREDUCE, WEFT_ALGO_RING, 65, 0, 10, 4, 8, 0, err, sizeof(err)),
      ncclInvalidArgument);
  cr_assert(strstr(err, "nranks"), "%s", err);
  cr_assert_eq(
      weft_sim_check(WEFT_COLL_ALLREDUCE, WEFT_ALGO_RING, 0, 0, 10, 4, 8, 0, err, sizeof(err)),
      ncclInvalidArgument);
  cr_assert_eq(
      weft_sim_check(WEFT_COLL_ALLREDUCE, WEFT_ALGO_RING, 4, 0, 10, 0, 8, 0, err, sizeof(err)),
      ncclInvalidArgument);
  cr_assert_eq(
      weft_sim_check(WEFT_COLL_ALLREDUCE, WEFT_ALGO_RING, 4, 0, 10, 4, 0, 0, err, sizeof(err)),
      ncclInvalidArgument);
  cr_assert_eq(
      weft_sim_check(WEFT_COLL_BROADCAST, WEFT_ALGO_RING, 4, 0, 10, 4, 8, 0, err, sizeof(err)),
      ncclInvalidArgument);
  cr_assert(strstr(err, "cannot run"), "%s", err);
  cr_assert_eq(
      weft_sim_check(WEFT_COLL_REDUCE, WEFT_ALGO_CHAIN, 4, 4, 10, 4, 8, 0, err, sizeof(err)),
      ncclInvalidArgument);
  cr_assert_eq(weft_sim_check(WEFT_NUM_COLLS, WEFT_ALGO_CHAIN, 4, 0, 10, 4, 8, 0, err, sizeof(err)),
               ncclInvalidArgument);
  cr_assert_eq(weft_sim_run(NULL, err, sizeof(err)), ncclInvalidArgument);
  // A NULL or tiny error buffer is fine.
  cr_assert_eq(weft_sim_check(WEFT_COLL_ALLREDUCE, WEFT_ALGO_RING, 65, 0, 10, 4, 8, 0, NULL, 0),
               ncclInvalidArgument);
  cr_assert_eq(weft_sim_check(WEFT_COLL_ALLREDUCE, WEFT_ALGO_RING, 65, 0, 10, 4, 8, 0, err, 1),
               ncclInvalidArgument);
  cr_assert_eq(err[0], '\0');
}

/* ---- broken schedules ---- */

// A mutation applied to one rank's correct schedule.
typedef struct {
  void (*mutate)(const weft_coll_args_t *a, weft_schedule_t *s, void *arg);
  void *arg;
  int rank;  // -1: every rank
} mutation_t;

static ncclResult_t mutated_build(const weft_coll_args_t *a, weft_algo_t algo, weft_schedule_t *s,
                                  void *ctx) {
  const mutation_t *mu = ctx;
  ncclResult_t rc = weft_schedule_build(a, algo, s);
  if (rc == ncclSuccess && (mu->rank < 0 || mu->rank == a->rank)) mu->mutate(a, s, mu->arg);
  return rc;
}

// Run a mutated configuration; expect failure with `needle` in the message.
static void expect_reject(weft_sim_config_t c, mutation_t mu, const char *needle) {
  char err[2048];
  c.build = mutated_build;
  c.build_ctx = &mu;
  if (c.capacity == 0) c.capacity = weft_schedule_min_capacity(c.algo, c.slice);
  ncclResult_t rc = weft_sim_run(&c, err, sizeof(err));
  cr_assert_eq(rc, ncclInternalError, "broken schedule accepted (%d): %s", rc, err);
  cr_assert(strstr(err, needle), "expected \"%s\" in: %s", needle, err);
}

static weft_sim_config_t config(weft_coll_t coll, weft_algo_t algo, int n, size_t count,
                                size_t slice) {
  weft_sim_config_t c = {0};
  c.coll = coll;
  c.algo = algo;
  c.nranks = n;
  c.count = count;
  c.slice = slice;
  c.random_runs = 1;
  return c;
}

// Index of the first step of kind `kind` (or -1).
static int find_step(const weft_schedule_t *s, int kind) {
  for (uint32_t i = 0; i < s->nsteps; i++)
    if (s->steps[i].kind == kind) return (int)i;
  return -1;
}

static void remove_step(weft_schedule_t *s, uint32_t i) {
  memmove(&s->steps[i], &s->steps[i + 1], (s->nsteps - i - 1) * sizeof(*s->steps));
  s->nsteps--;
  for (uint32_t l = 0; l < s->nlanes; l++) {
    if (s->lanes[l].first > i)
      s->lanes[l].first--;
    else if (s->lanes[l].first + s->lanes[l].count > i)
      s->lanes[l].count--;
  }
}

static void wrong_chunk(const weft_coll_args_t *a, weft_schedule_t *s, void *arg) {
  (void)arg;
  int i = find_step(s, WEFT_STEP_RECV_REDUCE_SEND);
  s->steps[i].src_off = (s->steps[i].src_off + a->count) % (a->count * (size_t)a->nranks);
}

Test(sim_negative, wrong_chunk, .timeout = 10) {
  expect_reject(config(WEFT_COLL_REDUCESCATTER, WEFT_ALGO_RING, 4, 16, 16),
                (mutation_t){wrong_chunk, NULL, 2}, "wrong chunk or offset");
}

static void drop_last_recv(const weft_coll_args_t *a, weft_schedule_t *s, void *arg) {
  (void)a;
  (void)arg;
  for (uint32_t i = s->nsteps; i-- > 0;)
    if (s->steps[i].kind == WEFT_STEP_RECV) {
      remove_step(s, i);
      return;
    }
}

Test(sim_negative, missing_receive, .timeout = 10) {
  expect_reject(config(WEFT_COLL_ALLGATHER, WEFT_ALGO_RING, 5, 9, 4),
                (mutation_t){drop_last_recv, NULL, 3}, "a send without a matching receive");
}

static void drop_last_send(const weft_coll_args_t *a, weft_schedule_t *s, void *arg) {
  (void)a;
  (void)arg;
  for (uint32_t i = s->nsteps; i-- > 0;)
    if (s->steps[i].kind == WEFT_STEP_SEND) {
      remove_step(s, i);
      return;
    }
}

// Pieces of different sizes on the two ends of a connection.
static void resize_first_send(const weft_coll_args_t *a, weft_schedule_t *s, void *arg) {
  (void)a;
  (void)arg;
  s->steps[find_step(s, WEFT_STEP_SEND)].count--;
}

Test(sim_negative, missing_send, .timeout = 10) {
  expect_reject(config(WEFT_COLL_GATHER, WEFT_ALGO_DIRECT, 4, 9, 4),
                (mutation_t){drop_last_send, NULL, 2}, "a receive without a matching send");
  expect_reject(config(WEFT_COLL_GATHER, WEFT_ALGO_DIRECT, 4, 9, 4),
                (mutation_t){resize_first_send, NULL, 2},
                "connection 2->0, piece 0: rank 2 sends 3 elements");
}

static void drop_copy(const weft_coll_args_t *a, weft_schedule_t *s, void *arg) {
  (void)a;
  (void)arg;
  remove_step(s, (uint32_t)find_step(s, WEFT_STEP_COPY));
}

Test(sim_negative, missing_local_copy, .timeout = 10) {
  expect_reject(config(WEFT_COLL_ALLGATHER, WEFT_ALGO_RING, 3, 5, 8),
                (mutation_t){drop_copy, NULL, 1}, "rank 1 recv[5] holds nothing (never written)");
}

// Every AlltoAll lane receives before it sends: all ranks wait forever.
static void recv_first(const weft_coll_args_t *a, weft_schedule_t *s, void *arg) {
  (void)a;
  (void)arg;
  for (uint32_t i = 0; i + 1 < s->nsteps; i++)
    if (s->steps[i].kind == WEFT_STEP_SEND && s->steps[i + 1].kind == WEFT_STEP_RECV) {
      weft_step_t t = s->steps[i];
      s->steps[i] = s->steps[i + 1];
      s->steps[i + 1] = t;
      i++;
    }
}

Test(sim_negative, swapped_order_deadlocks, .timeout = 10) {
  expect_reject(config(WEFT_COLL_ALLTOALL, WEFT_ALGO_DIRECT, 4, 6, 3),
                (mutation_t){recv_first, NULL, -1}, "deadlock");
}

// Lower ranks send first, higher ranks receive first: no deadlock, right out
// of place, but in place a rank overwrites the block it has yet to send.
static void recv_first_above(const weft_coll_args_t *a, weft_schedule_t *s, void *arg) {
  (void)arg;
  for (uint32_t i = 0; i + 1 < s->nsteps; i++)
    if (s->steps[i].kind == WEFT_STEP_SEND && s->steps[i + 1].kind == WEFT_STEP_RECV &&
        s->steps[i].send_peer < a->rank) {
      weft_step_t t = s->steps[i];
      s->steps[i] = s->steps[i + 1];
      s->steps[i + 1] = t;
      i++;
    }
}

Test(sim_negative, overwrites_in_place_data, .timeout = 10) {
  weft_sim_config_t c = config(WEFT_COLL_ALLTOALL, WEFT_ALGO_DIRECT, 4, 6, 3);
  c.capacity = 6;
  mutation_t mu = {recv_first_above, NULL, -1};
  char err[2048];
  c.build = mutated_build;
  c.build_ctx = &mu;
  cr_assert_eq(weft_sim_run(&c, err, sizeof(err)), ncclSuccess, "out of place is fine: %s", err);
  c.in_place = 1;
  c.build = NULL;
  expect_reject(c, mu, "recv[");
}

static void clear_final(const weft_coll_args_t *a, weft_schedule_t *s, void *arg) {
  (void)a;
  (void)arg;
  for (uint32_t i = 0; i < s->nsteps; i++) s->steps[i].flags &= (uint8_t)~WEFT_STEP_FINAL;
}

Test(sim_negative, missing_final, .timeout = 10) {
  weft_sim_config_t c = config(WEFT_COLL_REDUCE, WEFT_ALGO_CHAIN, 4, 10, 4);
  c.root = 2;
  expect_reject(c, (mutation_t){clear_final, NULL, 2}, "lacks FINAL");
  expect_reject(config(WEFT_COLL_ALLREDUCE, WEFT_ALGO_RING, 1, 10, 4),
                (mutation_t){clear_final, NULL, 0}, "lacks FINAL");
}

static void final_on_copy_send(const weft_coll_args_t *a, weft_schedule_t *s, void *arg) {
  (void)a;
  (void)arg;
  s->steps[find_step(s, WEFT_STEP_RECV_COPY_SEND)].flags |= WEFT_STEP_FINAL;
}

static void final_on_partial(const weft_coll_args_t *a, weft_schedule_t *s, void *arg) {
  (void)a;
  (void)arg;
  s->steps[find_step(s, WEFT_STEP_RECV_REDUCE_SEND)].flags |= WEFT_STEP_FINAL;
}

Test(sim_negative, misplaced_final, .timeout = 10) {
  expect_reject(config(WEFT_COLL_ALLREDUCE, WEFT_ALGO_RING, 4, 64, 8),
                (mutation_t){final_on_copy_send, NULL, 1}, "FINAL on a step that reduces nothing");
  expect_reject(config(WEFT_COLL_ALLREDUCE, WEFT_ALGO_RING, 4, 64, 8),
                (mutation_t){final_on_partial, NULL, 1}, "has FINAL but element");
}

static void clear_reduce_input(const weft_coll_args_t *a, weft_schedule_t *s, void *arg) {
  (void)a;
  (void)arg;
  for (uint32_t i = 0; i < s->nsteps; i++) s->steps[i].flags &= (uint8_t)~WEFT_STEP_REDUCE_INPUT;
}

Test(sim_negative, missing_reduce_input, .timeout = 10) {
  expect_reject(config(WEFT_COLL_REDUCESCATTER, WEFT_ALGO_RING, 3, 8, 8),
                (mutation_t){clear_reduce_input, NULL, 0}, "lacks REDUCE_INPUT");
}

static void reduce_input_on_copy(const weft_coll_args_t *a, weft_schedule_t *s, void *arg) {
  (void)a;
  (void)arg;
  s->steps[find_step(s, WEFT_STEP_COPY)].flags |= WEFT_STEP_REDUCE_INPUT;
}

Test(sim_negative, reduction_flag_without_reduction, .timeout = 10) {
  expect_reject(config(WEFT_COLL_ALLGATHER, WEFT_ALGO_RING, 3, 8, 8),
                (mutation_t){reduce_input_on_copy, NULL, 0}, "reduction flags");
}

// A hand-written Reduce over 3 ranks (root 0) in which rank 1 adds its
// operand twice: 1 -> 2 -> 1 -> 0.
static ncclResult_t double_reduce_build(const weft_coll_args_t *a, weft_algo_t algo,
                                        weft_schedule_t *s, void *ctx) {
  (void)algo;
  (void)ctx;
  weft_step_t st = {0};
  st.send_peer = st.recv_peer = -1;
  st.count = a->count;
  st.src_buf = WEFT_BUF_SEND;
  if (a->rank == 1) {
    st.kind = WEFT_STEP_SEND;
    st.flags = WEFT_STEP_REDUCE_INPUT;
    st.send_peer = 2;
    weft_schedule_add(s, &st);
    st.kind = WEFT_STEP_RECV_REDUCE_SEND;
    st.flags = 0;
    st.recv_peer = 2;
    st.send_peer = 0;
  } else if (a->rank == 2) {
    st.kind = WEFT_STEP_RECV_REDUCE_SEND;
    st.recv_peer = 1;
    st.send_peer = 1;
  } else {
    st.kind = WEFT_STEP_RECV_REDUCE;
    st.dst_buf = WEFT_BUF_RECV;
    st.flags = WEFT_STEP_FINAL;
    st.recv_peer = 1;
  }
  return weft_schedule_add(s, &st);
}

Test(sim_negative, double_reduction, .timeout = 10) {
  weft_sim_config_t c = config(WEFT_COLL_REDUCE, WEFT_ALGO_CHAIN, 3, 4, 4);
  c.capacity = 4;
  c.build = double_reduce_build;
  char err[2048];
  cr_assert_eq(weft_sim_run(&c, err, sizeof(err)), ncclInternalError);
  cr_assert(strstr(err, "element 0 of rank 1 reduced twice"), "%s", err);
}

// Receive a finished AllReduce chunk and add to it again.
static void reduce_final_again(const weft_coll_args_t *a, weft_schedule_t *s, void *arg) {
  (void)arg;
  int i = find_step(s, WEFT_STEP_RECV_COPY_SEND);
  s->steps[i].kind = WEFT_STEP_RECV_REDUCE_SEND;
  s->steps[i].src_buf = WEFT_BUF_SEND;
  s->steps[i].src_off = s->steps[i].dst_off;
  s->steps[i].dst_buf = WEFT_BUF_NONE;
  s->steps[i].dst_off = 0;
  (void)a;
}

Test(sim_negative, reduces_a_final_value, .timeout = 10) {
  expect_reject(config(WEFT_COLL_ALLREDUCE, WEFT_ALGO_RING, 4, 64, 64),
                (mutation_t){reduce_final_again, NULL, 2}, "reduces it again");
}

static void split_lane(const weft_coll_args_t *a, weft_schedule_t *s, void *arg) {
  (void)a;
  (void)arg;
  // Give the second step a lane of its own.
  s->lanes = realloc(s->lanes, (s->nlanes + 1) * sizeof(*s->lanes));
  s->lanes[0].count = 1;
  s->lanes[1].first = 1;
  s->lanes[1].count = s->nsteps - 1;
  s->nlanes = 2;
  s->lanes_cap = 2;
}

Test(sim_negative, connection_shared_by_two_lanes, .timeout = 10) {
  expect_reject(config(WEFT_COLL_GATHER, WEFT_ALGO_DIRECT, 3, 8, 4),
                (mutation_t){split_lane, NULL, 2}, "lanes 0 and 1 both send to rank 0");
}

// The local-copy lane writes a block a peer lane also writes.
static void copy_into_peer_block(const weft_coll_args_t *a, weft_schedule_t *s, void *arg) {
  (void)arg;
  int i = find_step(s, WEFT_STEP_COPY);
  s->steps[i].dst_off = (uint64_t)((a->rank + 1) % a->nranks) * a->count;
}

Test(sim_negative, lanes_race, .timeout = 10) {
  expect_reject(config(WEFT_COLL_ALLTOALL, WEFT_ALGO_DIRECT, 3, 4, 4),
                (mutation_t){copy_into_peer_block, NULL, 1}, "lanes of one rank must not share");
}

static void oversized_step(const weft_coll_args_t *a, weft_schedule_t *s, void *arg) {
  (void)a;
  (void)arg;
  // Merge the first two pieces of the broadcast into one step.
  s->steps[0].count += s->steps[1].count;
  remove_step(s, 1);
}

Test(sim_negative, step_larger_than_slice, .timeout = 10) {
  weft_sim_config_t c = config(WEFT_COLL_BROADCAST, WEFT_ALGO_CHAIN, 3, 12, 4);
  expect_reject(c, (mutation_t){oversized_step, NULL, -1}, "more than the slice");
}

static void write_send_buffer(const weft_coll_args_t *a, weft_schedule_t *s, void *arg) {
  (void)a;
  (void)arg;
  s->steps[find_step(s, WEFT_STEP_RECV)].dst_buf = WEFT_BUF_SEND;
}

Test(sim_negative, writes_send_buffer, .timeout = 10) {
  expect_reject(config(WEFT_COLL_ALLGATHER, WEFT_ALGO_RING, 3, 4, 4),
                (mutation_t){write_send_buffer, NULL, 1}, "writes the send buffer");
}

static void out_of_bounds(const weft_coll_args_t *a, weft_schedule_t *s, void *arg) {
  (void)arg;
  s->steps[find_step(s, WEFT_STEP_RECV)].dst_off = a->count;
}

Test(sim_negative, region_out_of_bounds, .timeout = 10) {
  weft_sim_config_t c = config(WEFT_COLL_BROADCAST, WEFT_ALGO_CHAIN, 3, 4, 4);
  expect_reject(c, (mutation_t){out_of_bounds, NULL, 2}, "exceeds the 4 elements");
}

static ncclResult_t failing_build(const weft_coll_args_t *a, weft_algo_t algo, weft_schedule_t *s,
                                  void *ctx) {
  (void)algo;
  (void)s;
  (void)ctx;
  return a->rank == 1 ? ncclSystemError : ncclSuccess;
}

Test(sim_negative, builder_failure_is_reported, .timeout = 10) {
  weft_sim_config_t c = config(WEFT_COLL_ALLREDUCE, WEFT_ALGO_RING, 3, 4, 4);
  c.capacity = 8;
  c.build = failing_build;
  char err[512];
  cr_assert_eq(weft_sim_run(&c, err, sizeof(err)), ncclSystemError);
  cr_assert(strstr(err, "rank 1"), "%s", err);
}
