/*
 * small.c — the small-message path (NCCL_PROTO's LL): an AllReduce,
 * Broadcast, AllGather, ReduceScatter or AlltoAll of a few cache lines, run
 * straight through, without the engine.
 *
 * An 8-byte call moves one cache line to each peer; what it costs beyond
 * that is software. Here the call goes from the entry point to the FIFOs
 * with nothing in between: no schedule, no allocation, no lanes, no message
 * to itself. Each message is one slot whose header line also carries the
 * data (transports/shm/shm.c), and a rank spins on exactly the line that
 * will carry what it waits for.
 *
 * On the wire it is the engine's schedule for the call — the one-shot
 * AllReduce (algorithms/oneshot.c: this rank's prescaled input to every
 * peer, starting with the next rank; contributions folded in rank order
 * 0..n-1), the chain Broadcast (algorithms/chain.c: root -> next -> ...),
 * the ring AllGather and ReduceScatter (algorithms/ring.c, rank order on
 * one host) or the direct AlltoAll (algorithms/direct.c) — with the same slots in the same
 * order and the same tags, so a rank may
 * take this path while a peer takes the engine's (one that has work in
 * flight, say), and every rank folds in the same order, so all get the same
 * bits. It runs only when that holds trivially: the tuner chose that
 * algorithm and NCCL_PROTO allows LL, one message per connection, the
 * communicator has nothing in flight, the call is not in a group and
 * completes on return (NULL stream, host memory), no plugin watches, and
 * every connection used is a slot transport.
 *
 * Waiting keeps every promise of the engine's: the abort word and
 * ncclCommAbort are seen at once, a dead peer of this host within
 * WEFT_LIVENESS_MS, a mismatched call by its slot tag or (before sleeping)
 * its descriptor (for a peer only sent to that had not launched yet, by
 * later calls or ncclCommGetAsyncError), a silent peer by a WARN at
 * WEFT_TIMEOUT (a failure only with WEFT_TIMEOUT_FAIL=1);
 * the descriptor and the status weft-status reads are published as the
 * engine does.
 */
#include "small.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "checks.h"
#include "dtype.h"
#include "env.h"
#include "hooks.h"
#include "mismatch.h"
#include "segment.h"
#include "util.h"
#include "waiter.h"

// The connections a call uses (each takes one ticket), and for the chain
// and the ring this rank's neighbours and its place.
typedef struct {
  weft_conn_t *conn[2 * WEFT_SMALL_MAX_RANKS];
  int n;
  int prev, next, pos;
} plan_t;

static void use(plan_t *pl, struct ncclComm *comm, int is_send, int peer) {
  pl->conn[pl->n++] = weft_comm_conn(comm, WEFT_CLASS_COLL, is_send, peer);
}

// The ring's order on one host: rank order, or the communicator's order
// from the topology (weft_coll_args_t.order).
static inline int ring_rank(const weft_coll_args_t *a, int p) { return a->order ? a->order[p] : p; }
static inline int ring_pos(const weft_coll_args_t *a, int r) { return a->pos ? a->pos[r] : r; }

// Can the call take this path, and which connections would it use?
// (Their tickets are checked under the lock, by claim.)
static int eligible(const weft_op_t *op, size_t bytes, plan_t *pl) {
  struct ncclComm *comm = op->comm;
  int n = comm->nranks, me = comm->rank;
  if (n < 2 || n > WEFT_SMALL_MAX_RANKS || bytes > WEFT_SMALL_MAX_BYTES || bytes > comm->tv.slot_bytes ||
      op->args.count > op->args.slice)
    return 0;
  if (comm->tuner != NULL || comm->prof != NULL || weft_plugin_hooks.op_start != NULL) return 0;
  if (atomic_load_explicit(&comm->inflight, memory_order_relaxed) != 0) return 0;
  pl->n = 0;
  if (op->args.coll == WEFT_COLL_ALLREDUCE && op->algo == WEFT_ALGO_ONESHOT) {
    for (int p = 0; p < n; p++)
      if (p != me) use(pl, comm, 1, p), use(pl, comm, 0, p);
  } else if (op->args.coll == WEFT_COLL_BROADCAST && op->algo == WEFT_ALGO_CHAIN) {
    if (weft_chain_neighbours(&op->args, &pl->prev, &pl->next, &pl->pos) != ncclSuccess) return 0;
    if (pl->pos > 0) use(pl, comm, 0, pl->prev);
    if (pl->pos < n - 1) use(pl, comm, 1, pl->next);
  } else if ((op->args.coll == WEFT_COLL_ALLGATHER || op->args.coll == WEFT_COLL_REDUCESCATTER) &&
             op->algo == WEFT_ALGO_RING && comm->nhosts == 1) {
    // One host: the ring runs in the communicator's order (algorithms/layout.h).
    int p = ring_pos(&op->args, me);
    pl->prev = ring_rank(&op->args, (p + n - 1) % n), pl->next = ring_rank(&op->args, (p + 1) % n), pl->pos = p;
    use(pl, comm, 1, pl->next), use(pl, comm, 0, pl->prev);
  } else if (op->args.coll == WEFT_COLL_ALLTOALL && op->algo == WEFT_ALGO_DIRECT) {
    for (int p = 0; p < n; p++)
      if (p != me) use(pl, comm, 1, p), use(pl, comm, 0, p);
  } else {
    return 0;
  }
  for (int i = 0; i < pl->n; i++) {
    const weft_conn_t *c = pl->conn[i];
    if (c->tp == NULL || (!c->is_send && c->tp->recv_expect != NULL)) return 0;
  }
  return 1;
}

// Take the sequence number and one ticket on each connection of the plan,
// if every one is free now (nothing queued on it); 0 when the engine must
// run the call.
static int claim(weft_op_t *op, const plan_t *pl) {
  struct ncclComm *comm = op->comm;
  int ok = 1;
  pthread_mutex_lock(&comm->lock);
  for (int i = 0; i < pl->n && ok; i++)
    ok = atomic_load_explicit(&pl->conn[i]->served, memory_order_acquire) == pl->conn[i]->issued;
  if (ok) {
    op->seq = comm->coll_seq++;
    weft_segment_count_launch(comm->seg, comm->rank, (int)op->args.coll);
    for (int i = 0; i < pl->n; i++) pl->conn[i]->issued++;
  }
  pthread_mutex_unlock(&comm->lock);
  return ok;
}

typedef struct {
  weft_op_t *op;
  int64_t spin_ns;
  int published_waiting;
  int64_t timeouts_warned;  // WEFT_TIMEOUT periods of the current wait, each WARNed
} waiter_t;

// What a wait is for: the next slot of a connection (to fill or to read),
// or, with conn NULL, the descriptor of `peer` for this call (a peer that
// is only sent to must be seen to run the same call, as in the engine).
typedef struct {
  weft_conn_t *conn;
  int peer;
  size_t *bytes;  // receive: the slot's length and tag
  uint32_t *tag;
} want_t;

static const char *want_name(const want_t *x) {
  return x->conn == NULL ? "see the call of" : x->conn->is_send ? "send to" : "receive from";
}

// 1 ready (a slot in *slot), 0 not yet, -1 failed (a mismatch).
static int poll_once(weft_op_t *op, const want_t *x, void **slot) {
  weft_conn_t *c = x->conn;
  if (c == NULL) return weft_mismatch_verify_peer(op, x->peer);
  *slot = c->is_send ? c->tp->send_slot(c) : (void *)c->tp->recv_slot(c, x->bytes, x->tag);
  return *slot != NULL;
}

// Long idle on x: a death, a mismatch, the timeout. FAILED or IDLE (wait on).
static weft_wait_t check_idle(waiter_t *w, const want_t *x, int64_t now, int64_t since) {
  weft_op_t *op = w->op;
  struct ncclComm *comm = op->comm;
  int peer = x->peer;
  char reason[400];
  if (weft_segment_poll_deaths(comm->seg, now) > 0 && weft_segment_peer_dead(comm->seg, peer)) {
    weft_op_fail_dead_peer(op, peer);
    return WEFT_WAIT_FAILED;
  }
  // A peer that sends us nothing of this call may have called another one.
  if (x->conn != NULL && !x->conn->is_send && weft_mismatch_verify_peer(op, peer) < 0) return WEFT_WAIT_FAILED;
  // At WEFT_TIMEOUT and each multiple: the engine's WARN; failing only when asked.
  if (weft_timeout_due(now - since, w->timeouts_warned)) {
    snprintf(reason, sizeof(reason),
             "rank %d: %s #%" PRIu64 " (count %zu, %s, algo %s, proto LL) made no progress for %lld s (WEFT_TIMEOUT) "
             "waiting to %s rank %d; waiting on rank(s) %d",
             comm->rank, weft_coll_name(op->args.coll), op->seq, op->args.count, weft_dtype_name(op->dtype),
             weft_algo_name(op->algo), (long long)((now - since) / 1000000000), want_name(x), peer, peer);
    if (weft_timeout_warn(reason)) {
      weft_op_fail(op, ncclTimeout, reason);
      return WEFT_WAIT_FAILED;
    }
    w->timeouts_warned++;
  }
  if (!w->published_waiting) {
    weft_engine_publish(op, WEFT_STATUS_WAITING, peer, 0, op->args.count * op->esize, now);
    w->published_waiting = 1;
  }
  return WEFT_WAIT_IDLE;
}

// What wait_for's poll and check see.
typedef struct {
  waiter_t *w;
  const want_t *x;
  void **slot;
} wait_ctx_t;

static weft_wait_t wait_poll(void *ctx) {
  wait_ctx_t *c = ctx;
  int r = poll_once(c->w->op, c->x, c->slot);
  if (r != 0) return r > 0 ? WEFT_WAIT_READY : WEFT_WAIT_FAILED;
  return weft_op_fail_if_aborted(c->w->op) ? WEFT_WAIT_FAILED : WEFT_WAIT_IDLE;
}

static weft_wait_t wait_check(void *ctx, int64_t now, int64_t since) {
  wait_ctx_t *c = ctx;
  return check_idle(c->w, c->x, now, since);
}

// Wait until x is ready (waiter.h). Returns 1 when ready (a slot in *slot
// for a connection), 0 when the operation failed.
static int wait_for(waiter_t *w, const want_t *x, void **slot) {
  struct ncclComm *comm = w->op->comm;
  wait_ctx_t c = {.w = w, .x = x, .slot = slot};
  w->timeouts_warned = 0;  // the idle clock is this wait's
  return weft_wait(wait_poll, wait_check, &c, weft_segment_doorbell(comm->seg, comm->rank), w->spin_ns) ==
         WEFT_WAIT_READY;
}

// The next free slot of send connection c, or NULL (the operation failed).
static char *send_slot(waiter_t *w, weft_conn_t *c) {
  want_t x = {.conn = c, .peer = c->peer};
  void *slot = NULL;
  return wait_for(w, &x, &slot) ? slot : NULL;
}

// The next message on receive connection c, checked against this call (its
// tag and length), or NULL (the operation failed).
static const char *recv_slot(waiter_t *w, weft_conn_t *c, size_t bytes) {
  size_t got = 0;
  uint32_t tag = 0;
  want_t x = {.conn = c, .peer = c->peer, .bytes = &got, .tag = &tag};
  void *slot = NULL;
  if (!wait_for(w, &x, &slot) || !weft_op_incoming_ok(w->op, c->peer, tag, got, bytes)) return NULL;
  return slot;
}

// Peers this rank only sent to: their descriptors must show the same call.
// They are checked later (weft_mismatch_defer) rather than waited for, so
// that a root runs ahead of its receivers as far as the slots allow and
// does not read the line a receiver is writing its descriptor into; only
// when too many checks are owed does it wait.
static int verify_sent_to(waiter_t *w, const plan_t *pl) {
  for (int i = 0; i < pl->n; i++) {
    const weft_conn_t *c = pl->conn[i];
    if (!c->is_send || w->op->verified[c->peer] != 0) continue;
    if (weft_mismatch_defer(w->op, c->peer)) continue;
    want_t x = {.peer = c->peer};
    void *unused = NULL;
    if (!wait_for(w, &x, &unused)) return 0;
  }
  return 1;
}

// This rank's input entering a reduction, into a slot: prescaled where the
// reduction says so (as the engine's REDUCE_INPUT sends).
static void put_input(const weft_op_t *op, char *out, const char *in, size_t count, size_t bytes) {
  if (weft_redop_transforms(&op->redop)) weft_reduce_first(&op->redop, out, in, count, 0);
  else memcpy(out, in, bytes);
}

// The one-shot AllReduce: this rank's input to every peer, starting with the
// next rank; then rank 0's, 1's, ... contributions folded into recvbuff.
static void allreduce_run(waiter_t *w, size_t bytes) {
  weft_op_t *op = w->op;
  struct ncclComm *comm = op->comm;
  int n = comm->nranks, me = comm->rank;
  size_t count = op->args.count;
  int transforms = weft_redop_transforms(&op->redop);
  for (int k = 1; k < n; k++) {
    weft_conn_t *sc = weft_comm_conn(comm, WEFT_CLASS_COLL, 1, (me + k) % n);
    char *out = send_slot(w, sc);
    if (out == NULL) return;
    put_input(op, out, op->sendbuff, count, bytes);
    sc->tp->send_post(sc, bytes, op->tag);
  }
  // This rank's own contribution, kept aside when folding would overwrite it
  // (in place) or when it must be prescaled first.
  _Alignas(64) char mine_buf[WEFT_SMALL_MAX_BYTES];
  const char *mine = op->sendbuff;
  uintptr_t s = (uintptr_t)op->sendbuff, r = (uintptr_t)op->recvbuff;
  if (transforms) {
    weft_reduce_first(&op->redop, mine_buf, op->sendbuff, count, 0);
    mine = mine_buf;
  } else if (me > 0 && s < r + bytes && r < s + bytes) {
    mine = memcpy(mine_buf, op->sendbuff, bytes);
  }
  for (int p = 0; p < n; p++) {
    const char *in = mine;
    weft_conn_t *rc = NULL;
    if (p != me) {
      rc = weft_comm_conn(comm, WEFT_CLASS_COLL, 0, p);
      if ((in = recv_slot(w, rc, bytes)) == NULL) return;
    }
    if (p == 0) {
      if (in != op->recvbuff) memmove(op->recvbuff, in, bytes);
    } else {
      weft_reduce(&op->redop_acc, op->recvbuff, in, op->recvbuff, count, p == n - 1);
    }
    if (rc != NULL) rc->tp->recv_release(rc);
  }
  op->state = WEFT_OP_DONE;
}

// The chain Broadcast: the root sends to the next rank; every other rank
// takes the data from the previous one, passes it on unless it is last,
// and keeps a copy.
static void broadcast_run(waiter_t *w, const plan_t *pl, size_t bytes) {
  weft_op_t *op = w->op;
  struct ncclComm *comm = op->comm;
  int n = comm->nranks;
  const char *data = op->sendbuff;
  weft_conn_t *rc = NULL;
  if (pl->pos > 0) {
    rc = weft_comm_conn(comm, WEFT_CLASS_COLL, 0, pl->prev);
    if ((data = recv_slot(w, rc, bytes)) == NULL) return;
  }
  if (pl->pos < n - 1) {
    weft_conn_t *sc = weft_comm_conn(comm, WEFT_CLASS_COLL, 1, pl->next);
    char *out = send_slot(w, sc);
    if (out == NULL) return;
    memcpy(out, data, bytes);
    sc->tp->send_post(sc, bytes, op->tag);
  }
  if (data != op->recvbuff) memmove(op->recvbuff, data, bytes);
  if (rc != NULL) rc->tp->recv_release(rc);
  if (verify_sent_to(w, pl)) op->state = WEFT_OP_DONE;
}

// The ring AllGather (algorithms/ring.c) in ring order: this rank's block
// into its place, then to the next rank; each block that arrives from the
// previous rank (those of the ranks at positions me-1, me-2, ...) lands in
// place and, but for the last, goes on to the next.
static void allgather_run(waiter_t *w, const plan_t *pl, size_t bytes) {
  weft_op_t *op = w->op;
  struct ncclComm *comm = op->comm;
  int n = comm->nranks, me = pl->pos;
  char *own = op->recvbuff + (size_t)comm->rank * bytes;
  if (own != op->sendbuff) memmove(own, op->sendbuff, bytes);
  weft_conn_t *sc = weft_comm_conn(comm, WEFT_CLASS_COLL, 1, pl->next);
  weft_conn_t *rc = weft_comm_conn(comm, WEFT_CLASS_COLL, 0, pl->prev);
  char *out = send_slot(w, sc);
  if (out == NULL) return;
  memcpy(out, op->sendbuff, bytes);
  sc->tp->send_post(sc, bytes, op->tag);
  for (int k = 1; k < n; k++) {
    const char *in = recv_slot(w, rc, bytes);
    if (in == NULL) return;
    if (k < n - 1) {
      if ((out = send_slot(w, sc)) == NULL) return;
      memcpy(out, in, bytes);
      sc->tp->send_post(sc, bytes, op->tag);
    }
    memcpy(op->recvbuff + (size_t)ring_rank(&op->args, (me - k + n) % n) * bytes, in, bytes);
    rc->tp->recv_release(rc);
  }
  if (verify_sent_to(w, pl)) op->state = WEFT_OP_DONE;
}

// The ring ReduceScatter (algorithms/ring.c) in ring order, one round:
// the block of the rank at position me-1, prescaled, to the next rank; each
// partial that arrives from the previous rank (the blocks of positions me-2,
// me-3, ...) gets this rank's input added and goes on; the last one, this
// rank's own block, lands in the output.
static void reducescatter_run(waiter_t *w, const plan_t *pl, size_t bytes) {
  weft_op_t *op = w->op;
  int n = op->comm->nranks, me = pl->pos;
  const weft_coll_args_t *a = &op->args;
  size_t count = op->args.count;
  weft_conn_t *sc = weft_comm_conn(op->comm, WEFT_CLASS_COLL, 1, pl->next);
  weft_conn_t *rc = weft_comm_conn(op->comm, WEFT_CLASS_COLL, 0, pl->prev);
  const char *input = op->sendbuff;
  char *out = send_slot(w, sc);
  if (out == NULL) return;
  put_input(op, out, input + (size_t)ring_rank(a, (me + n - 1) % n) * bytes, count, bytes);
  sc->tp->send_post(sc, bytes, op->tag);
  for (int k = 1; k < n; k++) {
    const char *in = recv_slot(w, rc, bytes);
    if (in == NULL) return;
    const char *mine = input + (size_t)ring_rank(a, (me - 1 - k + 2 * n) % n) * bytes;
    if (k < n - 1) {
      if ((out = send_slot(w, sc)) == NULL) return;
      weft_reduce(&op->redop, out, in, mine, count, 0);
      sc->tp->send_post(sc, bytes, op->tag);
    } else {
      weft_reduce(&op->redop, op->recvbuff, in, mine, count, 1);
    }
    rc->tp->recv_release(rc);
  }
  op->state = WEFT_OP_DONE;
}

// The direct AlltoAll (algorithms/direct.c): block p of the input to rank
// p for every peer, starting with the next rank; then block p of the output
// from each. Every send goes out before the first receive, so in place the
// input is read before it is overwritten.
static void alltoall_run(waiter_t *w, size_t bytes) {
  weft_op_t *op = w->op;
  struct ncclComm *comm = op->comm;
  int n = comm->nranks, me = comm->rank;
  for (int k = 1; k < n; k++) {
    int p = (me + k) % n;
    weft_conn_t *sc = weft_comm_conn(comm, WEFT_CLASS_COLL, 1, p);
    char *out = send_slot(w, sc);
    if (out == NULL) return;
    memcpy(out, op->sendbuff + (size_t)p * bytes, bytes);
    sc->tp->send_post(sc, bytes, op->tag);
  }
  char *own = op->recvbuff + (size_t)me * bytes;
  const char *own_in = op->sendbuff + (size_t)me * bytes;
  if (own != own_in) memmove(own, own_in, bytes);
  for (int k = 1; k < n; k++) {
    int p = (me + k) % n;
    weft_conn_t *rc = weft_comm_conn(comm, WEFT_CLASS_COLL, 0, p);
    const char *in = recv_slot(w, rc, bytes);
    if (in == NULL) return;
    memcpy(op->recvbuff + (size_t)p * bytes, in, bytes);
    rc->tp->recv_release(rc);
  }
  op->state = WEFT_OP_DONE;
}

int weft_small_try(weft_op_t *op, ncclResult_t *res) {
  struct ncclComm *comm = op->comm;
  size_t bytes = op->args.count * op->esize;
  plan_t pl;
  if (!eligible(op, bytes, &pl) || !claim(op, &pl)) return 0;
  TRACE(WEFT_LOG_COLL, "%s count=%zu %s op=%d root=%d algo=%s proto=LL", weft_coll_name(op->args.coll),
        op->args.count, weft_dtype_name(op->dtype), op->user_op, op->args.root, weft_algo_name(op->algo));
  uint8_t verified[WEFT_SMALL_MAX_RANKS] = {0};
  op->verified = verified;
  op->cls = WEFT_CLASS_COLL;
  op->check = weft_env_WEFT_CHECK_MISMATCH() != 0;
  op->tag = op->check ? weft_mismatch_tag(op) : 0;
  weft_mismatch_publish(op);
  // No RUNNING status: a call that waits past its spin publishes WAITING (check_idle), and every one IDLE.
  atomic_fetch_add(&comm->inflight, 1);
  op->counted = 1;  // weft_op_free gives it back

  waiter_t w = {.op = op, .spin_ns = comm->spin_ns};
  if (!weft_op_fail_if_aborted(op)) {  // a failed communicator runs nothing, as in the engine
    switch (op->args.coll) {
      case WEFT_COLL_ALLREDUCE: allreduce_run(&w, bytes); break;
      case WEFT_COLL_BROADCAST: broadcast_run(&w, &pl, bytes); break;
      case WEFT_COLL_ALLGATHER: allgather_run(&w, &pl, bytes); break;
      case WEFT_COLL_REDUCESCATTER: reducescatter_run(&w, &pl, bytes); break;
      default: alltoall_run(&w, bytes); break;
    }
  }

  weft_engine_publish(op, op->state == WEFT_OP_DONE ? WEFT_STATUS_IDLE : WEFT_STATUS_FAILED, -1, 0, 0, 0);
  for (int i = 0; i < pl.n; i++) atomic_fetch_add(&pl.conn[i]->served, 1);
  // Other threads of this rank may wait for the tickets just given back.
  weft_doorbell_ring(weft_segment_doorbell(comm->seg, comm->rank));
  op->verified = NULL;
  *res = op->state == WEFT_OP_DONE ? ncclSuccess : op->result;
  return 1;
}
