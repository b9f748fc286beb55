/*
 * train_moe.c — mixture of experts in the trainer (see train_moe.h): the
 * EP/EDP groups, the experts' engine over the EDP group, the store that
 * sends expert layers to it and everything else to the dense store, and
 * the experts' part of a step, a checkpoint and a resume.
 */
#include "train_moe.h"

#include <stdlib.h>
#include <string.h>

#include "model_moe.h"
#include "moe.h"
#include "par_util.h"

struct train_moe {
  weft_ep_groups_t groups;
  weft_dp_t *edp;      // this stage's experts; NULL when the stage has no MoE block
  int nmoe;            // MoE blocks in the model
  int *elocal;         // MoE block j -> its layer in edp, -1 on another stage
  size_t layer_n;      // one MoE block's experts on this rank
  size_t stage_n;      // all of this stage's
  float *norm_weight;  // stage_n: 1/tp for b2, else 1
  gpt_store_t dense;   // where every other layer goes
};

ncclResult_t train_moe_check(const train_cfg_t *c) {
  const gpt_dims_t *d = &c->dims;
  if (c->ep < 1) PAR_INVALID("--ep %d: must be at least 1", c->ep);
  if (d->experts == 0) {
    if (c->ep > 1) PAR_INVALID("--ep %d needs --experts E: expert parallelism splits the experts of MoE blocks", c->ep);
    return ncclSuccess;
  }
  if (d->topk < 1 || d->topk > d->experts) PAR_INVALID("--topk %d is above --experts %d", d->topk, d->experts);
  if (c->dp % c->ep != 0)
    PAR_INVALID("--ep %d does not divide --dp %d: the expert-parallel groups split the data-parallel group", c->ep,
                c->dp);
  if (d->experts % c->ep != 0)
    PAR_INVALID("--ep %d does not divide --experts %d: each expert-parallel rank holds experts/ep of them", c->ep,
                d->experts);
  if (d->ffn % c->tp != 0)
    PAR_INVALID("--ffn %d is not a multiple of --tp %d (experts are split over TP like the MLP)", d->ffn, c->tp);
  return ncclSuccess;
}

ncclResult_t train_moe_groups(trainer_t *t) {
  if (t->cfg.dims.experts == 0) return ncclSuccess;
  if ((t->moe = calloc(1, sizeof(*t->moe))) == NULL) return weft_par_error(ncclSystemError, "out of memory");
  return weft_ep_groups_create(t->mesh->dp_comm, t->mesh->dp_cp_comm, t->cfg.ep, &t->moe->groups);
}

ncclComm_t train_moe_ep_comm(const trainer_t *t) { return t->moe != NULL ? t->moe->groups.ep_comm : NULL; }

// The expert engine's layer of model layer l: -2 for a dense layer, -1
// for experts this stage does not hold.
static int expert_slot(const trainer_t *t, int l) {
  int j = l - (t->cfg.dims.layers + 2);
  if (j < 0) return -2;
  return j < t->moe->nmoe && t->moe->edp != NULL ? t->moe->elocal[j] : -1;
}

static ncclResult_t no_experts(int l) { PAR_INVALID("model layer %d: experts this stage does not hold", l); }

static ncclResult_t st_params(void *ctx, int l, int next, float **p) {
  trainer_t *t = ctx;
  int e = expert_slot(t, l);
  if (e == -2) return t->moe->dense.params(t->moe->dense.ctx, l, next, p);
  return e < 0 ? no_experts(l) : weft_dp_layer_params(t->moe->edp, e, -1, (void **)p);
}

static ncclResult_t st_release(void *ctx, int l) {
  trainer_t *t = ctx;
  int e = expert_slot(t, l);
  if (e == -2) return t->moe->dense.release(t->moe->dense.ctx, l);
  return e < 0 ? no_experts(l) : weft_dp_layer_release(t->moe->edp, e);
}

static ncclResult_t st_grads(void *ctx, int l, float **g) {
  trainer_t *t = ctx;
  int e = expert_slot(t, l);
  if (e == -2) return t->moe->dense.grads(t->moe->dense.ctx, l, g);
  return e < 0 ? no_experts(l) : weft_dp_layer_grads(t->moe->edp, e, (void **)g);
}

static ncclResult_t st_done(void *ctx, int l) {
  trainer_t *t = ctx;
  int e = expert_slot(t, l);
  if (e == -2) return t->moe->dense.grads_done(t->moe->dense.ctx, l);
  if (e >= 0 && t->defer_done) return ncclSuccess;  // interleaved: not the layer's last micro-batch (train_vpp.c)
  return e < 0 ? no_experts(l) : weft_dp_layer_grads_done(t->moe->edp, e);
}

ncclResult_t train_moe_engine(trainer_t *t) {
  struct train_moe *e = t->moe;
  if (e == NULL) return ncclSuccess;
  const gpt_dims_t *d = &t->cfg.dims;
  e->nmoe = gpt_moe_blocks(d);
  e->layer_n = gpt_expert_layer_size(t->model);
  e->elocal = malloc((size_t)e->nmoe * sizeof(int));
  if (e->elocal == NULL) return weft_par_error(ncclSystemError, "out of memory");
  int nl = 0;  // the MoE blocks of every chunk this stage holds, in block order
  for (int l = 0, j = 0; l < d->layers; l++)
    if (gpt_is_moe(d, l)) e->elocal[j++] = train_vpp_holds(t, l) ? nl++ : -1;
  for (int i = 0; i < t->slots * t->chunks; i++)
    gpt_moe_set_grad_scale(t->models[i], 1.0f / (float)e->groups.ep_size);
  e->dense = t->store;
  t->store = (gpt_store_t){st_params, st_release, st_grads, st_done, t};
  if (nl == 0) return ncclSuccess;
  e->stage_n = (size_t)nl * e->layer_n;
  size_t *sizes = malloc((size_t)nl * sizeof(size_t));
  e->norm_weight = malloc(e->stage_n * sizeof(float));
  if (sizes == NULL || e->norm_weight == NULL) {
    free(sizes);
    return weft_par_error(ncclSystemError, "out of memory");
  }
  for (int i = 0; i < nl; i++) {
    sizes[i] = e->layer_n;
    gpt_expert_norm_weights(t->model, e->norm_weight + (size_t)i * e->layer_n);
  }
  const train_cfg_t *c = &t->cfg;
  weft_dp_config_t dc = {(weft_dp_stage_t)c->zero, WEFT_DP_FP32, WEFT_DP_AVG_NCCL, c->grad_accum, nl, sizes};
  ncclResult_t res = weft_dp_create(e->groups.edp_comm, &dc, &e->edp);
  free(sizes);
  return res;
}

void train_moe_destroy(trainer_t *t) {
  struct train_moe *e = t->moe;
  if (e == NULL) return;
  weft_dp_destroy(e->edp);
  weft_ep_groups_destroy(&e->groups);
  free(e->elocal), free(e->norm_weight), free(e);
  t->moe = NULL;
}

ncclResult_t train_moe_load(trainer_t *t, const float *params, const float *m, const float *v, long adam_steps) {
  struct train_moe *e = t->moe;
  if (e == NULL || e->edp == NULL) return ncclSuccess;
  size_t full_layer = gpt_full_layer_size(&t->cfg.dims, t->cfg.dims.layers + 2), n = e->stage_n;
  float *mine = malloc(3 * n * sizeof(float));
  if (mine == NULL) return weft_par_error(ncclSystemError, "out of memory for %zu expert parameters", n);
  const float *src[3] = {params, m, v};
  ncclResult_t res = ncclSuccess;
  for (int k = 0; k < 3 && res == ncclSuccess; k++)
    for (int j = 0; src[k] != NULL && j < e->nmoe && res == ncclSuccess; j++)
      if (e->elocal[j] >= 0)
        res = gpt_expert_shard(t->model, src[k] + (size_t)j * full_layer, mine + k * n + e->elocal[j] * e->layer_n);
  if (res == ncclSuccess) res = weft_dp_load_params(e->edp, mine);
  if (res == ncclSuccess && m != NULL && v != NULL) res = weft_dp_load_optim(e->edp, mine + n, mine + 2 * n, adam_steps);
  free(mine);
  return res;
}

// Each EDP group's first rank places its experts (TP parts where they go,
// b2 from TP rank 0 only) into zeros; one sum onto world rank 0 adds each
// value to zeros only, so it arrives exact.
ncclResult_t train_moe_gather(trainer_t *t, float **out) {
  *out = NULL;
  struct train_moe *e = t->moe;
  if (e == NULL) return ncclSuccess;
  const gpt_dims_t *d = &t->cfg.dims;
  size_t ne = gpt_moe_full_count(d), full_layer = gpt_full_layer_size(d, d->layers + 2), n = e->stage_n;
  float *full = calloc(3 * ne, sizeof(float)), *mine = e->edp != NULL ? malloc(3 * n * sizeof(float)) : NULL;
  int bad = full == NULL || (e->edp != NULL && mine == NULL);
  ncclResult_t res = ncclAllReduce(&bad, &bad, 1, ncclInt32, ncclMax, t->mesh->world, NULL);
  if (res == ncclSuccess && bad) res = weft_par_error(ncclSystemError, "out of memory gathering the experts");
  long steps = 0;
  if (res == ncclSuccess && e->edp != NULL) res = weft_dp_read_params(e->edp, mine);
  if (res == ncclSuccess && e->edp != NULL) res = weft_dp_read_optim(e->edp, mine + n, mine + 2 * n, &steps);
  int owner = e->edp != NULL && e->groups.edp_rank == 0;
  for (int k = 0; k < 3 && owner && res == ncclSuccess; k++)
    for (int j = 0; j < e->nmoe && res == ncclSuccess; j++)
      if (e->elocal[j] >= 0)
        res = gpt_expert_unshard(t->model, mine + k * n + e->elocal[j] * e->layer_n,
                                 full + k * ne + (size_t)j * full_layer, t->mesh->tp_rank == 0);
  if (res == ncclSuccess) res = ncclReduce(full, full, 3 * ne, ncclFloat32, ncclSum, 0, t->mesh->world, NULL);
  free(mine);
  if (res == ncclSuccess && t->mesh->rank == 0)
    *out = full;
  else
    free(full);
  return res;
}

ncclResult_t train_moe_begin_micro(trainer_t *t, int micro) {
  return t->moe != NULL && t->moe->edp != NULL ? weft_dp_begin_micro(t->moe->edp, micro) : ncclSuccess;
}

ncclResult_t train_moe_grad_sumsq(trainer_t *t, double *sumsq) {
  if (t->moe == NULL || t->moe->edp == NULL) return ncclSuccess;
  return weft_dp_grad_sumsq(t->moe->edp, t->moe->norm_weight, sumsq);
}

ncclResult_t train_moe_scale_grads(trainer_t *t, float scale) {
  return t->moe != NULL && t->moe->edp != NULL ? weft_dp_scale_grads(t->moe->edp, scale) : ncclSuccess;
}

ncclResult_t train_moe_step(trainer_t *t, const weft_adamw_t *opt, float *aux) {
  *aux = -1;
  if (t->moe == NULL) return ncclSuccess;
  if (t->moe->edp != NULL) PAR_CHECK(weft_dp_step(t->moe->edp, opt));
  double sum = 0;
  for (int i = 0; i < t->slots * t->chunks; i++) sum += gpt_moe_aux_take(t->models[i]);
  sum /= t->cfg.grad_accum;
  if (t->cfg.pp > 1) PAR_CHECK(ncclAllReduce(&sum, &sum, 1, ncclFloat64, ncclSum, t->mesh->pp_comm, NULL));
  PAR_CHECK(ncclAllReduce(&sum, &sum, 1, ncclFloat64, ncclAvg, t->mesh->dp_cp_comm, NULL));  // CP: the group's loss
  *aux = (float)sum;
  return ncclSuccess;
}
