/*
 * reduce_kern.h — the typed loops behind reduce.c, private to the host
 * reduction code (reduce.c, reduce_int.c, reduce_float.c).
 *
 * Every loop is one specialised function per (datatype, operation), written
 * with `restrict` pointers and a constant-trip-count inner block so the
 * compiler vectorises it even at -O2 (GCC's "very cheap" cost model only
 * vectorises loops whose trip count is a known multiple of the vector
 * width). The driver in reduce.c guarantees the no-overlap promises that
 * `restrict` makes, and element-size alignment of every pointer.
 *
 * On x86-64 the same loops are also compiled for AVX2 and AVX-512 (between
 * WEFT_SIMD_BEGIN_* and WEFT_SIMD_END, with a _avx2 or _avx512 suffix);
 * reduce_simd.c picks one set per process.
 */
#ifndef WEFT_REDUCE_KERN_H
#define WEFT_REDUCE_KERN_H

#include <stddef.h>

#include "reduce.h"

// Elements per inner block: a constant multiple of any vector width.
#define WEFT_REDUCE_VB 64

// Run the statement(s) in the variable arguments for i in [0, n): whole
// blocks of WEFT_REDUCE_VB with a constant trip count, then the remainder.
#define WEFT_REDUCE_LOOP(n, ...)                                           \
  do {                                                                     \
    size_t vb_ = 0;                                                        \
    for (; vb_ + WEFT_REDUCE_VB <= (n); vb_ += WEFT_REDUCE_VB)             \
      for (size_t vj_ = 0; vj_ < WEFT_REDUCE_VB; vj_++) {                  \
        size_t i = vb_ + vj_;                                              \
        __VA_ARGS__;                                                       \
      }                                                                    \
    for (size_t i = vb_; i < (n); i++) {                                   \
      __VA_ARGS__;                                                         \
    }                                                                      \
  } while (0)

// Define NAME##_3 (d = a OP b), NAME##_2 (d = d OP b) and NAME##_2r
// (d = a OP d) for element type T, with EXPR combining x (the left operand)
// and y (the right one). Keeping the operand order even in place makes max
// and min bitwise reproducible for +-0 and NaN payloads.
#define WEFT_REDUCE_DEF_COMBINE(NAME, T, EXPR)                                              \
  static void NAME##_3t(size_t n, T *restrict d, const T *restrict a, const T *restrict b) { \
    WEFT_REDUCE_LOOP(n, T x = a[i]; T y = b[i]; d[i] = (EXPR));                            \
  }                                                                                         \
  static void NAME##_2t(size_t n, T *restrict d, const T *restrict b) {                     \
    WEFT_REDUCE_LOOP(n, T x = d[i]; T y = b[i]; d[i] = (EXPR));                            \
  }                                                                                         \
  static void NAME##_2rt(size_t n, T *restrict d, const T *restrict a) {                    \
    WEFT_REDUCE_LOOP(n, T x = a[i]; T y = d[i]; d[i] = (EXPR));                            \
  }                                                                                         \
  static void NAME##_3(size_t n, void *d, const void *a, const void *b) {                   \
    NAME##_3t(n, d, a, b);                                                                  \
  }                                                                                         \
  static void NAME##_2(size_t n, void *d, const void *b) { NAME##_2t(n, d, b); }           \
  static void NAME##_2r(size_t n, void *d, const void *a) { NAME##_2rt(n, d, a); }

// x86-64 builds carry the AVX2 and AVX-512 loops too; other architectures
// (or -DWEFT_SIMD_PORTABLE_ONLY) the portable ones only.
#if defined(__x86_64__) && !defined(WEFT_SIMD_PORTABLE_ONLY)
#define WEFT_SIMD_X86 1
#endif

// Compile what follows for a wider ISA (WEFT_SIMD_X86 only). No FMA: a product
// and a sum stay two roundings, as in the portable loops. GCC takes a target
// pragma; clang (the fuzz and TSan builds) a target attribute pushed onto
// every function of the region.
#define WEFT_PRAGMA(text) _Pragma(#text)
#if defined(__clang__)
#define WEFT_SIMD_BEGIN_AVX2 \
  WEFT_PRAGMA(clang attribute push(__attribute__((target("avx2,f16c"))), apply_to = function))
#define WEFT_SIMD_BEGIN_AVX512 \
  WEFT_PRAGMA(clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl"))), \
                                   apply_to = function))
#define WEFT_SIMD_END _Pragma("clang attribute pop")
#else
#define WEFT_SIMD_BEGIN_AVX2 _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,f16c\")")
#define WEFT_SIMD_BEGIN_AVX512 \
  _Pragma("GCC push_options")  \
      _Pragma("GCC target(\"avx512f,avx512bw,avx512vl,prefer-vector-width=512\")")
#define WEFT_SIMD_END _Pragma("GCC pop_options")
#endif

typedef void (*weft_reduce_combine3_fn)(size_t n, void *d, const void *a, const void *b);
typedef void (*weft_reduce_combine2_fn)(size_t n, void *d, const void *b);

// Loops for one natively computed datatype (integers, float32, float64).
typedef struct {
  size_t size;  // bytes per element
  // d = a OP b over n elements, indexed by weft_red_kind_t; no overlaps.
  weft_reduce_combine3_fn combine3[4];
  // d = d OP b; d and b do not overlap.
  weft_reduce_combine2_fn combine2[4];
  // d = a OP d; d and a do not overlap.
  weft_reduce_combine2_fn combine2r[4];
  // d = s * scalar (the prescale); d and s do not overlap.
  void (*scale)(size_t n, void *d, const void *s, const weft_redop_t *op);
  // d = d * scalar.
  void (*scale_inplace)(size_t n, void *d, const weft_redop_t *op);
  // d = d / div (div > 1): truncating for integers.
  void (*postdiv)(size_t n, void *d, int div);
} weft_reduce_kern_t;

// The loops for an integer datatype (reduce_int.c), NULL for any other.
const weft_reduce_kern_t *weft_reduce_int_kern(ncclDataType_t dt);
// The loops for float32 or float64 (reduce_float.c), NULL for any other.
const weft_reduce_kern_t *weft_reduce_float_kern(ncclDataType_t dt);
#if defined(WEFT_SIMD_X86)
const weft_reduce_kern_t *weft_reduce_int_kern_avx2(ncclDataType_t dt);
const weft_reduce_kern_t *weft_reduce_int_kern_avx512(ncclDataType_t dt);
const weft_reduce_kern_t *weft_reduce_float_kern_avx2(ncclDataType_t dt);
const weft_reduce_kern_t *weft_reduce_float_kern_avx512(ncclDataType_t dt);
#endif

// fp16, bf16 and fp8: converted block by block to float, computed in float,
// rounded once. d may alias a or b (reduce_small) or s (reduce_small_first).
// div > 1 divides the results; 0 or 1 leaves them. Pointers are aligned.
int weft_reduce_small_supported(ncclDataType_t dt);
void weft_reduce_small(const weft_redop_t *op, void *d, const void *a, const void *b, size_t n,
                       int div);
void weft_reduce_small_first(const weft_redop_t *op, void *d, const void *s, size_t n, int div);

// The kernel table P##_kern of element type T from P's functions: P##_sum_3
// ... P##_min_2r, P##_scale, P##_scale_inplace and P##_postdiv.
#define WEFT_REDUCE_KERN_TABLE(P, T)                                \
  static const weft_reduce_kern_t P##_kern = {                      \
      .size = sizeof(T),                                            \
      .combine3 = {P##_sum_3, P##_prod_3, P##_max_3, P##_min_3},    \
      .combine2 = {P##_sum_2, P##_prod_2, P##_max_2, P##_min_2},    \
      .combine2r = {P##_sum_2r, P##_prod_2r, P##_max_2r, P##_min_2r}, \
      .scale = P##_scale,                                           \
      .scale_inplace = P##_scale_inplace,                           \
      .postdiv = P##_postdiv,                                       \
  };

#endif
