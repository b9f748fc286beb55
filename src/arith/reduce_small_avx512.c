/*
 * reduce_small_avx512.c — fp16, bf16 and fp8 reductions with AVX-512 (F, BW,
 * VL), 16 elements per step: the primitives reduce_small_simd.h builds its
 * loop and its roundings from.
 *
 * fp16 uses VCVTPH2PS/VCVTPS2PH (exact widening, SNaN quieted with its
 * payload; rounding to nearest even, subnormals kept, NaN payload
 * truncated and quieted: what weft_float_to_half does). bf16 is integer
 * work on the bit patterns: AVX-512 BF16's VCVTNEPS2BF16 flushes subnormal
 * inputs to zero, so it would change results. fp8 widens through fp16.
 */
#include "reduce_kern.h"

#if defined(WEFT_SIMD_X86)

#include <immintrin.h>
#include <stdint.h>

WEFT_SIMD_BEGIN_AVX512

typedef __m512 vf;   // VW floats
typedef __m512i vi;  // VW 32-bit lanes
typedef __mmask16 vm;
#define VW 16
#define SMALL_SUFFIX _avx512

static inline vi i_k(uint32_t v) { return _mm512_set1_epi32((int)v); }
static inline vi i_and(vi a, vi b) { return _mm512_and_si512(a, b); }
static inline vi i_or(vi a, vi b) { return _mm512_or_si512(a, b); }
static inline vi i_add(vi a, vi b) { return _mm512_add_epi32(a, b); }
static inline vi i_sub(vi a, vi b) { return _mm512_sub_epi32(a, b); }
static inline vi i_srl(vi a, unsigned n) { return _mm512_srli_epi32(a, n); }
static inline vm i_gt(vi a, vi b) { return _mm512_cmpgt_epi32_mask(a, b); }
static inline vi i_sel(vm m, vi yes, vi no) { return _mm512_mask_mov_epi32(no, m, yes); }
static inline vi f_bits(vf x) { return _mm512_castps_si512(x); }
static inline vf bits_f(vi u) { return _mm512_castsi512_ps(u); }
static inline vf v_set1(float x) { return _mm512_set1_ps(x); }
static inline vm f_nan(vf x) { return _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q); }
static inline vf f_sel(vm m, vf yes, vf no) { return _mm512_mask_mov_ps(no, m, yes); }
static inline vf f_add(vf x, vf y) { return _mm512_add_ps(x, y); }
static inline vf f_mul(vf x, vf y) { return _mm512_mul_ps(x, y); }
static inline vf v_div(vf x, vf y) { return _mm512_div_ps(x, y); }
static inline vf f_max(vf x, vf y) { return _mm512_max_ps(x, y); }
static inline vf f_min(vf x, vf y) { return _mm512_min_ps(x, y); }
// Store each lane's low 16 or 8 bits (every lane fits), in order.
static inline void st16(void *p, vi r) { _mm256_storeu_si256(p, _mm512_cvtepi32_epi16(r)); }
static inline void st8(void *p, vi r) { _mm_storeu_si128(p, _mm512_cvtepi32_epi8(r)); }

#include "reduce_small_simd.h"

static inline vf ld_half(const void *p) { return _mm512_cvtph_ps(_mm256_loadu_si256(p)); }
static inline void st_half(void *p, vf x) {
  _mm256_storeu_si256(p, _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
static inline vf ld_bf16(const void *p) {
  return bits_f(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(p)), 16));
}
static inline vf ld_e5m2(const void *p) {
  return _mm512_cvtph_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128(p)), 8));
}
static inline vf ld_e4m3(const void *p) {
  __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128(p));
  __m256i mag = _mm256_and_si256(v, _mm256_set1_epi16(0x7f));
  __m256i sign = _mm256_slli_epi16(_mm256_and_si256(v, _mm256_set1_epi16(0x80)), 8);
  vf f = _mm512_cvtph_ps(_mm256_or_si256(_mm256_slli_epi16(mag, 7), sign));
  return e4m3_fix(f, _mm256_cmpeq_epi16_mask(mag, _mm256_set1_epi16(0x7f)));
}

WEFT_SIMD_END

#endif
