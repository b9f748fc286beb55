/*
 * cp_ring.c — ring attention's forward pass (see cp.h): K and V blocks go
 * round the context-parallel ring while each rank attends its queries to
 * the block it holds, merging the partial results with the online
 * softmax.
 *
 * Step j: this rank holds the K|V block of rank src = rank - j. Its two
 * local chunks of queries meet the block's two chunks of keys; with
 * chunks r and 2P-1-r on rank r, each pair either attends fully (query
 * chunk after key chunk), causally (the same chunk, only at step 0) or not
 * at all, and every step other than the first has exactly half of its
 * four pairs to compute on every rank: the load balance. While a step
 * computes, the block of the next step is already moving (ncclSend to
 * rank + 1 and ncclRecv from rank - 1, grouped, on the ring's stream).
 *
 * Online softmax, per query row: running max m and sum l, output o kept
 * unnormalised. A block with scores S (its row max mb) updates
 *   m' = max(m, mb), a = exp(m - m'), l = a l + sum exp(S - m'),
 *   o = a o + exp(S - m') V,
 * and at the end o /= l and lse = m + log l is kept for backward.
 */
#include <math.h>
#include <string.h>

#include "cp_internal.h"
#include "par_math.h"
#include "tp_internal.h"
#include "weft.h"

static int global_chunk(int size, int rank, int k) { return k == 0 ? rank : 2 * size - 1 - rank; }

int weft_cp_block_mask(const weft_cp_t *cp, int src, int q_chunk, int k_chunk) {
  int q = global_chunk(cp->size, cp->rank, q_chunk), k = global_chunk(cp->size, src, k_chunk);
  return q > k ? 1 : q == k ? 2 : 0;
}

void weft_cp_pack_kv(const weft_cp_shape_t *s, const float *qkv, float *kv) {
  size_t rows = (size_t)s->local * s->batch, hl = (size_t)s->hl;
  for (size_t r = 0; r < rows; r++) memcpy(kv + r * 2 * hl, qkv + r * 3 * hl + hl, 2 * hl * sizeof(float));
}

void weft_cp_unpack_kv(const weft_cp_shape_t *s, const float *kv, float *qkv) {
  size_t rows = (size_t)s->local * s->batch, hl = (size_t)s->hl;
  for (size_t r = 0; r < rows; r++) memcpy(qkv + r * 3 * hl + hl, kv + r * 2 * hl, 2 * hl * sizeof(float));
}

ncclResult_t weft_cp_ring_shift(const weft_cp_t *cp, const float *send, float *recv, size_t count) {
  int next = (cp->rank + 1) % cp->size, prev = (cp->rank + cp->size - 1) % cp->size;
  PAR_CHECK(ncclGroupStart());
  ncclResult_t res = ncclSend(send, count, ncclFloat32, next, cp->comm, cp->stream);
  if (res == ncclSuccess) res = ncclRecv(recv, count, ncclFloat32, prev, cp->comm, cp->stream);
  ncclResult_t end = ncclGroupEnd();
  if (res != ncclSuccess || end != ncclSuccess)
    return weft_par_error(res != ncclSuccess ? res : end, "weft_cp_ring_shift: %zu floats: %s", count,
                          ncclGetErrorString(res != ncclSuccess ? res : end));
  return ncclSuccess;
}

size_t weft_cp_ring_forward_scratch(const weft_cp_shape_t *s) {
  return 2 * weft_cp_kv_floats(s) + 2 * weft_cp_nstats(s) + (size_t)s->chunk * s->chunk;
}

// One block of `chunk` queries against `chunk` keys (mask 1: all, 2: key
// j <= query i), merged into o, m, l of those query rows.
static void block(const weft_cp_shape_t *s, int mask, const float *q, int ldq, const float *k, const float *v,
                  int ldkv, float *o, int ldo, float *m, float *l, float *sc) {
  int c = s->chunk, hd = s->head_dim;
  weft_tp_gemm(0, 1, c, c, hd, s->scale, q, ldq, k, ldkv, 0.0f, sc, c);
  for (int i = 0; i < c; i++) {
    float *row = sc + (size_t)i * c, mx = row[0], sum = 0;
    int n = mask == 2 ? i + 1 : c;
    for (int j = 1; j < n; j++) mx = row[j] > mx ? row[j] : mx;
    float m_new = mx > m[i] ? mx : m[i], a = m[i] == -INFINITY ? 0.0f : expf(m[i] - m_new);
    weft_par_exp_shift(row, (size_t)n, m_new);
    for (int j = 0; j < n; j++) sum += row[j];
    for (int j = n; j < c; j++) row[j] = 0.0f;
    l[i] = a * l[i] + sum;
    m[i] = m_new;
    float *orow = o + (size_t)i * ldo;
    for (int d = 0; d < hd; d++) orow[d] *= a;
  }
  weft_tp_gemm(0, 0, c, hd, c, 1.0f, sc, c, v, ldkv, 1.0f, o, ldo);
}

// The attention of every local query on the K|V block of rank `src`.
static void attend(const weft_cp_t *cp, const weft_cp_shape_t *s, int src, const float *qkv, const float *kv,
                   float *o, float *m, float *l, float *sc) {
  int b = s->batch, c = s->chunk, hl = s->hl, hd = s->head_dim;
  int ldq = b * 3 * hl, ldkv = b * 2 * hl, ldo = b * hl;
  for (int qc = 0; qc < 2; qc++)
    for (int kc = 0; kc < 2; kc++) {
      int mask = weft_cp_block_mask(cp, src, qc, kc);
      if (mask == 0) continue;
      for (int n = 0; n < b; n++)
        for (int h = 0; h < s->heads; h++) {
          size_t qrow = (size_t)qc * c * b + n, krow = (size_t)kc * c * b + n;
          size_t st = ((size_t)n * s->heads + h) * s->local + (size_t)qc * c;
          const float *k = kv + krow * 2 * hl + (size_t)h * hd;
          block(s, mask, qkv + qrow * 3 * hl + (size_t)h * hd, ldq, k, k + hl, ldkv, o + qrow * hl + (size_t)h * hd,
                ldo, m + st, l + st, sc);
        }
    }
}

ncclResult_t weft_cp_ring_forward(const weft_cp_t *cp, const weft_cp_shape_t *s, const float *qkv, float *o,
                                  float *lse, float *scratch) {
  size_t e = weft_cp_kv_floats(s), ns = weft_cp_nstats(s), rows = (size_t)s->local * s->batch;
  float *kv[2] = {scratch, scratch + e}, *m = scratch + 2 * e, *l = m + ns, *sc = l + ns;
  for (size_t i = 0; i < ns; i++) m[i] = -INFINITY, l[i] = 0.0f;
  memset(o, 0, rows * (size_t)s->hl * sizeof(float));
  weft_cp_pack_kv(s, qkv, kv[0]);
  for (int j = 0; j < cp->size; j++) {
    int src = (cp->rank - j + cp->size) % cp->size, more = j + 1 < cp->size;
    if (more) PAR_CHECK(weft_cp_ring_shift(cp, kv[j % 2], kv[(j + 1) % 2], e));
    attend(cp, s, src, qkv, kv[j % 2], o, m, l, sc);
    if (more) PAR_CHECK(weftStreamSynchronize(cp->stream));
  }
  int b = s->batch, hd = s->head_dim;
  for (int n = 0; n < b; n++)
    for (int h = 0; h < s->heads; h++)
      for (int p = 0; p < s->local; p++) {
        size_t st = ((size_t)n * s->heads + h) * s->local + (size_t)p;
        float *orow = o + ((size_t)p * b + n) * s->hl + (size_t)h * hd, inv = 1.0f / l[st];
        for (int d = 0; d < hd; d++) orow[d] *= inv;
        lse[st] = m[st] + logf(l[st]);
      }
  return ncclSuccess;
}
