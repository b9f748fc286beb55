/*
 * tp_linear.c — column- and row-parallel linear layers (see tp.h).
 *
 * Column-parallel: every rank multiplies the whole input by its columns of
 * W; the input gradient is a partial sum over the ranks' columns, so the
 * backward all-reduces it (SP: reduce-scatters it back to sequence
 * shards, and the forward all-gathers the input first).
 * Row-parallel: every rank multiplies its slice of the features by its rows
 * of W; the output is a partial sum, all-reduced in forward (SP:
 * reduce-scattered), and the backward needs no communication (SP: an
 * all-gather of the output gradient).
 */
#include <stdlib.h>
#include <string.h>

#include "tp_internal.h"

size_t weft_tp_column_nparams(const weft_tp_t *tp, int in, int out) {
  size_t out_l = (size_t)out / (size_t)tp->size;
  return (size_t)in * out_l + out_l;
}

size_t weft_tp_row_nparams(const weft_tp_t *tp, int in, int out) {
  return (size_t)in / (size_t)tp->size * (size_t)out + (size_t)out;
}

ncclResult_t weft_tp_column_shard(const weft_tp_t *tp, int in, int out, int parts, const float *full, float *local) {
  ncclResult_t res = weft_tp_check(tp, "weft_tp_column_shard", 0, NULL, 0);
  if (res != ncclSuccess) return res;
  if (full == NULL || local == NULL) PAR_INVALID("weft_tp_column_shard: %s is NULL", full ? "local" : "full");
  if (parts < 1 || out < 1 || out % (parts * tp->size) != 0)
    PAR_INVALID("weft_tp_column_shard: out=%d does not split into %d parts x %d ranks", out, parts, tp->size);
  int out_l = out / tp->size, group = out / parts, width = group / tp->size;
  for (int i = 0; i <= in; i++) {  // row `in` is the bias
    const float *src = full + (size_t)i * out;
    float *dst = local + (size_t)i * out_l;
    for (int q = 0; q < parts; q++)
      memcpy(dst + q * width, src + q * group + tp->rank * width, (size_t)width * sizeof(float));
  }
  return ncclSuccess;
}

ncclResult_t weft_tp_row_shard(const weft_tp_t *tp, int in, int out, const float *full, float *local) {
  ncclResult_t res = weft_tp_check(tp, "weft_tp_row_shard", 0, "in", in);
  if (res != ncclSuccess) return res;
  if (full == NULL || local == NULL || out < 1)
    PAR_INVALID("weft_tp_row_shard: bad arguments (full=%p local=%p out=%d)", (const void *)full, (void *)local, out);
  size_t in_l = (size_t)in / (size_t)tp->size;
  memcpy(local, full + in_l * (size_t)tp->rank * out, in_l * (size_t)out * sizeof(float));
  memcpy(local + in_l * out, full + (size_t)in * out, (size_t)out * sizeof(float));
  return ncclSuccess;
}

static void add_bias(float *y, const float *b, int rows, int cols) {
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < cols; c++) y[(size_t)r * cols + c] += b[c];
}

ncclResult_t weft_tp_column_forward(const weft_tp_t *tp, int in, int out, const float *p, int tokens,
                                    const float *x, float *xs, float *y) {
  ncclResult_t res = weft_tp_check(tp, "weft_tp_column_forward", tokens, "out", out);
  if (res != ncclSuccess) return res;
  if (in < 1 || p == NULL || x == NULL || xs == NULL || y == NULL)
    PAR_INVALID("weft_tp_column_forward: in=%d or a NULL buffer", in);
  int out_l = out / tp->size;
  if (tp->sequence_parallel)
    PAR_CHECK(weft_tp_gather_rows(tp, x, xs, weft_tp_local_rows(tp, tokens), in));
  else if (xs != x)
    memcpy(xs, x, (size_t)tokens * in * sizeof(float));
  weft_tp_gemm(0, 0, tokens, out_l, in, 1.0f, xs, in, p, out_l, 0.0f, y, out_l);
  add_bias(y, p + (size_t)in * out_l, tokens, out_l);
  return ncclSuccess;
}

ncclResult_t weft_tp_column_backward(const weft_tp_t *tp, int in, int out, const float *p, float *g, int tokens,
                                     const float *xs, const float *dy, float *dx, float *work) {
  ncclResult_t res = weft_tp_check(tp, "weft_tp_column_backward", tokens, "out", out);
  if (res != ncclSuccess) return res;
  if (in < 1 || p == NULL || g == NULL || xs == NULL || dy == NULL || dx == NULL ||
      (tp->sequence_parallel && work == NULL))
    PAR_INVALID("weft_tp_column_backward: in=%d or a NULL buffer", in);
  int out_l = out / tp->size;
  weft_tp_gemm(1, 0, in, out_l, tokens, 1.0f, xs, in, dy, out_l, 1.0f, g, out_l);
  weft_tp_add_column_sums(dy, tokens, out_l, g + (size_t)in * out_l);
  float *full = tp->sequence_parallel ? work : dx;
  weft_tp_gemm(0, 1, tokens, in, out_l, 1.0f, dy, out_l, p, out_l, 0.0f, full, in);
  if (tp->sequence_parallel) return weft_tp_scatter_rows(tp, work, dx, weft_tp_local_rows(tp, tokens), in);
  return weft_tp_allreduce(tp, dx, (size_t)tokens * in);
}

ncclResult_t weft_tp_row_forward(const weft_tp_t *tp, int in, int out, const float *p, int tokens, const float *x,
                                 float *y, float *work) {
  ncclResult_t res = weft_tp_check(tp, "weft_tp_row_forward", tokens, "in", in);
  if (res != ncclSuccess) return res;
  if (out < 1 || p == NULL || x == NULL || y == NULL || (tp->sequence_parallel && work == NULL))
    PAR_INVALID("weft_tp_row_forward: out=%d or a NULL buffer", out);
  int in_l = in / tp->size, rows = weft_tp_local_rows(tp, tokens);
  float *partial = tp->sequence_parallel ? work : y;
  weft_tp_gemm(0, 0, tokens, out, in_l, 1.0f, x, in_l, p, out, 0.0f, partial, out);
  if (tp->sequence_parallel)
    PAR_CHECK(weft_tp_scatter_rows(tp, work, y, rows, out));
  else
    PAR_CHECK(weft_tp_allreduce(tp, y, (size_t)tokens * out));
  add_bias(y, p + (size_t)in_l * out, rows, out);
  return ncclSuccess;
}

ncclResult_t weft_tp_row_backward(const weft_tp_t *tp, int in, int out, const float *p, float *g, int tokens,
                                  const float *x, const float *dy, float *dx, float *work) {
  ncclResult_t res = weft_tp_check(tp, "weft_tp_row_backward", tokens, "in", in);
  if (res != ncclSuccess) return res;
  if (out < 1 || p == NULL || g == NULL || x == NULL || dy == NULL || dx == NULL ||
      (tp->sequence_parallel && work == NULL))
    PAR_INVALID("weft_tp_row_backward: out=%d or a NULL buffer", out);
  int in_l = in / tp->size, rows = weft_tp_local_rows(tp, tokens);
  const float *dy_full = dy;
  if (tp->sequence_parallel) {
    PAR_CHECK(weft_tp_gather_rows(tp, dy, work, rows, out));
    dy_full = work;
  }
  weft_tp_gemm(1, 0, in_l, out, tokens, 1.0f, x, in_l, dy_full, out, 1.0f, g, out);
  weft_tp_gemm(0, 1, tokens, in_l, out, 1.0f, dy_full, out, p, out, 0.0f, dx, in_l);
  float *gb = g + (size_t)in_l * out;
  if (!tp->sequence_parallel) {
    weft_tp_add_column_sums(dy, tokens, out, gb);
    return ncclSuccess;
  }
  // The bias saw only this rank's sequence shard: sum the shards' parts.
  float *part = calloc((size_t)out, sizeof(float));
  if (part == NULL) return weft_par_error(ncclSystemError, "weft_tp_row_backward: out of memory");
  weft_tp_add_column_sums(dy, rows, out, part);
  res = weft_tp_allreduce(tp, part, (size_t)out);
  for (int c = 0; c < out && res == ncclSuccess; c++) gb[c] += part[c];
  free(part);
  return res;
}
