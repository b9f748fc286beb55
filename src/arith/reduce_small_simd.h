/*
 * reduce_small_simd.h — the vector loop and roundings for fp16, bf16 and
 * fp8, written once for every ISA: included by reduce_small_avx2.c and
 * reduce_small_avx512.c after they define, for their vectors vf (VW floats),
 * vi (VW 32-bit lanes) and masks vm, the primitives
 *   i_k i_and i_or i_add i_sub i_srl i_gt i_sel   32-bit lane integer work
 *   f_bits bits_f v_set1 f_nan f_sel f_add f_mul v_div f_max f_min
 *   st16 st8                                       each lane's low bits, stored
 * and SMALL_SUFFIX (_avx2, _avx512) for the exported names; they define
 * ld_half/ld_bf16/ld_e4m3/ld_e5m2 (VW elements widened exactly) and st_half
 * after it.
 *
 * Each element is widened, computed and rounded in registers, in the order
 * reduce_float.c's block loop uses: b times the scalar (prescale), a OP b,
 * the result divided by div (when the op has a final divide), then one
 * rounding, as dtype_inline.h rounds. The tail (fewer than VW elements) goes
 * through small stack buffers. d may equal a, b or s: each vector is read
 * before it is written.
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

static inline vf ld_half(const void *p);
static inline vf ld_bf16(const void *p);
static inline vf ld_e4m3(const void *p);
static inline vf ld_e5m2(const void *p);
static inline void st_half(void *p, vf x);

// ---- arithmetic with reduce_float.c's NaN rules ----

// x's NaN (quieted) when x is NaN, else the operation's: FLOAT_ARITH, which
// fixes what the commutative instruction leaves open.
static inline vf v_add(vf x, vf y) { return f_sel(f_nan(x), f_add(x, x), f_add(x, y)); }
static inline vf v_mul(vf x, vf y) { return f_sel(f_nan(x), f_add(x, x), f_mul(x, y)); }
// MAXPS gives x when x > y and y otherwise (y when either is NaN); a NaN x
// must win too, as FMAX says.
static inline vf v_max(vf x, vf y) { return f_sel(f_nan(x), x, f_max(x, y)); }
static inline vf v_min(vf x, vf y) { return f_sel(f_nan(x), x, f_min(x, y)); }

// ---- conversions ----

// Lanes whose float bits are NaN (|bits| above infinity's).
static inline vm is_nan(vi u) { return i_gt(i_and(u, i_k(0x7fffffffu)), i_k(0x7f800000u)); }

// e4m3 read as fp16 (the magnitude's bits in fp16's fields, which is the
// value times 2^-8, subnormals too) scaled back exactly, its NaN patched in.
// e5m2 is fp16's top byte and needs nothing. The NaNs these give have other
// payloads than weft_dtype_e4m3/e5m2_table's, which nothing can see: every
// fp8 NaN result is rounded to the one NaN pattern of its sign.
static inline vf e4m3_fix(vf f, vm nan) {
  vi u = f_bits(f_mul(f, v_set1(256.0f)));
  return bits_f(i_sel(nan, i_or(u, i_k(0x7fc00000u)), u));
}

// weft_float_to_bf16. The ld_bf16s leave a signalling NaN signalling,
// unlike weft_bf16_to_float: every path from there either quiets it
// (arithmetic) or keeps it whole (max, min), and this sets the quiet bit.
static inline void st_bf16(void *p, vf x) {
  vi u = f_bits(x), hi = i_srl(u, 16);
  vi r = i_srl(i_add(i_add(u, i_k(0x7fffu)), i_and(hi, i_k(1))), 16);
  st16(p, i_sel(is_nan(u), i_or(hi, i_k(0x0040u)), r));
}

// weft_dtype_e4m3_round / _e5m2_round lane by lane: `sh` mantissa bits
// dropped, exponent rebias `rebias`, subnormals by adding `magic` (whose ulp
// is the format's subnormal step), saturation to `maxv` above `sat`, `nanv`
// for NaN. Signed compares, as there: |x|'s bits are below 2^31.
static inline void st_fp8(void *p, vf x, unsigned sh, uint32_t rebias, float magic,
                          uint32_t min_norm, uint32_t sat, uint32_t maxv, uint32_t nanv) {
  vi u = f_bits(x);
  vi sign = i_and(i_srl(u, 24), i_k(0x80u));
  vi a = i_and(u, i_k(0x7fffffffu));
  vi lsb = i_and(i_srl(a, sh), i_k(1));
  vi norm = i_sub(i_srl(i_add(i_add(a, i_k((1u << (sh - 1)) - 1u)), lsb), sh), i_k(rebias));
  vf mf = v_set1(magic);
  vi sub = i_sub(f_bits(f_add(bits_f(a), mf)), f_bits(mf));
  vi r = i_sel(i_gt(a, i_k(min_norm - 1u)), norm, sub);
  r = i_sel(i_gt(a, i_k(sat)), i_k(maxv), r);
  r = i_sel(i_gt(a, i_k(0x7f800000u)), i_k(nanv), r);
  st8(p, i_or(r, sign));
}
static inline void st_e4m3(void *p, vf x) {
  st_fp8(p, x, 20, (127u - 7u) << 3, 16384.0f, 0x3c800000u, 0x43e00000u, 0x7eu, 0x7fu);
}
static inline void st_e5m2(void *p, vf x) {
  st_fp8(p, x, 21, (127u - 15u) << 2, 128.0f, 0x38800000u, 0x47600000u, 0x7bu, 0x7eu);
}

// ---- the loop ----

enum { T_HALF, T_BF16, T_E4M3, T_E5M2, T_COUNT };
enum {
  K_SUM = WEFT_RED_SUM,
  K_PROD = WEFT_RED_PROD,
  K_MAX = WEFT_RED_MAX,
  K_MIN = WEFT_RED_MIN,
  K_FIRST  // no combine: weft_reduce_first's transform
};

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
