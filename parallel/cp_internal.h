/*
 * cp_internal.h — what the context-parallel files share: the shape of one
 * rank's part of the attention and the ring's two passes over the local
 * heads' Q, K, V (cp_ring.c, cp_ring_grad.c), which cp_attn.c wraps in
 * the QKV and output projections.
 */
#ifndef WEFT_PAR_CP_INTERNAL_H
#define WEFT_PAR_CP_INTERNAL_H

#include "cp.h"
#include "par_util.h"

// One rank's attention: `batch` sequences of `local` positions (two chunks
// of `chunk`), `heads` heads of `head_dim` on this rank (hl = heads *
// head_dim features of each of Q, K, V). Rows are local position * batch +
// sample; QKV rows hold [Q (hl) | K (hl) | V (hl)], the output hl.
typedef struct {
  int batch, local, chunk, heads, head_dim, hl;
  float scale;  // 1 / sqrt(head_dim)
} weft_cp_shape_t;

// Which local chunk pairs attend: 0 none, 1 all, 2 causal (the diagonal).
int weft_cp_block_mask(const weft_cp_t *cp, int src, int q_chunk, int k_chunk);

// Row statistics (running max, sum, log-sum-exp, ...) are one float per
// (sample, head, local position): index (n * heads + head) * local + pos.
static inline size_t weft_cp_nstats(const weft_cp_shape_t *s) { return (size_t)s->batch * s->heads * s->local; }
// Floats of one K|V block of every local row: T_cp * 2 * hl.
static inline size_t weft_cp_kv_floats(const weft_cp_shape_t *s) {
  return (size_t)s->local * s->batch * 2 * (size_t)s->hl;
}

// Forward: o (rows x hl) = causal softmax(Q Kᵀ * scale) V over the whole
// sequence, lse the log-sum-exp of each query row (kept for backward).
size_t weft_cp_ring_forward_scratch(const weft_cp_shape_t *s);
ncclResult_t weft_cp_ring_forward(const weft_cp_t *cp, const weft_cp_shape_t *s, const float *qkv, float *o,
                                  float *lse, float *scratch);
// Backward: dqkv (rows x 3 hl) from dout (rows x hl), with qkv, o and lse
// of the forward. Overwrites dqkv.
size_t weft_cp_ring_backward_scratch(const weft_cp_shape_t *s);
ncclResult_t weft_cp_ring_backward(const weft_cp_t *cp, const weft_cp_shape_t *s, const float *qkv, const float *o,
                                   const float *lse, const float *dout, float *dqkv, float *scratch);

// Copies the K|V columns of every row of qkv into kv (rows x 2 hl), or back.
void weft_cp_pack_kv(const weft_cp_shape_t *s, const float *qkv, float *kv);
void weft_cp_unpack_kv(const weft_cp_shape_t *s, const float *kv, float *qkv);

// A grouped send to rank + 1 and receive from rank - 1 on the ring's
// stream (returns once queued; weftStreamSynchronize waits).
ncclResult_t weft_cp_ring_shift(const weft_cp_t *cp, const float *send, float *recv, size_t count);

#endif  // WEFT_PAR_CP_INTERNAL_H
