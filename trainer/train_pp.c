/*
 * train_pp.c — pipeline parallelism in the trainer (--pp P): the blocks
 * this stage owns (balanced by weft_pp_balance), the parameter store that
 * maps the model's layers onto the stage's data-parallel engine, the step
 * over parallel/pp.h's schedule, and the forward-only pipeline the
 * evaluation runs.
 *
 * The tied embedding (layer 0: wte | wpe) lives on the first and the last
 * stage, initialised alike. For pp > 1 both stages add its gradient into
 * a private buffer over the step's micro-batches; after the schedule the
 * two buffers are summed over emb_comm and handed to the engine once, so
 * both copies see the same gradient and get the same update. The last
 * stage's copy is weighted 0 in the gradient norm. With pp = 1 the store
 * passes straight through and nothing changes.
 */
#include <stdlib.h>
#include <string.h>

#include "par_util.h"
#include "pp.h"
#include "train_internal.h"
#include "train_moe.h"

static int nlayers(const trainer_t *t) { return t->cfg.dims.layers + 2; }

static int map(const trainer_t *t, int l) { return l >= 0 && l < nlayers(t) ? t->local[l] : -1; }

static ncclResult_t st_params(void *ctx, int l, int next, float **p) {
  trainer_t *t = ctx;
  return weft_dp_layer_params(t->dp, map(t, l), map(t, next), (void **)p);
}

static ncclResult_t st_release(void *ctx, int l) {
  trainer_t *t = ctx;
  return weft_dp_layer_release(t->dp, map(t, l));
}

static ncclResult_t st_grads(void *ctx, int l, float **g) {
  trainer_t *t = ctx;
  if (l == 0 && t->emb_acc != NULL) {
    *g = t->emb_acc;
    return ncclSuccess;
  }
  return weft_dp_layer_grads(t->dp, map(t, l), (void **)g);
}

static ncclResult_t st_done(void *ctx, int l) {
  trainer_t *t = ctx;
  if (l == 0 && t->emb_acc != NULL) return ncclSuccess;  // handed over after the schedule
  if (t->defer_done) return ncclSuccess;                 // interleaved: not the layer's last micro-batch (train_vpp.c)
  return weft_dp_layer_grads_done(t->dp, map(t, l));
}

gpt_store_t train_pp_store(trainer_t *t) { return (gpt_store_t){st_params, st_release, st_grads, st_done, t}; }

ncclResult_t train_pp_plan(trainer_t *t, size_t **sizes, int *nlocal) {
  int P = t->cfg.pp, s = t->mesh->pp_rank, L = t->cfg.dims.layers, nl = L + 2;
  double *cost = malloc((size_t)L * sizeof(double));
  int *first = malloc(((size_t)P + 1) * sizeof(int));
  t->local = malloc((size_t)nl * sizeof(int));
  *sizes = malloc((size_t)nl * sizeof(size_t));
  ncclResult_t res = ncclSuccess;
  if (cost == NULL || first == NULL || t->local == NULL || *sizes == NULL) {
    res = weft_par_error(ncclSystemError, "out of memory");
    goto out;
  }
  for (int l = 0; l < L; l++) cost[l] = 1.0;  // identical blocks
  PAR_CHECK_GOTO(weft_pp_balance(cost, L, P, first), res, out);
  t->stage = (gpt_stage_t){first[s], first[s + 1], s == 0, s == P - 1, t->cfg.recompute};
  PAR_CHECK_GOTO(train_vpp_plan(t), res, out);  // its model chunks (interleaved: V runs of the blocks)
  *nlocal = 0;
  for (int l = 0; l < nl; l++) {
    int mine = l == 0 ? t->stage.embed || t->stage.head : l == L + 1 ? t->stage.head : train_vpp_holds(t, l - 1);
    t->local[l] = mine ? (*nlocal)++ : -1;
  }
  int tcd = t->mesh->tp_rank + t->cfg.tp * (t->mesh->cp_rank + t->cfg.cp * t->mesh->dp_rank);
  int color = P > 1 && (t->stage.embed || t->stage.head) ? tcd : NCCL_SPLIT_NOCOLOR;
  if (P > 1) PAR_CHECK_GOTO(ncclCommSplit(t->mesh->world, color, s, &t->emb_comm, NULL), res, out);
out:
  free(cost), free(first);
  return res;
}

void train_pp_select(const trainer_t *t, const float *all, float *mine) {
  for (int l = 0; l < nlayers(t); l++) {
    size_t n = gpt_layer_size(t->model, l);
    if (t->local[l] >= 0) memcpy(mine, all, n * sizeof(float)), mine += n;
    all += n;
  }
}

size_t train_pp_stage_count(const trainer_t *t) {
  size_t n = 0;
  for (int l = 0; l < nlayers(t); l++)
    if (t->local[l] >= 0) n += gpt_layer_size(t->model, l);
  return n;
}

// The inverse of train_pp_select over the pipeline group: every stage's
// `count` vectors (each the stage's layers, `stage_n` floats apart) become
// `count` vectors of all layers (`all_n` apart) on every stage. A layer held
// by two stages (the tied embedding) is taken from the first.
ncclResult_t train_pp_gather(trainer_t *t, const float *mine, size_t stage_n, int count, float *all, size_t all_n) {
  int pp = t->cfg.pp, nl = nlayers(t);
  ncclResult_t res = ncclSystemError;
  int *owns = malloc((size_t)pp * nl * sizeof(int));
  float *wide = malloc((size_t)count * all_n * sizeof(float));
  float *every = malloc((size_t)pp * count * all_n * sizeof(float));
  if (owns == NULL || wide == NULL || every == NULL) {
    weft_par_error(res, "out of memory gathering %d pipeline stages", pp);
    goto out;
  }
  int *mine_owns = owns + (size_t)t->mesh->pp_rank * nl;  // in place: the pipeline rank is the stage
  for (int l = 0; l < nl; l++) mine_owns[l] = t->local[l] >= 0;
  memset(wide, 0, (size_t)count * all_n * sizeof(float));
  for (int k = 0; k < count; k++) {  // this stage's layers in their places
    const float *src = mine + (size_t)k * stage_n;
    float *dst = wide + (size_t)k * all_n;
    for (int l = 0; l < nl; l++) {
      size_t n = gpt_layer_size(t->model, l);
      if (mine_owns[l]) memcpy(dst, src, n * sizeof(float)), src += n;
      dst += n;
    }
  }
  PAR_CHECK_GOTO(ncclAllGather(mine_owns, owns, (size_t)nl, ncclInt32, t->mesh->pp_comm, NULL), res, out);
  PAR_CHECK_GOTO(ncclAllGather(wide, every, (size_t)count * all_n, ncclFloat32, t->mesh->pp_comm, NULL), res, out);
  size_t off = 0;
  for (int l = 0; l < nl; l++) {
    size_t n = gpt_layer_size(t->model, l);
    int s = 0;
    while (s < pp - 1 && !owns[(size_t)s * nl + l]) s++;
    for (int k = 0; k < count; k++)
      memcpy(all + (size_t)k * all_n + off, every + ((size_t)s * count + k) * all_n + off, n * sizeof(float));
    off += n;
  }
  res = ncclSuccess;
out:
  free(owns), free(wide), free(every);
  return res;
}

static ncclResult_t stage_forward(void *user, int micro, const float *in, float *out) {
  trainer_t *t = user;
  float loss = 0;
  trainer_fill_batch(t, DATA_TRAIN, t->batch_first + (long)micro * t->cfg.batch);
  PAR_CHECK(gpt_forward_stage(t->models[micro % t->slots], &t->store, t->ids, t->targets, in, out, &loss));
  if (t->stage.head) t->loss_sum += loss;
  return ncclSuccess;
}

static ncclResult_t stage_backward(void *user, int micro, const float *dout, float *din) {
  trainer_t *t = user;
  PAR_CHECK(weft_dp_begin_micro(t->dp, micro));
  PAR_CHECK(train_moe_begin_micro(t, micro));
  return gpt_backward_stage(t->models[micro % t->slots], &t->store, dout, din);
}

ncclResult_t train_pp_step(trainer_t *t, long first, double *loss_sum) {
  size_t act = (size_t)gpt_rows(t->model) * t->cfg.dims.hidden, emb = gpt_layer_size(t->model, 0);  // CP, SP: this rank's rows
  t->batch_first = first;
  t->loss_sum = 0;
  if (t->emb_acc != NULL) memset(t->emb_acc, 0, emb * sizeof(float));
  weft_pp_stage_t fns = {stage_forward, stage_backward, t};
  if (t->cfg.schedule == WEFT_PP_INTERLEAVED)
    PAR_CHECK(train_vpp_run(t, act));
  else
    PAR_CHECK(weft_pp_run(t->mesh->pp_comm, (weft_pp_kind_t)t->cfg.schedule, t->cfg.grad_accum, act, &fns, NULL));
  if (t->emb_acc != NULL) {  // the tied weight: first + last stage, then one data-parallel reduction
    float *g;
    PAR_CHECK(ncclAllReduce(t->emb_acc, t->emb_acc, emb, ncclFloat32, ncclSum, t->emb_comm, NULL));
    PAR_CHECK(weft_dp_layer_grads(t->dp, t->local[0], (void **)&g));
    for (size_t i = 0; i < emb; i++) g[i] += t->emb_acc[i];
    PAR_CHECK(weft_dp_layer_grads_done(t->dp, t->local[0]));
  }
  PAR_CHECK(ncclAllReduce(&t->loss_sum, &t->loss_sum, 1, ncclFloat64, ncclSum, t->mesh->pp_comm, NULL));
  *loss_sum = t->loss_sum;
  return ncclSuccess;
}

ncclResult_t train_forward(trainer_t *t, const int *targets, float *loss) {
  if (t->cfg.pp == 1) return gpt_forward(t->model, &t->store, t->ids, targets, loss);
  if (t->cfg.schedule == WEFT_PP_INTERLEAVED) return train_vpp_forward(t, targets, loss);
  size_t n = (size_t)gpt_rows(t->model) * t->cfg.dims.hidden;
  int s = t->mesh->pp_rank;
  float l = 0;
  ncclComm_t pp = t->mesh->pp_comm;
  if (!t->stage.embed) PAR_CHECK(ncclRecv(t->act, n, ncclFloat32, s - 1, pp, NULL));
  PAR_CHECK(gpt_forward_stage(t->model, &t->store, t->ids, targets, t->act, t->act, &l));
  if (!t->stage.head) PAR_CHECK(ncclSend(t->act, n, ncclFloat32, s + 1, pp, NULL));
  if (targets != NULL) {
    PAR_CHECK(ncclAllReduce(&l, &l, 1, ncclFloat32, ncclSum, pp, NULL));  // from the last stage
    *loss = l;
  }
  return ncclSuccess;
}

ncclResult_t train_argmax(trainer_t *t, int *next) {
  if (t->stage.head) PAR_CHECK(gpt_argmax(t->model, next));
  if (t->cfg.pp > 1)
    PAR_CHECK(ncclBroadcast(next, next, (size_t)train_tokens(t), ncclInt32, t->cfg.pp - 1, t->mesh->pp_comm, NULL));
  return train_cp_gather(t, next);
}
