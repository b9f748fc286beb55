/*
 * moe.h — a mixture-of-experts MLP with expert parallelism (EP) on CPU
 * (fp32, OpenBLAS), and the communicators EP needs.
 *
 * Each of a rank's T tokens x_t (rows [T x h], any order) is routed:
 *   logits = x_t · W_r  (W_r: h x E, no bias),  p = softmax(logits)
 *   the k experts of highest p (ties: the lower expert index), slot 0 first
 *   weights  renormalize = 1: w_i = p_i / (sum of the k chosen p) (Mixtral)
 *            renormalize = 0: w_i = p_i (Switch Transformer; for top-1 the
 *            renormalised weight is always 1 and the router would learn
 *            from the load-balancing loss only)
 *   y_t = sum over the kept slots, in slot order, of w_i * expert_{e_i}(x_t)
 * An expert is an MLP h -> ffn -> h with GELU, full parameters
 * [W1 (h x ffn) | b1 (ffn) | W2 (ffn x h) | b2 (h)], the layout of
 * weft_tp_mlp.
 *
 * Capacity and dropping. With capacity_factor > 0 an expert takes at most
 * C = ceil(capacity_factor * T * k / E) of a rank's assignments per call
 * (computed in double from the float factor); an expert offered more keeps
 * C of them: WEFT_MOE_DROP_PROBS the C of highest router probability (ties:
 * the lower token index), WEFT_MOE_DROP_POSITION the C first tokens. A
 * dropped assignment adds nothing to y_t and the kept ones keep their
 * weights (no second renormalisation); a token that loses every slot gets
 * y_t = 0, so the block's residual carries it alone. capacity_factor <= 0:
 * no capacity, nothing is dropped. Routing and dropping look at this
 * rank's T tokens only, so an EP group of P ranks computes exactly what P
 * one-rank calls on the same tokens compute.
 *
 * Routing groups. When G ranks split one call's tokens between them
 * (context parallelism: each holds T of a sequence's G T positions),
 * weft_moe_route_group makes them route as one call of G T tokens would:
 * C = ceil(capacity_factor * G T * k / E), and an over-full expert keeps
 * the C assignments the rule picks among the whole group's, ties (and the
 * position rule) in the group's token order, which the caller gives as
 * each local token's index in it. Every rank of the group must call with
 * the same T.
 *
 * Load-balancing loss (Switch Transformer): aux = aux_coef * E * sum_i
 * f_i P_i, with f_i = (this rank's assignments to expert i before
 * dropping) / (T k) and P_i = the mean of p_i over the T tokens; f is a
 * constant for the gradient. Uniform routing gives aux = aux_coef. The
 * forward returns aux; the backward adds its gradient (d aux / d aux = 1),
 * so the caller adds aux to its loss. In a routing group f_i counts the
 * whole group's assignments (G T k of them) while P_i stays this rank's
 * mean, so the group's mean of the G ranks' aux is the loss of the one
 * call, as the mean of their per-token losses is its token loss.
 *
 * Expert parallelism. Rank j of the EP group (size P, which divides E)
 * holds experts j*E/P .. (j+1)*E/P - 1. A forward exchanges the kept
 * assignments' counts (ncclAlltoAll of E/P ints per peer), sends each
 * token row to its experts' ranks (dispatch), runs the local experts, and
 * sends the outputs back (combine). With a capacity every peer block is
 * E/P * min(C, T) rows, padded, and one ncclAlltoAll moves it; without one
 * the counts are uneven and grouped ncclSend/ncclRecv move exactly the
 * kept rows. The backward moves the output gradients the dispatch's way
 * and the input gradients the combine's way. A rank whose experts receive
 * no rows still takes part in every exchange, so no rank waits.
 *
 * Tensor parallelism inside the experts: with a TP group each expert is
 * split like Megatron's MLP (W1, b1 by columns, W2 by rows, b2 replicated);
 * every TP rank routes the same tokens the same way (the router is
 * replicated), and one all-reduce over the group completes all the local
 * experts' outputs (forward) and input gradients (backward) at once.
 * Sequence parallelism is not supported inside the layer (weft_moe_init
 * refuses a tp with sequence_parallel set): a caller holding sequence
 * shards all-gathers the rows over the TP group, calls the layer on all T
 * tokens with a tp whose sequence_parallel is cleared, and keeps its rows
 * of y (backward: gathers dy, keeps its rows of dx), as the trainer's MoE
 * blocks do (trainer/model_moe.c).
 *
 * Gradients are *added*: the router's is this rank's tokens' (data
 * parallel like every non-expert weight); an expert's is the sum over
 * every token of the EP group routed to it, times expert_grad_scale.
 * Averaging over the expert-data-parallel group (the DP/EP ranks holding
 * the same experts) then gives the whole data-parallel average when the
 * scale is 1/P.
 */
#ifndef WEFT_PAR_MOE_H
#define WEFT_PAR_MOE_H

#include <stddef.h>

#include "nccl.h"
#include "tp.h"

typedef enum {
  WEFT_MOE_DROP_PROBS = 0,     // keep the highest router probabilities
  WEFT_MOE_DROP_POSITION = 1,  // keep the first tokens
} weft_moe_drop_t;

typedef struct {
  int hidden, ffn;          // model width, each expert's inner width
  int experts, topk;        // E >= 1, 1 <= k <= E
  float capacity_factor;    // <= 0: no capacity (nothing dropped)
  float aux_coef;           // load-balancing loss coefficient (0: none)
  int renormalize;          // 1: weights renormalised over the top k (Mixtral); 0: the probabilities
  weft_moe_drop_t drop;     // which assignments an over-full expert drops
} weft_moe_config_t;

typedef struct {
  weft_moe_config_t cfg;
  weft_tp_t tp;             // experts split over this group (size 1: whole experts)
  ncclComm_t ep_comm;       // borrowed; NULL: every expert on this rank
  int ep_size, ep_rank;
  int local_experts;        // E / ep_size
  float expert_grad_scale;  // multiplies the experts' weight gradients (1 after init)
  ncclComm_t route_comm;    // borrowed; NULL: this rank's tokens are a whole call
  int route_size;           // G, ranks splitting a call's tokens (1 after init)
  int route_tokens;         // T of every call in a routing group
  const int *route_index;   // borrowed, route_tokens entries: each token's index in the group's order
} weft_moe_t;

// What a forward did on this rank (weft_moe_forward's optional `stats`).
typedef struct {
  int capacity;   // C, or -1 without a capacity
  int kept, dropped;  // this rank's assignments (kept + dropped = T k)
  int rows;       // rows this rank's experts computed
  int *routed;    // optional, E entries: this rank's assignments per expert before dropping
  int *received;  // optional, local_experts entries: rows each local expert computed
  int *slots;     // optional, tokens * k entries: slot i of token t (at t*k+i) holds its expert e,
                  // or -1 - e when the capacity dropped it
} weft_moe_stats_t;

// Checks the config against the groups (E divisible by the EP size, ffn by
// the TP size, 1 <= k <= E, no sequence parallelism: see above) and fills *moe.
ncclResult_t weft_moe_init(weft_moe_t *moe, const weft_moe_config_t *cfg, const weft_tp_t *tp, ncclComm_t ep_comm);

// Routes every later call as one call over the group's tokens (see the
// header). `index` (tokens entries, a permutation's share: the values of
// the G ranks together are 0 .. G tokens - 1) stays the caller's and must
// outlive moe. comm NULL or of one rank: back to this rank alone.
ncclResult_t weft_moe_route_group(weft_moe_t *moe, ncclComm_t comm, int tokens, const int *index);

size_t weft_moe_router_nparams(const weft_moe_t *moe);  // h * E
size_t weft_moe_expert_nparams(const weft_moe_t *moe);  // one expert's part on this TP rank
size_t weft_moe_expert_full_nparams(const weft_moe_t *moe);  // one whole expert
// C for a call of `tokens` tokens (on each rank of a routing group), or -1
// without a capacity.
int weft_moe_capacity(const weft_moe_t *moe, int tokens);
// Floats of activation memory a call of `tokens` tokens needs (saved in
// forward for backward): enough for the worst routing.
size_t weft_moe_nacts(const weft_moe_t *moe, int tokens);

// One expert's part on this TP rank from its full parameters, and back:
// unshard writes the local part into its places in `full`; b2, which every
// TP rank holds, only when `replicated` is set.
ncclResult_t weft_moe_expert_shard(const weft_moe_t *moe, const float *full, float *local);
ncclResult_t weft_moe_expert_unshard(const weft_moe_t *moe, const float *local, float *full, int replicated);

// router: h x E. experts: the local_experts experts' parts, one after
// another. x, y: tokens x h. *aux (may be NULL) receives the load-
// balancing loss. Collective over the EP and TP groups.
ncclResult_t weft_moe_forward(const weft_moe_t *moe, const float *router, const float *experts, int tokens,
                              const float *x, float *y, float *acts, float *aux, weft_moe_stats_t *stats);
// Backward of the last forward on these acts: adds the router's and the
// local experts' gradients into grouter, gexperts and writes dx.
ncclResult_t weft_moe_backward(const weft_moe_t *moe, const float *router, const float *experts, float *grouter,
                               float *gexperts, int tokens, const float *dy, float *dx, float *acts);

// ---- Expert-parallel groups (ep_group.c) ---------------------------------
// The data-parallel group (size D) split in two, as Megatron-Core does with
// EP dividing DP: data-parallel rank d is rank d % ep of the EP group
// d / ep (consecutive data-parallel ranks), and a rank of the expert-data-
// parallel group d % ep: the ranks holding the same experts. replica_comm
// is every rank holding the same parameters (DP x CP, a multiple of D, in
// which each rank knows its data-parallel rank); the EDP group is its
// ranks at place d % ep (replicas / ep of them, in replica order). NULL:
// dp_comm itself (D/ep ranks, data-parallel rank d at d / ep).
typedef struct {
  ncclComm_t ep_comm, edp_comm;  // owned
  int ep_size, ep_rank, edp_size, edp_rank;
} weft_ep_groups_t;

// Collective over replica_comm. Fails (ncclInvalidArgument, with a message)
// when ep < 1 or ep does not divide the group's size.
ncclResult_t weft_ep_groups_create(ncclComm_t dp_comm, ncclComm_t replica_comm, int ep, weft_ep_groups_t *groups);
ncclResult_t weft_ep_groups_destroy(weft_ep_groups_t *groups);

#endif  // WEFT_PAR_MOE_H
