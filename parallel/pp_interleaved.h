/*
 * pp_interleaved.h — the interleaved 1F1B pipeline schedule (Narayanan et
 * al., "Efficient Large-Scale Language Model Training on GPU Clusters
 * Using Megatron-LM", 2021): each of the P pipeline stages holds V model
 * chunks, so the model is cut into P·V contiguous "virtual stages" and
 * chunk v of stage s is virtual stage v·P + s (layers go round-robin, a
 * chunk at a time: stage 0 holds the 1st and the (P+1)-th run, ...). A
 * micro-batch's activation visits stages 0, 1, .., P-1, 0, 1, .. V times;
 * the bubble shrinks V-fold to (P-1)/(V·M) of the busy time, for V times
 * the point-to-point traffic.
 *
 * The order (Megatron-LM's): micro-batches go in groups of P, so M must be
 * a multiple of P. Stage s runs 2·V·M chunk operations. Its k-th forward
 * (k = 0 .. V·M-1) is
 *     chunk (k mod P·V) div P,   micro-batch (k div P·V)·P + k mod P,
 * its k-th backward the same micro-batch on chunk V-1 - (k mod P·V) div P.
 * It first runs W_s = min((P-1-s)·2 + (V-1)·P, V·M) warm-up forwards, then
 * V·M - W_s pairs (forward W_s + i, then backward i), then the remaining
 * W_s backwards. With V = 1 this is a 1F1B whose warm-up is twice P-1-s.
 *
 * The executor moves boundary activations (forward) and their gradients
 * (backward) with ncclSend/ncclRecv. Its communication follows a lockstep
 * plan that every stage derives alone from (P, V, M): round r, each stage
 * runs its next operation if the input has arrived by round r-1, then one
 * group sends what it produced in round r and receives what its
 * neighbours produced in round r. Both ends of every message post it in
 * the same round, and a stage's operations before round r need only
 * messages of earlier rounds, so every group completes — with blocking
 * (rendezvous) sends too: the plan never deadlocks. A received tensor
 * waits in a small pool until its operation runs.
 */
#ifndef WEFT_PAR_PP_INTERLEAVED_H
#define WEFT_PAR_PP_INTERLEAVED_H

#include <stddef.h>

#include "nccl.h"
#include "pp.h"

typedef struct {
  int backward;  // 0: forward, 1: backward
  int chunk;     // 0 .. V-1: virtual stage chunk * P + stage
  int micro;     // micro-batch index
} weft_pp_chunk_op_t;

// Whether (stages, chunks, micro) has an interleaved schedule: all at
// least 1 and micro a multiple of stages. The message names the numbers.
ncclResult_t weft_pp_interleaved_check(int stages, int chunks, int micro);
// W_s above: forwards before the stage's first backward.
int weft_pp_interleaved_warmup(int stages, int stage, int chunks, int micro);
// The 2 * chunks * micro operations of `stage`, in order, into ops.
ncclResult_t weft_pp_interleaved_schedule(int stages, int stage, int chunks, int micro, weft_pp_chunk_op_t *ops);
// held[v] (chunks entries): the most micro-batches whose activations
// chunk v of `stage` keeps at once (forward run, backward not yet). Chunk
// v's forwards and backwards both go in micro-batch order, so micro % held[v]
// names a free activation slot.
ncclResult_t weft_pp_interleaved_in_flight(int stages, int stage, int chunks, int micro, int *held);
// Runs every stage's schedule against the others with a whole model's
// forward and backward taking tf and tb (a chunk: tf/V, tb/V; no transfer
// time); idle/busy of the slowest stage into *bubble: (P-1)/(V*M).
ncclResult_t weft_pp_interleaved_simulate(int stages, int chunks, int micro, double tf, double tb, double *bubble);

// One round of a stage's communication plan.
typedef struct {
  int op;            // index into the stage's schedule computed this round; -1: none
  int send_to;       // the stage that receives its result this round (may be this stage); -1: none
  int nrecv;         // results of other operations arriving this round (0..2)
  int recv_from[2];  // the stages they come from
  int recv_for[2];   // the operation (index into this stage's schedule) each is the input of
} weft_pp_round_t;

// The lockstep plan of `stage` (see above): *nrounds rounds into *rounds,
// which the caller frees with free(). The same count on every stage.
ncclResult_t weft_pp_interleaved_plan(int stages, int stage, int chunks, int micro, weft_pp_round_t **rounds,
                                      int *nrounds);

// What a stage computes for one chunk. `in` is NULL on virtual stage 0
// (the callback has its own input), `out` NULL on the last virtual stage;
// `dout` is NULL on the last virtual stage (the callback starts from its
// loss), `din` NULL on virtual stage 0. Buffers hold act_count floats and
// are valid during the call only.
typedef struct {
  ncclResult_t (*forward)(void *user, int chunk, int micro, const float *in, float *out);
  ncclResult_t (*backward)(void *user, int chunk, int micro, const float *dout, float *din);
  void *user;
} weft_pp_chunk_stage_t;

// Runs one step (every micro-batch through every chunk) of this rank's
// stage; pp_comm is the pipeline group (its rank is the stage). Collective
// over pp_comm. stats (may be NULL): bubble_formula is (P-1)/(V*M).
ncclResult_t weft_pp_interleaved_run(ncclComm_t pp_comm, int chunks, int micro, size_t act_count,
                                     const weft_pp_chunk_stage_t *stage, weft_pp_stats_t *stats);

#endif  // WEFT_PAR_PP_INTERLEAVED_H
