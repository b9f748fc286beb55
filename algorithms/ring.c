/*
 * ring.c — ring schedules: ReduceScatter, AllGather, and AllReduce as the
 * first followed by the second (the step that completes a chunk's reduction
 * also sends it on, RECV_REDUCE_COPY_SEND, so the result is not read back).
 *
 * Data travels from each member to the next in ring order and arrives from
 * the previous one. The ring order is the layout's (layout.h): each host's
 * ranks side by side, so a ring over several hosts enters and leaves each
 * host once per direction, and within a host the communicator's order from
 * the topology (src/core/comm_order.c), which is rank order where the
 * machine gives no reason to change it. The buffer is cut into n chunks; in a ReduceScatter pass
 * the partial result of member j's chunk starts at member j+1, gathers one
 * operand per hop and completes at member j after n-1 hops; in an AllGather
 * pass member j's chunk starts there and is copied onward until member j-1
 * has it. Large chunks go round in rounds of pieces of at most `slice`
 * elements, each round a full pass, so no step carries more than a slice.
 * A step receives and sends at once, so a ring needs connections with room
 * for two slices (weft_schedule_min_capacity). AllReduce chunks are
 * multiples of 16 elements, keeping chunk boundaries aligned for vector
 * reductions. Everything is one lane.
 *
 * The passes (ring.h) take any member set and region, and operands that are
 * raw inputs or partial results already in recv: hier.c runs them inside a
 * host and across hosts.
 */
#include "ring.h"

#include "checks.h"

static int ring_mod(int v, int n) { return ((v % n) + n) % n; }

size_t weft_ring_chunk(size_t total, int parts) {
  size_t chunk = (total + (size_t)parts - 1) / (size_t)parts;
  return (chunk + 15) / 16 * 16;
}

// Chunk of the member at index i (taken modulo n).
static int chunk_of(const weft_ring_t *g, int i) {
  i = ring_mod(i, g->n);
  return g->chunk_by_rank ? weft_ring_member(g, i) : i;
}

static uint64_t chunk_start(const weft_ring_t *g, int j) { return g->base + (uint64_t)j * g->chunk; }

// Elements of chunk j's piece that starts `off` elements into the chunk.
static uint64_t piece_len(const weft_ring_t *g, int j, uint64_t off) {
  uint64_t start = (uint64_t)j * g->chunk + off, end = (uint64_t)j * g->chunk + g->chunk;
  if (end > g->total) end = g->total;
  if (start >= end) return 0;
  return end - start < g->slice ? end - start : g->slice;
}

// One ReduceScatter round over the pieces at `off`: partial results read the
// operands; the completed piece of this member's chunk lands at
// recv[dst_off]. With `forward`, the last step also sends that piece on (the
// first step of an AllReduce's AllGather round, fused so the result is not
// read back).
static ncclResult_t rs_round(weft_schedule_t *s, const weft_ring_t *g, uint64_t off,
                             uint64_t dst_off, int forward) {
  int n = g->n, i = g->pos, next = weft_ring_member(g, i + 1 < n ? i + 1 : 0),
      prev = weft_ring_member(g, i > 0 ? i - 1 : n - 1);
  int partial = g->operand_buf == WEFT_BUF_RECV;
  weft_step_t st = {0};
  int j = chunk_of(g, i - 1);
  st.kind = WEFT_STEP_SEND;
  st.src_buf = g->operand_buf;
  st.flags = partial ? 0 : WEFT_STEP_REDUCE_INPUT;
  st.send_peer = next;
  st.recv_peer = -1;
  st.src_off = chunk_start(g, j) + off;
  st.count = piece_len(g, j, off);
  WEFTCHECK(weft_schedule_add(s, &st));
  st.flags = partial ? WEFT_STEP_ACCUMULATE : 0;
  for (int k = 1; k <= n - 2; k++) {
    j = chunk_of(g, i - 1 - k);
    st.kind = WEFT_STEP_RECV_REDUCE_SEND;
    st.recv_peer = prev;
    st.src_off = chunk_start(g, j) + off;
    st.count = piece_len(g, j, off);
    WEFTCHECK(weft_schedule_add(s, &st));
  }
  j = chunk_of(g, i);
  st.kind = forward ? WEFT_STEP_RECV_REDUCE_COPY_SEND : WEFT_STEP_RECV_REDUCE;
  st.dst_buf = WEFT_BUF_RECV;
  st.flags = (uint8_t)((partial ? WEFT_STEP_ACCUMULATE : 0) | (g->final ? WEFT_STEP_FINAL : 0));
  st.send_peer = forward ? next : -1;
  st.recv_peer = prev;
  st.src_off = chunk_start(g, j) + off;
  st.dst_off = dst_off;
  st.count = piece_len(g, j, off);
  return weft_schedule_add(s, &st);
}

// One AllGather round over the pieces at `off`: this member's own piece is
// read from (own_buf, own_off) — unless own_buf is WEFT_BUF_NONE, when a
// fused ReduceScatter step already sent it; every other chunk's piece lands
// in recv.
static ncclResult_t ag_round(weft_schedule_t *s, const weft_ring_t *g, uint64_t off,
                             weft_buf_t own_buf, uint64_t own_off) {
  int n = g->n, i = g->pos, next = weft_ring_member(g, i + 1 < n ? i + 1 : 0),
      prev = weft_ring_member(g, i > 0 ? i - 1 : n - 1);
  weft_step_t st = {0};
  st.send_peer = next;
  if (own_buf != WEFT_BUF_NONE) {
    st.kind = WEFT_STEP_SEND;
    st.src_buf = (uint8_t)own_buf;
    st.recv_peer = -1;
    st.src_off = own_off;
    st.count = piece_len(g, chunk_of(g, i), off);
    WEFTCHECK(weft_schedule_add(s, &st));
  }
  st.src_buf = WEFT_BUF_NONE;
  st.src_off = 0;
  st.dst_buf = WEFT_BUF_RECV;
  st.recv_peer = prev;
  for (int k = 1; k <= n - 2; k++) {
    int j = chunk_of(g, i - k);
    st.kind = WEFT_STEP_RECV_COPY_SEND;
    st.dst_off = chunk_start(g, j) + off;
    st.count = piece_len(g, j, off);
    WEFTCHECK(weft_schedule_add(s, &st));
  }
  int j = chunk_of(g, i + 1);
  st.kind = WEFT_STEP_RECV;
  st.send_peer = -1;
  st.dst_off = chunk_start(g, j) + off;
  st.count = piece_len(g, j, off);
  return weft_schedule_add(s, &st);
}

// The rounds of a pass: one per slice of the largest chunk (chunk 0).
static uint64_t rounds_end(const weft_ring_t *g) { return g->chunk < g->total ? g->chunk : g->total; }

ncclResult_t weft_ring_reduce_scatter(weft_schedule_t *s, const weft_ring_t *g, uint64_t dst_off) {
  for (uint64_t off = 0; off < rounds_end(g); off += g->slice) WEFTCHECK(rs_round(s, g, off, dst_off + off, 0));
  return ncclSuccess;
}

ncclResult_t weft_ring_all_gather(weft_schedule_t *s, const weft_ring_t *g, weft_buf_t own_buf,
                                  uint64_t own_off) {
  for (uint64_t off = 0; off < rounds_end(g); off += g->slice)
    WEFTCHECK(ag_round(s, g, off, own_buf, own_off + off));
  return ncclSuccess;
}

ncclResult_t weft_ring_all_reduce(weft_schedule_t *s, const weft_ring_t *g) {
  uint64_t own = chunk_start(g, chunk_of(g, g->pos));
  for (uint64_t off = 0; off < rounds_end(g); off += g->slice) {
    WEFTCHECK(rs_round(s, g, off, own + off, 1));
    WEFTCHECK(ag_round(s, g, off, WEFT_BUF_NONE, 0));
  }
  return ncclSuccess;
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

static ncclResult_t ring_build(const weft_coll_args_t *a, const weft_layout_t *lay, weft_schedule_t *s) {
  int n = a->nranks;
  weft_ring_t g = {.lay = lay, .first = 0, .stride = 1, .n = n, .pos = weft_layout_pos(lay, a->rank),
                   .slice = a->slice, .operand_buf = WEFT_BUF_SEND, .final = 1};
  int reduces = a->coll != WEFT_COLL_ALLGATHER;
  if (n == 1 && reduces)  // the input, transformed, is the result
    return local_copy(s, a, 0, 0, a->count, WEFT_STEP_REDUCE_INPUT | WEFT_STEP_FINAL);
  switch (a->coll) {
    case WEFT_COLL_REDUCESCATTER:
      g.chunk_by_rank = 1;
      g.chunk = a->count, g.total = a->count * (size_t)n;
      return weft_ring_reduce_scatter(s, &g, 0);
    case WEFT_COLL_ALLGATHER:
      // Own contribution first; in place this copy is the identity and is skipped.
      WEFTCHECK(local_copy(s, a, 0, (uint64_t)a->rank * a->count, a->count, 0));
      if (n == 1) return ncclSuccess;
      g.chunk_by_rank = 1;
      g.chunk = a->count, g.total = a->count * (size_t)n;
      return weft_ring_all_gather(s, &g, WEFT_BUF_SEND, 0);
    case WEFT_COLL_ALLREDUCE:
      g.chunk = weft_ring_chunk(a->count, n), g.total = a->count;
      return weft_ring_all_reduce(s, &g);
    default: WARN("ring: cannot run %s", weft_coll_name(a->coll)); return ncclInvalidArgument;
  }
}

ncclResult_t weft_ring_build(const weft_coll_args_t *a, weft_schedule_t *s) {
  weft_layout_t lay;
  ncclResult_t res = weft_layout_init(&lay, a, 0);
  if (res == ncclSuccess) res = weft_schedule_lane_begin(s);
  if (res == ncclSuccess) res = ring_build(a, &lay, s);
  weft_layout_free(&lay);
  return res;
}
