/*
 * reduce_int.c — reduction loops for the six integer datatypes.
 *
 * Sums and products are computed on the unsigned type of the same width, so
 * they wrap like two's complement without undefined behaviour; the prescale
 * multiplies by the scalar the same way (only its low bits matter). Max and
 * min compare in the signed or unsigned type itself. The post-division
 * (integer Avg) truncates toward zero; the divisor is > 1, so no quotient can
 * overflow. For 8- and 32-bit types it divides in float or double, which
 * vectorises where integer division does not, and is exact: the quotient's
 * ulp is far below 1/div, so rounding can never reach the next integer, and
 * truncating gives the integer quotient. The same loops are compiled for AVX2
 * and AVX-512 too (reduce_simd.c chooses).
 */
#include <stdint.h>

#include "reduce_kern.h"

// All loops for integer type T (unsigned twin U), division done in FT: a
// float type that holds every T exactly, or a 64-bit integer type. The
// quotient always fits T (|q| <= |x|).
#define INT_KERNELS(P, T, U, FT)                                                      \
  WEFT_REDUCE_DEF_COMBINE(P##_sum, T, (T)((U)x + (U)y))                              \
  WEFT_REDUCE_DEF_COMBINE(P##_prod, T, (T)((U)x * (U)y))                             \
  WEFT_REDUCE_DEF_COMBINE(P##_max, T, x > y ? x : y)                                 \
  WEFT_REDUCE_DEF_COMBINE(P##_min, T, x < y ? x : y)                                 \
  static void P##_scale_t(size_t n, T *restrict d, const T *restrict s, U k) {        \
    WEFT_REDUCE_LOOP(n, d[i] = (T)((U)s[i] * k));                                    \
  }                                                                                  \
  static void P##_scale(size_t n, void *d, const void *s, const weft_redop_t *op) {   \
    P##_scale_t(n, d, s, (U)(uint64_t)op->scale_i);                                  \
  }                                                                                  \
  static void P##_scale_inplace_t(size_t n, T *restrict d, U k) {                     \
    WEFT_REDUCE_LOOP(n, d[i] = (T)((U)d[i] * k));                                    \
  }                                                                                  \
  static void P##_scale_inplace(size_t n, void *d, const weft_redop_t *op) {          \
    P##_scale_inplace_t(n, d, (U)(uint64_t)op->scale_i);                             \
  }                                                                                  \
  static void P##_postdiv_t(size_t n, T *restrict d, FT div) {                        \
    WEFT_REDUCE_LOOP(n, d[i] = (T)((FT)d[i] / div));                                 \
  }                                                                                  \
  static void P##_postdiv(size_t n, void *d, int div) { P##_postdiv_t(n, d, (FT)div); } \
  WEFT_REDUCE_KERN_TABLE(P, T)

// Every integer type's loops, and their lookup weft_reduce_int_kern##L.
#define INT_LEVEL(L)                                                      \
  INT_KERNELS(i8##L, int8_t, uint8_t, float)                              \
  INT_KERNELS(u8##L, uint8_t, uint8_t, float)                             \
  INT_KERNELS(i32##L, int32_t, uint32_t, double)                          \
  INT_KERNELS(u32##L, uint32_t, uint32_t, double)                         \
  INT_KERNELS(i64##L, int64_t, uint64_t, int64_t)                         \
  INT_KERNELS(u64##L, uint64_t, uint64_t, uint64_t)                       \
  const weft_reduce_kern_t *weft_reduce_int_kern##L(ncclDataType_t dt) {  \
    switch (dt) {                                                         \
      case ncclInt8: return &i8##L##_kern;                                \
      case ncclUint8: return &u8##L##_kern;                               \
      case ncclInt32: return &i32##L##_kern;                              \
      case ncclUint32: return &u32##L##_kern;                             \
      case ncclInt64: return &i64##L##_kern;                              \
      case ncclUint64: return &u64##L##_kern;                             \
      default: return NULL;                                               \
    }                                                                     \
  }

INT_LEVEL()
#if defined(WEFT_SIMD_X86)
WEFT_SIMD_BEGIN_AVX2
INT_LEVEL(_avx2)
WEFT_SIMD_END
WEFT_SIMD_BEGIN_AVX512
INT_LEVEL(_avx512)
WEFT_SIMD_END
#endif
