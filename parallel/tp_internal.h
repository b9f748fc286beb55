/*
 * tp_internal.h — what the tensor-parallel files share: the GEMM wrapper
 * and the group's collectives on rows of activations.
 */
#ifndef WEFT_PAR_TP_INTERNAL_H
#define WEFT_PAR_TP_INTERNAL_H

#include "par_util.h"
#include "tp.h"

// C = alpha * op(A) op(B) + beta * C, row-major; op transposes when the
// flag is set. M x N result, K the inner size.
void weft_tp_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                  const float *b, int ldb, float beta, float *c, int ldc);

// Sum over the group, in place (nothing for one rank).
ncclResult_t weft_tp_allreduce(const weft_tp_t *tp, float *buf, size_t count);
// Rows [r*rows .. ) of `full` (size*rows x cols) from every rank's `local`.
ncclResult_t weft_tp_gather_rows(const weft_tp_t *tp, const float *local, float *full, int rows, int cols);
// This rank's `rows` rows of the group sum of `full` (size*rows x cols).
ncclResult_t weft_tp_scatter_rows(const weft_tp_t *tp, const float *full, float *local, int rows, int cols);

// Sum over rows of a rows x cols matrix, added into out[cols].
void weft_tp_add_column_sums(const float *m, int rows, int cols, float *out);

// Checks shared by the layers: tp valid, tokens >= 1 and divisible by the
// group size under sequence parallelism (tokens = 0: a call that takes no
// tokens), and the named dimension divisible by the group size.
ncclResult_t weft_tp_check(const weft_tp_t *tp, const char *api, int tokens, const char *dim_name, int dim);

#endif  // WEFT_PAR_TP_INTERNAL_H
