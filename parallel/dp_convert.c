/*
 * dp_convert.c — moving values between the parameter type of a
 * data-parallel engine (fp32, bf16 or fp16) and fp32.
 */
#include <string.h>

#include "dp_internal.h"

void weft_dp_to_float(weft_dp_precision_t precision, const void *src, float *dst, size_t n) {
  const uint16_t *h = src;
  switch (precision) {
    case WEFT_DP_FP32: memcpy(dst, src, n * sizeof(float)); break;
    case WEFT_DP_BF16: for (size_t i = 0; i < n; i++) dst[i] = weft_par_from_bf16(h[i]); break;
    default: for (size_t i = 0; i < n; i++) dst[i] = weft_par_from_fp16(h[i]); break;
  }
}

void weft_dp_from_float(weft_dp_precision_t precision, const float *src, void *dst, size_t n) {
  uint16_t *h = dst;
  switch (precision) {
    case WEFT_DP_FP32: memcpy(dst, src, n * sizeof(float)); break;
    case WEFT_DP_BF16: for (size_t i = 0; i < n; i++) h[i] = weft_par_to_bf16(src[i]); break;
    default: for (size_t i = 0; i < n; i++) h[i] = weft_par_to_fp16(src[i]); break;
  }
}

void weft_dp_add_float(weft_dp_precision_t precision, const float *src, void *dst, size_t n) {
  float *f = dst;
  uint16_t *h = dst;
  switch (precision) {
    case WEFT_DP_FP32: for (size_t i = 0; i < n; i++) f[i] += src[i]; break;
    case WEFT_DP_BF16:
      for (size_t i = 0; i < n; i++) h[i] = weft_par_to_bf16(weft_par_from_bf16(h[i]) + src[i]);
      break;
    default:
      for (size_t i = 0; i < n; i++) h[i] = weft_par_to_fp16(weft_par_from_fp16(h[i]) + src[i]);
      break;
  }
}
