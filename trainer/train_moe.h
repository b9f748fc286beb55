/*
 * train_moe.h — mixture of experts in the trainer (--experts E, --ep N):
 * the expert-parallel and expert-data-parallel groups, the experts' own
 * data-parallel engine, and what a step, a checkpoint and a resume do
 * with it. Without experts every call here does nothing.
 *
 * Megatron-Core's rule: EP divides DP. The data-parallel group of each
 * (tp, pp) position is split into EP groups of consecutive data-parallel
 * ranks and expert-data-parallel (EDP) groups of the DP/EP ranks that hold
 * the same experts (parallel/moe.h, weft_ep_groups_create). The dense
 * parameters (the routers among them) stay in the engine over the whole
 * data-parallel group; each stage's experts (under the interleaved
 * schedule, those of every chunk it holds, in block order) live in a
 * second engine (same ZeRO stage) over its EDP group. The experts' gradient on a rank is the
 * sum over its EP group's tokens, scaled by 1/EP, so the EDP engine's
 * average is the data-parallel average: the same update as one rank.
 *
 * Checkpoints hold every expert whole (model_moe.h's layers after the
 * final LayerNorm): saving reduces each EDP group's first rank's experts
 * (TP parts in place, b2 once) onto world rank 0; resuming keeps this
 * rank's experts of this stage, so a checkpoint resumes under any EP.
 */
#ifndef WEFT_TRAINER_TRAIN_MOE_H
#define WEFT_TRAINER_TRAIN_MOE_H

#include "train_internal.h"

// The flags' refusals (EP without experts, EP not dividing DP or E, top-k
// above E), naming the flags and the numbers.
ncclResult_t train_moe_check(const train_cfg_t *c);
// After the mesh: the EP and EDP groups. Collective over the DP group.
ncclResult_t train_moe_groups(trainer_t *t);
ncclComm_t train_moe_ep_comm(const trainer_t *t);  // NULL without experts
// After the dense engine and the models: the experts' engine, their
// gradient scale, and the store that hands expert layers to the engine.
ncclResult_t train_moe_engine(trainer_t *t);
void train_moe_destroy(trainer_t *t);

// The experts from the full vector's expert part (Ψe floats each; m and v
// NULL: parameters only).
ncclResult_t train_moe_load(trainer_t *t, const float *params, const float *m, const float *v, long adam_steps);
// Collective over the world: the full expert part of parameters, m and v
// (3 Ψe floats) on world rank 0 (*out, the caller frees), NULL elsewhere.
ncclResult_t train_moe_gather(trainer_t *t, float **out);

// The step: micro-batch starts, the gradient norm's share, clipping, AdamW.
ncclResult_t train_moe_begin_micro(trainer_t *t, int micro);
ncclResult_t train_moe_grad_sumsq(trainer_t *t, double *sumsq);
ncclResult_t train_moe_scale_grads(trainer_t *t, float scale);
// AdamW on the experts; *aux: the step's load-balancing loss (summed over
// the MoE blocks, averaged over micro-batches and data-parallel ranks; -1
// without experts). Collective over the world.
ncclResult_t train_moe_step(trainer_t *t, const weft_adamw_t *opt, float *aux);

#endif  // WEFT_TRAINER_TRAIN_MOE_H
