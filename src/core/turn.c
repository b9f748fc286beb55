/*
 * turn.c — an operation's turn on its connections: the one place where a
 * call takes its sequence number and connection tickets, and gives the
 * tickets back.
 *
 * A connection serves its operations in ticket order, and every rank
 * launches its calls in the same order, so the slots of two calls never
 * interleave. The engine (weft_op_launch, op_release) and the small path
 * (small.c) both take and give a turn here, so they share one line.
 */
#include <stdatomic.h>

#include "anysrc.h"
#include "engine.h"
#include "segment.h"

int weft_op_take_turn(weft_op_t *op, int only_if_free) {
  struct ncclComm *comm = op->comm;
  int n = comm->nranks, free_now = 1;
  pthread_mutex_lock(&comm->lock);
  for (int p = 0; p < n && only_if_free && free_now; p++) {
    weft_conn_t *sc = op->send_ticket[p] >= 0 ? weft_comm_conn(comm, op->cls, 1, p) : NULL;
    weft_conn_t *rc = op->recv_ticket[p] >= 0 ? weft_comm_conn(comm, op->cls, 0, p) : NULL;
    free_now = (sc == NULL || atomic_load_explicit(&sc->served, memory_order_acquire) == sc->issued) &&
               (rc == NULL || atomic_load_explicit(&rc->served, memory_order_acquire) == rc->issued);
  }
  if (free_now) {
    if (op->cls == WEFT_CLASS_COLL) {
      op->seq = comm->coll_seq++;
      weft_segment_count_launch(comm->seg, comm->rank, (int)op->args.coll);
    }
    for (int p = 0; p < n; p++) {
      if (op->send_ticket[p] >= 0) op->send_ticket[p] = (int64_t)weft_comm_conn(comm, op->cls, 1, p)->issued++;
      if (op->recv_ticket[p] >= 0) op->recv_ticket[p] = (int64_t)weft_comm_conn(comm, op->cls, 0, p)->issued++;
    }
  }
  pthread_mutex_unlock(&comm->lock);
  return free_now;
}

void weft_op_give_turn(weft_op_t *op) {
  struct ncclComm *comm = op->comm;
  for (int p = 0; p < comm->nranks; p++) {
    if (op->send_ticket[p] >= 0) atomic_fetch_add(&weft_comm_conn(comm, op->cls, 1, p)->served, 1);
    if (op->recv_ticket[p] < 0) continue;
    weft_conn_t *rc = weft_comm_conn(comm, op->cls, 0, p);
    // A failed receive may still be landing in the user's buffer: wait for it to stop.
    if (op->state == WEFT_OP_FAILED && rc->tp != NULL && rc->tp->quiesce != NULL) rc->tp->quiesce(rc);
    if (op->cls == WEFT_CLASS_P2P) weft_anysrc_serve(comm, p);  // skips tickets receives from any rank gave up
    else atomic_fetch_add(&rc->served, 1);
  }
  // Other threads of this rank may wait for the tickets just given back.
  weft_doorbell_ring(weft_segment_doorbell(comm->seg, comm->rank));
}
