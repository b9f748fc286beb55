/*
 * dp_step.c — the optimizer step of a data-parallel engine: AdamW
 * (decoupled weight decay, bias-corrected moments) on the elements this
 * rank owns, then the all-gather that gives every rank the new parameters
 * (ZeRO-1 and ZeRO-2; DDP updates everything everywhere, ZeRO-3 keeps only
 * the shard and gathers per layer when used).
 *
 * The update reads fp32 (mixed precision: the master copy), writes fp32
 * and, for 16-bit parameters, the rounded copy that the gather spreads.
 */
#include <math.h>

#include "dp_internal.h"
#include "weft.h"

enum { CHUNK = 512 };

typedef struct {
  float lr, beta1, beta2, eps, wd;
  float bias1, bias2;  // 1 - beta^t
  float grad_scale;    // 1/M with ncclAvg, 1 with PreMulSum
} adamw_coef_t;

// AdamW on n values: w and its moments m, v updated in place from g.
static void adamw(const adamw_coef_t *c, size_t n, float *w, const float *g, float *m, float *v) {
  for (size_t i = 0; i < n; i++) {
    float grad = g[i] * c->grad_scale;
    m[i] = c->beta1 * m[i] + (1.0f - c->beta1) * grad;
    v[i] = c->beta2 * v[i] + (1.0f - c->beta2) * grad * grad;
    float mhat = m[i] / c->bias1, vhat = v[i] / c->bias2;
    w[i] -= c->lr * (mhat / (sqrtf(vhat) + c->eps) + c->wd * w[i]);
  }
}

// Updates `n` elements: parameters at param_off (elements of dp->params),
// gradients at grad_off, moments and master at state_off.
static void update_range(weft_dp_t *dp, const adamw_coef_t *c, size_t n, size_t param_off, size_t grad_off,
                         size_t state_off) {
  char *params = (char *)dp->params + param_off * dp->esize;
  char *grads = (char *)dp->grads + grad_off * dp->esize;
  float *m = dp->m + state_off, *v = dp->v + state_off;
  if (dp->precision == WEFT_DP_FP32) {
    adamw(c, n, (float *)params, (const float *)grads, m, v);
    return;
  }
  float *master = dp->master + state_off, g[CHUNK];
  for (size_t i = 0; i < n; i += CHUNK) {
    size_t k = n - i < CHUNK ? n - i : CHUNK;
    weft_dp_to_float(dp->precision, grads + i * dp->esize, g, k);
    adamw(c, k, master + i, g, m + i, v + i);
    weft_dp_from_float(dp->precision, master + i, params + i * dp->esize, k);
  }
}

static ncclResult_t check_opt(const weft_adamw_t *o) {
  if (o == NULL) PAR_INVALID("weft_dp_step: opt is NULL");
  if (!(o->lr >= 0) || !(o->beta1 >= 0 && o->beta1 < 1) || !(o->beta2 >= 0 && o->beta2 < 1) || !(o->eps > 0) ||
      !(o->weight_decay >= 0))
    PAR_INVALID("weft_dp_step: bad AdamW settings lr=%g beta1=%g beta2=%g eps=%g weight_decay=%g", o->lr,
                o->beta1, o->beta2, o->eps, o->weight_decay);
  return ncclSuccess;
}

ncclResult_t weft_dp_step(weft_dp_t *dp, const weft_adamw_t *opt) {
  if (dp == NULL) PAR_INVALID("weft_dp_step: dp is NULL");
  ncclResult_t res = check_opt(opt);
  if (res != ncclSuccess) return res;
  if (dp->micro != dp->accum_steps - 1)
    PAR_INVALID("weft_dp_step: %d of %d micro-batches done", dp->micro + 1, dp->accum_steps);
  for (int i = 0; i < DP_PARAM_SLOTS; i++)
    if (dp->pslots[i].state == SLOT_IN_USE)
      PAR_INVALID("weft_dp_step: layer %d is still held; release it first", dp->pslots[i].layer);
  for (int i = 0; i < DP_GRAD_SLOTS; i++)
    if (dp->gslots[i].state == SLOT_FILLING)
      PAR_INVALID("weft_dp_step: layer %d's gradient was never marked done", dp->gslots[i].layer);
  PAR_CHECK(weft_dp_sync(dp));
  dp->steps++;
  adamw_coef_t c = {opt->lr, opt->beta1, opt->beta2, opt->eps, opt->weight_decay,
                    1.0f - powf(opt->beta1, (float)dp->steps), 1.0f - powf(opt->beta2, (float)dp->steps),
                    dp->grad_mult * (dp->average == WEFT_DP_AVG_NCCL ? 1.0f / (float)dp->accum_steps : 1.0f)};
  dp->grad_mult = 1.0f;
  const weft_dp_layout_t *lay = &dp->lay;
  for (int l = 0; l < lay->nlayers; l++) {
    size_t s = lay->shard[l], mine = lay->full_off[l] + (size_t)dp->rank * s;
    switch (dp->stage) {
      case WEFT_DP_DDP: update_range(dp, &c, s * (size_t)dp->nranks, lay->full_off[l], lay->full_off[l], lay->full_off[l]); break;
      case WEFT_DP_ZERO1: update_range(dp, &c, s, mine, mine, lay->shard_off[l]); break;
      case WEFT_DP_ZERO2: update_range(dp, &c, s, mine, lay->shard_off[l], lay->shard_off[l]); break;
      default: update_range(dp, &c, s, lay->shard_off[l], lay->shard_off[l], lay->shard_off[l]); break;
    }
  }
  for (int i = 0; i < DP_PARAM_SLOTS; i++) dp->pslots[i] = (dp_slot_t){dp->pslots[i].buf, -1, SLOT_FREE};
  dp->micro = -1;
  if (dp->stage == WEFT_DP_DDP || dp->stage == WEFT_DP_ZERO3) return ncclSuccess;
  char *params = dp->params;
  for (int l = 0; l < lay->nlayers; l++) {
    char *layer = params + lay->full_off[l] * dp->esize;
    PAR_CHECK(ncclAllGather(layer + (size_t)dp->rank * lay->shard[l] * dp->esize, layer, lay->shard[l], dp->dtype,
                            dp->comm, dp->stream));
  }
  return weft_dp_sync(dp);
}

// Where this rank's reduced shard of layer l's gradient starts in dp->grads.
static size_t owned_grad_off(const weft_dp_t *dp, int l) {
  const weft_dp_layout_t *lay = &dp->lay;
  return dp->stage >= WEFT_DP_ZERO2 ? lay->shard_off[l] : lay->full_off[l] + (size_t)dp->rank * lay->shard[l];
}

ncclResult_t weft_dp_grad_sumsq(weft_dp_t *dp, const float *weight, double *sumsq) {
  if (dp == NULL || sumsq == NULL) PAR_INVALID("weft_dp_grad_sumsq: %s is NULL", dp == NULL ? "dp" : "sumsq");
  if (dp->micro != dp->accum_steps - 1)
    PAR_INVALID("weft_dp_grad_sumsq: %d of %d micro-batches done", dp->micro + 1, dp->accum_steps);
  PAR_CHECK(weft_dp_sync(dp));
  const weft_dp_layout_t *lay = &dp->lay;
  double scale = dp->average == WEFT_DP_AVG_NCCL ? 1.0 / dp->accum_steps : 1.0, total = 0;
  float g[CHUNK];
  for (int l = 0; l < lay->nlayers; l++) {
    size_t first = (size_t)dp->rank * lay->shard[l];  // element of the layer
    size_t n = first >= lay->size[l] ? 0 : lay->size[l] - first;
    n = n < lay->shard[l] ? n : lay->shard[l];  // padding is not a parameter
    const char *src = (const char *)dp->grads + owned_grad_off(dp, l) * dp->esize;
    for (size_t i = 0; i < n; i += CHUNK) {
      size_t k = n - i < CHUNK ? n - i : CHUNK;
      weft_dp_to_float(dp->precision, src + i * dp->esize, g, k);
      for (size_t j = 0; j < k; j++) {
        double w = weight != NULL ? weight[lay->orig_off[l] + first + i + j] : 1.0;
        total += w * (double)g[j] * (double)g[j];
      }
    }
  }
  *sumsq += total * scale * scale;
  return ncclSuccess;
}

ncclResult_t weft_dp_scale_grads(weft_dp_t *dp, float scale) {
  if (dp == NULL) PAR_INVALID("weft_dp_scale_grads: dp is NULL");
  if (!(scale > 0.0f) || !isfinite(scale)) PAR_INVALID("weft_dp_scale_grads: scale=%g must be positive and finite", scale);
  dp->grad_mult = scale;
  return ncclSuccess;
}
