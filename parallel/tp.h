/*
 * tp.h — tensor- and sequence-parallel layers on CPU (fp32, OpenBLAS).
 *
 * Activations are row-major [T x features] with T = s * b tokens in
 * sequence-major order (row = position * b + sample), so a sequence shard
 * is a contiguous block of rows. With sequence parallelism on, the
 * activations between tensor-parallel regions hold T/size rows on each
 * rank (rank r: rows r*T/size ...); inside a region they hold all T rows.
 *
 * Communication per layer (Megatron-style f/g pairs):
 *   column-parallel linear  fwd: identity          bwd: all-reduce dx
 *   row-parallel linear     fwd: all-reduce y      bwd: identity
 *   with sequence parallel  the entry is an all-gather along the sequence
 *                           (bwd: reduce-scatter), the exit a reduce-scatter
 *                           (bwd: all-gather)
 * Replicated parameters used on sequence shards (row-parallel bias,
 * LayerNorm) have their gradients all-reduced over the group in backward.
 *
 * Each layer's parameters are one flat float array (its local part), so
 * a data-parallel engine can own them; gradients are *added* into a flat
 * array of the same shape. Every layer reports its parameter count and the
 * floats of activation memory one micro-batch needs (saved in forward,
 * used as scratch in backward).
 */
#ifndef WEFT_PAR_TP_H
#define WEFT_PAR_TP_H

#include <stddef.h>

#include "nccl.h"

typedef struct {
  ncclComm_t comm;        // the tensor-parallel group; NULL for one rank
  int size, rank;
  int sequence_parallel;  // 1: activations outside TP regions are sequence shards
} weft_tp_t;

// Fills *tp from the group (NULL: a group of one).
ncclResult_t weft_tp_init(weft_tp_t *tp, ncclComm_t comm, int sequence_parallel);
// Rows this rank holds outside TP regions for T tokens (T or T/size).
int weft_tp_local_rows(const weft_tp_t *tp, int tokens);

// ---- Linear layers: full weight W [in x out], bias b [out] -------------
// Column-parallel: W's columns split in `parts` equal groups, each split
// over the ranks (parts = 3 for a fused Q|K|V); local params
// [W_r (in x out/size) | b_r (out/size)]. Output features stay split.
// Row-parallel: W's rows split; local [W_r (in/size x out) | b (out)].
size_t weft_tp_column_nparams(const weft_tp_t *tp, int in, int out);
size_t weft_tp_row_nparams(const weft_tp_t *tp, int in, int out);
// Local params from the full [W | b] (the same on every rank).
ncclResult_t weft_tp_column_shard(const weft_tp_t *tp, int in, int out, int parts, const float *full, float *local);
ncclResult_t weft_tp_row_shard(const weft_tp_t *tp, int in, int out, const float *full, float *local);

// x: local rows x in. xs: T x in, receives the (gathered) input, kept for
// backward. y: T x out/size.
ncclResult_t weft_tp_column_forward(const weft_tp_t *tp, int in, int out, const float *p, int tokens,
                                    const float *x, float *xs, float *y);
// dy: T x out/size. dx: local rows x in. work: T x in (sequence parallel only).
ncclResult_t weft_tp_column_backward(const weft_tp_t *tp, int in, int out, const float *p, float *g, int tokens,
                                     const float *xs, const float *dy, float *dx, float *work);
// x: T x in/size. y: local rows x out. work: T x out (sequence parallel only).
ncclResult_t weft_tp_row_forward(const weft_tp_t *tp, int in, int out, const float *p, int tokens, const float *x,
                                 float *y, float *work);
// dy: local rows x out. dx: T x in/size. work: T x out (sequence parallel only).
ncclResult_t weft_tp_row_backward(const weft_tp_t *tp, int in, int out, const float *p, float *g, int tokens,
                                  const float *x, const float *dy, float *dx, float *work);

// ---- Megatron MLP: column (h -> f) -> GELU -> row (f -> h) ---------------
// One all-reduce forward, one backward (sequence parallel: all-gather +
// reduce-scatter each way). Full params [W1 | b1 | W2 | b2].
size_t weft_tp_mlp_nparams(const weft_tp_t *tp, int hidden, int ffn);
size_t weft_tp_mlp_nacts(const weft_tp_t *tp, int hidden, int ffn, int tokens);
ncclResult_t weft_tp_mlp_shard(const weft_tp_t *tp, int hidden, int ffn, const float *full, float *local);
ncclResult_t weft_tp_mlp_forward(const weft_tp_t *tp, int hidden, int ffn, const float *p, int tokens,
                                 const float *x, float *y, float *acts);
ncclResult_t weft_tp_mlp_backward(const weft_tp_t *tp, int hidden, int ffn, const float *p, float *g, int tokens,
                                  const float *dy, float *dx, float *acts);

// ---- Causal self-attention, heads split over the ranks -------------------
// QKV column-parallel (each of Q, K, V split by heads), output projection
// row-parallel. Full params [Wqkv (h x 3h) | bqkv (3h) | Wo (h x h) | bo (h)].
typedef struct {
  int hidden, heads, seq, batch;  // tokens = seq * batch
} weft_tp_attn_dims_t;
size_t weft_tp_attn_nparams(const weft_tp_t *tp, const weft_tp_attn_dims_t *d);
size_t weft_tp_attn_nacts(const weft_tp_t *tp, const weft_tp_attn_dims_t *d);
ncclResult_t weft_tp_attn_shard(const weft_tp_t *tp, const weft_tp_attn_dims_t *d, const float *full, float *local);
ncclResult_t weft_tp_attn_forward(const weft_tp_t *tp, const weft_tp_attn_dims_t *d, const float *p, const float *x,
                                  float *y, float *acts);
ncclResult_t weft_tp_attn_backward(const weft_tp_t *tp, const weft_tp_attn_dims_t *d, const float *p, float *g,
                                   const float *dy, float *dx, float *acts);

// ---- Vocabulary-parallel embedding and cross-entropy ---------------------
// Rank r owns vocabulary rows [r*ceil(V/size), ...) (the last range padded):
// local params E_r [ceil(V/size) x h]. No rank holds the full logits.
int weft_tp_vocab_rows(const weft_tp_t *tp, int vocab);  // ceil(V/size)
ncclResult_t weft_tp_vocab_shard(const weft_tp_t *tp, int vocab, int hidden, const float *full, float *local);
// ids: T token ids. y: local rows x h. work: T x h (sequence parallel only).
ncclResult_t weft_tp_embed_forward(const weft_tp_t *tp, int vocab, int hidden, const float *p, int tokens,
                                   const int *ids, float *y, float *work);
// dy: local rows x h. work: T x h (sequence parallel only).
ncclResult_t weft_tp_embed_backward(const weft_tp_t *tp, int vocab, int hidden, float *g, int tokens, const int *ids,
                                    const float *dy, float *work);
// logits: T x vocab_rows, this rank's vocabulary columns. Writes the mean
// loss over T tokens to *loss and, if dlogits is not NULL, its gradient
// (T x vocab_rows). work: 3 * T floats.
ncclResult_t weft_tp_vocab_cross_entropy(const weft_tp_t *tp, int vocab, int tokens, const float *logits,
                                         const int *targets, float *loss, float *dlogits, float *work);

// ---- Per-token layers, run on sequence shards when sequence parallel -----
// LayerNorm over h features; params [gamma (h) | beta (h)] replicated.
// rows: weft_tp_local_rows. acts: rows * (h + 1) floats.
size_t weft_tp_layernorm_nacts(int hidden, int rows);
ncclResult_t weft_tp_layernorm_forward(const weft_tp_t *tp, int hidden, const float *p, int rows, const float *x,
                                       float *y, float *acts);
ncclResult_t weft_tp_layernorm_backward(const weft_tp_t *tp, int hidden, const float *p, float *g, int rows,
                                        const float *dy, float *dx, const float *acts);
// Inverted dropout with a mask that depends only on (seed, token, feature):
// the same on every rank and for every sharding. Use it for the forward
// (x -> y) and again with the same arguments for the backward (dy -> dx).
// In place is allowed.
ncclResult_t weft_tp_dropout(const weft_tp_t *tp, int hidden, int tokens, float rate, unsigned long long seed,
                             const float *x, float *y);

#endif  // WEFT_PAR_TP_H
