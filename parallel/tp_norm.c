/*
 * tp_norm.c — the per-token layers of a transformer block: LayerNorm and
 * dropout. Both work token by token, so under sequence parallelism each
 * rank runs them on its own sequence shard only; LayerNorm's gamma and
 * beta then saw only that shard, and their gradients are all-reduced over
 * the group. Dropout's mask is a hash of (seed, global token, feature), so
 * every sharding draws the same mask as one rank would.
 */
#include <math.h>
#include <stdlib.h>

#include "tp_internal.h"

#define LN_EPS 1e-5f

size_t weft_tp_layernorm_nacts(int hidden, int rows) { return (size_t)rows * ((size_t)hidden + 1); }

ncclResult_t weft_tp_layernorm_forward(const weft_tp_t *tp, int hidden, const float *p, int rows, const float *x,
                                       float *y, float *acts) {
  ncclResult_t res = weft_tp_check(tp, "weft_tp_layernorm_forward", 0, NULL, 0);
  if (res != ncclSuccess) return res;
  if (hidden < 1 || rows < 1 || p == NULL || x == NULL || y == NULL || acts == NULL)
    PAR_INVALID("weft_tp_layernorm_forward: hidden=%d rows=%d or a NULL buffer", hidden, rows);
  float *xhat = acts, *rstd = acts + (size_t)rows * hidden;
  const float *gamma = p, *beta = p + hidden;
  for (int r = 0; r < rows; r++) {
    const float *xr = x + (size_t)r * hidden;
    float mean = 0, var = 0;
    for (int c = 0; c < hidden; c++) mean += xr[c];
    mean /= (float)hidden;
    for (int c = 0; c < hidden; c++) var += (xr[c] - mean) * (xr[c] - mean);
    rstd[r] = 1.0f / sqrtf(var / (float)hidden + LN_EPS);
    for (int c = 0; c < hidden; c++) {
      float n = (xr[c] - mean) * rstd[r];
      xhat[(size_t)r * hidden + c] = n;
      y[(size_t)r * hidden + c] = n * gamma[c] + beta[c];
    }
  }
  return ncclSuccess;
}

ncclResult_t weft_tp_layernorm_backward(const weft_tp_t *tp, int hidden, const float *p, float *g, int rows,
                                        const float *dy, float *dx, const float *acts) {
  ncclResult_t res = weft_tp_check(tp, "weft_tp_layernorm_backward", 0, NULL, 0);
  if (res != ncclSuccess) return res;
  if (hidden < 1 || rows < 1 || p == NULL || g == NULL || dy == NULL || dx == NULL || acts == NULL)
    PAR_INVALID("weft_tp_layernorm_backward: hidden=%d rows=%d or a NULL buffer", hidden, rows);
  const float *xhat = acts, *rstd = acts + (size_t)rows * hidden, *gamma = p;
  float *part = calloc(2 * (size_t)hidden, sizeof(float));  // dgamma | dbeta of these rows
  if (part == NULL) return weft_par_error(ncclSystemError, "weft_tp_layernorm_backward: out of memory");
  for (int r = 0; r < rows; r++) {
    const float *dr = dy + (size_t)r * hidden, *xr = xhat + (size_t)r * hidden;
    float mean_dn = 0, mean_dn_x = 0;
    for (int c = 0; c < hidden; c++) {
      float dn = dr[c] * gamma[c];
      mean_dn += dn;
      mean_dn_x += dn * xr[c];
      part[c] += dr[c] * xr[c];
      part[hidden + c] += dr[c];
    }
    mean_dn /= (float)hidden;
    mean_dn_x /= (float)hidden;
    for (int c = 0; c < hidden; c++)
      dx[(size_t)r * hidden + c] = (dr[c] * gamma[c] - mean_dn - xr[c] * mean_dn_x) * rstd[r];
  }
  if (tp->sequence_parallel) res = weft_tp_allreduce(tp, part, 2 * (size_t)hidden);
  for (int c = 0; c < 2 * hidden && res == ncclSuccess; c++) g[c] += part[c];
  free(part);
  return res;
}

// A uniform number in [0, 1) from (seed, token, feature): splitmix64.
static float dropout_uniform(unsigned long long seed, long token, int feature) {
  unsigned long long z = seed ^ ((unsigned long long)token * 0x9e3779b97f4a7c15ull) ^
                         ((unsigned long long)feature * 0xc2b2ae3d27d4eb4full);
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (float)(z >> 40) * (1.0f / 16777216.0f);
}

ncclResult_t weft_tp_dropout(const weft_tp_t *tp, int hidden, int tokens, float rate, unsigned long long seed,
                             const float *x, float *y) {
  ncclResult_t res = weft_tp_check(tp, "weft_tp_dropout", tokens, NULL, 0);
  if (res != ncclSuccess) return res;
  if (hidden < 1 || x == NULL || y == NULL || !(rate >= 0.0f && rate < 1.0f))
    PAR_INVALID("weft_tp_dropout: hidden=%d rate=%g (must be in [0,1)) or a NULL buffer", hidden, rate);
  int rows = weft_tp_local_rows(tp, tokens);
  long first = tp->sequence_parallel ? (long)tp->rank * rows : 0;
  float keep = 1.0f / (1.0f - rate);
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < hidden; c++) {
      size_t i = (size_t)r * hidden + c;
      y[i] = dropout_uniform(seed, first + r, c) < rate ? 0.0f : x[i] * keep;
    }
  return ncclSuccess;
}
