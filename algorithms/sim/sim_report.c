/*
 * sim_report.c — how the simulator words a failure.
 *
 * The runner (sim.c) tests its rules with a few comparisons per element and
 * calls in here only when one breaks, so describing what went wrong —
 * which configuration and interleaving, which step, what the element held
 * and why that is wrong, who is stuck on what in a deadlock — costs nothing
 * on the path every correct schedule takes. The first-failure record
 * (weft_sim_fail) and the step description serve the checks before a run
 * (sim_checks.c) too. Messages name the schedule's own ranks, lanes and
 * step indices so a builder's author can find the fault.
 */
#include <stdarg.h>
#include <stdio.h>

#include "sim_internal.h"

// Names of the SIM_ROUND_ROBIN, SIM_GREEDY and SIM_RANDOM interleavings.
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
  if (c->host_of) {  // "hosts=3 (0,0,1,1,2)"
    sb_add(&b, " hosts=%d (", c->nhosts);
    for (int r = 0; r < c->nranks; r++) sb_add(&b, "%s%d", r ? "," : "", c->host_of[r]);
    sb_add(&b, ")");
  }
  if (c->numa_of) {  // "numa=4 (0,0,1,1,2,2,3,3)"
    sb_add(&b, " numa=%d (", c->nnuma);
    for (int r = 0; r < c->nranks; r++) sb_add(&b, "%s%d", r ? "," : "", c->numa_of[r]);
    sb_add(&b, ")");
  }
  if (c->order) {  // "ring=(0,2,1,3)"
    sb_add(&b, " ring=(");
    for (int p = 0; p < c->nranks; p++) sb_add(&b, "%s%d", p ? "," : "", c->order[p]);
    sb_add(&b, ")");
  }
  if (m->mode >= 0) sb_add(&b, ", %s order", mode_names[m->mode]);
  sb_add(&b, ": ");
  if (b.o >= b.len - 1) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m->err + b.o, m->errlen - b.o, fmt, ap);
  va_end(ap);
}

// "rank 3 lane 1 step 7 (RECV_REDUCE from 2, send[12..+5] -> recv[0..+5])",
// "rank 0 lane 0 step 2 (READ_REDUCE, recv[0..+4] OP rank 1's send[0..+4] -> recv[0..+4])",
// "rank 1 lane 0 step 9 (SIGNAL to 2)", "rank 0 lane 0 step 0 (WRITE, send[8..+8] -> rank 1's recv[8..+8])"
const char *weft_sim_step_desc(char *out, size_t len, int r, uint32_t lane, uint32_t idx,
                               const weft_step_t *st) {
  sbuf_t b = {out, len, 0};
  int k = st->kind;
  unsigned long long cnt = (unsigned long long)st->count;
  const char *sep = ", ";
  if (len) out[0] = 0;
  sb_add(&b, "rank %d lane %u step %u (%s", r, lane, idx, weft_step_kind_name(k));
  if (has_recv(k)) sb_add(&b, " from %d", (int)st->recv_peer);
  if (has_send(k)) sb_add(&b, " to %d", (int)st->send_peer);
  if (has_src(k) && st->src_buf < 3) {
    sb_add(&b, "%s%s[%llu..+%llu]", sep, weft_sim_buf_names[st->src_buf],
           (unsigned long long)st->src_off, cnt);
    sep = reads_peer(k) ? " OP " : " -> ";
  }
  if (touches_peer(k) && st->rem_buf < 3) {
    sb_add(&b, "%srank %d's %s[%llu..+%llu]", sep, (int)st->rem_peer,
           weft_sim_buf_names[st->rem_buf], (unsigned long long)st->rem_off, cnt);
    sep = " -> ";
  }
  if (has_dst(k) && st->dst_buf < 3) {
    sb_add(&b, "%s%s[%llu..+%llu]", sep, weft_sim_buf_names[st->dst_buf],
           (unsigned long long)st->dst_off, cnt);
    sep = NULL;
  }
  if (is_token(k) && cnt == 1)
    sb_add(&b, ")");
  else
    sb_add(&b, sep && sep[0] == ',' ? ", %llu elements)" : ")", cnt);
  return out;
}

const char *weft_sim_sval_desc(char *out, size_t len, const sval_t *v, int n) {
  if (v->kind == SV_RAW)
    snprintf(out, len, "rank %llu's send[%u]", (unsigned long long)v->bits, v->idx);
  else if (v->kind == SV_PART)
    snprintf(out, len, "element %u reduced over %d of %d ranks (mask 0x%llx)%s", v->idx,
             __builtin_popcountll(v->bits), n, (unsigned long long)v->bits,
             v->final ? "" : ", not final");
  else if (v->kind == SV_TOKEN)
    snprintf(out, len, "a SIGNAL token");
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

int weft_sim_race(sim_t *m, int r, uint32_t l, size_t pos, int write) {
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

// Rank r's step `st` reads or writes a rank that has returned to its caller.
static void read_after_return(sim_t *m, const char *d, int r, const weft_step_t *st) {
  int p = st->rem_peer;
  weft_sim_fail(m,
                "%s: rank %d %s rank %d's %s buffer after rank %d returned (its buffers may "
                "already be freed; a final SIGNAL/WAIT handshake is missing?)",
                d, r, writes_peer(st->kind) ? "writes" : "reads", p, weft_sim_buf_names[st->rem_buf % 3], p);
}

// A broken rule of the element operations: `v` is the value the step was
// working on (its local operand, or what it read), `in` what came in.
int weft_sim_reject(sim_t *m, const weft_sim_at_t *at, int rule, sval_t v, sval_t in) {
  const weft_step_t *st = at->st;
  char d[256], b[128];
  weft_sim_step_desc(d, sizeof(d), at->r, at->lane, at->idx, st);
  const char *got = reads_peer(st->kind) ? "read" : "received";
  unsigned long long rem = (unsigned long long)(st->rem_off + at->e);
  const char *rbuf = weft_sim_buf_names[st->rem_buf % 3];
  switch (rule) {
    case SIM_READ_AFTER_RETURN: read_after_return(m, d, at->r, st); break;
    case SIM_TOKEN_MISMATCH:
      weft_sim_fail(m, "%s: pops %s from %d->%d, expected %s", d,
                    weft_sim_sval_desc(b, sizeof(b), &in, m->n), (int)st->recv_peer, at->r,
                    is_token(st->kind) ? "a SIGNAL token" : "data");
      break;
    case SIM_READ_NOTHING:
      weft_sim_fail(m,
                    "%s: reads rank %d's %s[%llu], which holds nothing yet (read before rank %d "
                    "wrote it? a WAIT is missing)",
                    d, (int)st->rem_peer, rbuf, rem, (int)st->rem_peer);
      break;
    case SIM_NOT_OWN_INPUT:
      weft_sim_fail(
          m, "%s: local operand is %s, not rank %d's own input (overwritten before it was read?)",
          d, weft_sim_sval_desc(b, sizeof(b), &v, m->n), at->r);
      break;
    case SIM_NOT_PEER_INPUT:
      weft_sim_fail(m,
                    "%s: the operand read from rank %d's %s[%llu] is %s, not rank %d's own input "
                    "(overwritten before it was read, or the wrong buffer?)",
                    d, (int)st->rem_peer, rbuf, rem, weft_sim_sval_desc(b, sizeof(b), &v, m->n),
                    (int)st->rem_peer);
      break;
    case SIM_NOT_IN_PROGRESS:
      weft_sim_fail(m, "%s: accumulates into %s, which is not a partial result in progress", d,
                    weft_sim_sval_desc(b, sizeof(b), &v, m->n));
      break;
    case SIM_BAD_COMBINE:
      if (in.kind != SV_PART)
        weft_sim_fail(m, "%s: %s %s, which is not a reduction operand%s", d, got,
                      weft_sim_sval_desc(b, sizeof(b), &in, m->n),
                      in.kind == SV_RAW ? " (the sender lacks REDUCE_INPUT?)" : "");
      else if (in.final)
        weft_sim_fail(m, "%s: %s %s and reduces it again", d, got,
                      weft_sim_sval_desc(b, sizeof(b), &in, m->n));
      else if (in.idx != v.idx)
        weft_sim_fail(
            m, "%s: combines element %u %s with element %u of its own (wrong chunk or offset)", d,
            in.idx, got, v.idx);
      else
        weft_sim_fail(m, "%s: element %u of rank %d reduced twice", d, v.idx,
                      __builtin_ctzll(in.bits & v.bits));
      break;
    default:  // SIM_BAD_FINAL
      if (v.bits == m->full)
        weft_sim_fail(m, "%s: completes the reduction of element %u but lacks FINAL", d, v.idx);
      else
        weft_sim_fail(m, "%s: has FINAL but element %u is reduced over only %d of %d ranks", d,
                      v.idx, __builtin_popcountll(v.bits), m->n);
      break;
  }
  return -1;
}

// Does rank p still have a step sending data (token=0) or a SIGNAL (token=1)
// to rank r?
static int will_send(const sim_t *m, int p, int r, int token) {
  const srank_t *P = &m->rk[p];
  for (uint32_t l = 0; l < P->s.nlanes; l++)
    for (uint32_t i = P->cur[l]; i < P->s.lanes[l].count; i++) {
      const weft_step_t *st = &P->s.steps[P->s.lanes[l].first + i];
      if (has_send(st->kind) && st->send_peer == r && is_token(st->kind) == token) return 1;
    }
  return 0;
}

void weft_sim_report_deadlock(sim_t *m) {
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
      int tok = is_token(st->kind);
      if (in && in->len == 0)
        sb_add(&b, "%s on %d->%d%s", tok ? "a SIGNAL" : "data", (int)st->recv_peer, r,
               will_send(m, st->recv_peer, r, tok)
                   ? ""
                   : (tok ? " that rank never signals" : " that rank never sends"));
      else
        sb_add(&b, "room on %d->%d (full)%s", r, (int)st->send_peer, tok ? " for its SIGNAL" : "");
    }
  }
  weft_sim_fail(m, "deadlock, %d lanes stuck: %s%s", stuck, msg, stuck > shown ? "; ..." : "");
}
