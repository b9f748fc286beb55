/*
 * small.c — the small-message path (NCCL_PROTO's LL): a collective of a few
 * cache lines per rank, run to completion on the caller's thread by a lean
 * executor over the algorithm's own schedule.
 *
 * An 8-byte call moves one cache line to each peer; what it costs beyond
 * that is software. So a small call skips what a call that outlives its
 * entry point needs: no heap, no queue, no per-call schedule. The
 * communicator keeps the last WEFT_SMALL_KEPT shapes' schedules, built by
 * algorithms/ like any other and compiled once: each step's connections
 * resolved, the peers the call takes a ticket with noted, and the
 * shape checked to fit (every step one slot of a slot transport, no reads
 * of peer memory, no tokens). Running one is a pass over its lanes in which
 * each step moves its one slot as soon as its input is there and its
 * output has room, through the engine's own data movement
 * (weft_engine_move), until every lane is done; a message a rank sends
 * itself (the one-shot AllReduce's own contribution) stays in a buffer on
 * this stack instead of going through a slot. So the wire, the fold order
 * and the bits are the engine's whichever path a rank takes.
 *
 * It runs when the tuner chose LL (at most 4 KiB per rank, an algorithm LL
 * carries), the call completes on return (not in a group, the NULL stream,
 * host memory), no profiler watches, the communicator has nothing else in
 * flight, and the shape fits; otherwise the engine runs the call.
 *
 * Waiting keeps every promise of the engine's: the abort word and
 * ncclCommAbort are seen at once, a dead peer of this host within
 * WEFT_LIVENESS_MS, a mismatched call by its slot tag or (before sleeping)
 * its descriptor, a silent peer by a WARN at WEFT_TIMEOUT (a failure only
 * with WEFT_TIMEOUT_FAIL=1); the descriptor and the status weft-status
 * reads are published as the engine does. A peer this rank only sends to
 * (a Broadcast's root) is not waited for to launch the call: its check is
 * owed and settled by later calls (mismatch.h).
 */
#include "small.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "dtype.h"
#include "env.h"
#include "hooks.h"
#include "mismatch.h"
#include "segment.h"
#include "util.h"
#include "waiter.h"

#define WEFT_SMALL_KEPT 8

// A schedule is a function of these (and of the communicator's layout).
typedef struct {
  uint64_t count, slice;
  int coll, algo, root, esize;
} shape_t;

// A kept shape and its schedule, compiled.
typedef struct {
  shape_t shape;
  int built;                  // shape and fits are set
  int fits;                   // 0: the engine runs this shape
  weft_schedule_t sched;
  weft_conn_t **conn_of;      // [2 * nsteps]: step i sends on [2i], receives on [2i+1] (NULL: none, or itself)
  size_t conn_of_cap;
  uint64_t sends, recvs;      // the peers it takes a send, a receive ticket with (bit per rank)
} kept_t;

struct weft_small_kept {
  kept_t k[WEFT_SMALL_KEPT];
  unsigned next, last;        // the entry a new shape replaces; the one used last
};

/* ---------- compiling a shape ---------- */

// One slot of a slot transport carries the whole step.
static int one_slot(const weft_conn_t *c, size_t bytes) {
  return c->tp != NULL && (c->is_send || c->tp->recv_expect == NULL) && bytes <= c->slot_bytes;
}

// Resolve each step's connections and decide whether the shape fits.
static int compile(kept_t *e, struct ncclComm *comm, size_t esize) {
  const weft_schedule_t *s = &e->sched;
  int me = comm->rank, self_sends = 0, self_recvs = 0;
  uint64_t sends = 0, recvs = 0;
  if (s->nlanes > WEFT_SMALL_MAX_RANKS) return 0;
  if (e->conn_of_cap < 2 * (size_t)s->nsteps) {
    weft_conn_t **grown = realloc(e->conn_of, 2 * (size_t)s->nsteps * sizeof(*grown));
    if (grown == NULL) return 0;
    e->conn_of = grown;
    e->conn_of_cap = 2 * (size_t)s->nsteps;
  }
  for (uint32_t i = 0; i < s->nsteps; i++) {
    const weft_step_t *st = &s->steps[i];
    size_t bytes = st->count * esize;
    if (weft_step_touches_peer(st) || st->kind == WEFT_STEP_SIGNAL || st->kind == WEFT_STEP_WAIT) return 0;
    if ((st->send_peer == me && st->recv_peer == me) || bytes > WEFT_SMALL_MAX_BYTES) return 0;
    weft_conn_t *c[2] = {NULL, NULL};
    const int peer[2] = {st->send_peer, st->recv_peer};
    for (int dir = 0; dir < 2; dir++) {
      int p = peer[dir];
      if (p < 0) continue;
      if (p == me) {
        dir == 0 ? self_sends++ : self_recvs++;
        continue;
      }
      uint64_t *seen = dir == 0 ? &sends : &recvs;
      c[dir] = weft_comm_conn(comm, WEFT_CLASS_COLL, dir == 0, p);
      if (!one_slot(c[dir], bytes)) return 0;
      *seen |= 1ull << p;
    }
    e->conn_of[2 * i] = c[0];
    e->conn_of[2 * i + 1] = c[1];
  }
  // A message to itself waits in one buffer, so at most one.
  if (self_sends > 1 || self_recvs != self_sends) return 0;
  e->sends = sends, e->recvs = recvs;
  return 1;
}

// The compiled schedule for op's shape: kept, or built now in place of the oldest.
static const kept_t *kept_for(struct weft_small_kept *kept, const weft_op_t *op) {
  shape_t want = {.count = op->args.count, .slice = op->args.slice, .coll = op->args.coll, .algo = op->algo,
                  .root = op->args.root, .esize = (int)op->esize};
  for (unsigned j = 0; j < WEFT_SMALL_KEPT; j++) {  // the last one used first: loops repeat one shape
    unsigned i = (kept->last + j) % WEFT_SMALL_KEPT;
    if (kept->k[i].built && memcmp(&kept->k[i].shape, &want, sizeof(want)) == 0) return &kept->k[kept->last = i];
  }
  kept_t *e = &kept->k[kept->last = kept->next++ % WEFT_SMALL_KEPT];
  e->built = 0;
  e->sched.nsteps = e->sched.nlanes = 0;  // its arrays are reused
  e->fits = weft_schedule_build(&op->args, op->algo, &e->sched) == ncclSuccess && e->sched.nsteps > 0 &&
            compile(e, op->comm, op->esize);
  e->shape = want;
  e->built = 1;
  return e;
}

/* ---------- running it ---------- */

typedef struct {
  weft_op_t *op;
  const kept_t *e;
  uint32_t cursor[WEFT_SMALL_MAX_RANKS];  // per lane: its next step
  uint32_t lanes_left;
  int loop_full;                          // the message to itself is waiting, at loop_data
  char *loop;                             // WEFT_SMALL_MAX_BYTES on the caller's stack
  const char *loop_data;                  // `loop`, or the input itself when it cannot change meanwhile
  // What the last pass that moved nothing waited for: a connection, or
  // (conn NULL) the descriptor of a peer only sent to.
  const weft_conn_t *want_conn;
  int want_peer;
  int published_waiting;
  int64_t timeouts_warned;                // WEFT_TIMEOUT periods of the current wait, each WARNed
} run_t;

// Out of place, the input is never written during the call (schedules
// write only the receive buffer).
static int input_stays(const weft_op_t *op) {
  uintptr_t sb = (uintptr_t)op->sendbuff, rb = (uintptr_t)op->recvbuff;
  size_t sbytes = weft_coll_send_elems(&op->args) * op->esize, rbytes = weft_coll_recv_elems(&op->args) * op->esize;
  return sb + sbytes <= rb || rb + rbytes <= sb;
}

// Move one step's slot if its input is there and its output has room:
// 1 moved, 0 not yet (run.want_* says on what), -1 failed.
static int try_step(run_t *r, const weft_step_t *st, weft_conn_t *sc, weft_conn_t *rc) {
  weft_op_t *op = r->op;
  int me = op->comm->rank;
  size_t bytes = st->count * op->esize, got = 0;
  uint32_t tag = 0;
  const char *in = NULL;
  char *out = NULL;
  if (st->recv_peer == me) {
    if (!r->loop_full) return r->want_conn = NULL, r->want_peer = me, 0;  // not reached: sends come first
    in = r->loop_data;
  } else if (rc != NULL && (in = rc->tp->recv_slot(rc, &got, &tag)) == NULL) {
    return r->want_conn = rc, r->want_peer = rc->peer, 0;
  }
  if (st->send_peer == me) {
    // Sending its own input to itself unchanged, out of place: the input itself is the message.
    int as_is = st->kind == WEFT_STEP_SEND && st->src_buf == WEFT_BUF_SEND && input_stays(op) &&
                !((st->flags & WEFT_STEP_REDUCE_INPUT) && weft_redop_transforms(&op->redop));
    r->loop_full = 1;
    r->loop_data = as_is ? op->sendbuff + st->src_off * op->esize : r->loop;
    if (as_is) return 1;
    out = r->loop;
  } else if (sc != NULL && (out = sc->tp->send_slot(sc)) == NULL) {
    return r->want_conn = sc, r->want_peer = sc->peer, 0;
  }
  if (rc != NULL && !weft_op_incoming_ok(op, rc->peer, tag, got, bytes)) return -1;
  weft_engine_move(op, st, out, in, 0, st->count);
  if (rc != NULL) rc->tp->recv_release(rc);
  if (sc != NULL) sc->tp->send_post(sc, bytes, op->tag);
  if (st->recv_peer == me) r->loop_full = 0;
  return 1;
}

// Peers this rank only sent to: their checks are owed (weft_mismatch_defer)
// or, when too many are, made now. 1 all settled, 0 one has not launched
// the call yet, -1 a mismatch.
static int settle_sent_only(run_t *r) {
  weft_op_t *op = r->op;
  for (uint64_t m = r->e->sends & ~r->e->recvs; m != 0; m &= m - 1) {
    int p = __builtin_ctzll(m);
    if (op->verified[p]) continue;
    if (weft_mismatch_defer(op, p)) {
      op->verified[p] = 1;  // owed (or nothing to owe): later calls settle it
      continue;
    }
    int v = weft_mismatch_verify_peer(op, p);
    if (v <= 0) return r->want_conn = NULL, r->want_peer = p, v;
  }
  return 1;
}

// One pass over the lanes: each moves as far as it can.
static weft_wait_t run_pass(void *ctx) {
  run_t *r = ctx;
  const weft_schedule_t *s = &r->e->sched;
  int moved = 0;
  for (uint32_t l = 0; l < s->nlanes && r->lanes_left > 0; l++) {
    const weft_lane_t *lane = &s->lanes[l];
    while (r->cursor[l] < lane->count) {
      uint32_t i = lane->first + r->cursor[l];
      int rv = try_step(r, &s->steps[i], r->e->conn_of[2 * i], r->e->conn_of[2 * i + 1]);
      if (rv < 0) return WEFT_WAIT_FAILED;
      if (rv == 0) break;
      moved = 1;
      if (++r->cursor[l] == lane->count) r->lanes_left--;
    }
  }
  if (r->lanes_left == 0) {
    int c = settle_sent_only(r);
    if (c != 0) return c > 0 ? WEFT_WAIT_READY : WEFT_WAIT_FAILED;
  }
  if (moved) return WEFT_WAIT_MOVED;
  return weft_op_fail_if_aborted(r->op) ? WEFT_WAIT_FAILED : WEFT_WAIT_IDLE;
}

// Idle past the spin budget: a death, a mismatch, the timeout. FAILED or IDLE (wait on).
static weft_wait_t run_check(void *ctx, int64_t now, int64_t since) {
  run_t *r = ctx;
  weft_op_t *op = r->op;
  struct ncclComm *comm = op->comm;
  int peer = r->want_peer;
  char reason[400];
  if (peer >= 0 && weft_segment_poll_deaths(comm->seg, now) > 0 && weft_segment_peer_dead(comm->seg, peer)) {
    // What the rank wrote before it died outlives it, and this pass comes
    // after its death: take that first (the last pass may have been just before it).
    weft_wait_t again = run_pass(r);
    if (again != WEFT_WAIT_IDLE) return again;
    peer = r->want_peer;
    if (peer >= 0 && weft_segment_peer_dead(comm->seg, peer)) {
      weft_op_fail_dead_peer(op, peer);
      return WEFT_WAIT_FAILED;
    }
  }
  // A peer that sends us nothing of this call may have called another one.
  if (r->want_conn != NULL && !r->want_conn->is_send && weft_mismatch_verify_peer(op, peer) < 0)
    return WEFT_WAIT_FAILED;
  // At WEFT_TIMEOUT and each multiple: the engine's WARN; failing only when asked.
  if (weft_timeout_due(now - since, r->timeouts_warned)) {
    const char *what = r->want_conn == NULL ? "see the call of" : r->want_conn->is_send ? "send to" : "receive from";
    snprintf(reason, sizeof(reason),
             "rank %d: %s #%" PRIu64 " (count %zu, %s, algo %s, proto LL) made no progress for %lld s (WEFT_TIMEOUT) "
             "waiting to %s rank %d; waiting on rank(s) %d",
             comm->rank, weft_coll_name(op->args.coll), op->seq, op->args.count, weft_dtype_name(op->dtype),
             weft_algo_name(op->algo), (long long)((now - since) / 1000000000), what, peer, peer);
    if (weft_timeout_warn(reason)) {
      weft_op_fail(op, ncclTimeout, reason);
      return WEFT_WAIT_FAILED;
    }
    r->timeouts_warned++;
  }
  if (!r->published_waiting) {
    weft_engine_publish(op, WEFT_STATUS_WAITING, peer, 0, op->args.count * op->esize, now);
    r->published_waiting = 1;
  }
  return WEFT_WAIT_IDLE;
}

// Take the sequence number and a ticket on each connection the shape
// uses if every one is free now (nothing queued on it), in `tickets`
// (2 * nranks); 0 when the engine must run the call.
static int claim(weft_op_t *op, const kept_t *e, int64_t *tickets) {
  int n = op->comm->nranks;
  op->send_ticket = tickets, op->recv_ticket = tickets + n;
  for (int p = 0; p < n; p++) {
    op->send_ticket[p] = (e->sends >> p & 1) ? 0 : -1;
    op->recv_ticket[p] = (e->recvs >> p & 1) ? 0 : -1;
  }
  if (weft_op_take_turn(op, 1)) return 1;
  op->send_ticket = op->recv_ticket = NULL;  // the engine's launch gives the call its own
  return 0;
}

static void run(weft_op_t *op, const kept_t *e) {
  struct ncclComm *comm = op->comm;
  _Alignas(64) char loop[WEFT_SMALL_MAX_BYTES];  // not cleared: only what the call sends itself is read
  run_t r;
  r.op = op, r.e = e, r.loop = loop, r.loop_data = loop, r.loop_full = 0, r.lanes_left = 0;
  r.want_conn = NULL, r.want_peer = -1, r.published_waiting = 0, r.timeouts_warned = 0;
  for (uint32_t l = 0; l < e->sched.nlanes; l++) {
    r.cursor[l] = 0;
    r.lanes_left += e->sched.lanes[l].count > 0;
  }
  uint8_t verified[WEFT_SMALL_MAX_RANKS] = {0};
  op->verified = verified;
  op->cls = WEFT_CLASS_COLL;
  op->check = weft_env_WEFT_CHECK_MISMATCH() != 0;
  op->tag = op->check ? weft_mismatch_tag(op) : 0;
  weft_mismatch_publish(op);
  // No RUNNING status: a call that waits past its spin publishes WAITING (run_check), and every one IDLE.
  TRACE(WEFT_LOG_COLL, "%s count=%zu %s op=%d root=%d algo=%s proto=LL steps=%u", weft_coll_name(op->args.coll),
        op->args.count, weft_dtype_name(op->dtype), op->user_op, op->args.root, weft_algo_name(op->algo),
        e->sched.nsteps);
  if (!weft_op_fail_if_aborted(op) &&  // a failed communicator runs nothing, as in the engine
      weft_wait(run_pass, run_check, &r, weft_segment_doorbell(comm->seg, comm->rank), comm->spin_ns) ==
          WEFT_WAIT_READY)
    op->state = WEFT_OP_DONE;
  if (op->state == WEFT_OP_PENDING) op->state = WEFT_OP_FAILED;  // not reached: every failure says why
  weft_engine_publish(op, op->state == WEFT_OP_DONE ? WEFT_STATUS_IDLE : WEFT_STATUS_FAILED, -1, 0, 0, 0);
  weft_op_give_turn(op);
  op->verified = NULL;
  op->send_ticket = op->recv_ticket = NULL;
}

int weft_small_try(weft_op_t *op, ncclResult_t *res) {
  struct ncclComm *comm = op->comm;
  int idle = 0;
  if (comm->nranks > WEFT_SMALL_MAX_RANKS || comm->prof != NULL || weft_plugin_hooks.op_start != NULL ||
      !atomic_compare_exchange_strong_explicit(&comm->inflight, &idle, 1, memory_order_acquire, memory_order_relaxed))
    return 0;  // other work in flight (a small call on another thread too): the engine queues behind it
  op->counted = 1;  // counted in comm->inflight until the caller's weft_op_release_comm
  const kept_t *e = NULL;
  if (comm->small == NULL) comm->small = calloc(1, sizeof(*comm->small));
  if (comm->small != NULL) e = kept_for(comm->small, op);
  int64_t tickets[2 * WEFT_SMALL_MAX_RANKS];
  if (e == NULL || !e->fits || !claim(op, e, tickets)) {
    weft_op_release_comm(op);
    return 0;
  }
  run(op, e);
  *res = op->state == WEFT_OP_DONE ? ncclSuccess : op->result;
  return 1;
}

void weft_small_free(struct ncclComm *comm) {
  if (comm->small == NULL) return;
  for (int i = 0; i < WEFT_SMALL_KEPT; i++) {
    weft_schedule_free(&comm->small->k[i].sched);
    free(comm->small->k[i].conn_of);
  }
  free(comm->small);
  comm->small = NULL;
}
