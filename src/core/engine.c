/*
 * engine.c — executes schedules (see engine.h).
 *
 * Every step is streamed slot by slot: a slot moves as soon as its input has
 * arrived and its output has room, so consecutive steps and neighbouring
 * ranks overlap naturally (pipelining). Reductions read the incoming slot
 * and write straight into the outgoing one. Before a collective moves data
 * with a peer it checks that the peer launched the same call (descriptor
 * board); any failure is published communicator-wide so every rank fails
 * fast instead of hanging (mismatch.c compares the calls).
 */
#include "engine.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "anysrc.h"
#include "checks.h"
#include "copy.h"
#include "dtype.h"
#include "env.h"
#include "mismatch.h"
#include "segment.h"
#include "util.h"
#include "waiter.h"

static char *op_buffer(const weft_op_t *op, int which) {
  return which == WEFT_BUF_SEND ? (char *)op->sendbuff : which == WEFT_BUF_RECV ? op->recvbuff : NULL;
}

void weft_op_fail(weft_op_t *op, ncclResult_t res, const char *reason) {
  if (op->state != WEFT_OP_PENDING) return;
  op->state = WEFT_OP_FAILED;
  op->result = res;
  weft_comm_set_error(op->comm, res);
  if (reason != NULL) weft_comm_fail(op->comm, res, reason);
}

static void do_copy(const weft_op_t *op, const weft_step_t *st, char *dst, const char *src, size_t n) {
  int reducing = op->has_op && (st->flags & WEFT_STEP_REDUCE_INPUT);
  if (reducing && weft_redop_transforms(&op->redop)) {
    weft_reduce_first(&op->redop, dst, src, n, (st->flags & WEFT_STEP_FINAL) != 0);
  } else if (dst != src) {
    memmove(dst, src, n * op->esize);
  }
}

// Data arriving for the user's output buffer: large outputs bypass the cache.
static void copy_out(const weft_op_t *op, char *dst, const char *src, size_t bytes) {
  if (op->nt) weft_copy_nt(dst, src, bytes);
  else memcpy(dst, src, bytes);
}

void weft_engine_move(const weft_op_t *op, const weft_step_t *st, char *out, const char *in, size_t first,
                      size_t n) {
  size_t es = op->esize, off = first * es, bytes = n * es;
  const char *src = op_buffer(op, st->src_buf);
  char *dst = op_buffer(op, st->dst_buf);
  if (src != NULL) src += st->src_off * es + off;
  if (dst != NULL) dst += st->dst_off * es + off;
  int final = (st->flags & WEFT_STEP_FINAL) != 0;
  const weft_redop_t *rop = (st->flags & WEFT_STEP_ACCUMULATE) ? &op->redop_acc : &op->redop;
  switch (st->kind) {
    case WEFT_STEP_COPY: do_copy(op, st, dst, src, n); break;
    case WEFT_STEP_SEND: do_copy(op, st, out, src, n); break;
    case WEFT_STEP_RECV: copy_out(op, dst, in, bytes); break;
    case WEFT_STEP_RECV_REDUCE: weft_reduce(rop, dst, in, src, n, final); break;
    case WEFT_STEP_RECV_REDUCE_SEND: weft_reduce(rop, out, in, src, n, final); break;
    case WEFT_STEP_RECV_COPY_SEND:
      memcpy(out, in, bytes);
      copy_out(op, dst, in, bytes);
      break;
    case WEFT_STEP_RECV_REDUCE_COPY_SEND:
      weft_reduce(rop, out, in, src, n, final);
      copy_out(op, dst, out, bytes);
      break;
    default: break;
  }
}

// READ / READ_REDUCE / WRITE: data crosses once, from or into the peer's
// buffer. Returns 1 when the step ran (or failed), 0 while the peer has not
// launched the call.
static int single_copy_step(weft_op_t *op, const weft_step_t *st, weft_lane_state_t *ls) {
  struct ncclComm *comm = op->comm;
  int p = st->rem_peer;
  size_t es = op->esize, bytes = st->count * es;
  char *near = NULL;  // the peer's region, when this process can address it
  uint64_t far = 0;
  if (p == comm->rank) {
    near = op_buffer(op, st->rem_buf) + st->rem_off * es;
  } else {
    int v = weft_mismatch_verify_peer(op, p);
    if (v != 1) return v < 0;
    int which = 2 * p + (st->rem_buf == WEFT_BUF_RECV);
    far = op->peer_buf[which] + st->rem_off * es;
    if (comm->bs.peers[p].pid == comm->bs.peers[comm->rank].pid) near = (char *)(uintptr_t)far;
    else if (op->peer_buf[2 * comm->nranks + which] != 0)  // mapped (window_map.c)
      near = (char *)(uintptr_t)op->peer_buf[2 * comm->nranks + which] + st->rem_off * es;
  }
  weft_conn_t *c = weft_comm_conn(comm, WEFT_CLASS_COLL, 0, p);
  char *dst = op_buffer(op, st->dst_buf) + st->dst_off * es;
  int final = (st->flags & WEFT_STEP_FINAL) != 0;
  ncclResult_t res = ncclSuccess;
  if (st->kind == WEFT_STEP_WRITE) {
    const char *src = op_buffer(op, st->src_buf) + st->src_off * es;
    if (near == NULL) res = c->tp->write(c, far, src, bytes);
    else if (near != src && op->nt && p != comm->rank) weft_copy_nt(near, src, bytes);  // another rank's output
    else if (near != src) memmove(near, src, bytes);
  } else if (st->kind == WEFT_STEP_READ) {
    if (near == NULL) res = c->tp->read(c, dst, far, bytes);
    else if (near != dst && op->nt) weft_copy_nt(dst, near, bytes);  // op->nt: no overlap
    else if (near != dst) memmove(dst, near, bytes);
    if (res == ncclSuccess && op->has_op && (st->flags & WEFT_STEP_REDUCE_INPUT) && weft_redop_transforms(&op->redop))
      weft_reduce_first(&op->redop, dst, dst, st->count, final);
  } else {
    if (near == NULL) {
      if (op->scratch_bytes < bytes) {
        free(op->scratch);
        op->scratch = malloc(bytes);
        op->scratch_bytes = op->scratch != NULL ? bytes : 0;
      }
      if (op->scratch == NULL) res = ncclSystemError;
      else res = c->tp->read(c, op->scratch, far, bytes);
      near = op->scratch;
    }
    // dst = src OP (prescaled) operand of rank p, where src is a running
    // partial, or with REDUCE_INPUT this rank's own operand (prescaled too).
    const char *src = op_buffer(op, st->src_buf) + st->src_off * es;
    if (res == ncclSuccess && (st->flags & WEFT_STEP_REDUCE_INPUT) && op->redop.prescale) {
      weft_reduce_first(&op->redop, dst, src, st->count, 0);
      src = dst;
    }
    if (res == ncclSuccess) weft_reduce(&op->redop, dst, src, near, st->count, final);
  }
  if (res != ncclSuccess) {
    char reason[200];
    snprintf(reason, sizeof(reason), "rank %d could not %s rank %d's buffer in %s #%" PRIu64, comm->rank,
             st->kind == WEFT_STEP_WRITE ? "write" : "read", p, weft_coll_name(op->args.coll), op->seq);
    WARN("%s", reason);
    weft_op_fail(op, ncclRemoteError, reason);
    return 1;
  }
  ls->done = st->count;
  return 1;
}

// SIGNAL / WAIT: one empty slot each way.
static int token_step(weft_op_t *op, weft_conn_t *sc, weft_conn_t *rc, weft_lane_state_t *ls) {
  if (sc != NULL) {
    if (sc->tp->send_slot(sc) == NULL) return 0;
    sc->tp->send_post(sc, 0, op->tag);
  } else {
    size_t bytes = 0;
    uint32_t tag = 0;
    if (rc->tp->recv_slot(rc, &bytes, &tag) == NULL) return 0;
    if (op->check && tag != op->tag) {
      weft_mismatch_tag_differs(op, rc->peer);
      return 1;
    }
    if (op->verified[rc->peer] == 0) op->verified[rc->peer] = 1;
    rc->tp->recv_release(rc);
    if (bytes != 0) {
      char reason[200];
      snprintf(reason, sizeof(reason), "rank %d expected a token from rank %d in %s #%" PRIu64 " but got %zu bytes",
               op->comm->rank, rc->peer, weft_coll_name(op->args.coll), op->seq, bytes);
      WARN("%s", reason);
      weft_op_fail(op, ncclInvalidUsage, reason);
      return 1;
    }
  }
  ls->done = 1;
  return 1;
}

int weft_op_incoming_ok(weft_op_t *op, int peer, uint32_t tag, size_t got, size_t bytes) {
  if (op->check && tag != op->tag) {
    weft_mismatch_tag_differs(op, peer);
    return 0;
  }
  if (op->verified[peer] == 0) op->verified[peer] = 1;  // its tag matched
  if (got == bytes) return 1;
  char reason[300];
  snprintf(reason, sizeof(reason),
           "rank %d received %zu bytes from rank %d where %s #%" PRIu64 " expected %zu "
           "(mismatched counts or datatypes between the ranks?)",
           op->comm->rank, got, peer, weft_coll_name(op->args.coll), op->seq, bytes);
  WARN("%s", reason);
  weft_op_fail(op, ncclInvalidUsage, reason);
  return 0;
}

int weft_op_fail_if_aborted(weft_op_t *op) {
  struct ncclComm *comm = op->comm;
  ncclResult_t shared = weft_segment_abort_code(comm->seg);
  if (shared == ncclSuccess && !atomic_load(&comm->aborted)) return 0;
  const weft_segment_header_t *why = weft_segment_abort_header(comm->seg);
  if (shared != ncclSuccess)
    WARN("rank %d: %s #%" PRIu64 " failed: rank %d reported: %s", comm->rank, weft_coll_name(op->args.coll), op->seq,
         why->abort_rank, why->abort_reason);
  else
    WARN("rank %d: %s #%" PRIu64 " failed: the communicator was aborted", comm->rank, weft_coll_name(op->args.coll),
         op->seq);
  weft_op_fail(op, shared != ncclSuccess ? shared : ncclInvalidUsage, NULL);
  return 1;
}

void weft_op_fail_dead_peer(weft_op_t *op, int peer) {
  const weft_segment_t *seg = op->comm->seg;
  char reason[300];
  snprintf(reason, sizeof(reason), "rank %d (pid %d, on this host) died; rank %d's %s #%" PRIu64 " cannot complete",
           peer, (int)seg->hdr[peer]->pid, op->comm->rank, weft_coll_name(op->args.coll), op->seq);
  WARN("%s", reason);
  weft_op_fail(op, ncclRemoteError, reason);
}

// Steps whose incoming data only lands in the user's buffer.
static int copies_in(const weft_step_t *st) { return st->kind == WEFT_STEP_RECV || st->kind == WEFT_STEP_RECV_COPY_SEND; }

// Messages a step receives from its recv_peer: one per slot of its count,
// one token for WAIT, none for the others.
static int receives_chunks(const weft_step_t *st) {
  return st->recv_peer >= 0 && st->kind != WEFT_STEP_WAIT && !weft_step_touches_peer(st) &&
         st->kind != WEFT_STEP_SIGNAL;
}

// Tell rc's transport where the lane's coming messages from rc's peer go,
// as far ahead as it has room: the user's buffer for steps that only copy
// them there, their slot for the others. Each connection serves one lane
// of a schedule, so the lane's steps give the order of its messages.
static void describe_ahead(weft_op_t *op, const weft_lane_t *lane, weft_conn_t *rc) {
  weft_expect_cursor_t *x = &op->expect[rc->peer];
  weft_lane_state_t *ls = &op->lanes[lane - op->sched.lanes];
  if (x->step == UINT32_MAX) {  // the first message of this operation from that peer
    x->step = lane->first + ls->cursor;
    x->elems = ls->done;
  }
  size_t room = rc->tp->recv_expect_room(rc), es = op->esize, slot_elems = rc->slot_bytes / es;
  uint32_t end = lane->first + lane->count, tag = op->check ? op->tag : 0;
  for (; room > 0 && x->step < end; room--) {
    const weft_step_t *st = &op->sched.steps[x->step];
    if (st->recv_peer != rc->peer || (!receives_chunks(st) && st->kind != WEFT_STEP_WAIT) ||
        (receives_chunks(st) && x->elems >= st->count)) {
      x->step++, x->elems = 0, room++;  // nothing from that peer here
      continue;
    }
    if (st->kind == WEFT_STEP_WAIT) {
      rc->tp->recv_expect(rc, NULL, 0, tag);
      x->step++, x->elems = 0;
      continue;
    }
    size_t n = WEFT_MIN(slot_elems, st->count - x->elems);
    char *dst = copies_in(st) ? op_buffer(op, st->dst_buf) + (st->dst_off + x->elems) * es : NULL;
    rc->tp->recv_expect(rc, dst, n * es, tag);
    x->elems += n;
  }
}

// Move as much of one step as possible now. Returns 1 if anything moved.
static int step_progress(weft_op_t *op, const weft_lane_t *lane, const weft_step_t *st, weft_lane_state_t *ls) {
  struct ncclComm *comm = op->comm;
  weft_conn_t *sc = st->send_peer >= 0 ? weft_comm_conn(comm, op->cls, 1, st->send_peer) : NULL;
  weft_conn_t *rc = st->recv_peer >= 0 ? weft_comm_conn(comm, op->cls, 0, st->recv_peer) : NULL;
  // Slot tags catch mismatched calls on the way; descriptors are compared
  // only before reads and when the engine goes idle (engine_run).
  if (sc != NULL && atomic_load_explicit(&sc->served, memory_order_acquire) != (uint64_t)op->send_ticket[sc->peer])
    return 0;
  if (rc != NULL && atomic_load_explicit(&rc->served, memory_order_acquire) != (uint64_t)op->recv_ticket[rc->peer])
    return 0;
  if (weft_step_touches_peer(st)) return single_copy_step(op, st, ls);
  if (st->kind == WEFT_STEP_SIGNAL || st->kind == WEFT_STEP_WAIT) return token_step(op, sc, rc, ls);

  size_t es = op->esize;
  char *dst = op_buffer(op, st->dst_buf);
  if (dst != NULL) dst += st->dst_off * es;
  if (st->kind == WEFT_STEP_COPY) {
    weft_engine_move(op, st, NULL, NULL, 0, st->count);
    ls->done = st->count;
    return 1;
  }
  const weft_conn_t *via = sc != NULL ? sc : rc;  // every step left here has one
  if (via == NULL) return 0;
  size_t slot_elems = via->slot_bytes / es;
  int direct = rc != NULL && rc->tp->recv_expect != NULL && copies_in(st);
  if (rc != NULL && rc->tp->recv_expect != NULL) describe_ahead(op, lane, rc);
  int moved = 0;
  while (ls->done < st->count) {
    size_t n = WEFT_MIN(slot_elems, st->count - ls->done), bytes = n * es, off = ls->done * es;
    const char *in = NULL;
    char *out = NULL;
    size_t in_bytes = 0;
    uint32_t tag = 0;
    if (direct) {  // the transport may have landed it in dst (describe_ahead)
      if (sc != NULL && (out = sc->tp->send_slot(sc)) == NULL) break;
      int r = rc->tp->recv_landed(rc, &in_bytes, &tag);
      if (r == 0) break;
      if (r > 0) {
        if (!weft_op_incoming_ok(op, rc->peer, tag, in_bytes, bytes)) return 1;
        if (sc != NULL) {
          memcpy(out, dst + off, bytes);
          sc->tp->send_post(sc, bytes, op->tag);
        }
        ls->done += n;
        moved = 1;
        continue;
      }
    }
    if (rc != NULL && (in = rc->tp->recv_slot(rc, &in_bytes, &tag)) == NULL) break;
    if (sc != NULL && (out = sc->tp->send_slot(sc)) == NULL) break;
    if (rc != NULL && !weft_op_incoming_ok(op, rc->peer, tag, in_bytes, bytes)) return 1;
    weft_engine_move(op, st, out, in, ls->done, n);
    if (rc != NULL) rc->tp->recv_release(rc);
    if (sc != NULL) sc->tp->send_post(sc, bytes, op->tag);
    ls->done += n;
    moved = 1;
  }
  return moved;
}

// Give back the connections once the operation has finished or failed (once).
static void op_release(weft_op_t *op) {
  struct ncclComm *comm = op->comm;
  if (op->released) return;
  op->released = 1;
  weft_op_stage_give(op->send_copy, op->send_copy_bytes);  // every peer has written into this rank's output
  op->send_copy = NULL;
  if (__builtin_expect(op->prof.on, 0)) weft_plugin_hooks.op_stop(comm->prof, &op->prof);
  weft_engine_publish(op, op->state == WEFT_OP_FAILED ? WEFT_STATUS_FAILED : WEFT_STATUS_IDLE, -1, 0, 0, 0);
  weft_anysrc_finish(op);  // an unmatched receive from any rank gives its tickets up here
  weft_op_give_turn(op);
}

// The descriptor goes on the board when the operation starts to run, not
// when it is queued: a rank can queue any number of calls ahead of its
// peers, but runs a call only once its earlier calls on that stream are
// done, and a call that reads peers ends only after they have read it, so
// a board of WEFT_DESC_RING entries still holds every entry a peer may
// need (a group of more read calls than that runs them all at once).
// Peers write into this rank's output as soon as they see its
// descriptor; in place, the input they would overwrite is set aside before
// that, when the call starts (so only running calls hold a copy).
static void publish(weft_op_t *op) {
  if (op->published || op->cls != WEFT_CLASS_COLL) return;
  op->published = 1;
  if (op->set_aside) {
    size_t sbytes = weft_coll_send_elems(&op->args) * op->esize;
    if ((op->send_copy = weft_op_stage_take(sbytes, &op->send_copy_bytes)) == NULL) {
      char reason[160];
      snprintf(reason, sizeof(reason), "rank %d is out of memory setting aside %zu bytes of %s #%" PRIu64 "'s input",
               op->comm->rank, sbytes, weft_coll_name(op->args.coll), op->seq);
      WARN("%s", reason);
      weft_op_fail(op, ncclSystemError, reason);
      return;
    }
    memcpy(op->send_copy, op->sendbuff, sbytes);
    op->sendbuff = op->send_copy;
  }
  weft_mismatch_publish(op);
}

static int op_progress(weft_op_t *op) {
  if (op->state != WEFT_OP_PENDING) return 0;
  publish(op);
  if (op->state != WEFT_OP_PENDING) {  // it could not start
    op_release(op);
    return 1;
  }
  struct ncclComm *comm = op->comm;
  if (weft_op_fail_if_aborted(op)) {
    op_release(op);
    return 1;
  }
  int moved = 0;
  if (weft_anysrc_waiting(op) && !(moved = weft_anysrc_match(op))) return 0;  // no peer's message yet
  for (uint32_t l = 0; l < op->sched.nlanes && op->state == WEFT_OP_PENDING; l++) {
    const weft_lane_t *lane = &op->sched.lanes[l];
    weft_lane_state_t *ls = &op->lanes[l];
    while (ls->cursor < lane->count && op->state == WEFT_OP_PENDING) {
      const weft_step_t *st = &op->sched.steps[lane->first + ls->cursor];
      if (__builtin_expect(op->prof.lanes != NULL, 0)) weft_plugin_hooks.step(comm->prof, &op->prof, l, ls->cursor, 0);
      moved |= step_progress(op, lane, st, ls);
      if (ls->done < st->count) break;
      if (__builtin_expect(op->prof.lanes != NULL, 0)) weft_plugin_hooks.step(comm->prof, &op->prof, l, ls->cursor, 1);
      ls->cursor++;
      ls->done = 0;
      if (ls->cursor == lane->count) op->lanes_left--;
    }
  }
  // Done once every peer is known to run the same call: peers we only sent
  // to (whose tags we never saw) are compared by descriptor.
  if (op->state == WEFT_OP_PENDING && op->lanes_left == 0) {
    int c = weft_mismatch_check_peers(op);
    if (c > 0) op->state = WEFT_OP_DONE;
    else if (c == 0) return moved;  // a peer has not launched the call yet
  }
  if (op->state != WEFT_OP_PENDING) op_release(op);
  return moved || op->state != WEFT_OP_PENDING;
}

ncclResult_t weft_op_launch(weft_op_t *op) {
  struct ncclComm *comm = op->comm;
  int n = comm->nranks;
  // One block for the per-peer and per-lane state: tickets, lanes, expectation cursors, verified flags.
  size_t nl = op->sched.nlanes ? op->sched.nlanes : 1;
  char *block = calloc(1, 2 * sizeof(int64_t) * (size_t)n + nl * sizeof(*op->lanes) +
                             (size_t)n * sizeof(*op->expect) + (size_t)n);
  if (block == NULL) {
    WARN("out of memory launching %s", weft_coll_name(op->args.coll));
    return ncclSystemError;
  }
  op->send_ticket = (int64_t *)block;
  op->recv_ticket = op->send_ticket + n;
  op->lanes = (weft_lane_state_t *)(op->recv_ticket + n);
  op->expect = (weft_expect_cursor_t *)(op->lanes + nl);
  op->verified = (uint8_t *)(op->expect + n);
  for (int p = 0; p < n; p++) {
    op->send_ticket[p] = op->recv_ticket[p] = -1;
    op->expect[p].step = UINT32_MAX;
  }
  for (uint32_t i = 0; i < op->sched.nsteps; i++) {
    const weft_step_t *st = &op->sched.steps[i];
    if (st->send_peer >= 0) op->send_ticket[st->send_peer] = 0;
    if (st->recv_peer >= 0) op->recv_ticket[st->recv_peer] = 0;
    if (weft_step_touches_peer(st)) op->reads = 1;
  }
  if (op->any.on) weft_anysrc_mark(op);  // a ticket from every peer
  // Per peer: its send and recv addresses, then where this process maps them (0: not mapped).
  if (op->reads && (op->peer_buf = calloc((size_t)n * 4, sizeof(uint64_t))) == NULL) return ncclSystemError;
  op->check = op->cls == WEFT_CLASS_COLL && weft_env_WEFT_CHECK_MISMATCH() != 0;
  // Non-temporal output only out of place: in place, the output lines were
  // just read as input and are in the cache already.
  int64_t nt_min = weft_env_WEFT_NT_MIN_BYTES();
  uintptr_t rb = (uintptr_t)op->recvbuff, sb = (uintptr_t)op->sendbuff;
  size_t rbytes = weft_coll_recv_elems(&op->args) * op->esize, sbytes = weft_coll_send_elems(&op->args) * op->esize;
  int overlap = sb != 0 && rb != 0 && rb < sb + sbytes && sb < rb + rbytes;
  op->nt = nt_min > 0 && rbytes >= (uint64_t)nt_min && !overlap;
  op->set_aside = overlap && weft_algo_stages_send(op->algo, op->args.coll);
  op->lanes_left = 0;
  for (uint32_t l = 0; l < op->sched.nlanes; l++) op->lanes_left += op->sched.lanes[l].count > 0;
  if (op->lanes_left == 0) {
    op->state = WEFT_OP_DONE;
    op->released = 1;
  }

  weft_op_take_turn(op, 0);

  if (op->cls == WEFT_CLASS_COLL && op->check) op->tag = weft_mismatch_tag(op);
  if (op->state != WEFT_OP_PENDING) publish(op);  // done already: never progressed
  if (op->state == WEFT_OP_PENDING) weft_engine_publish(op, WEFT_STATUS_RUNNING, -1, 0, 0, 0);
  op->last_progress_ns = 0;  // stamped when the engine first finds it idle
  // Counted until weft_op_free: the engine may touch the communicator until then.
  atomic_fetch_add(&comm->inflight, 1);
  op->counted = 1;
  return ncclSuccess;
}

// No progress for WEFT_TIMEOUT, or for another multiple of it: the WARN
// naming the call, and failing it with ncclTimeout only when
// WEFT_TIMEOUT_FAIL asks (peers that are alive may just be slow: a
// checkpoint, a debugger). Returns 1 when the operation failed.
static int report_stuck(weft_op_t *op, int64_t idle_ns) {
  char peers[160], reason[400];
  uint64_t moved, total;
  int first;
  weft_engine_stuck_state(op, peers, sizeof(peers), &moved, &total, &first);
  snprintf(reason, sizeof(reason),
           "rank %d: %s #%" PRIu64 " (count %zu, %s, algo %s) made no progress for %lld s (WEFT_TIMEOUT) with %" PRIu64
           " of %" PRIu64 " bytes moved; waiting on rank(s) %s",
           op->comm->rank, weft_coll_name(op->args.coll), op->seq, op->args.count, weft_dtype_name(op->dtype),
           weft_algo_name(op->algo), (long long)(idle_ns / 1000000000), moved, total, peers);
  if (!weft_timeout_warn(reason)) {
    op->timeouts_warned++;
    return 0;
  }
  weft_op_fail(op, ncclTimeout, reason);
  op_release(op);
  return 1;
}

// The dead rank of this host an operation waits on: one its lanes' current
// steps receive from, send to or read from. An operation whose lanes are
// all done waits only on the descriptors of the peers it has not verified:
// a peer that ran the call to its end and then died stops nothing.
static int dead_peer_waited_on(const weft_op_t *op, const weft_segment_t *seg) {
  if (weft_anysrc_waiting(op)) return weft_segment_first_dead(seg);  // any peer may be the sender
  int open_lanes = 0;
  for (uint32_t l = 0; l < op->sched.nlanes; l++) {
    const weft_lane_t *lane = &op->sched.lanes[l];
    if (op->lanes[l].cursor >= lane->count) continue;
    open_lanes++;
    const weft_step_t *st = &op->sched.steps[lane->first + op->lanes[l].cursor];
    const int peers[3] = {st->recv_peer, st->send_peer, st->rem_peer};
    for (int i = 0; i < 3; i++)
      if (weft_segment_peer_dead(seg, peers[i])) return peers[i];
  }
  if (open_lanes) return -1;
  for (int p = 0; p < op->comm->nranks; p++)
    if (!op->verified[p] && (op->send_ticket[p] >= 0 || op->recv_ticket[p] >= 0) && weft_segment_peer_dead(seg, p))
      return p;
  return -1;
}

// A rank of this host that the operation waits on died (its process
// exited): fail the operation and, through the abort word, every rank's.
// Returns 1 when it did.
static int peer_died(weft_op_t *op, int64_t now) {
  weft_segment_t *seg = op->comm->seg;
  if (weft_segment_poll_deaths(seg, now) == 0 || dead_peer_waited_on(op, seg) < 0) return 0;
  // What the rank wrote before it died outlives it, and this pass comes after
  // its death: take that first (the last poll may have been just before it).
  op_progress(op);
  if (op->state != WEFT_OP_PENDING) return 1;  // it finished (or failed) on what was there
  int dead = dead_peer_waited_on(op, seg);
  if (dead < 0) return 0;
  weft_op_fail_dead_peer(op, dead);
  op_release(op);
  return 1;
}

// The operations weft_engine_run drives, for its poll and check below.
typedef struct {
  weft_op_t **ops;
  int nops, remaining;
  int64_t timeout_ms;
} engine_wait_t;

// One pass over the pending operations: each moves what it can.
static weft_wait_t engine_poll(void *ctx) {
  engine_wait_t *w = ctx;
  int moved = 0;
  for (int i = 0; i < w->nops; i++) {
    weft_op_t *op = w->ops[i];
    if (op->state != WEFT_OP_PENDING) continue;
    if (op_progress(op)) {
      moved = 1;
      op->last_progress_ns = 0;  // moved: its idle clock starts again
      op->timeouts_warned = 0;
    }
    if (op->state != WEFT_OP_PENDING) w->remaining--;
  }
  return w->remaining == 0 ? WEFT_WAIT_READY : moved ? WEFT_WAIT_MOVED : WEFT_WAIT_IDLE;
}

// Idle past the spin budget: compare descriptors with every peer an
// operation waits for (a mismatch that sends no slot our way is caught
// here), look for dead peers, publish the wait, and apply WEFT_TIMEOUT.
static weft_wait_t engine_check(void *ctx, int64_t now, int64_t since) {
  engine_wait_t *w = ctx;
  for (int i = 0; i < w->nops; i++) {
    weft_op_t *op = w->ops[i];
    if (op->state != WEFT_OP_PENDING) continue;
    if (op->last_progress_ns == 0) op->last_progress_ns = since;
    if (weft_mismatch_check_peers(op) < 0 || peer_died(op, now)) {
      op_release(op);  // once: a no-op when peer_died released it
      w->remaining--;
      continue;
    }
    weft_engine_publish_waiting(op, now);
    if (w->timeout_ms > 0 && weft_timeout_due(now - op->last_progress_ns, op->timeouts_warned) &&
        report_stuck(op, now - op->last_progress_ns))
      w->remaining--;
  }
  return w->remaining == 0 ? WEFT_WAIT_READY : WEFT_WAIT_IDLE;
}

// The first failure among finished operations.
static ncclResult_t first_failure(weft_op_t **ops, int nops) {
  for (int i = 0; i < nops; i++)
    if (ops[i]->state == WEFT_OP_FAILED) return ops[i]->result;
  return ncclSuccess;
}

int weft_engine_try(weft_op_t **ops, int nops, int64_t budget_ns, ncclResult_t *res) {
  engine_wait_t w = {.ops = ops, .nops = nops};
  for (int i = 0; i < nops; i++) w.remaining += ops[i]->state == WEFT_OP_PENDING;
  int64_t start = 0;
  for (unsigned spins = 0; w.remaining > 0; spins++) {
    if (engine_poll(&w) == WEFT_WAIT_READY) break;
    if ((spins & 15) != 15) {
      weft_cpu_relax();
      continue;
    }
    int64_t now = weft_now_ns();
    if (start == 0) start = now;
    else if (now - start >= budget_ns) return 0;
    if ((spins & 127) == 127) sched_yield();  // now and then, for ranks sharing a core
  }
  *res = first_failure(ops, nops);
  return 1;
}

ncclResult_t weft_engine_run(weft_op_t **ops, int nops, int queued) {
  engine_wait_t w = {.ops = ops, .nops = nops, .timeout_ms = weft_timeout_ms()};
  struct ncclComm *single = NULL;
  int64_t spin_ns = INT64_MAX;
  for (int i = 0; i < nops; i++) {
    if (ops[i]->state == WEFT_OP_PENDING) w.remaining++;
    if (i == 0) single = ops[i]->comm;
    else if (ops[i]->comm != single) single = NULL;
    spin_ns = WEFT_MIN(spin_ns, queued ? ops[i]->comm->spin_ns_queued : ops[i]->comm->spin_ns);
  }
  // Sleep on the rank's doorbell when the operations share a communicator.
  weft_doorbell_t *bell = single != NULL ? weft_segment_doorbell(single->seg, single->rank) : NULL;
  if (w.remaining > 0) weft_wait(engine_poll, engine_check, &w, bell, spin_ns);
  return first_failure(ops, nops);
}
