/*
 * reduce_small_simd.h — the vector loop for fp16, bf16 and fp8, written once
 * for every ISA: included by reduce_small_avx2.c and reduce_small_avx512.c
 * after they define, for their vector `vf` of VW floats,
 *   ld_half/ld_bf16/ld_e4m3/ld_e5m2 (p)   VW elements at p, widened exactly
 *   st_half/st_bf16/st_e4m3/st_e5m2 (p, x) x rounded as dtype_inline.h rounds
 *   v_add, v_mul, v_div, v_max, v_min, v_set1
 * and SMALL_SUFFIX (_avx2, _avx512) for the exported names.
 *
 * Each element is widened, computed and rounded in registers, in the order
 * reduce_float.c's block loop uses: b times the scalar (prescale), a OP b,
 * the result divided by div (integer Avg on a float type never happens;
 * this is PreMulSum's and Avg's final divide), then one rounding. The tail
 * (fewer than VW elements) goes through small stack buffers. d may equal a,
 * b or s: each vector is read before it is written.
 */
#ifndef WEFT_REDUCE_SMALL_SIMD_H
#define WEFT_REDUCE_SMALL_SIMD_H

#include <string.h>

#include "dtype.h"
#include "reduce_simd.h"

#define SMALL_CAT2(a, b) a##b
#define SMALL_CAT(a, b) SMALL_CAT2(a, b)
#define SMALL_NAME(x) SMALL_CAT(x, SMALL_SUFFIX)
#define SMALL_INLINE static inline __attribute__((always_inline))

enum { T_HALF, T_BF16, T_E4M3, T_E5M2, T_COUNT };
enum { K_SUM = WEFT_RED_SUM, K_PROD = WEFT_RED_PROD, K_MAX = WEFT_RED_MAX, K_MIN = WEFT_RED_MIN, K_FIRST };

SMALL_INLINE vf ld(int t, const char *p) {
  switch (t) {
    case T_HALF: return ld_half(p);
    case T_BF16: return ld_bf16(p);
    case T_E4M3: return ld_e4m3(p);
    default: return ld_e5m2(p);
  }
}

SMALL_INLINE void st(int t, char *p, vf x) {
  switch (t) {
    case T_HALF: st_half(p, x); break;
    case T_BF16: st_bf16(p, x); break;
    case T_E4M3: st_e4m3(p, x); break;
    default: st_e5m2(p, x); break;
  }
}

// One vector: d = post(a OP pre(b)), or d = post(pre(b)) for K_FIRST.
SMALL_INLINE void step(int t, int k, char *d, const char *a, const char *b, vf scale, vf div,
                       int pre, int post) {
  vf r = ld(t, b);
  if (pre) r = v_mul(r, scale);
  switch (k) {
    case K_SUM: r = v_add(ld(t, a), r); break;
    case K_PROD: r = v_mul(ld(t, a), r); break;
    case K_MAX: r = v_max(ld(t, a), r); break;
    case K_MIN: r = v_min(ld(t, a), r); break;
    default: break;
  }
  if (post) r = v_div(r, div);
  st(t, d, r);
}

SMALL_INLINE void run(int t, int k, char *d, const char *a, const char *b, size_t n,
                      const weft_redop_t *op, int div) {
  size_t sz = t <= T_BF16 ? 2 : 1;
  int pre = op->prescale, post = div > 1;
  vf scale = v_set1((float)op->scale_f), dv = v_set1((float)div);
  size_t i = 0;
  for (; i + VW <= n; i += VW) step(t, k, d + i * sz, a + i * sz, b + i * sz, scale, dv, pre, post);
  if (i == n) return;
  char ta[VW * 2] = {0}, tb[VW * 2] = {0}, td[VW * 2];
  size_t bytes = (n - i) * sz;
  memcpy(ta, a + i * sz, bytes);
  memcpy(tb, b + i * sz, bytes);
  step(t, k, td, ta, tb, scale, dv, pre, post);
  memcpy(d + i * sz, td, bytes);
}

typedef void (*small_fn)(char *d, const char *a, const char *b, size_t n, const weft_redop_t *op,
                         int div);

#define SMALL_FN(T, K)                                                                      \
  static void small_##T##_##K(char *d, const char *a, const char *b, size_t n,              \
                              const weft_redop_t *op, int div) {                            \
    run(T, K, d, a, b, n, op, div);                                                         \
  }
#define SMALL_FNS(T) \
  SMALL_FN(T, K_SUM) SMALL_FN(T, K_PROD) SMALL_FN(T, K_MAX) SMALL_FN(T, K_MIN) SMALL_FN(T, K_FIRST)
#define SMALL_ROW(T) \
  {small_##T##_K_SUM, small_##T##_K_PROD, small_##T##_K_MAX, small_##T##_K_MIN, small_##T##_K_FIRST}

SMALL_FNS(T_HALF)
SMALL_FNS(T_BF16)
SMALL_FNS(T_E4M3)
SMALL_FNS(T_E5M2)

static const small_fn small_table[T_COUNT][K_FIRST + 1] = {SMALL_ROW(T_HALF), SMALL_ROW(T_BF16),
                                                           SMALL_ROW(T_E4M3), SMALL_ROW(T_E5M2)};

static int small_type(ncclDataType_t dt) {
  switch (dt) {
    case ncclFloat16: return T_HALF;
    case ncclBfloat16: return T_BF16;
    case ncclFloat8e4m3: return T_E4M3;
    case ncclFloat8e5m2: return T_E5M2;
    default: return -1;
  }
}

void SMALL_NAME(weft_reduce_small)(const weft_redop_t *op, void *d, const void *a, const void *b,
                                   size_t n, int div) {
  int t = small_type(op->dtype);
  if (t < 0 || (unsigned)op->kind > WEFT_RED_MIN) return;
  small_table[t][op->kind](d, a, b, n, op, div);
}

void SMALL_NAME(weft_reduce_small_first)(const weft_redop_t *op, void *d, const void *s, size_t n,
                                         int div) {
  int t = small_type(op->dtype);
  if (t < 0) return;
  small_table[t][K_FIRST](d, s, s, n, op, div);
}

#endif
