/*
 * recursive.c — AllReduce by recursive doubling, and Rabenseifner's
 * recursive halving + doubling.
 *
 * Both pair ranks over p = the largest power of two <= n "core" ranks: in
 * round i, core v exchanges with core v XOR 2^i. The other n - p ranks fold
 * in first: in the first 2(n-p) positions of the host order (layout.h),
 * each odd position sends its input to the even one before it and waits;
 * that core reduces it into its own and, at the end, sends the result back.
 * Cores are numbered in host order, so the first rounds pair ranks of one
 * host and only the later ones cross hosts.
 *
 * Recursive doubling (small counts): every round exchanges the whole piece
 * and both partners combine the two partial results, so after log2(p)
 * rounds every core holds the result — log2(p) steps of latency instead of
 * the ring's 2(n-1). Each partner computes "received OP mine", the operands
 * swapped between the two: the same bits wherever OP is commutative bit for
 * bit (sum and product, max and min except on the sign of equal zeros and
 * the payload of two NaNs). For that, both operands must be finished values:
 * a core first writes its own input, transformed (PreMulSum's and float
 * Avg's prescale, rounded to the type), into recv, and every round then
 * accumulates — were one side's input prescaled inside the reduction, with
 * no rounding in between, the two partners would round differently. Pieces
 * of at most a slice run the whole exchange one after the other.
 *
 * Rabenseifner (mid-size counts): the buffer is cut into p blocks (16-element
 * multiples). Recursive halving: in round i the partners split the blocks
 * they share, each keeps one half and sends the other, and reduces the half
 * it keeps; after log2(p) rounds core v holds one block (v's bits reversed)
 * completely reduced. Recursive doubling then gathers the blocks back in the
 * reverse order of rounds. Each rank sends 2(p-1)/p of the buffer, as in a
 * ring, in 2 log2(p) rounds; the largest exchanges pair ranks of one host.
 * Every result is computed once and copied, so all ranks hold the same bits.
 *
 * Deadlock freedom with one slice of room: within a round both partners send
 * piece k before receiving piece k, and every rank takes the pieces of every
 * round in the same order, so a piece's connection is always drained before
 * the next piece needs it.
 */
#include "checks.h"
#include "layout.h"
#include "ring.h"
#include "schedule.h"

// The fold: which ranks are cores, and the core numbering.
typedef struct {
  const weft_layout_t *lay;
  int n, p, extra, rounds;  // ranks, cores, folded ranks, log2(p)
  int pos;                  // this rank's host-order position
} fold_t;

static fold_t fold_of(const weft_coll_args_t *a, const weft_layout_t *lay) {
  fold_t f = {.lay = lay, .n = a->nranks, .p = 1, .pos = weft_layout_pos(lay, a->rank)};
  while (f.p * 2 <= f.n) f.p *= 2, f.rounds++;
  f.extra = f.n - f.p;
  return f;
}

// Folded into the core before it (odd positions below 2*extra)?
static int is_extra(const fold_t *f) { return f->pos < 2 * f->extra && (f->pos & 1); }
// Core index of this rank (not an extra).
static int core_index(const fold_t *f) { return f->pos < 2 * f->extra ? f->pos / 2 : f->pos - f->extra; }
static int core_rank(const fold_t *f, int v) {
  return weft_layout_rank_at(f->lay, v < f->extra ? 2 * v : v + f->extra);
}
// The rank folded into this core, or -1.
static int folded_rank(const fold_t *f) {
  return f->pos < 2 * f->extra ? weft_layout_rank_at(f->lay, f->pos + 1) : -1;
}

static weft_step_t step(int kind, int src_buf, int dst_buf, int flags, int send_peer, int recv_peer) {
  weft_step_t st = {0};
  st.kind = (uint8_t)kind;
  st.src_buf = (uint8_t)src_buf;
  st.dst_buf = (uint8_t)dst_buf;
  st.flags = (uint8_t)flags;
  st.send_peer = send_peer;
  st.recv_peer = recv_peer;
  return st;
}

// Send `snd`'s region and receive `rcv`'s in pieces, alternating: piece k
// out, then piece k in. Regions are [src_off, +count) and [dst_off, +count).
static ncclResult_t exchange(weft_schedule_t *s, weft_step_t snd, weft_step_t rcv, size_t slice) {
  uint64_t slen = snd.count, rlen = rcv.count;
  for (uint64_t off = 0; off < slen || off < rlen; off += slice) {
    snd.count = off < slen ? (slen - off < slice ? slen - off : slice) : 0;
    rcv.count = off < rlen ? (rlen - off < slice ? rlen - off : slice) : 0;
    WEFTCHECK(weft_schedule_add(s, &snd));
    WEFTCHECK(weft_schedule_add(s, &rcv));
    snd.src_off += snd.count;
    if (rcv.src_buf != WEFT_BUF_NONE) rcv.src_off += rcv.count;
    rcv.dst_off += rcv.count;
  }
  return ncclSuccess;
}

// A single rank: the input, transformed, is the result.
static ncclResult_t single_rank(const weft_coll_args_t *a, weft_schedule_t *s) {
  weft_step_t st = step(WEFT_STEP_COPY, WEFT_BUF_SEND, WEFT_BUF_RECV, WEFT_STEP_REDUCE_INPUT | WEFT_STEP_FINAL,
                        -1, -1);
  st.count = a->count;
  return weft_schedule_add_split(s, &st, a->slice);
}

// The whole recursive doubling exchange for the piece [off, off+len).
static ncclResult_t doubling_piece(weft_schedule_t *s, const fold_t *f, uint64_t off, uint64_t len) {
  weft_step_t st;
  if (is_extra(f)) {
    int core = weft_layout_rank_at(f->lay, f->pos - 1);
    st = step(WEFT_STEP_SEND, WEFT_BUF_SEND, WEFT_BUF_NONE, WEFT_STEP_REDUCE_INPUT, core, -1);
    st.src_off = off, st.count = len;
    WEFTCHECK(weft_schedule_add(s, &st));
    st = step(WEFT_STEP_RECV, WEFT_BUF_NONE, WEFT_BUF_RECV, 0, -1, core);
    st.dst_off = off, st.count = len;
    return weft_schedule_add(s, &st);
  }
  int v = core_index(f), folded = folded_rank(f);
  // This core's partial result lands in recv first: the folded rank's input
  // reduced into its own, or its own input transformed (prescaled) alone —
  // so that in every round both partners combine two finished operands.
  if (folded >= 0) {
    st = step(WEFT_STEP_RECV_REDUCE, WEFT_BUF_SEND, WEFT_BUF_RECV, 0, -1, folded);
  } else {
    st = step(WEFT_STEP_COPY, WEFT_BUF_SEND, WEFT_BUF_RECV, WEFT_STEP_REDUCE_INPUT, -1, -1);
  }
  st.src_off = st.dst_off = off, st.count = len;
  WEFTCHECK(weft_schedule_add(s, &st));
  for (int i = 0; i < f->rounds; i++) {
    int peer = core_rank(f, v ^ (1 << i));
    st = step(WEFT_STEP_SEND, WEFT_BUF_RECV, WEFT_BUF_NONE, 0, peer, -1);
    st.src_off = off, st.count = len;
    WEFTCHECK(weft_schedule_add(s, &st));
    int flags = WEFT_STEP_ACCUMULATE | (i == f->rounds - 1 ? WEFT_STEP_FINAL : 0);
    st = step(WEFT_STEP_RECV_REDUCE, WEFT_BUF_RECV, WEFT_BUF_RECV, flags, -1, peer);
    st.src_off = st.dst_off = off, st.count = len;
    WEFTCHECK(weft_schedule_add(s, &st));
  }
  if (folded >= 0) {
    st = step(WEFT_STEP_SEND, WEFT_BUF_RECV, WEFT_BUF_NONE, 0, folded, -1);
    st.src_off = off, st.count = len;
    WEFTCHECK(weft_schedule_add(s, &st));
  }
  return ncclSuccess;
}

// Every piece through recursive doubling.
static ncclResult_t doubling_all(const weft_coll_args_t *a, const fold_t *f, weft_schedule_t *s) {
  ncclResult_t res = ncclSuccess;
  for (uint64_t off = 0; res == ncclSuccess && off < a->count; off += a->slice)
    res = doubling_piece(s, f, off, a->count - off < a->slice ? a->count - off : a->slice);
  return res;
}

// What both builders share: AllReduce only, one lane, the single-rank
// copy, and the fold of the extra ranks around `body`.
static ncclResult_t build_folded(const weft_coll_args_t *a, weft_schedule_t *s, const char *name,
                                 ncclResult_t (*body)(const weft_coll_args_t *, const fold_t *, weft_schedule_t *)) {
  if (a->coll != WEFT_COLL_ALLREDUCE) {
    WARN("%s: cannot run %s", name, weft_coll_name(a->coll));
    return ncclInvalidArgument;
  }
  WEFTCHECK(weft_schedule_lane_begin(s));
  if (a->nranks == 1) return single_rank(a, s);
  weft_layout_t lay;
  ncclResult_t res = weft_layout_init(&lay, a, 0);
  if (res == ncclSuccess) {
    fold_t f = fold_of(a, &lay);
    res = body(a, &f, s);
  }
  weft_layout_free(&lay);
  return res;
}

ncclResult_t weft_recursive_build(const weft_coll_args_t *a, weft_schedule_t *s) {
  return build_folded(a, s, "recursive", doubling_all);
}

static void block_range(uint64_t b0, uint64_t b1, size_t bs, size_t count, uint64_t *off, uint64_t *len) {
  uint64_t lo = b0 * bs, hi = b1 * bs;
  if (lo > count) lo = count;
  if (hi > count) hi = count;
  *off = lo, *len = hi - lo;
}

static ncclResult_t halving_doubling(const weft_coll_args_t *a, const fold_t *f, weft_schedule_t *s) {
  size_t count = a->count, slice = a->slice;
  weft_step_t snd, rcv;
  if (is_extra(f)) {  // everything to the core, then the result back
    int core = weft_layout_rank_at(f->lay, f->pos - 1);
    snd = step(WEFT_STEP_SEND, WEFT_BUF_SEND, WEFT_BUF_NONE, WEFT_STEP_REDUCE_INPUT, core, -1);
    snd.count = count;
    WEFTCHECK(weft_schedule_add_split(s, &snd, slice));
    rcv = step(WEFT_STEP_RECV, WEFT_BUF_NONE, WEFT_BUF_RECV, 0, -1, core);
    rcv.count = count;
    return weft_schedule_add_split(s, &rcv, slice);
  }
  int v = core_index(f), folded = folded_rank(f), partial = 0;
  if (folded >= 0) {
    rcv = step(WEFT_STEP_RECV_REDUCE, WEFT_BUF_SEND, WEFT_BUF_RECV, 0, -1, folded);
    rcv.count = count;
    WEFTCHECK(weft_schedule_add_split(s, &rcv, slice));
    partial = 1;
  }
  size_t bs = weft_ring_chunk(count, f->p);
  uint64_t lo = 0, nb = (uint64_t)f->p;  // the blocks this core and its partner share
  for (int i = 0; i < f->rounds; i++) {
    int d = 1 << i, peer = core_rank(f, v ^ d), cur = partial ? WEFT_BUF_RECV : WEFT_BUF_SEND;
    uint64_t half = nb / 2, keep = (v & d) ? lo + half : lo, give = (v & d) ? lo : lo + half;
    snd = step(WEFT_STEP_SEND, cur, WEFT_BUF_NONE, partial ? 0 : WEFT_STEP_REDUCE_INPUT, peer, -1);
    block_range(give, give + half, bs, count, &snd.src_off, &snd.count);
    int flags = (partial ? WEFT_STEP_ACCUMULATE : 0) | (i == f->rounds - 1 ? WEFT_STEP_FINAL : 0);
    rcv = step(WEFT_STEP_RECV_REDUCE, cur, WEFT_BUF_RECV, flags, -1, peer);
    block_range(keep, keep + half, bs, count, &rcv.src_off, &rcv.count);
    rcv.dst_off = rcv.src_off;
    WEFTCHECK(exchange(s, snd, rcv, slice));
    lo = keep, nb = half, partial = 1;
  }
  // Core v now holds block lo, complete. Gather in the reverse order.
  for (int i = f->rounds - 1; i >= 0; i--) {
    int d = 1 << i, peer = core_rank(f, v ^ d);
    uint64_t sib = (v & d) ? lo - nb : lo + nb;
    snd = step(WEFT_STEP_SEND, WEFT_BUF_RECV, WEFT_BUF_NONE, 0, peer, -1);
    block_range(lo, lo + nb, bs, count, &snd.src_off, &snd.count);
    rcv = step(WEFT_STEP_RECV, WEFT_BUF_NONE, WEFT_BUF_RECV, 0, -1, peer);
    block_range(sib, sib + nb, bs, count, &rcv.dst_off, &rcv.count);
    WEFTCHECK(exchange(s, snd, rcv, slice));
    if (sib < lo) lo = sib;
    nb *= 2;
  }
  if (folded >= 0) {
    snd = step(WEFT_STEP_SEND, WEFT_BUF_RECV, WEFT_BUF_NONE, 0, folded, -1);
    snd.count = count;
    WEFTCHECK(weft_schedule_add_split(s, &snd, slice));
  }
  return ncclSuccess;
}

ncclResult_t weft_rabenseifner_build(const weft_coll_args_t *a, weft_schedule_t *s) {
  return build_folded(a, s, "rabenseifner", halving_doubling);
}
