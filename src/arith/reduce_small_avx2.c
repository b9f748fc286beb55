/*
 * reduce_small_avx2.c — fp16, bf16 and fp8 reductions with AVX2 and F16C,
 * 8 elements per step: the primitives reduce_small_simd.h builds its loop
 * and its roundings from.
 *
 * fp16 uses VCVTPH2PS/VCVTPS2PH (exact widening, SNaN quieted with its
 * payload; rounding to nearest even, subnormals kept, NaN payload
 * truncated and quieted: what weft_float_to_half does). bf16 is integer
 * work on the bit patterns; fp8 widens through fp16. Masks are all-ones
 * lanes; results are narrowed with saturating packs, which never saturate
 * here (every lane already fits).
 */
#include "reduce_kern.h"

#if defined(WEFT_SIMD_X86)

#include <immintrin.h>
#include <stdint.h>

WEFT_SIMD_BEGIN_AVX2

typedef __m256 vf;   // VW floats
typedef __m256i vi;  // VW 32-bit lanes
typedef __m256i vm;  // all-ones lanes
#define VW 8
#define SMALL_SUFFIX _avx2

static inline vi i_k(uint32_t v) { return _mm256_set1_epi32((int)v); }
static inline vi i_and(vi a, vi b) { return _mm256_and_si256(a, b); }
static inline vi i_or(vi a, vi b) { return _mm256_or_si256(a, b); }
static inline vi i_add(vi a, vi b) { return _mm256_add_epi32(a, b); }
static inline vi i_sub(vi a, vi b) { return _mm256_sub_epi32(a, b); }
static inline vi i_srl(vi a, unsigned n) { return _mm256_srli_epi32(a, (int)n); }
static inline vm i_gt(vi a, vi b) { return _mm256_cmpgt_epi32(a, b); }
static inline vi i_sel(vm m, vi yes, vi no) { return _mm256_blendv_epi8(no, yes, m); }
static inline vi f_bits(vf x) { return _mm256_castps_si256(x); }
static inline vf bits_f(vi u) { return _mm256_castsi256_ps(u); }
static inline vf v_set1(float x) { return _mm256_set1_ps(x); }
static inline vm f_nan(vf x) { return f_bits(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)); }
static inline vf f_sel(vm m, vf yes, vf no) { return _mm256_blendv_ps(no, yes, bits_f(m)); }
static inline vf f_add(vf x, vf y) { return _mm256_add_ps(x, y); }
static inline vf f_mul(vf x, vf y) { return _mm256_mul_ps(x, y); }
static inline vf v_div(vf x, vf y) { return _mm256_div_ps(x, y); }
static inline vf f_max(vf x, vf y) { return _mm256_max_ps(x, y); }
static inline vf f_min(vf x, vf y) { return _mm256_min_ps(x, y); }
// Each lane's low 16 bits (every lane fits), in order: packs work per
// 128-bit half (r0-3 r0-3 | r4-7 r4-7), then the halves' low quarters.
static inline __m128i pack16(vi r) {
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08));
}
static inline void st16(void *p, vi r) { _mm_storeu_si128(p, pack16(r)); }
static inline void st8(void *p, vi r) {
  __m128i w = pack16(r);
  _mm_storel_epi64(p, _mm_packus_epi16(w, w));
}

#include "reduce_small_simd.h"

static inline vf ld_half(const void *p) { return _mm256_cvtph_ps(_mm_loadu_si128(p)); }
static inline void st_half(void *p, vf x) {
  _mm_storeu_si128(p, _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
}
static inline vf ld_bf16(const void *p) {
  return bits_f(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(p)), 16));
}
static inline vf ld_e5m2(const void *p) {
  return _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64(p)), 8));
}
static inline vf ld_e4m3(const void *p) {
  __m128i v = _mm_cvtepu8_epi16(_mm_loadl_epi64(p));
  __m128i mag = _mm_and_si128(v, _mm_set1_epi16(0x7f));
  __m128i sign = _mm_slli_epi16(_mm_and_si128(v, _mm_set1_epi16(0x80)), 8);
  vf f = _mm256_cvtph_ps(_mm_or_si128(_mm_slli_epi16(mag, 7), sign));
  return e4m3_fix(f, _mm256_cvtepi16_epi32(_mm_cmpeq_epi16(mag, _mm_set1_epi16(0x7f))));
}

WEFT_SIMD_END

#endif
