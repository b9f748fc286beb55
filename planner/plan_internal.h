/*
 * plan_internal.h — what the planner's own files share and weft-plan's
 * users do not need: the per-layer cost that plan_time.c computes, the
 * per-stage layout that plan_stage.c works out, and plan_eval.c assembles
 * into a step.
 */
#ifndef WEFT_PLAN_INTERNAL_H
#define WEFT_PLAN_INTERNAL_H

#include "plan.h"

// Seconds one block (a layer, the embedding, the output layer) takes for one
// micro-batch on one GPU, and the traffic it causes.
typedef struct {
  double fwd, bwd;        // kernels: GEMMs, attention, memory-bound ops
  double core_fwd;        // the attention core alone (what selective recompute redoes)
  double tp_fwd, tp_bwd;  // tensor-parallel collectives on the critical path
  double tp_bytes;        // bytes those collectives carry per GPU (fwd + bwd)
  double cp_fwd, cp_bwd;  // context-parallel ring time not hidden behind attention
  double cp_bytes;        // K/V (and their gradients) sent per GPU (fwd + bwd)
  double ep_fwd, ep_bwd;  // expert-parallel all-to-alls (dispatch, combine), on the critical path
  double ep_bytes;        // bytes they send per GPU to other GPUs (fwd + bwd)
  double gemm_fwd, attn_fwd, mem_fwd;  // the forward's parts, for --explain
} plan_cost_t;

plan_cost_t plan_layer_cost(const plan_model_t *m, const plan_cluster_t *c, const plan_job_t *job,
                            const plan_layout_t *l, int moe, const plan_links_t *links, FILE *why);
plan_cost_t plan_embedding_cost(const plan_model_t *m, const plan_cluster_t *c,
                                const plan_job_t *job, const plan_layout_t *l,
                                const plan_links_t *links);
plan_cost_t plan_head_cost(const plan_model_t *m, const plan_cluster_t *c, const plan_job_t *job,
                           const plan_layout_t *l, const plan_links_t *links);
double plan_gemm_rate(const plan_cluster_t *c, const plan_calib_t *k);  // FLOP/s, full GPU
double plan_mem_rate(const plan_cluster_t *c, const plan_calib_t *k);   // bytes/s

// Which layers pipeline stage i holds: `count` layers from `first`, of
// which `moe` are MoE layers. Stages get floor or ceil of L/p layers; the
// first and last (which also hold the embedding and the output layer) get
// the short share, as Llama 3 did (one layer fewer on each when p divides
// L + 2).
typedef struct {
  int first, count, moe;
} plan_stage_t;

// 0, or -1 when p stages cannot split the layers (p > L).
int plan_stage_split(const plan_model_t *m, int p, int i, plan_stage_t *out);
int plan_stage_max_layers(const plan_model_t *m, int p);

#endif
