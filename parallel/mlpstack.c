/*
 * mlpstack.c — the 3D-parallel reference model (see mlpstack.h): block
 * forward/backward on a TP group, the stage callbacks for weft_pp_run and
 * the step around them.
 *
 * Activations of a micro-batch are kept in one of `slots` areas from its
 * forward to its backward: M areas for GPipe, P - stage for 1F1B.
 */
#include "mlpstack.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tp_internal.h"

struct weft_mlpstack {
  weft_mlpstack_config_t cfg;
  weft_tp_t tp;
  ncclComm_t pp_comm, dp_comm;
  int stage, stages, dp_rank, dp_size;
  int first, last;      // blocks of this stage
  int rows;             // local rows of the residual stream
  size_t block_local;   // params per block on this rank
  size_t mlp_acts, slot_floats;
  int slots;
  float *acts;          // slots * slot_floats
  weft_dp_t *dp;
  double loss_sum;      // this step, this rank's part
};

size_t weft_mlpstack_block_full(const weft_mlpstack_config_t *c) {
  return 2 * (size_t)c->hidden + (size_t)c->hidden * c->ffn + c->ffn + (size_t)c->ffn * c->hidden + c->hidden;
}

static float hash_uniform(unsigned long long seed, unsigned long long a, unsigned long long b) {
  unsigned long long z = seed * 0x9e3779b97f4a7c15ull ^ a * 0xbf58476d1ce4e5b9ull ^ (b + 1) * 0x94d049bb133111ebull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (float)(z >> 40) * (2.0f / 16777216.0f) - 1.0f;  // [-1, 1)
}

// Full parameters of block `layer`: gamma 1, beta 0, weights U(-1,1)/sqrt(fan_in).
static void init_block(const weft_mlpstack_config_t *c, int layer, float *full) {
  int h = c->hidden, f = c->ffn;
  size_t n = weft_mlpstack_block_full(c);
  for (size_t i = 0; i < n; i++) full[i] = hash_uniform(c->seed, 1000 + (unsigned long long)layer, i);
  for (int i = 0; i < h; i++) full[i] = 1.0f, full[h + i] = 0.0f;
  float *w1 = full + 2 * h, *w2 = w1 + (size_t)h * f + f;
  for (size_t i = 0; i < (size_t)h * f + f; i++) w1[i] /= sqrtf((float)h);
  for (size_t i = 0; i < (size_t)f * h + h; i++) w2[i] /= sqrtf((float)f);
}

// Input (kind 0) or target (kind 1) of global micro-batch g, rows of this rank.
static void fill_data(const weft_mlpstack_t *st, int kind, int g, float *out) {
  int h = st->cfg.hidden, row0 = st->tp.sequence_parallel ? st->tp.rank * st->rows : 0;
  for (int r = 0; r < st->rows; r++)
    for (int c = 0; c < h; c++)
      out[(size_t)r * h + c] =
          hash_uniform(st->cfg.seed + 7 + (unsigned long long)kind, (unsigned long long)g, (size_t)(row0 + r) * h + c);
}

// Areas of one block's activations inside a slot.
typedef struct {
  float *x, *ln_acts, *ln_out, *mlp_acts;
} block_acts_t;

static float *slot_base(const weft_mlpstack_t *st, int micro) {
  return st->acts + (size_t)(micro % st->slots) * st->slot_floats;
}

static block_acts_t block_acts(const weft_mlpstack_t *st, int micro, int local) {
  size_t rh = (size_t)st->rows * st->cfg.hidden;
  size_t per = rh + weft_tp_layernorm_nacts(st->cfg.hidden, st->rows) + rh + st->mlp_acts;
  float *b = slot_base(st, micro) + (size_t)local * per;
  block_acts_t a = {b, b + rh, b + rh + weft_tp_layernorm_nacts(st->cfg.hidden, st->rows), NULL};
  a.mlp_acts = a.ln_out + rh;
  return a;
}

// The residual stream after this stage's last block.
static float *stage_output(const weft_mlpstack_t *st, int micro) {
  return block_acts(st, micro, st->last - st->first).x;
}

static ncclResult_t stage_forward(void *user, int micro, const float *in, float *out) {
  weft_mlpstack_t *st = user;
  int h = st->cfg.hidden, n = st->last - st->first;
  size_t rh = (size_t)st->rows * h;
  block_acts_t a0 = block_acts(st, micro, 0);
  if (in == NULL)
    fill_data(st, 0, st->dp_rank * st->cfg.micro + micro, a0.x);
  else
    memcpy(a0.x, in, rh * sizeof(float));
  for (int l = 0; l < n; l++) {
    block_acts_t a = block_acts(st, micro, l);
    float *next = block_acts(st, micro, l + 1).x, *p;
    PAR_CHECK(weft_dp_layer_params(st->dp, l, l + 1 < n ? l + 1 : -1, (void **)&p));
    PAR_CHECK(weft_tp_layernorm_forward(&st->tp, h, p, st->rows, a.x, a.ln_out, a.ln_acts));
    PAR_CHECK(weft_tp_mlp_forward(&st->tp, h, st->cfg.ffn, p + 2 * h, st->cfg.tokens, a.ln_out, next, a.mlp_acts));
    PAR_CHECK(weft_dp_layer_release(st->dp, l));
    for (size_t i = 0; i < rh; i++) next[i] += a.x[i];
  }
  if (out != NULL) memcpy(out, stage_output(st, micro), rh * sizeof(float));
  return ncclSuccess;
}

static ncclResult_t stage_backward(void *user, int micro, const float *dout, float *din) {
  weft_mlpstack_t *st = user;
  int h = st->cfg.hidden, n = st->last - st->first;
  size_t rh = (size_t)st->rows * h;
  float *grad = malloc(2 * rh * sizeof(float));
  if (grad == NULL) return weft_par_error(ncclSystemError, "mlpstack: out of memory");
  float *tmp = grad + rh;
  ncclResult_t res = weft_dp_begin_micro(st->dp, micro);
  if (dout != NULL) {
    memcpy(grad, dout, rh * sizeof(float));
  } else {  // loss = 0.5/T * sum (x - y)^2 over this micro-batch
    const float *x = stage_output(st, micro);
    fill_data(st, 1, st->dp_rank * st->cfg.micro + micro, tmp);
    for (size_t i = 0; i < rh; i++) {
      float d = x[i] - tmp[i];
      st->loss_sum += 0.5 * d * d / st->cfg.tokens;
      grad[i] = d / (float)st->cfg.tokens;
    }
  }
  for (int l = n - 1; l >= 0 && res == ncclSuccess; l--) {
    block_acts_t a = block_acts(st, micro, l);
    float *p, *g;
    PAR_CHECK_GOTO(weft_dp_layer_params(st->dp, l, l - 1, (void **)&p), res, out);
    PAR_CHECK_GOTO(weft_dp_layer_grads(st->dp, l, (void **)&g), res, out);
    PAR_CHECK_GOTO(weft_tp_mlp_backward(&st->tp, h, st->cfg.ffn, p + 2 * h, g + 2 * h, st->cfg.tokens, grad, tmp,
                                        a.mlp_acts), res, out);
    PAR_CHECK_GOTO(weft_tp_layernorm_backward(&st->tp, h, p, g, st->rows, tmp, tmp, a.ln_acts), res, out);
    for (size_t i = 0; i < rh; i++) grad[i] += tmp[i];  // the residual path
    PAR_CHECK_GOTO(weft_dp_layer_grads_done(st->dp, l), res, out);
    PAR_CHECK_GOTO(weft_dp_layer_release(st->dp, l), res, out);
  }
  if (din != NULL) memcpy(din, grad, rh * sizeof(float));
out:
  free(grad);
  return res;
}

static ncclResult_t check_config(const weft_mlpstack_config_t *c) {
  if (c == NULL) PAR_INVALID("weft_mlpstack_create: config is NULL");
  if (c->hidden < 1 || c->ffn < 1 || c->layers < 1 || c->tokens < 1 || c->micro < 1)
    PAR_INVALID("weft_mlpstack_create: hidden=%d ffn=%d layers=%d tokens=%d micro=%d must all be at least 1",
                c->hidden, c->ffn, c->layers, c->tokens, c->micro);
  return ncclSuccess;
}

static ncclResult_t load_initial(weft_mlpstack_t *st) {
  size_t full_n = weft_mlpstack_block_full(&st->cfg), n = st->last - st->first;
  float *full = malloc(full_n * sizeof(float)), *local = malloc(n * st->block_local * sizeof(float));
  ncclResult_t res = ncclSuccess;
  if (full == NULL || local == NULL) res = weft_par_error(ncclSystemError, "mlpstack: out of memory");
  for (int l = st->first; l < st->last && res == ncclSuccess; l++) {
    init_block(&st->cfg, l, full);
    float *dst = local + (size_t)(l - st->first) * st->block_local;
    memcpy(dst, full, 2 * (size_t)st->cfg.hidden * sizeof(float));
    res = weft_tp_mlp_shard(&st->tp, st->cfg.hidden, st->cfg.ffn, full + 2 * st->cfg.hidden, dst + 2 * st->cfg.hidden);
  }
  if (res == ncclSuccess) res = weft_dp_load_params(st->dp, local);
  free(full), free(local);
  return res;
}

ncclResult_t weft_mlpstack_create(const weft_mlpstack_config_t *cfg, ncclComm_t tp_comm, ncclComm_t pp_comm,
                                  ncclComm_t dp_comm, weft_mlpstack_t **out) {
  if (out == NULL) PAR_INVALID("weft_mlpstack_create: out is NULL");
  *out = NULL;
  ncclResult_t res = check_config(cfg);
  if (res != ncclSuccess) return res;
  if (pp_comm == NULL || dp_comm == NULL) PAR_INVALID("weft_mlpstack_create: pp_comm and dp_comm are required");
  weft_mlpstack_t *st = calloc(1, sizeof(*st));
  if (st == NULL) return weft_par_error(ncclSystemError, "weft_mlpstack_create: out of memory");
  st->cfg = *cfg;
  st->pp_comm = pp_comm;
  st->dp_comm = dp_comm;
  size_t *sizes = NULL;
  double *cost = NULL;
  int *first = NULL;
  PAR_CHECK_GOTO(weft_tp_init(&st->tp, tp_comm, cfg->sequence_parallel), res, fail);
  PAR_CHECK_GOTO(weft_tp_check(&st->tp, "weft_mlpstack_create", cfg->tokens, "ffn", cfg->ffn), res, fail);
  PAR_CHECK_GOTO(ncclCommCount(pp_comm, &st->stages), res, fail);
  PAR_CHECK_GOTO(ncclCommUserRank(pp_comm, &st->stage), res, fail);
  PAR_CHECK_GOTO(ncclCommCount(dp_comm, &st->dp_size), res, fail);
  PAR_CHECK_GOTO(ncclCommUserRank(dp_comm, &st->dp_rank), res, fail);
  cost = malloc((size_t)cfg->layers * sizeof(double));
  first = malloc((size_t)(st->stages + 1) * sizeof(int));
  if (cost == NULL || first == NULL) {
    res = weft_par_error(ncclSystemError, "weft_mlpstack_create: out of memory");
    goto fail;
  }
  for (int l = 0; l < cfg->layers; l++) cost[l] = 1.0;  // identical blocks
  PAR_CHECK_GOTO(weft_pp_balance(cost, cfg->layers, st->stages, first), res, fail);
  st->first = first[st->stage];
  st->last = first[st->stage + 1];
  st->rows = weft_tp_local_rows(&st->tp, cfg->tokens);
  st->block_local = 2 * (size_t)cfg->hidden + weft_tp_mlp_nparams(&st->tp, cfg->hidden, cfg->ffn);
  st->mlp_acts = weft_tp_mlp_nacts(&st->tp, cfg->hidden, cfg->ffn, cfg->tokens);
  int n = st->last - st->first;
  size_t rh = (size_t)st->rows * cfg->hidden;
  st->slot_floats = (size_t)(n + 1) * rh + (size_t)n * (weft_tp_layernorm_nacts(cfg->hidden, st->rows) + rh + st->mlp_acts);
  st->slots = cfg->schedule == WEFT_PP_1F1B && st->stages - st->stage < cfg->micro ? st->stages - st->stage : cfg->micro;
  st->acts = malloc((size_t)st->slots * st->slot_floats * sizeof(float));
  sizes = malloc((size_t)n * sizeof(size_t));
  if (st->acts == NULL || sizes == NULL) {
    res = weft_par_error(ncclSystemError, "weft_mlpstack_create: out of memory");
    goto fail;
  }
  for (int l = 0; l < n; l++) sizes[l] = st->block_local;
  weft_dp_config_t dc = {cfg->zero, WEFT_DP_FP32, WEFT_DP_AVG_NCCL, cfg->micro, n, sizes};
  PAR_CHECK_GOTO(weft_dp_create(dp_comm, &dc, &st->dp), res, fail);
  PAR_CHECK_GOTO(load_initial(st), res, fail);
  free(sizes), free(cost), free(first);
  *out = st;
  return ncclSuccess;
fail:
  free(sizes), free(cost), free(first);
  weft_mlpstack_destroy(st);
  return res;
}

ncclResult_t weft_mlpstack_destroy(weft_mlpstack_t *st) {
  if (st == NULL) return ncclSuccess;
  ncclResult_t res = weft_dp_destroy(st->dp);
  free(st->acts);
  free(st);
  return res;
}

ncclResult_t weft_mlpstack_step(weft_mlpstack_t *st, float *loss, weft_pp_stats_t *stats) {
  if (st == NULL || loss == NULL) PAR_INVALID("weft_mlpstack_step: %s is NULL", st ? "loss" : "st");
  weft_pp_stage_t fns = {stage_forward, stage_backward, st};
  st->loss_sum = 0;
  PAR_CHECK(weft_pp_run(st->pp_comm, st->cfg.schedule, st->cfg.micro, (size_t)st->rows * st->cfg.hidden, &fns, stats));
  PAR_CHECK(weft_dp_step(st->dp, &st->cfg.adamw));
  // The loss lives on the last stage, split over sequence shards under SP.
  float l = (float)(st->loss_sum / st->cfg.micro);
  if (st->tp.sequence_parallel) PAR_CHECK(weft_tp_allreduce(&st->tp, &l, 1));
  PAR_CHECK(ncclAllReduce(&l, &l, 1, ncclFloat32, ncclSum, st->pp_comm, NULL));
  PAR_CHECK(ncclAllReduce(&l, &l, 1, ncclFloat32, ncclAvg, st->dp_comm, NULL));
  *loss = l;
  return ncclSuccess;
}

size_t weft_mlpstack_local_count(const weft_mlpstack_t *st) { return (size_t)(st->last - st->first) * st->block_local; }

ncclResult_t weft_mlpstack_local_params(weft_mlpstack_t *st, float *out) {
  if (st == NULL || out == NULL) PAR_INVALID("weft_mlpstack_local_params: %s is NULL", st ? "out" : "st");
  return weft_dp_read_params(st->dp, out);
}

ncclResult_t weft_mlpstack_shard_full(const weft_mlpstack_t *st, const float *full, float *out) {
  if (st == NULL || full == NULL || out == NULL) PAR_INVALID("weft_mlpstack_shard_full: NULL argument");
  size_t per = weft_mlpstack_block_full(&st->cfg);
  int h = st->cfg.hidden;
  for (int l = st->first; l < st->last; l++) {
    const float *src = full + (size_t)l * per;
    float *dst = out + (size_t)(l - st->first) * st->block_local;
    memcpy(dst, src, 2 * (size_t)h * sizeof(float));
    PAR_CHECK(weft_tp_mlp_shard(&st->tp, h, st->cfg.ffn, src + 2 * h, dst + 2 * h));
  }
  return ncclSuccess;
}

void weft_mlpstack_blocks(const weft_mlpstack_t *st, int *first, int *last) {
  *first = st->first;
  *last = st->last;
}
