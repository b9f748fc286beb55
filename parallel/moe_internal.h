/*
 * moe_internal.h — what the mixture-of-experts files share: the sizes of
 * one call, the layout of its activation memory, and the steps moe.c
 * strings together (routing in moe_route.c, the local experts in
 * moe_expert.c, the exchanges between EP ranks in ep_exchange.c).
 *
 * Rows and their orders:
 *   send, back  (this rank as a source) one block per expert in expert
 *               order, so the blocks for EP rank j are consecutive; inside
 *               an expert's block the kept tokens in token order. Padded:
 *               every expert's block is `fixed` rows.
 *   recv        (this rank as an expert holder) one block per source rank,
 *               inside it one block per local expert (padded as above).
 *   xe, ye      the same rows expert-major: local expert, then source,
 *               then token order: what each expert's GEMMs take.
 */
#ifndef WEFT_PAR_MOE_INTERNAL_H
#define WEFT_PAR_MOE_INTERNAL_H

#include <stdint.h>

#include "moe.h"
#include "par_util.h"

typedef struct {
  int T, E, k, P, El, h, fl;  // tokens, experts, top-k, EP size, local experts, width, local ffn
  int cap;                    // C, or -1 without a capacity
  int fixed;                  // rows of an expert's padded block (min(C, T)); 0: no padding
  size_t S, R;                // rows of send/back, of recv/xe/ye (the worst routing)
} moe_dims_t;

typedef struct {
  float *xs;         // T x h: the input, for the router's backward
  float *probs;      // T x E
  float *dprobs;     // T x E (backward)
  float *weight;     // T x k combine weights
  float *dweight;    // T x k (backward)
  float *aux;        // 1: the load-balancing loss
  int32_t *expert;   // T x k chosen experts, slot order
  int32_t *pos;      // T x k: row in send/back, -1 when dropped
  int32_t *routed;   // E: assignments per expert before dropping
  int32_t *grouted;  // E: the routing group's, for the aux loss (routed without a group or an aux loss)
  int32_t *scount;   // E: kept assignments per expert (rows sent)
  int32_t *rcount;   // P x El: rows source s sends local expert l
  int32_t *nrows;    // El: rows each local expert computes
  int32_t *soff, *scnt, *roff, *rcnt;  // P each: peer blocks of send/back and recv (rows)
  int32_t *meta;     // [0] rows received (R), [1] kept, [2] dropped
  float *send, *back;             // S x h
  float *recv, *xe, *ye;          // R x h
  float *hpre, *act;              // R x fl
} moe_acts_t;

// The sizes of a call of T tokens, and where each array lives in `acts`
// (NULL: only the size, returned in floats).
moe_dims_t weft_moe_dims(const weft_moe_t *moe, int tokens);
size_t weft_moe_carve(const moe_dims_t *d, float *acts, moe_acts_t *a);

// moe_route.c. Router logits, softmax, top-k, weights, the per-expert
// counts, capacity and dropping (pos, scount, meta[1..2]), and the aux loss.
ncclResult_t weft_moe_route(const weft_moe_t *moe, const moe_dims_t *d, const float *router, const float *x,
                            moe_acts_t *a);
// From a->dweight (the loss's gradient w.r.t. each slot's weight): the
// router's gradient added into grouter, and dlogits · W_rᵀ added into dx.
void weft_moe_route_backward(const weft_moe_t *moe, const moe_dims_t *d, const float *router, float *grouter,
                             moe_acts_t *a, float *dx);

// moe_capacity.c. The group's per-expert counts (grouted), and which of
// this rank's assignments are kept: pos 0 kept, -1 dropped; scount and
// meta[1..2] counted.
ncclResult_t weft_moe_group_routed(const weft_moe_t *moe, const moe_dims_t *d, moe_acts_t *a);
ncclResult_t weft_moe_apply_capacity(const weft_moe_t *moe, const moe_dims_t *d, moe_acts_t *a);

// moe_expert.c. The local experts on R rows in xe (n[l] rows for local
// expert l, expert-major): ye = experts(xe), all-reduced over TP.
ncclResult_t weft_moe_experts_forward(const weft_moe_t *moe, const moe_dims_t *d, const float *params,
                                      const int32_t *n, int rows, moe_acts_t *a);
// ye holds dY on entry and dX on return; gradients added into grads.
ncclResult_t weft_moe_experts_backward(const weft_moe_t *moe, const moe_dims_t *d, const float *params,
                                       float *grads, const int32_t *n, int rows, moe_acts_t *a);

// ep_exchange.c. Every rank's kept counts to the experts' ranks (rcount
// from scount), and the peer blocks (soff, scnt, roff, rcnt) from both.
ncclResult_t weft_moe_exchange_counts(const weft_moe_t *moe, const moe_dims_t *d, moe_acts_t *a);
// Dispatch's direction (send -> recv) or combine's (recv -> back) for rows
// of h floats: one ncclAlltoAll of padded blocks, or grouped
// ncclSend/ncclRecv of exactly the counted rows.
ncclResult_t weft_moe_dispatch(const weft_moe_t *moe, const moe_dims_t *d, moe_acts_t *a);
ncclResult_t weft_moe_combine(const weft_moe_t *moe, const moe_dims_t *d, moe_acts_t *a);

#endif  // WEFT_PAR_MOE_INTERNAL_H
