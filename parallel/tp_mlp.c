/*
 * tp_mlp.c — the Megatron MLP: a column-parallel linear (h -> f), GELU on
 * the rank's f/size features, a row-parallel linear (f -> h). The only
 * communication is the row layer's forward all-reduce and the column
 * layer's backward all-reduce (sequence parallel: all-gather in, reduce-
 * scatter out, and the reverse in backward).
 *
 * Activation memory per micro-batch, in floats:
 *   xs (T x h)  hpre, act (T x f/size)  work (T x h)  dact (T x f/size)  dxw (T x h)
 */
#include "par_math.h"
#include "tp_internal.h"

size_t weft_tp_mlp_nparams(const weft_tp_t *tp, int hidden, int ffn) {
  return weft_tp_column_nparams(tp, hidden, ffn) + weft_tp_row_nparams(tp, ffn, hidden);
}

size_t weft_tp_mlp_nacts(const weft_tp_t *tp, int hidden, int ffn, int tokens) {
  size_t t = (size_t)tokens;
  return 3 * t * (size_t)hidden + 3 * t * ((size_t)ffn / (size_t)tp->size);
}

ncclResult_t weft_tp_mlp_shard(const weft_tp_t *tp, int hidden, int ffn, const float *full, float *local) {
  if (full == NULL || local == NULL) PAR_INVALID("weft_tp_mlp_shard: %s is NULL", full ? "local" : "full");
  PAR_CHECK(weft_tp_column_shard(tp, hidden, ffn, 1, full, local));
  size_t full1 = (size_t)hidden * ffn + ffn;
  return weft_tp_row_shard(tp, ffn, hidden, full + full1, local + weft_tp_column_nparams(tp, hidden, ffn));
}

typedef struct {
  float *xs, *hpre, *act, *work, *dact, *dxw;
} mlp_acts_t;

static mlp_acts_t split_acts(const weft_tp_t *tp, int hidden, int ffn, int tokens, float *acts) {
  size_t th = (size_t)tokens * hidden, tf = (size_t)tokens * (ffn / tp->size);
  mlp_acts_t a = {acts, acts + th, acts + th + tf, acts + th + 2 * tf, acts + 2 * th + 2 * tf,
                  acts + 2 * th + 3 * tf};
  return a;
}

ncclResult_t weft_tp_mlp_forward(const weft_tp_t *tp, int hidden, int ffn, const float *p, int tokens,
                                 const float *x, float *y, float *acts) {
  ncclResult_t res = weft_tp_check(tp, "weft_tp_mlp_forward", tokens, "ffn", ffn);
  if (res != ncclSuccess) return res;
  if (p == NULL || acts == NULL) PAR_INVALID("weft_tp_mlp_forward: %s is NULL", p ? "acts" : "p");
  mlp_acts_t a = split_acts(tp, hidden, ffn, tokens, acts);
  PAR_CHECK(weft_tp_column_forward(tp, hidden, ffn, p, tokens, x, a.xs, a.hpre));
  weft_par_gelu_rows(a.hpre, a.act, (size_t)tokens * (ffn / tp->size));
  return weft_tp_row_forward(tp, ffn, hidden, p + weft_tp_column_nparams(tp, hidden, ffn), tokens, a.act, y, a.work);
}

ncclResult_t weft_tp_mlp_backward(const weft_tp_t *tp, int hidden, int ffn, const float *p, float *g, int tokens,
                                  const float *dy, float *dx, float *acts) {
  ncclResult_t res = weft_tp_check(tp, "weft_tp_mlp_backward", tokens, "ffn", ffn);
  if (res != ncclSuccess) return res;
  if (p == NULL || g == NULL || acts == NULL) PAR_INVALID("weft_tp_mlp_backward: p, g or acts is NULL");
  mlp_acts_t a = split_acts(tp, hidden, ffn, tokens, acts);
  size_t off = weft_tp_column_nparams(tp, hidden, ffn);
  PAR_CHECK(weft_tp_row_backward(tp, ffn, hidden, p + off, g + off, tokens, a.act, dy, a.dact, a.work));
  weft_par_gelu_grad_mul(a.hpre, a.dact, (size_t)tokens * (ffn / tp->size));
  return weft_tp_column_backward(tp, hidden, ffn, p, g, tokens, a.xs, a.dact, dx, a.dxw);
}
