/*
 * small.h — the small-message path (small.c): a collective of a few cache
 * lines per rank straight from the entry point to the FIFOs, the same slots
 * on the wire as the engine's schedule for it.
 */
#ifndef WEFT_SMALL_H
#define WEFT_SMALL_H

#include "engine.h"

#define WEFT_SMALL_MAX_BYTES 4096  // per rank: larger calls take the engine
#define WEFT_SMALL_MAX_RANKS 64

// op is a validated call (args, buffers, reduction, algorithm and slice
// chosen by the tuner) that would run inline. Returns 1 when this path ran
// it (*res its result; the caller frees op), 0 when the engine must.
int weft_small_try(weft_op_t *op, ncclResult_t *res);

#endif
