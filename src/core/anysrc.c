/*
 * anysrc.c — receives from any peer (weftRecvAny, anysrc.h).
 *
 * Point-to-point messages between a pair of ranks are matched by order:
 * each receive takes the next ticket on its peer's receive connection at
 * launch and runs when the connection has served the tickets before it.
 * An any-source receive takes a ticket on every peer's connection at
 * launch, so it stands in every peer's order where it was posted: it can
 * never take a message an earlier receive from that peer is owed, and a
 * later receive from that peer waits for it as for any receive before it.
 * It matches the first peer, looking round robin from the one after the
 * last match, whose connection has reached its ticket and holds a message;
 * from then on it is an ordinary receive from that peer (its schedule is
 * rebuilt for it). The tickets it holds on the other connections are given
 * up: those whose turn has come are served at once, the others are noted
 * and skipped when their turn comes (weft_anysrc_serve), so no receive
 * ever waits on an any-source receive that has already matched elsewhere.
 */
#include "anysrc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "checks.h"
#include "segment.h"

static weft_conn_t *recv_conn(struct ncclComm *comm, int peer) {
  return weft_comm_conn(comm, WEFT_CLASS_P2P, 0, peer);
}

// Serve the tickets of peer's connection given up, from the current one
// on, as long as they are given up. Under comm->lock. Returns 1 if any was.
static int skip_given_up(struct ncclComm *comm, int peer) {
  weft_conn_t *rc = recv_conn(comm, peer);
  int skipped = 0, i = 0;
  while (i < atomic_load(&comm->nvoids)) {
    int n = atomic_load(&comm->nvoids);
    if (comm->voids[i].peer != peer || comm->voids[i].ticket != atomic_load(&rc->served)) {
      i++;
      continue;
    }
    comm->voids[i] = comm->voids[n - 1];
    atomic_store(&comm->nvoids, n - 1);
    atomic_fetch_add(&rc->served, 1);
    skipped = 1;
    i = 0;  // the next ticket may be given up too
  }
  return skipped;
}

// Give up the op's tickets on every connection but `keep`'s (-1: all).
// Returns 0 when out of memory to note them.
static int give_up(weft_op_t *op, int keep) {
  struct ncclComm *comm = op->comm;
  int ok = 1, skipped = 0;
  pthread_mutex_lock(&comm->lock);
  for (int p = 0; p < comm->nranks && ok; p++) {
    if (p == keep || op->recv_ticket[p] < 0) continue;
    int n = atomic_load(&comm->nvoids);
    if (n == comm->voids_cap) {
      int cap = comm->voids_cap ? 2 * comm->voids_cap : 16;
      void *grown = realloc(comm->voids, (size_t)cap * sizeof(*comm->voids));
      if (grown == NULL) {
        ok = 0;
        break;
      }
      comm->voids = grown;
      comm->voids_cap = cap;
    }
    comm->voids[n].peer = p;
    comm->voids[n].ticket = (uint64_t)op->recv_ticket[p];
    atomic_store(&comm->nvoids, n + 1);  // before reading served (skip_given_up): see weft_anysrc_serve
    op->recv_ticket[p] = -1;
    skipped |= skip_given_up(comm, p);
  }
  pthread_mutex_unlock(&comm->lock);
  // Receives of this rank's other threads may wait for the tickets just served.
  if (skipped) weft_doorbell_ring(weft_segment_doorbell(comm->seg, comm->rank));
  return ok;
}

void weft_anysrc_mark(weft_op_t *op) {
  struct ncclComm *comm = op->comm;
  for (int p = 0; p < comm->nranks; p++) op->recv_ticket[p] = recv_conn(comm, p)->tp != NULL ? 0 : -1;
}

// The op matched `peer`: keep its ticket, give up the others, receive from it.
static void take(weft_op_t *op, int peer) {
  char reason[200];
  op->any.peer = peer;
  if (!give_up(op, peer)) {
    snprintf(reason, sizeof(reason), "rank %d is out of memory matching a receive from any rank", op->comm->rank);
    WARN("%s", reason);
    weft_op_fail(op, ncclSystemError, reason);
    return;
  }
  op->args.peer = peer;
  op->sched.nsteps = op->sched.nlanes = 0;
  ncclResult_t res = weft_schedule_build(&op->args, op->algo, &op->sched);
  if (res != ncclSuccess) {
    snprintf(reason, sizeof(reason), "rank %d could not build its receive from rank %d", op->comm->rank, peer);
    weft_op_fail(op, res, reason);
    return;
  }
  TRACE(WEFT_LOG_P2P, "rank %d: receive from any rank matched rank %d (count %zu)", op->comm->rank, peer,
        op->args.count);
}

int weft_anysrc_match(weft_op_t *op) {
  struct ncclComm *comm = op->comm;
  int n = comm->nranks, start = atomic_load_explicit(&comm->any_next, memory_order_relaxed) % n;
  for (int i = 0; i < n; i++) {
    int p = (start + i) % n;
    if (op->recv_ticket[p] < 0) continue;
    weft_conn_t *rc = recv_conn(comm, p);
    size_t bytes;
    uint32_t tag;
    // Its turn on p's connection, and a message there (looked at, not consumed).
    if (atomic_load_explicit(&rc->served, memory_order_acquire) != (uint64_t)op->recv_ticket[p] ||
        rc->tp->recv_slot(rc, &bytes, &tag) == NULL)
      continue;
    atomic_store_explicit(&comm->any_next, (p + 1) % n, memory_order_relaxed);
    take(op, p);
    return 1;
  }
  return 0;
}

void weft_anysrc_finish(weft_op_t *op) {
  if (!op->any.on) return;
  if (op->any.peer < 0 && !give_up(op, -1)) {
    // Out of memory noting them: the communicator cannot keep its order any more.
    weft_comm_fail(op->comm, ncclSystemError, "out of memory giving up an unmatched receive from any rank");
  }
  if (op->any.source != NULL) *op->any.source = op->state == WEFT_OP_DONE ? op->any.peer : -1;
}

void weft_anysrc_serve(struct ncclComm *comm, int peer) {
  atomic_fetch_add(&recv_conn(comm, peer)->served, 1);
  // Sequentially consistent with give_up's store of nvoids: either this
  // sees the ticket noted, or give_up sees this one served.
  if (atomic_load(&comm->nvoids) == 0) return;
  pthread_mutex_lock(&comm->lock);
  skip_given_up(comm, peer);
  pthread_mutex_unlock(&comm->lock);
}
