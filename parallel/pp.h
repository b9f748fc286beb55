/*
 * pp.h — pipeline parallelism: layers assigned to stages by cost, GPipe and
 * 1F1B schedules over M micro-batches, and an executor that moves each
 * micro-batch's boundary activation forward and its gradient backward with
 * ncclSend/ncclRecv between neighbouring stages.
 *
 * The bubble: with P equal stages and M micro-batches both schedules keep
 * a stage idle for (P-1) forward+backward slots out of M busy ones, so
 * idle/busy = (P-1)/M. 1F1B has the same bubble as GPipe but holds at most
 * P micro-batches' activations instead of M.
 */
#ifndef WEFT_PAR_PP_H
#define WEFT_PAR_PP_H

#include <stddef.h>

#include "nccl.h"

// WEFT_PP_INTERLEAVED: 1F1B over model chunks, run by pp_interleaved.h's
// calls (the ones below refuse it: they know of one chunk per stage).
typedef enum { WEFT_PP_GPIPE = 0, WEFT_PP_1F1B = 1, WEFT_PP_INTERLEAVED = 2 } weft_pp_kind_t;

typedef struct {
  int backward;  // 0: forward, 1: backward
  int micro;     // micro-batch index
} weft_pp_op_t;

// The 2*micro operations `stage` (of `stages`) runs, in order, into ops.
ncclResult_t weft_pp_schedule(weft_pp_kind_t kind, int stages, int stage, int micro, weft_pp_op_t *ops);

// Splits nlayers layers with costs cost[0..nlayers-1] (> 0) into `stages`
// contiguous groups so that the most expensive stage is as cheap as it can
// be; stage s gets layers first[s] .. first[s+1]-1 (first has stages+1
// entries). Each stage gets at least one layer.
ncclResult_t weft_pp_balance(const double *cost, int nlayers, int stages, int *first);

// Runs the schedules of all stages against each other with forward time tf
// and backward time tb per micro-batch on every stage (no transfer time)
// and stores idle/busy of a stage over the makespan in *bubble.
ncclResult_t weft_pp_simulate(weft_pp_kind_t kind, int stages, int micro, double tf, double tb, double *bubble);

// What a stage computes. `in` is NULL on the first stage (the callback has
// its own input), `out` NULL on the last; `dout` is NULL on the last stage
// (the callback starts from its loss), `din` NULL on the first. Buffers
// hold act_count floats and are valid during the call only.
typedef struct {
  ncclResult_t (*forward)(void *user, int micro, const float *in, float *out);
  ncclResult_t (*backward)(void *user, int micro, const float *dout, float *din);
  void *user;
} weft_pp_stage_t;

typedef struct {
  double wall_s;           // this stage's time from start to end of its schedule
  double compute_s;        // time inside the callbacks
  double bubble_measured;  // (wall - compute) / compute
  double bubble_formula;   // (P-1)/M
} weft_pp_stats_t;

// Runs one step (all micro-batches) of this rank's stage; pp_comm is the
// pipeline group (its rank is the stage). Collective over pp_comm.
ncclResult_t weft_pp_run(ncclComm_t pp_comm, weft_pp_kind_t kind, int micro, size_t act_count,
                         const weft_pp_stage_t *stage, weft_pp_stats_t *stats);

#endif  // WEFT_PAR_PP_H
