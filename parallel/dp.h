/*
 * dp.h — data parallelism over one flat parameter buffer: DDP and
 * ZeRO stages 1, 2 and 3, gradient accumulation, fp32 or mixed precision,
 * AdamW on the local shard, and per-rank memory accounting.
 *
 * The model is a list of layers; layer l owns n_l consecutive parameters.
 * Every layer is split over the N data-parallel ranks in shards of
 * s_l = ceil(n_l / N) elements (the last shard padded), so a layer takes
 * N * s_l elements in a full buffer and rank r's piece of it starts at
 * r * s_l: sharding is offset arithmetic. A layer is also the unit of
 * communication: one gradient bucket, and in ZeRO-3 one parameter gather.
 *
 * Per step:
 *   for each micro-batch m in 0..accum-1:
 *     forward:  p = weft_dp_layer_params(dp, l, next) ... weft_dp_layer_release(dp, l)
 *     weft_dp_begin_micro(dp, m)   (before m's backward; a pipeline may run
 *                                   later forwards first)
 *     backward: p = weft_dp_layer_params(dp, l, l-1); g = weft_dp_layer_grads(dp, l);
 *               add this micro-batch's gradient into g; weft_dp_layer_grads_done(dp, l);
 *               weft_dp_layer_release(dp, l)
 *   weft_dp_step(dp, &adamw)
 *
 * Communication runs on a weft stream, overlapped with the caller's
 * compute: a finished bucket is all-reduced (DDP) or reduce-scattered
 * (ZeRO) at once, and ZeRO-3 gathers the `next` layer while the caller
 * computes the current one.
 *
 * Parameters and gradients are float (fp32) or 16-bit (bf16/fp16) with an
 * fp32 master copy; Adam's moments are always fp32.
 */
#ifndef WEFT_PAR_DP_H
#define WEFT_PAR_DP_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

typedef enum { WEFT_DP_DDP = 0, WEFT_DP_ZERO1 = 1, WEFT_DP_ZERO2 = 2, WEFT_DP_ZERO3 = 3 } weft_dp_stage_t;

typedef enum {
  WEFT_DP_FP32 = 0,  // fp32 params and grads; Adam m, v (8 bytes per parameter)
  WEFT_DP_BF16 = 1,  // bf16 params and grads; fp32 master, m, v (12 bytes per parameter)
  WEFT_DP_FP16 = 2,  // the same with IEEE half
} weft_dp_precision_t;

typedef enum {
  WEFT_DP_AVG_NCCL = 0,      // ncclAvg divides by N; accumulation's 1/M is applied at the step
  WEFT_DP_AVG_PREMULSUM = 1  // one PreMulSum op multiplies by 1/(N*M) while reducing
} weft_dp_average_t;

typedef struct {
  weft_dp_stage_t stage;
  weft_dp_precision_t precision;
  weft_dp_average_t average;
  int accum_steps;            // micro-batches per step (M >= 1)
  int nlayers;                // >= 1
  const size_t *layer_sizes;  // nlayers parameter counts (>= 1 each); copied
} weft_dp_config_t;

typedef struct {
  float lr, beta1, beta2, eps, weight_decay;
} weft_adamw_t;

// Bytes one rank holds for the model states, and what it holds besides.
typedef struct {
  size_t psi;            // parameters Ψ (sum of the layer sizes)
  size_t psi_padded;     // Ψ with every layer padded to a multiple of N
  int nranks;            // N
  size_t param_bytes;    // 16-bit or fp32 parameters (full or shard)
  size_t grad_bytes;     // gradients (full or shard)
  size_t optim_bytes;    // fp32 master (mixed precision only) + Adam m and v
  size_t total_bytes;    // the three above
  double paper_bytes;    // the ZeRO paper's figure for Ψ (no padding)
  double padding_bytes;  // total_bytes - paper_bytes
  size_t working_bytes;  // buffers outside the model states: ZeRO-2/3 gradient
                         // buckets, ZeRO-3 gathered layers (0 in the model)
} weft_dp_memory_t;

typedef struct weft_dp weft_dp_t;

// Collective over `comm` (the data-parallel group). Checks the config and
// allocates this rank's buffers; parameters start at zero.
ncclResult_t weft_dp_create(ncclComm_t comm, const weft_dp_config_t *config, weft_dp_t **dp);
ncclResult_t weft_dp_destroy(weft_dp_t *dp);

// Sets the parameters from the full fp32 vector (Ψ values, layers one
// after the other, the same on every rank); each rank keeps its part.
ncclResult_t weft_dp_load_params(weft_dp_t *dp, const float *full);

// Writes the full fp32 parameters (Ψ values) into `full`. In ZeRO-3 this
// gathers them: collective, every rank calls it.
ncclResult_t weft_dp_read_params(weft_dp_t *dp, float *full);

// ---- Checkpoints (dp_state.c): Adam's moments as full fp32 vectors (Ψ
// values each, laid out as in weft_dp_load_params) and the AdamW step count.
// Call between steps. Reading gathers the ZeRO shards (collective, every
// rank calls it); loading keeps this rank's part, whatever layout wrote it.
// With 16-bit parameters the fp32 master is not read out (weft_dp_read_params
// gives the rounded parameters); weft_dp_load_params sets it on loading.
ncclResult_t weft_dp_read_optim(weft_dp_t *dp, float *m, float *v, long *steps);
ncclResult_t weft_dp_load_optim(weft_dp_t *dp, const float *m, const float *v, long steps);

// Starts micro-batch `micro` (0 .. accum_steps-1); micro 0 starts a step
// and clears the accumulated gradients.
ncclResult_t weft_dp_begin_micro(weft_dp_t *dp, int micro);

// The n_l parameters of layer l, in the parameter type. ZeRO-3 gathers
// them (waiting only if the gather is not done yet) and starts gathering
// layer `prefetch` (-1: none); the pointer stays valid until
// weft_dp_layer_release. Other stages point into the full buffer.
ncclResult_t weft_dp_layer_params(weft_dp_t *dp, int layer, int prefetch, void **params);
ncclResult_t weft_dp_layer_release(weft_dp_t *dp, int layer);

// Where the backward pass adds layer l's gradient (n_l values of the
// parameter type); zero or holding earlier micro-batches' sum. Call once
// per layer per micro-batch, then weft_dp_layer_grads_done.
ncclResult_t weft_dp_layer_grads(weft_dp_t *dp, int layer, void **grads);
// Layer l's gradient for this micro-batch is complete: its bucket is
// reduced now (ZeRO-2/3: every micro-batch; DDP, ZeRO-1: the last one).
ncclResult_t weft_dp_layer_grads_done(weft_dp_t *dp, int layer);

// Waits for the reductions, applies AdamW (step counter kept inside) to
// this rank's shard, and all-gathers the parameters (stages 1 and 2).
ncclResult_t weft_dp_step(weft_dp_t *dp, const weft_adamw_t *opt);

// Gradient clipping. After the last micro-batch's grads_done: waits for
// the reductions and adds to *sumsq the sum over the gradient elements
// this rank owns (its shard of each layer) of weight[i] * g[i]^2, where g
// is the averaged gradient AdamW would see and weight (Ψ values laid out
// as in weft_dp_load_params; NULL: all 1) lets a caller count parameters
// replicated over other groups once. Summed over the group: |g|^2.
ncclResult_t weft_dp_grad_sumsq(weft_dp_t *dp, const float *weight, double *sumsq);
// Multiplies the gradients the next weft_dp_step applies by `scale` (> 0,
// finite); back to 1 after that step.
ncclResult_t weft_dp_scale_grads(weft_dp_t *dp, float scale);

// What this engine holds (bytes it allocated, by category).
ncclResult_t weft_dp_memory(const weft_dp_t *dp, weft_dp_memory_t *out);

// The same figures from the layout alone, for N ranks (no communicator).
ncclResult_t weft_dp_memory_model(weft_dp_stage_t stage, weft_dp_precision_t precision, int nranks,
                                  int nlayers, const size_t *layer_sizes, weft_dp_memory_t *out);

// The ZeRO paper's per-rank bytes for Ψ parameters on N ranks (no padding):
// mixed precision 16Ψ, 4Ψ+12Ψ/N, 2Ψ+14Ψ/N, 16Ψ/N; fp32 16Ψ, 8Ψ+8Ψ/N,
// 4Ψ+12Ψ/N, 16Ψ/N.
double weft_dp_paper_bytes(weft_dp_stage_t stage, weft_dp_precision_t precision, double psi, int nranks);

// Converting between the parameter type and fp32 (n values).
void weft_dp_to_float(weft_dp_precision_t precision, const void *src, float *dst, size_t n);
void weft_dp_from_float(weft_dp_precision_t precision, const float *src, void *dst, size_t n);
// Adds n fp32 values into a buffer of the parameter type.
void weft_dp_add_float(weft_dp_precision_t precision, const float *src, void *dst, size_t n);

#endif  // WEFT_PAR_DP_H
