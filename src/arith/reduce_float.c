/*
 * reduce_float.c — reduction loops for the floating datatypes.
 *
 * float32 and float64 are computed natively: one rounding per operation, the
 * prescale multiplies in float (float32) or double (float64). The 16- and
 * 8-bit formats (fp16, bf16, fp8 e4m3/e5m2) go through float: a block of each
 * operand is widened into a float array on the stack, combined there with the
 * float32 loops (which vectorise), and rounded once to the type with
 * round-to-nearest-even. Max and min return NaN when either operand is NaN; a
 * sum or product of two NaNs carries the first operand's. float32 and float64
 * are compiled for AVX2 and AVX-512 too (reduce_simd.c chooses); the 16- and
 * 8-bit formats' vector loops are in reduce_small_avx2.c and
 * reduce_small_avx512.c, this is their oracle.
 */
#include <stdint.h>

#include "dtype.h"
#include "reduce_kern.h"

// Max/min that propagate NaN: x wins when it is NaN, and y wins when it is
// NaN because every comparison with NaN is false.
#define FMAX(x, y) (((x) > (y) || (x) != (x)) ? (x) : (y))
#define FMIN(x, y) (((x) < (y) || (x) != (x)) ? (x) : (y))

// Sum and product whose NaN is defined by operand order: x's (quieted) when
// x is NaN, else the operation's (y's, quieted, when y is NaN). A bare x + y
// leaves it to the compiler, which may swap the operands of the commutative
// instruction, and did differently in vector and scalar code. A NaN x meets
// itself instead of y; the select of values (no arithmetic in its arms)
// still vectorises.
#define FLOAT_ARITH(P, T)                                     \
  static inline T P##_add(T x, T y) { return x + (x != x ? x : y); } \
  static inline T P##_mul(T x, T y) { return x * (x != x ? x : y); }

// All loops for native float type T; the scalar is used as type T.
#define FLOAT_KERNELS(P, T)                                                           \
  FLOAT_ARITH(P, T)                                                                  \
  WEFT_REDUCE_DEF_COMBINE(P##_sum, T, P##_add(x, y))                                 \
  WEFT_REDUCE_DEF_COMBINE(P##_prod, T, P##_mul(x, y))                                \
  WEFT_REDUCE_DEF_COMBINE(P##_max, T, FMAX(x, y))                                    \
  WEFT_REDUCE_DEF_COMBINE(P##_min, T, FMIN(x, y))                                    \
  static void P##_scale_t(size_t n, T *restrict d, const T *restrict s, T k) {        \
    WEFT_REDUCE_LOOP(n, d[i] = P##_mul(s[i], k));                                            \
  }                                                                                  \
  static void P##_scale(size_t n, void *d, const void *s, const weft_redop_t *op) {   \
    P##_scale_t(n, d, s, (T)op->scale_f);                                            \
  }                                                                                  \
  static void P##_scale_inplace_t(size_t n, T *restrict d, T k) {                     \
    WEFT_REDUCE_LOOP(n, d[i] = P##_mul(d[i], k));                                            \
  }                                                                                  \
  static void P##_scale_inplace(size_t n, void *d, const weft_redop_t *op) {          \
    P##_scale_inplace_t(n, d, (T)op->scale_f);                                       \
  }                                                                                  \
  static void P##_postdiv_t(size_t n, T *restrict d, T div) {                         \
    WEFT_REDUCE_LOOP(n, d[i] = d[i] / div);                                          \
  }                                                                                  \
  static void P##_postdiv(size_t n, void *d, int div) { P##_postdiv_t(n, d, (T)div); } \
  WEFT_REDUCE_KERN_TABLE(P, T)

// float32 and float64's loops, and their lookup weft_reduce_float_kern##L.
#define FLOAT_LEVEL(L)                                                     \
  FLOAT_KERNELS(f32##L, float)                                             \
  FLOAT_KERNELS(f64##L, double)                                            \
  const weft_reduce_kern_t *weft_reduce_float_kern##L(ncclDataType_t dt) { \
    if (dt == ncclFloat32) return &f32##L##_kern;                          \
    if (dt == ncclFloat64) return &f64##L##_kern;                          \
    return NULL;                                                           \
  }

FLOAT_LEVEL()
#if defined(WEFT_SIMD_X86)
WEFT_SIMD_BEGIN_AVX2
FLOAT_LEVEL(_avx2)
WEFT_SIMD_END
WEFT_SIMD_BEGIN_AVX512
FLOAT_LEVEL(_avx512)
WEFT_SIMD_END
#endif

// ---- fp16, bf16, fp8: widen to float, compute, round once ----

// Elements per stack block (two float arrays of this size).
#define SMALL_BLOCK 256

typedef struct {
  void (*widen)(size_t n, float *restrict f, const void *src);
  void (*narrow)(size_t n, void *dst, const float *restrict f);
} small_conv_t;

#define SMALL_CONV(P, T, TO_FLOAT, FROM_FLOAT)                                        \
  static void P##_widen_t(size_t n, float *restrict f, const T *restrict s) {         \
    WEFT_REDUCE_LOOP(n, f[i] = TO_FLOAT(s[i]));                                      \
  }                                                                                  \
  static void P##_widen(size_t n, float *restrict f, const void *src) {               \
    P##_widen_t(n, f, src);                                                          \
  }                                                                                  \
  static void P##_narrow_t(size_t n, T *restrict d, const float *restrict f) {        \
    WEFT_REDUCE_LOOP(n, d[i] = FROM_FLOAT(f[i]));                                    \
  }                                                                                  \
  static void P##_narrow(size_t n, void *dst, const float *restrict f) {              \
    P##_narrow_t(n, dst, f);                                                         \
  }                                                                                  \
  static const small_conv_t P##_conv = {P##_widen, P##_narrow};

#define E4M3_TO_FLOAT(v) weft_dtype_e4m3_table[v]
#define E5M2_TO_FLOAT(v) weft_dtype_e5m2_table[v]

SMALL_CONV(half, uint16_t, weft_half_to_float, weft_float_to_half)
SMALL_CONV(bf16, uint16_t, weft_bf16_to_float, weft_float_to_bf16)
SMALL_CONV(e4m3, uint8_t, E4M3_TO_FLOAT, weft_dtype_e4m3_round)
SMALL_CONV(e5m2, uint8_t, E5M2_TO_FLOAT, weft_dtype_e5m2_round)

static const small_conv_t *small_conv(ncclDataType_t dt) {
  switch (dt) {
    case ncclFloat16: return &half_conv;
    case ncclBfloat16: return &bf16_conv;
    case ncclFloat8e4m3: return &e4m3_conv;
    case ncclFloat8e5m2: return &e5m2_conv;
    default: return NULL;
  }
}

int weft_reduce_small_supported(ncclDataType_t dt) { return small_conv(dt) != NULL; }

static const weft_reduce_combine2_fn f32_combine2[4] = {f32_sum_2, f32_prod_2, f32_max_2,
                                                        f32_min_2};

void weft_reduce_small(const weft_redop_t *op, void *d, const void *a, const void *b, size_t n,
                       int div) {
  const small_conv_t *cv = small_conv(op->dtype);
  if (cv == NULL || (unsigned)op->kind > WEFT_RED_MIN) return;
  size_t size = weft_dtype_size(op->dtype);
  weft_reduce_combine2_fn combine = f32_combine2[op->kind];
  float scale = (float)op->scale_f;
  float fa[SMALL_BLOCK], fb[SMALL_BLOCK];
  // Both operand blocks are read before the result block is written, so d
  // may alias a or b.
  for (size_t off = 0; off < n; off += SMALL_BLOCK) {
    size_t m = n - off < SMALL_BLOCK ? n - off : SMALL_BLOCK;
    cv->widen(m, fa, (const char *)a + off * size);
    cv->widen(m, fb, (const char *)b + off * size);
    if (op->prescale) f32_scale_inplace_t(m, fb, scale);
    combine(m, fa, fb);
    if (div > 1) f32_postdiv_t(m, fa, (float)div);
    cv->narrow(m, (char *)d + off * size, fa);
  }
}

void weft_reduce_small_first(const weft_redop_t *op, void *d, const void *s, size_t n, int div) {
  const small_conv_t *cv = small_conv(op->dtype);
  if (cv == NULL) return;
  size_t size = weft_dtype_size(op->dtype);
  float scale = (float)op->scale_f;
  float f[SMALL_BLOCK];
  for (size_t off = 0; off < n; off += SMALL_BLOCK) {
    size_t m = n - off < SMALL_BLOCK ? n - off : SMALL_BLOCK;
    cv->widen(m, f, (const char *)s + off * size);
    if (op->prescale) f32_scale_inplace_t(m, f, scale);
    if (div > 1) f32_postdiv_t(m, f, (float)div);
    cv->narrow(m, (char *)d + off * size, f);
  }
}
