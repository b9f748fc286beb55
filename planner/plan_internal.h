/*
 * plan_internal.h — what the planner's own files share and weft-plan's
 * users do not need: the per-layer cost that plan_time.c computes and
 * plan_eval.c assembles into a step.
 */
#ifndef WEFT_PLAN_INTERNAL_H
#define WEFT_PLAN_INTERNAL_H

#include "plan.h"

// Seconds one block (a layer, the embedding, the output layer) takes for one
// micro-batch on one GPU.
typedef struct {
  double fwd, bwd;        // kernels: GEMMs, attention, memory-bound ops
  double core_fwd;        // the attention core alone (what selective recompute redoes)
  double tp_fwd, tp_bwd;  // tensor-parallel collectives on the critical path
  double tp_bytes;        // bytes those collectives carry per GPU (fwd + bwd)
  double gemm_fwd, attn_fwd, mem_fwd;  // the forward's parts, for --explain
} plan_cost_t;

plan_cost_t plan_layer_cost(const plan_model_t *m, const plan_cluster_t *c, const plan_job_t *job,
                            int tp, double b, const plan_links_t *links, FILE *why);
plan_cost_t plan_embedding_cost(const plan_model_t *m, const plan_cluster_t *c,
                                const plan_job_t *job, int tp, double b, const plan_links_t *links);
plan_cost_t plan_head_cost(const plan_model_t *m, const plan_cluster_t *c, const plan_job_t *job,
                           int tp, double b, const plan_links_t *links);
double plan_gemm_rate(const plan_cluster_t *c, const plan_calib_t *k);  // FLOP/s
double plan_mem_rate(const plan_cluster_t *c, const plan_calib_t *k);   // bytes/s

#endif
