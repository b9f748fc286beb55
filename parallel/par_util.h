/*
 * par_util.h — helpers shared by the parallel layer's files: error reports
 * for bad arguments, propagation of NCCL results, 16-bit float conversion
 * and shard arithmetic.
 *
 * The parallel layer sits on the public API only, so it reports problems
 * the way a library user would: a line on stderr naming the call and the
 * offending value, and an ncclResult_t.
 */
#ifndef WEFT_PAR_UTIL_H
#define WEFT_PAR_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

// Prints "weft parallel: <fmt>" on stderr; returns `res` for convenience.
ncclResult_t weft_par_error(ncclResult_t res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Rejects a call: prints the message and returns ncclInvalidArgument.
#define PAR_INVALID(...) return weft_par_error(ncclInvalidArgument, __VA_ARGS__)

// Propagates a failed NCCL call, naming it.
#define PAR_CHECK(call)                                                                                \
  do {                                                                                                 \
    ncclResult_t r_ = (call);                                                                          \
    if (r_ != ncclSuccess) return weft_par_error(r_, "%s:%d: %s: %s", __FILE__, __LINE__, #call,       \
                                                 ncclGetErrorString(r_));                              \
  } while (0)

// The same inside a function with one cleanup label: sets `res` and jumps.
#define PAR_CHECK_GOTO(call, res, label)                                                                \
  do {                                                                                                  \
    (res) = (call);                                                                                     \
    if ((res) != ncclSuccess) {                                                                         \
      weft_par_error((res), "%s:%d: %s: %s", __FILE__, __LINE__, #call, ncclGetErrorString(res));       \
      goto label;                                                                                       \
    }                                                                                                   \
  } while (0)

// Elements per shard when `count` elements are split over n ranks; the
// last shard is padded up to the same size.
static inline size_t weft_par_shard_size(size_t count, int n) { return (count + (size_t)n - 1) / (size_t)n; }

// 16-bit floats stored as their bits: bfloat16 and IEEE half, rounded to
// nearest even.
uint16_t weft_par_to_bf16(float x);
float weft_par_from_bf16(uint16_t b);
uint16_t weft_par_to_fp16(float x);
float weft_par_from_fp16(uint16_t h);

#endif  // WEFT_PAR_UTIL_H
