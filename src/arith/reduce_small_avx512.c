/*
 * reduce_small_avx512.c — fp16, bf16 and fp8 reductions with AVX-512 (F, BW,
 * VL), 16 elements per step, converted in registers (reduce_small_simd.h
 * has the loop).
 *
 * fp16 uses VCVTPH2PS/VCVTPS2PH (exact widening, SNaN quieted with its
 * payload; rounding to nearest even, subnormals kept, NaN payload
 * truncated and quieted: what weft_float_to_half does). bf16 is integer
 * work on the bit patterns, as in dtype_inline.h: AVX-512 BF16's VCVTNEPS2BF16
 * flushes subnormal inputs to zero, so it would change results. fp8 widens
 * through fp16 and rounds with the bit arithmetic of dtype_inline.h, lane
 * by lane.
 */
#if defined(__x86_64__)

#include <immintrin.h>
#include <stdint.h>

#include "dtype.h"
#include "reduce_kern.h"

WEFT_SIMD_BEGIN_AVX512

typedef __m512 vf;
#define VW 16
#define SMALL_SUFFIX _avx512

static inline __m512i bits(vf x) { return _mm512_castps_si512(x); }
static inline __m512i k32(uint32_t v) { return _mm512_set1_epi32((int)v); }
static inline vf v_set1(float x) { return _mm512_set1_ps(x); }
// x's NaN (quieted) when x is NaN, else the operation's: reduce_float.c's
// FLOAT_ARITH, which fixes what the commutative instruction leaves open.
static inline vf nan_first(vf x, vf r) {
  return _mm512_mask_add_ps(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x, x);
}
static inline vf v_add(vf x, vf y) { return nan_first(x, _mm512_add_ps(x, y)); }
static inline vf v_mul(vf x, vf y) { return nan_first(x, _mm512_mul_ps(x, y)); }
static inline vf v_div(vf x, vf y) { return _mm512_div_ps(x, y); }
// MAXPS gives x when x > y and y otherwise (y when either is NaN); a NaN x
// must win too, as FMAX in reduce_float.c says.
static inline vf v_max(vf x, vf y) {
  return _mm512_mask_mov_ps(_mm512_max_ps(x, y), _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}
static inline vf v_min(vf x, vf y) {
  return _mm512_mask_mov_ps(_mm512_min_ps(x, y), _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

// Lanes whose float bits are NaN (|bits| above infinity's).
static inline __mmask16 is_nan(__m512i u) {
  return _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, k32(0x7fffffffu)), k32(0x7f800000u));
}

static inline vf ld_half(const void *p) { return _mm512_cvtph_ps(_mm256_loadu_si256(p)); }
static inline void st_half(void *p, vf x) {
  _mm256_storeu_si256(p, _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// Unlike weft_bf16_to_float, a signalling NaN stays signalling: every path
// from here to st_bf16 either quiets it (arithmetic) or keeps it whole
// (max, min), and st_bf16 sets the quiet bit, so the result is the same.
static inline vf ld_bf16(const void *p) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(p)), 16));
}
static inline void st_bf16(void *p, vf x) {
  __m512i u = bits(x);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), k32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, k32(0x7fffu)), lsb), 16);
  __m512i nan = _mm512_or_si512(_mm512_srli_epi32(u, 16), k32(0x0040u));
  _mm256_storeu_si256(p, _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(r, is_nan(u), nan)));
}

// fp8 through fp16: e5m2 is fp16's top byte; e4m3's magnitude bits, moved
// into fp16's fields, are the value times 2^-8 (subnormals too), scaled back
// exactly. NaNs come out as NaNs of the right sign but another payload than
// the tables' (and e4m3's needs patching): invisible, as every fp8 NaN
// result is rounded to the one NaN pattern of its sign.
static inline vf ld_e5m2(const void *p) {
  return _mm512_cvtph_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128(p)), 8));
}
static inline vf ld_e4m3(const void *p) {
  __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128(p));
  __m256i mag = _mm256_and_si256(v, _mm256_set1_epi16(0x7f));
  __m256i sign = _mm256_slli_epi16(_mm256_and_si256(v, _mm256_set1_epi16(0x80)), 8);
  __m256i h = _mm256_or_si256(_mm256_slli_epi16(mag, 7), sign);
  __m512i f = bits(_mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_set1_ps(256.0f)));
  __mmask16 nan = _mm256_cmpeq_epi16_mask(mag, _mm256_set1_epi16(0x7f));
  return _mm512_castsi512_ps(_mm512_mask_or_epi32(f, nan, f, k32(0x7fc00000u)));
}

// weft_dtype_e4m3_round / _e5m2_round lane by lane: `sh` mantissa bits
// dropped, exponent rebias `rebias`, subnormals by adding `magic` (whose ulp
// is the format's subnormal step), saturation to `maxv` above `sat`, `nanv`
// for NaN.
static inline void st_fp8(void *p, vf x, int sh, uint32_t rebias, float magic, uint32_t min_norm,
                          uint32_t sat, uint32_t maxv, uint32_t nanv) {
  __m512i u = bits(x);
  __m512i sign = _mm512_and_si512(_mm512_srli_epi32(u, 24), k32(0x80u));
  __m512i a = _mm512_and_si512(u, k32(0x7fffffffu));
  __m512i half = k32((1u << (sh - 1)) - 1u);
  __m512i lsb = _mm512_and_si512(_mm512_srl_epi32(a, _mm_cvtsi32_si128(sh)), k32(1));
  __m512i norm = _mm512_sub_epi32(
      _mm512_srl_epi32(_mm512_add_epi32(_mm512_add_epi32(a, half), lsb), _mm_cvtsi32_si128(sh)),
      k32(rebias));
  vf mf = _mm512_set1_ps(magic);
  __m512i sub = _mm512_sub_epi32(bits(_mm512_add_ps(_mm512_castsi512_ps(a), mf)), bits(mf));
  __m512i r = _mm512_mask_mov_epi32(sub, _mm512_cmpge_epi32_mask(a, k32(min_norm)), norm);
  r = _mm512_mask_mov_epi32(r, _mm512_cmpgt_epi32_mask(a, k32(sat)), k32(maxv));
  r = _mm512_mask_mov_epi32(r, _mm512_cmpgt_epi32_mask(a, k32(0x7f800000u)), k32(nanv));
  _mm_storeu_si128(p, _mm512_cvtepi32_epi8(_mm512_or_si512(r, sign)));
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
