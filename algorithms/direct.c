/*
 * direct.c — one lane per peer: AlltoAll, Gather, Scatter, Send and Recv.
 *
 * Every pair of ranks talks over its own connections, so lanes never wait on
 * each other. An AlltoAll lane alternates "send my next piece of your block,
 * then receive your next piece of mine": the send reads a region before the
 * receive overwrites it (in place, block p of sendbuff is block p of
 * recvbuff), and both sides send first, so each waits only for data the
 * other has already sent. The rank's own block is a local copy, which the
 * engine skips in place; Gather and Scatter use the same copy on the root.
 */
#include "checks.h"
#include "schedule.h"

static ncclResult_t add_lane(weft_schedule_t *s, const weft_step_t *st, size_t slice) {
  WEFTCHECK(weft_schedule_lane_begin(s));
  return weft_schedule_add_split(s, st, slice);
}

// One lane copying send[src_off..] -> recv[dst_off..].
static ncclResult_t copy_lane(weft_schedule_t *s, const weft_coll_args_t *a, uint64_t src_off,
                              uint64_t dst_off) {
  weft_step_t st = {0};
  st.kind = WEFT_STEP_COPY;
  st.src_buf = WEFT_BUF_SEND;
  st.dst_buf = WEFT_BUF_RECV;
  st.send_peer = st.recv_peer = -1;
  st.src_off = src_off;
  st.dst_off = dst_off;
  st.count = a->count;
  return add_lane(s, &st, a->slice);
}

static weft_step_t send_step(int peer, uint64_t src_off, uint64_t count) {
  weft_step_t st = {0};
  st.kind = WEFT_STEP_SEND;
  st.src_buf = WEFT_BUF_SEND;
  st.send_peer = peer;
  st.recv_peer = -1;
  st.src_off = src_off;
  st.count = count;
  return st;
}

static weft_step_t recv_step(int peer, uint64_t dst_off, uint64_t count) {
  weft_step_t st = {0};
  st.kind = WEFT_STEP_RECV;
  st.dst_buf = WEFT_BUF_RECV;
  st.send_peer = -1;
  st.recv_peer = peer;
  st.dst_off = dst_off;
  st.count = count;
  return st;
}

static ncclResult_t direct_alltoall(const weft_coll_args_t *a, weft_schedule_t *s) {
  int n = a->nranks, r = a->rank;
  uint64_t c = a->count;
  // Peers in ring order from r+1 spread the first pieces over distinct pairs.
  for (int i = 1; i < n; i++) {
    int p = (r + i) % n;
    uint64_t block = (uint64_t)p * c;
    WEFTCHECK(weft_schedule_lane_begin(s));
    for (uint64_t off = 0; off < c; off += a->slice) {
      uint64_t len = c - off < a->slice ? c - off : a->slice;
      weft_step_t snd = send_step(p, block + off, len), rcv = recv_step(p, block + off, len);
      WEFTCHECK(weft_schedule_add(s, &snd));
      WEFTCHECK(weft_schedule_add(s, &rcv));
    }
  }
  // Its own block last: the first pass puts the peers' blocks on the wire before copying it.
  return copy_lane(s, a, (uint64_t)r * c, (uint64_t)r * c);
}

static ncclResult_t direct_gather(const weft_coll_args_t *a, weft_schedule_t *s) {
  int n = a->nranks, r = a->rank, root = a->root;
  uint64_t c = a->count;
  if (r != root) {
    weft_step_t st = send_step(root, 0, c);
    return add_lane(s, &st, a->slice);
  }
  WEFTCHECK(copy_lane(s, a, 0, (uint64_t)root * c));
  for (int i = 1; i < n; i++) {
    int p = (root + i) % n;
    weft_step_t st = recv_step(p, (uint64_t)p * c, c);
    WEFTCHECK(add_lane(s, &st, a->slice));
  }
  return ncclSuccess;
}

static ncclResult_t direct_scatter(const weft_coll_args_t *a, weft_schedule_t *s) {
  int n = a->nranks, r = a->rank, root = a->root;
  uint64_t c = a->count;
  if (r != root) {
    weft_step_t st = recv_step(root, 0, c);
    return add_lane(s, &st, a->slice);
  }
  WEFTCHECK(copy_lane(s, a, (uint64_t)root * c, 0));
  for (int i = 1; i < n; i++) {
    int p = (root + i) % n;
    weft_step_t st = send_step(p, (uint64_t)p * c, c);
    WEFTCHECK(add_lane(s, &st, a->slice));
  }
  return ncclSuccess;
}

ncclResult_t weft_direct_build(const weft_coll_args_t *a, weft_schedule_t *s) {
  weft_step_t st;
  switch (a->coll) {
    case WEFT_COLL_ALLTOALL: return direct_alltoall(a, s);
    case WEFT_COLL_GATHER: return direct_gather(a, s);
    case WEFT_COLL_SCATTER: return direct_scatter(a, s);
    case WEFT_COLL_SEND: st = send_step(a->peer, 0, a->count); return add_lane(s, &st, a->slice);
    case WEFT_COLL_RECV: st = recv_step(a->peer, 0, a->count); return add_lane(s, &st, a->slice);
    default: WARN("direct: cannot run %s", weft_coll_name(a->coll)); return ncclInvalidArgument;
  }
}
