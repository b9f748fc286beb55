/*
 * cuda_ipc_p2p.c — Send/Recv on the IPC path (cuda_ipc.h).
 *
 * Every rank keeps, for each peer, two mailboxes in its scratch that the
 * peer reads, and two counters per peer: ready (rounds filled for it) and
 * done (rounds taken from it). The k-th round a rank sends to p is the k-th
 * round p receives from it, whatever the grouping of the calls, since
 * matched calls have the same size and rounds follow call order:
 *
 *   send round k to p:   WAIT p.done[me] >= k-2       p emptied mailbox k % 2
 *                        copy slice -> my mailbox[p][k % 2]
 *                        WRITE my.ready[p] = k
 *   recv round k from q: WAIT q.ready[me] >= k
 *                        copy q's mailbox[me][k % 2] -> slice
 *                        WRITE my.done[q] = k
 *
 * A group's calls are queued in steps: in each step the first unfinished
 * call of every (communicator, peer, direction) moves one round, sends
 * before receives. A send then waits only for receives queued in earlier
 * steps and a receive only for sends of its own or an earlier step, so no
 * stream waits for work queued behind it on another.
 */
#include <stdint.h>
#include <stdlib.h>

#include "checks.h"
#include "cuda_ipc.h"
#include "cuda_ipc_state.h"
#include "dtype.h"

typedef struct {
  weft_op_t *op;
  weft_dev_bridge_t *bridge;
  size_t done, left;  // bytes moved, bytes still to move
  int moves;          // it moves one round in this step
} p2p_item_t;


// Calls of one lane: one communicator, one peer, one direction.
static int same_lane(const weft_op_t *a, const weft_op_t *b) {
  return a->comm == b->comm && a->args.coll == b->args.coll && a->args.peer == b->args.peer;
}

// The next round of it's call: `len` bytes.
static ncclResult_t p2p_round(const p2p_item_t *it, size_t len) {
  const weft_op_t *op = it->op;
  weft_cuda_ipc_t *d = op->comm->cuda_ipc;
  int n = op->comm->nranks, me = op->comm->rank, peer = op->args.peer;
  weft_CUstream s = weft_cuda_bridge_stream(it->bridge);
  const char *api = weft_coll_name(op->args.coll);
  if (op->args.coll == WEFT_COLL_SEND) {
    uint32_t k = ++d->sent[peer];
    if (k > 2) WEFTCHECK(weft_ipc_wait(s, d->peer[peer] + weft_ipc_p2p_done(n, me), k - 2, api));
    WEFTCHECK(weft_ipc_copy(s, d->mine + weft_ipc_box(d, peer, k),
                            weft_dptr((const char *)op->dev.send + it->done), len, api));
    return weft_ipc_write(s, d->mine + weft_ipc_p2p_ready(peer), k, api);
  }
  uint32_t k = ++d->taken[peer];
  WEFTCHECK(weft_ipc_wait(s, d->peer[peer] + weft_ipc_p2p_ready(me), k, api));
  WEFTCHECK(weft_ipc_copy(s, weft_dptr((char *)op->dev.recv + it->done), d->peer[peer] + weft_ipc_box(d, me, k),
                          len, api));
  return weft_ipc_write(s, d->mine + weft_ipc_p2p_done(n, peer), k, api);
}

static ncclResult_t p2p_round_in_context(const p2p_item_t *it, size_t len) {
  const weft_cuda_driver_t *drv = weft_cuda_driver();
  if (drv->cuCtxPushCurrent(weft_cuda_bridge_context(it->bridge)) != WEFT_CUDA_SUCCESS) return ncclUnhandledCudaError;
  ncclResult_t res = p2p_round(it, len);
  weft_CUcontext popped;
  drv->cuCtxPopCurrent(&popped);
  return res;
}

// Marks the calls that move in this step; 0 when all are done.
static int plan_step(p2p_item_t *it, int n) {
  int any = 0;
  for (int i = 0; i < n; i++) {
    it[i].moves = it[i].left > 0;
    for (int j = 0; j < i && it[i].moves; j++)
      if (it[j].left > 0 && same_lane(it[j].op, it[i].op)) it[i].moves = 0;
    any |= it[i].moves;
  }
  return any;
}

ncclResult_t weft_cuda_ipc_queue_p2p(weft_op_t **ops, weft_dev_bridge_t **bridges, int n) {
  p2p_item_t local[16], *it = n <= 16 ? local : calloc((size_t)n, sizeof(*it));
  if (it == NULL) {
    WARN("Send/Recv (CUDA IPC path): out of memory queueing %d calls", n);
    for (int i = 0; i < n; i++) weft_comm_set_error(ops[i]->comm, ncclSystemError);
    return ncclSystemError;
  }
  for (int i = 0; i < n; i++) {
    it[i] = (p2p_item_t){ops[i], bridges[i], 0, ops[i]->args.count * ops[i]->esize, 0};
    TRACE(WEFT_LOG_P2P, "%s count=%zu %s peer=%d: CUDA IPC path", weft_coll_name(ops[i]->args.coll),
          ops[i]->args.count, weft_dtype_name(ops[i]->dtype), ops[i]->args.peer);
  }
  ncclResult_t res = ncclSuccess;
  while (res == ncclSuccess && plan_step(it, n)) {
    for (int pass = 0; pass < 2 && res == ncclSuccess; pass++)  // sends, then receives
      for (int i = 0; i < n && res == ncclSuccess; i++) {
        if (!it[i].moves || (it[i].op->args.coll == WEFT_COLL_SEND) != (pass == 0)) continue;
        size_t box = it[i].op->comm->cuda_ipc->box_bytes, len = it[i].left < box ? it[i].left : box;
        res = p2p_round_in_context(&it[i], len);
        if (res != ncclSuccess) weft_comm_set_error(it[i].op->comm, res);
        it[i].done += len;
        it[i].left -= len;
      }
  }
  if (it != local) free(it);
  return res;
}
