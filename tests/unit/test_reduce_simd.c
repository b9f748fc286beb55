/*
 * test_reduce_simd.c — every instruction-set level of the host reductions
 * (reduce_simd.h) against the portable loops, bit for bit, NaN payloads
 * included.
 *
 * fp16 and bf16: all 65536 patterns against a set of second operands (signed
 * zeros, subnormals, the normal range's ends, infinities, quiet and
 * signalling NaNs with payloads), in both operand orders; fp8: all 256 x 256
 * pairs. Wider types: random bits mixed with special values. Every op, with
 * and without the PreMulSum scalar and the final divide, the first-operand
 * transform, dst aliasing either operand, lengths 0..67 and a few large ones,
 * and pointers off vector alignment (element-aligned and not).
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "reduce.h"
#include "reduce_simd.h"

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint64_t next_rand(void) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 0x2545f4914f6cdd1dull;
}

static const ncclDataType_t ALL_TYPES[] = {
    ncclInt8,    ncclUint8,   ncclInt32,    ncclUint32,     ncclInt64,     ncclUint64,
    ncclFloat16, ncclFloat32, ncclFloat64,  ncclBfloat16,   ncclFloat8e4m3, ncclFloat8e5m2};
#define NTYPES (sizeof ALL_TYPES / sizeof ALL_TYPES[0])

// The op variants: plain, PreMulSum's scalar, Avg's final divide, both.
typedef struct {
  int prescale, div;
  double scale;
} variant_t;
static const variant_t VARIANTS[] = {{0, 0, 0}, {1, 0, 1.0 / 3.0}, {1, 0, -2.5}, {1, 0, 1e-30},
                                     {0, 3, 0}, {1, 7, 0.125}};
#define NVARIANTS (sizeof VARIANTS / sizeof VARIANTS[0])

static weft_redop_t make_op(ncclDataType_t dt, int kind, const variant_t *v) {
  weft_redop_t op = {.dtype = dt, .kind = (weft_red_kind_t)kind, .prescale = v->prescale,
                     .scale_f = v->scale, .scale_i = (int64_t)(v->scale * 1000) | 3,
                     .postdiv = v->div};
  return op;
}

// Run weft_reduce (or weft_reduce_first when `first`) at `level` on copies
// of the inputs; out gets dst's bytes. alias: 0 distinct, 1 dst = in, 2 dst = local.
static void run_at(weft_simd_level_t level, const weft_redop_t *op, int first, int alias,
                   const char *in, const char *local, size_t count, size_t off, char *out) {
  size_t bytes = count * weft_dtype_size(op->dtype);
  char *a = malloc(bytes + 64), *b = malloc(bytes + 64), *d = malloc(bytes + 64);
  cr_assert(a && b && d);
  memcpy(a + off, in, bytes);
  memcpy(b + off, local, bytes);
  memset(d + off, 0x5a, bytes);
  char *dst = alias == 1 ? a + off : alias == 2 ? b + off : d + off;
  cr_assert_eq(weft_simd_force(level), 0);
  if (first)
    weft_reduce_first(op, dst, b + off, count, 1);
  else
    weft_reduce(op, dst, a + off, b + off, count, 1);
  memcpy(out, dst, bytes);
  free(a);
  free(b);
  free(d);
}

// Every available level against the portable one on these operands.
// every: also the first-operand transform and dst aliasing either operand.
static void compare(const weft_redop_t *op, const char *in, const char *local, size_t count,
                    size_t off, int every) {
  size_t bytes = count * weft_dtype_size(op->dtype);
  char *want = malloc(bytes + 1), *got = malloc(bytes + 1);
  for (int first = 0; first < (every ? 2 : 1); first++)
    for (int alias = 0; alias < (every ? 3 : 1); alias++) {
      if (first && alias == 1) continue;
      run_at(WEFT_SIMD_NONE, op, first, alias, in, local, count, off, want);
      for (int l = WEFT_SIMD_NONE + 1; l < WEFT_SIMD_LEVELS; l++) {
        if (weft_simd_impl((weft_simd_level_t)l) == NULL) continue;
        run_at((weft_simd_level_t)l, op, first, alias, in, local, count, off, got);
        for (size_t i = 0; i < bytes; i++)
          if (want[i] != got[i])
            cr_assert_fail("%s %s kind %d prescale %d (%g) div %d first %d alias %d count %zu "
                           "off %zu: byte %zu is %02x, portable %02x",
                           weft_simd_impl((weft_simd_level_t)l)->name, weft_dtype_name(op->dtype),
                           op->kind, op->prescale, op->scale_f, op->postdiv, first, alias, count,
                           off, i, (unsigned char)got[i], (unsigned char)want[i]);
      }
    }
  free(want);
  free(got);
}

static void compare_all_ops(ncclDataType_t dt, const char *in, const char *local, size_t count,
                            size_t off, int every) {
  for (int kind = 0; kind <= WEFT_RED_MIN; kind++)
    for (size_t v = 0; v < NVARIANTS; v++) {
      weft_redop_t op = make_op(dt, kind, &VARIANTS[v]);
      compare(&op, in, local, count, off, every);
    }
}

// ---- 16-bit floats: all patterns against special second operands ----

static const uint16_t HALF_SPECIALS[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x83ff, 0x0400,
                                         0x8400, 0x3c00, 0xbc00, 0x7bff, 0xfbff, 0x7c00, 0xfc00,
                                         0x7e00, 0xfe00, 0x7e55, 0x7c01, 0xfd2a, 0x3555, 0x0200};
static const uint16_t BF16_SPECIALS[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x807f, 0x0080,
                                         0x8080, 0x3f80, 0xbf80, 0x7f7f, 0xff7f, 0x7f80, 0xff80,
                                         0x7fc0, 0xffc0, 0x7fd5, 0x7f81, 0xffa2, 0x3eab, 0x4049};

static void sweep16(ncclDataType_t dt, const uint16_t *specials, size_t nspecial) {
  enum { N = 65536 };
  uint16_t *all = malloc(N * 2), *other = malloc(N * 2);
  for (size_t i = 0; i < N; i++) all[i] = (uint16_t)i;
  for (size_t s = 0; s < nspecial; s++) {
    for (size_t i = 0; i < N; i++) other[i] = specials[s];
    compare_all_ops(dt, (const char *)all, (const char *)other, N, 0, 0);
    compare_all_ops(dt, (const char *)other, (const char *)all, N, 0, 0);
  }
  free(all);
  free(other);
}

Test(reduce_simd, half_exhaustive, .timeout = 60) {
  sweep16(ncclFloat16, HALF_SPECIALS, sizeof HALF_SPECIALS / 2);
}
Test(reduce_simd, bf16_exhaustive, .timeout = 60) {
  sweep16(ncclBfloat16, BF16_SPECIALS, sizeof BF16_SPECIALS / 2);
}

// ---- fp8: every pair ----

static void sweep8(ncclDataType_t dt) {
  enum { N = 65536 };
  uint8_t *a = malloc(N), *b = malloc(N);
  for (size_t i = 0; i < N; i++) {
    a[i] = (uint8_t)i;
    b[i] = (uint8_t)(i >> 8);
  }
  compare_all_ops(dt, (const char *)a, (const char *)b, N, 0, 1);
  free(a);
  free(b);
}

Test(reduce_simd, e4m3_exhaustive, .timeout = 60) { sweep8(ncclFloat8e4m3); }
Test(reduce_simd, e5m2_exhaustive, .timeout = 60) { sweep8(ncclFloat8e5m2); }

// ---- every type: random and special values, every tail, misalignment ----

// Random bits, with a third of the elements replaced by special values
// (for floats: zeros, subnormals, infinities, NaNs; for integers: extremes).
static void fill(ncclDataType_t dt, char *p, size_t count) {
  size_t size = weft_dtype_size(dt);
  for (size_t i = 0; i < count; i++) {
    uint64_t r = next_rand(), v = r;
    if (r % 3 == 0) {
      static const uint64_t F32[] = {0, 0x80000000u, 1, 0x807fffffu, 0x7f800000u, 0xff800000u,
                                     0x7fc00001u, 0x7f800123u, 0x7f7fffffu, 0x3f800000u};
      static const uint64_t F64[] = {0, 1ull << 63, 1, 0x7ff0000000000000ull,
                                     0xfff0000000000000ull, 0x7ff8000000000abcull,
                                     0x7ff0000000000001ull, 0x3ff0000000000000ull};
      static const uint64_t INT[] = {0, ~0ull, 1ull << 63, (1ull << 63) - 1, 0x80, 0x7f,
                                     0x80000000u, 0x7fffffffu};
      uint64_t k = (r >> 8) % 8;
      v = dt == ncclFloat32 ? F32[(r >> 8) % 10] : dt == ncclFloat64 ? F64[k] : INT[k];
    }
    memcpy(p + i * size, &v, size);
  }
}

static void sweep_type(ncclDataType_t dt) {
  static const size_t LARGE[] = {1000, 4099, 20000};
  size_t size = weft_dtype_size(dt);
  char *a = malloc(20000 * size), *b = malloc(20000 * size);
  for (size_t count = 0; count < 68 + 3; count++) {
    size_t n = count < 68 ? count : LARGE[count - 68];
    fill(dt, a, n);
    fill(dt, b, n);
    size_t offs[] = {0, size, 1};
    for (size_t o = 0; o < (n < 1000 ? 3u : 2u); o++) compare_all_ops(dt, a, b, n, offs[o], 1);
  }
  free(a);
  free(b);
}

Test(reduce_simd, every_type_tails, .timeout = 60) {
  for (size_t t = 0; t < NTYPES; t++) sweep_type(ALL_TYPES[t]);
}

// ---- the integer Avg's division, in float or double, is integer division ----

static const int DIVS[] = {2, 3, 5, 7, 8, 100, 127, 128, 255, 256, 1000, 65537, 1 << 24,
                           (1 << 24) + 1, 1 << 30, 2147483647};
#define NDIVS (sizeof DIVS / sizeof DIVS[0])

// Every level's postdiv of n elements of dt at p against C's division.
static void check_div(ncclDataType_t dt, const void *p, size_t n) {
  size_t size = weft_dtype_size(dt);
  char *d = malloc(n * size);
  for (size_t k = 0; k < NDIVS; k++)
    for (int l = 0; l < WEFT_SIMD_LEVELS; l++) {
      const weft_simd_impl_t *impl = weft_simd_impl((weft_simd_level_t)l);
      if (impl == NULL) continue;
      memcpy(d, p, n * size);
      impl->native(dt)->postdiv(n, d, DIVS[k]);
      for (size_t i = 0; i < n; i++) {
        int64_t x, q, got;
        const char *e = (const char *)p + i * size;
        switch (dt) {
          case ncclInt8: x = *(const int8_t *)e; q = x / DIVS[k]; got = ((int8_t *)d)[i]; break;
          case ncclUint8: x = *(const uint8_t *)e; q = x / DIVS[k]; got = ((uint8_t *)d)[i]; break;
          case ncclInt32: x = *(const int32_t *)e; q = x / DIVS[k]; got = ((int32_t *)d)[i]; break;
          default: x = *(const uint32_t *)e; q = x / DIVS[k]; got = ((uint32_t *)d)[i]; break;
        }
        cr_assert_eq(got, q, "%s %s: %lld / %d gave %lld", impl->name, weft_dtype_name(dt),
                     (long long)x, DIVS[k], (long long)got);
      }
    }
  free(d);
}

Test(reduce_simd, integer_avg_division, .timeout = 30) {
  uint8_t b[256];
  for (int i = 0; i < 256; i++) b[i] = (uint8_t)i;
  check_div(ncclInt8, b, 256);
  check_div(ncclUint8, b, 256);
  enum { N = 4096 };
  uint32_t *w = malloc(N * 4);
  static const uint32_t EDGE[] = {0, 1, 2, 0x7fffffffu, 0x80000000u, 0x80000001u, 0xffffffffu,
                                  0xfffffffeu, 2147483646u, 4294967294u};
  for (size_t i = 0; i < N; i++) w[i] = i < 10 ? EDGE[i] : (uint32_t)next_rand();
  check_div(ncclInt32, w, N);
  check_div(ncclUint32, w, N);
  free(w);
}

// ---- choosing the level ----

Test(reduce_simd, configure, .timeout = 5) {
  int unknown = 0;
  const weft_simd_impl_t *impl = weft_simd_configure("none", &unknown);
  cr_assert_eq(unknown, 0);
  cr_assert_eq(impl->level, WEFT_SIMD_NONE);
  // Only the first call decides.
  cr_assert_eq(weft_simd_configure("auto", &unknown), impl);
  cr_assert_eq(weft_simd_current(), impl);
  cr_assert_not_null(weft_simd_impl(WEFT_SIMD_NONE));
  cr_assert_null(weft_simd_impl(WEFT_SIMD_LEVELS));
}

Test(reduce_simd, configure_unknown_is_auto, .timeout = 5) {
  int unknown = 0;
  const weft_simd_impl_t *impl = weft_simd_configure("sse9", &unknown);
  cr_assert_eq(unknown, 1);
  for (int l = WEFT_SIMD_LEVELS - 1; l > (int)impl->level; l--)
    cr_assert_null(weft_simd_impl((weft_simd_level_t)l));
}
