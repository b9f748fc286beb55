/*
 * oneshot.c — AllReduce for small counts in one hop.
 *
 * Every rank sends its (prescaled) input to every rank, itself included,
 * then folds what it received in rank order 0, 1, ..., n-1 into its receive
 * buffer. One hop instead of the ring's 2(n-1), at the price of n times the
 * traffic, which is what small messages want. Because every rank folds the
 * same values in the same order, results are bitwise identical everywhere.
 *
 * Large counts go round in rounds of at most `slice` elements: a round's
 * sends all go out before any of its receives, so a rank never waits for
 * data that is not already on its way (no deadlock with one slice of room),
 * and in place the receive buffer is overwritten only after the round's
 * input was sent.
 */
#include "checks.h"
#include "schedule.h"

static ncclResult_t oneshot_round(weft_schedule_t *s, const weft_coll_args_t *a, uint64_t off,
                                  uint64_t count) {
  int n = a->nranks;
  weft_step_t st = {0};
  st.kind = WEFT_STEP_SEND;
  st.src_buf = WEFT_BUF_SEND;
  st.flags = WEFT_STEP_REDUCE_INPUT;
  st.recv_peer = -1;
  st.src_off = off;
  st.count = count;
  // Start with the next rank so that ranks do not all write to rank 0 first.
  for (int k = 1; k <= n; k++) {
    st.send_peer = (a->rank + k) % n;
    WEFTCHECK(weft_schedule_add(s, &st));
  }
  st = (weft_step_t){0};
  st.kind = WEFT_STEP_RECV;
  st.dst_buf = WEFT_BUF_RECV;
  st.send_peer = -1;
  st.recv_peer = 0;
  st.dst_off = off;
  st.count = count;
  WEFTCHECK(weft_schedule_add(s, &st));
  st.kind = WEFT_STEP_RECV_REDUCE;
  st.src_buf = WEFT_BUF_RECV;
  st.src_off = off;
  for (int p = 1; p < n; p++) {
    st.recv_peer = p;
    st.flags = WEFT_STEP_ACCUMULATE | (p == n - 1 ? WEFT_STEP_FINAL : 0);
    WEFTCHECK(weft_schedule_add(s, &st));
  }
  return ncclSuccess;
}

ncclResult_t weft_oneshot_build(const weft_coll_args_t *a, weft_schedule_t *s) {
  if (a->coll != WEFT_COLL_ALLREDUCE) {
    WARN("oneshot: cannot run %s", weft_coll_name(a->coll));
    return ncclInvalidArgument;
  }
  WEFTCHECK(weft_schedule_lane_begin(s));
  if (a->nranks == 1) {  // nothing to exchange: the input, transformed, is the result
    weft_step_t st = {.kind = WEFT_STEP_COPY, .src_buf = WEFT_BUF_SEND, .dst_buf = WEFT_BUF_RECV,
                      .flags = WEFT_STEP_REDUCE_INPUT | WEFT_STEP_FINAL, .send_peer = -1, .recv_peer = -1,
                      .count = a->count};
    return weft_schedule_add_split(s, &st, a->slice);
  }
  for (uint64_t off = 0; off < a->count; off += a->slice) {
    uint64_t count = a->count - off < a->slice ? a->count - off : a->slice;
    WEFTCHECK(oneshot_round(s, a, off, count));
  }
  return ncclSuccess;
}
