/*
 * small.h — the small-message path (small.c): a collective of a few cache
 * lines per rank run to completion on the caller's thread by a lean
 * executor over the algorithm's own schedule, kept per call shape.
 */
#ifndef WEFT_SMALL_H
#define WEFT_SMALL_H

#include "engine.h"

#define WEFT_SMALL_MAX_BYTES 4096  // per rank: what the tuner calls LL (larger calls are Simple)
#define WEFT_SMALL_MAX_RANKS 64

// op is a validated call on the caller's stack (args, buffers, reduction,
// algorithm and slice chosen; the tuner chose LL) that completes on return.
// Returns 1 when this path ran it (*res its result; the caller releases
// op's communicator), 0 when the engine must.
int weft_small_try(weft_op_t *op, ncclResult_t *res);

// Frees the communicator's kept schedules (weft_comm_free).
void weft_small_free(struct ncclComm *comm);

#endif
