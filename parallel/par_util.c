/*
 * par_util.c — error reports and 16-bit float conversion for the parallel
 * layer (see par_util.h).
 */
#include "par_util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

ncclResult_t weft_par_error(ncclResult_t res, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("weft parallel: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return res;
}

static uint32_t float_bits(float x) {
  uint32_t b;
  memcpy(&b, &x, 4);
  return b;
}

static float bits_float(uint32_t b) {
  float x;
  memcpy(&x, &b, 4);
  return x;
}

uint16_t weft_par_to_bf16(float x) {
  uint32_t b = float_bits(x);
  if (isnan(x)) return (uint16_t)((b >> 16) | 0x40);  // stay a (quiet) NaN
  b += 0x7fff + ((b >> 16) & 1);                       // round to nearest even
  return (uint16_t)(b >> 16);
}

float weft_par_from_bf16(uint16_t b) { return bits_float((uint32_t)b << 16); }

uint16_t weft_par_to_fp16(float x) {
  uint32_t b = float_bits(x);
  uint16_t sign = (uint16_t)((b >> 16) & 0x8000);
  float a = fabsf(x);
  if (isnan(x)) return sign | 0x7e00;
  if (a >= 65520.0f) return sign | 0x7c00;  // rounds past the largest half: infinity
  if (a < 6.103515625e-05f) {               // subnormal half: quantum 2^-24
    return sign | (uint16_t)lrintf(a * 16777216.0f);
  }
  uint32_t e = ((b >> 23) & 0xff) - 127 + 15, m = b & 0x7fffff;
  uint32_t h = (e << 10) | (m >> 13);
  uint32_t rest = m & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;  // a carry moves into the exponent
  return sign | (uint16_t)h;
}

float weft_par_from_fp16(uint16_t h) {
  uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
  float s = (h & 0x8000) ? -1.0f : 1.0f;
  if (e == 0) return s * ldexpf((float)m, -24);
  if (e == 31) return m ? NAN : s * INFINITY;
  return s * ldexpf((float)(m | 0x400), (int)e - 25);
}
