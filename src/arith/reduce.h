/*
 * reduce.h — the host memory backend's arithmetic: element-wise reductions
 * for all 12 datatypes and every NCCL op.
 *
 * ncclAvg and PreMulSum are lowered to a sum plus a transform: PreMulSum (and
 * Avg on floating types, as NCCL does) multiplies each rank's *local* operand
 * by a scalar the first time it enters the reduction; Avg on integer types
 * divides the final sum by nranks. fp16/bf16/fp8 compute in fp32 and round to
 * nearest even once per call. NaN propagates through max/min. Integer
 * arithmetic wraps (computed unsigned, so no undefined behaviour).
 */
#ifndef WEFT_REDUCE_H
#define WEFT_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

typedef enum { WEFT_RED_SUM = 0, WEFT_RED_PROD, WEFT_RED_MAX, WEFT_RED_MIN } weft_red_kind_t;

typedef struct {
  ncclDataType_t dtype;
  weft_red_kind_t kind;
  int prescale;     // 1: local operands are multiplied by the scalar first
  int64_t scale_i;  // the scalar, for integer types (wraps like the type)
  double scale_f;   // the scalar, for floating types
  int postdiv;      // > 1: final results are divided by this (integer Avg)
} weft_redop_t;

// dst[i] = in[i] OP pre(local[i]); then post(dst[i]) when `final`.
// dst may alias in or local. `in` is data already inside the reduction.
void weft_reduce(const weft_redop_t *op, void *dst, const void *in, const void *local,
                 size_t count, int final);

// dst[i] = pre(src[i]), then post when `final`: a local operand entering the
// reduction for the first time (or the whole result when nranks == 1).
// dst may equal src. op == NULL means a plain copy (memmove semantics).
void weft_reduce_first(const weft_redop_t *op, void *dst, const void *src, size_t count,
                       int final);

// Does weft_reduce_first change the data (prescale or postdiv present)?
int weft_redop_transforms(const weft_redop_t *op);

#endif
