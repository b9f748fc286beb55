/*
 * cp_ring_grad.c — ring attention's backward pass (see cp.h, cp_ring.c).
 *
 * The K|V blocks go round the ring again, and with each one the gradient
 * dK|dV its owner will receive. At step j this rank holds the block of
 * rank src = rank - j; it recomputes the probabilities of its queries on
 * that block from the forward's log-sum-exp, P = exp(S - lse), and
 *   dV += Pᵀ dO,  dS = P * (dO Vᵀ - D) * scale,  dQ += dS K,  dK += dSᵀ Q,
 * with D = rowsum(dO * O) (the softmax's correction, once per query row).
 * dQ stays; the block's dK|dV is this rank's part added to what the ranks
 * before it accumulated, and goes on to rank + 1.
 *
 * To overlap, the part is computed into a fresh buffer while the
 * accumulated dK|dV of the same block is still arriving; they are added
 * after the step. One grouped transfer per step carries both the next
 * step's K|V and the previous step's accumulated dK|dV (one message, so a
 * step has a single send to rank + 1):
 *   step j sends [K|V of block j (if j < P-1) | dK|dV of block j-1 (if j > 0)]
 * and after step P-1 the dK|dV of block P-1, complete, goes to its owner,
 * rank + 1, while this rank's own comes from rank - 1.
 */
#include <math.h>
#include <string.h>

#include "cp_internal.h"
#include "par_math.h"
#include "tp_internal.h"
#include "weft.h"

size_t weft_cp_ring_backward_scratch(const weft_cp_shape_t *s) {
  return 8 * weft_cp_kv_floats(s) + weft_cp_nstats(s) + 2 * (size_t)s->chunk * s->chunk;
}

typedef struct {
  const float *q, *k, *v, *dout, *lse, *delta;
  float *dq, *dk, *dv;
  int ldq, ldkv, ldo;
} grad_block_t;

static void block_grad(const weft_cp_shape_t *s, int mask, const grad_block_t *g, float *p, float *dp) {
  int c = s->chunk, hd = s->head_dim;
  weft_tp_gemm(0, 1, c, c, hd, s->scale, g->q, g->ldq, g->k, g->ldkv, 0.0f, p, c);
  for (int i = 0; i < c; i++) {
    int n = mask == 2 ? i + 1 : c;
    float *row = p + (size_t)i * c;
    weft_par_exp_shift(row, (size_t)n, g->lse[i]);
    for (int j = n; j < c; j++) row[j] = 0.0f;
  }
  weft_tp_gemm(1, 0, c, hd, c, 1.0f, p, c, g->dout, g->ldo, 1.0f, g->dv, g->ldkv);
  weft_tp_gemm(0, 1, c, c, hd, 1.0f, g->dout, g->ldo, g->v, g->ldkv, 0.0f, dp, c);
  for (int i = 0; i < c; i++) {
    const float *pr = p + (size_t)i * c;
    float *dr = dp + (size_t)i * c;
    for (int j = 0; j < c; j++) dr[j] = pr[j] * (dr[j] - g->delta[i]) * s->scale;
  }
  weft_tp_gemm(0, 0, c, hd, c, 1.0f, dp, c, g->k, g->ldkv, 1.0f, g->dq, g->ldq);
  weft_tp_gemm(1, 0, c, hd, c, 1.0f, dp, c, g->q, g->ldq, 1.0f, g->dk, g->ldkv);
}

// This rank's queries against the block of rank `src` (kv): dQ into dqkv,
// the block's dK|dV part into dkv.
static void attend_grad(const weft_cp_t *cp, const weft_cp_shape_t *s, int src, const float *qkv, const float *kv,
                        const float *dout, const float *lse, const float *delta, float *dqkv, float *dkv, float *p,
                        float *dp) {
  int b = s->batch, c = s->chunk, hl = s->hl, hd = s->head_dim;
  for (int qc = 0; qc < 2; qc++)
    for (int kc = 0; kc < 2; kc++) {
      int mask = weft_cp_block_mask(cp, src, qc, kc);
      if (mask == 0) continue;
      for (int n = 0; n < b; n++)
        for (int h = 0; h < s->heads; h++) {
          size_t qrow = (size_t)qc * c * b + n, krow = (size_t)kc * c * b + n, col = (size_t)h * hd;
          size_t st = ((size_t)n * s->heads + h) * s->local + (size_t)qc * c;
          grad_block_t g = {qkv + qrow * 3 * hl + col, kv + krow * 2 * hl + col, kv + krow * 2 * hl + hl + col,
                            dout + qrow * hl + col, lse + st, delta + st, dqkv + qrow * 3 * hl + col,
                            dkv + krow * 2 * hl + col, dkv + krow * 2 * hl + hl + col, b * 3 * hl, b * 2 * hl, b * hl};
          block_grad(s, mask, &g, p, dp);
        }
    }
}

// D = rowsum(dO * O) of every (sample, head, position).
static void softmax_delta(const weft_cp_shape_t *s, const float *o, const float *dout, float *delta) {
  int b = s->batch, hd = s->head_dim;
  for (int n = 0; n < b; n++)
    for (int h = 0; h < s->heads; h++)
      for (int pos = 0; pos < s->local; pos++) {
        size_t off = ((size_t)pos * b + n) * s->hl + (size_t)h * hd;
        float sum = 0;
        for (int d = 0; d < hd; d++) sum += o[off + d] * dout[off + d];
        delta[((size_t)n * s->heads + h) * s->local + pos] = sum;
      }
}

static void add(float *y, const float *x, size_t n) {
  for (size_t i = 0; i < n; i++) y[i] += x[i];
}

ncclResult_t weft_cp_ring_backward(const weft_cp_t *cp, const weft_cp_shape_t *s, const float *qkv, const float *o,
                                   const float *lse, const float *dout, float *dqkv, float *scratch) {
  size_t e = weft_cp_kv_floats(s), rows = (size_t)s->local * s->batch, cc = (size_t)s->chunk * s->chunk;
  // Messages [K|V | dK|dV]: send[j % 2] goes out at step j, recv[j % 2] comes in.
  float *send[2] = {scratch, scratch + 2 * e}, *recv[2] = {scratch + 4 * e, scratch + 6 * e};
  float *delta = scratch + 8 * e, *p = delta + weft_cp_nstats(s), *dp = p + cc;
  int P = cp->size;
  memset(dqkv, 0, rows * 3 * (size_t)s->hl * sizeof(float));
  softmax_delta(s, o, dout, delta);
  weft_cp_pack_kv(s, qkv, recv[1]);  // step 0's block: this rank's own
  for (int j = 0; j < P; j++) {
    int src = (cp->rank - j + P) % P, kv_next = j + 1 < P, dkv_prev = j > 0;
    float *kv = recv[(j + 1) % 2], *out = send[j % 2], *in = recv[j % 2], *part = send[(j + 1) % 2] + e;
    if (kv_next) memcpy(out, kv, e * sizeof(float));
    size_t skip = kv_next ? 0 : e, count = (kv_next + dkv_prev) * e;
    if (count > 0) PAR_CHECK(weft_cp_ring_shift(cp, out + skip, in + skip, count));
    memset(part, 0, e * sizeof(float));
    attend_grad(cp, s, src, qkv, kv, dout, lse, delta, dqkv, part, p, dp);
    if (count > 0) PAR_CHECK(weftStreamSynchronize(cp->stream));
    if (dkv_prev) add(part, in + e, e);  // what the ranks before this one added for the same block
  }
  float *mine = send[P % 2] + e;  // one rank: its part is the whole gradient
  if (P > 1) {
    PAR_CHECK(weft_cp_ring_shift(cp, mine, recv[0] + e, e));
    PAR_CHECK(weftStreamSynchronize(cp->stream));
    mine = recv[0] + e;
  }
  weft_cp_unpack_kv(s, mine, dqkv);
  return ncclSuccess;
}
