/*
 * moe_expert.c — the experts a rank holds: GELU MLPs (h -> ffn -> h) run
 * on the rows routed to them, expert by expert, with their parameters
 * split over the tensor-parallel group as Megatron splits an MLP
 * (W1, b1 by columns; W2 by rows; b2 replicated). Each expert's output is
 * a partial sum over the TP ranks; one all-reduce over all the rows of all
 * the local experts completes them (and, backward, the input gradients),
 * so an expert that got no rows costs no extra call and every TP rank
 * makes the same calls.
 *
 * Local parameters of one expert, as weft_tp_mlp_shard lays them out:
 *   [W1_r (h x f/tp) | b1_r (f/tp) | W2_r (f/tp x h) | b2 (h)]
 */
#include <string.h>

#include "moe_internal.h"
#include "par_math.h"
#include "tp_internal.h"

ncclResult_t weft_moe_expert_shard(const weft_moe_t *moe, const float *full, float *local) {
  if (moe == NULL || full == NULL || local == NULL) PAR_INVALID("weft_moe_expert_shard: a NULL argument");
  return weft_tp_mlp_shard(&moe->tp, moe->cfg.hidden, moe->cfg.ffn, full, local);
}

ncclResult_t weft_moe_expert_unshard(const weft_moe_t *moe, const float *local, float *full, int replicated) {
  if (moe == NULL || full == NULL || local == NULL) PAR_INVALID("weft_moe_expert_unshard: a NULL argument");
  size_t h = (size_t)moe->cfg.hidden, f = (size_t)moe->cfg.ffn, fl = f / (size_t)moe->tp.size;
  size_t c0 = (size_t)moe->tp.rank * fl;  // this rank's first column of W1, row of W2
  const float *w1 = local, *b1 = w1 + h * fl, *w2 = b1 + fl, *b2 = w2 + fl * h;
  float *W1 = full, *B1 = W1 + h * f, *W2 = B1 + f, *B2 = W2 + f * h;
  for (size_t r = 0; r < h; r++) memcpy(W1 + r * f + c0, w1 + r * fl, fl * sizeof(float));
  memcpy(B1 + c0, b1, fl * sizeof(float));
  memcpy(W2 + c0 * h, w2, fl * h * sizeof(float));
  if (replicated) memcpy(B2, b2, h * sizeof(float));
  return ncclSuccess;
}

typedef struct {
  const float *w1, *b1, *w2, *b2;
} expert_params_t;

static expert_params_t expert_at(const moe_dims_t *d, const float *params, int l) {
  size_t h = (size_t)d->h, fl = (size_t)d->fl, n = h * fl + fl + fl * h + h;
  const float *p = params + n * (size_t)l;
  return (expert_params_t){p, p + h * fl, p + h * fl + fl, p + 2 * h * fl + fl};
}

ncclResult_t weft_moe_experts_forward(const weft_moe_t *moe, const moe_dims_t *d, const float *params,
                                      const int32_t *n, int rows, moe_acts_t *a) {
  int h = d->h, fl = d->fl;
  size_t at = 0;
  for (int l = 0; l < d->El; at += (size_t)n[l], l++) {
    if (n[l] == 0) continue;
    expert_params_t e = expert_at(d, params, l);
    const float *x = a->xe + at * h;
    float *hpre = a->hpre + at * fl, *act = a->act + at * fl, *y = a->ye + at * h;
    weft_tp_gemm(0, 0, n[l], fl, h, 1.0f, x, h, e.w1, fl, 0.0f, hpre, fl);
    for (int r = 0; r < n[l]; r++)
      for (int c = 0; c < fl; c++) hpre[(size_t)r * fl + c] += e.b1[c];
    weft_par_gelu_rows(hpre, act, (size_t)n[l] * fl);
    weft_tp_gemm(0, 0, n[l], h, fl, 1.0f, act, fl, e.w2, h, 0.0f, y, h);
  }
  PAR_CHECK(weft_tp_allreduce(&moe->tp, a->ye, (size_t)rows * h));
  at = 0;
  for (int l = 0; l < d->El; at += (size_t)n[l], l++) {
    expert_params_t e = expert_at(d, params, l);
    for (int r = 0; r < n[l]; r++)
      for (int c = 0; c < h; c++) a->ye[(at + r) * h + c] += e.b2[c];
  }
  return ncclSuccess;
}

static void add_scaled_column_sums(const float *m, int rows, int cols, float scale, float *out) {
  for (int c = 0; c < cols; c++) {
    float s = 0;
    for (int r = 0; r < rows; r++) s += m[(size_t)r * cols + c];
    out[c] += scale * s;
  }
}

ncclResult_t weft_moe_experts_backward(const weft_moe_t *moe, const moe_dims_t *d, const float *params,
                                       float *grads, const int32_t *n, int rows, moe_acts_t *a) {
  int h = d->h, fl = d->fl;
  float scale = moe->expert_grad_scale;
  size_t at = 0;
  for (int l = 0; l < d->El; at += (size_t)n[l], l++) {
    if (n[l] == 0) continue;
    expert_params_t e = expert_at(d, params, l), g = expert_at(d, grads, l);
    float *gw1 = (float *)g.w1, *gb1 = (float *)g.b1, *gw2 = (float *)g.w2, *gb2 = (float *)g.b2;
    const float *x = a->xe + at * h, *hpre = a->hpre + at * fl;
    float *act = a->act + at * fl, *dy = a->ye + at * h;
    weft_tp_gemm(1, 0, fl, h, n[l], scale, act, fl, dy, h, 1.0f, gw2, h);
    add_scaled_column_sums(dy, n[l], h, scale, gb2);
    weft_tp_gemm(0, 1, n[l], fl, h, 1.0f, dy, h, e.w2, h, 0.0f, act, fl);  // act now holds dH
    weft_par_gelu_grad_mul(hpre, act, (size_t)n[l] * fl);
    weft_tp_gemm(1, 0, h, fl, n[l], scale, x, h, act, fl, 1.0f, gw1, fl);
    add_scaled_column_sums(act, n[l], fl, scale, gb1);
    weft_tp_gemm(0, 1, n[l], h, fl, 1.0f, act, fl, e.w1, fl, 0.0f, dy, h);  // dX (partial over TP)
  }
  return weft_tp_allreduce(&moe->tp, a->ye, (size_t)rows * h);
}
