/*
 * pp_replay.h — the one pipeline simulator: every stage's list of
 * operations replayed against the others' to find the bubble a schedule
 * leaves. GPipe and 1F1B (pp.h) are the one-chunk case of the interleaved
 * schedule's chunk operations (pp_interleaved.h), so both replay here.
 */
#ifndef WEFT_PAR_PP_REPLAY_H
#define WEFT_PAR_PP_REPLAY_H

#include "pp_interleaved.h"

// ops holds each stage's 2*chunks*micro operations in its order (stage s
// from ops[s * 2*chunks*micro]). An operation starts once its input exists
// (the previous virtual stage's forward, the next one's backward, or the
// last one's own forward) and its stage is free; a forward takes
// tf/chunks, a backward tb/chunks, transfers nothing. Stores the idle time
// over the busy time, micro*(tf+tb), of the last stage to finish in
// *bubble. `api` names the caller in the error when the schedules deadlock.
ncclResult_t weft_pp_replay(const char *api, int stages, int chunks, int micro, const weft_pp_chunk_op_t *ops,
                            double tf, double tb, double *bubble);

#endif  // WEFT_PAR_PP_REPLAY_H
