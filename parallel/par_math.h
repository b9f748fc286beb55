/*
 * par_math.h — the exponential the layers' element-wise loops use (softmax,
 * cross-entropy, GELU), written so the compiler can vectorise those loops.
 *
 * libm's expf and tanhf are calls the compiler cannot vectorise; in the
 * trainer's profile they took 40% of a step. This expf reduces x = k ln2 + r
 * with |r| <= ln2/2 (k rounded by the 1.5 * 2^23 trick, so no call), sums
 * e^r's Taylor series to degree 7 (truncation error below 6e-9, under
 * float's half ulp) and scales by 2^k through the exponent bits. Relative
 * error: a few ulp. Inputs are clamped to [-86, 80]: exp(-86) ~ 4.5e-38 is
 * the smallest result and exp(80) ~ 5.5e34 the largest, so neither it nor
 * 1 / (1 + exp(x)) is ever subnormal (a subnormal operand costs a
 * microcode assist on every vector instruction it is in, and the
 * vectorised loops compute the clamped lanes too). Softmax and cross-
 * entropy only take x <= 0; GELU's sigmoid saturates long before 80.
 *
 * Every layout uses the same function, so layouts still agree bit for bit
 * where the arithmetic order does.
 */
#ifndef WEFT_PAR_MATH_H
#define WEFT_PAR_MATH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline float weft_par_expf(float x) {
  x = x < -86.0f ? -86.0f : x;
  x = x > 80.0f ? 80.0f : x;
  const float round = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  float k = (x * 1.44269504f + round) - round;
  float r = x - k * 6.9313812256e-01f;  // ln2 in two parts: k times the first is exact
  r = r - k * 9.0580006145e-06f;
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int32_t bits = ((int32_t)k + 127) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

// GELU with the tanh approximation, through 0.5 (1 + tanh u) = sigmoid(2u):
// gelu(x) = x s, gelu'(x) = s + 2 x s (1 - s) du/dx, u = k (x + c x^3),
// computed as k x (1 + c x^2) so tiny x make no subnormal x^3.
#define WEFT_GELU_K 0.7978845608f  // sqrt(2/pi)
#define WEFT_GELU_C 0.044715f

static inline float weft_par_gelu_sigmoid(float x) {
  float u = WEFT_GELU_K * x * (1.0f + WEFT_GELU_C * x * x);
  return 1.0f / (1.0f + weft_par_expf(-2.0f * u));
}

static inline float weft_par_gelu(float x) { return x * weft_par_gelu_sigmoid(x); }

static inline float weft_par_gelu_grad(float x) {
  float s = weft_par_gelu_sigmoid(x);
  return s + 2.0f * x * s * (1.0f - s) * WEFT_GELU_K * (1.0f + 3.0f * WEFT_GELU_C * x * x);
}

// The same over arrays, vectorised per CPU level (par_math.c).
void weft_par_gelu_rows(const float *x, float *y, size_t n);             // y = gelu(x)
void weft_par_gelu_grad_mul(const float *x, float *dy, size_t n);        // dy *= gelu'(x)
void weft_par_exp_shift(float *v, size_t n, float shift);                // v = exp(v - shift)

#endif  // WEFT_PAR_MATH_H
