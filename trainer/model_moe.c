/*
 * model_moe.c — the GPT's mixture-of-experts blocks (see model_moe.h):
 * their shapes, the experts' initialisation and sharding, and the MoE
 * MLP's forward and backward between the block's second LayerNorm and its
 * residual. The router lives in the block's layer; the experts in their
 * own layer, asked of the store around each pass.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

int gpt_is_moe(const gpt_dims_t *d, int block) {
  return d->experts > 0 && block >= 0 && block < d->layers && block % (d->moe_every > 0 ? d->moe_every : 1) == 0;
}

int gpt_moe_blocks(const gpt_dims_t *d) {
  int n = 0;
  for (int l = 0; l < d->layers; l++) n += gpt_is_moe(d, l);
  return n;
}

int gpt_expert_layer(const gpt_dims_t *d, int block) {
  if (!gpt_is_moe(d, block)) return -1;
  int j = 0;
  for (int l = 0; l < block; l++) j += gpt_is_moe(d, l);
  return d->layers + 2 + j;
}

static size_t expert_full(const gpt_dims_t *d) {
  size_t h = (size_t)d->hidden, f = (size_t)d->ffn;
  return h * f + f + f * h + h;
}

size_t gpt_moe_full_count(const gpt_dims_t *d) {
  return (size_t)gpt_moe_blocks(d) * (size_t)d->experts * expert_full(d);
}

size_t gpt_expert_layer_size(const gpt_t *m) {
  return m->d.experts > 0 ? (size_t)m->moe.local_experts * weft_moe_expert_nparams(&m->moe) : 0;
}

double gpt_moe_flops_delta(const gpt_dims_t *d) {
  double h = d->hidden, f = d->ffn, k = d->topk;
  return gpt_moe_blocks(d) * (h * d->experts + (k - 1) * 2 * h * f);
}

// Sequence parallelism: the block's rows are this rank's T/tp. The MoE MLP
// all-gathers them over TP (Megatron-Core's all-gather token dispatcher),
// so every TP rank routes the same T tokens as without SP and the layer's
// TP all-reduce completes all T outputs; the rank keeps its own rows. In
// backward it gathers dy the same way and keeps its rows of dx. The router
// and aux loss then see every token on every TP rank, as without SP: the
// router's gradient is whole and identical over TP, like a replicated
// weight's after weft_tp's SP all-reduce. The gathered input and the whole
// output (dy and dx in backward) sit after the layer's own activations.
static int gathers_rows(const gpt_t *m) { return m->tp.sequence_parallel && m->tp.size > 1; }

ncclResult_t gpt_moe_setup(gpt_t *m, ncclComm_t ep_comm) {
  const gpt_dims_t *d = &m->d;
  if (d->experts <= 0) {
    if (ep_comm != NULL) PAR_INVALID("gpt: an expert-parallel group without experts");
    return ncclSuccess;
  }
  if (d->moe_every < 1) PAR_INVALID("gpt: moe_every=%d must be at least 1", d->moe_every);
  weft_moe_config_t c = {d->hidden, d->ffn, d->experts, d->topk, d->capacity_factor, d->aux_coef,
                         d->topk > 1, WEFT_MOE_DROP_PROBS};
  weft_tp_t whole_rows = m->tp;  // under SP the MoE MLP gathers all T rows first (gpt_moe_forward)
  whole_rows.sequence_parallel = 0;
  PAR_CHECK(weft_moe_init(&m->moe, &c, &whole_rows, ep_comm));
  if (m->cp.size > 1) {  // the CP group's ranks route one call's tokens: each row's place among them
    m->moe_route_index = malloc((size_t)m->T * sizeof(int));
    if (m->moe_route_index == NULL) return weft_par_error(ncclSystemError, "gpt: out of memory");
    for (int r = 0; r < m->T; r++) m->moe_route_index[r] = gpt_row_position(m, r) * m->batch + r % m->batch;
    PAR_CHECK(weft_moe_route_group(&m->moe, m->cp.comm, m->T, m->moe_route_index));
  }
  m->moe_block_np = m->mlp_off + weft_moe_router_nparams(&m->moe);
  size_t na = weft_moe_nacts(&m->moe, m->T) + (gathers_rows(m) ? 2 * (size_t)m->T * d->hidden : 0);
  if (na > m->mlp_na) m->mlp_na = na;  // a block's MLP slot holds either
  m->moe_aux = calloc((size_t)(m->stage.last - m->stage.first), sizeof(float));
  if (m->moe_aux == NULL) return weft_par_error(ncclSystemError, "gpt: out of memory");
  return ncclSuccess;
}

int gpt_ep_rank(const gpt_t *m) { return m->d.experts > 0 ? m->moe.ep_rank : 0; }
int gpt_ep_size(const gpt_t *m) { return m->d.experts > 0 ? m->moe.ep_size : 1; }
void gpt_moe_set_grad_scale(gpt_t *m, float scale) { m->moe.expert_grad_scale = scale; }
int gpt_moe_capacity(const gpt_t *m) { return m->d.experts > 0 ? weft_moe_capacity(&m->moe, m->T) : -1; }

// Expert e of MoE block l: its own streams (2^32 above the dense ones).
void gpt_moe_init_full(const gpt_dims_t *d, unsigned long long seed, float *experts) {
  size_t h = (size_t)d->hidden, f = (size_t)d->ffn, n = expert_full(d);
  float std = 0.02f, resid = 0.02f / sqrtf(2.0f * (float)d->layers);
  for (int l = 0; l < d->layers; l++) {
    if (!gpt_is_moe(d, l)) continue;
    for (int e = 0; e < d->experts; e++, experts += n) {
      unsigned long long s = (1ull << 32) + 1024ull * (unsigned long long)l + 4ull * (unsigned long long)e;
      memset(experts, 0, n * sizeof(float));
      gpt_fill_normal(experts, h * f, std, seed, s + 1);                  // W1
      gpt_fill_normal(experts + h * f + f, f * h, resid, seed, s + 2);    // W2
    }
  }
}

ncclResult_t gpt_expert_shard(const gpt_t *m, const float *full, float *local) {
  size_t nf = expert_full(&m->d), nl = weft_moe_expert_nparams(&m->moe);
  for (int l = 0; l < m->moe.local_experts; l++)
    PAR_CHECK(weft_moe_expert_shard(&m->moe, full + ((size_t)m->moe.ep_rank * m->moe.local_experts + l) * nf,
                                    local + (size_t)l * nl));
  return ncclSuccess;
}

ncclResult_t gpt_expert_unshard(const gpt_t *m, const float *local, float *full, int replicated) {
  size_t nf = expert_full(&m->d), nl = weft_moe_expert_nparams(&m->moe);
  for (int l = 0; l < m->moe.local_experts; l++)
    PAR_CHECK(weft_moe_expert_unshard(&m->moe, local + (size_t)l * nl,
                                      full + ((size_t)m->moe.ep_rank * m->moe.local_experts + l) * nf, replicated));
  return ncclSuccess;
}

void gpt_expert_norm_weights(const gpt_t *m, float *w) {
  size_t h = (size_t)m->d.hidden, nl = weft_moe_expert_nparams(&m->moe);
  for (int l = 0; l < m->moe.local_experts; l++, w += nl)
    for (size_t i = 0; i < nl; i++) w[i] = i >= nl - h ? 1.0f / (float)m->tp.size : 1.0f;  // b2 last
}

float gpt_moe_last_aux(const gpt_t *m) {
  float s = 0;
  for (int l = 0; m->moe_aux != NULL && l < m->stage.last - m->stage.first; l++) s += m->moe_aux[l];
  return s;
}

double gpt_moe_aux_take(gpt_t *m) {
  double s = m->aux_total;
  m->aux_total = 0;
  return s;
}

// Under SP: the two T-row buffers after the layer's activations, the first
// filled with every rank's rows of `rows_in`.
static ncclResult_t gather_rows(gpt_t *m, const float *rows_in, float *acts, float **all_in, float **all_out) {
  size_t th = (size_t)m->T * m->d.hidden, rh = (size_t)m->rows * m->d.hidden;
  *all_in = acts + weft_moe_nacts(&m->moe, m->T);
  *all_out = *all_in + th;
  PAR_CHECK(ncclAllGather(rows_in, *all_in, rh, ncclFloat32, m->tp.comm, NULL));
  return ncclSuccess;
}

static void keep_rows(const gpt_t *m, const float *all, float *rows) {
  size_t rh = (size_t)m->rows * m->d.hidden;
  memcpy(rows, all + (size_t)m->tp.rank * rh, rh * sizeof(float));
}

ncclResult_t gpt_moe_forward(gpt_t *m, const gpt_store_t *st, int block, int slot, const float *router,
                             const float *x, float *y, float *acts) {
  int layer = gpt_expert_layer(&m->d, block);
  float *experts, *all_x = NULL, *all_y = NULL;
  if (gathers_rows(m)) PAR_CHECK(gather_rows(m, x, acts, &all_x, &all_y));
  PAR_CHECK(st->params(st->ctx, layer, -1, &experts));
  PAR_CHECK(weft_moe_forward(&m->moe, router, experts, m->T, all_x != NULL ? all_x : x, all_y != NULL ? all_y : y,
                             acts, &m->moe_aux[slot], NULL));
  if (all_y != NULL) keep_rows(m, all_y, y);
  return st->release(st->ctx, layer);
}

ncclResult_t gpt_moe_backward(gpt_t *m, const gpt_store_t *st, int block, int slot, const float *router,
                              float *grouter, const float *dy, float *dx, float *acts) {
  int layer = gpt_expert_layer(&m->d, block);
  float *experts, *gexperts, *all_dy = NULL, *all_dx = NULL;
  if (gathers_rows(m)) PAR_CHECK(gather_rows(m, dy, acts, &all_dy, &all_dx));
  PAR_CHECK(st->params(st->ctx, layer, -1, &experts));
  PAR_CHECK(st->grads(st->ctx, layer, &gexperts));
  PAR_CHECK(weft_moe_backward(&m->moe, router, experts, grouter, gexperts, m->T, all_dy != NULL ? all_dy : dy,
                              all_dx != NULL ? all_dx : dx, acts));
  if (all_dx != NULL) keep_rows(m, all_dx, dx);
  PAR_CHECK(st->grads_done(st->ctx, layer));
  PAR_CHECK(st->release(st->ctx, layer));
  m->aux_total += m->moe_aux[slot];  // the loss this backward's gradient belongs to
  return ncclSuccess;
}
