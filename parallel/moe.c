/*
 * moe.c — the mixture-of-experts layer's set-up, sizes and passes (see
 * moe.h): route (moe_route.c), dispatch (ep_exchange.c), the local experts
 * (moe_expert.c), combine, and the same steps backwards.
 *
 * Activation memory is sized for the worst routing: with a capacity every
 * peer block is padded to min(C, T) rows per expert; without one a rank
 * may receive, from each of the P sources, min(k, E/P) rows per token.
 */
#include <math.h>
#include <string.h>

#include "moe_internal.h"

ncclResult_t weft_moe_init(weft_moe_t *moe, const weft_moe_config_t *cfg, const weft_tp_t *tp, ncclComm_t ep_comm) {
  if (moe == NULL || cfg == NULL || tp == NULL)
    PAR_INVALID("weft_moe_init: %s is NULL", moe == NULL ? "moe" : cfg == NULL ? "cfg" : "tp");
  if (tp->size < 1 || tp->rank < 0 || tp->rank >= tp->size || (tp->size > 1 && tp->comm == NULL))
    PAR_INVALID("weft_moe_init: tp (size=%d rank=%d) was not set up by weft_tp_init", tp->size, tp->rank);
  if (tp->sequence_parallel) PAR_INVALID("weft_moe_init: sequence parallelism is not supported in the experts");
  const weft_moe_config_t *c = cfg;
  if (c->hidden < 1 || c->ffn < 1 || c->experts < 1)
    PAR_INVALID("weft_moe_init: hidden=%d ffn=%d experts=%d must be at least 1", c->hidden, c->ffn, c->experts);
  if (c->topk < 1 || c->topk > c->experts)
    PAR_INVALID("weft_moe_init: topk=%d must be in 1..experts=%d", c->topk, c->experts);
  if (c->ffn % tp->size != 0)
    PAR_INVALID("weft_moe_init: ffn=%d is not a multiple of the tensor-parallel size %d", c->ffn, tp->size);
  if (!isfinite(c->capacity_factor) || !(c->aux_coef >= 0) || !isfinite(c->aux_coef))
    PAR_INVALID("weft_moe_init: capacity_factor=%g, aux_coef=%g (finite, aux_coef >= 0)", c->capacity_factor,
                c->aux_coef);
  if (c->drop != WEFT_MOE_DROP_PROBS && c->drop != WEFT_MOE_DROP_POSITION)
    PAR_INVALID("weft_moe_init: drop=%d is not a weft_moe_drop_t", (int)c->drop);
  int P = 1, r = 0;
  if (ep_comm != NULL) {
    PAR_CHECK(ncclCommCount(ep_comm, &P));
    PAR_CHECK(ncclCommUserRank(ep_comm, &r));
  }
  if (c->experts % P != 0)
    PAR_INVALID("weft_moe_init: the expert-parallel size %d does not divide experts=%d", P, c->experts);
  *moe = (weft_moe_t){*c, *tp, ep_comm, P, r, c->experts / P, 1.0f, NULL, 1, 0, NULL};
  moe->cfg.renormalize = c->renormalize != 0;
  return ncclSuccess;
}

size_t weft_moe_router_nparams(const weft_moe_t *moe) { return (size_t)moe->cfg.hidden * moe->cfg.experts; }

size_t weft_moe_expert_nparams(const weft_moe_t *moe) {
  return weft_tp_mlp_nparams(&moe->tp, moe->cfg.hidden, moe->cfg.ffn);
}

size_t weft_moe_expert_full_nparams(const weft_moe_t *moe) {
  size_t h = (size_t)moe->cfg.hidden, f = (size_t)moe->cfg.ffn;
  return h * f + f + f * h + h;
}

int weft_moe_capacity(const weft_moe_t *moe, int tokens) {
  const weft_moe_config_t *c = &moe->cfg;
  if (!(c->capacity_factor > 0)) return -1;
  double all = (double)tokens * (moe->route_size > 1 ? moe->route_size : 1);
  double cap = ceil((double)c->capacity_factor * all * c->topk / c->experts);
  return cap < all ? (int)cap : (int)all;  // an expert gets a token once: C above the call's tokens changes nothing
}

moe_dims_t weft_moe_dims(const weft_moe_t *moe, int tokens) {
  const weft_moe_config_t *c = &moe->cfg;
  moe_dims_t d = {tokens, c->experts, c->topk, moe->ep_size, moe->local_experts, c->hidden,
                  c->ffn / moe->tp.size, weft_moe_capacity(moe, tokens), 0, 0, 0};
  d.fixed = d.cap > 0 ? (d.cap < tokens ? d.cap : tokens) : 0;  // this rank sends an expert at most T rows
  size_t T = (size_t)tokens, per_token = (size_t)(d.k < d.El ? d.k : d.El);
  d.S = d.fixed ? (size_t)d.E * d.fixed : T * d.k;
  d.R = d.fixed ? (size_t)d.P * d.El * d.fixed : (size_t)d.P * T * per_token;
  return d;
}

static float *take_f(float *acts, size_t *off, size_t n) {
  float *p = acts != NULL ? acts + *off : NULL;
  *off += n;
  return p;
}

// Integers live in float-sized slots of the same memory.
static int32_t *take_i(float *acts, size_t *off, size_t n) { return (int32_t *)(void *)take_f(acts, off, n); }

size_t weft_moe_carve(const moe_dims_t *d, float *acts, moe_acts_t *a) {
  size_t off = 0, T = (size_t)d->T, h = (size_t)d->h, tk = T * d->k, P = (size_t)d->P;
  a->xs = take_f(acts, &off, T * h);
  a->probs = take_f(acts, &off, T * d->E);
  a->dprobs = take_f(acts, &off, T * d->E);
  a->weight = take_f(acts, &off, tk);
  a->dweight = take_f(acts, &off, tk);
  a->aux = take_f(acts, &off, 1);
  a->expert = take_i(acts, &off, tk);
  a->pos = take_i(acts, &off, tk);
  a->routed = take_i(acts, &off, (size_t)d->E);
  a->grouted = take_i(acts, &off, (size_t)d->E);
  a->scount = take_i(acts, &off, (size_t)d->E);
  a->rcount = take_i(acts, &off, P * d->El);
  a->nrows = take_i(acts, &off, (size_t)d->El);
  a->soff = take_i(acts, &off, P);
  a->scnt = take_i(acts, &off, P);
  a->roff = take_i(acts, &off, P);
  a->rcnt = take_i(acts, &off, P);
  a->meta = take_i(acts, &off, 4);
  a->send = take_f(acts, &off, d->S * h);
  a->back = take_f(acts, &off, d->S * h);
  a->recv = take_f(acts, &off, d->R * h);
  a->xe = take_f(acts, &off, d->R * h);
  a->ye = take_f(acts, &off, d->R * h);
  a->hpre = take_f(acts, &off, d->R * d->fl);
  a->act = take_f(acts, &off, d->R * d->fl);
  return off;
}

size_t weft_moe_nacts(const weft_moe_t *moe, int tokens) {
  moe_dims_t d = weft_moe_dims(moe, tokens < 1 ? 1 : tokens);
  moe_acts_t a;
  return weft_moe_carve(&d, NULL, &a);
}

// Rows between the received layout and the expert-major one: to_major
// copies recv -> major (and counts each local expert's rows), else back.
static void permute(const moe_dims_t *d, moe_acts_t *a, float *recv, float *major, int to_major) {
  size_t h = (size_t)d->h, at = 0;
  for (int l = 0; l < d->El; l++) {
    a->nrows[l] = 0;
    for (int s = 0; s < d->P; s++) {
      const int32_t *cnt = a->rcount + (size_t)s * d->El;
      size_t src = (size_t)a->roff[s];
      for (int q = 0; q < l; q++) src += d->fixed ? (size_t)d->fixed : (size_t)cnt[q];
      size_t n = (size_t)cnt[l];
      if (to_major)
        memcpy(major + at * h, recv + src * h, n * h * sizeof(float));
      else
        memcpy(recv + src * h, major + at * h, n * h * sizeof(float));
      a->nrows[l] += (int32_t)n;
      at += n;
    }
  }
  a->meta[0] = (int32_t)at;
}

static ncclResult_t check_call(const weft_moe_t *moe, const char *api, int tokens, const void *p1, const void *p2,
                               const void *p3, const void *p4, const void *acts) {
  if (moe == NULL || moe->ep_size < 1 || moe->local_experts < 1) PAR_INVALID("%s: moe was not set up by weft_moe_init", api);
  if (tokens < 1) PAR_INVALID("%s: tokens=%d, need at least 1", api, tokens);
  if (moe->route_size > 1 && tokens != moe->route_tokens)
    PAR_INVALID("%s: tokens=%d, but the routing group was set up for calls of %d", api, tokens, moe->route_tokens);
  if (p1 == NULL || p2 == NULL || p3 == NULL || p4 == NULL || acts == NULL) PAR_INVALID("%s: a NULL buffer", api);
  return ncclSuccess;
}

ncclResult_t weft_moe_forward(const weft_moe_t *moe, const float *router, const float *experts, int tokens,
                              const float *x, float *y, float *acts, float *aux, weft_moe_stats_t *stats) {
  ncclResult_t res = check_call(moe, "weft_moe_forward", tokens, router, experts, x, y, acts);
  if (res != ncclSuccess) return res;
  moe_dims_t d = weft_moe_dims(moe, tokens);
  moe_acts_t a;
  weft_moe_carve(&d, acts, &a);
  size_t h = (size_t)d.h;
  memcpy(a.xs, x, (size_t)tokens * h * sizeof(float));
  PAR_CHECK(weft_moe_route(moe, &d, router, x, &a));
  if (d.fixed) memset(a.send, 0, d.S * h * sizeof(float));  // padding rows travel too
  for (size_t i = 0; i < (size_t)tokens * d.k; i++)
    if (a.pos[i] >= 0) memcpy(a.send + (size_t)a.pos[i] * h, x + i / d.k * h, h * sizeof(float));
  PAR_CHECK(weft_moe_exchange_counts(moe, &d, &a));
  PAR_CHECK(weft_moe_dispatch(moe, &d, &a));
  permute(&d, &a, a.recv, a.xe, 1);
  PAR_CHECK(weft_moe_experts_forward(moe, &d, experts, a.nrows, a.meta[0], &a));
  permute(&d, &a, a.recv, a.ye, 0);
  PAR_CHECK(weft_moe_combine(moe, &d, &a));
  for (int t = 0; t < tokens; t++) {  // kept slots in slot order: the same sum on every layout
    float *yt = y + (size_t)t * h;
    memset(yt, 0, h * sizeof(float));
    for (int i = 0; i < d.k; i++) {
      int32_t p = a.pos[(size_t)t * d.k + i];
      if (p < 0) continue;
      float w = a.weight[(size_t)t * d.k + i];
      const float *o = a.back + (size_t)p * h;
      for (size_t c = 0; c < h; c++) yt[c] += w * o[c];
    }
  }
  if (aux != NULL) *aux = a.aux[0];
  if (stats != NULL) {
    stats->capacity = d.cap;
    stats->kept = a.meta[1];
    stats->dropped = a.meta[2];
    stats->rows = a.meta[0];
    for (int e = 0; stats->routed != NULL && e < d.E; e++) stats->routed[e] = a.routed[e];
    for (int l = 0; stats->received != NULL && l < d.El; l++) stats->received[l] = a.nrows[l];
    for (size_t i = 0; stats->slots != NULL && i < (size_t)tokens * d.k; i++)
      stats->slots[i] = a.pos[i] >= 0 ? a.expert[i] : -1 - a.expert[i];
  }
  return ncclSuccess;
}

ncclResult_t weft_moe_backward(const weft_moe_t *moe, const float *router, const float *experts, float *grouter,
                               float *gexperts, int tokens, const float *dy, float *dx, float *acts) {
  ncclResult_t res = check_call(moe, "weft_moe_backward", tokens, router, experts, dy, dx, acts);
  if (res != ncclSuccess) return res;
  if (grouter == NULL || gexperts == NULL) PAR_INVALID("weft_moe_backward: %s is NULL", grouter ? "gexperts" : "grouter");
  moe_dims_t d = weft_moe_dims(moe, tokens);
  moe_acts_t a;
  weft_moe_carve(&d, acts, &a);
  size_t h = (size_t)d.h;
  // Each kept slot: d loss / d w = dy_t · (its expert's output); the
  // expert's output gradient w dy_t goes out along the dispatch's rows.
  for (size_t i = 0; i < (size_t)tokens * d.k; i++) {
    int32_t p = a.pos[i];
    a.dweight[i] = 0;
    if (p < 0) continue;
    const float *g = dy + i / d.k * h, *o = a.back + (size_t)p * h;
    float *s = a.send + (size_t)p * h, w = a.weight[i], dot = 0;
    for (size_t c = 0; c < h; c++) dot += g[c] * o[c], s[c] = w * g[c];
    a.dweight[i] = dot;
  }
  PAR_CHECK(weft_moe_dispatch(moe, &d, &a));
  permute(&d, &a, a.recv, a.ye, 1);
  PAR_CHECK(weft_moe_experts_backward(moe, &d, experts, gexperts, a.nrows, a.meta[0], &a));
  permute(&d, &a, a.recv, a.ye, 0);
  PAR_CHECK(weft_moe_combine(moe, &d, &a));
  for (int t = 0; t < tokens; t++) {
    float *xt = dx + (size_t)t * h;
    memset(xt, 0, h * sizeof(float));
    for (int i = 0; i < d.k; i++) {
      int32_t p = a.pos[(size_t)t * d.k + i];
      if (p < 0) continue;
      const float *o = a.back + (size_t)p * h;
      for (size_t c = 0; c < h; c++) xt[c] += o[c];
    }
  }
  weft_moe_route_backward(moe, &d, router, grouter, &a, dx);
  return ncclSuccess;
}
