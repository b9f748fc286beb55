/*
 * chain.c — pipelined chains in ring order: Broadcast and Reduce.
 *
 * Broadcast flows root -> root+1 -> ... -> root-1; each rank keeps a copy and
 * forwards it. Reduce flows root+1 -> ... -> root; each rank adds its operand
 * and forwards the partial sum, and the root completes it. "+1" is the next
 * rank in the ring order of ring.c (layout.h: each host's ranks side by
 * side, in the communicator's order from the topology) — so a chain over
 * several hosts keeps each host's ranks together. A chain has no
 * cycle, so it cannot deadlock whatever the connection capacity; it is still
 * cut into slice-sized steps so a piece can move on before the next arrives,
 * and so every schedule obeys the same bound on a step's size.
 */
#include "checks.h"
#include "layout.h"
#include "schedule.h"

// This rank's neighbours in ring order, and its distance after the root.
typedef struct {
  int next, prev, pos;
} chain_t;

static chain_t chain_of(const weft_coll_args_t *a, const weft_layout_t *lay) {
  int n = a->nranks, me = weft_layout_pos(lay, a->rank);
  chain_t c = {.next = weft_layout_rank_at(lay, (me + 1) % n),
               .prev = weft_layout_rank_at(lay, (me + n - 1) % n),
               .pos = (me - weft_layout_pos(lay, a->root) + n) % n};
  return c;
}

static ncclResult_t chain_broadcast(const weft_coll_args_t *a, const chain_t *c, weft_schedule_t *s) {
  int n = a->nranks, pos = c->pos;
  weft_step_t st = {0};
  st.send_peer = st.recv_peer = -1;
  st.count = a->count;
  if (pos == 0) {
    // Each piece goes down the chain, then into the root's own result (a copy
    // the engine skips in place).
    weft_step_t cp = st;
    cp.kind = WEFT_STEP_COPY;
    cp.src_buf = WEFT_BUF_SEND;
    cp.dst_buf = WEFT_BUF_RECV;
    st.kind = WEFT_STEP_SEND;
    st.src_buf = WEFT_BUF_SEND;
    st.send_peer = c->next;
    for (uint64_t off = 0; off < a->count; off += a->slice) {
      uint64_t len = a->count - off < a->slice ? a->count - off : a->slice;
      st.src_off = cp.src_off = cp.dst_off = off;
      st.count = cp.count = len;
      if (n > 1) WEFTCHECK(weft_schedule_add(s, &st));
      WEFTCHECK(weft_schedule_add(s, &cp));
    }
    return ncclSuccess;
  }
  st.dst_buf = WEFT_BUF_RECV;
  st.recv_peer = c->prev;
  if (pos < n - 1) {
    st.kind = WEFT_STEP_RECV_COPY_SEND;
    st.send_peer = c->next;
  } else {
    st.kind = WEFT_STEP_RECV;
  }
  return weft_schedule_add_split(s, &st, a->slice);
}

static ncclResult_t chain_reduce(const weft_coll_args_t *a, const chain_t *c, weft_schedule_t *s) {
  int n = a->nranks, pos = (c->pos - 1 + n) % n;
  weft_step_t st = {0};
  st.src_buf = WEFT_BUF_SEND;
  st.send_peer = st.recv_peer = -1;
  st.count = a->count;
  if (n == 1) {
    st.kind = WEFT_STEP_COPY;
    st.dst_buf = WEFT_BUF_RECV;
    st.flags = WEFT_STEP_REDUCE_INPUT | WEFT_STEP_FINAL;
    return weft_schedule_add_split(s, &st, a->slice);
  }
  if (pos == 0) {
    st.kind = WEFT_STEP_SEND;
    st.flags = WEFT_STEP_REDUCE_INPUT;
    st.send_peer = c->next;
  } else if (pos < n - 1) {
    st.kind = WEFT_STEP_RECV_REDUCE_SEND;
    st.recv_peer = c->prev;
    st.send_peer = c->next;
  } else {
    st.kind = WEFT_STEP_RECV_REDUCE;  // the root
    st.dst_buf = WEFT_BUF_RECV;
    st.flags = WEFT_STEP_FINAL;
    st.recv_peer = c->prev;
  }
  return weft_schedule_add_split(s, &st, a->slice);
}

ncclResult_t weft_chain_neighbours(const weft_coll_args_t *a, int *prev, int *next, int *pos) {
  weft_layout_t lay;
  WEFTCHECK(weft_layout_init(&lay, a, 0));
  chain_t c = chain_of(a, &lay);
  weft_layout_free(&lay);
  *prev = c.prev, *next = c.next, *pos = c.pos;
  return ncclSuccess;
}

ncclResult_t weft_chain_build(const weft_coll_args_t *a, weft_schedule_t *s) {
  if (a->coll != WEFT_COLL_BROADCAST && a->coll != WEFT_COLL_REDUCE) {
    WARN("chain: cannot run %s", weft_coll_name(a->coll));
    return ncclInvalidArgument;
  }
  weft_layout_t lay;
  ncclResult_t res = weft_layout_init(&lay, a, 0);
  if (res == ncclSuccess) res = weft_schedule_lane_begin(s);
  if (res == ncclSuccess) {
    chain_t c = chain_of(a, &lay);
    res = a->coll == WEFT_COLL_BROADCAST ? chain_broadcast(a, &c, s) : chain_reduce(a, &c, s);
  }
  weft_layout_free(&lay);
  return res;
}
