/*
 * float_formats.cuh — bit casts, correctly rounded float arithmetic and the
 * narrow float formats (fp16, bf16, fp8 e4m3/e5m2), for host and device.
 *
 * Part of the device backend's arithmetic (reduce_ops.cuh). The converters
 * are our own bit manipulation, the same algorithms as src/arith/dtype_inline.h
 * (round to nearest even; fp8 saturating like __NV_SATFINITE; NaN payloads
 * kept for fp16/bf16, the canonical NaN for fp8), so results match the host
 * backend bit for bit and nothing depends on cuda_fp16.h/cuda_fp8.h. On the
 * device every float operation is an explicit round-to-nearest intrinsic
 * (__fadd_rn, ...), which nvcc never contracts into an FMA; denormals rely on
 * -ftz=false (nvcc's default, and the Makefile's flag).
 */
#ifndef WEFT_CUDA_FLOAT_FORMATS_CUH
#define WEFT_CUDA_FLOAT_FORMATS_CUH

#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define WEFT_HD __host__ __device__ __forceinline__
#else
#define WEFT_HD inline
#endif

namespace weft_cuda {

// ---- bit casts and correctly rounded arithmetic, host and device ----

WEFT_HD uint32_t f2u(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
#endif
}

WEFT_HD float u2f(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
#endif
}

#ifdef __CUDA_ARCH__
WEFT_HD float fadd(float x, float y) { return __fadd_rn(x, y); }
WEFT_HD float fmul(float x, float y) { return __fmul_rn(x, y); }
WEFT_HD float fdiv(float x, float y) { return __fdiv_rn(x, y); }
WEFT_HD double dadd(double x, double y) { return __dadd_rn(x, y); }
WEFT_HD double dmul(double x, double y) { return __dmul_rn(x, y); }
WEFT_HD double ddiv(double x, double y) { return __ddiv_rn(x, y); }
#else
WEFT_HD float fadd(float x, float y) { return x + y; }
WEFT_HD float fmul(float x, float y) { return x * y; }
WEFT_HD float fdiv(float x, float y) { return x / y; }
WEFT_HD double dadd(double x, double y) { return x + y; }
WEFT_HD double dmul(double x, double y) { return x * y; }
WEFT_HD double ddiv(double x, double y) { return x / y; }
#endif

// ---- the narrow float formats (algorithms of src/arith/dtype_inline.h) ----

WEFT_HD float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t a = h & 0x7fffu, r;
  if (a >= 0x7c00u)  // infinity, NaN (made quiet, payload kept)
    r = (a << 13) | 0x7f800000u | (a > 0x7c00u ? 0x00400000u : 0u);
  else if (a >= 0x0400u)  // normal: rebias the exponent 15 -> 127
    r = (a << 13) + ((127u - 15u) << 23);
  else  // zero, subnormal: a * 2^-24, exact
    r = f2u(fmul((float)(int32_t)a, 0x1p-24f));
  return u2f(r | sign);
}

WEFT_HD uint16_t float_to_half(float f) {
  uint32_t u = f2u(f);
  uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu, r;
  if (a > 0x7f800000u)
    r = 0x7e00u | ((a >> 13) & 0x01ffu);  // quiet NaN, payload kept
  else if (a >= 0x477ff000u)
    r = 0x7c00u;  // rounds past 65504: infinity
  else if (a >= 0x38800000u)  // normal: drop 13 bits, ties to even
    r = ((a + 0x0fffu + ((a >> 13) & 1u)) >> 13) - ((127u - 15u) << 10);
  else  // subnormal: 0.5 has ulp 2^-24, fp16's subnormal step
    r = f2u(fadd(u2f(a), 0.5f)) - 0x3f000000u;
  return (uint16_t)(r | sign);
}

WEFT_HD float bf16_to_float(uint16_t b) {
  uint32_t quiet = (b & 0x7fffu) > 0x7f80u ? 0x00400000u : 0u;
  return u2f(((uint32_t)b << 16) | quiet);
}

WEFT_HD uint16_t float_to_bf16(float f) {
  uint32_t u = f2u(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// e4m3 ("e4m3fn"): bias 7, no infinities, S.1111.111 is NaN, max 448.
WEFT_HD float e4m3_to_float(uint8_t v) {
  uint32_t sign = (uint32_t)(v & 0x80u) << 24;
  uint32_t e = (v >> 3) & 15u, m = v & 7u, r;
  if ((v & 0x7fu) == 0x7fu)
    r = 0x7fc00000u;  // the canonical quiet NaN, as dtype.c's table
  else if (e != 0)
    r = ((e + 127u - 7u) << 23) | (m << 20);
  else
    r = f2u(fmul((float)(int32_t)m, 0x1p-9f));
  return u2f(r | sign);
}

// Saturating: beyond 448, infinities included, becomes +-448.
WEFT_HD uint8_t float_to_e4m3(float f) {
  uint32_t u = f2u(f);
  uint32_t sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu, r;
  if (a > 0x7f800000u)
    r = 0x7fu;
  else if (a > 0x43e00000u)
    r = 0x7eu;
  else if (a >= 0x3c800000u)
    r = ((a + 0x7ffffu + ((a >> 20) & 1u)) >> 20) - ((127u - 7u) << 3);
  else  // |f| < 2^-6: 16384 has ulp 2^-9, e4m3's subnormal step
    r = f2u(fadd(u2f(a), 16384.0f)) - 0x46800000u;
  return (uint8_t)(r | sign);
}

// e5m2: bias 15, IEEE-like (infinities, NaNs), max 57344.
WEFT_HD float e5m2_to_float(uint8_t v) {
  uint32_t sign = (uint32_t)(v & 0x80u) << 24;
  uint32_t e = (v >> 2) & 31u, m = v & 3u, r;
  if (e == 31u)
    r = m ? 0x7fc00000u : 0x7f800000u;
  else if (e != 0)
    r = ((e + 127u - 15u) << 23) | (m << 21);
  else
    r = f2u(fmul((float)(int32_t)m, 0x1p-16f));
  return u2f(r | sign);
}

// Saturating: beyond 57344, infinities included, becomes +-57344.
WEFT_HD uint8_t float_to_e5m2(float f) {
  uint32_t u = f2u(f);
  uint32_t sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu, r;
  if (a > 0x7f800000u)
    r = 0x7eu;
  else if (a > 0x47600000u)
    r = 0x7bu;
  else if (a >= 0x38800000u)
    r = ((a + 0xfffffu + ((a >> 21) & 1u)) >> 21) - ((127u - 15u) << 2);
  else  // |f| < 2^-14: 128 has ulp 2^-16, e5m2's subnormal step
    r = f2u(fadd(u2f(a), 128.0f)) - 0x43000000u;
  return (uint8_t)(r | sign);
}

}  // namespace weft_cuda

#endif
