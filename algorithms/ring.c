/*
 * ring.c — ring schedules: ReduceScatter, AllGather, and AllReduce as the
 * first followed by the second (the step that completes a chunk's reduction
 * also sends it on, RECV_REDUCE_COPY_SEND, so the result is not read back).
 *
 * Data travels from each rank to next = r+1 and arrives from prev = r-1.
 * The buffer is cut into n chunks; in a ReduceScatter pass the partial sum of
 * chunk j starts at rank j+1, gathers one operand per hop and completes at
 * rank j after n-1 hops; in an AllGather pass chunk j starts at rank j and is
 * copied onward until rank j-1 has it. Large chunks go round in rounds of
 * pieces of at most `slice` elements, each round a full pass, so no step
 * carries more than a slice. A step receives and sends at once, so a ring
 * needs connections with room for two slices (weft_schedule_min_capacity).
 * AllReduce chunks are multiples of 16 elements, keeping chunk boundaries
 * aligned for vector reductions. Everything is one lane.
 */
#include "checks.h"
#include "schedule.h"

// Chunk j of a buffer is [j*chunk, min((j+1)*chunk, total)), possibly empty.
typedef struct {
  const weft_coll_args_t *a;
  size_t chunk, total;
} ring_geom_t;

static uint64_t chunk_start(const ring_geom_t *g, int j) { return (uint64_t)j * g->chunk; }

// Elements of chunk j's piece that starts `off` elements into the chunk.
static uint64_t piece_len(const ring_geom_t *g, int j, uint64_t off) {
  uint64_t start = chunk_start(g, j) + off, end = chunk_start(g, j) + g->chunk;
  if (end > g->total) end = g->total;
  if (start >= end) return 0;
  return end - start < g->a->slice ? end - start : g->a->slice;
}

static int ring_mod(int v, int n) { return ((v % n) + n) % n; }

// One ReduceScatter round over the pieces at `off`: partial sums read the
// send buffer; the completed chunk r piece lands at recv[dst_off]. With
// `forward`, the last step also sends that piece on (the first step of an
// AllReduce's AllGather round, fused so the result is not read back).
static ncclResult_t rs_round(weft_schedule_t *s, const ring_geom_t *g, uint64_t off,
                             uint64_t dst_off, int forward) {
  int n = g->a->nranks, r = g->a->rank, next = (r + 1) % n, prev = (r + n - 1) % n;
  weft_step_t st = {0};
  int j = ring_mod(r - 1, n);
  st.kind = WEFT_STEP_SEND;
  st.src_buf = WEFT_BUF_SEND;
  st.flags = WEFT_STEP_REDUCE_INPUT;
  st.send_peer = next;
  st.recv_peer = -1;
  st.src_off = chunk_start(g, j) + off;
  st.count = piece_len(g, j, off);
  WEFTCHECK(weft_schedule_add(s, &st));
  for (int k = 1; k <= n - 2; k++) {
    j = ring_mod(r - 1 - k, n);
    st.kind = WEFT_STEP_RECV_REDUCE_SEND;
    st.flags = 0;
    st.recv_peer = prev;
    st.src_off = chunk_start(g, j) + off;
    st.count = piece_len(g, j, off);
    WEFTCHECK(weft_schedule_add(s, &st));
  }
  st.kind = forward ? WEFT_STEP_RECV_REDUCE_COPY_SEND : WEFT_STEP_RECV_REDUCE;
  st.dst_buf = WEFT_BUF_RECV;
  st.flags = WEFT_STEP_FINAL;
  st.send_peer = forward ? next : -1;
  st.recv_peer = prev;
  st.src_off = chunk_start(g, r) + off;
  st.dst_off = dst_off;
  st.count = piece_len(g, r, off);
  return weft_schedule_add(s, &st);
}

// One AllGather round over the pieces at `off`: this rank's own piece is
// read from (own_buf, own_off) — unless own_buf is WEFT_BUF_NONE, when a
// fused ReduceScatter step already sent it; every other chunk's piece
// lands in recv.
static ncclResult_t ag_round(weft_schedule_t *s, const ring_geom_t *g, uint64_t off,
                             weft_buf_t own_buf, uint64_t own_off) {
  int n = g->a->nranks, r = g->a->rank, next = (r + 1) % n, prev = (r + n - 1) % n;
  weft_step_t st = {0};
  st.send_peer = next;
  if (own_buf != WEFT_BUF_NONE) {
    st.kind = WEFT_STEP_SEND;
    st.src_buf = (uint8_t)own_buf;
    st.recv_peer = -1;
    st.src_off = own_off;
    st.count = piece_len(g, r, off);
    WEFTCHECK(weft_schedule_add(s, &st));
  }
  st.src_buf = WEFT_BUF_NONE;
  st.src_off = 0;
  st.dst_buf = WEFT_BUF_RECV;
  st.recv_peer = prev;
  for (int k = 1; k <= n - 2; k++) {
    int j = ring_mod(r - k, n);
    st.kind = WEFT_STEP_RECV_COPY_SEND;
    st.dst_off = chunk_start(g, j) + off;
    st.count = piece_len(g, j, off);
    WEFTCHECK(weft_schedule_add(s, &st));
  }
  int j = (r + 1) % n;
  st.kind = WEFT_STEP_RECV;
  st.send_peer = -1;
  st.dst_off = chunk_start(g, j) + off;
  st.count = piece_len(g, j, off);
  return weft_schedule_add(s, &st);
}

// Local copy send[src_off..] -> recv[dst_off..], split into slices.
static ncclResult_t local_copy(weft_schedule_t *s, const weft_coll_args_t *a, uint64_t src_off,
                               uint64_t dst_off, uint64_t count, uint8_t flags) {
  weft_step_t st = {0};
  st.kind = WEFT_STEP_COPY;
  st.src_buf = WEFT_BUF_SEND;
  st.dst_buf = WEFT_BUF_RECV;
  st.flags = flags;
  st.send_peer = st.recv_peer = -1;
  st.src_off = src_off;
  st.dst_off = dst_off;
  st.count = count;
  return weft_schedule_add_split(s, &st, a->slice);
}

static ncclResult_t ring_reduce_scatter(const weft_coll_args_t *a, weft_schedule_t *s) {
  if (a->nranks == 1)
    return local_copy(s, a, 0, 0, a->count, WEFT_STEP_REDUCE_INPUT | WEFT_STEP_FINAL);
  ring_geom_t g = {a, a->count, a->count * (size_t)a->nranks};
  for (uint64_t off = 0; off < a->count; off += a->slice) WEFTCHECK(rs_round(s, &g, off, off, 0));
  return ncclSuccess;
}

static ncclResult_t ring_all_gather(const weft_coll_args_t *a, weft_schedule_t *s) {
  // Own contribution first; in place this copy is the identity and is skipped.
  WEFTCHECK(local_copy(s, a, 0, (uint64_t)a->rank * a->count, a->count, 0));
  if (a->nranks == 1) return ncclSuccess;
  ring_geom_t g = {a, a->count, a->count * (size_t)a->nranks};
  for (uint64_t off = 0; off < a->count; off += a->slice)
    WEFTCHECK(ag_round(s, &g, off, WEFT_BUF_SEND, off));
  return ncclSuccess;
}

static ncclResult_t ring_all_reduce(const weft_coll_args_t *a, weft_schedule_t *s) {
  if (a->nranks == 1)
    return local_copy(s, a, 0, 0, a->count, WEFT_STEP_REDUCE_INPUT | WEFT_STEP_FINAL);
  size_t n = (size_t)a->nranks;
  size_t chunk = (a->count + n - 1) / n;
  chunk = (chunk + 15) / 16 * 16;
  ring_geom_t g = {a, chunk, a->count};
  size_t first = chunk < a->count ? chunk : a->count;  // chunk 0 is the largest
  uint64_t own = chunk_start(&g, a->rank);
  for (uint64_t off = 0; off < first; off += a->slice) {
    WEFTCHECK(rs_round(s, &g, off, own + off, 1));
    WEFTCHECK(ag_round(s, &g, off, WEFT_BUF_NONE, 0));
  }
  return ncclSuccess;
}

ncclResult_t weft_ring_build(const weft_coll_args_t *a, weft_schedule_t *s) {
  WEFTCHECK(weft_schedule_lane_begin(s));
  switch (a->coll) {
    case WEFT_COLL_REDUCESCATTER: return ring_reduce_scatter(a, s);
    case WEFT_COLL_ALLGATHER: return ring_all_gather(a, s);
    case WEFT_COLL_ALLREDUCE: return ring_all_reduce(a, s);
    default: WARN("ring: cannot run %s", weft_coll_name(a->coll)); return ncclInvalidArgument;
  }
}
