/*
 * dtype_inline.h — the fp16 and bf16 converters (and the float-to-fp8
 * rounding used by the reduction loops) as static inline bit manipulation.
 *
 * Included by dtype.h. Portable C: integer operations on the IEEE bit
 * patterns, no compiler half types. Every converter is written without
 * branches (all cases computed, then selected by masks) so a loop over an
 * array of them auto-vectorises. Rounding is to nearest, ties to even. Subnormal
 * results are rounded by one float addition whose ulp equals the target's
 * subnormal step, which relies on the default rounding mode, as all of the
 * library's float arithmetic does.
 */
#ifndef WEFT_DTYPE_INLINE_H
#define WEFT_DTYPE_INLINE_H

#include <stdint.h>
#include <string.h>

static inline uint32_t weft_dtype_float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float weft_dtype_bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

// c ? x : y as mask arithmetic. Plain conditionals get turned into branches
// around the float operations, which the vectoriser then refuses to
// speculate; masks keep every converter a straight line.
static inline uint32_t weft_dtype_select(int c, uint32_t x, uint32_t y) {
  uint32_t m = 0u - (uint32_t)c;
  return (x & m) | (y & ~m);
}

static inline float weft_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t a = h & 0x7fffu;
  // Normal: widen the mantissa and rebias the exponent (15 -> 127).
  uint32_t norm = (a << 13) + ((127u - 15u) << 23);
  // Zero and subnormals: the value is a * 2^-24, exact in float.
  uint32_t sub = weft_dtype_float_bits((float)(int32_t)a * 0x1p-24f);
  // Infinity and NaN: all-ones exponent; NaNs come out quiet.
  uint32_t special = (a << 13) | 0x7f800000u | weft_dtype_select(a > 0x7c00u, 0x00400000u, 0u);
  uint32_t r = weft_dtype_select(a >= 0x7c00u, special, weft_dtype_select(a >= 0x0400u, norm, sub));
  return weft_dtype_bits_float(r | sign);
}

// The float-to-narrow converters compare |f|'s bits as int32_t (they are
// below 2^31): baseline x86-64 vectors only have signed 32-bit compares.
static inline uint16_t weft_float_to_half(float f) {
  uint32_t u = weft_dtype_float_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  // Normal result: drop 13 mantissa bits with ties-to-even; a carry moves
  // into the exponent as it should.
  uint32_t norm = ((a + 0x0fffu + ((a >> 13) & 1u)) >> 13) - ((127u - 15u) << 10);
  // Subnormal result (|f| < 2^-14): 0.5 has ulp 2^-24, fp16's subnormal step.
  uint32_t sub = weft_dtype_float_bits(weft_dtype_bits_float(a) + 0.5f) - 0x3f000000u;
  uint32_t nan = 0x7e00u | ((a >> 13) & 0x01ffu);  // quiet, payload kept
  uint32_t r = weft_dtype_select((int32_t)a >= 0x38800000, norm, sub);
  r = weft_dtype_select((int32_t)a >= 0x477ff000, 0x7c00u, r);  // rounds past 65504: infinity
  r = weft_dtype_select((int32_t)a > 0x7f800000, nan, r);
  return (uint16_t)(r | sign);
}

static inline float weft_bf16_to_float(uint16_t b) {
  uint32_t quiet = weft_dtype_select((b & 0x7fffu) > 0x7f80u, 0x00400000u, 0u);
  return weft_dtype_bits_float(((uint32_t)b << 16) | quiet);
}

static inline uint16_t weft_float_to_bf16(float f) {
  uint32_t u = weft_dtype_float_bits(f);
  // Same exponent range as float: rounding the low 16 bits is exact for
  // subnormals too, and the largest finite floats round up to infinity.
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  uint32_t nan = (u >> 16) | 0x0040u;
  return (uint16_t)weft_dtype_select((u & 0x7fffffffu) > 0x7f800000u, nan, rounded);
}

// Float to fp8 e4m3 (bias 7, no infinities, S.1111.111 is NaN, max 448),
// saturating: anything beyond 448, infinities included, becomes +-448.
static inline uint8_t weft_dtype_e4m3_round(float f) {
  uint32_t u = weft_dtype_float_bits(f);
  uint32_t sign = (u >> 24) & 0x80u;
  uint32_t a = u & 0x7fffffffu;
  uint32_t norm = ((a + 0x7ffffu + ((a >> 20) & 1u)) >> 20) - ((127u - 7u) << 3);
  // |f| < 2^-6: 16384 has ulp 2^-9, e4m3's subnormal step.
  uint32_t sub = weft_dtype_float_bits(weft_dtype_bits_float(a) + 16384.0f) - 0x46800000u;
  uint32_t r = weft_dtype_select((int32_t)a >= 0x3c800000, norm, sub);
  r = weft_dtype_select((int32_t)a > 0x43e00000, 0x7eu, r);  // beyond 448
  r = weft_dtype_select((int32_t)a > 0x7f800000, 0x7fu, r);
  return (uint8_t)(r | sign);
}

// Float to fp8 e5m2 (bias 15, IEEE-like, max 57344), saturating likewise.
static inline uint8_t weft_dtype_e5m2_round(float f) {
  uint32_t u = weft_dtype_float_bits(f);
  uint32_t sign = (u >> 24) & 0x80u;
  uint32_t a = u & 0x7fffffffu;
  uint32_t norm = ((a + 0xfffffu + ((a >> 21) & 1u)) >> 21) - ((127u - 15u) << 2);
  // |f| < 2^-14: 128 has ulp 2^-16, e5m2's subnormal step.
  uint32_t sub = weft_dtype_float_bits(weft_dtype_bits_float(a) + 128.0f) - 0x43000000u;
  uint32_t r = weft_dtype_select((int32_t)a >= 0x38800000, norm, sub);
  r = weft_dtype_select((int32_t)a > 0x47600000, 0x7bu, r);  // beyond 57344
  r = weft_dtype_select((int32_t)a > 0x7f800000, 0x7eu, r);
  return (uint8_t)(r | sign);
}

// fp8 to float tables (dtype.c), for loops that want the lookup inline.
extern const float weft_dtype_e4m3_table[256];
extern const float weft_dtype_e5m2_table[256];

#endif
