/*
 * tp_attn.c — causal multi-head self-attention with the heads split over
 * the tensor-parallel ranks (Megatron): the fused Q|K|V projection is
 * column-parallel (each rank computes Q, K, V of its heads), attention of
 * those heads needs no communication, and the output projection is
 * row-parallel. So the layer communicates exactly like the MLP: one
 * all-reduce forward, one backward (SP: all-gather / reduce-scatter).
 *
 * Rows are sequence-major (row = position * batch + sample), so one head
 * of one sample is a strided s x head_dim matrix inside the QKV buffer.
 * Activation memory per micro-batch, in floats (h_l = hidden/size):
 *   xs (T x h)  qkv (T x 3h_l)  probs (batch x heads/size x s x s)  o (T x h_l)
 *   work (T x h)  do (T x h_l)  dqkv (T x 3h_l)  dprob (s x s)  dxw (T x h)
 */
#include <math.h>

#include "par_math.h"
#include "tp_internal.h"

typedef struct {
  float *xs, *qkv, *probs, *o, *work, *dout, *dqkv, *dprob, *dxw;
} attn_acts_t;

static ncclResult_t check_dims(const weft_tp_t *tp, const weft_tp_attn_dims_t *d, const char *api) {
  if (d == NULL) PAR_INVALID("%s: dims is NULL", api);
  if (d->seq < 1 || d->batch < 1 || d->heads < 1 || d->hidden < 1 || d->hidden % d->heads != 0)
    PAR_INVALID("%s: bad dims hidden=%d heads=%d seq=%d batch=%d (hidden must split into heads)", api, d->hidden,
                d->heads, d->seq, d->batch);
  return weft_tp_check(tp, api, d->seq * d->batch, "heads", d->heads);
}

size_t weft_tp_attn_nparams(const weft_tp_t *tp, const weft_tp_attn_dims_t *d) {
  return weft_tp_column_nparams(tp, d->hidden, 3 * d->hidden) + weft_tp_row_nparams(tp, d->hidden, d->hidden);
}

size_t weft_tp_attn_nacts(const weft_tp_t *tp, const weft_tp_attn_dims_t *d) {
  size_t t = (size_t)d->seq * d->batch, h = (size_t)d->hidden, hl = h / (size_t)tp->size;
  size_t probs = (size_t)d->batch * (size_t)(d->heads / tp->size) * (size_t)d->seq * (size_t)d->seq;
  return 3 * t * h + 2 * t * 3 * hl + 2 * t * hl + probs + (size_t)d->seq * d->seq;
}

static attn_acts_t split_acts(const weft_tp_t *tp, const weft_tp_attn_dims_t *d, float *acts) {
  size_t t = (size_t)d->seq * d->batch, h = (size_t)d->hidden, hl = h / (size_t)tp->size;
  size_t probs = (size_t)d->batch * (size_t)(d->heads / tp->size) * (size_t)d->seq * (size_t)d->seq;
  attn_acts_t a;
  a.xs = acts;
  a.qkv = a.xs + t * h;
  a.probs = a.qkv + t * 3 * hl;
  a.o = a.probs + probs;
  a.work = a.o + t * hl;
  a.dout = a.work + t * h;
  a.dqkv = a.dout + t * hl;
  a.dprob = a.dqkv + t * 3 * hl;
  a.dxw = a.dprob + (size_t)d->seq * d->seq;
  return a;
}

ncclResult_t weft_tp_attn_shard(const weft_tp_t *tp, const weft_tp_attn_dims_t *d, const float *full, float *local) {
  ncclResult_t res = check_dims(tp, d, "weft_tp_attn_shard");
  if (res != ncclSuccess) return res;
  if (full == NULL || local == NULL) PAR_INVALID("weft_tp_attn_shard: %s is NULL", full ? "local" : "full");
  int h = d->hidden;
  PAR_CHECK(weft_tp_column_shard(tp, h, 3 * h, 3, full, local));
  return weft_tp_row_shard(tp, h, h, full + (size_t)h * 3 * h + 3 * h, local + weft_tp_column_nparams(tp, h, 3 * h));
}

// Softmax of each row i over columns 0..i (causal), zero beyond.
static void causal_softmax(float *p, int s) {
  for (int i = 0; i < s; i++) {
    float *row = p + (size_t)i * s, mx = row[0], sum = 0;
    for (int j = 1; j <= i; j++) mx = row[j] > mx ? row[j] : mx;
    weft_par_exp_shift(row, (size_t)i + 1, mx);
    for (int j = 0; j <= i; j++) sum += row[j];
    float inv = 1.0f / sum;
    for (int j = 0; j <= i; j++) row[j] *= inv;
    for (int j = i + 1; j < s; j++) row[j] = 0;
  }
}

ncclResult_t weft_tp_attn_forward(const weft_tp_t *tp, const weft_tp_attn_dims_t *d, const float *p, const float *x,
                                  float *y, float *acts) {
  ncclResult_t res = check_dims(tp, d, "weft_tp_attn_forward");
  if (res != ncclSuccess) return res;
  if (p == NULL || acts == NULL) PAR_INVALID("weft_tp_attn_forward: %s is NULL", p ? "acts" : "p");
  attn_acts_t a = split_acts(tp, d, acts);
  int h = d->hidden, s = d->seq, b = d->batch, tokens = s * b, hl = h / tp->size, heads = d->heads / tp->size;
  int hd = h / d->heads, ldq = b * 3 * hl, ldo = b * hl;
  float scale = 1.0f / sqrtf((float)hd);
  PAR_CHECK(weft_tp_column_forward(tp, h, 3 * h, p, tokens, x, a.xs, a.qkv));
  for (int n = 0; n < b; n++)
    for (int j = 0; j < heads; j++) {
      const float *q = a.qkv + (size_t)n * 3 * hl + (size_t)j * hd, *k = q + hl, *v = q + 2 * hl;
      float *prob = a.probs + ((size_t)n * heads + j) * s * s;
      weft_tp_gemm(0, 1, s, s, hd, scale, q, ldq, k, ldq, 0.0f, prob, s);
      causal_softmax(prob, s);
      weft_tp_gemm(0, 0, s, hd, s, 1.0f, prob, s, v, ldq, 0.0f, a.o + (size_t)n * hl + (size_t)j * hd, ldo);
    }
  const float *po = p + weft_tp_column_nparams(tp, h, 3 * h);
  return weft_tp_row_forward(tp, h, h, po, tokens, a.o, y, a.work);
}

// Softmax backward for one head: dS = P * (dP - rowsum(dP * P)), scaled.
static void softmax_backward(const float *prob, float *dprob, int s, float scale) {
  for (int i = 0; i < s; i++) {
    const float *pr = prob + (size_t)i * s;
    float *dr = dprob + (size_t)i * s, dot = 0;
    for (int j = 0; j <= i; j++) dot += pr[j] * dr[j];
    for (int j = 0; j < s; j++) dr[j] = j <= i ? pr[j] * (dr[j] - dot) * scale : 0.0f;
  }
}

ncclResult_t weft_tp_attn_backward(const weft_tp_t *tp, const weft_tp_attn_dims_t *d, const float *p, float *g,
                                   const float *dy, float *dx, float *acts) {
  ncclResult_t res = check_dims(tp, d, "weft_tp_attn_backward");
  if (res != ncclSuccess) return res;
  if (p == NULL || g == NULL || acts == NULL) PAR_INVALID("weft_tp_attn_backward: p, g or acts is NULL");
  attn_acts_t a = split_acts(tp, d, acts);
  int h = d->hidden, s = d->seq, b = d->batch, tokens = s * b, hl = h / tp->size, heads = d->heads / tp->size;
  int hd = h / d->heads, ldq = b * 3 * hl, ldo = b * hl;
  float scale = 1.0f / sqrtf((float)hd);
  size_t off = weft_tp_column_nparams(tp, h, 3 * h);
  PAR_CHECK(weft_tp_row_backward(tp, h, h, p + off, g + off, tokens, a.o, dy, a.dout, a.work));
  for (int n = 0; n < b; n++)
    for (int j = 0; j < heads; j++) {
      size_t col = (size_t)n * 3 * hl + (size_t)j * hd;
      const float *q = a.qkv + col, *k = q + hl, *v = q + 2 * hl;
      float *dq = a.dqkv + col, *dk = dq + hl, *dv = dq + 2 * hl;
      const float *prob = a.probs + ((size_t)n * heads + j) * s * s;
      const float *dout = a.dout + (size_t)n * hl + (size_t)j * hd;
      weft_tp_gemm(0, 1, s, s, hd, 1.0f, dout, ldo, v, ldq, 0.0f, a.dprob, s);
      weft_tp_gemm(1, 0, s, hd, s, 1.0f, prob, s, dout, ldo, 0.0f, dv, ldq);
      softmax_backward(prob, a.dprob, s, scale);
      weft_tp_gemm(0, 0, s, hd, s, 1.0f, a.dprob, s, k, ldq, 0.0f, dq, ldq);
      weft_tp_gemm(1, 0, s, hd, s, 1.0f, a.dprob, s, q, ldq, 0.0f, dk, ldq);
    }
  return weft_tp_column_backward(tp, h, 3 * h, p, g, tokens, a.xs, a.dqkv, dx, a.dxw);
}
