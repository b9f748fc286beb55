/*
 * reduce_small_avx2.c — fp16, bf16 and fp8 reductions with AVX2 and F16C,
 * 8 elements per step, converted in registers (reduce_small_simd.h has the
 * loop).
 *
 * fp16 uses VCVTPH2PS/VCVTPS2PH (exact widening, SNaN quieted with its
 * payload; rounding to nearest even, subnormals kept, NaN payload
 * truncated and quieted: what weft_float_to_half does). bf16 is integer
 * work on the bit patterns, as in dtype_inline.h. fp8 widens through fp16
 * and rounds with dtype_inline.h's bit arithmetic, lane by lane; results are narrowed with saturating packs, which never
 * saturate here (every lane already fits).
 */
#if defined(__x86_64__)

#include <immintrin.h>
#include <stdint.h>

#include "dtype.h"
#include "reduce_kern.h"

WEFT_SIMD_BEGIN_AVX2

typedef __m256 vf;
#define VW 8
#define SMALL_SUFFIX _avx2

static inline __m256i bits(vf x) { return _mm256_castps_si256(x); }
static inline __m256i k32(uint32_t v) { return _mm256_set1_epi32((int)v); }
static inline __m256i pick(__m256i no, __m256i mask, __m256i yes) {
  return _mm256_blendv_epi8(no, yes, mask);
}
static inline vf v_set1(float x) { return _mm256_set1_ps(x); }
// x's NaN (quieted) when x is NaN, else the operation's: reduce_float.c's
// FLOAT_ARITH, which fixes what the commutative instruction leaves open.
static inline vf nan_first(vf x, vf r) {
  return _mm256_blendv_ps(r, _mm256_add_ps(x, x), _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}
static inline vf v_add(vf x, vf y) { return nan_first(x, _mm256_add_ps(x, y)); }
static inline vf v_mul(vf x, vf y) { return nan_first(x, _mm256_mul_ps(x, y)); }
static inline vf v_div(vf x, vf y) { return _mm256_div_ps(x, y); }
// MAXPS gives x when x > y and y otherwise (y when either is NaN); a NaN x
// must win too, as FMAX in reduce_float.c says.
static inline vf v_max(vf x, vf y) {
  return _mm256_blendv_ps(_mm256_max_ps(x, y), x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}
static inline vf v_min(vf x, vf y) {
  return _mm256_blendv_ps(_mm256_min_ps(x, y), x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// All-ones in lanes whose float bits are NaN (|bits| above infinity's).
static inline __m256i is_nan(__m256i u) {
  return _mm256_cmpgt_epi32(_mm256_and_si256(u, k32(0x7fffffffu)), k32(0x7f800000u));
}

// The low 16 bits of each lane (all below 2^16), in order, as 8 uint16.
static inline __m128i narrow16(__m256i r) {
  __m256i p = _mm256_packus_epi32(r, r);  // per 128-bit half: r0-3 r0-3 | r4-7 r4-7
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(p, 0x08));
}

static inline vf ld_half(const void *p) { return _mm256_cvtph_ps(_mm_loadu_si128(p)); }
static inline void st_half(void *p, vf x) {
  _mm_storeu_si128(p, _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
}

// Unlike weft_bf16_to_float, a signalling NaN stays signalling: every path
// from here to st_bf16 either quiets it (arithmetic) or keeps it whole
// (max, min), and st_bf16 sets the quiet bit, so the result is the same.
static inline vf ld_bf16(const void *p) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(p)), 16));
}
static inline void st_bf16(void *p, vf x) {
  __m256i u = bits(x);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), k32(1));
  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, k32(0x7fffu)), lsb), 16);
  __m256i nan = _mm256_or_si256(_mm256_srli_epi32(u, 16), k32(0x0040u));
  _mm_storeu_si128(p, narrow16(pick(r, is_nan(u), nan)));
}

// fp8 through fp16: e5m2 is fp16's top byte; e4m3's magnitude bits, moved
// into fp16's fields, are the value times 2^-8 (subnormals too), scaled back
// exactly. NaNs come out as NaNs of the right sign but another payload than
// the tables' (and e4m3's needs patching): invisible, as every fp8 NaN
// result is rounded to the one NaN pattern of its sign.
static inline vf ld_e5m2(const void *p) {
  return _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64(p)), 8));
}
static inline vf ld_e4m3(const void *p) {
  __m128i v = _mm_cvtepu8_epi16(_mm_loadl_epi64(p));
  __m128i mag = _mm_and_si128(v, _mm_set1_epi16(0x7f));
  __m128i sign = _mm_slli_epi16(_mm_and_si128(v, _mm_set1_epi16(0x80)), 8);
  __m128i h = _mm_or_si128(_mm_slli_epi16(mag, 7), sign);
  __m256i f = bits(_mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f)));
  __m256i nan = _mm256_cvtepi16_epi32(_mm_cmpeq_epi16(mag, _mm_set1_epi16(0x7f)));
  return _mm256_castsi256_ps(_mm256_or_si256(f, _mm256_and_si256(nan, k32(0x7fc00000u))));
}

// weft_dtype_e4m3_round / _e5m2_round lane by lane: `sh` mantissa bits
// dropped, exponent rebias `rebias`, subnormals by adding `magic` (whose ulp
// is the format's subnormal step), saturation to `maxv` above `sat`, `nanv`
// for NaN. Signed compares, as there: |x|'s bits are below 2^31.
static inline void st_fp8(void *p, vf x, int sh, uint32_t rebias, float magic, uint32_t min_norm,
                          uint32_t sat, uint32_t maxv, uint32_t nanv) {
  __m256i u = bits(x);
  __m256i sign = _mm256_and_si256(_mm256_srli_epi32(u, 24), k32(0x80u));
  __m256i a = _mm256_and_si256(u, k32(0x7fffffffu));
  __m256i half = k32((1u << (sh - 1)) - 1u);
  __m128i shift = _mm_cvtsi32_si128(sh);
  __m256i lsb = _mm256_and_si256(_mm256_srl_epi32(a, shift), k32(1));
  __m256i norm = _mm256_sub_epi32(
      _mm256_srl_epi32(_mm256_add_epi32(_mm256_add_epi32(a, half), lsb), shift), k32(rebias));
  vf mf = _mm256_set1_ps(magic);
  __m256i sub = _mm256_sub_epi32(bits(_mm256_add_ps(_mm256_castsi256_ps(a), mf)), bits(mf));
  __m256i r = pick(sub, _mm256_cmpgt_epi32(a, k32(min_norm - 1u)), norm);
  r = pick(r, _mm256_cmpgt_epi32(a, k32(sat)), k32(maxv));
  r = pick(r, _mm256_cmpgt_epi32(a, k32(0x7f800000u)), k32(nanv));
  __m128i w = narrow16(_mm256_or_si256(r, sign));
  _mm_storel_epi64(p, _mm_packus_epi16(w, w));
}
static inline void st_e4m3(void *p, vf x) {
  st_fp8(p, x, 20, (127u - 7u) << 3, 16384.0f, 0x3c800000u, 0x43e00000u, 0x7eu, 0x7fu);
}
static inline void st_e5m2(void *p, vf x) {
  st_fp8(p, x, 21, (127u - 15u) << 2, 128.0f, 0x38800000u, 0x47600000u, 0x7bu, 0x7eu);
}

#include "reduce_small_simd.h"

WEFT_SIMD_END

#endif
