/*
 * model_internal.h — the GPT model's state, shared by model.c (layout,
 * init, memory) and model_pass.c (forward, backward, decoding).
 */
#ifndef WEFT_TRAINER_MODEL_INTERNAL_H
#define WEFT_TRAINER_MODEL_INTERNAL_H

#include "model.h"
#include "model_moe.h"
#include "moe.h"
#include "par_util.h"

struct gpt {
  gpt_dims_t d;
  gpt_stage_t stage;  // blocks first..last-1; activations are indexed from first
  int batch, T;       // sequences and tokens (this rank's rows) per micro-batch
  int rows;           // rows of the residual stream here: T, or T/tp (this rank's shard) under sequence parallelism
  weft_tp_t tp;
  weft_cp_t cp;       // context parallel (model_cp.c): size 1 when off; comm and stream borrowed
  int vrows;          // vocabulary rows this rank owns (ceil(V/tp))
  weft_tp_attn_dims_t ad;
  size_t attn_np, mlp_np, block_np;         // local parameters
  size_t attn_off, ln2_off, mlp_off;        // inside a block (ln1 at 0)
  size_t ln_na, attn_na, mlp_na;            // activation floats per layer
  int slots;          // blocks whose activations are kept: 1 with recompute, else the stage's
  size_t act_bytes;   // every activation buffer below, in bytes
  int *ids, *targets;
  int has_targets;
  float *x;           // residual stream entering this stage's block l (l = 0..nb), `rows` rows each
  float *xmid;        // after block l's attention (per slot, as the next three)
  float *ln_out;      // LN1, LN2 outputs of every block
  float *ln_acts;     // LN1, LN2 of every block, then the final one (at 2 slots)
  float *attn_acts, *mlp_acts;
  float *lnf_out;     // final LayerNorm of all T rows (gathered under SP; this rank's rows follow)
  float *logits;      // T x vrows, then dlogits T x vrows
  float *work;        // grad, tmp (T x h each), CE work (3T), argmax (2T x tp)
  float *dwte;        // the LM head's gradient of wte, added to layer 0
  // Mixture-of-experts blocks (model_moe.c): the layer, a MoE block's local
  // parameters (its router in the MLP's place), each slot's aux loss.
  weft_moe_t moe;
  size_t moe_block_np;
  float *moe_aux;
  int *moe_route_index;  // with CP: each row's token index in the one-rank call (weft_moe_route_group)
  double aux_total;   // aux losses of the backwards since gpt_moe_aux_take
};

// model_cp.c: the position of local row `row` in its sequence, and the
// attention layer (over the context-parallel ring when cp.size > 1).
int gpt_row_position(const gpt_t *m, int row);
size_t gpt_attn_nacts(const gpt_t *m);
ncclResult_t gpt_attn_forward(gpt_t *m, const float *p, const float *x, float *y, float *acts);
ncclResult_t gpt_attn_backward(gpt_t *m, const float *p, float *g, const float *dy, float *dx, float *acts);
// model.c's normal initialiser, for the experts (model_moe.c).
void gpt_fill_normal(float *w, size_t n, float std, unsigned long long seed, unsigned long long stream);
// model_moe.c, for model.c and model_pass.c: the MoE layer set up (the MLP
// activation slots widened to hold it), the experts' full initialisation,
// and the MoE MLP of block `block` with its activations in `slot`.
ncclResult_t gpt_moe_setup(gpt_t *m, ncclComm_t ep_comm);
void gpt_moe_init_full(const gpt_dims_t *d, unsigned long long seed, float *experts);
ncclResult_t gpt_moe_forward(gpt_t *m, const gpt_store_t *st, int block, int slot, const float *router,
                             const float *x, float *y, float *acts);
ncclResult_t gpt_moe_backward(gpt_t *m, const gpt_store_t *st, int block, int slot, const float *router,
                              float *grouter, const float *dy, float *dx, float *acts);

#endif  // WEFT_TRAINER_MODEL_INTERNAL_H
