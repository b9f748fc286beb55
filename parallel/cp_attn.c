/*
 * cp_attn.c — causal multi-head self-attention with the sequence split
 * over a context-parallel group and the heads over a tensor-parallel one
 * (see cp.h): the fused Q|K|V projection is column-parallel on this
 * rank's rows, ring attention (cp_ring.c, cp_ring_grad.c) runs the local
 * heads over the whole sequence, and the output projection is
 * row-parallel. The parameters are weft_tp_attn_*'s.
 *
 * Activation memory per micro-batch, in floats (T = seq / cp * batch rows,
 * h_l = hidden / tp, a_l = heads / tp):
 *   xs (T x h)  qkv (T x 3h_l)  o (T x h_l)  lse (T x a_l)
 *   work (T x h)  dout (T x h_l)  dqkv (T x 3h_l)  dxw (T x h)  ring scratch
 * Unlike the one-rank layer no s x s probabilities are kept: the backward
 * recomputes them block by block from the log-sum-exp.
 */
#include <math.h>

#include "cp_internal.h"
#include "tp_internal.h"

typedef struct {
  float *xs, *qkv, *o, *lse, *work, *dout, *dqkv, *dxw, *ring;
} cp_acts_t;

static ncclResult_t check(const weft_cp_t *cp, const weft_tp_t *tp, const weft_tp_attn_dims_t *d, const char *api) {
  if (d == NULL) PAR_INVALID("%s: dims is NULL", api);
  if (d->seq < 1 || d->batch < 1 || d->heads < 1 || d->hidden < 1 || d->hidden % d->heads != 0)
    PAR_INVALID("%s: bad dims hidden=%d heads=%d seq=%d batch=%d (hidden must split into heads)", api, d->hidden,
                d->heads, d->seq, d->batch);
  ncclResult_t res = weft_cp_check_seq(cp, api, d->seq);
  if (res != ncclSuccess) return res;
  return weft_tp_check(tp, api, d->seq / cp->size * d->batch, "heads", d->heads);
}

static weft_cp_shape_t shape(const weft_cp_t *cp, const weft_tp_t *tp, const weft_tp_attn_dims_t *d) {
  int local = d->seq / cp->size, hd = d->hidden / d->heads;
  return (weft_cp_shape_t){d->batch, local, local / 2, d->heads / tp->size, hd, d->hidden / tp->size,
                           1.0f / sqrtf((float)hd)};
}

static size_t ring_scratch(const weft_cp_shape_t *s) {
  size_t f = weft_cp_ring_forward_scratch(s), b = weft_cp_ring_backward_scratch(s);
  return f > b ? f : b;
}

size_t weft_cp_attn_nacts(const weft_cp_t *cp, const weft_tp_t *tp, const weft_tp_attn_dims_t *d) {
  weft_cp_shape_t s = shape(cp, tp, d);
  size_t t = (size_t)s.local * s.batch, h = (size_t)d->hidden, hl = (size_t)s.hl;
  return 3 * t * h + 2 * t * 3 * hl + 2 * t * hl + t * (size_t)s.heads + ring_scratch(&s);
}

static cp_acts_t split_acts(const weft_cp_t *cp, const weft_tp_t *tp, const weft_tp_attn_dims_t *d, float *acts) {
  weft_cp_shape_t s = shape(cp, tp, d);
  size_t t = (size_t)s.local * s.batch, h = (size_t)d->hidden, hl = (size_t)s.hl;
  cp_acts_t a;
  a.xs = acts;
  a.qkv = a.xs + t * h;
  a.o = a.qkv + t * 3 * hl;
  a.lse = a.o + t * hl;
  a.work = a.lse + t * (size_t)s.heads;
  a.dout = a.work + t * h;
  a.dqkv = a.dout + t * hl;
  a.dxw = a.dqkv + t * 3 * hl;
  a.ring = a.dxw + t * h;
  return a;
}

ncclResult_t weft_cp_attn_forward(const weft_cp_t *cp, const weft_tp_t *tp, const weft_tp_attn_dims_t *d,
                                  const float *p, const float *x, float *y, float *acts) {
  ncclResult_t res = check(cp, tp, d, "weft_cp_attn_forward");
  if (res != ncclSuccess) return res;
  if (p == NULL || x == NULL || y == NULL || acts == NULL) PAR_INVALID("weft_cp_attn_forward: p, x, y or acts is NULL");
  cp_acts_t a = split_acts(cp, tp, d, acts);
  weft_cp_shape_t s = shape(cp, tp, d);
  int h = d->hidden, tokens = s.local * s.batch;
  PAR_CHECK(weft_tp_column_forward(tp, h, 3 * h, p, tokens, x, a.xs, a.qkv));
  PAR_CHECK(weft_cp_ring_forward(cp, &s, a.qkv, a.o, a.lse, a.ring));
  return weft_tp_row_forward(tp, h, h, p + weft_tp_column_nparams(tp, h, 3 * h), tokens, a.o, y, a.work);
}

ncclResult_t weft_cp_attn_backward(const weft_cp_t *cp, const weft_tp_t *tp, const weft_tp_attn_dims_t *d,
                                   const float *p, float *g, const float *dy, float *dx, float *acts) {
  ncclResult_t res = check(cp, tp, d, "weft_cp_attn_backward");
  if (res != ncclSuccess) return res;
  if (p == NULL || g == NULL || dy == NULL || dx == NULL || acts == NULL)
    PAR_INVALID("weft_cp_attn_backward: p, g, dy, dx or acts is NULL");
  cp_acts_t a = split_acts(cp, tp, d, acts);
  weft_cp_shape_t s = shape(cp, tp, d);
  int h = d->hidden, tokens = s.local * s.batch;
  size_t off = weft_tp_column_nparams(tp, h, 3 * h);
  PAR_CHECK(weft_tp_row_backward(tp, h, h, p + off, g + off, tokens, a.o, dy, a.dout, a.work));
  PAR_CHECK(weft_cp_ring_backward(cp, &s, a.qkv, a.o, a.lse, a.dout, a.dqkv, a.ring));
  return weft_tp_column_backward(tp, h, 3 * h, p, g, tokens, a.xs, a.dqkv, dx, a.dxw);
}
