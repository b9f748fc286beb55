/*
 * mismatch.h — comparing what the ranks called (mismatch.c): descriptors
 * on the control segment's board and the tag every collective slot carries.
 */
#ifndef WEFT_MISMATCH_H
#define WEFT_MISMATCH_H

#include <stdint.h>

#include "comm.h"
#include "engine.h"

// The tag every slot of this collective carries: its sequence number and
// the call mixed into 32 bits (never 0, which point-to-point slots carry).
uint32_t weft_mismatch_tag(const weft_op_t *op);
// Publish this rank's descriptor of the collective launched as op->seq.
void weft_mismatch_publish(const weft_op_t *op);
// 1: the peer's descriptor matches ours (and, for schedules that read peer
// memory, its buffer addresses are known); 0: the peer has not launched the
// call yet; -1: mismatch (the operation has failed).
int weft_mismatch_verify_peer(weft_op_t *op, int peer);
// weft_mismatch_verify_peer for every peer the operation exchanges slots
// with: 1 when all run the same call, 0 while one has not launched it, -1
// when one launched a different call (the operation has then failed).
int weft_mismatch_check_peers(weft_op_t *op);
// A slot from `peer` carried another call's tag: fail, saying what each rank called.
void weft_mismatch_tag_differs(weft_op_t *op, int peer);

// A call that only sent to `peer` may return before the peer has launched
// it: its descriptor check is then owed. 1 when recorded or nothing is
// owed (unchecked, or a peer on another host, whose tags vouch); 0 when too
// many are owed even after settling, and the caller must wait as before.
int weft_mismatch_defer(weft_op_t *op, int peer);
// Settle what is owed as far as the peers allow now: ncclSuccess, or
// ncclInvalidUsage after failing the communicator (a WARN says what
// differs). ncclCommGetAsyncError settles; a new call settles once half
// the list is owed or 16 calls have passed (weft_mismatch_settle_due), so
// that a root reads its receivers' descriptors in batches.
ncclResult_t weft_mismatch_settle(struct ncclComm *comm);
static inline ncclResult_t weft_mismatch_settle_due(struct ncclComm *comm) {
  unsigned n = atomic_load_explicit(&comm->nlater, memory_order_relaxed);
  if (n == 0) return ncclSuccess;
  unsigned age = atomic_load_explicit(&comm->later_age, memory_order_relaxed) + 1;  // one caller at a time
  atomic_store_explicit(&comm->later_age, age, memory_order_relaxed);
  return n >= WEFT_LATER_MAX / 2 || age >= WEFT_LATER_MAX / 2 ? weft_mismatch_settle(comm) : ncclSuccess;
}

#endif
