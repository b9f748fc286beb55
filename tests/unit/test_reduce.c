/*
 * test_reduce.c — host reductions for every datatype and operation against
 * a straightforward element-by-element reference.
 *
 * The reference computes integers in 64-bit unsigned arithmetic (then
 * truncates, so wrap-around is exact) and floating types the way the
 * contract says: float32 and the narrow formats in float, rounded once,
 * float64 in double. The narrow-format converters it uses are checked on
 * their own in test_dtype.c. Results must match bit for bit (any NaN
 * matches any NaN). The sweep covers counts 0..4099, prescale and postdiv,
 * dst aliasing either operand, element- and byte-misaligned pointers,
 * partial overlap, and checks that nothing outside dst is written.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "reduce.h"

static const size_t COUNTS[] = {0, 1, 7, 1023, 4099};
#define NCOUNTS (sizeof COUNTS / sizeof COUNTS[0])
#define GUARD 64
#define FILL 0xa5

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void) {  // xorshift64*
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 0x2545f4914f6cdd1dull;
}

static void fill_random(void *p, size_t bytes) {
  unsigned char *c = p;
  for (size_t i = 0; i < bytes; i++) c[i] = (unsigned char)(next_rand() >> 56);
}

// ---- reference ----

static int is_signed(ncclDataType_t dt) {
  return dt == ncclInt8 || dt == ncclInt32 || dt == ncclInt64;
}
static int is_int(ncclDataType_t dt) { return !weft_dtype_is_float(dt); }

// Integer element widened to 64 bits (sign- or zero-extended).
static uint64_t load_int(ncclDataType_t dt, const void *p) {
  switch (dt) {
    case ncclInt8: { int8_t v; memcpy(&v, p, 1); return (uint64_t)(int64_t)v; }
    case ncclUint8: { uint8_t v; memcpy(&v, p, 1); return v; }
    case ncclInt32: { int32_t v; memcpy(&v, p, 4); return (uint64_t)(int64_t)v; }
    case ncclUint32: { uint32_t v; memcpy(&v, p, 4); return v; }
    default: { uint64_t v; memcpy(&v, p, 8); return v; }
  }
}

// Little-endian machines: the low bytes are the truncated value.
static void store_int(ncclDataType_t dt, void *p, uint64_t v) {
  memcpy(p, &v, weft_dtype_size(dt));
}

static uint64_t norm_int(ncclDataType_t dt, uint64_t v) {
  unsigned char b[8];
  store_int(dt, b, v);
  return load_int(dt, b);
}

static float load_f(ncclDataType_t dt, const void *p) {
  uint16_t h;
  uint8_t c;
  float f;
  switch (dt) {
    case ncclFloat16: memcpy(&h, p, 2); return weft_half_to_float(h);
    case ncclBfloat16: memcpy(&h, p, 2); return weft_bf16_to_float(h);
    case ncclFloat8e4m3: memcpy(&c, p, 1); return weft_e4m3_to_float(c);
    case ncclFloat8e5m2: memcpy(&c, p, 1); return weft_e5m2_to_float(c);
    default: memcpy(&f, p, 4); return f;
  }
}

static void store_f(ncclDataType_t dt, void *p, float f) {
  uint16_t h;
  uint8_t c;
  switch (dt) {
    case ncclFloat16: h = weft_float_to_half(f); memcpy(p, &h, 2); break;
    case ncclBfloat16: h = weft_float_to_bf16(f); memcpy(p, &h, 2); break;
    case ncclFloat8e4m3: c = weft_float_to_e4m3(f); memcpy(p, &c, 1); break;
    case ncclFloat8e5m2: c = weft_float_to_e5m2(f); memcpy(p, &c, 1); break;
    default: memcpy(p, &f, 4); break;
  }
}

#define REF_OP(kind, x, y)                                              \
  ((kind) == WEFT_RED_SUM    ? (x) + (y)                                \
   : (kind) == WEFT_RED_PROD ? (x) * (y)                                \
   : (isnan(x) || isnan(y))  ? NAN                                      \
   : (kind) == WEFT_RED_MAX  ? ((x) > (y) ? (x) : (y))                  \
                             : ((x) < (y) ? (x) : (y)))

// out = post(a OP pre(b)); a == NULL: out = post(pre(b)).
static void ref_elem(const weft_redop_t *op, void *out, const void *a, const void *b, int final) {
  ncclDataType_t dt = op->dtype;
  int div = final && op->postdiv > 1 ? op->postdiv : 0;
  if (a == NULL && !op->prescale && !div) {  // nothing to transform: a copy
    memcpy(out, b, weft_dtype_size(dt));
    return;
  }
  if (is_int(dt)) {
    uint64_t y = load_int(dt, b);
    if (op->prescale) y = norm_int(dt, y * (uint64_t)op->scale_i);
    uint64_t r = y;
    if (a) {
      uint64_t x = load_int(dt, a);
      int sgn = is_signed(dt);
      switch (op->kind) {
        case WEFT_RED_SUM: r = x + y; break;
        case WEFT_RED_PROD: r = x * y; break;
        case WEFT_RED_MAX: r = (sgn ? (int64_t)x > (int64_t)y : x > y) ? x : y; break;
        default: r = (sgn ? (int64_t)x < (int64_t)y : x < y) ? x : y; break;
      }
      r = norm_int(dt, r);
    }
    if (div) r = is_signed(dt) ? (uint64_t)((int64_t)r / div) : r / (uint64_t)div;
    store_int(dt, out, r);
  } else if (dt == ncclFloat64) {
    double x = 0, y, r;
    memcpy(&y, b, 8);
    if (op->prescale) y = y * op->scale_f;
    if (a) memcpy(&x, a, 8);
    r = a ? REF_OP(op->kind, x, y) : y;
    if (div) r = r / (double)div;
    memcpy(out, &r, 8);
  } else {
    float x = 0, y = load_f(dt, b), r;
    if (op->prescale) y = y * (float)op->scale_f;
    if (a) x = load_f(dt, a);
    r = a ? REF_OP(op->kind, x, y) : y;
    if (div) r = r / (float)div;
    store_f(dt, out, r);
  }
}

static int elem_equal(ncclDataType_t dt, const void *p, const void *q) {
  if (dt == ncclFloat64) {
    double x, y;
    memcpy(&x, p, 8);
    memcpy(&y, q, 8);
    if (isnan(x) && isnan(y)) return 1;
  } else if (weft_dtype_is_float(dt) && isnan(load_f(dt, p)) && isnan(load_f(dt, q))) {
    return 1;
  }
  return memcmp(p, q, weft_dtype_size(dt)) == 0;
}

// ---- harness ----

enum { DISTINCT, DST_IS_IN, DST_IS_LOCAL, ALL_SAME, DST_BELOW_IN, NMODES };

typedef struct {
  int pre, postdiv, final;
} xform_t;

static const xform_t XFORMS[] = {{0, 0, 1}, {1, 0, 1}, {0, 3, 1}, {0, 7, 0}, {1, 2, 1}};
#define NXFORMS (sizeof XFORMS / sizeof XFORMS[0])

static weft_redop_t make_op(ncclDataType_t dt, int kind, xform_t x) {
  static const int64_t iscales[] = {3, -5, 0x123456789ll, -1};
  static const double fscales[] = {0.25, 1.0 / 3.0, -1.5, 1e-3};
  weft_redop_t op = {dt, (weft_red_kind_t)kind, x.pre, iscales[next_rand() % 4],
                     fscales[next_rand() % 4], x.postdiv};
  return op;
}

static void check_guard(const unsigned char *p, size_t len, const char *what) {
  for (size_t i = 0; i < len; i++) cr_assert_eq(p[i], FILL, "%s byte %zu overwritten", what, i);
}

// One weft_reduce call checked against the reference. skew_* are byte
// offsets of the three pointers inside their allocations.
static void run_reduce(const weft_redop_t *op, int final, size_t n, int mode, size_t skew_d,
                       size_t skew_a, size_t skew_b) {
  size_t sz = weft_dtype_size(op->dtype), bytes = n * sz, span = bytes + 2 * GUARD + 64;
  unsigned char *ba = malloc(span), *bb = malloc(span), *bd = malloc(span);
  unsigned char *sa = malloc(bytes + 1), *sb = malloc(bytes + 1), *want = malloc(bytes + 1);
  cr_assert(ba && bb && bd && sa && sb && want);
  memset(ba, FILL, span);
  memset(bb, FILL, span);
  memset(bd, FILL, span);
  unsigned char *a = ba + GUARD + skew_a, *b = bb + GUARD + skew_b, *d = bd + GUARD + skew_d;
  if (mode == DST_BELOW_IN) {  // dst starts 3 elements below in, same buffer
    a = ba + GUARD + 3 * sz + skew_a;
    d = a - 3 * sz;
  }
  fill_random(a, bytes);
  fill_random(b, bytes);
  if (mode == ALL_SAME) memcpy(b, a, bytes);
  memcpy(sa, a, bytes);
  memcpy(sb, b, bytes);
  for (size_t i = 0; i < n; i++) ref_elem(op, want + i * sz, sa + i * sz, sb + i * sz, final);

  const void *in = a, *local = b;
  if (mode == DST_IS_IN) d = a;
  if (mode == DST_IS_LOCAL) d = b;
  if (mode == ALL_SAME) in = local = d = a;
  weft_reduce(op, d, in, local, n, final);

  for (size_t i = 0; i < n; i++)
    cr_assert(elem_equal(op->dtype, d + i * sz, want + i * sz),
              "%s %d n=%zu mode=%d pre=%d div=%d/%d skew=%zu,%zu,%zu: element %zu differs",
              weft_dtype_name(op->dtype), op->kind, n, mode, op->prescale, op->postdiv, final,
              skew_d, skew_a, skew_b, i);
  // Nothing outside dst changed; operands that are not dst untouched.
  unsigned char *base = mode == DST_IS_LOCAL ? bb : mode == DISTINCT ? bd : ba;
  check_guard(base, (size_t)(d - base), "before dst");
  if (mode == DST_BELOW_IN) {
    check_guard(a + bytes, (size_t)(ba + span - (a + bytes)), "after in");
  } else {
    check_guard(d + bytes, (size_t)(base + span - (d + bytes)), "after dst");
  }
  if (mode == DISTINCT || mode == DST_IS_LOCAL) cr_assert(memcmp(a, sa, bytes) == 0, "in changed");
  if (mode == DISTINCT || mode == DST_IS_IN) cr_assert(memcmp(b, sb, bytes) == 0, "local changed");
  free(ba), free(bb), free(bd), free(sa), free(sb), free(want);
}

// Every kind x count x transform x aliasing mode, pointers offset by whole
// elements (so not vector-aligned) and, separately, by odd bytes.
static void sweep(ncclDataType_t dt) {
  size_t sz = weft_dtype_size(dt);
  for (int kind = 0; kind < 4; kind++)
    for (size_t c = 0; c < NCOUNTS; c++)
      for (size_t x = 0; x < NXFORMS; x++)
        for (int mode = 0; mode < NMODES; mode++) {
          weft_redop_t op = make_op(dt, kind, XFORMS[x]);
          int final = XFORMS[x].final;
          run_reduce(&op, final, COUNTS[c], mode, 3 * sz, sz, 2 * sz);
          if (sz > 1 && COUNTS[c] > 1) run_reduce(&op, final, COUNTS[c], mode, 1, sz + 3, 5);
          if (mode == DISTINCT) run_reduce(&op, final, COUNTS[c], mode, 0, 0, 0);
        }
}

#define SWEEP_TEST(dt) \
  Test(reduce, sweep_##dt, .timeout = 60) { sweep(dt); }

SWEEP_TEST(ncclInt8)
SWEEP_TEST(ncclUint8)
SWEEP_TEST(ncclInt32)
SWEEP_TEST(ncclUint32)
SWEEP_TEST(ncclInt64)
SWEEP_TEST(ncclUint64)
SWEEP_TEST(ncclFloat16)
SWEEP_TEST(ncclFloat32)
SWEEP_TEST(ncclFloat64)
SWEEP_TEST(ncclBfloat16)
SWEEP_TEST(ncclFloat8e4m3)
SWEEP_TEST(ncclFloat8e5m2)

// weft_reduce_first: in place, distinct, partially overlapping, misaligned.
static void run_first(const weft_redop_t *op, size_t n, int final, long shift, size_t skew) {
  size_t sz = weft_dtype_size(op->dtype), bytes = n * sz, span = 3 * bytes + 2 * GUARD + 64;
  unsigned char *buf = malloc(span), *snap = malloc(bytes + 1), *want = malloc(bytes + 1);
  cr_assert(buf && snap && want);
  memset(buf, FILL, span);
  unsigned char *src = buf + GUARD + bytes / 2 + skew;
  unsigned char *dst = shift == LONG_MIN ? src + bytes + 16 : src + shift * (long)sz;
  fill_random(src, bytes);
  memcpy(snap, src, bytes);
  for (size_t i = 0; i < n; i++) ref_elem(op, want + i * sz, NULL, snap + i * sz, final);
  weft_reduce_first(op, dst, src, n, final);
  for (size_t i = 0; i < n; i++)
    cr_assert(elem_equal(op->dtype, dst + i * sz, want + i * sz),
              "first %s n=%zu shift=%ld skew=%zu pre=%d div=%d: element %zu differs",
              weft_dtype_name(op->dtype), n, shift, skew, op->prescale, op->postdiv, i);
  unsigned char *lo = dst < src ? dst : src, *hi = (dst > src ? dst : src) + bytes;
  check_guard(buf, (size_t)(lo - buf), "before buffers");
  if (dst > src) check_guard(src + bytes, (size_t)(dst > src + bytes ? dst - (src + bytes) : 0),
                             "between src and dst");
  check_guard(hi, (size_t)(buf + span - hi), "after buffers");
  free(buf), free(snap), free(want);
}

Test(reduce, first_all_types, .timeout = 60) {
  const long shifts[] = {0, LONG_MIN, -3, 5};  // in place, distinct, overlapping
  for (int dt = 0; dt < ncclNumTypes; dt++)
    for (size_t c = 0; c < NCOUNTS; c++)
      for (size_t x = 0; x < NXFORMS; x++)
        for (size_t s = 0; s < 4; s++)
          for (size_t skew = 0; skew < 2; skew++) {
            weft_redop_t op = make_op((ncclDataType_t)dt, 0, XFORMS[x]);
            run_first(&op, COUNTS[c], XFORMS[x].final, shifts[s], skew);
          }
}

Test(reduce, first_null_op_is_memmove, .timeout = 5) {
  unsigned char buf[64], want[64];
  for (int i = 0; i < 64; i++) buf[i] = (unsigned char)i;
  memcpy(want, buf, 64);
  memmove(want + 5, want + 2, 40);
  weft_reduce_first(NULL, buf + 5, buf + 2, 40, 1);  // count in bytes
  cr_assert(memcmp(buf, want, 64) == 0);
  memmove(want + 1, want + 9, 30);
  weft_reduce_first(NULL, buf + 1, buf + 9, 30, 0);
  cr_assert(memcmp(buf, want, 64) == 0);
}

Test(reduce, transforms_flag, .timeout = 5) {
  weft_redop_t op = {ncclFloat32, WEFT_RED_SUM, 0, 0, 0.0, 0};
  cr_assert_eq(weft_redop_transforms(NULL), 0);
  cr_assert_eq(weft_redop_transforms(&op), 0);
  op.postdiv = 1;
  cr_assert_eq(weft_redop_transforms(&op), 0);
  op.postdiv = 4;
  cr_assert_neq(weft_redop_transforms(&op), 0);
  op.postdiv = 0;
  op.prescale = 1;
  cr_assert_neq(weft_redop_transforms(&op), 0);
}

// Hand-computed values, independent of the reference above.
static void one(weft_redop_t op, const void *in, const void *local, const void *want, int final) {
  unsigned char out[8] = {0};
  weft_reduce(&op, out, in, local, 1, final);
  cr_assert(memcmp(out, want, weft_dtype_size(op.dtype)) == 0, "%s kind %d",
            weft_dtype_name(op.dtype), op.kind);
}

Test(reduce, known_values, .timeout = 5) {
  int8_t i8[] = {127, 1, -128, 16, 0, 100, 45};
  one((weft_redop_t){ncclInt8, WEFT_RED_SUM, 0, 0, 0, 0}, &i8[0], &i8[1], &i8[2], 1);
  one((weft_redop_t){ncclInt8, WEFT_RED_PROD, 0, 0, 0, 0}, &i8[3], &i8[3], &i8[4], 1);
  one((weft_redop_t){ncclInt8, WEFT_RED_SUM, 1, 3, 0, 0}, &i8[1], &i8[5], &i8[6], 1);  // 1+300%256
  uint8_t u8[] = {255, 1, 0, 200, 55, 127};
  one((weft_redop_t){ncclUint8, WEFT_RED_SUM, 0, 0, 0, 0}, &u8[0], &u8[1], &u8[2], 1);
  one((weft_redop_t){ncclUint8, WEFT_RED_MAX, 0, 0, 0, 0}, &u8[0], &u8[1], &u8[0], 1);
  one((weft_redop_t){ncclUint8, WEFT_RED_SUM, 0, 0, 0, 2}, &u8[3], &u8[4], &u8[5], 1);
  int8_t d8[] = {-128, 0, -42};
  one((weft_redop_t){ncclInt8, WEFT_RED_SUM, 0, 0, 0, 3}, &d8[0], &d8[1], &d8[2], 1);
  int32_t i32[] = {-4, -3, -3, -7, INT32_MAX, 1, INT32_MIN};
  one((weft_redop_t){ncclInt32, WEFT_RED_SUM, 0, 0, 0, 2}, &i32[0], &i32[1], &i32[2], 1);
  one((weft_redop_t){ncclInt32, WEFT_RED_SUM, 0, 0, 0, 2}, &i32[0], &i32[1], &i32[3], 0);
  one((weft_redop_t){ncclInt32, WEFT_RED_SUM, 0, 0, 0, 0}, &i32[4], &i32[5], &i32[6], 1);
  one((weft_redop_t){ncclInt32, WEFT_RED_MIN, 0, 0, 0, 0}, &i32[6], &i32[4], &i32[6], 1);
  int64_t i64[] = {INT64_MIN, 0, INT64_MIN / 2, INT64_MAX, 1};
  one((weft_redop_t){ncclInt64, WEFT_RED_SUM, 0, 0, 0, 2}, &i64[0], &i64[1], &i64[2], 1);
  one((weft_redop_t){ncclInt64, WEFT_RED_SUM, 0, 0, 0, 0}, &i64[3], &i64[4], &i64[0], 1);
  uint64_t u64[] = {UINT64_MAX, 2, UINT64_MAX - 1};
  one((weft_redop_t){ncclUint64, WEFT_RED_PROD, 0, 0, 0, 0}, &u64[0], &u64[1], &u64[2], 1);

  uint16_t h[] = {0x3c00, 0x4000, 0x4200, 0x6800, 0x7e00};  // 1, 2, 3, 2048, NaN
  one((weft_redop_t){ncclFloat16, WEFT_RED_SUM, 0, 0, 0, 0}, &h[0], &h[1], &h[2], 1);
  one((weft_redop_t){ncclFloat16, WEFT_RED_SUM, 0, 0, 0, 0}, &h[3], &h[0], &h[3], 1);  // tie
  uint16_t hmax;
  weft_redop_t hm = {ncclFloat16, WEFT_RED_MAX, 0, 0, 0, 0};
  weft_reduce(&hm, &hmax, &h[0], &h[4], 1, 1);
  cr_assert(isnan(weft_half_to_float(hmax)));
  weft_reduce(&hm, &hmax, &h[4], &h[0], 1, 1);
  cr_assert(isnan(weft_half_to_float(hmax)));
  uint16_t bf[] = {0x3f80, 0x4000};  // 1, 2
  one((weft_redop_t){ncclBfloat16, WEFT_RED_SUM, 0, 0, 0, 0}, &bf[0], &bf[0], &bf[1], 1);
  uint8_t f8[] = {0x38, 0x40, 0x3c};  // e4m3 1, 2; e5m2 1
  one((weft_redop_t){ncclFloat8e4m3, WEFT_RED_SUM, 0, 0, 0, 0}, &f8[0], &f8[0], &f8[1], 1);
  one((weft_redop_t){ncclFloat8e5m2, WEFT_RED_SUM, 0, 0, 0, 0}, &f8[2], &f8[2], &f8[1], 1);

  float f[] = {3.0f, 5.0f, 5.5f, NAN, 1.0f};
  one((weft_redop_t){ncclFloat32, WEFT_RED_SUM, 1, 0, 0.5, 0}, &f[0], &f[1], &f[2], 1);
  float fr;
  weft_redop_t fmin = {ncclFloat32, WEFT_RED_MIN, 0, 0, 0, 0};
  weft_reduce(&fmin, &fr, &f[4], &f[3], 1, 1);
  cr_assert(isnan(fr));
  weft_reduce(&fmin, &fr, &f[3], &f[4], 1, 1);
  cr_assert(isnan(fr));
  // float64 prescale multiplies in double: 3 * (1 + 2^-40) is exact there.
  double dd[] = {0.0, 1.0 + 0x1p-40, 3.0 + 0x3p-40};
  one((weft_redop_t){ncclFloat64, WEFT_RED_SUM, 1, 0, 3.0, 0}, &dd[0], &dd[1], &dd[2], 1);
}

Test(reduce, bad_input_is_ignored, .timeout = 5) {
  float in[4] = {1, 2, 3, 4}, dst[4] = {9, 9, 9, 9};
  weft_redop_t bad_type = {(ncclDataType_t)ncclNumTypes, WEFT_RED_SUM, 0, 0, 0, 0};
  weft_redop_t bad_kind = {ncclFloat32, (weft_red_kind_t)4, 0, 0, 0, 0};
  weft_reduce(&bad_type, dst, in, in, 4, 1);
  weft_reduce(&bad_kind, dst, in, in, 4, 1);
  weft_reduce(NULL, dst, in, in, 4, 1);
  weft_redop_t good = {ncclFloat32, WEFT_RED_SUM, 0, 0, 0, 0};
  weft_reduce(&good, dst, NULL, in, 4, 1);
  weft_reduce(&good, dst, in, NULL, 4, 1);
  weft_reduce(&good, NULL, in, in, 4, 1);
  weft_reduce(&good, dst, in, in, SIZE_MAX, 1);  // byte count overflows
  weft_reduce_first(&bad_type, dst, in, 4, 1);
  for (int i = 0; i < 4; i++) cr_assert_eq(dst[i], 9.0f);
}
