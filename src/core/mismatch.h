/*
 * mismatch.h — comparing what the ranks called (mismatch.c): descriptors
 * on the control segment's board and the tag every collective slot carries.
 */
#ifndef WEFT_MISMATCH_H
#define WEFT_MISMATCH_H

#include <stdint.h>

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

#endif
