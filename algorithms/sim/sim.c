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
 * Single-copy steps fit the same model. A READ or READ_REDUCE takes the
 * peer's current value at once and never blocks, so only the order the
 * schedule enforces protects it: a read of data the peer has yet to write
 * sees the wrong symbolic value, and a read of a rank that has finished
 * every lane (returned to its caller, its buffers no longer live) is an
 * error. A WRITE puts its value into the peer's buffer at once, with the
 * same rule about returned peers; a peer that uses the element before the
 * write computes with nothing. SIGNAL and WAIT move one token through the connection's FIFO,
 * ordered with its data and taking one element of room.
 *
 * The checks made before a run (buffer layout, step fields, lanes, matching
 * pieces on every connection) live in sim_checks.c; every message is written
 * by sim_report.c, so the rules here cost a few comparisons per element; the
 * types they share are in sim_internal.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

static uint64_t rng_next(sim_t *m) {  // splitmix64
  uint64_t z = (m->rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
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
  weft_coll_args_t a = weft_sim_args(c, r);
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

/* ---- the rules of one element operation ---- */

// What a step does to each of its elements, worked out once per step.
typedef struct {
  unsigned io, flags;  // kind_io of the kind, the step's flags
  int accumulate;      // the local operand is a running result (READ_REDUCE unless REDUCE_INPUT)
  int remote;          // the operand entering the reduction was read from the peer
  uint64_t owner;      // whose raw input enters the reduction (when not accumulating)
  uint64_t peer;       // READ*: the rank read
} rule_t;

static rule_t rule_of(const weft_step_t *st, int r) {
  rule_t u;
  u.io = kind_io[st->kind];  // kinds were checked before the run
  u.flags = st->flags;
  // READ_REDUCE accumulates unless REDUCE_INPUT says its source is this rank's own operand.
  u.accumulate = (u.flags & WEFT_STEP_ACCUMULATE) ||
                 (st->kind == WEFT_STEP_READ_REDUCE && !(u.flags & WEFT_STEP_REDUCE_INPUT));
  // SEND, COPY and RECV_REDUCE* bring this rank's operand; a REDUCE_INPUT
  // READ (no source) the peer's.
  u.remote = !(u.io & IO_SRC);
  u.peer = (uint64_t)st->rem_peer;
  u.owner = u.remote ? u.peer : (uint64_t)r;
  return u;
}

// Report a broken rule at element e of the step.
static int reject(sim_t *m, weft_sim_at_t *at, uint64_t e, int rule, sval_t v, sval_t in) {
  at->e = e;
  return weft_sim_reject(m, at, rule, v, in);
}

// The value a step produces for its element e, into *v: from its local
// operand (*v on entry; for steps without a source, a copy of `in`) and
// what came in (`in`: popped from the input FIFO or read from the peer's
// buffer). An operand enters a reduction once, as its owner's raw input; a
// running result is accumulated only while in progress; FINAL marks exactly
// the step that completes an element; tokens and data never stand in for
// each other. Returns 0, or -1 after weft_sim_reject.
static inline int element(sim_t *m, weft_sim_at_t *at, uint64_t e, const rule_t *u, sval_t *v,
                          sval_t in) {
  unsigned io = u->io;
  if ((io & IO_IN) && (in.kind == SV_TOKEN) != ((io & IO_TOKEN) != 0))
    return reject(m, at, e, SIM_TOKEN_MISMATCH, *v, in);
  if (io & IO_TOKEN) {
    *v = (sval_t){.kind = SV_TOKEN};
    return 0;
  }
  if ((io & IO_READ) && in.kind == SV_NONE) return reject(m, at, e, SIM_READ_NOTHING, *v, in);
  if (!(u->flags & WEFT_STEP_REDUCE_INPUT) && !(io & IO_RED)) return 0;  // moved unchanged
  if (u->accumulate) {
    if (v->kind != SV_PART || v->final) return reject(m, at, e, SIM_NOT_IN_PROGRESS, *v, in);
  } else {
    if (v->kind != SV_RAW || v->bits != u->owner)
      return reject(m, at, e, u->remote ? SIM_NOT_PEER_INPUT : SIM_NOT_OWN_INPUT, *v, in);
    v->kind = SV_PART, v->bits = 1ull << u->owner, v->final = 0;
  }
  if (io & IO_RED) {
    if (io & IO_READ) {  // READ_REDUCE: the peer's own input, at the same index
      if (in.kind != SV_RAW || in.bits != u->peer)
        return reject(m, at, e, SIM_NOT_PEER_INPUT, in, in);
      in.kind = SV_PART, in.bits = 1ull << u->peer, in.final = 0;
    }
    if (in.kind != SV_PART || in.final || in.idx != v->idx || (in.bits & v->bits))
      return reject(m, at, e, SIM_BAD_COMBINE, *v, in);
    v->bits |= in.bits;
  }
  int fin = (u->flags & WEFT_STEP_FINAL) != 0;
  if ((v->bits == m->full) != fin) return reject(m, at, e, SIM_BAD_FINAL, *v, in);
  v->final = (uint8_t)fin;
  return 0;
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
    R->left = 0;
    for (uint32_t l = 0; l < R->s.nlanes; l++) R->left += R->s.lanes[l].count > 0;
  }
  for (size_t i = 0; i < (size_t)m->n * m->n; i++) {
    m->fifo[i].head = m->fifo[i].len = 0;
    m->fifo[i].wait_rd = m->fifo[i].wait_wr = -1;
  }
}

// Record lane `l` reading (write=0) or writing store[pos]; a write by one
// lane and any access by another is a race, whatever the order.
static int touch(sim_t *m, int r, uint32_t l, size_t pos, int write) {
  srank_t *R = &m->rk[r];
  int32_t L = (int32_t)l, w = R->wlane[pos], rd = R->rlane[pos];
  if ((w != -1 && w != L) || (write && rd != -1 && rd != L))
    return weft_sim_race(m, r, l, pos, write);
  if (write)
    R->wlane[pos] = L;
  else
    R->rlane[pos] = (rd == -1 || rd == L) ? L : -2;
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
  srank_t *P = touches_peer(k) ? &m->rk[st->rem_peer] : NULL;  // a read or write never blocks
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
  weft_sim_at_t at;  // described only on failure
  at.r = r, at.lane = l, at.idx = idx, at.st = st, at.e = 0;
  if (P && P->left == 0) {
    sval_t none = {0};
    return reject(m, &at, R->done[l], SIM_READ_AFTER_RETURN, none, none);
  }
  if (random && (rng_next(m) & 1)) todo = 1 + rng_next(m) % todo;
  int src = has_src(k), dst = has_dst(k);
  size_t ps = src ? R->base[st->src_buf] + st->src_off : 0;
  size_t pd = dst ? R->base[st->dst_buf] + st->dst_off : 0;
  size_t pr = P ? P->base[st->rem_buf] + st->rem_off : 0;
  // A plain copy onto itself is skipped, as the engine does.
  int skip = st->flags == 0 &&
             ((k == WEFT_STEP_COPY && ps == pd) || (k == WEFT_STEP_READ && P == R && pr == pd) ||
              (k == WEFT_STEP_WRITE && P == R && pr == ps));
  rule_t u = rule_of(st, r);
  for (uint64_t e = R->done[l]; e < R->done[l] + todo && !skip; e++) {
    sval_t v, x = {0};
    if (in) {
      x = in->v[in->head];
      if (++in->head == in->size) in->head = 0;
      in->len--;
    }
    if (P && !writes_peer(k)) {
      // Reading itself, a rank's lane takes part in its own race checks.
      if (P == R && touch(m, r, l, pr + e, 0)) return -1;
      x = P->store[pr + e];
    }
    if (src) {
      if (touch(m, r, l, ps + e, 0)) return -1;
      v = R->store[ps + e];
    } else {
      v = x;
    }
    if (element(m, &at, e, &u, &v, x)) return -1;
    if (dst) {
      if (touch(m, r, l, pd + e, 1)) return -1;
      R->store[pd + e] = v;
    }
    if (P && writes_peer(k)) {
      if (P == R && touch(m, r, l, pr + e, 1)) return -1;
      P->store[pr + e] = v;
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
      weft_sim_report_deadlock(m);
      return -1;
    }
    uint32_t *t = m->cur;
    m->cur = m->next;
    m->next = t;
    m->ncur = m->nnext;
    m->nnext = 0;
    if (mode == SIM_RANDOM) {
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
        moved = advance(m, r, l, mode == SIM_RANDOM);
        if (moved < 0) return -1;
      } while (moved > 0 && (mode == SIM_GREEDY || (mode == SIM_RANDOM && (rng_next(m) & 1))));
      if (m->rk[r].cur[l] >= m->rk[r].s.lanes[l].count) {
        unfinished--;
        m->rk[r].left--;  // at 0 the rank has returned: its buffers are gone
      } else if (moved > 0) {
        wake(m, (int32_t)g);  // could move more: visit again next sweep
      }
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
                      weft_sim_sval_desc(a, sizeof(a), &got, m->n),
                      weft_sim_sval_desc(b, sizeof(b), &want, m->n));
        return -1;
      }
    }
  }
  return 0;
}

/* ---- entry points ---- */

// A given ring order must be a permutation, pos its inverse, and each host's
// ranks side by side with the hosts in increasing order (layout.h).
static int check_order(sim_t *m, const weft_sim_config_t *c) {
  int n = c->nranks;
  if (c->pos == NULL) {
    weft_sim_fail(m, "a ring order without its inverse (pos)");
    return -1;
  }
  for (int p = 0; p < n; p++) {
    int r = c->order[p];
    if (r < 0 || r >= n || c->pos[r] != p) {
      weft_sim_fail(m, "ring order: position %d holds rank %d, whose pos is not %d", p, r, p);
      return -1;
    }
    int h = c->host_of ? c->host_of[r] : 0, hp = p && c->host_of ? c->host_of[c->order[p - 1]] : 0;
    if (p && h != hp && h != hp + 1) {
      weft_sim_fail(m, "ring order: position %d (rank %d, host %d) follows host %d", p, r, h, hp);
      return -1;
    }
  }
  return 0;
}

// group_of[r] (a host, a NUMA group) lies in [0, ngroups), ngroups in [1, nranks].
static int check_groups(sim_t *m, const int *group_of, int ngroups, const char *what) {
  int n = m->cfg->nranks;
  if (ngroups < 1 || ngroups > n) {
    weft_sim_fail(m, "%d %ss for %d ranks", ngroups, what, n);
    return -1;
  }
  for (int r = 0; r < n; r++)
    if (group_of[r] < 0 || group_of[r] >= ngroups) {
      weft_sim_fail(m, "rank %d on %s %d, outside [0, %d)", r, what, group_of[r], ngroups);
      return -1;
    }
  return 0;
}

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
  if (c->host_of && check_groups(m, c->host_of, c->nhosts, "host")) return -1;
  if (c->numa_of && check_groups(m, c->numa_of, c->nnuma, "NUMA group")) return -1;
  if (c->order && check_order(m, c)) return -1;
  weft_coll_args_t a = weft_sim_args(c, 0);
  char why[160];
  if (!weft_algo_fits(c->algo, &a, why, sizeof(why))) {
    weft_sim_fail(m, "%s", why);
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
  for (int r = 0; c->host_of && r < c->nranks; r++) h = (h ^ (uint64_t)c->host_of[r]) * 0x100000001b3ull;
  for (int p = 0; c->order && p < c->nranks; p++) h = (h ^ (uint64_t)c->order[p]) * 0x100000001b3ull;
  for (int r = 0; c->numa_of && r < c->nranks; r++) h = (h ^ (uint64_t)c->numa_of[r]) * 0x100000001b3ull;
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
    if (run(m, i < 2 ? i : SIM_RANDOM) || verify(m)) return ncclInternalError;
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
