/*
 * sim.c — runs every rank's schedule symbolically and checks the outcome.
 *
 * See sim.h for what is checked. The model mirrors the engine: each ordered
 * pair of ranks (a rank with itself included) has a FIFO of `capacity`
 * elements; a step moves any prefix of its remaining elements for which
 * input is queued and output room is free. A run repeats the same execution
 * under several interleavings — round-robin one step per visit, greedy (a
 * lane runs until it blocks), and seeded random orders with random prefix
 * sizes — because a schedule that is right under one order can deadlock or
 * race under another. Storage of in-place calls is shared for real, so a
 * schedule that overwrites data before reading it computes a wrong value.
 *
 * The checks made before a run (buffer layout, step fields, lanes, matching
 * pieces on every connection) live in sim_checks.c; the types both files
 * share are in sim_internal.h.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

enum { MODE_ROUND_ROBIN = 0, MODE_GREEDY, MODE_RANDOM };
static const char *const mode_names[] = {"round-robin", "greedy", "random"};

const char *const weft_sim_buf_names[3] = {"none", "send", "recv"};

// Bounded string builder: appends until the buffer is full, then drops text.
typedef struct {
  char *p;
  size_t len, o;
} sbuf_t;

static void sb_add(sbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(sbuf_t *b, const char *fmt, ...) {
  if (b->len == 0 || b->o >= b->len - 1) return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(b->p + b->o, b->len - b->o, fmt, ap);
  va_end(ap);
  if (w > 0) b->o += (size_t)w;
  if (b->o >= b->len) b->o = b->len - 1;
}

void weft_sim_fail(sim_t *m, const char *fmt, ...) {
  if (m->failed) return;
  m->failed = 1;
  if (!m->err || m->errlen == 0) return;
  const weft_sim_config_t *c = m->cfg;
  sbuf_t b = {m->err, m->errlen, 0};
  sb_add(&b, "%s/%s n=%d root=%d count=%zu slice=%zu capacity=%zu %s", weft_coll_name(c->coll),
         weft_algo_name(c->algo), c->nranks, c->root, c->count, c->slice, c->capacity,
         c->in_place ? "in-place" : "out-of-place");
  if (m->mode >= 0) sb_add(&b, ", %s order", mode_names[m->mode]);
  sb_add(&b, ": ");
  if (b.o >= b.len - 1) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m->err + b.o, m->errlen - b.o, fmt, ap);
  va_end(ap);
}

static uint64_t rng_next(sim_t *m) {  // splitmix64
  uint64_t z = (m->rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// "rank 3 lane 1 step 7 (RECV_REDUCE from 2, send[12..+5] -> recv[0..+5])"
const char *weft_sim_step_desc(char *out, size_t len, int r, uint32_t lane, uint32_t idx,
                               const weft_step_t *st) {
  sbuf_t b = {out, len, 0};
  int k = st->kind;
  if (len) out[0] = 0;
  sb_add(&b, "rank %d lane %u step %u (%s", r, lane, idx, weft_step_kind_name(k));
  if (has_recv(k)) sb_add(&b, " from %d", (int)st->recv_peer);
  if (has_send(k)) sb_add(&b, " to %d", (int)st->send_peer);
  if (has_src(k) && st->src_buf < 3)
    sb_add(&b, ", %s[%llu..+%llu]", weft_sim_buf_names[st->src_buf],
           (unsigned long long)st->src_off, (unsigned long long)st->count);
  if (has_dst(k) && st->dst_buf < 3)
    sb_add(&b, "%s%s[%llu..+%llu]", has_src(k) ? " -> " : ", ", weft_sim_buf_names[st->dst_buf],
           (unsigned long long)st->dst_off, (unsigned long long)st->count);
  sb_add(&b, has_src(k) || has_dst(k) ? ")" : ", %llu elements)", (unsigned long long)st->count);
  return out;
}

static const char *sval_desc(char *out, size_t len, const sval_t *v, int n) {
  if (v->kind == SV_RAW)
    snprintf(out, len, "rank %llu's send[%u]", (unsigned long long)v->bits, v->idx);
  else if (v->kind == SV_PART)
    snprintf(out, len, "element %u reduced over %d of %d ranks (mask 0x%llx)%s", v->idx,
             __builtin_popcountll(v->bits), n, (unsigned long long)v->bits,
             v->final ? "" : ", not final");
  else
    snprintf(out, len, "nothing (never written)");
  return out;
}

// Which buffer (recv preferred) and index a store position belongs to.
static void where(const srank_t *R, size_t pos, const char **buf, size_t *i) {
  if (pos >= R->base[WEFT_BUF_RECV] && pos - R->base[WEFT_BUF_RECV] < R->elems[WEFT_BUF_RECV]) {
    *buf = "recv";
    *i = pos - R->base[WEFT_BUF_RECV];
  } else {
    *buf = "send";
    *i = pos - R->base[WEFT_BUF_SEND];
  }
}

/* ---- building ---- */

static ncclResult_t default_build(const weft_coll_args_t *a, weft_algo_t algo, weft_schedule_t *s,
                                  void *ctx) {
  (void)ctx;
  return weft_schedule_build(a, algo, s);
}

// Append schedule b's steps and lanes to a.
static int append_schedule(weft_schedule_t *a, const weft_schedule_t *b) {
  if (b->nsteps > UINT32_MAX - a->nsteps || b->nlanes > UINT32_MAX - a->nlanes) return -1;
  uint32_t ns = a->nsteps + b->nsteps, nl = a->nlanes + b->nlanes;
  weft_step_t *st = realloc(a->steps, (size_t)(ns ? ns : 1) * sizeof(*st));
  if (!st) return -1;
  a->steps = st;
  weft_lane_t *ln = realloc(a->lanes, (size_t)(nl ? nl : 1) * sizeof(*ln));
  if (!ln) return -1;
  a->lanes = ln;
  if (b->nsteps) memcpy(a->steps + a->nsteps, b->steps, b->nsteps * sizeof(*st));
  for (uint32_t l = 0; l < b->nlanes; l++) {
    a->lanes[a->nlanes + l] = b->lanes[l];
    a->lanes[a->nlanes + l].first += a->nsteps;
  }
  a->nsteps = a->steps_cap = ns;
  a->nlanes = a->lanes_cap = nl;
  return 0;
}

static ncclResult_t build_rank(sim_t *m, int r) {
  const weft_sim_config_t *c = m->cfg;
  weft_sim_build_fn build = c->build ? c->build : default_build;
  srank_t *R = &m->rk[r];
  weft_coll_args_t a = {c->coll, m->n, r, c->root, c->count, c->slice};
  ncclResult_t res;
  if (!is_p2p(c->coll)) {
    res = build(&a, c->algo, &R->s, c->build_ctx);
    if (res != ncclSuccess)
      weft_sim_fail(m, "building rank %d's schedule failed (error %d)", r, (int)res);
    return res;
  }
  // Send/Recv: a group of one Send and one Recv per rank.
  a.coll = WEFT_COLL_SEND;
  a.root = (r + c->root) % m->n;
  res = build(&a, c->algo, &R->s, c->build_ctx);
  if (res != ncclSuccess) {
    weft_sim_fail(m, "building rank %d's Send schedule failed (error %d)", r, (int)res);
    return res;
  }
  weft_schedule_t tmp = {0};
  a.coll = WEFT_COLL_RECV;
  a.root = (r - c->root % m->n + m->n) % m->n;
  res = build(&a, c->algo, &tmp, c->build_ctx);
  if (res != ncclSuccess) {
    weft_sim_fail(m, "building rank %d's Recv schedule failed (error %d)", r, (int)res);
  } else if (append_schedule(&R->s, &tmp) != 0) {
    weft_sim_fail(m, "out of memory merging rank %d's Send and Recv schedules", r);
    res = ncclSystemError;
  }
  weft_schedule_free(&tmp);
  return res;
}

/* ---- execution ---- */

static void reset(sim_t *m) {
  for (int r = 0; r < m->n; r++) {
    srank_t *R = &m->rk[r];
    memset(R->store, 0, R->nstore * sizeof(*R->store));
    for (size_t i = 0; i < R->elems[WEFT_BUF_SEND]; i++) {
      sval_t *v = &R->store[R->base[WEFT_BUF_SEND] + i];
      v->kind = SV_RAW;
      v->bits = (uint64_t)r;
      v->idx = (uint32_t)i;
    }
    for (size_t i = 0; i < R->nstore; i++) R->wlane[i] = R->rlane[i] = -1;
    memset(R->cur, 0, R->s.nlanes * sizeof(*R->cur));
    memset(R->done, 0, R->s.nlanes * sizeof(*R->done));
  }
  for (size_t i = 0; i < (size_t)m->n * m->n; i++) {
    m->fifo[i].head = m->fifo[i].len = 0;
    m->fifo[i].wait_rd = m->fifo[i].wait_wr = -1;
  }
}

static int race(sim_t *m, int r, uint32_t l, size_t pos, int write) {
  const srank_t *R = &m->rk[r];
  int32_t w = R->wlane[pos], rd = R->rlane[pos];
  char other[64];
  if (w != -1 && w != (int32_t)l)
    snprintf(other, sizeof(other), "lane %d writes", (int)w);
  else if (rd == -2)
    snprintf(other, sizeof(other), "several lanes read");
  else
    snprintf(other, sizeof(other), "lane %d reads", (int)rd);
  const char *buf;
  size_t i;
  where(R, pos, &buf, &i);
  weft_sim_fail(m,
                "rank %d: lane %u %s %s[%zu], which %s too; lanes of one rank must not share data "
                "that one of them writes",
                r, l, write ? "writes" : "reads", buf, i, other);
  return -1;
}

// Record lane `l` reading (write=0) or writing store[pos]; a write by one
// lane and any access by another is a race, whatever the order.
static int touch(sim_t *m, int r, uint32_t l, size_t pos, int write) {
  srank_t *R = &m->rk[r];
  int32_t L = (int32_t)l, w = R->wlane[pos], rd = R->rlane[pos];
  if ((w != -1 && w != L) || (write && rd != -1 && rd != L)) return race(m, r, l, pos, write);
  if (write)
    R->wlane[pos] = L;
  else
    R->rlane[pos] = (rd == -1 || rd == L) ? L : -2;
  return 0;
}

// The step an element operation belongs to; described only on failure.
typedef struct {
  int r;
  uint32_t lane, idx;
  const weft_step_t *st;
  char d[256];
} at_t;

static const char *at_desc(at_t *at) {
  return weft_sim_step_desc(at->d, sizeof(at->d), at->r, at->lane, at->idx, at->st);
}

// Rank r's own operand entering the reduction.
static int to_part(sim_t *m, at_t *at, sval_t *v) {
  int r = at->r;
  if (v->kind != SV_RAW || v->bits != (uint64_t)r) {
    char b[128];
    const char *d = at_desc(at);
    weft_sim_fail(
        m, "%s: local operand is %s, not rank %d's own input (overwritten before it was read?)", d,
        sval_desc(b, sizeof(b), v, m->n), r);
    return -1;
  }
  v->kind = SV_PART;
  v->bits = 1ull << r;
  v->final = 0;
  return 0;
}

// An ACCUMULATE step's local operand: a partial result still in progress.
static int accumulated(sim_t *m, at_t *at, const sval_t *v) {
  if (v->kind == SV_PART && !v->final) return 0;
  char b[128];
  weft_sim_fail(m, "%s: accumulates into %s, which is not a partial result in progress", at_desc(at),
                sval_desc(b, sizeof(b), v, m->n));
  return -1;
}

static int combine(sim_t *m, at_t *at, const sval_t *in, sval_t *v) {
  char b[128];
  int ok = in->kind == SV_PART && !in->final && in->idx == v->idx && !(in->bits & v->bits);
  if (ok) {
    v->bits |= in->bits;
    return 0;
  }
  const char *d = at_desc(at);
  if (in->kind != SV_PART) {
    weft_sim_fail(m, "%s: received %s, which is not a reduction operand%s", d,
                  sval_desc(b, sizeof(b), in, m->n),
                  in->kind == SV_RAW ? " (the sender lacks REDUCE_INPUT?)" : "");
    return -1;
  }
  if (in->final) {
    weft_sim_fail(m, "%s: received %s and reduces it again", d, sval_desc(b, sizeof(b), in, m->n));
    return -1;
  }
  if (in->idx != v->idx) {
    weft_sim_fail(
        m, "%s: combines element %u received with element %u of its own (wrong chunk or offset)", d,
        in->idx, v->idx);
    return -1;
  }
  weft_sim_fail(m, "%s: element %u of rank %d reduced twice", d, v->idx,
                __builtin_ctzll(in->bits & v->bits));
  return -1;
}

// A step's freshly reduced value: complete exactly when the step says FINAL.
static int check_final(sim_t *m, at_t *at, sval_t *v) {
  int fin = (at->st->flags & WEFT_STEP_FINAL) != 0;
  if (v->bits == m->full) {
    if (!fin) {
      weft_sim_fail(m, "%s: completes the reduction of element %u but lacks FINAL", at_desc(at),
                    v->idx);
      return -1;
    }
    v->final = 1;
  } else if (fin) {
    weft_sim_fail(m, "%s: has FINAL but element %u is reduced over only %d of %d ranks",
                  at_desc(at), v->idx, __builtin_popcountll(v->bits), m->n);
    return -1;
  }
  return 0;
}

// Queue a lane for the next sweep (once).
static void wake(sim_t *m, int32_t gid) {
  if (gid < 0 || m->queued[gid]) return;
  m->queued[gid] = 1;
  m->next[m->nnext++] = (uint32_t)gid;
}

static void wake_slot(sim_t *m, int32_t *slot) {
  wake(m, *slot);
  *slot = -1;
}

// Move elements of lane l's current step: as many as possible, or (random)
// sometimes a random prefix of those. Returns the number moved, 0 when
// blocked or finished, -1 on error.
static int64_t advance(sim_t *m, int r, uint32_t l, int random) {
  srank_t *R = &m->rk[r];
  const weft_lane_t *ln = &R->s.lanes[l];
  if (R->cur[l] >= ln->count) return 0;
  uint32_t idx = ln->first + R->cur[l];
  const weft_step_t *st = &R->s.steps[idx];
  int k = st->kind, n = m->n;
  fifo_t *in = has_recv(k) ? &m->fifo[(size_t)st->recv_peer * n + r] : NULL;
  fifo_t *out = has_send(k) ? &m->fifo[(size_t)r * n + st->send_peer] : NULL;
  uint64_t todo = st->count - R->done[l];
  if (in && in->len < todo) todo = in->len;
  if (out && out != in && m->cfg->capacity - out->len < todo) todo = m->cfg->capacity - out->len;
  if (todo == 0) {
    // Blocked: sleep until the FIFO in the way changes.
    int32_t gid = (int32_t)(R->lane0 + l);
    if (in && in->len == 0)
      in->wait_rd = gid;
    else if (out)
      out->wait_wr = gid;
    return 0;
  }
  if (random && (rng_next(m) & 1)) todo = 1 + rng_next(m) % todo;
  size_t ps = has_src(k) ? R->base[st->src_buf] + st->src_off : 0;
  size_t pd = has_dst(k) ? R->base[st->dst_buf] + st->dst_off : 0;
  // A plain copy onto itself is skipped, as the engine does.
  int skip = k == WEFT_STEP_COPY && ps == pd && st->flags == 0;
  int ri = (st->flags & WEFT_STEP_REDUCE_INPUT) != 0, produced = ri || reduces(k);
  int acc = (st->flags & WEFT_STEP_ACCUMULATE) != 0;
  int src = has_src(k), dst = has_dst(k);
  at_t at;  // the description is written only on failure
  at.r = r, at.lane = l, at.idx = idx, at.st = st;
  for (uint64_t e = R->done[l]; e < R->done[l] + todo && !skip; e++) {
    sval_t v, x;
    if (in) {
      x = in->v[in->head];
      if (++in->head == in->size) in->head = 0;
      in->len--;
    }
    if (src) {
      if (touch(m, r, l, ps + e, 0)) return -1;
      v = R->store[ps + e];
    } else {
      v = x;
    }
    if (produced) {
      if (acc ? accumulated(m, &at, &v) : to_part(m, &at, &v)) return -1;
      if (reduces(k) && combine(m, &at, &x, &v)) return -1;
      if (check_final(m, &at, &v)) return -1;
    }
    if (dst) {
      if (touch(m, r, l, pd + e, 1)) return -1;
      R->store[pd + e] = v;
    }
    if (out) {
      size_t tail = out->head + out->len;
      out->v[tail >= out->size ? tail - out->size : tail] = v;
      out->len++;
    }
  }
  if (!skip && out) wake_slot(m, &out->wait_rd);  // data for a sleeping reader
  if (!skip && in) wake_slot(m, &in->wait_wr);    // room for a sleeping writer
  R->done[l] += todo;
  if (R->done[l] == st->count) {
    R->done[l] = 0;
    R->cur[l]++;
  }
  return (int64_t)todo;
}

// Does rank p still have a step sending to rank r?
static int will_send(const sim_t *m, int p, int r) {
  const srank_t *P = &m->rk[p];
  for (uint32_t l = 0; l < P->s.nlanes; l++)
    for (uint32_t i = P->cur[l]; i < P->s.lanes[l].count; i++) {
      const weft_step_t *st = &P->s.steps[P->s.lanes[l].first + i];
      if (has_send(st->kind) && st->send_peer == r) return 1;
    }
  return 0;
}

static void report_deadlock(sim_t *m) {
  char msg[1024], d[256];
  sbuf_t b = {msg, sizeof(msg), 0};
  int shown = 0, stuck = 0;
  msg[0] = 0;
  for (int r = 0; r < m->n; r++) {
    const srank_t *R = &m->rk[r];
    for (uint32_t l = 0; l < R->s.nlanes; l++) {
      if (R->cur[l] >= R->s.lanes[l].count) continue;
      if (stuck++ >= 6) continue;
      shown++;
      uint32_t idx = R->s.lanes[l].first + R->cur[l];
      const weft_step_t *st = &R->s.steps[idx];
      const fifo_t *in = has_recv(st->kind) ? &m->fifo[(size_t)st->recv_peer * m->n + r] : NULL;
      sb_add(&b, "%s%s moved %llu of %llu, waits for ", shown > 1 ? "; " : "",
             weft_sim_step_desc(d, sizeof(d), r, l, idx, st), (unsigned long long)R->done[l],
             (unsigned long long)st->count);
      if (in && in->len == 0)
        sb_add(&b, "data on %d->%d%s", (int)st->recv_peer, r,
               will_send(m, st->recv_peer, r) ? "" : " that rank never sends");
      else
        sb_add(&b, "room on %d->%d (full)", r, (int)st->send_peer);
    }
  }
  weft_sim_fail(m, "deadlock, %d lanes stuck: %s%s", stuck, msg, stuck > shown ? "; ..." : "");
}

// One execution under one interleaving policy; checks that it completes.
// Sweeps visit only lanes that may move: a blocked lane sleeps on the FIFO
// in its way until that FIFO's other end moves.
static int run(sim_t *m, int mode) {
  m->mode = mode;
  reset(m);
  m->nnext = 0;
  uint32_t unfinished = 0;
  for (uint32_t g = 0; g < m->nl; g++) {
    m->queued[g] = 0;
    if (m->rk[m->lanes[g].r].s.lanes[m->lanes[g].l].count) {
      wake(m, (int32_t)g);
      unfinished++;
    }
  }
  while (unfinished > 0) {
    if (m->nnext == 0) {
      report_deadlock(m);
      return -1;
    }
    uint32_t *t = m->cur;
    m->cur = m->next;
    m->next = t;
    m->ncur = m->nnext;
    m->nnext = 0;
    if (mode == MODE_RANDOM) {
      for (uint32_t i = m->ncur; i > 1; i--) {
        uint32_t j = (uint32_t)(rng_next(m) % i), x = m->cur[i - 1];
        m->cur[i - 1] = m->cur[j];
        m->cur[j] = x;
      }
    }
    for (uint32_t i = 0; i < m->ncur; i++) {
      uint32_t g = m->cur[i];
      int r = m->lanes[g].r;
      uint32_t l = m->lanes[g].l;
      m->queued[g] = 0;
      int64_t moved;
      do {
        moved = advance(m, r, l, mode == MODE_RANDOM);
        if (moved < 0) return -1;
      } while (moved > 0 && (mode == MODE_GREEDY || (mode == MODE_RANDOM && (rng_next(m) & 1))));
      if (m->rk[r].cur[l] >= m->rk[r].s.lanes[l].count)
        unfinished--;
      else if (moved > 0)
        wake(m, (int32_t)g);  // could move more: visit again next sweep
    }
  }
  for (int a = 0; a < m->n; a++)
    for (int b = 0; b < m->n; b++)
      if (m->fifo[(size_t)a * m->n + b].len) {
        weft_sim_fail(m, "connection %d->%d still holds %zu elements after every rank finished", a,
                      b, m->fifo[(size_t)a * m->n + b].len);
        return -1;
      }
  return 0;
}

/* ---- results ---- */

// What NCCL defines recv[i] of rank r to hold after the call.
static sval_t expected(const sim_t *m, int r, size_t i) {
  const weft_sim_config_t *c = m->cfg;
  size_t cnt = c->count ? c->count : 1;
  sval_t v = {0};
  v.kind = SV_RAW;
  switch (c->coll) {
    case WEFT_COLL_ALLREDUCE:
    case WEFT_COLL_REDUCE:
    case WEFT_COLL_REDUCESCATTER:
      v.kind = SV_PART;
      v.bits = m->full;
      v.final = 1;
      v.idx = (uint32_t)(c->coll == WEFT_COLL_REDUCESCATTER ? (size_t)r * c->count + i : i);
      break;
    case WEFT_COLL_BROADCAST:  // root's send[i]
      v.bits = (uint64_t)c->root, v.idx = (uint32_t)i;
      break;
    case WEFT_COLL_ALLGATHER:  // block j is rank j's send
    case WEFT_COLL_GATHER: v.bits = i / cnt, v.idx = (uint32_t)(i % cnt); break;
    case WEFT_COLL_ALLTOALL:  // block j is rank j's block r
      v.bits = i / cnt, v.idx = (uint32_t)((size_t)r * c->count + i % cnt);
      break;
    case WEFT_COLL_SCATTER:  // the root's block r
      v.bits = (uint64_t)c->root, v.idx = (uint32_t)((size_t)r * c->count + i);
      break;
    default:  // Send/Recv: from the rank `root` below
      v.bits = (uint64_t)((r - c->root % m->n + m->n) % m->n), v.idx = (uint32_t)i;
      break;
  }
  return v;
}

static int verify(sim_t *m) {
  for (int r = 0; r < m->n; r++) {
    const srank_t *R = &m->rk[r];
    for (size_t i = 0; i < R->elems[WEFT_BUF_RECV]; i++) {
      sval_t want = expected(m, r, i), got = R->store[R->base[WEFT_BUF_RECV] + i];
      if (got.kind != want.kind || got.bits != want.bits || got.idx != want.idx ||
          (want.kind == SV_PART && !got.final)) {
        char a[128], b[128];
        weft_sim_fail(m, "rank %d recv[%zu] holds %s, expected %s", r, i,
                      sval_desc(a, sizeof(a), &got, m->n), sval_desc(b, sizeof(b), &want, m->n));
        return -1;
      }
    }
  }
  return 0;
}

/* ---- entry points ---- */

static int check_config(sim_t *m) {
  const weft_sim_config_t *c = m->cfg;
  if ((unsigned)c->coll >= WEFT_NUM_COLLS || (unsigned)c->algo >= WEFT_NUM_ALGOS) {
    weft_sim_fail(m, "unknown collective %d or algorithm %d", (int)c->coll, (int)c->algo);
    return -1;
  }
  if (!weft_algo_supports(c->algo, c->coll)) {
    weft_sim_fail(m, "algorithm %s cannot run %s", weft_algo_name(c->algo),
                  weft_coll_name(c->coll));
    return -1;
  }
  if (c->nranks < 1 || c->nranks > WEFT_SIM_MAX_RANKS) {
    weft_sim_fail(m, "nranks %d outside [1, %d]", c->nranks, WEFT_SIM_MAX_RANKS);
    return -1;
  }
  if (c->root < 0 || c->root >= c->nranks) {
    weft_sim_fail(m, "root %d outside [0, %d)", c->root, c->nranks);
    return -1;
  }
  if (c->slice == 0 || c->capacity == 0) {
    weft_sim_fail(m, "slice and capacity must be at least 1 element");
    return -1;
  }
  if (c->count > UINT32_MAX / (size_t)c->nranks) {
    weft_sim_fail(m, "count %zu too large to simulate", c->count);
    return -1;
  }
  return 0;
}

static uint64_t derive_seed(const weft_sim_config_t *c) {
  uint64_t h = 0xcbf29ce484222325ull;
  uint64_t parts[] = {
      (uint64_t)c->coll, (uint64_t)c->algo, (uint64_t)c->nranks, (uint64_t)c->root,
      c->count,          c->slice,          c->capacity,         (uint64_t)c->in_place};
  for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
    h = (h ^ parts[i]) * 0x100000001b3ull;
  return h;
}

static ncclResult_t simulate(sim_t *m) {
  const weft_sim_config_t *c = m->cfg;
  int n = m->n;
  for (int r = 0; r < n; r++) {
    ncclResult_t res = build_rank(m, r);
    if (res != ncclSuccess) return res;
  }
  for (int r = 0; r < n; r++)
    if (weft_sim_layout_rank(m, r)) return ncclSystemError;
  int32_t *sl = malloc((size_t)n * sizeof(*sl)), *rl = malloc((size_t)n * sizeof(*rl));
  int bad = !sl || !rl;
  if (bad) weft_sim_fail(m, "out of memory");
  for (int r = 0; r < n && !bad; r++) bad = weft_sim_check_lanes(m, r, sl, rl);
  free(sl);
  free(rl);
  if (bad || weft_sim_check_connections(m)) return ncclInternalError;
  for (size_t i = 0; i < (size_t)n * n; i++) {
    fifo_t *f = &m->fifo[i];
    f->size = f->total < c->capacity ? (size_t)f->total : c->capacity;
    if (f->size && !(f->v = malloc(f->size * sizeof(*f->v)))) {
      weft_sim_fail(m, "out of memory for connections");
      return ncclSystemError;
    }
  }
  uint64_t nl = 0;
  for (int r = 0; r < n; r++) {
    m->rk[r].lane0 = (uint32_t)nl;
    nl += m->rk[r].s.nlanes;
  }
  if (nl > INT32_MAX) {
    weft_sim_fail(m, "too many lanes to simulate");
    return ncclInvalidArgument;
  }
  m->nl = (uint32_t)nl;
  m->lanes = malloc((nl ? nl : 1) * sizeof(*m->lanes));
  m->cur = malloc((nl ? nl : 1) * sizeof(*m->cur));
  m->next = malloc((nl ? nl : 1) * sizeof(*m->next));
  m->queued = malloc(nl ? nl : 1);
  if (!m->lanes || !m->cur || !m->next || !m->queued) {
    weft_sim_fail(m, "out of memory");
    return ncclSystemError;
  }
  for (int r = 0; r < n; r++)
    for (uint32_t l = 0; l < m->rk[r].s.nlanes; l++) {
      m->lanes[m->rk[r].lane0 + l].r = r;
      m->lanes[m->rk[r].lane0 + l].l = l;
    }
  m->rng = c->seed ? c->seed : derive_seed(c);
  int runs = 2 + (c->random_runs > 0 ? c->random_runs : 0);
  for (int i = 0; i < runs; i++) {
    if (run(m, i < 2 ? i : MODE_RANDOM) || verify(m)) return ncclInternalError;
  }
  return ncclSuccess;
}

ncclResult_t weft_sim_run(const weft_sim_config_t *cfg, char *err, size_t errlen) {
  sim_t m = {0};
  m.cfg = cfg;
  m.err = err;
  m.errlen = errlen;
  m.mode = -1;
  if (err && errlen) err[0] = 0;
  if (!cfg) {
    if (err && errlen) snprintf(err, errlen, "no configuration");
    return ncclInvalidArgument;
  }
  if (check_config(&m)) return ncclInvalidArgument;
  m.n = cfg->nranks;
  m.full = m.n == 64 ? ~0ull : (1ull << m.n) - 1;
  m.rk = calloc((size_t)m.n, sizeof(*m.rk));
  m.fifo = calloc((size_t)m.n * m.n, sizeof(*m.fifo));
  ncclResult_t res;
  if (!m.rk || !m.fifo) {
    weft_sim_fail(&m, "out of memory");
    res = ncclSystemError;
  } else {
    res = simulate(&m);
  }
  for (int r = 0; m.rk && r < m.n; r++) {
    srank_t *R = &m.rk[r];
    weft_schedule_free(&R->s);
    free(R->store);
    free(R->wlane);
    free(R->rlane);
    free(R->cur);
    free(R->done);
  }
  for (size_t i = 0; m.fifo && i < (size_t)m.n * m.n; i++) free(m.fifo[i].v);
  free(m.rk);
  free(m.fifo);
  free(m.lanes);
  free(m.cur);
  free(m.next);
  free(m.queued);
  return res;
}

ncclResult_t weft_sim_check(weft_coll_t coll, weft_algo_t algo, int nranks, int root, size_t count,
                            size_t slice, size_t capacity, int in_place, char *err, size_t errlen) {
  weft_sim_config_t c = {0};
  c.coll = coll;
  c.algo = algo;
  c.nranks = nranks;
  c.root = root;
  c.count = count;
  c.slice = slice;
  c.capacity = capacity;
  c.in_place = in_place;
  c.random_runs = 1;
  return weft_sim_run(&c, err, errlen);
}
