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

/* ---- single-copy steps: READ, READ_REDUCE, SIGNAL, WAIT ---- */

// A single-copy AllReduce written here, independent of the library's own,
// with switches that each break one ordering rule. Rank r folds chunk r by
// reading every rank's send buffer, SIGNALs every peer "chunk r is final",
// WAITs for every peer's chunk, READs the peers' final chunks, then SIGNALs
// every peer "done reading you" and WAITs for the same before returning.
typedef struct {
  int no_final_handshake;  // every rank returns right after its last READ
  int read_before_ready;   // this rank reads peers' chunks before their "final" tokens
  int reduce_twice;        // this rank folds one peer in twice (and one not at all)
  int wait_first;          // ranks 0 and 1 WAIT for "final" before they SIGNAL it
  int drop_signal;         // this rank skips its "done reading" SIGNAL to rank 0
  int accumulate_flag;     // mark READ_REDUCE steps ACCUMULATE (optional for it)
} rd_bugs_t;

static void rd_add(weft_schedule_t *s, int kind, int peer, uint8_t flags, uint64_t off,
                   uint64_t count) {
  weft_step_t st = {0};
  st.kind = (uint8_t)kind;
  st.send_peer = st.recv_peer = -1;
  st.flags = flags;
  st.count = count;
  if (kind == WEFT_STEP_SIGNAL) st.send_peer = peer;
  if (kind == WEFT_STEP_WAIT) st.recv_peer = peer;
  if (kind == WEFT_STEP_READ || kind == WEFT_STEP_READ_REDUCE) {
    st.rem_peer = peer;
    st.rem_buf = (flags & WEFT_STEP_REDUCE_INPUT) || kind == WEFT_STEP_READ_REDUCE ? WEFT_BUF_SEND
                                                                                   : WEFT_BUF_RECV;
    st.rem_off = off;
    st.dst_buf = WEFT_BUF_RECV;
    st.dst_off = off;
  }
  if (kind == WEFT_STEP_READ_REDUCE) {
    st.src_buf = WEFT_BUF_RECV;
    st.src_off = off;
  }
  cr_assert_eq(weft_schedule_add(s, &st), ncclSuccess);
}

static void rd_tokens(weft_schedule_t *s, const weft_coll_args_t *a, int kind, int skip_to) {
  for (int k = 1; k < a->nranks; k++) {
    int p = (a->rank + k) % a->nranks;
    if (p != skip_to) rd_add(s, kind, p, 0, 0, 1);
  }
}

static void rd_read_chunks(weft_schedule_t *s, const weft_coll_args_t *a, size_t chunk) {
  for (int k = 1; k < a->nranks; k++) {
    int q = (a->rank + k) % a->nranks;
    for (size_t o = (size_t)q * chunk; o < (size_t)(q + 1) * chunk && o < a->count; o += a->slice) {
      size_t end = (size_t)(q + 1) * chunk < a->count ? (size_t)(q + 1) * chunk : a->count;
      rd_add(s, WEFT_STEP_READ, q, 0, o, end - o < a->slice ? end - o : a->slice);
    }
  }
}

static ncclResult_t rd_allreduce_build(const weft_coll_args_t *a, weft_algo_t algo,
                                       weft_schedule_t *s, void *ctx) {
  (void)algo;
  const rd_bugs_t *bug = ctx;
  int n = a->nranks, r = a->rank;
  size_t chunk = (a->count + (size_t)n - 1) / (size_t)n;
  for (size_t o = (size_t)r * chunk; o < (size_t)(r + 1) * chunk && o < a->count; o += a->slice) {
    size_t end = (size_t)(r + 1) * chunk < a->count ? (size_t)(r + 1) * chunk : a->count;
    size_t len = end - o < a->slice ? end - o : a->slice;
    rd_add(s, WEFT_STEP_READ, r, WEFT_STEP_REDUCE_INPUT | (n == 1 ? WEFT_STEP_FINAL : 0), o, len);
    for (int k = 1; k < n; k++) {
      int p = (r + k) % n;
      if (bug->reduce_twice == r && k == n - 1) p = (r + 1) % n;
      uint8_t fl = (uint8_t)((k == n - 1 ? WEFT_STEP_FINAL : 0) |
                             (bug->accumulate_flag ? WEFT_STEP_ACCUMULATE : 0));
      rd_add(s, WEFT_STEP_READ_REDUCE, p, fl, o, len);
    }
  }
  if (n == 1) return ncclSuccess;
  int early = bug->read_before_ready == r;
  if (bug->wait_first && r < 2) rd_tokens(s, a, WEFT_STEP_WAIT, -1);
  rd_tokens(s, a, WEFT_STEP_SIGNAL, -1);  // chunk r is final
  if (early) rd_read_chunks(s, a, chunk);
  if (!(bug->wait_first && r < 2)) rd_tokens(s, a, WEFT_STEP_WAIT, -1);
  if (!early) rd_read_chunks(s, a, chunk);
  if (bug->no_final_handshake) return ncclSuccess;
  rd_tokens(s, a, WEFT_STEP_SIGNAL, bug->drop_signal == r ? 0 : -1);  // done reading you
  rd_tokens(s, a, WEFT_STEP_WAIT, -1);
  return ncclSuccess;
}

static ncclResult_t rd_run(rd_bugs_t bug, int n, size_t count, size_t slice, int in_place,
                           char *err, size_t errlen) {
  weft_sim_config_t c = config(WEFT_COLL_ALLREDUCE, WEFT_ALGO_READ, n, count, slice);
  c.capacity = slice;
  c.in_place = in_place;
  c.random_runs = 4;
  c.build = rd_allreduce_build;
  c.build_ctx = &bug;
  return weft_sim_run(&c, err, errlen);
}

static rd_bugs_t rd_none(void) {
  rd_bugs_t b = {0};
  b.read_before_ready = b.reduce_twice = b.drop_signal = -1;
  return b;
}

// The reference schedule is right, so every negative test below breaks
// exactly the rule it names.
Test(sim_read, correct_schedule_passes, .timeout = 60) {
  char err[2048];
  for (int n = 1; n <= 8; n++) {
    size_t counts[] = {0, 1, (size_t)n, (size_t)(3 * n + 5), 100};
    for (int ci = 0; ci < 5; ci++)
      for (size_t slice = 1; slice <= 64; slice *= 8)
        for (int ip = 0; ip < 2; ip++) {
          rd_bugs_t b = rd_none();
          b.accumulate_flag = ci & 1;  // READ_REDUCE with or without ACCUMULATE
          cr_assert_eq(rd_run(b, n, counts[ci], slice, ip, err, sizeof(err)), ncclSuccess, "%s",
                       err);
        }
  }
}

Test(sim_read, read_after_peer_returned, .timeout = 10) {
  char err[2048];
  rd_bugs_t b = rd_none();
  b.no_final_handshake = 1;
  for (int ip = 0; ip < 2; ip++) {
    cr_assert_eq(rd_run(b, 4, 40, 4, ip, err, sizeof(err)), ncclInternalError, "%s", err);
    cr_assert(strstr(err, "buffer after rank") && strstr(err, "returned"), "%s", err);
    cr_assert(strstr(err, "(READ, rank "), "%s", err);
  }
}

Test(sim_read, read_before_peer_wrote, .timeout = 10) {
  char err[2048];
  rd_bugs_t b = rd_none();
  b.read_before_ready = 0;
  // Out of place the peer's chunk was never written. In place it still is
  // the peer's raw input, which rank 0 copies over its own chunk 1 before
  // rank 1 has folded rank 0's operand there.
  cr_assert_eq(rd_run(b, 4, 40, 4, 0, err, sizeof(err)), ncclInternalError, "%s", err);
  cr_assert(strstr(err, "(READ, rank 1's recv[") && strstr(err, "holds nothing yet"), "%s", err);
  cr_assert_eq(rd_run(b, 4, 40, 4, 1, err, sizeof(err)), ncclInternalError, "%s", err);
  cr_assert(strstr(err, "(READ_REDUCE, recv[") &&
                strstr(err, "is rank 1's send[10], not rank 0's own input"),
            "%s", err);
}

Test(sim_read, read_reduce_twice, .timeout = 10) {
  char err[2048];
  rd_bugs_t b = rd_none();
  b.reduce_twice = 2;  // rank 2 folds rank 3 twice
  cr_assert_eq(rd_run(b, 4, 40, 4, 0, err, sizeof(err)), ncclInternalError, "%s", err);
  cr_assert(strstr(err, "(READ_REDUCE, recv[") && strstr(err, "of rank 3 reduced twice"), "%s",
            err);
}

Test(sim_read, wait_cycle_deadlocks, .timeout = 10) {
  char err[2048];
  rd_bugs_t b = rd_none();
  b.wait_first = 1;  // ranks 0 and 1 each wait for the other's SIGNAL first
  cr_assert_eq(rd_run(b, 3, 9, 4, 0, err, sizeof(err)), ncclInternalError, "%s", err);
  cr_assert(strstr(err, "deadlock"), "%s", err);
  cr_assert(strstr(err, "(WAIT from ") && strstr(err, "waits for a SIGNAL on "), "%s", err);
}

Test(sim_read, wait_without_signal, .timeout = 10) {
  char err[2048];
  rd_bugs_t b = rd_none();
  b.drop_signal = 2;
  cr_assert_eq(rd_run(b, 3, 9, 4, 0, err, sizeof(err)), ncclInternalError, "%s", err);
  cr_assert(strstr(err, "connection 2->0") && strstr(err, "a WAIT without a matching SIGNAL"), "%s",
            err);
}

// Malformed single-copy steps, rejected before any run.
static void mutate_first(const weft_coll_args_t *a, weft_schedule_t *s, void *arg) {
  (void)a;
  const weft_step_t *patch = arg;  // fields set to non-zero replace the first step's
  weft_step_t *st = &s->steps[0];
  if (patch->kind) st->kind = patch->kind;
  if (patch->flags) st->flags = patch->flags;
  if (patch->rem_peer) st->rem_peer = patch->rem_peer;
  if (patch->rem_off) st->rem_off = patch->rem_off;
  if (patch->count) st->count = patch->count;
  if (patch->dst_buf) st->dst_buf = patch->dst_buf;
}

static ncclResult_t rd_mutated_build(const weft_coll_args_t *a, weft_algo_t algo,
                                     weft_schedule_t *s, void *ctx) {
  rd_bugs_t b = rd_none();
  ncclResult_t rc = rd_allreduce_build(a, algo, s, &b);
  const mutation_t *mu = ctx;
  if (rc == ncclSuccess && a->rank == mu->rank) mu->mutate(a, s, mu->arg);
  return rc;
}

static void rd_expect_malformed(weft_step_t patch, const char *needle) {
  weft_sim_config_t c = config(WEFT_COLL_ALLREDUCE, WEFT_ALGO_READ, 3, 12, 4);
  c.capacity = 4;
  c.in_place = 1;  // send and recv share storage: a self-read can overlap its destination
  mutation_t mu = {mutate_first, &patch, 1};
  c.build = rd_mutated_build;
  c.build_ctx = &mu;
  char err[2048];
  cr_assert_eq(weft_sim_run(&c, err, sizeof(err)), ncclInternalError, "accepted: %s", err);
  cr_assert(strstr(err, needle), "expected \"%s\" in: %s", needle, err);
}

Test(sim_read, malformed_steps, .timeout = 10) {
  // Rank 1's first step is READ self send[4..+4] -> recv[4..+4], REDUCE_INPUT.
  rd_expect_malformed((weft_step_t){.rem_peer = 3}, "rem_peer 3 is not a rank");
  rd_expect_malformed((weft_step_t){.rem_off = 9}, "remote region send[9..+4] exceeds");
  rd_expect_malformed((weft_step_t){.dst_buf = WEFT_BUF_SEND}, "writes the send buffer");
  rd_expect_malformed((weft_step_t){.rem_off = 6}, "overlapping the destination");
  rd_expect_malformed((weft_step_t){.flags = WEFT_STEP_ACCUMULATE}, "ACCUMULATE belongs on");
  rd_expect_malformed((weft_step_t){.kind = WEFT_STEP_WAIT}, "recv_peer");
  rd_expect_malformed((weft_step_t){.count = 5}, "more than the slice");
}

static void bad_tokens(const weft_coll_args_t *a, weft_schedule_t *s, void *arg) {
  (void)a;
  int what = *(const int *)arg;
  for (uint32_t i = 0; i < s->nsteps; i++) {
    weft_step_t *st = &s->steps[i];
    if (st->kind != WEFT_STEP_SIGNAL) continue;
    if (what == 0) st->count = 2;                       // a SIGNAL of two tokens
    if (what == 1) st->flags = WEFT_STEP_REDUCE_INPUT;  // a flag it cannot carry
    if (what == 2) st->src_buf = WEFT_BUF_SEND;         // a buffer it does not read
    if (what == 3) st->kind = WEFT_STEP_SEND, st->src_buf = WEFT_BUF_SEND;  // data, not a token
    return;
  }
}

Test(sim_read, malformed_tokens, .timeout = 10) {
  static const char *const needles[] = {"a SIGNAL or WAIT moves one token: count must be 1, not 2",
                                        "REDUCE_INPUT belongs on SEND, COPY, READ or READ_REDUCE only",
                                        "names a source it does not read",
                                        "rank 1 sends data (step"};
  for (int what = 0; what < 4; what++) {
    weft_sim_config_t c = config(WEFT_COLL_ALLREDUCE, WEFT_ALGO_READ, 3, 12, 4);
    c.capacity = 4;
    mutation_t mu = {bad_tokens, &what, 1};
    c.build = rd_mutated_build;
    c.build_ctx = &mu;
    char err[2048];
    cr_assert_eq(weft_sim_run(&c, err, sizeof(err)), ncclInternalError, "accepted: %s", err);
    cr_assert(strstr(err, needles[what]), "expected \"%s\" in: %s", needles[what], err);
  }
}

// A READ of a collective without a reduction may not claim an operand.
static ncclResult_t rd_gather_build(const weft_coll_args_t *a, weft_algo_t algo, weft_schedule_t *s,
                                    void *ctx) {
  (void)algo;
  int flagged = *(const int *)ctx;
  for (int k = 0; k < a->nranks; k++) {
    int q = (a->rank + k) % a->nranks;
    weft_step_t st = {0};
    st.kind = WEFT_STEP_READ;
    st.send_peer = st.recv_peer = -1;
    st.rem_peer = q;
    st.rem_buf = WEFT_BUF_SEND;
    st.dst_buf = WEFT_BUF_RECV;
    st.dst_off = (uint64_t)q * a->count;
    st.count = a->count;
    st.flags = flagged && k == 1 ? WEFT_STEP_REDUCE_INPUT : 0;
    cr_assert_eq(weft_schedule_add(s, &st), ncclSuccess);
  }
  for (int k = 1; k < a->nranks; k++)
    rd_add(s, WEFT_STEP_SIGNAL, (a->rank + k) % a->nranks, 0, 0, 1);
  for (int k = 1; k < a->nranks; k++) rd_add(s, WEFT_STEP_WAIT, (a->rank + k) % a->nranks, 0, 0, 1);
  return ncclSuccess;
}

Test(sim_read, allgather_by_reads, .timeout = 10) {
  char err[2048];
  for (int flagged = 0; flagged < 2; flagged++) {
    weft_sim_config_t c = config(WEFT_COLL_ALLGATHER, WEFT_ALGO_READ, 4, 6, 6);
    c.capacity = 6;
    c.random_runs = 8;
    c.build = rd_gather_build;
    c.build_ctx = &flagged;
    for (int ip = 0; ip < 2; ip++) {
      c.in_place = ip;
      ncclResult_t rc = weft_sim_run(&c, err, sizeof(err));
      if (!flagged) {
        cr_assert_eq(rc, ncclSuccess, "%s", err);
      } else {
        cr_assert_eq(rc, ncclInternalError, "%s", err);
        cr_assert(strstr(err, "carries reduction flags"), "%s", err);
      }
    }
  }
}

// Broadcast by writes: the root copies its own buffer, WRITEs the whole
// message into every receiver and SIGNALs it; a receiver WAITs for that.
// Each defect breaks one rule of writing into a peer.
// WR_NO_WAIT drops the handshake, WR_TO_SEND aims at a send buffer,
// WR_EARLY_SIGNAL sends the token before the data.
typedef enum { WR_NONE = 0, WR_NO_WAIT, WR_TO_SEND, WR_EARLY_SIGNAL } wr_bug_t;

static ncclResult_t wr_broadcast_build(const weft_coll_args_t *a, weft_algo_t algo, weft_schedule_t *s,
                                       void *ctx) {
  (void)algo;
  wr_bug_t bug = *(const wr_bug_t *)ctx;
  int n = a->nranks, root = a->root;
  if (a->rank != root) {
    if (bug != WR_NO_WAIT) rd_add(s, WEFT_STEP_WAIT, root, 0, 0, 1);
    return ncclSuccess;
  }
  weft_step_t own = {0};
  own.kind = WEFT_STEP_READ;
  own.send_peer = own.recv_peer = -1;
  own.rem_peer = root;
  own.rem_buf = WEFT_BUF_SEND;
  own.dst_buf = WEFT_BUF_RECV;
  own.count = a->count;
  cr_assert_eq(weft_schedule_add(s, &own), ncclSuccess);
  if (bug == WR_EARLY_SIGNAL)
    for (int k = 1; k < n; k++) rd_add(s, WEFT_STEP_SIGNAL, (root + k) % n, 0, 0, 1);
  for (int k = 1; k < n; k++) {
    weft_step_t st = {0};
    st.kind = WEFT_STEP_WRITE;
    st.send_peer = st.recv_peer = -1;
    st.rem_peer = (root + k) % n;
    st.src_buf = WEFT_BUF_SEND;
    st.rem_buf = bug == WR_TO_SEND ? WEFT_BUF_SEND : WEFT_BUF_RECV;
    st.count = a->count;
    cr_assert_eq(weft_schedule_add(s, &st), ncclSuccess);
  }
  if (bug != WR_EARLY_SIGNAL && bug != WR_NO_WAIT)
    for (int k = 1; k < n; k++) rd_add(s, WEFT_STEP_SIGNAL, (root + k) % n, 0, 0, 1);
  return ncclSuccess;
}

static ncclResult_t wr_run(wr_bug_t bug, int n, size_t count, int root, int in_place, char *err, size_t errlen) {
  weft_sim_config_t c = config(WEFT_COLL_BROADCAST, WEFT_ALGO_READ, n, count, count ? count : 1);
  c.capacity = c.slice;
  c.root = root;
  c.in_place = in_place;
  c.random_runs = 8;
  c.build = wr_broadcast_build;
  c.build_ctx = &bug;
  return weft_sim_run(&c, err, errlen);
}

Test(sim_write, broadcast_by_writes_passes, .timeout = 10) {
  char err[2048];
  for (int n = 1; n <= 6; n++)
    for (int ip = 0; ip < 2; ip++)
      cr_assert_eq(wr_run(WR_NONE, n, 7, n - 1, ip, err, sizeof(err)), ncclSuccess, "%s", err);
}

Test(sim_write, write_after_peer_returned, .timeout = 10) {
  char err[2048];
  cr_assert_eq(wr_run(WR_NO_WAIT, 3, 7, 0, 0, err, sizeof(err)), ncclInternalError, "%s", err);
  cr_assert(strstr(err, "(WRITE, send[0..+7] -> rank ") && strstr(err, "writes rank") &&
                strstr(err, "returned"),
            "%s", err);
}

Test(sim_write, write_into_send_buffer, .timeout = 10) {
  char err[2048];
  cr_assert_eq(wr_run(WR_TO_SEND, 2, 7, 0, 0, err, sizeof(err)), ncclInternalError, "%s", err);
  cr_assert(strstr(err, "writes a send buffer"), "%s", err);
}

// The token overtakes the data: a receiver may return (and in the
// simulator does, in some interleaving) before the root's WRITE lands.
Test(sim_write, signal_before_write, .timeout = 10) {
  char err[2048];
  cr_assert_eq(wr_run(WR_EARLY_SIGNAL, 2, 7, 0, 0, err, sizeof(err)), ncclInternalError, "%s", err);
  cr_assert(strstr(err, "returned"), "%s", err);
}
