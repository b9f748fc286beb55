/*
 * train.c — the training step and the evaluation (see train.h): micro-
 * batches through the model with the data-parallel engine as its
 * parameter store, the global gradient norm and its clipping, AdamW with
 * the scheduled learning rate, then validation loss and greedy-decoding
 * accuracy on held-out problems. Pipeline stages (pp > 1) are train_pp.c's.
 */
#include "train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model_moe.h"
#include "par_util.h"
#include "train_internal.h"
#include "train_moe.h"
#include "prog_util.h"

static ncclResult_t check_cfg(const train_cfg_t *c, const data_t *data) {
  if (c->batch < 1 || c->grad_accum < 1 || c->steps < 1 || c->dims.seq < 2)
    PAR_INVALID("--batch, --grad-accum, --steps must be at least 1 and --seq at least 2");
  if (c->zero < 0 || c->zero > 3) PAR_INVALID("--zero %d: must be 0, 1, 2 or 3", c->zero);
  if (c->cp < 1 || (c->cp > 1 && c->dims.seq % (2 * c->cp) != 0))  // one rank: no chunks
    PAR_INVALID("--cp %d: --seq %d must split into 2 * cp = %d equal chunks", c->cp, c->dims.seq, 2 * c->cp);
  if (c->pp > c->dims.layers)
    PAR_INVALID("--pp %d: every stage needs a block, but the model has %d (--layers)", c->pp, c->dims.layers);
  if (c->sp && c->tp < 2) PAR_INVALID("--sp 1 shards the sequence over tensor parallelism: --tp is %d, needs 2 or more", c->tp);
  if (c->sp && (c->dims.seq * c->batch) % c->tp != 0)
    PAR_INVALID("--sp 1: a micro-batch's %d rows (--seq %d x --batch %d) do not split over --tp %d", c->dims.seq * c->batch,
                c->dims.seq, c->batch, c->tp);
  ncclResult_t vpp = train_vpp_check(c);
  if (vpp != ncclSuccess) return vpp;
  ncclResult_t moe_ok = train_moe_check(c);
  if (moe_ok != ncclSuccess) return moe_ok;
  if (!(c->lr.lr > 0) || c->lr.warmup < 0 || !(c->weight_decay >= 0) || !(c->beta1 >= 0 && c->beta1 < 1) ||
      !(c->beta2 >= 0 && c->beta2 < 1))
    PAR_INVALID("bad optimiser settings: lr=%g warmup=%d weight decay=%g betas %g %g", c->lr.lr, c->lr.warmup,
                c->weight_decay, c->beta1, c->beta2);
  long need = c->dims.seq + 1;
  if (data_split_tokens(data, DATA_VAL) >= 0 && data_split_tokens(data, DATA_VAL) < need)
    PAR_INVALID("the data's validation split holds %ld tokens, fewer than --seq + 1 = %ld", data_split_tokens(data, DATA_VAL), need);
  if (data_is_addition(data) && 3 * c->digits + 5 > c->dims.seq)
    PAR_INVALID("--seq %d is too short for %d-digit problems (needs %d)", c->dims.seq, c->digits, 3 * c->digits + 5);
  return ncclSuccess;
}

static ncclResult_t load_initial(trainer_t *t) {
  size_t full_n = gpt_full_count(&t->cfg.dims), local_n = gpt_local_count(t->model);
  float *full = malloc(full_n * sizeof(float)), *local = malloc(2 * local_n * sizeof(float));
  ncclResult_t res = ncclSystemError;
  if (full != NULL && local != NULL) {
    gpt_init_full(&t->cfg.dims, t->cfg.seed, full);
    res = gpt_shard_full(t->model, full, local);
    train_pp_select(t, local, local + local_n);  // this stage's layers
    if (res == ncclSuccess) res = weft_dp_load_params(t->dp, local + local_n);
    if (res == ncclSuccess) res = train_moe_load(t, full + full_n - gpt_moe_full_count(&t->cfg.dims), NULL, NULL, 0);
  } else {
    weft_par_error(res, "out of memory for %zu parameters", full_n);
  }
  free(full), free(local);
  return res;
}

ncclResult_t trainer_create(const train_cfg_t *cfg, ncclComm_t world, trainer_t **out) {
  *out = NULL;
  char err[512];
  trainer_t *t = calloc(1, sizeof(*t));
  if (t == NULL) return weft_par_error(ncclSystemError, "out of memory");
  t->cfg = *cfg;
  ncclResult_t res = ncclSuccess;
  size_t *sizes = NULL;
  t->data = data_open(cfg->data_path, cfg->digits, cfg->seed, err, sizeof(err));
  if (t->data == NULL) {
    res = weft_par_error(ncclInvalidArgument, "%s", err);
    goto fail;
  }
  t->cfg.dims.vocab = data_vocab(t->data);
  if ((res = check_cfg(&t->cfg, t->data)) != ncclSuccess) goto fail;
  weft_mesh_shape_t shape = {cfg->tp, cfg->pp, cfg->dp, cfg->cp};
  PAR_CHECK_GOTO(weft_mesh_create(world, shape, &t->mesh), res, fail);
  PAR_CHECK_GOTO(train_moe_groups(t), res, fail);
  PAR_CHECK_GOTO(weft_tp_init(&t->tp, cfg->tp > 1 ? t->mesh->tp_comm : NULL, cfg->sp), res, fail);
  PAR_CHECK_GOTO(train_cp_init(t), res, fail);
  int nl = 0, P = cfg->pp, s = t->mesh->pp_rank;
  PAR_CHECK_GOTO(train_pp_plan(t, &sizes, &nl), res, fail);
  // Activations of the micro-batches in flight: 1F1B P - s at most, GPipe all (interleaved: train_vpp_plan).
  if (cfg->schedule != WEFT_PP_INTERLEAVED)
    t->slots = P == 1 ? 1 : cfg->schedule == WEFT_PP_1F1B && P - s < cfg->grad_accum ? P - s : cfg->grad_accum;
  t->models = calloc((size_t)t->slots * t->chunks, sizeof(gpt_t *));
  if (t->models == NULL) {
    res = weft_par_error(ncclSystemError, "out of memory");
    goto fail;
  }
  for (int i = 0; i < t->slots * t->chunks; i++)  // chunk i / slots
    PAR_CHECK_GOTO(gpt_create_parallel(&t->cfg.dims, cfg->batch, &t->tp, &t->cp, &t->chunk[i / t->slots],
                                       train_moe_ep_comm(t), &t->models[i]),
                   res, fail);
  t->model = t->models[(t->chunks - 1) * t->slots];  // the last chunk: the head's, on the last stage
  size_t all_n = gpt_local_count(t->model), T = (size_t)cfg->dims.seq * cfg->batch;
  float *all_w = malloc(all_n * sizeof(float));
  t->norm_weight = malloc(all_n * sizeof(float));
  t->seq = malloc(((size_t)cfg->dims.seq + 1) * sizeof(int));
  t->ids = malloc(2 * T * sizeof(int));
  if (P > 1) {
    t->act = malloc(T * (size_t)cfg->dims.hidden * sizeof(float));
    if (t->stage.embed || t->stage.head) t->emb_acc = malloc(gpt_layer_size(t->model, 0) * sizeof(float));
  }
  if (all_w == NULL || t->norm_weight == NULL || t->seq == NULL || t->ids == NULL ||
      (P > 1 && (t->act == NULL || ((t->stage.embed || t->stage.head) && t->emb_acc == NULL)))) {
    free(all_w);
    res = weft_par_error(ncclSystemError, "out of memory");
    goto fail;
  }
  t->targets = t->ids + T;
  for (int l = 0, i = 0; l < cfg->dims.layers + 2; l++)
    if (t->local[l] >= 0) sizes[i++] = gpt_layer_size(t->model, l);
  gpt_norm_weights(t->model, all_w);
  train_pp_select(t, all_w, t->norm_weight);
  free(all_w);
  if (P > 1 && t->stage.head)  // the last stage's copy of the tied embedding counts once, on the first
    memset(t->norm_weight, 0, gpt_layer_size(t->model, 0) * sizeof(float));
  weft_dp_config_t dc = {(weft_dp_stage_t)cfg->zero, WEFT_DP_FP32, WEFT_DP_AVG_NCCL, cfg->grad_accum, nl, sizes};
  PAR_CHECK_GOTO(weft_dp_create(t->mesh->dp_cp_comm, &dc, &t->dp), res, fail);  // CP ranks: other tokens
  t->store = train_pp_store(t);
  PAR_CHECK_GOTO(train_moe_engine(t), res, fail);
  if ((res = load_initial(t)) != ncclSuccess) goto fail;
  free(sizes);
  *out = t;
  return ncclSuccess;
fail:
  free(sizes);
  trainer_destroy(t);
  return res;
}

void trainer_destroy(trainer_t *t) {
  if (t == NULL) return;
  weft_dp_destroy(t->dp);
  train_moe_destroy(t);
  for (int i = 0; t->models != NULL && i < t->slots * t->chunks; i++) gpt_destroy(t->models[i]);
  if (t->emb_comm != NULL) ncclCommDestroy(t->emb_comm);
  train_cp_free(t);
  weft_mesh_destroy(t->mesh);
  data_close(t->data);
  free(t->norm_weight), free(t->seq), free(t->ids), free(t->models), free(t->local), free(t->emb_acc), free(t->act);
  free(t->chunk);
  free(t);
}

const weft_mesh_t *trainer_mesh(const trainer_t *t) { return t->mesh; }
const data_t *trainer_data(const trainer_t *t) { return t->data; }
size_t trainer_param_count(const trainer_t *t) { return gpt_full_count(&t->cfg.dims); }

size_t trainer_activation_bytes(const trainer_t *t) {
  size_t n = 0;
  for (int i = 0; i < t->slots * t->chunks; i++) n += gpt_activation_bytes(t->models[i]);
  return n;
}

int trainer_moe_capacity(const trainer_t *t) { return gpt_moe_capacity(t->model); }

double trainer_flops_per_step(const trainer_t *t) {
  const train_cfg_t *c = &t->cfg;
  double tokens = (double)c->dp * c->grad_accum * c->batch * c->dims.seq;
  return 3.0 * gpt_flops_per_token(&c->dims) * tokens;  // forward + backward (2x)
}

// Micro-batch of sequences first .. first+B-1 of a split, in row order.
void trainer_fill_batch(trainer_t *t, int split, long first) {
  int S = t->cfg.dims.seq, B = t->cfg.batch;
  for (int n = 0; n < B; n++) {
    data_sequence(t->data, split, first + n, S, t->seq);
    for (int p = 0; p < S; p++) {
      t->ids[p * B + n] = t->seq[p];
      t->targets[p * B + n] = t->seq[p + 1];
    }
  }
  train_cp_select(t);
}

ncclResult_t trainer_step(trainer_t *t, int step, step_result_t *out) {
  const train_cfg_t *c = &t->cfg;
  double start = weft_prog_now_s(), loss_sum = 0;
  int K = c->grad_accum, B = c->batch;
  long global = (long)c->dp * K * B;
  for (int k = 0; k < K && c->pp == 1; k++) {
    float loss;
    trainer_fill_batch(t, DATA_TRAIN, step * global + ((long)t->mesh->dp_rank * K + k) * B);
    PAR_CHECK(gpt_forward(t->model, &t->store, t->ids, t->targets, &loss));
    PAR_CHECK(weft_dp_begin_micro(t->dp, k));
    PAR_CHECK(train_moe_begin_micro(t, k));
    PAR_CHECK(gpt_backward(t->model, &t->store));
    loss_sum += loss;
  }
  if (c->pp > 1) PAR_CHECK(train_pp_step(t, step * global + (long)t->mesh->dp_rank * K * B, &loss_sum));
  double sumsq = 0;
  PAR_CHECK(weft_dp_grad_sumsq(t->dp, t->norm_weight, &sumsq));
  PAR_CHECK(train_moe_grad_sumsq(t, &sumsq));
  PAR_CHECK(ncclAllReduce(&sumsq, &sumsq, 1, ncclFloat64, ncclSum, t->mesh->world, NULL));
  float norm = (float)sqrt(sumsq), lr = lr_at(&c->lr, step);
  float clip = clip_factor(norm, c->clip);
  if (clip != 1.0f) PAR_CHECK(weft_dp_scale_grads(t->dp, clip));
  if (clip != 1.0f) PAR_CHECK(train_moe_scale_grads(t, clip));
  weft_adamw_t opt = {lr, c->beta1, c->beta2, c->eps, c->weight_decay};
  PAR_CHECK(weft_dp_step(t->dp, &opt));
  float aux;
  PAR_CHECK(train_moe_step(t, &opt, &aux));
  float loss = (float)(loss_sum / K);
  PAR_CHECK(ncclAllReduce(&loss, &loss, 1, ncclFloat32, ncclAvg, t->mesh->dp_cp_comm, NULL));
  *out = (step_result_t){loss, lr, norm, weft_prog_now_s() - start, aux};
  return ncclSuccess;
}

// Greedy answers to B held-out problems per micro-batch; counts exact matches.
static ncclResult_t eval_accuracy(trainer_t *t, int *correct, int *total) {
  const train_cfg_t *c = &t->cfg;
  int S = c->dims.seq, B = c->batch, T = S * B, dp = c->dp;
  int batches = (c->eval_problems + dp * B - 1) / (dp * B), answer_max = c->digits + 2;
  int *len = malloc((size_t)B * sizeof(int)), *want = malloc((size_t)B * 16 * sizeof(int));
  int *got = malloc((size_t)B * 16 * sizeof(int)), *next = malloc((size_t)T * sizeof(int));
  ncclResult_t res = ncclSuccess;
  int *ids = train_cp_ids(t);  // whole sequences; each rank runs its rows of them
  if (!len || !want || !got || !next) res = weft_par_error(ncclSystemError, "out of memory");
  *correct = *total = 0;
  for (int j = 0; j < batches && res == ncclSuccess; j++) {
    for (int n = 0; n < B; n++) {
      long a, b, index = ((long)j * dp + t->mesh->dp_rank) * B + n;
      data_add_problem(t->data, DATA_VAL, index, &a, &b);
      int prompt[32];
      len[n] = data_add_prompt(a, b, prompt);
      data_add_answer(a, b, want + n * 16);
      for (int p = 0; p < S; p++) ids[p * B + n] = p < len[n] ? prompt[p] : ADD_NEWLINE;
    }
    for (int k = 0; k < answer_max && res == ncclSuccess; k++) {  // the same count on every rank (ZeRO-3 gathers)
      train_cp_use_ids(t, ids);
      res = train_forward(t, NULL, NULL);
      if (res == ncclSuccess) res = train_argmax(t, next);
      for (int n = 0; n < B && res == ncclSuccess; n++) {
        int tok = next[(len[n] - 1) * B + n];
        got[n * 16 + k] = tok;
        if (len[n] < S) ids[len[n]++ * B + n] = tok;
      }
    }
    for (int n = 0; n < B; n++) {
      int ok = 1;
      for (int k = 0; ok && k < answer_max; k++) {
        ok = got[n * 16 + k] == want[n * 16 + k];
        if (want[n * 16 + k] == ADD_NEWLINE) break;
      }
      *correct += ok;
      *total += 1;
    }
  }
  free(len), free(want), free(got), free(next);
  return res;
}

ncclResult_t trainer_eval(trainer_t *t, eval_result_t *out) {
  const train_cfg_t *c = &t->cfg;
  double loss_sum = 0;
  for (int j = 0; j < c->eval_batches; j++) {
    float loss;
    trainer_fill_batch(t, DATA_VAL, ((long)j * c->dp + t->mesh->dp_rank) * c->batch);
    PAR_CHECK(train_forward(t, t->targets, &loss));
    loss_sum += loss;
  }
  float val = c->eval_batches > 0 ? (float)(loss_sum / c->eval_batches) : NAN;
  PAR_CHECK(ncclAllReduce(&val, &val, 1, ncclFloat32, ncclAvg, t->mesh->dp_cp_comm, NULL));
  *out = (eval_result_t){val, -1.0f, 0};
  if (!data_is_addition(t->data) || c->eval_problems < 1) return ncclSuccess;
  int counts[2];
  PAR_CHECK(eval_accuracy(t, &counts[0], &counts[1]));
  PAR_CHECK(ncclAllReduce(counts, counts, 2, ncclInt32, ncclSum, t->mesh->dp_comm, NULL));
  out->accuracy = (float)counts[0] / (float)counts[1];
  out->problems = counts[1];
  return ncclSuccess;
}
