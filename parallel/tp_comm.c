/*
 * tp_comm.c — the tensor-parallel group: setup, argument checks, the GEMM
 * wrapper and the collectives that move activation rows (all-reduce for
 * plain TP, all-gather / reduce-scatter along the sequence for SP).
 */
#include <cblas.h>
#include <string.h>

#include "tp_internal.h"

ncclResult_t weft_tp_init(weft_tp_t *tp, ncclComm_t comm, int sequence_parallel) {
  if (tp == NULL) PAR_INVALID("weft_tp_init: tp is NULL");
  *tp = (weft_tp_t){.comm = comm, .size = 1, .rank = 0, .sequence_parallel = sequence_parallel != 0};
  if (comm == NULL) return ncclSuccess;
  PAR_CHECK(ncclCommCount(comm, &tp->size));
  PAR_CHECK(ncclCommUserRank(comm, &tp->rank));
  return ncclSuccess;
}

int weft_tp_local_rows(const weft_tp_t *tp, int tokens) {
  return tp->sequence_parallel ? tokens / tp->size : tokens;
}

ncclResult_t weft_tp_check(const weft_tp_t *tp, const char *api, int tokens, const char *dim_name, int dim) {
  if (tp == NULL) PAR_INVALID("%s: tp is NULL", api);
  if (tp->size < 1 || tp->rank < 0 || tp->rank >= tp->size || (tp->size > 1 && tp->comm == NULL))
    PAR_INVALID("%s: tp (size=%d rank=%d) was not set up by weft_tp_init", api, tp->size, tp->rank);
  if (tokens == 0) tokens = tp->size;  // a call without tokens (sharding, per-row layers)
  if (tokens < 1) PAR_INVALID("%s: tokens=%d, need at least 1", api, tokens);
  if (tp->sequence_parallel && tokens % tp->size != 0)
    PAR_INVALID("%s: sequence parallel needs tokens (%d) divisible by the group size (%d)", api, tokens, tp->size);
  if (dim_name != NULL && (dim < 1 || dim % tp->size != 0))
    PAR_INVALID("%s: %s=%d is not a positive multiple of the group size %d", api, dim_name, dim, tp->size);
  return ncclSuccess;
}

void weft_tp_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                  const float *b, int ldb, float beta, float *c, int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k,
              alpha, a, lda, b, ldb, beta, c, ldc);
}

ncclResult_t weft_tp_allreduce(const weft_tp_t *tp, float *buf, size_t count) {
  if (tp->size == 1) return ncclSuccess;
  PAR_CHECK(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, tp->comm, NULL));
  return ncclSuccess;
}

ncclResult_t weft_tp_gather_rows(const weft_tp_t *tp, const float *local, float *full, int rows, int cols) {
  size_t n = (size_t)rows * (size_t)cols;
  if (tp->size == 1) {
    if (full != local) memmove(full, local, n * sizeof(float));
    return ncclSuccess;
  }
  PAR_CHECK(ncclAllGather(local, full, n, ncclFloat32, tp->comm, NULL));
  return ncclSuccess;
}

ncclResult_t weft_tp_scatter_rows(const weft_tp_t *tp, const float *full, float *local, int rows, int cols) {
  size_t n = (size_t)rows * (size_t)cols;
  if (tp->size == 1) {
    if (full != local) memmove(local, full, n * sizeof(float));
    return ncclSuccess;
  }
  PAR_CHECK(ncclReduceScatter(full, local, n, ncclFloat32, ncclSum, tp->comm, NULL));
  return ncclSuccess;
}

void weft_tp_add_column_sums(const float *m, int rows, int cols, float *out) {
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < cols; c++) out[c] += m[(size_t)r * cols + c];
}
