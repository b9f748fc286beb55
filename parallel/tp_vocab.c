/*
 * tp_vocab.c — vocabulary-parallel embedding and cross-entropy.
 *
 * Rank r owns vocabulary rows [r*R, min(V, (r+1)*R)) with R = ceil(V/size).
 * Embedding: each rank writes the rows of the tokens it owns (zeros for the
 * others) and the group sum (all-reduce; SP: reduce-scatter) completes
 * the lookup. Cross-entropy on logits split by vocabulary: the row maximum
 * is an all-reduce MAX and the softmax denominator and the target's logit
 * one all-reduce SUM of 2T values, so no rank ever holds a full logit row.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "par_math.h"
#include "tp_internal.h"

int weft_tp_vocab_rows(const weft_tp_t *tp, int vocab) { return (int)weft_par_shard_size((size_t)vocab, tp->size); }

// This rank's vocabulary range [*lo, *hi).
static void vocab_range(const weft_tp_t *tp, int vocab, int *lo, int *hi) {
  int rows = weft_tp_vocab_rows(tp, vocab);
  *lo = tp->rank * rows;
  *hi = *lo + rows < vocab ? *lo + rows : vocab;
  if (*hi < *lo) *hi = *lo;
}

static ncclResult_t check_vocab(const weft_tp_t *tp, const char *api, int vocab, int hidden, int tokens) {
  ncclResult_t res = weft_tp_check(tp, api, tokens, NULL, 0);
  if (res != ncclSuccess) return res;
  if (vocab < 1 || hidden < 1) PAR_INVALID("%s: vocab=%d hidden=%d, both must be at least 1", api, vocab, hidden);
  return ncclSuccess;
}

static ncclResult_t check_ids(const char *api, const int *ids, int tokens, int vocab) {
  if (ids == NULL) PAR_INVALID("%s: token ids are NULL", api);
  for (int t = 0; t < tokens; t++)
    if (ids[t] < 0 || ids[t] >= vocab) PAR_INVALID("%s: token %d has id %d, outside 0..%d", api, t, ids[t], vocab - 1);
  return ncclSuccess;
}

ncclResult_t weft_tp_vocab_shard(const weft_tp_t *tp, int vocab, int hidden, const float *full, float *local) {
  ncclResult_t res = check_vocab(tp, "weft_tp_vocab_shard", vocab, hidden, 0);
  if (res != ncclSuccess) return res;
  if (full == NULL || local == NULL) PAR_INVALID("weft_tp_vocab_shard: %s is NULL", full ? "local" : "full");
  int lo, hi, rows = weft_tp_vocab_rows(tp, vocab);
  vocab_range(tp, vocab, &lo, &hi);
  memset(local, 0, (size_t)rows * hidden * sizeof(float));
  memcpy(local, full + (size_t)lo * hidden, (size_t)(hi - lo) * hidden * sizeof(float));
  return ncclSuccess;
}

ncclResult_t weft_tp_embed_forward(const weft_tp_t *tp, int vocab, int hidden, const float *p, int tokens,
                                   const int *ids, float *y, float *work) {
  ncclResult_t res = check_vocab(tp, "weft_tp_embed_forward", vocab, hidden, tokens);
  if (res == ncclSuccess) res = check_ids("weft_tp_embed_forward", ids, tokens, vocab);
  if (res != ncclSuccess) return res;
  if (p == NULL || y == NULL || (tp->sequence_parallel && work == NULL))
    PAR_INVALID("weft_tp_embed_forward: p, y or work is NULL");
  int lo, hi;
  vocab_range(tp, vocab, &lo, &hi);
  float *partial = tp->sequence_parallel ? work : y;
  for (int t = 0; t < tokens; t++) {
    float *row = partial + (size_t)t * hidden;
    if (ids[t] >= lo && ids[t] < hi)
      memcpy(row, p + (size_t)(ids[t] - lo) * hidden, (size_t)hidden * sizeof(float));
    else
      memset(row, 0, (size_t)hidden * sizeof(float));
  }
  if (tp->sequence_parallel) return weft_tp_scatter_rows(tp, work, y, weft_tp_local_rows(tp, tokens), hidden);
  return weft_tp_allreduce(tp, y, (size_t)tokens * hidden);
}

ncclResult_t weft_tp_embed_backward(const weft_tp_t *tp, int vocab, int hidden, float *g, int tokens, const int *ids,
                                    const float *dy, float *work) {
  ncclResult_t res = check_vocab(tp, "weft_tp_embed_backward", vocab, hidden, tokens);
  if (res == ncclSuccess) res = check_ids("weft_tp_embed_backward", ids, tokens, vocab);
  if (res != ncclSuccess) return res;
  if (g == NULL || dy == NULL || (tp->sequence_parallel && work == NULL))
    PAR_INVALID("weft_tp_embed_backward: g, dy or work is NULL");
  int lo, hi;
  vocab_range(tp, vocab, &lo, &hi);
  const float *full = dy;
  if (tp->sequence_parallel) {
    PAR_CHECK(weft_tp_gather_rows(tp, dy, work, weft_tp_local_rows(tp, tokens), hidden));
    full = work;
  }
  for (int t = 0; t < tokens; t++) {
    if (ids[t] < lo || ids[t] >= hi) continue;
    float *row = g + (size_t)(ids[t] - lo) * hidden;
    for (int c = 0; c < hidden; c++) row[c] += full[(size_t)t * hidden + c];
  }
  return ncclSuccess;
}

ncclResult_t weft_tp_vocab_cross_entropy(const weft_tp_t *tp, int vocab, int tokens, const float *logits,
                                         const int *targets, float *loss, float *dlogits, float *work) {
  ncclResult_t res = check_vocab(tp, "weft_tp_vocab_cross_entropy", vocab, 1, tokens);
  if (res == ncclSuccess) res = check_ids("weft_tp_vocab_cross_entropy", targets, tokens, vocab);
  if (res != ncclSuccess) return res;
  if (logits == NULL || loss == NULL || work == NULL)
    PAR_INVALID("weft_tp_vocab_cross_entropy: logits, loss or work is NULL");
  int lo, hi, cols = weft_tp_vocab_rows(tp, vocab);
  vocab_range(tp, vocab, &lo, &hi);
  float *mx = work, *sum = work + tokens, *target = work + 2 * tokens;  // sum and target: one all-reduce
  for (int t = 0; t < tokens; t++) {
    const float *row = logits + (size_t)t * cols;
    mx[t] = -INFINITY;
    for (int c = 0; c < hi - lo; c++) mx[t] = row[c] > mx[t] ? row[c] : mx[t];
  }
  if (tp->size > 1) PAR_CHECK(ncclAllReduce(mx, mx, (size_t)tokens, ncclFloat32, ncclMax, tp->comm, NULL));
  for (int t = 0; t < tokens; t++) {
    const float *row = logits + (size_t)t * cols;
    sum[t] = 0;
    for (int c = 0; c < hi - lo; c++) sum[t] += weft_par_expf(row[c] - mx[t]);
    target[t] = targets[t] >= lo && targets[t] < hi ? row[targets[t] - lo] : 0.0f;
  }
  PAR_CHECK(weft_tp_allreduce(tp, sum, 2 * (size_t)tokens));
  double total = 0;
  for (int t = 0; t < tokens; t++) total += logf(sum[t]) + mx[t] - target[t];
  *loss = (float)(total / tokens);
  if (dlogits == NULL) return ncclSuccess;
  float inv_t = 1.0f / (float)tokens;
  for (int t = 0; t < tokens; t++) {
    const float *row = logits + (size_t)t * cols;
    float *drow = dlogits + (size_t)t * cols;
    for (int c = 0; c < cols; c++) {
      if (c >= hi - lo) {
        drow[c] = 0;  // padding columns of the last range
        continue;
      }
      float prob = weft_par_expf(row[c] - mx[t]) / sum[t];
      drow[c] = (prob - (targets[t] == lo + c ? 1.0f : 0.0f)) * inv_t;
    }
  }
  return ncclSuccess;
}
