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
 * AllGather pushes: each rank copies its block into its own output and
 * WRITEs it into every peer's, slice by slice, so the block is read from
 * memory once and then from cache; pulling would read every peer's block
 * cold. Reduce folds on the root.
 * Broadcast splits every receiver's copy between two cores: the receiver
 * reads the head of the root's buffer while the root writes the tail into
 * the receiver's (WRITE), a 1/n share each, so that with the root otherwise
 * idle (in place) every rank copies (n-1)/n of the message instead of one
 * core doing all of it. Folding runs piece by piece (`slice` elements)
 * so each output piece stays in cache while every rank's operand is added.
 * In place, a chunk is overwritten only after its readers have signalled.
 */
#include "checks.h"
#include "schedule.h"

static weft_step_t blank(void) {
  weft_step_t st = {0};
  st.send_peer = st.recv_peer = st.rem_peer = -1;
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
      st.rem_peer = a->rank;
      WEFTCHECK(weft_schedule_add(s, &st));
      continue;
    }
    for (int k = 1; k < n; k++) {
      st.kind = WEFT_STEP_READ_REDUCE;
      st.rem_peer = (a->rank + k) % n;
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
  st.rem_peer = peer;
  st.rem_buf = (uint8_t)buf;
  st.rem_off = off;
  st.dst_buf = WEFT_BUF_RECV;
  st.dst_off = dst_off;
  st.count = count;
  return weft_schedule_add_split(s, &st, a->slice);
}

// Copy `count` elements of this rank's send[src_off..] into peer's recv[rem_off..].
static ncclResult_t write_to(weft_schedule_t *s, const weft_coll_args_t *a, int peer, uint64_t src_off,
                             uint64_t rem_off, uint64_t count) {
  weft_step_t st = blank();
  st.kind = WEFT_STEP_WRITE;
  st.rem_peer = peer;
  st.src_buf = WEFT_BUF_SEND;
  st.src_off = src_off;
  st.rem_buf = WEFT_BUF_RECV;
  st.rem_off = rem_off;
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
  uint64_t mine = (uint64_t)r * a->count;
  for (uint64_t off = 0; off < a->count; off += a->slice) {
    uint64_t len = a->count - off < a->slice ? a->count - off : a->slice;
    WEFTCHECK(read_copy(s, a, r, WEFT_BUF_SEND, off, mine + off, len));  // a no-op in place
    for (int k = 1; k < n; k++) WEFTCHECK(write_to(s, a, (r + k) % n, off, mine + off, len));
  }
  WEFTCHECK(signal_all(s, a));  // my block is in every output
  return wait_all(s, a);        // and every block is in mine
}

// The tail of a Broadcast the root writes into each receiver: 1/n of it.
static uint64_t pushed_tail(const weft_coll_args_t *a) {
  return a->nranks > 1 ? a->count / (uint64_t)a->nranks / 16 * 16 : 0;
}

static ncclResult_t read_broadcast(weft_schedule_t *s, const weft_coll_args_t *a) {
  int n = a->nranks, root = a->root;
  uint64_t tail = pushed_tail(a), head = a->count - tail;
  if (a->rank != root) {
    WEFTCHECK(read_copy(s, a, root, WEFT_BUF_SEND, 0, 0, head));
    WEFTCHECK(token(s, WEFT_STEP_SIGNAL, root));  // done reading the root
    return tail > 0 ? token(s, WEFT_STEP_WAIT, root) : ncclSuccess;  // the root's share has landed
  }
  WEFTCHECK(read_copy(s, a, root, WEFT_BUF_SEND, 0, 0, a->count));  // out of place: own copy
  for (int k = 1; tail > 0 && k < n; k++) WEFTCHECK(write_to(s, a, (root + k) % n, head, head, tail));
  for (int k = 1; tail > 0 && k < n; k++) WEFTCHECK(token(s, WEFT_STEP_SIGNAL, (root + k) % n));
  return wait_all(s, a);  // the root returns once everyone has its data
}

static ncclResult_t read_reduce(weft_schedule_t *s, const weft_coll_args_t *a) {
  if (a->rank != a->root) return token(s, WEFT_STEP_WAIT, a->root);
  WEFTCHECK(fold(s, a, 0, 0, a->count));
  return signal_all(s, a);
}

// AlltoAll pushes: each rank writes its block for q into q's output, the
// rank's own block by a local copy. In place the engine has set the input
// aside (weft_algo_stages_send), so the writes land on nothing still needed.
static ncclResult_t read_alltoall(weft_schedule_t *s, const weft_coll_args_t *a) {
  int n = a->nranks, r = a->rank;
  uint64_t c = a->count, mine = (uint64_t)r * c;
  for (uint64_t off = 0; off < c; off += a->slice) {
    uint64_t len = c - off < a->slice ? c - off : a->slice;
    WEFTCHECK(read_copy(s, a, r, WEFT_BUF_SEND, mine + off, mine + off, len));
    for (int k = 1; k < n; k++) {
      int q = (r + k) % n;
      WEFTCHECK(write_to(s, a, q, (uint64_t)q * c + off, mine + off, len));
    }
  }
  WEFTCHECK(signal_all(s, a));  // my blocks are in every output
  return wait_all(s, a);        // and every block for me is in mine
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
    case WEFT_COLL_ALLTOALL: return read_alltoall(s, a);
    default: WARN("read: cannot run %s", weft_coll_name(a->coll)); return ncclInvalidArgument;
  }
}
