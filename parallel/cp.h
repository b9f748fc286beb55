/*
 * cp.h — context parallelism on CPU (fp32, OpenBLAS): every sequence is
 * split along its positions over the ranks of a context-parallel group,
 * and causal self-attention runs as ring attention.
 *
 * Causal load balancing: a sequence of s positions is cut into 2 * size
 * chunks of s / (2 * size) positions, and rank r holds chunks r and
 * 2 * size - 1 - r (an early chunk, which attends to little, with a late
 * one, which attends to much), so every rank does the same attention
 * work. This rank's rows are those two chunks one after the other, each in
 * the sequence-major order of tp.h (row = local position * batch + sample).
 *
 * Ring attention: Q stays; the K and V blocks of every rank travel around
 * the ring (rank r sends to r + 1, receives from r - 1), one step per
 * rank, the transfer of the next block overlapping the attention on the
 * current one. Each step's partial result is merged into the running
 * output with the online softmax (running row max and sum). In backward
 * the K/V blocks go round again, each with the gradient dK/dV its owner
 * will get: every rank adds its queries' contribution and passes it on,
 * and after the last step the accumulated gradient comes home.
 */
#ifndef WEFT_PAR_CP_H
#define WEFT_PAR_CP_H

#include <stddef.h>

#include "nccl.h"
#include "tp.h"

typedef struct {
  ncclComm_t comm;      // the context-parallel group; NULL for one rank
  int size, rank;
  cudaStream_t stream;  // the ring's transfers (weftStreamCreate), NULL for one rank
} weft_cp_t;

// Fills *cp from the group (NULL: a group of one) and creates the ring's
// stream; weft_cp_free releases it.
ncclResult_t weft_cp_init(weft_cp_t *cp, ncclComm_t comm);
ncclResult_t weft_cp_free(weft_cp_t *cp);

// ncclSuccess when `seq` splits into 2 * size equal chunks; otherwise
// ncclInvalidArgument with a message naming `api` and the numbers.
ncclResult_t weft_cp_check_seq(const weft_cp_t *cp, const char *api, int seq);
// Positions of a sequence this rank holds: seq / size.
int weft_cp_local_seq(const weft_cp_t *cp, int seq);
// Position in the whole sequence of this rank's local position `local`.
int weft_cp_position(const weft_cp_t *cp, int seq, int local);
// This rank's rows (seq / size * batch of them, row_bytes each) out of
// the seq * batch rows of a whole micro-batch. `local` may be `full`.
ncclResult_t weft_cp_select_rows(const weft_cp_t *cp, int seq, int batch, size_t row_bytes, const void *full,
                                 void *local);
// The reverse over the group: every rank's rows into their places in
// `full` on every rank. `work` holds seq * batch * row_bytes bytes.
ncclResult_t weft_cp_gather_rows(const weft_cp_t *cp, int seq, int batch, size_t row_bytes, const void *local,
                                 void *full, void *work);

// ---- Causal self-attention over the ring, heads split over a TP group --
// The layer of weft_tp_attn_* (the same parameters: weft_tp_attn_nparams,
// weft_tp_attn_shard), with d->seq the whole sequence: x, y and dx hold
// this rank's seq / size positions of each of d->batch sequences, as
// weft_tp_local_rows of those tokens. With a CP group of one this computes
// what weft_tp_attn_forward does (online softmax, the same up to rounding).
// Communication per layer (CP part; the TP part is the MLP's):
//   forward   size - 1 ring steps, each sending 2 * T_cp * hidden / tp floats (K, V)
//   backward  size - 1 steps of K, V plus size steps of dK, dV: (4 * size - 2) * T_cp * hidden / tp
// where T_cp = seq / size * batch.
size_t weft_cp_attn_nacts(const weft_cp_t *cp, const weft_tp_t *tp, const weft_tp_attn_dims_t *d);
ncclResult_t weft_cp_attn_forward(const weft_cp_t *cp, const weft_tp_t *tp, const weft_tp_attn_dims_t *d,
                                  const float *p, const float *x, float *y, float *acts);
ncclResult_t weft_cp_attn_backward(const weft_cp_t *cp, const weft_tp_t *tp, const weft_tp_attn_dims_t *d,
                                   const float *p, float *g, const float *dy, float *dx, float *acts);

#endif  // WEFT_PAR_CP_H
