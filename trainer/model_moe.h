/*
 * model_moe.h — the GPT's mixture-of-experts blocks (gpt_dims_t.experts >
 * 0): which blocks they are, where their parameters live, and the passes
 * model_pass.c calls in place of the dense MLP. The layer itself is
 * parallel/moe.h.
 *
 * Block l is a MoE block when experts > 0 and l % moe_every == 0 (blocks
 * 0, K, 2K, ..., Megatron-Core's layer frequency). Its MLP is replaced by
 * a router (h x E, in the block's layer, replicated over TP) and E expert
 * MLPs (h -> ffn -> h each). Top-1 uses the router probability as the
 * combine weight (Switch), top-k >= 2 the probabilities renormalised over
 * the k chosen (Mixtral); an over-full expert drops the assignments of
 * lowest router probability; capacity and the load-balancing loss follow
 * gpt_dims_t's capacity_factor and aux_coef (rules in moe.h).
 *
 * The experts of the j-th MoE block are model layer L + 2 + j, after the
 * final LayerNorm: in the full parameter vector (gpt_init_full, the
 * checkpoint) it holds all E experts [W1 | b1 | W2 | b2] one after
 * another; on a rank it holds the experts of its EP rank (E/EP of them,
 * each split over TP as Megatron splits an MLP). The store hands these
 * layers out like any other, so the trainer can keep them in an engine
 * of their own (reduced over the expert-data-parallel group).
 */
#ifndef WEFT_TRAINER_MODEL_MOE_H
#define WEFT_TRAINER_MODEL_MOE_H

#include "model.h"

int gpt_is_moe(const gpt_dims_t *d, int block);
int gpt_moe_blocks(const gpt_dims_t *d);                // MoE blocks in the model
int gpt_expert_layer(const gpt_dims_t *d, int block);   // L + 2 + j for the j-th MoE block, else -1
size_t gpt_moe_full_count(const gpt_dims_t *d);         // Ψ of every expert (the full vector's tail)
size_t gpt_expert_layer_size(const gpt_t *m);           // one MoE block's experts on this rank
// Extra matmul FLOPs per token over the dense model: k experts and the router instead of one MLP.
double gpt_moe_flops_delta(const gpt_dims_t *d);

// gpt_create_stage with the expert-parallel group the MoE blocks use
// (NULL: every expert on this rank).
ncclResult_t gpt_create_ep(const gpt_dims_t *dims, int batch, const weft_tp_t *tp, const gpt_stage_t *stage,
                           ncclComm_t ep_comm, gpt_t **out);
int gpt_ep_rank(const gpt_t *m);
int gpt_ep_size(const gpt_t *m);
// Multiplies the experts' gradients (1/EP when they are averaged over the
// expert-data-parallel group, so they equal the data-parallel average).
void gpt_moe_set_grad_scale(gpt_t *m, float scale);
// C per expert per micro-batch, or -1 without a capacity.
int gpt_moe_capacity(const gpt_t *m);

// One MoE block's experts: this rank's part from the full layer, and back
// (b2, held by every TP rank, written only when `replicated`).
ncclResult_t gpt_expert_shard(const gpt_t *m, const float *full, float *local);
ncclResult_t gpt_expert_unshard(const gpt_t *m, const float *local, float *full, int replicated);
// Per local parameter of one MoE block's experts: 1/tp for b2, else 1.
void gpt_expert_norm_weights(const gpt_t *m, float *weight);

// The load-balancing losses of the blocks of the last forward (without
// recomputation), and the sum over every backward since the last take.
float gpt_moe_last_aux(const gpt_t *m);
double gpt_moe_aux_take(gpt_t *m);

#endif  // WEFT_TRAINER_MODEL_MOE_H
