/*
 * sim_checks.c — the simulator's checks before any run.
 *
 * Lays out each rank's buffers (in-place calls share storage for real) and
 * rejects a schedule that is malformed on its face, so the runner in sim.c
 * only ever executes steps that are well-formed: every step's kind, peers,
 * regions (a read's region in the peer's buffers), size and flags fit the
 * collective; lanes partition the steps and each connection end belongs to
 * one lane; on every connection the sender and the receiver list the same
 * pieces in the same order — the same sizes, and a WAIT wherever the sender
 * has a SIGNAL, so a token never stands in for data. Kept apart
 * from the runner: everything here looks at the schedules alone, before any
 * element moves, and reports problems by the schedule's own indices.
 */
#include <stdio.h>
#include <stdlib.h>

#include "sim_internal.h"

// Buffer layout: NCCL's in-place definitions share storage for real, except
// where the engine sets the input aside first (weft_algo_stages_send).
int weft_sim_layout_rank(sim_t *m, int r) {
  const weft_sim_config_t *c = m->cfg;
  srank_t *R = &m->rk[r];
  weft_coll_args_t a = weft_sim_args(c, r);
  size_t se, re;
  if (is_p2p(c->coll)) {
    se = re = c->count;
  } else {
    se = weft_coll_send_elems(&a);
    re = weft_coll_recv_elems(&a);
  }
  R->elems[WEFT_BUF_SEND] = se;
  R->elems[WEFT_BUF_RECV] = re;
  if (c->in_place && !is_p2p(c->coll) && !weft_algo_stages_send(c->algo, c->coll)) {
    int inside = 1;
    size_t off = weft_coll_inplace_offset(&a, &inside);
    R->base[inside ? WEFT_BUF_SEND : WEFT_BUF_RECV] = off;
    size_t outer = inside ? re : se, inner = inside ? se : re;
    R->nstore = outer > off + inner ? outer : off + inner;
  } else {
    R->base[WEFT_BUF_RECV] = se;
    R->nstore = se + re;
  }
  size_t ns = R->nstore ? R->nstore : 1;
  R->store = malloc(ns * sizeof(*R->store));
  R->wlane = malloc(ns * sizeof(*R->wlane));
  R->rlane = malloc(ns * sizeof(*R->rlane));
  R->cur = calloc(R->s.nlanes ? R->s.nlanes : 1, sizeof(*R->cur));
  R->done = calloc(R->s.nlanes ? R->s.nlanes : 1, sizeof(*R->done));
  if (!R->store || !R->wlane || !R->rlane || !R->cur || !R->done) {
    weft_sim_fail(m, "out of memory for rank %d's buffers (%zu elements)", r, R->nstore);
    return -1;
  }
  return 0;
}

// Is [off, off+count) inside buffer `buf`? Writes the reason to `why` if not.
static int region_bad(const srank_t *R, int r, int buf, uint64_t off, uint64_t count,
                      const char *what, char *why, size_t wlen) {
  if (buf != WEFT_BUF_SEND && buf != WEFT_BUF_RECV) {
    snprintf(why, wlen, "%s buffer %d is neither send nor recv", what, buf);
    return 1;
  }
  size_t have = R->elems[buf];
  if (off > have || count > have - off) {
    snprintf(why, wlen, "%s region %s[%llu..+%llu] exceeds the %zu elements of rank %d's %s buffer",
             what, weft_sim_buf_names[buf], (unsigned long long)off, (unsigned long long)count,
             have, r, weft_sim_buf_names[buf]);
    return 1;
  }
  return 0;
}

// Do two regions of `count` elements at store positions a and b overlap
// without coinciding?
static int overlap(uint64_t a, uint64_t b, uint64_t count) {
  return a != b && a < b + count && b < a + count;
}

// The reason a step is malformed for this collective, or NULL.
static const char *step_problem(const sim_t *m, int r, const weft_step_t *st, char *why,
                                size_t wlen) {
  const weft_sim_config_t *c = m->cfg;
  const srank_t *R = &m->rk[r];
  int k = st->kind, op = weft_coll_has_op(c->coll);
  if (has_send(k) ? (st->send_peer < 0 || st->send_peer >= m->n) : st->send_peer != -1) {
    snprintf(why, wlen, "send_peer %d is not %s", (int)st->send_peer,
             has_send(k) ? "a rank" : "-1 on a step that sends nothing");
    return why;
  }
  if (has_recv(k) ? (st->recv_peer < 0 || st->recv_peer >= m->n) : st->recv_peer != -1) {
    snprintf(why, wlen, "recv_peer %d is not %s", (int)st->recv_peer,
             has_recv(k) ? "a rank" : "-1 on a step that receives nothing");
    return why;
  }
  if (touches_peer(k) && (st->rem_peer < 0 || st->rem_peer >= m->n)) {
    snprintf(why, wlen, "rem_peer %d is not a rank", (int)st->rem_peer);
    return why;
  }
  if (st->count == 0) return "a step of 0 elements";
  if (is_token(k) && st->count != 1) {
    snprintf(why, wlen, "a SIGNAL or WAIT moves one token: count must be 1, not %llu",
             (unsigned long long)st->count);
    return why;
  }
  if (st->count > c->slice) {
    snprintf(why, wlen, "carries %llu elements, more than the slice of %zu",
             (unsigned long long)st->count, c->slice);
    return why;
  }
  if (has_src(k)) {
    if (region_bad(R, r, st->src_buf, st->src_off, st->count, "source", why, wlen)) return why;
  } else if (st->src_buf != WEFT_BUF_NONE) {
    return "names a source it does not read";
  }
  if (has_dst(k)) {
    if (st->dst_buf == WEFT_BUF_SEND) return "writes the send buffer, the caller's read-only input";
    if (region_bad(R, r, st->dst_buf, st->dst_off, st->count, "destination", why, wlen)) return why;
  } else if (st->dst_buf != WEFT_BUF_NONE) {
    return "names a destination it does not write";
  }
  if (writes_peer(k) && st->rem_buf == WEFT_BUF_SEND) return "writes a send buffer, the caller's read-only input";
  if (touches_peer(k) && region_bad(&m->rk[st->rem_peer], st->rem_peer, st->rem_buf, st->rem_off,
                                    st->count, "remote", why, wlen))
    return why;
  uint64_t ps = has_src(k) ? R->base[st->src_buf] + st->src_off : 0;
  uint64_t pd = has_dst(k) ? R->base[st->dst_buf] + st->dst_off : 0;
  if (has_src(k) && has_dst(k) && overlap(ps, pd, st->count))
    return "source and destination overlap without coinciding";
  // Reading itself, a rank's remote region is its own storage.
  if (reads_peer(k) && st->rem_peer == r &&
      overlap(R->base[st->rem_buf] + st->rem_off, pd, st->count))
    return "reads its own buffer in a region overlapping the destination without coinciding";
  if (writes_peer(k) && st->rem_peer == r && overlap(R->base[st->rem_buf] + st->rem_off, ps, st->count))
    return "writes its own buffer in a region overlapping the source without coinciding";
  if (st->flags & ~(WEFT_STEP_REDUCE_INPUT | WEFT_STEP_FINAL | WEFT_STEP_ACCUMULATE)) {
    snprintf(why, wlen, "unknown flags 0x%x", st->flags);
    return why;
  }
  if (!op && reduces(k)) return "reduces, but the collective has no reduction";
  if (!op && st->flags) return "carries reduction flags, but the collective has no reduction";
  int ri = st->flags & WEFT_STEP_REDUCE_INPUT;
  if (ri && k != WEFT_STEP_SEND && k != WEFT_STEP_COPY && k != WEFT_STEP_READ && k != WEFT_STEP_READ_REDUCE)
    return "REDUCE_INPUT belongs on SEND, COPY, READ or READ_REDUCE only";
  if (ri && (st->flags & WEFT_STEP_ACCUMULATE))
    return "REDUCE_INPUT and ACCUMULATE name the source two ways";
  // READ_REDUCE accumulates unless REDUCE_INPUT says otherwise.
  if ((st->flags & WEFT_STEP_ACCUMULATE) && !reduces(k))
    return "ACCUMULATE belongs on RECV_REDUCE, RECV_REDUCE_SEND, RECV_REDUCE_COPY_SEND or READ_REDUCE only";
  if ((st->flags & WEFT_STEP_FINAL) && !reduces(k) && !ri)
    return "FINAL on a step that reduces nothing (an Avg would be divided twice)";
  return NULL;
}

static int check_step(sim_t *m, int r, uint32_t lane, uint32_t idx) {
  const weft_step_t *st = &m->rk[r].s.steps[idx];
  char d[256], why[192];
  if (st->kind >= WEFT_NUM_STEP_KINDS) {
    weft_sim_fail(m, "rank %d lane %u step %u: unknown kind %d", r, lane, idx, st->kind);
    return -1;
  }
  const char *p = step_problem(m, r, st, why, sizeof(why));
  if (!p) return 0;
  weft_sim_fail(m, "%s: %s", weft_sim_step_desc(d, sizeof(d), r, lane, idx, st), p);
  return -1;
}

// Lanes partition the steps; each connection end belongs to one lane.
int weft_sim_check_lanes(sim_t *m, int r, int32_t *send_lane, int32_t *recv_lane) {
  srank_t *R = &m->rk[r];
  const weft_schedule_t *s = &R->s;
  uint8_t *seen = calloc(s->nsteps ? s->nsteps : 1, 1);
  if (!seen) {
    weft_sim_fail(m, "out of memory checking rank %d", r);
    return -1;
  }
  int rc = 0;
  for (int p = 0; p < m->n; p++) send_lane[p] = recv_lane[p] = -1;
  for (uint32_t l = 0; l < s->nlanes && !rc; l++) {
    const weft_lane_t *ln = &s->lanes[l];
    if (ln->first > s->nsteps || ln->count > s->nsteps - ln->first) {
      weft_sim_fail(m, "rank %d lane %u: steps [%u, +%u) beyond the %u steps", r, l, ln->first,
                    ln->count, s->nsteps);
      rc = -1;
      break;
    }
    for (uint32_t i = ln->first; i < ln->first + ln->count && !rc; i++) {
      if (seen[i]++) {
        weft_sim_fail(m, "rank %d step %u belongs to two lanes", r, i);
        rc = -1;
      } else if (check_step(m, r, l, i)) {
        rc = -1;
      } else {
        const weft_step_t *st = &s->steps[i];
        int32_t *own[2] = {has_send(st->kind) ? &send_lane[st->send_peer] : NULL,
                           has_recv(st->kind) ? &recv_lane[st->recv_peer] : NULL};
        for (int e = 0; e < 2 && !rc; e++) {
          if (!own[e]) continue;
          if (*own[e] >= 0 && *own[e] != (int32_t)l) {
            weft_sim_fail(m, "rank %d: lanes %d and %u both %s rank %d", r, *own[e], l,
                          e ? "receive from" : "send to", e ? st->recv_peer : st->send_peer);
            rc = -1;
          }
          *own[e] = (int32_t)l;
        }
      }
    }
  }
  for (uint32_t i = 0; i < s->nsteps && !rc; i++) {
    if (!seen[i]) {
      weft_sim_fail(m, "rank %d step %u belongs to no lane", r, i);
      rc = -1;
    }
  }
  free(seen);
  return rc;
}

// Pieces one rank lists on one connection side, in order: rank r's steps
// sending to (dir 0) or receiving from (dir 1) each peer.
typedef struct {
  uint32_t *start;  // n + 1 offsets into idx
  uint32_t *idx;    // step indices
} plist_t;

static int piece_lists(sim_t *m, int r, int dir, plist_t *pl) {
  const weft_schedule_t *s = &m->rk[r].s;
  pl->start = calloc((size_t)m->n + 1, sizeof(*pl->start));
  pl->idx = malloc((s->nsteps ? s->nsteps : 1) * sizeof(*pl->idx));
  if (!pl->start || !pl->idx) return -1;
  for (uint32_t i = 0; i < s->nsteps; i++) {
    const weft_step_t *st = &s->steps[i];
    if (dir == 0 && has_send(st->kind)) pl->start[st->send_peer + 1]++;
    if (dir == 1 && has_recv(st->kind)) pl->start[st->recv_peer + 1]++;
  }
  for (int p = 0; p < m->n; p++) pl->start[p + 1] += pl->start[p];
  uint32_t *fill = calloc((size_t)m->n, sizeof(*fill));
  if (!fill) return -1;
  // Lanes in order, steps in lane order: one lane per connection end, so
  // this is the order the pieces travel in.
  for (uint32_t l = 0; l < s->nlanes; l++) {
    for (uint32_t i = s->lanes[l].first; i < s->lanes[l].first + s->lanes[l].count; i++) {
      const weft_step_t *st = &s->steps[i];
      int p = dir == 0 ? (has_send(st->kind) ? st->send_peer : -1)
                       : (has_recv(st->kind) ? st->recv_peer : -1);
      if (p >= 0) pl->idx[pl->start[p] + fill[p]++] = i;
    }
  }
  free(fill);
  return 0;
}

// Sender and receiver list the same piece sizes in the same order.
int weft_sim_check_connections(sim_t *m) {
  int n = m->n, rc = 0;
  plist_t *snd = calloc((size_t)n, sizeof(*snd)), *rcv = calloc((size_t)n, sizeof(*rcv));
  if (!snd || !rcv) rc = -1;
  for (int r = 0; r < n && !rc; r++)
    if (piece_lists(m, r, 0, &snd[r]) || piece_lists(m, r, 1, &rcv[r])) rc = -1;
  if (rc) weft_sim_fail(m, "out of memory matching connections");
  for (int a = 0; a < n && !rc; a++) {
    for (int b = 0; b < n && !rc; b++) {
      uint32_t ns = snd[a].start[b + 1] - snd[a].start[b],
               nr = rcv[b].start[a + 1] - rcv[b].start[a];
      const uint32_t *si = snd[a].idx + snd[a].start[b], *ri = rcv[b].idx + rcv[b].start[a];
      uint64_t total = 0;
      for (uint32_t i = 0; i < ns && i < nr && !rc; i++) {
        const weft_step_t *x = &m->rk[a].s.steps[si[i]], *y = &m->rk[b].s.steps[ri[i]];
        total += x->count;
        if (is_token(x->kind) != is_token(y->kind)) {
          weft_sim_fail(m,
                        "connection %d->%d, piece %u: rank %d %s (step %u), rank %d %s (step %u)",
                        a, b, i, a, is_token(x->kind) ? "signals" : "sends data", si[i], b,
                        is_token(y->kind) ? "waits for a token" : "receives data", ri[i]);
          rc = -1;
        } else if (x->count != y->count) {
          weft_sim_fail(
              m,
              "connection %d->%d, piece %u: rank %d sends %llu elements (step %u), rank %d "
              "receives %llu (step %u)",
              a, b, i, a, (unsigned long long)x->count, si[i], b, (unsigned long long)y->count,
              ri[i]);
          rc = -1;
        }
      }
      if (!rc && ns != nr) {
        // Name the first piece left over.
        int tok = ns > nr ? is_token(m->rk[a].s.steps[si[nr]].kind)
                          : is_token(m->rk[b].s.steps[ri[ns]].kind);
        const char *what =
            ns > nr
                ? (tok ? "a SIGNAL without a matching WAIT" : "a send without a matching receive")
                : (tok ? "a WAIT without a matching SIGNAL" : "a receive without a matching send");
        weft_sim_fail(m, "connection %d->%d: rank %d sends %u pieces, rank %d receives %u (%s)", a,
                      b, a, ns, b, nr, what);
        rc = -1;
      }
      m->fifo[(size_t)a * n + b].total = total;
    }
  }
  for (int r = 0; snd && rcv && r < n; r++) {
    free(snd[r].start);
    free(snd[r].idx);
    free(rcv[r].start);
    free(rcv[r].idx);
  }
  free(snd);
  free(rcv);
  return rc;
}
