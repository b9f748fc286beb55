/*
 * model.h — a GPT-2-style decoder built from the parallel layer's tensor-
 * parallel pieces (tp.h): token embedding (vocabulary-parallel, tied to the
 * LM head) plus learned position embedding, L blocks of
 *   x += Attn(LN1(x));  x += MLP(LN2(x))
 * (causal multi-head attention, GELU MLP), a final LayerNorm and the LM
 * head logits = LNf(x) · Eᵀ, trained with cross-entropy. With a tensor-
 * parallel group of one rank this is the plain single-process model.
 *
 * Parameters are grouped into "layers", the units a data-parallel engine
 * shards and reduces: layer 0 = [wte (this rank's vocabulary rows) | wpe],
 * layers 1..L = blocks [ln1 | attention | ln2 | MLP] (this rank's part),
 * layer L+1 = the final LayerNorm; with experts a MoE block's MLP is its
 * router and its experts are layers L+2.. (model_moe.h). The model
 * reaches them through a gpt_store_t, so the same code runs on plain
 * arrays (tests) and on a ZeRO engine (the trainer).
 *
 * Activations are rows in sequence-major order: row = position * batch +
 * sample, as the tp layers expect. With sequence parallelism (the tp
 * group's sequence_parallel) the residual stream between the tensor-
 * parallel blocks is this rank's contiguous shard of T/tp rows: LayerNorms
 * and the residual adds run on the shard, each attention and MLP block
 * all-gathers its input and reduce-scatters its output, the embedding's
 * sum is reduce-scattered to the shard, the final LayerNorm's output is
 * all-gathered for the vocabulary-parallel LM head, whose input gradient
 * is reduce-scattered back. Pipeline boundary tensors are shards too.
 */
#ifndef WEFT_TRAINER_MODEL_H
#define WEFT_TRAINER_MODEL_H

#include <stddef.h>

#include "cp.h"
#include "tp.h"

typedef struct {
  int vocab, seq, layers, hidden, heads, ffn;
  // Mixture of experts (model_moe.h; experts = 0: every MLP dense): E
  // experts of ffn each in blocks 0, moe_every, 2 moe_every, ..., top-k
  // routing, capacity factor (0: none) and load-balancing loss coefficient.
  int experts, topk, moe_every;
  float capacity_factor, aux_coef;
} gpt_dims_t;

// Where the model finds its parameters and puts its gradients.
typedef struct {
  ncclResult_t (*params)(void *ctx, int layer, int prefetch, float **p);
  ncclResult_t (*release)(void *ctx, int layer);
  ncclResult_t (*grads)(void *ctx, int layer, float **g);  // add into *g
  ncclResult_t (*grads_done)(void *ctx, int layer);
  void *ctx;
} gpt_store_t;

typedef struct gpt gpt_t;

// A pipeline stage of the model: blocks first .. last-1; `embed` on the
// first stage (token and position embeddings), `head` on the last (final
// LayerNorm, tied LM head, loss). The whole model is {0, L, 1, 1}.
typedef struct {
  int first, last, embed, head;
  // Activation recomputation: keep each block's input only, and one
  // block's activations, which backward recomputes block by block (one
  // more forward of the blocks per step, their TP all-reduces included).
  int recompute;
} gpt_stage_t;

// Checks the dims against the group (heads and ffn divisible by its size)
// and allocates activations for micro-batches of `batch` sequences.
ncclResult_t gpt_create(const gpt_dims_t *dims, int batch, const weft_tp_t *tp, gpt_t **out);
// The same for one stage (activations of its blocks only).
ncclResult_t gpt_create_stage(const gpt_dims_t *dims, int batch, const weft_tp_t *tp, const gpt_stage_t *stage,
                              gpt_t **out);
// The same with each sequence split over a context-parallel group (cp.h;
// NULL: none): the model holds this rank's seq / cp->size positions of
// every sequence (T = seq / cp->size * batch rows, chunks cp->rank and
// 2 * cp->size - 1 - cp->rank), attention runs over the ring, and the loss
// is the mean over those rows (the ranks' means average to the sequence's).
ncclResult_t gpt_create_cp(const gpt_dims_t *dims, int batch, const weft_tp_t *tp, const weft_cp_t *cp,
                           const gpt_stage_t *stage, gpt_t **out);
// All of it at once: the context-parallel group (NULL: none) and the
// expert-parallel group of the MoE blocks (NULL: every expert here;
// model_moe.h).
ncclResult_t gpt_create_parallel(const gpt_dims_t *dims, int batch, const weft_tp_t *tp, const weft_cp_t *cp,
                                 const gpt_stage_t *stage, ncclComm_t ep_comm, gpt_t **out);
void gpt_destroy(gpt_t *m);

int gpt_nlayers(const gpt_t *m);                 // L + 2
int gpt_rows(const gpt_t *m);                    // rows of a boundary tensor: T, or T/tp under SP
size_t gpt_layer_size(const gpt_t *m, int l);    // this rank's parameters of layer l
size_t gpt_full_layer_size(const gpt_dims_t *d, int l);  // of the unsharded model
size_t gpt_full_count(const gpt_dims_t *d);      // Ψ of the unsharded model
size_t gpt_local_count(const gpt_t *m);          // this rank's parameters
size_t gpt_activation_bytes(const gpt_t *m);     // activations held per micro-batch

// GPT-2 initialisation of the full parameter vector (deterministic in seed):
// weights N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)), biases 0,
// LayerNorm gain 1.
void gpt_init_full(const gpt_dims_t *d, unsigned long long seed, float *full);
// This rank's part of a full parameter vector (layers one after another).
ncclResult_t gpt_shard_full(const gpt_t *m, const float *full, float *local);
// The inverse for checkpoints: writes what tensor-parallel rank `tp_rank`
// holds (`local`, laid out as gpt_shard_full writes it on that rank) into
// its places in `full`. Parameters every rank holds are written each time.
ncclResult_t gpt_unshard(const gpt_t *m, int tp_rank, const float *local, float *full);
// Per local parameter: 1 if this rank holds a slice of it, 1/tp if every
// rank of the tensor-parallel group holds a copy (for the gradient norm).
void gpt_norm_weights(const gpt_t *m, float *weight);

// Forward of one micro-batch: ids, targets are T = seq * batch tokens in
// row order. Writes the mean loss over T (targets NULL: no loss, logits
// only). The activations stay for gpt_backward.
ncclResult_t gpt_forward(gpt_t *m, const gpt_store_t *st, const int *ids, const int *targets, float *loss);
// Backward of the last forward: adds every layer's gradient (of the mean
// loss) through the store.
ncclResult_t gpt_backward(gpt_t *m, const gpt_store_t *st);
// One stage's passes. Without `embed` the stage starts from `in` (rows x
// hidden, gpt_rows; the previous stage's output); without `head` it writes its
// output to `out` (may alias `in`), and its backward starts from `dout`
// and writes the input gradient to `din`. A head-only stage adds the LM
// head's wte gradient into layer 0 through the store (grads, grads_done).
ncclResult_t gpt_forward_stage(gpt_t *m, const gpt_store_t *st, const int *ids, const int *targets, const float *in,
                               float *out, float *loss);
ncclResult_t gpt_backward_stage(gpt_t *m, const gpt_store_t *st, const float *dout, float *din);
// After a forward on a head stage: the most likely next token at each row (greedy decoding).
ncclResult_t gpt_argmax(gpt_t *m, int *out);

// Forward FLOPs per token of the full model (matmuls, attention included).
double gpt_flops_per_token(const gpt_dims_t *d);

#endif  // WEFT_TRAINER_MODEL_H
