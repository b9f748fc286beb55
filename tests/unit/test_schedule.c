/*
 * test_schedule.c — the shape of built schedules and the buffer geometry.
 *
 * The simulator proves schedules correct; these tests pin down what they
 * look like: how many steps of which kind, how large, in how many lanes,
 * and how invalid arguments are refused.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "schedule.h"

static weft_coll_args_t args(weft_coll_t coll, int n, int rank, int root, size_t count,
                             size_t slice) {
  weft_coll_args_t a = {.coll = coll, .nranks = n, .rank = rank, .root = root, .count = count, .slice = slice,
                        .nhosts = 1};
  return a;
}

typedef struct {
  int steps, sends, recvs, kinds[WEFT_NUM_STEP_KINDS];
} tally_t;

static tally_t tally(const weft_schedule_t *s) {
  tally_t t;
  memset(&t, 0, sizeof(t));
  for (uint32_t i = 0; i < s->nsteps; i++) {
    t.steps++;
    t.sends += s->steps[i].send_peer >= 0;
    t.recvs += s->steps[i].recv_peer >= 0;
    t.kinds[s->steps[i].kind]++;
  }
  return t;
}

static weft_schedule_t build(weft_coll_args_t a, weft_algo_t algo) {
  weft_schedule_t s = {0};
  ncclResult_t rc = weft_schedule_build(&a, algo, &s);
  cr_assert_eq(rc, ncclSuccess, "%s/%s rank %d failed to build", weft_coll_name(a.coll),
               weft_algo_name(algo), a.rank);
  return s;
}

Test(schedule_ring, allreduce_step_counts, .timeout = 10) {
  for (int r = 0; r < 4; r++) {
    weft_schedule_t s = build(args(WEFT_COLL_ALLREDUCE, 4, r, 0, 64, 1000), WEFT_ALGO_RING);
    tally_t t = tally(&s);
    cr_assert_eq(s.nlanes, 1);
    cr_assert_eq(t.sends, 2 * (4 - 1));
    cr_assert_eq(t.recvs, 2 * (4 - 1));
    // The step completing this rank's chunk also starts its AllGather.
    cr_assert_eq(t.steps, 2 * 4 - 1);
    cr_assert_eq(t.kinds[WEFT_STEP_SEND], 1);
    cr_assert_eq(t.kinds[WEFT_STEP_RECV_REDUCE_SEND], 2);
    cr_assert_eq(t.kinds[WEFT_STEP_RECV_REDUCE], 0);
    cr_assert_eq(t.kinds[WEFT_STEP_RECV_REDUCE_COPY_SEND], 1);
    cr_assert_eq(t.kinds[WEFT_STEP_RECV_COPY_SEND], 2);
    cr_assert_eq(t.kinds[WEFT_STEP_RECV], 1);
    // Chunks of 16: the final reduction writes this rank's chunk.
    int i = 3;
    cr_assert_eq(s.steps[i].kind, WEFT_STEP_RECV_REDUCE_COPY_SEND);
    cr_assert_eq(s.steps[i].flags, WEFT_STEP_FINAL);
    cr_assert_eq(s.steps[i].dst_off, (uint64_t)r * 16);
    cr_assert_eq(s.steps[i].recv_peer, (r + 3) % 4);
    cr_assert_eq(s.steps[i].send_peer, (r + 1) % 4);
    cr_assert_eq(s.steps[0].flags, WEFT_STEP_REDUCE_INPUT);
    cr_assert_eq(s.steps[0].send_peer, (r + 1) % 4);
    weft_schedule_free(&s);
  }
}

Test(schedule_ring, allreduce_chunks_are_multiples_of_16, .timeout = 10) {
  // 100 elements over 4 ranks: chunks of 32, 32, 32 and 4.
  weft_schedule_t s = build(args(WEFT_COLL_ALLREDUCE, 4, 3, 0, 100, 1000), WEFT_ALGO_RING);
  int found = 0;
  for (uint32_t i = 0; i < s.nsteps; i++) {
    const weft_step_t *st = &s.steps[i];
    if (st->kind == WEFT_STEP_RECV_REDUCE_COPY_SEND) {
      cr_assert_eq(st->dst_off, 96);
      cr_assert_eq(st->count, 4);
      found++;
    }
    cr_assert(st->src_off % 16 == 0 && st->dst_off % 16 == 0,
              "step %u starts off a 16-element boundary", i);
  }
  cr_assert_eq(found, 1);
  weft_schedule_free(&s);
  // 20 elements over 4 ranks: chunks of 16 and 4; ranks 2 and 3 own nothing
  // and the steps carrying their chunks vanish.
  s = build(args(WEFT_COLL_ALLREDUCE, 4, 2, 0, 20, 1000), WEFT_ALGO_RING);
  tally_t t = tally(&s);
  cr_assert_eq(t.kinds[WEFT_STEP_RECV_REDUCE_COPY_SEND], 0);
  cr_assert_lt(t.steps, 7);
  weft_schedule_free(&s);
}

Test(schedule_ring, rounds_respect_the_slice, .timeout = 10) {
  // ReduceScatter of 10 per rank, slice 4: three rounds of n steps.
  weft_schedule_t s = build(args(WEFT_COLL_REDUCESCATTER, 3, 1, 0, 10, 4), WEFT_ALGO_RING);
  cr_assert_eq(s.nsteps, 3 * 3);
  static const uint64_t sizes[] = {4, 4, 4, 4, 4, 4, 2, 2, 2};
  for (uint32_t i = 0; i < s.nsteps; i++) cr_assert_eq(s.steps[i].count, sizes[i], "step %u", i);
  // Round 1, rank 1: send chunk 0, reduce-forward chunk 2, finish chunk 1.
  cr_assert_eq(s.steps[3].src_off, 0 * 10 + 4);
  cr_assert_eq(s.steps[4].src_off, 2 * 10 + 4);
  cr_assert_eq(s.steps[5].src_off, 1 * 10 + 4);
  cr_assert_eq(s.steps[5].dst_off, 4);
  weft_schedule_free(&s);
}

Test(schedule_ring, allgather_shape, .timeout = 10) {
  weft_schedule_t s = build(args(WEFT_COLL_ALLGATHER, 5, 2, 0, 6, 100), WEFT_ALGO_RING);
  tally_t t = tally(&s);
  cr_assert_eq(s.nlanes, 1);
  cr_assert_eq(s.steps[0].kind, WEFT_STEP_COPY);
  cr_assert_eq(s.steps[0].dst_off, 12);
  cr_assert_eq(t.kinds[WEFT_STEP_SEND], 1);
  cr_assert_eq(t.kinds[WEFT_STEP_RECV_COPY_SEND], 3);
  cr_assert_eq(t.kinds[WEFT_STEP_RECV], 1);
  cr_assert_eq(s.steps[s.nsteps - 1].dst_off, 3 * 6);  // chunk r+1 arrives last
  weft_schedule_free(&s);
}

Test(schedule_ring, single_rank_is_a_copy, .timeout = 10) {
  weft_schedule_t s = build(args(WEFT_COLL_ALLREDUCE, 1, 0, 0, 10, 4), WEFT_ALGO_RING);
  cr_assert_eq(s.nsteps, 3);
  for (uint32_t i = 0; i < s.nsteps; i++) {
    cr_assert_eq(s.steps[i].kind, WEFT_STEP_COPY);
    cr_assert_eq(s.steps[i].flags, WEFT_STEP_REDUCE_INPUT | WEFT_STEP_FINAL);
  }
  weft_schedule_free(&s);
}

Test(schedule_chain, broadcast_positions, .timeout = 10) {
  // Root 1 of 4: chain 1 -> 2 -> 3 -> 0; 10 elements in slices of 3.
  weft_schedule_t s = build(args(WEFT_COLL_BROADCAST, 4, 1, 1, 10, 3), WEFT_ALGO_CHAIN);
  tally_t t = tally(&s);
  cr_assert_eq(t.kinds[WEFT_STEP_SEND], 4);
  cr_assert_eq(t.kinds[WEFT_STEP_COPY], 4);
  cr_assert_eq(s.steps[0].send_peer, 2);
  weft_schedule_free(&s);
  s = build(args(WEFT_COLL_BROADCAST, 4, 2, 1, 10, 3), WEFT_ALGO_CHAIN);
  t = tally(&s);
  cr_assert_eq(t.kinds[WEFT_STEP_RECV_COPY_SEND], 4);
  cr_assert_eq(s.steps[0].recv_peer, 1);
  cr_assert_eq(s.steps[0].send_peer, 3);
  cr_assert_eq(s.steps[3].count, 1);
  weft_schedule_free(&s);
  s = build(args(WEFT_COLL_BROADCAST, 4, 0, 1, 10, 3), WEFT_ALGO_CHAIN);
  t = tally(&s);
  cr_assert_eq(t.kinds[WEFT_STEP_RECV], 4);
  cr_assert_eq(t.steps, 4);
  weft_schedule_free(&s);
}

Test(schedule_chain, reduce_positions, .timeout = 10) {
  // Root 0 of 3: chain 1 -> 2 -> 0.
  weft_schedule_t s = build(args(WEFT_COLL_REDUCE, 3, 1, 0, 8, 8), WEFT_ALGO_CHAIN);
  cr_assert_eq(s.nsteps, 1);
  cr_assert_eq(s.steps[0].kind, WEFT_STEP_SEND);
  cr_assert_eq(s.steps[0].flags, WEFT_STEP_REDUCE_INPUT);
  weft_schedule_free(&s);
  s = build(args(WEFT_COLL_REDUCE, 3, 2, 0, 8, 8), WEFT_ALGO_CHAIN);
  cr_assert_eq(s.steps[0].kind, WEFT_STEP_RECV_REDUCE_SEND);
  cr_assert_eq(s.steps[0].flags, 0);
  weft_schedule_free(&s);
  s = build(args(WEFT_COLL_REDUCE, 3, 0, 0, 8, 8), WEFT_ALGO_CHAIN);
  cr_assert_eq(s.steps[0].kind, WEFT_STEP_RECV_REDUCE);
  cr_assert_eq(s.steps[0].flags, WEFT_STEP_FINAL);
  cr_assert_eq(s.steps[0].recv_peer, 2);
  weft_schedule_free(&s);
}

Test(schedule_direct, alltoall_lanes, .timeout = 10) {
  weft_schedule_t s = build(args(WEFT_COLL_ALLTOALL, 4, 1, 0, 10, 4), WEFT_ALGO_DIRECT);
  cr_assert_eq(s.nlanes, 4);
  cr_assert_eq(s.steps[s.lanes[3].first].kind, WEFT_STEP_COPY);  // its own block last
  for (uint32_t l = 0; l + 1 < s.nlanes; l++) {
    cr_assert_eq(s.lanes[l].count, 6, "lane %u", l);  // 3 rounds of send + receive
    int peer = (2 + (int)l) % 4;
    for (uint32_t i = 0; i < s.lanes[l].count; i++) {
      const weft_step_t *st = &s.steps[s.lanes[l].first + i];
      cr_assert_eq(st->kind, i % 2 ? WEFT_STEP_RECV : WEFT_STEP_SEND);
      cr_assert_eq(i % 2 ? st->recv_peer : st->send_peer, peer);
      cr_assert_eq(i % 2 ? st->dst_off : st->src_off, (uint64_t)peer * 10 + (i / 2) * 4);
    }
  }
  weft_schedule_free(&s);
}

Test(schedule_direct, gather_scatter_send_recv, .timeout = 10) {
  weft_schedule_t s = build(args(WEFT_COLL_GATHER, 5, 3, 3, 7, 100), WEFT_ALGO_DIRECT);
  cr_assert_eq(s.nlanes, 5);
  cr_assert_eq(tally(&s).kinds[WEFT_STEP_RECV], 4);
  weft_schedule_free(&s);
  s = build(args(WEFT_COLL_GATHER, 5, 1, 3, 7, 100), WEFT_ALGO_DIRECT);
  cr_assert_eq(s.nlanes, 1);
  cr_assert_eq(s.nsteps, 1);
  cr_assert_eq(s.steps[0].send_peer, 3);
  weft_schedule_free(&s);
  s = build(args(WEFT_COLL_SCATTER, 5, 0, 0, 7, 100), WEFT_ALGO_DIRECT);
  cr_assert_eq(tally(&s).kinds[WEFT_STEP_SEND], 4);
  weft_schedule_free(&s);
  s = build(args(WEFT_COLL_SEND, 2, 0, 0, 9, 4), WEFT_ALGO_DIRECT);  // to itself
  cr_assert_eq(s.nsteps, 3);
  cr_assert_eq(s.steps[2].send_peer, 0);
  cr_assert_eq(s.steps[2].count, 1);
  weft_schedule_free(&s);
  s = build(args(WEFT_COLL_RECV, 2, 0, 1, 9, 4), WEFT_ALGO_DIRECT);
  cr_assert_eq(tally(&s).kinds[WEFT_STEP_RECV], 3);
  weft_schedule_free(&s);
}

// No step is empty or larger than the slice, and no lane is empty.
Test(schedule_all, bounded_nonempty_steps, .timeout = 30) {
  size_t slices[] = {1, 5, 64};
  for (int c = 0; c < WEFT_NUM_COLLS; c++)
    for (int algo = 0; algo < WEFT_NUM_ALGOS; algo++) {
      if (!weft_algo_supports((weft_algo_t)algo, (weft_coll_t)c)) continue;
      for (int n = 1; n <= 9; n++)
        for (size_t count = 0; count < 40; count += 7)
          for (int si = 0; si < 3; si++)
            for (int r = 0; r < n; r++) {
              weft_schedule_t s =
                  build(args((weft_coll_t)c, n, r, n / 2, count, slices[si]), (weft_algo_t)algo);
              for (uint32_t i = 0; i < s.nsteps; i++) {
                cr_assert_gt(s.steps[i].count, 0);
                cr_assert_leq(s.steps[i].count, slices[si]);
              }
              for (uint32_t l = 0; l < s.nlanes; l++) cr_assert_gt(s.lanes[l].count, 0);
              if (count == 0) cr_assert_eq(s.nsteps, 0);
              weft_schedule_free(&s);
            }
    }
}

Test(schedule_geometry, buffer_sizes, .timeout = 10) {
  weft_coll_args_t a = args(WEFT_COLL_ALLGATHER, 4, 2, 0, 10, 8);
  cr_assert_eq(weft_coll_send_elems(&a), 10);
  cr_assert_eq(weft_coll_recv_elems(&a), 40);
  a.coll = WEFT_COLL_REDUCESCATTER;
  cr_assert_eq(weft_coll_send_elems(&a), 40);
  cr_assert_eq(weft_coll_recv_elems(&a), 10);
  a.coll = WEFT_COLL_ALLTOALL;
  cr_assert_eq(weft_coll_send_elems(&a), 40);
  cr_assert_eq(weft_coll_recv_elems(&a), 40);
  a.coll = WEFT_COLL_REDUCE;  // rank 2 is not the root
  cr_assert_eq(weft_coll_send_elems(&a), 10);
  cr_assert_eq(weft_coll_recv_elems(&a), 0);
  a.coll = WEFT_COLL_BROADCAST;
  cr_assert_eq(weft_coll_send_elems(&a), 0);
  cr_assert_eq(weft_coll_recv_elems(&a), 10);
  a.coll = WEFT_COLL_GATHER;
  cr_assert_eq(weft_coll_recv_elems(&a), 0);
  a.root = 2;
  cr_assert_eq(weft_coll_recv_elems(&a), 40);
  a.coll = WEFT_COLL_SCATTER;
  cr_assert_eq(weft_coll_send_elems(&a), 40);
  cr_assert_eq(weft_coll_recv_elems(&a), 10);
  a.coll = WEFT_COLL_SEND;
  cr_assert_eq(weft_coll_send_elems(&a), 10);
  cr_assert_eq(weft_coll_recv_elems(&a), 0);
  a.coll = WEFT_COLL_RECV;
  cr_assert_eq(weft_coll_send_elems(&a), 0);
  cr_assert_eq(weft_coll_recv_elems(&a), 10);
}

Test(schedule_geometry, in_place_offsets, .timeout = 10) {
  int inside = -1;
  weft_coll_args_t a = args(WEFT_COLL_ALLGATHER, 4, 3, 1, 10, 8);
  cr_assert_eq(weft_coll_inplace_offset(&a, &inside), 30);
  cr_assert_eq(inside, 1);
  a.coll = WEFT_COLL_REDUCESCATTER;
  cr_assert_eq(weft_coll_inplace_offset(&a, &inside), 30);
  cr_assert_eq(inside, 0);
  a.coll = WEFT_COLL_GATHER;
  cr_assert_eq(weft_coll_inplace_offset(&a, &inside), 0);  // not the root
  a.rank = 1;
  cr_assert_eq(weft_coll_inplace_offset(&a, &inside), 10);
  cr_assert_eq(inside, 1);
  a.coll = WEFT_COLL_SCATTER;
  cr_assert_eq(weft_coll_inplace_offset(&a, &inside), 10);
  cr_assert_eq(inside, 0);
  a.coll = WEFT_COLL_ALLREDUCE;
  cr_assert_eq(weft_coll_inplace_offset(&a, NULL), 0);
}

Test(schedule_names, names_and_support, .timeout = 10) {
  cr_assert_str_eq(weft_coll_name(WEFT_COLL_ALLREDUCE), "AllReduce");
  cr_assert_str_eq(weft_coll_name(WEFT_COLL_REDUCESCATTER), "ReduceScatter");
  cr_assert_str_eq(weft_coll_name(WEFT_NUM_COLLS), "?");
  cr_assert_str_eq(weft_algo_name(WEFT_ALGO_CHAIN), "chain");
  cr_assert_str_eq(weft_algo_name(WEFT_NUM_ALGOS), "?");
  cr_assert_str_eq(weft_step_kind_name(WEFT_STEP_RECV_REDUCE_SEND), "RECV_REDUCE_SEND");
  cr_assert_str_eq(weft_step_kind_name(99), "?");
  // Algorithms per collective: ring/chain/direct for everything, plus one hop,
  // tree, recursive doubling, Rabenseifner and hier for AllReduce, and
  // single-copy schedules for the six collectives they serve.
  static const int expected[WEFT_NUM_COLLS] = {
      [WEFT_COLL_ALLREDUCE] = 8, [WEFT_COLL_BROADCAST] = 2, [WEFT_COLL_REDUCE] = 2, [WEFT_COLL_ALLGATHER] = 2,
      [WEFT_COLL_REDUCESCATTER] = 2, [WEFT_COLL_ALLTOALL] = 2, [WEFT_COLL_GATHER] = 1, [WEFT_COLL_SCATTER] = 1,
      [WEFT_COLL_SEND] = 1, [WEFT_COLL_RECV] = 1};
  int ops = 0;
  for (int c = 0; c < WEFT_NUM_COLLS; c++) {
    ops += weft_coll_has_op((weft_coll_t)c);
    int algos = 0;
    for (int a = 0; a < WEFT_NUM_ALGOS; a++)
      algos += weft_algo_supports((weft_algo_t)a, (weft_coll_t)c);
    cr_assert_eq(algos, expected[c], "%s has %d algorithms", weft_coll_name((weft_coll_t)c), algos);
  }
  cr_assert_str_eq(weft_algo_name(WEFT_ALGO_READ), "read");
  cr_assert_str_eq(weft_algo_name(WEFT_ALGO_TREE), "tree");
  cr_assert_str_eq(weft_algo_name(WEFT_ALGO_RECURSIVE), "recursive");
  cr_assert_str_eq(weft_algo_name(WEFT_ALGO_RABENSEIFNER), "rabenseifner");
  cr_assert_str_eq(weft_algo_name(WEFT_ALGO_HIER), "hier");
  cr_assert_str_eq(weft_algo_name(WEFT_ALGO_NUMA), "numa");
  cr_assert_str_eq(weft_step_kind_name(WEFT_STEP_WAIT), "WAIT");
  cr_assert_eq(ops, 3);
  cr_assert(weft_coll_has_op(WEFT_COLL_REDUCE));
  cr_assert(!weft_coll_has_op(WEFT_COLL_BROADCAST));
}

Test(schedule_errors, bad_arguments_are_refused, .timeout = 10) {
  weft_schedule_t s = {0};
  weft_coll_args_t a = args(WEFT_COLL_BROADCAST, 4, 0, 0, 10, 4);
  cr_assert_eq(weft_schedule_build(&a, WEFT_ALGO_RING, &s), ncclInvalidArgument);
  cr_assert_eq(s.nsteps, 0);
  cr_assert_null(s.steps);
  a.root = 4;
  cr_assert_eq(weft_schedule_build(&a, WEFT_ALGO_CHAIN, &s), ncclInvalidArgument);
  a.root = 0;
  a.rank = -1;
  cr_assert_eq(weft_schedule_build(&a, WEFT_ALGO_CHAIN, &s), ncclInvalidArgument);
  a.rank = 0;
  a.slice = 0;
  cr_assert_eq(weft_schedule_build(&a, WEFT_ALGO_CHAIN, &s), ncclInvalidArgument);
  a.slice = 4;
  a.nranks = 0;
  cr_assert_eq(weft_schedule_build(&a, WEFT_ALGO_CHAIN, &s), ncclInvalidArgument);
  a.nranks = 4;
  a.count = SIZE_MAX / 2;
  cr_assert_eq(weft_schedule_build(&a, WEFT_ALGO_CHAIN, &s), ncclInvalidArgument);
  a.count = 10;
  a.coll = WEFT_NUM_COLLS;
  cr_assert_eq(weft_schedule_build(&a, WEFT_ALGO_CHAIN, &s), ncclInvalidArgument);
  a.coll = WEFT_COLL_BROADCAST;
  cr_assert_eq(weft_schedule_build(&a, WEFT_NUM_ALGOS, &s), ncclInvalidArgument);
  cr_assert_eq(weft_schedule_build(NULL, WEFT_ALGO_CHAIN, &s), ncclInvalidArgument);
  cr_assert_eq(weft_schedule_build(&a, WEFT_ALGO_CHAIN, NULL), ncclInvalidArgument);
  cr_assert_eq(weft_schedule_build(&a, WEFT_ALGO_CHAIN, &s), ncclSuccess);
  cr_assert_gt(s.nsteps, 0);
  weft_schedule_free(&s);
  weft_schedule_free(&s);  // idempotent
  weft_schedule_free(NULL);
}

Test(schedule_builder, add_and_lanes, .timeout = 10) {
  weft_schedule_t s = {0};
  weft_step_t st = {0};
  st.kind = WEFT_STEP_COPY;
  st.src_buf = WEFT_BUF_SEND;
  st.dst_buf = WEFT_BUF_RECV;
  st.send_peer = st.recv_peer = -1;
  cr_assert_eq(weft_schedule_add(&s, &st), ncclSuccess);  // count 0: dropped
  cr_assert_eq(s.nsteps, 0);
  cr_assert_eq(weft_schedule_lane_begin(&s), ncclSuccess);
  cr_assert_eq(weft_schedule_lane_begin(&s), ncclSuccess);  // empty lane reused
  cr_assert_eq(s.nlanes, 1);
  st.count = 10;
  st.src_off = 100;
  st.dst_off = 200;
  cr_assert_eq(weft_schedule_add_split(&s, &st, 4), ncclSuccess);
  cr_assert_eq(s.nsteps, 3);
  cr_assert_eq(s.lanes[0].count, 3);
  cr_assert_eq(s.steps[2].count, 2);
  cr_assert_eq(s.steps[2].src_off, 108);
  cr_assert_eq(s.steps[2].dst_off, 208);
  cr_assert_eq(weft_schedule_add_split(&s, &st, 0), ncclInvalidArgument);
  cr_assert_eq(weft_schedule_lane_begin(&s), ncclSuccess);
  for (int i = 0; i < 1000; i++) cr_assert_eq(weft_schedule_add(&s, &st), ncclSuccess);
  cr_assert_eq(s.nlanes, 2);
  cr_assert_eq(s.lanes[1].first, 3);
  cr_assert_eq(s.lanes[1].count, 1000);
  weft_schedule_free(&s);
  cr_assert_eq(s.nlanes, 0);
}
