/*
 * moe_route.c — the router of the mixture-of-experts layer (rules in
 * moe.h): logits = x · W_r, softmax, the top k, the combine weights, the
 * load-balancing loss, and the capacity rule that decides which
 * assignments an over-full expert drops. Then the way back: from each
 * slot's weight gradient (and the loss's own gradient) to the router's
 * weights and the layer's input.
 *
 * Everything here is a function of this rank's tokens alone (and, in a
 * routing group, of the group's counts and capacity decision,
 * moe_capacity.c), computed in a fixed order, so every EP layout routes
 * and drops exactly as one rank does on the same tokens.
 */
#include <stdlib.h>
#include <string.h>

#include "moe_internal.h"
#include "par_math.h"
#include "tp_internal.h"

static void softmax_rows(float *v, int rows, int cols) {
  for (int r = 0; r < rows; r++) {
    float *row = v + (size_t)r * cols, max = row[0], sum = 0;
    for (int c = 1; c < cols; c++) max = row[c] > max ? row[c] : max;
    weft_par_exp_shift(row, (size_t)cols, max);
    for (int c = 0; c < cols; c++) sum += row[c];
    for (int c = 0; c < cols; c++) row[c] /= sum;
  }
}

// The k largest of a row, largest first; ties go to the lower index.
static void top_k(const float *row, int cols, int k, int32_t *out) {
  for (int i = 0; i < k; i++) {
    int best = -1;
    for (int c = 0; c < cols; c++) {
      int taken = 0;
      for (int j = 0; j < i && !taken; j++) taken = out[j] == c;
      if (!taken && (best < 0 || row[c] > row[best])) best = c;
    }
    out[i] = best;
  }
}

static float chosen_sum(const float *row, const int32_t *chosen, int k) {
  float s = 0;
  for (int i = 0; i < k; i++) s += row[chosen[i]];
  return s;
}

ncclResult_t weft_moe_route(const weft_moe_t *moe, const moe_dims_t *d, const float *router, const float *x,
                            moe_acts_t *a) {
  int T = d->T, E = d->E, k = d->k;
  size_t tk = (size_t)T * k;
  weft_tp_gemm(0, 0, T, E, d->h, 1.0f, x, d->h, router, E, 0.0f, a->probs, E);
  softmax_rows(a->probs, T, E);
  memset(a->routed, 0, (size_t)E * sizeof(int32_t));
  for (int t = 0; t < T; t++) {
    const float *row = a->probs + (size_t)t * E;
    int32_t *chosen = a->expert + (size_t)t * k;
    top_k(row, E, k, chosen);
    float sum = moe->cfg.renormalize ? chosen_sum(row, chosen, k) : 1.0f;
    for (int i = 0; i < k; i++) {
      a->weight[(size_t)t * k + i] = moe->cfg.renormalize ? row[chosen[i]] / sum : row[chosen[i]];
      a->routed[chosen[i]]++;
    }
  }
  // Switch's loss: coef * E * sum_i f_i P_i (f before dropping, over the routing group).
  PAR_CHECK(weft_moe_group_routed(moe, d, a));
  double aux = 0, group_tk = (double)tk * moe->route_size;
  for (int e = 0; e < E && moe->cfg.aux_coef > 0; e++) {
    double mass = 0;
    for (int t = 0; t < T; t++) mass += a->probs[(size_t)t * E + e];
    aux += (double)a->grouted[e] / group_tk * (mass / T);
  }
  a->aux[0] = (float)(moe->cfg.aux_coef * E * aux);
  // Each expert's assignments in token order, then the capacity.
  int32_t *order = malloc((tk + (size_t)E + 1) * sizeof(int32_t));
  if (order == NULL) return weft_par_error(ncclSystemError, "weft_moe_forward: out of memory for %d tokens", T);
  int32_t *start = order + tk;
  start[0] = 0;
  for (int e = 0; e < E; e++) start[e + 1] = start[e] + a->routed[e];
  for (size_t s = 0; s < tk; s++) order[start[a->expert[s]]++] = (int32_t)s;
  for (int e = E; e > 0; e--) start[e] = start[e - 1];  // the fill moved each start to its end
  start[0] = 0;
  ncclResult_t res = weft_moe_apply_capacity(moe, d, a);
  // Rows in send: expert blocks (padded to `fixed`, or back to back), kept tokens in token order.
  for (int e = 0, base = 0; e < E && res == ncclSuccess; e++) {
    int next = d->fixed ? e * d->fixed : base;
    for (int32_t j = start[e]; j < start[e + 1]; j++)
      if (a->pos[order[j]] == 0) a->pos[order[j]] = next++;
    base += a->scount[e];
  }
  free(order);
  return res;
}

void weft_moe_route_backward(const weft_moe_t *moe, const moe_dims_t *d, const float *router, float *grouter,
                             moe_acts_t *a, float *dx) {
  int T = d->T, E = d->E, k = d->k;
  float *dp = a->dprobs;
  memset(dp, 0, (size_t)T * E * sizeof(float));
  if (moe->cfg.aux_coef > 0)  // d aux / d p_i(t) = coef * E * f_i / T, for every token
    for (int e = 0; e < E; e++) {
      float g = (float)(moe->cfg.aux_coef * E * ((double)a->grouted[e] / ((double)T * k * moe->route_size)) / T);
      for (int t = 0; t < T; t++) dp[(size_t)t * E + e] = g;
    }
  for (int t = 0; t < T; t++) {
    const float *row = a->probs + (size_t)t * E, *w = a->weight + (size_t)t * k, *dw = a->dweight + (size_t)t * k;
    const int32_t *chosen = a->expert + (size_t)t * k;
    float *dpt = dp + (size_t)t * E;
    if (moe->cfg.renormalize) {  // w_i = p_i / S: dp_j = (dw_j - sum_i dw_i w_i) / S
      float sum = chosen_sum(row, chosen, k), dot = 0;
      for (int i = 0; i < k; i++) dot += dw[i] * w[i];
      for (int i = 0; i < k; i++) dpt[chosen[i]] += (dw[i] - dot) / sum;
    } else {
      for (int i = 0; i < k; i++) dpt[chosen[i]] += dw[i];
    }
    float s = 0;  // softmax: dlogit_j = p_j (dp_j - sum_i p_i dp_i)
    for (int e = 0; e < E; e++) s += row[e] * dpt[e];
    for (int e = 0; e < E; e++) dpt[e] = row[e] * (dpt[e] - s);
  }
  weft_tp_gemm(1, 0, d->h, E, T, 1.0f, a->xs, d->h, dp, E, 1.0f, grouter, E);
  weft_tp_gemm(0, 1, T, d->h, E, 1.0f, dp, E, router, E, 1.0f, dx, d->h);
}
