/*
 * mismatch.c — catching ranks that call different collectives.
 *
 * When a collective starts to run, each rank writes a descriptor of it
 * (kind, count, datatype, op, root, algorithm, slice, buffers) into the ring
 * in its control segment (segment.h), and every slot it sends carries a 32-bit tag
 * of the sequence number and that descriptor. A receiver compares tags on
 * the first slot; peers whose tags a rank never sees (it only sends to
 * them) are compared by descriptor before it sleeps and before the
 * operation completes, and schedules that read peer memory compare
 * descriptors first (they need the peer's buffer addresses). A difference
 * fails the operation with ncclInvalidUsage and a WARN saying what each
 * rank called. A small call that only sends to a peer (a Broadcast's root)
 * does not wait for the peer to launch: the check is owed, and settled by
 * the communicator's next calls and by ncclCommGetAsyncError, which fail
 * the communicator when the calls differ. Ranks on other hosts have no
 * descriptor here: their tags vouch for them.
 */
#include "mismatch.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "checks.h"
#include "segment.h"
#include "dtype.h"
#include "window.h"

static void describe(const weft_desc_t *d, char *buf, size_t len) {
  snprintf(buf, len, "%s count=%" PRIu64 " %s %s root=%d algo=%s slice=%" PRIu64, weft_coll_name(d->coll), d->count,
           weft_dtype_name(d->dtype), weft_coll_has_op(d->coll) ? weft_op_name(d->op) : "-", d->root,
           weft_algo_name(d->algo), d->slice);
}

static void fill_desc(const weft_op_t *op, weft_desc_t *d) {
  d->coll = (uint8_t)op->args.coll;
  d->dtype = (uint8_t)op->dtype;
  d->algo = (uint8_t)op->algo;
  d->op = (uint8_t)(op->user_op < ncclNumOps ? op->user_op : ncclNumOps);
  d->root = op->args.root;
  d->count = op->args.count;
  d->slice = op->args.slice;
  d->sendbuff = (uint64_t)(uintptr_t)op->sendbuff;
  d->recvbuff = (uint64_t)(uintptr_t)op->recvbuff;
}

void weft_mismatch_publish(const weft_op_t *op) {
  weft_desc_t *d = &op->comm->seg->hdr[op->comm->rank]->desc[op->seq % WEFT_DESC_RING];
  atomic_store_explicit(&d->seq, 0, memory_order_relaxed);
  fill_desc(op, d);
  atomic_store_explicit(&d->seq, op->seq + 1, memory_order_release);
}

uint32_t weft_mismatch_tag(const weft_op_t *op) {
  weft_desc_t d = {0};
  fill_desc(op, &d);
  uint64_t h = op->seq * 0x9e3779b97f4a7c15ull;
  const uint64_t parts[] = {d.coll | (uint64_t)d.dtype << 8 | (uint64_t)d.algo << 16 | (uint64_t)d.op << 24 |
                                (uint64_t)(uint32_t)d.root << 32,
                            d.count, d.slice};
  for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
    h ^= parts[i] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
  }
  uint32_t t = (uint32_t)(h ^ (h >> 32));
  return t != 0 && t != WEFT_TAG_FAILURE ? t : 1;  // 0 means unchecked; the other is the transports'
}

// What the peer's board says about call `seq`, against our descriptor of it.
enum { CALL_DIFFERS = -1, CALL_NOT_YET = 0, CALL_SAME = 1, CALL_PASSED = 2 };

static int same_call(const weft_desc_t *a, const weft_desc_t *b) {
  return a->coll == b->coll && a->dtype == b->dtype && a->op == b->op && a->root == b->root &&
         a->count == b->count && a->slice == b->slice && a->algo == b->algo;
}

// CALL_PASSED: the peer is already further on, so its entry for seq is
// gone; CALL_DIFFERS writes what each rank called into reason.
static int compare_call(struct ncclComm *comm, uint64_t seq, int peer, const weft_desc_t *mine, int check,
                        weft_desc_t *theirs, char *reason, size_t len) {
  weft_desc_t *d = &comm->seg->hdr[peer]->desc[seq % WEFT_DESC_RING];
  uint64_t s1 = atomic_load_explicit(&d->seq, memory_order_acquire);
  if (s1 < seq + 1) return CALL_NOT_YET;
  memcpy(theirs, d, sizeof(*theirs));
  uint64_t s2 = atomic_load_explicit(&d->seq, memory_order_acquire);
  if (s1 != seq + 1 || s2 != s1) return CALL_PASSED;
  if (!check || same_call(theirs, mine)) return CALL_SAME;
  char a[160], b[160];
  describe(mine, a, sizeof(a));
  describe(theirs, b, sizeof(b));
  snprintf(reason, len, "collective #%" PRIu64 " differs: rank %d called %s, rank %d called %s", seq, comm->rank, a,
           peer, b);
  return CALL_DIFFERS;
}

// 1: peer's descriptor matches ours (and, for schedules that read peer
// memory, its buffer addresses are known); 0: the peer has not launched the
// call yet; -1: mismatch (the operation has failed).
int weft_mismatch_verify_peer(weft_op_t *op, int peer) {
  // verified[peer]: 0 unknown, 1 its slot tags matched, 2 its descriptor matched (buffers known).
  if (op->cls != WEFT_CLASS_COLL || op->verified[peer] == 2 || (op->verified[peer] == 1 && !op->reads)) return 1;
  if (!op->check && !op->reads) {
    op->verified[peer] = 1;
    return 1;
  }
  if (op->comm->seg->hdr[peer] == NULL) {  // another host: no descriptor board; its slot tags vouch for it
    op->verified[peer] = 1;
    return 1;
  }
  weft_desc_t theirs, mine;
  char reason[400];
  fill_desc(op, &mine);
  switch (compare_call(op->comm, op->seq, peer, &mine, op->check, &theirs, reason, sizeof(reason))) {
    case CALL_NOT_YET: return 0;
    case CALL_PASSED:
      if (op->reads) {  // impossible unless ranks disagree on the schedule: the peer waits for our tokens
        snprintf(reason, sizeof(reason), "rank %d moved past collective #%" PRIu64 " before rank %d read its buffers",
                 peer, op->seq, op->comm->rank);
        WARN("%s", reason);
        weft_op_fail(op, ncclInternalError, reason);
        return -1;
      }
      op->verified[peer] = 1;
      return 1;
    case CALL_SAME:
      if (op->reads) {
        int n = op->comm->nranks;
        op->peer_buf[2 * peer] = theirs.sendbuff;
        op->peer_buf[2 * peer + 1] = theirs.recvbuff;
        // Where the peer's buffers lie in a window this process maps, it reaches them directly.
        if (atomic_load_explicit(&op->comm->nwindows_mapped, memory_order_relaxed) > 0) {
          weft_coll_args_t at_peer = op->args;  // the peer's sides (a root's differ from the others')
          at_peer.rank = peer;
          uint64_t sb = weft_coll_send_elems(&at_peer) * op->esize, rb = weft_coll_recv_elems(&at_peer) * op->esize;
          op->peer_buf[2 * n + 2 * peer] = (uint64_t)(uintptr_t)weft_window_near(op->comm, peer, theirs.sendbuff, sb);
          op->peer_buf[2 * n + 2 * peer + 1] =
              (uint64_t)(uintptr_t)weft_window_near(op->comm, peer, theirs.recvbuff, rb);
        }
      }
      op->verified[peer] = 2;
      return 1;
    default:
      WARN("%s", reason);
      weft_op_fail(op, ncclInvalidUsage, reason);
      return -1;
  }
}

int weft_mismatch_defer(weft_op_t *op, int peer) {
  struct ncclComm *comm = op->comm;
  int ok = 0;
  if (!op->check || comm->seg->hdr[peer] == NULL) return 1;  // nothing to owe: unchecked, or tags vouch (another host)
  if (atomic_load_explicit(&comm->nlater, memory_order_relaxed) == WEFT_LATER_MAX &&
      weft_mismatch_settle(comm) != ncclSuccess)
    return 0;  // the communicator has failed: the caller's wait sees it
  pthread_mutex_lock(&comm->lock);
  unsigned n = atomic_load_explicit(&comm->nlater, memory_order_relaxed);
  if (n < WEFT_LATER_MAX) {
    comm->later[n].seq = op->seq;
    comm->later[n].peer = peer;
    atomic_store_explicit(&comm->nlater, n + 1, memory_order_release);
    ok = 1;
  }
  pthread_mutex_unlock(&comm->lock);
  return ok;
}

ncclResult_t weft_mismatch_settle(struct ncclComm *comm) {
  if (atomic_load_explicit(&comm->nlater, memory_order_acquire) == 0) return ncclSuccess;
  char reason[400];
  int differs = 0;
  pthread_mutex_lock(&comm->lock);
  unsigned n = atomic_load_explicit(&comm->nlater, memory_order_relaxed), kept = 0;
  for (unsigned i = 0; i < n; i++) {
    uint64_t seq = comm->later[i].seq;
    int peer = comm->later[i].peer, r = CALL_PASSED;
    const weft_desc_t *own = &comm->seg->hdr[comm->rank]->desc[seq % WEFT_DESC_RING];
    weft_desc_t mine, theirs;
    memcpy(&mine, own, sizeof(mine));
    if (!differs && atomic_load_explicit(&own->seq, memory_order_acquire) == seq + 1)  // else ours is gone too
      r = compare_call(comm, seq, peer, &mine, 1, &theirs, reason, sizeof(reason));
    if (r == CALL_DIFFERS) differs = 1;
    if (r == CALL_NOT_YET) comm->later[kept++] = comm->later[i];
  }
  atomic_store_explicit(&comm->nlater, kept, memory_order_release);
  atomic_store_explicit(&comm->later_age, 0, memory_order_relaxed);
  pthread_mutex_unlock(&comm->lock);
  if (!differs) return ncclSuccess;
  WARN("%s", reason);
  weft_comm_set_error(comm, ncclInvalidUsage);
  weft_comm_fail(comm, ncclInvalidUsage, reason);
  return ncclInvalidUsage;
}

// A slot from `peer` carried another call's tag: say what each rank called.
void weft_mismatch_tag_differs(weft_op_t *op, int peer) {
  if (weft_mismatch_verify_peer(op, peer) < 0) return;  // the descriptors tell the story (and failed the op)
  char a[160], reason[400];
  weft_desc_t mine;
  fill_desc(op, &mine);
  describe(&mine, a, sizeof(a));
  snprintf(reason, sizeof(reason),
           "rank %d received data from rank %d that belongs to another call than its collective #%" PRIu64
           " (%s): the ranks disagree on the order or number of collectives",
           op->comm->rank, peer, op->seq, a);
  WARN("%s", reason);
  weft_op_fail(op, ncclInvalidUsage, reason);
}


// verify_peer for every peer the operation exchanges slots with: 1 when all
// run the same call, 0 while one has not launched it, -1 if one launched a
// different call (the operation has then failed).
int weft_mismatch_check_peers(weft_op_t *op) {
  int all = 1;
  for (int p = 0; p < op->comm->nranks; p++) {
    if (op->verified[p] || (op->send_ticket[p] < 0 && op->recv_ticket[p] < 0)) continue;
    int v = weft_mismatch_verify_peer(op, p);
    if (v < 0) return -1;
    if (v == 0) all = 0;
  }
  return all;
}
