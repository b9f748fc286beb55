/*
 * test_dtype.c — datatype sizes and names, and the fp16/bf16/fp8
 * conversions checked against an independent reference.
 *
 * The reference decodes a bit pattern from its fields with ldexp and rounds
 * a value with nearbyint on an exact power-of-two quantum, in double: no bit
 * tricks shared with the code under test. Decoding and the round trip are
 * checked for every bit pattern (e5m2's infinities come back as the largest
 * finite value: fp8 conversions saturate); rounding on a dense sample of
 * all floats, on every tie between neighbours, and on the overflow,
 * saturation, subnormal and NaN edges.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "dtype.h"

// One narrow float format and the converters under test.
typedef struct {
  const char *name;
  int ebits, mbits, bias;
  int ieee;      // 1: all-ones exponent is inf/NaN; 0: only S.1111.111 is NaN
  int saturate;  // 1: overflow gives max finite; 0: infinity
  float (*to_float)(uint32_t bits);
  uint32_t (*from_float)(float f);
} fmt_t;

static float half_to(uint32_t b) { return weft_half_to_float((uint16_t)b); }
static uint32_t half_from(float f) { return weft_float_to_half(f); }
static float bf16_to(uint32_t b) { return weft_bf16_to_float((uint16_t)b); }
static uint32_t bf16_from(float f) { return weft_float_to_bf16(f); }
static float e4m3_to(uint32_t b) { return weft_e4m3_to_float((uint8_t)b); }
static uint32_t e4m3_from(float f) { return weft_float_to_e4m3(f); }
static float e5m2_to(uint32_t b) { return weft_e5m2_to_float((uint8_t)b); }
static uint32_t e5m2_from(float f) { return weft_float_to_e5m2(f); }

static const fmt_t HALF = {"fp16", 5, 10, 15, 1, 0, half_to, half_from};
static const fmt_t BF16 = {"bf16", 8, 7, 127, 1, 0, bf16_to, bf16_from};
static const fmt_t E4M3 = {"e4m3", 4, 3, 7, 0, 1, e4m3_to, e4m3_from};
static const fmt_t E5M2 = {"e5m2", 5, 2, 15, 1, 1, e5m2_to, e5m2_from};

static uint32_t npatterns(const fmt_t *f) { return 1u << (1 + f->ebits + f->mbits); }
static uint32_t sign_bit(const fmt_t *f) { return 1u << (f->ebits + f->mbits); }
static uint32_t emask(const fmt_t *f) { return (1u << f->ebits) - 1; }
static uint32_t mmask(const fmt_t *f) { return (1u << f->mbits) - 1; }

static int ref_is_nan(const fmt_t *f, uint32_t b) {
  uint32_t e = (b >> f->mbits) & emask(f), m = b & mmask(f);
  if (f->ieee) return e == emask(f) && m != 0;
  return e == emask(f) && m == mmask(f);
}

static double ref_decode(const fmt_t *f, uint32_t b) {
  uint32_t e = (b >> f->mbits) & emask(f), m = b & mmask(f);
  double s = (b & sign_bit(f)) ? -1.0 : 1.0;
  if (ref_is_nan(f, b)) return NAN;
  if (f->ieee && e == emask(f)) return s * INFINITY;
  if (e == 0) return s * ldexp((double)m, 1 - f->bias - f->mbits);
  return s * ldexp((double)(m | (1u << f->mbits)), (int)e - f->bias - f->mbits);
}

static uint32_t max_finite_bits(const fmt_t *f) {
  if (f->ieee) return ((emask(f) - 1) << f->mbits) | mmask(f);
  return (emask(f) << f->mbits) | (mmask(f) - 1);
}

// Round x to the format, ties to even; NaN gives UINT32_MAX.
static uint32_t ref_encode(const fmt_t *f, double x) {
  if (isnan(x)) return UINT32_MAX;
  uint32_t sign = signbit(x) ? sign_bit(f) : 0;
  double ax = fabs(x), maxf = ref_decode(f, max_finite_bits(f));
  uint32_t over = f->saturate ? max_finite_bits(f) : emask(f) << f->mbits;
  if (isinf(ax)) return sign | over;
  int emin = 1 - f->bias;
  int e = ax == 0 ? emin : ilogb(ax);
  if (e < emin) e = emin;
  double q = ldexp(1.0, e - f->mbits);
  double r = nearbyint(ax / q) * q;
  if (r > maxf) return sign | over;
  if (r == 0) return sign;
  int er = ilogb(r);
  if (er < emin) return sign | (uint32_t)(r / ldexp(1.0, emin - f->mbits));
  uint32_t m = (uint32_t)(r / ldexp(1.0, er - f->mbits)) - (1u << f->mbits);
  return sign | ((uint32_t)(er + f->bias) << f->mbits) | m;
}

static float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static void check_decode_all(const fmt_t *f) {
  for (uint32_t b = 0; b < npatterns(f); b++) {
    float v = f->to_float(b);
    if (ref_is_nan(f, b)) {
      cr_assert(isnan(v), "%s 0x%x should decode to NaN", f->name, b);
      cr_assert(float_bits(v) & 0x00400000u, "%s 0x%x should give a quiet NaN", f->name, b);
    } else {
      double r = ref_decode(f, b);
      cr_assert((double)v == r && !!signbit(v) == !!signbit(r),
                "%s 0x%x decodes to %a, expected %a", f->name, b, (double)v, r);
    }
  }
}

static void check_roundtrip_all(const fmt_t *f) {
  for (uint32_t b = 0; b < npatterns(f); b++) {
    if (ref_is_nan(f, b)) {
      uint32_t back = f->from_float(f->to_float(b));
      cr_assert(ref_is_nan(f, back), "%s NaN 0x%x came back as 0x%x", f->name, b, back);
      continue;
    }
    uint32_t back = f->from_float(f->to_float(b));
    if (f->saturate && isinf(f->to_float(b))) {  // e5m2 infinities saturate
      cr_assert_eq(back, (b & sign_bit(f)) | max_finite_bits(f), "%s inf 0x%x", f->name, b);
      continue;
    }
    cr_assert_eq(back, b, "%s 0x%x round-trips to 0x%x", f->name, b, back);
  }
}

static void check_one(const fmt_t *f, float x) {
  uint32_t got = f->from_float(x), want = ref_encode(f, x);
  if (want == UINT32_MAX)
    cr_assert(ref_is_nan(f, got), "%s(%a) = 0x%x, expected NaN", f->name, (double)x, got);
  else
    cr_assert_eq(got, want, "%s(%a) = 0x%x, expected 0x%x", f->name, (double)x, got, want);
}

// A dense sample of all 2^32 floats plus a fine sweep of the format's range.
static void check_sampled(const fmt_t *f) {
  for (uint64_t u = 0; u < (1ull << 32); u += 997) check_one(f, bits_float((uint32_t)u));
  double lo = ref_decode(f, 1) / 4, hi = ref_decode(f, max_finite_bits(f)) * 2;
  uint32_t first = float_bits((float)lo), last = float_bits((float)hi);
  uint32_t step = ((last - first) / (4u << 20)) | 1u;  // about 4M values
  for (uint32_t u = first; u <= last; u += step) {
    check_one(f, bits_float(u));
    check_one(f, -bits_float(u));
  }
}

// Exact midpoints between neighbours round to the even one; one float ulp
// either side rounds to the nearer one.
static void check_ties(const fmt_t *f) {
  for (uint32_t b = 0; b < max_finite_bits(f); b++) {
    for (int neg = 0; neg < 2; neg++) {
      uint32_t s = neg ? sign_bit(f) : 0;
      double lo = ref_decode(f, b), hi = ref_decode(f, b + 1);
      float mid = (float)((lo + hi) / 2);
      cr_assert_eq((double)mid, (lo + hi) / 2, "midpoint not exact in float");
      if (neg) mid = -mid;
      uint32_t even = (b & 1) ? b + 1 : b;
      cr_assert_eq(f->from_float(mid), s | even, "%s tie %a -> 0x%x, expected 0x%x", f->name,
                   (double)mid, f->from_float(mid), s | even);
      float toward0 = nextafterf(mid, 0.0f), away = nextafterf(mid, neg ? -INFINITY : INFINITY);
      cr_assert_eq(f->from_float(toward0), s | b, "%s below tie %a", f->name, (double)toward0);
      cr_assert_eq(f->from_float(away), s | (b + 1), "%s above tie %a", f->name, (double)away);
    }
  }
}

static void check_nan_in(const fmt_t *f) {
  const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fbfffffu, 0xffffffffu};
  for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
    uint32_t got = f->from_float(bits_float(nans[i]));
    cr_assert(ref_is_nan(f, got), "%s(NaN 0x%x) = 0x%x, not NaN", f->name, nans[i], got);
    cr_assert(isnan(f->to_float(got)), "%s NaN does not decode to NaN", f->name);
  }
}

Test(dtype, sizes_names, .timeout = 5) {
  static const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  static const char *const names[] = {"int8",    "uint8",   "int32",   "uint32",
                                      "int64",   "uint64",  "float16", "float32",
                                      "float64", "bfloat16", "f8e4m3", "f8e5m2"};
  for (int t = 0; t < ncclNumTypes; t++) {
    cr_assert_eq(weft_dtype_size((ncclDataType_t)t), sizes[t], "size of %d", t);
    cr_assert_str_eq(weft_dtype_name((ncclDataType_t)t), names[t]);
    cr_assert_eq(weft_dtype_is_float((ncclDataType_t)t), t >= ncclFloat16, "is_float %d", t);
  }
  cr_assert_eq(weft_dtype_size((ncclDataType_t)ncclNumTypes), 0);
  cr_assert_eq(weft_dtype_size((ncclDataType_t)-1), 0);
  cr_assert_str_eq(weft_dtype_name((ncclDataType_t)ncclNumTypes), "unknown");
  cr_assert_str_eq(weft_dtype_name((ncclDataType_t)-1), "unknown");
  cr_assert_eq(weft_dtype_is_float((ncclDataType_t)99), 0);
}

Test(dtype, op_names, .timeout = 5) {
  cr_assert_str_eq(weft_op_name(ncclSum), "sum");
  cr_assert_str_eq(weft_op_name(ncclProd), "prod");
  cr_assert_str_eq(weft_op_name(ncclMax), "max");
  cr_assert_str_eq(weft_op_name(ncclMin), "min");
  cr_assert_str_eq(weft_op_name(ncclAvg), "avg");
  cr_assert_str_eq(weft_op_name(ncclNumOps), "premulsum");
  cr_assert_str_eq(weft_op_name(1000), "premulsum");
  cr_assert_str_eq(weft_op_name(-1), "unknown");
}

Test(dtype, decode_every_pattern, .timeout = 10) {
  check_decode_all(&HALF);
  check_decode_all(&BF16);
  check_decode_all(&E4M3);
  check_decode_all(&E5M2);
}

Test(dtype, roundtrip_every_pattern, .timeout = 10) {
  check_roundtrip_all(&HALF);
  check_roundtrip_all(&BF16);
  check_roundtrip_all(&E4M3);
  check_roundtrip_all(&E5M2);
}

Test(dtype, ties_to_even, .timeout = 10) {
  check_ties(&HALF);
  check_ties(&BF16);
  check_ties(&E4M3);
  check_ties(&E5M2);
}

Test(dtype, half_sampled, .timeout = 60) { check_sampled(&HALF); }
Test(dtype, bf16_sampled, .timeout = 60) { check_sampled(&BF16); }
Test(dtype, e4m3_sampled, .timeout = 60) { check_sampled(&E4M3); }
Test(dtype, e5m2_sampled, .timeout = 60) { check_sampled(&E5M2); }

Test(dtype, nan_in_nan_out, .timeout = 5) {
  check_nan_in(&HALF);
  check_nan_in(&BF16);
  check_nan_in(&E4M3);
  check_nan_in(&E5M2);
  // Exactly one NaN pattern per sign in e4m3, and e5m2 keeps its infinities.
  for (uint32_t b = 0; b < 256; b++)
    cr_assert_eq(!!isnan(weft_e4m3_to_float((uint8_t)b)), (b & 0x7f) == 0x7f, "e4m3 0x%x", b);
  cr_assert_eq(weft_e5m2_to_float(0x7c), INFINITY);
  cr_assert_eq(weft_e5m2_to_float(0xfc), -INFINITY);
}

Test(dtype, half_edges, .timeout = 5) {
  cr_assert_eq(weft_float_to_half(65504.0f), 0x7bff);
  cr_assert_eq(weft_float_to_half(nextafterf(65520.0f, 0)), 0x7bff);
  cr_assert_eq(weft_float_to_half(65520.0f), 0x7c00);  // tie rounds to even = inf
  cr_assert_eq(weft_float_to_half(FLT_MAX), 0x7c00);
  cr_assert_eq(weft_float_to_half(INFINITY), 0x7c00);
  cr_assert_eq(weft_float_to_half(-INFINITY), 0xfc00);
  cr_assert_eq(weft_float_to_half(0x1p-24f), 0x0001);
  cr_assert_eq(weft_float_to_half(0x1p-25f), 0x0000);          // tie to even 0
  cr_assert_eq(weft_float_to_half(0x1.000002p-25f), 0x0001);   // just above the tie
  cr_assert_eq(weft_float_to_half(0x3p-25f), 0x0002);          // tie to even 2
  cr_assert_eq(weft_float_to_half(FLT_TRUE_MIN), 0x0000);
  cr_assert_eq(weft_float_to_half(-0x1p-24f), 0x8001);
  cr_assert_eq(weft_float_to_half(-0.0f), 0x8000);
  cr_assert_eq(weft_float_to_half(nextafterf(0x1p-14f, 0)), 0x0400);  // rounds up to normal
  cr_assert_eq(weft_half_to_float(0x0001), 0x1p-24f);
  cr_assert_eq(weft_half_to_float(0x03ff), 0x3ffp-24f);
}

Test(dtype, bf16_edges, .timeout = 5) {
  cr_assert_eq(weft_float_to_bf16(FLT_MAX), 0x7f80);  // rounds past the largest bf16
  cr_assert_eq(weft_float_to_bf16(bits_float(0x7f7f7fffu)), 0x7f7f);
  cr_assert_eq(weft_float_to_bf16(bits_float(0x7f7f8000u)), 0x7f80);  // tie, odd -> up
  cr_assert_eq(weft_float_to_bf16(-INFINITY), 0xff80);
  cr_assert_eq(weft_float_to_bf16(FLT_TRUE_MIN), 0x0000);            // subnormal tie -> 0
  cr_assert_eq(weft_float_to_bf16(bits_float(0x00018000u)), 0x0002); // tie, odd -> up
  cr_assert_eq(weft_float_to_bf16(bits_float(0x00008001u)), 0x0001);
  cr_assert_eq(weft_bf16_to_float(0x0001), bits_float(0x00010000u));
}

Test(dtype, fp8_saturation, .timeout = 5) {
  const float big4[] = {448.0f, 449.0f, 464.0f, 464.5f, 480.0f, 1e6f, FLT_MAX, INFINITY};
  for (size_t i = 0; i < sizeof big4 / sizeof big4[0]; i++) {
    cr_assert_eq(weft_float_to_e4m3(big4[i]), 0x7e, "e4m3(%g)", (double)big4[i]);
    cr_assert_eq(weft_float_to_e4m3(-big4[i]), 0xfe, "e4m3(-%g)", (double)big4[i]);
  }
  cr_assert_eq(weft_e4m3_to_float(0x7e), 448.0f);
  const float big5[] = {57344.0f, 60000.0f, 61440.0f, 65536.0f, 1e9f, FLT_MAX, INFINITY};
  for (size_t i = 0; i < sizeof big5 / sizeof big5[0]; i++) {
    cr_assert_eq(weft_float_to_e5m2(big5[i]), 0x7b, "e5m2(%g)", (double)big5[i]);
    cr_assert_eq(weft_float_to_e5m2(-big5[i]), 0xfb, "e5m2(-%g)", (double)big5[i]);
  }
  cr_assert_eq(weft_e5m2_to_float(0x7b), 57344.0f);
  // Smallest subnormals and their ties.
  cr_assert_eq(weft_float_to_e4m3(0x1p-9f), 0x01);
  cr_assert_eq(weft_float_to_e4m3(0x1p-10f), 0x00);
  cr_assert_eq(weft_float_to_e4m3(0x3p-10f), 0x02);
  cr_assert_eq(weft_float_to_e5m2(0x1p-16f), 0x01);
  cr_assert_eq(weft_float_to_e5m2(0x1p-17f), 0x00);
  cr_assert_eq(weft_float_to_e5m2(-0x3p-17f), 0x82);
}
