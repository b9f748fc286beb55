/*
 * read.c — single-copy schedules: ranks read each other's buffers.
 *
 * Where the transport lets a rank read a peer's memory (cross-memory attach
 * between processes, plain loads between threads), data crosses once,
 * straight from the owner's buffer into the reader's, instead of through a
 * connection's slots (two copies). Tokens (SIGNAL/WAIT) carry the ordering:
 * "my reduced chunk is ready" before anyone reads it, and "I am done reading
 * you" before a rank may return and let its caller reuse the buffers.
 *
 * AllReduce: rank r folds chunk r over every rank's send buffer (only rank r
 * computes chunk r, so every rank ends with the same bits), tells everyone it
 * is ready, then reads every other rank's finished chunk. ReduceScatter is the first half;
 * AllGather reads every rank's send buffer; Broadcast reads the root's;
 * Reduce folds on the root. Folding runs piece by piece (`slice` elements)
 * so each output piece stays in cache while every rank's operand is added.
 * In place, a chunk is overwritten only after its readers have signalled.
 */
#include "checks.h"
#include "schedule.h"

static weft_step_t blank(void) {
  weft_step_t st = {0};
  st.send_peer = st.recv_peer = st.read_peer = -1;
  return st;
}

static ncclResult_t token(weft_schedule_t *s, int kind, int peer) {
  weft_step_t st = blank();
  st.kind = (uint8_t)kind;
  if (kind == WEFT_STEP_SIGNAL) st.send_peer = peer;
  else st.recv_peer = peer;
  st.count = 1;
  return weft_schedule_add(s, &st);
}

// Tokens to / from every other rank.
static ncclResult_t signal_all(weft_schedule_t *s, const weft_coll_args_t *a) {
  for (int k = 1; k < a->nranks; k++) WEFTCHECK(token(s, WEFT_STEP_SIGNAL, (a->rank + k) % a->nranks));
  return ncclSuccess;
}

static ncclResult_t wait_all(weft_schedule_t *s, const weft_coll_args_t *a) {
  for (int k = 1; k < a->nranks; k++) WEFTCHECK(token(s, WEFT_STEP_WAIT, (a->rank - k + a->nranks) % a->nranks));
  return ncclSuccess;
}

// recv[dst_off..] = fold of every rank's send[src_off..], piece by piece.
// The first step combines this rank's own operand (which in place shares
// memory with the output, so it must be read first) with the next rank's;
// the others add one rank each. Only this rank folds this region, so the
// order is fixed for a given call.
static ncclResult_t fold(weft_schedule_t *s, const weft_coll_args_t *a, uint64_t src_off, uint64_t dst_off,
                         uint64_t count) {
  int n = a->nranks;
  for (uint64_t off = 0; off < count; off += a->slice) {
    uint64_t len = count - off < a->slice ? count - off : a->slice;
    weft_step_t st = blank();
    st.dst_buf = WEFT_BUF_RECV;
    st.dst_off = dst_off + off;
    st.rem_buf = WEFT_BUF_SEND;
    st.rem_off = src_off + off;
    st.count = len;
    if (n == 1) {  // the operand, transformed, is the result
      st.kind = WEFT_STEP_READ;
      st.flags = WEFT_STEP_REDUCE_INPUT | WEFT_STEP_FINAL;
      st.read_peer = a->rank;
      WEFTCHECK(weft_schedule_add(s, &st));
      continue;
    }
    for (int k = 1; k < n; k++) {
      st.kind = WEFT_STEP_READ_REDUCE;
      st.read_peer = (a->rank + k) % n;
      st.flags = (uint8_t)((k == 1 ? WEFT_STEP_REDUCE_INPUT : WEFT_STEP_ACCUMULATE) |
                           (k == n - 1 ? WEFT_STEP_FINAL : 0));
      st.src_buf = k == 1 ? WEFT_BUF_SEND : WEFT_BUF_RECV;
      st.src_off = k == 1 ? src_off + off : dst_off + off;
      WEFTCHECK(weft_schedule_add(s, &st));
    }
  }
  return ncclSuccess;
}

// Copy `count` elements of peer's (buf, off) into recv[dst_off..].
static ncclResult_t read_copy(weft_schedule_t *s, const weft_coll_args_t *a, int peer, int buf, uint64_t off,
                              uint64_t dst_off, uint64_t count) {
  weft_step_t st = blank();
  st.kind = WEFT_STEP_READ;
  st.read_peer = peer;
  st.rem_buf = (uint8_t)buf;
  st.rem_off = off;
  st.dst_buf = WEFT_BUF_RECV;
  st.dst_off = dst_off;
  st.count = count;
  return weft_schedule_add_split(s, &st, a->slice);
}

static uint64_t chunk_len(uint64_t chunk, uint64_t total, int j) {
  uint64_t start = (uint64_t)j * chunk;
  return start >= total ? 0 : (total - start < chunk ? total - start : chunk);
}

static ncclResult_t read_all_reduce(weft_schedule_t *s, const weft_coll_args_t *a) {
  int n = a->nranks, r = a->rank;
  uint64_t chunk = (a->count + (uint64_t)n - 1) / (uint64_t)n;
  chunk = (chunk + 15) / 16 * 16;
  WEFTCHECK(fold(s, a, (uint64_t)r * chunk, (uint64_t)r * chunk, chunk_len(chunk, a->count, r)));
  WEFTCHECK(signal_all(s, a));  // chunk r is final
  for (int k = 1; k < n; k++) {
    int q = (r - k + n) % n;
    WEFTCHECK(token(s, WEFT_STEP_WAIT, q));
    uint64_t len = chunk_len(chunk, a->count, q);
    if (len > 0) WEFTCHECK(read_copy(s, a, q, WEFT_BUF_RECV, (uint64_t)q * chunk, (uint64_t)q * chunk, len));
  }
  WEFTCHECK(signal_all(s, a));  // done reading everyone
  return wait_all(s, a);
}

static ncclResult_t read_reduce_scatter(weft_schedule_t *s, const weft_coll_args_t *a) {
  WEFTCHECK(fold(s, a, (uint64_t)a->rank * a->count, 0, a->count));
  WEFTCHECK(signal_all(s, a));
  return wait_all(s, a);
}

static ncclResult_t read_all_gather(weft_schedule_t *s, const weft_coll_args_t *a) {
  int n = a->nranks, r = a->rank;
  for (int k = 0; k < n; k++) {
    int q = (r + k) % n;  // own block first (a no-op in place)
    WEFTCHECK(read_copy(s, a, q, WEFT_BUF_SEND, 0, (uint64_t)q * a->count, a->count));
  }
  WEFTCHECK(signal_all(s, a));
  return wait_all(s, a);
}

static ncclResult_t read_broadcast(weft_schedule_t *s, const weft_coll_args_t *a) {
  WEFTCHECK(read_copy(s, a, a->root, WEFT_BUF_SEND, 0, 0, a->count));
  if (a->rank != a->root) return token(s, WEFT_STEP_SIGNAL, a->root);
  return wait_all(s, a);  // the root returns once everyone has its data
}

static ncclResult_t read_reduce(weft_schedule_t *s, const weft_coll_args_t *a) {
  if (a->rank != a->root) return token(s, WEFT_STEP_WAIT, a->root);
  WEFTCHECK(fold(s, a, 0, 0, a->count));
  return signal_all(s, a);
}

ncclResult_t weft_read_build(const weft_coll_args_t *a, weft_schedule_t *s) {
  WEFTCHECK(weft_schedule_lane_begin(s));
  if (a->count == 0) return ncclSuccess;  // nothing is read, so no one needs to wait
  switch (a->coll) {
    case WEFT_COLL_ALLREDUCE: return read_all_reduce(s, a);
    case WEFT_COLL_REDUCESCATTER: return read_reduce_scatter(s, a);
    case WEFT_COLL_ALLGATHER: return read_all_gather(s, a);
    case WEFT_COLL_BROADCAST: return read_broadcast(s, a);
    case WEFT_COLL_REDUCE: return read_reduce(s, a);
    default: WARN("read: cannot run %s", weft_coll_name(a->coll)); return ncclInvalidArgument;
  }
}
