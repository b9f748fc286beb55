/*
 * test_cuda_ops.c — the device backend's functors (src/kernels/reduce_ops.cuh),
 * run on the host through cuda_ops_shim.cpp, against the host backend
 * (weft_reduce / weft_reduce_first of src/arith/reduce.h), bit for bit.
 *
 * Runs everywhere: no GPU, no nvcc. What it covers: the narrow-format
 * converters (every fp16, bf16 and fp8 pattern to float; float to each
 * format over edge values, rounding ties and a sweep of float bit
 * patterns), then every datatype x op (sum, prod, max, min) x transform
 * (none, prescale as PreMulSum/float Avg, postdiv as integer Avg, both) x
 * final, over operands built from edge values (0, -0, +-inf, NaNs with
 * payloads, integer extremes, denormals, ties) paired with each other — all
 * 256x256 pairs for the 8-bit types — plus random bits, with the vector
 * path, head/tail, all-scalar and element-misaligned layouts, dst aliasing
 * either operand, simulated grids of 1 to 256 threads, and the scalar read
 * from memory (ncclScalarDevice). Results must match exactly, except that
 * any NaN matches any NaN where both operands went through a float add,
 * multiply or divide (hardware may pick either NaN's payload); max and min
 * without a prescale must preserve NaN payloads exactly.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_ops_shim.h"
#include "dtype.h"
#include "reduce.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t next_rand(void) {  // xorshift64*
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 0x2545f4914f6cdd1dull;
}

static uint32_t fbits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static float bitsf(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// ---- converters ----

static uint32_t ref_narrow(ncclDataType_t dt, float f) {
  switch (dt) {
    case ncclFloat16:
      return weft_float_to_half(f);
    case ncclBfloat16:
      return weft_float_to_bf16(f);
    case ncclFloat8e4m3:
      return weft_float_to_e4m3(f);
    default:
      return weft_float_to_e5m2(f);
  }
}

static float ref_widen(ncclDataType_t dt, uint32_t b) {
  switch (dt) {
    case ncclFloat16:
      return weft_half_to_float((uint16_t)b);
    case ncclBfloat16:
      return weft_bf16_to_float((uint16_t)b);
    case ncclFloat8e4m3:
      return weft_e4m3_to_float((uint8_t)b);
    default:
      return weft_e5m2_to_float((uint8_t)b);
  }
}

static const ncclDataType_t NARROW[] = {ncclFloat16, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};

Test(cuda_ops, widen_every_pattern) {
  for (int t = 0; t < 4; t++) {
    ncclDataType_t dt = NARROW[t];
    uint32_t n = weft_dtype_size(dt) == 2 ? 65536u : 256u;
    for (uint32_t b = 0; b < n; b++) {
      uint32_t got = fbits(weft_cuda_host_widen(dt, b)), want = fbits(ref_widen(dt, b));
      cr_assert_eq(got, want, "%s 0x%x: 0x%08x, host backend 0x%08x", weft_dtype_name(dt), b, got,
                   want);
    }
  }
}

static void check_narrow(ncclDataType_t dt, float f) {
  uint32_t got = weft_cuda_host_narrow(dt, f), want = ref_narrow(dt, f);
  cr_assert_eq(got, want, "%s of 0x%08x (%a): 0x%x, host backend 0x%x", weft_dtype_name(dt),
               fbits(f), (double)f, got, want);
}

Test(cuda_ops, narrow_edges_ties_and_sweep) {
  static const float edges[] = {0.0f,      -0.0f,        1.0f,     -1.0f,    INFINITY, -INFINITY,
                                NAN,       -NAN,         448.0f,   464.0f,   480.0f,   57344.0f,
                                61440.0f,  65504.0f,     65520.0f, 0x1p-9f,  0x1p-10f, 0x3p-11f,
                                0x1p-16f,  0x1p-17f,     0x1p-24f, 0x1p-25f, 0x3p-26f, 0x1p-126f,
                                0x1p-149f, 3.4028235e38f};
  for (int t = 0; t < 4; t++) {
    ncclDataType_t dt = NARROW[t];
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
      check_narrow(dt, edges[i]);
      check_narrow(dt, -edges[i]);
    }
    // Every value of the format, and the floats around each midpoint to the
    // next one: the exact tie and one float ulp either side.
    uint32_t n = weft_dtype_size(dt) == 2 ? 65536u : 256u;
    for (uint32_t b = 0; b + 1 < n; b++) {
      float lo = ref_widen(dt, b), hi = ref_widen(dt, b + 1);
      check_narrow(dt, lo);
      if (isnan(lo) || isnan(hi) || isinf(lo) || isinf(hi) || signbit(lo) != signbit(hi)) continue;
      float mid = (float)(((double)lo + (double)hi) / 2);
      check_narrow(dt, mid);
      check_narrow(dt, nextafterf(mid, INFINITY));
      check_narrow(dt, nextafterf(mid, -INFINITY));
    }
    for (uint64_t u = 0; u <= 0xffffffffull; u += 4099) check_narrow(dt, bitsf((uint32_t)u));
    for (int i = 0; i < 100000; i++) check_narrow(dt, bitsf((uint32_t)next_rand()));
    // NaNs with payloads, signalling ones included.
    check_narrow(dt, bitsf(0x7f800001u));
    check_narrow(dt, bitsf(0xffa00000u));
    check_narrow(dt, bitsf(0x7fffe000u));
  }
}

// ---- element comparison ----

static int is_float_type(ncclDataType_t dt) {
  return weft_dtype_is_float(dt);
}

static int elem_is_nan(ncclDataType_t dt, const void *p) {
  uint64_t b = 0;
  memcpy(&b, p, weft_dtype_size(dt));
  switch (dt) {
    case ncclFloat32:
      return isnan(bitsf((uint32_t)b));
    case ncclFloat64: {
      double d;
      memcpy(&d, p, 8);
      return isnan(d);
    }
    case ncclInt8:
    case ncclUint8:
    case ncclInt32:
    case ncclUint32:
    case ncclInt64:
    case ncclUint64:
      return 0;
    default:
      return isnan(ref_widen(dt, (uint32_t)b));
  }
}

// Whole buffers (guards included) must match; inside [lo, hi) elements a
// NaN matches any NaN unless `strict`.
static void compare(const char *what, ncclDataType_t dt, const unsigned char *got,
                    const unsigned char *want, size_t bytes, size_t lo, size_t count, int strict) {
  size_t size = weft_dtype_size(dt);
  if (memcmp(got, want, bytes) == 0) return;
  for (size_t b = 0; b < bytes; b++) {
    if (got[b] == want[b]) continue;
    size_t off = b < lo ? 0 : (b - lo) / size;
    int inside = b >= lo && off < count;
    const unsigned char *g = got + lo + off * size, *w = want + lo + off * size;
    if (inside && !strict && is_float_type(dt) && elem_is_nan(dt, g) && elem_is_nan(dt, w)) {
      b = lo + (off + 1) * size - 1;  // skip the rest of this element
      continue;
    }
    uint64_t gv = 0, wv = 0;
    if (inside) {
      memcpy(&gv, g, size);
      memcpy(&wv, w, size);
    }
    cr_assert_fail("%s: %s byte %zu (%s element %zu): got 0x%llx, host backend 0x%llx", what,
                   weft_dtype_name(dt), b, inside ? "inside" : "outside", off,
                   (unsigned long long)gv, (unsigned long long)wv);
  }
}

// ---- operands ----

// Edge bit patterns of a floating format with `eb` exponent and `mb`
// mantissa bits (both signs are added by the caller).
static size_t float_edges(uint64_t *out, int eb, int mb) {
  uint64_t bias = (1ull << (eb - 1)) - 1, emax = (1ull << eb) - 1, one = bias << mb;
  uint64_t v[] = {0,
                  one,                                      // 1
                  one + 1,                                  // 1 + ulp
                  (bias - 1) << mb,                         // 0.5
                  (bias + 1) << mb,                         // 2
                  ((bias + 1) << mb) | (1ull << (mb - 1)),  // 3
                  (bias - (uint64_t)mb - 1) << mb,          // half an ulp of 1: 1 + it is a tie
                  ((bias - (uint64_t)mb - 1) << mb) | (1ull << (mb - 1)),  // 1.5 half-ulps
                  ((emax - 1) << mb) | ((1ull << mb) - 1),                 // largest finite (IEEE)
                  1ull << mb,                                              // smallest normal
                  1,                                                       // smallest subnormal
                  (1ull << mb) - 1,                                        // largest subnormal
                  emax << mb,                                              // infinity
                  (emax << mb) | (1ull << (mb - 1)),                       // quiet NaN
                  (emax << mb) | 1,                    // NaN with a payload (signalling)
                  (emax << mb) | ((1ull << mb) - 1)};  // all-ones magnitude
  size_t n = sizeof v / sizeof v[0];
  memcpy(out, v, sizeof v);
  return n;
}

static size_t edges_for(ncclDataType_t dt, uint64_t *out) {
  size_t size = weft_dtype_size(dt), n = 0;
  if (!is_float_type(dt)) {
    uint64_t all = size == 8 ? ~0ull : (1ull << (8 * size)) - 1, top = 1ull << (8 * size - 1);
    uint64_t v[] = {0,
                    1,
                    2,
                    3,
                    7,
                    all,
                    all - 1,
                    top,
                    top - 1,
                    top + 1,
                    top - 2,
                    0x5555555555555555ull & all,
                    0xaaaaaaaaaaaaaaaaull & all};
    memcpy(out, v, sizeof v);
    return sizeof v / sizeof v[0];
  }
  switch (dt) {
    case ncclFloat16:
      n = float_edges(out, 5, 10);
      break;
    case ncclBfloat16:
      n = float_edges(out, 8, 7);
      break;
    case ncclFloat32:
      n = float_edges(out, 8, 23);
      break;
    case ncclFloat64:
      n = float_edges(out, 11, 52);
      break;
    case ncclFloat8e4m3:
      n = float_edges(out, 4, 3);
      break;
    default:
      n = float_edges(out, 5, 2);
      break;
  }
  for (size_t i = 0, m = n; i < m; i++) out[n++] = out[i] | (1ull << (8 * size - 1));
  return n;
}

// in/local: every pair of edge values (all 256x256 patterns for 8-bit
// types), then `extra` random elements. Returns the element count.
static size_t make_operands(ncclDataType_t dt, unsigned char **in, unsigned char **local,
                            size_t extra) {
  size_t size = weft_dtype_size(dt);
  uint64_t e[64] = {0};
  size_t ne;
  if (size == 1) {
    ne = 256;
  } else {
    ne = edges_for(dt, e);
  }
  size_t n = ne * ne + extra;
  *in = malloc(n * size);
  *local = malloc(n * size);
  cr_assert(*in && *local);
  for (size_t i = 0; i < ne * ne; i++) {
    uint64_t a = size == 1 ? i / ne : e[i / ne], b = size == 1 ? i % ne : e[i % ne];
    memcpy(*in + i * size, &a, size);  // little-endian: low bytes
    memcpy(*local + i * size, &b, size);
  }
  for (size_t i = ne * ne; i < n; i++) {
    uint64_t a = next_rand(), b = next_rand();
    memcpy(*in + i * size, &a, size);
    memcpy(*local + i * size, &b, size);
  }
  return n;
}

// ---- the sweep ----

typedef struct {
  int prescale;
  double scale_f;
  int64_t scale_i;
  int postdiv;
} variant_t;

static const variant_t VARIANTS[] = {
    {0, 0, 0, 1},
    {1, 0.5, 3, 1},
    {1, 1.0 / 3, -1, 1},
    {1, -2.5, 0x123456789ll, 1},
    {1, 1e-3, INT64_MIN, 1},
    {0, 0, 0, 3},
    {1, 0.25, 5, 7},
    {0, 0, 0, 2},
};
#define NVARIANTS (sizeof VARIANTS / sizeof VARIANTS[0])

// Buffer layout of one run: byte offsets of dst, in and local inside their
// allocations, and the simulated grid. in_place: 1 dst is in, 2 dst is local.
typedef struct {
  size_t od, oi, ol;
  int in_place;
  size_t nthreads;
} layout_t;

#define GUARD 64
#define FILL 0x5a

static void run_reduce(const weft_redop_t *op, const unsigned char *in, const unsigned char *local,
                       size_t n, int final, const layout_t *L, int strict) {
  size_t size = weft_dtype_size(op->dtype), bytes = n * size, alloc = bytes + 2 * GUARD;
  unsigned char *bufs[2][3];
  for (int r = 0; r < 2; r++)
    for (int k = 0; k < 3; k++) {
      bufs[r][k] = malloc(alloc);
      cr_assert(bufs[r][k]);
      memset(bufs[r][k], FILL, alloc);
    }
  void *ptr[2][3];  // [ref/got][dst, in, local]
  for (int r = 0; r < 2; r++) {
    ptr[r][1] = bufs[r][1] + GUARD + L->oi;
    ptr[r][2] = bufs[r][2] + GUARD + L->ol;
    memcpy(ptr[r][1], in, bytes);
    memcpy(ptr[r][2], local, bytes);
    ptr[r][0] = L->in_place == 1   ? ptr[r][1]
                : L->in_place == 2 ? ptr[r][2]
                                   : bufs[r][0] + GUARD + L->od;
  }
  weft_reduce(op, ptr[0][0], ptr[0][1], ptr[0][2], n, final);
  cr_assert_eq(
      weft_cuda_host_reduce(op, NULL, ptr[1][0], ptr[1][1], ptr[1][2], n, final, L->nthreads), 0);
  int k = L->in_place ? L->in_place : 0;
  size_t lo = (size_t)((unsigned char *)ptr[0][0] - bufs[0][k]);
  char what[512];
  snprintf(what, sizeof what,
           "reduce kind=%d pre=%d scale=%g/%lld div=%d final=%d layout=%zu/%zu/%zu/%d threads=%zu",
           (int)op->kind, op->prescale, op->scale_f, (long long)op->scale_i, op->postdiv, final,
           L->od, L->oi, L->ol, L->in_place, L->nthreads);
  compare(what, op->dtype, bufs[1][k], bufs[0][k], alloc, lo, n, strict);
  for (int r = 0; r < 2; r++)
    for (int j = 0; j < 3; j++) free(bufs[r][j]);
}

static void run_first(const weft_redop_t *op, const unsigned char *src, size_t n, int final,
                      const layout_t *L) {
  size_t size = weft_dtype_size(op->dtype), bytes = n * size, alloc = bytes + 2 * GUARD;
  unsigned char *d[2], *s[2];
  void *dp[2], *sp[2];
  for (int r = 0; r < 2; r++) {
    d[r] = malloc(alloc);
    s[r] = malloc(alloc);
    cr_assert(d[r] && s[r]);
    memset(d[r], FILL, alloc);
    memset(s[r], FILL, alloc);
    sp[r] = s[r] + GUARD + L->oi;
    memcpy(sp[r], src, bytes);
    dp[r] = L->in_place ? sp[r] : d[r] + GUARD + L->od;
  }
  weft_reduce_first(op, dp[0], sp[0], n, final);
  cr_assert_eq(weft_cuda_host_reduce_first(op, NULL, dp[1], sp[1], n, final, L->nthreads), 0);
  unsigned char *g = L->in_place ? s[1] : d[1], *w = L->in_place ? s[0] : d[0];
  size_t lo = (size_t)((unsigned char *)dp[0] - (L->in_place ? s[0] : d[0]));
  char what[512];
  snprintf(what, sizeof what,
           "first pre=%d scale=%g/%lld div=%d final=%d layout=%zu/%zu/%d threads=%zu", op->prescale,
           op->scale_f, (long long)op->scale_i, op->postdiv, final, L->od, L->oi, L->in_place,
           L->nthreads);
  compare(what, op->dtype, g, w, alloc, lo, n, 0);
  for (int r = 0; r < 2; r++) {
    free(d[r]);
    free(s[r]);
  }
}

static void sweep(ncclDataType_t dt) {
  size_t size = weft_dtype_size(dt);
  unsigned char *in, *local;
  size_t n = make_operands(dt, &in, &local, 1000);
  // Vector body with no head; with a head (all pointers 16-aligned plus the
  // same element offset); mismatched offsets (all scalar); misaligned by a
  // byte (size > 1); in place on either operand; grids of several sizes.
  const layout_t layouts[] = {
      {0, 0, 0, 0, 1},
      {3 * size, 3 * size, 3 * size, 0, 7},
      {0, size, 2 * size, 0, 256},
      {size > 1 ? 1 : 0, size > 1 ? 3 : 0, 0, 0, 5},
      {0, 0, 0, 1, 64},
      {0, 5 * size, 5 * size, 2, 3},
  };
  for (int kind = 0; kind <= WEFT_RED_MIN; kind++)
    for (size_t v = 0; v < NVARIANTS; v++)
      for (int final = 0; final <= 1; final++)
        for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
          const variant_t *V = &VARIANTS[v];
          weft_redop_t op = {.dtype = dt,
                             .kind = (weft_red_kind_t)kind,
                             .prescale = V->prescale,
                             .scale_i = V->scale_i,
                             .scale_f = V->scale_f,
                             .postdiv = V->postdiv};
          int strict = (kind == WEFT_RED_MAX || kind == WEFT_RED_MIN) && !V->prescale &&
                       !(final && V->postdiv > 1);
          // Short counts exercise the head/tail logic on their own.
          size_t m = l % 2 ? n : n - 3;
          run_reduce(&op, in, local, m, final, &layouts[l], strict);
          run_reduce(&op, in + 5 * size, local + 5 * size, 1 + l, final, &layouts[l], strict);
          if (kind == 0) run_first(&op, local, m, final, &layouts[l]);
        }
  free(in);
  free(local);
}

#define SWEEP_TEST(name, dt)             \
  Test(cuda_ops, name, .timeout = 120) { \
    sweep(dt);                           \
  }
SWEEP_TEST(sweep_int8, ncclInt8)
SWEEP_TEST(sweep_uint8, ncclUint8)
SWEEP_TEST(sweep_int32, ncclInt32)
SWEEP_TEST(sweep_uint32, ncclUint32)
SWEEP_TEST(sweep_int64, ncclInt64)
SWEEP_TEST(sweep_uint64, ncclUint64)
SWEEP_TEST(sweep_float16, ncclFloat16)
SWEEP_TEST(sweep_float32, ncclFloat32)
SWEEP_TEST(sweep_float64, ncclFloat64)
SWEEP_TEST(sweep_bfloat16, ncclBfloat16)
SWEEP_TEST(sweep_f8e4m3, ncclFloat8e4m3)
SWEEP_TEST(sweep_f8e5m2, ncclFloat8e5m2)

// ---- ncclScalarDevice: the scalar read from memory ----

// What redop.c's read_scalar stores for a scalar of type dt at p.
static void read_scalar_like_redop(ncclDataType_t dt, const void *p, weft_redop_t *op) {
  uint64_t b = 0;
  memcpy(&b, p, weft_dtype_size(dt));
  switch (dt) {
    case ncclInt8:
      op->scale_i = (int8_t)b;
      break;
    case ncclUint8:
      op->scale_i = (uint8_t)b;
      break;
    case ncclInt32:
      op->scale_i = (int32_t)b;
      break;
    case ncclUint32:
      op->scale_i = (uint32_t)b;
      break;
    case ncclInt64:
    case ncclUint64:
      op->scale_i = (int64_t)b;
      break;
    case ncclFloat32:
      op->scale_f = bitsf((uint32_t)b);
      break;
    case ncclFloat64:
      memcpy(&op->scale_f, p, 8);
      break;
    default:
      op->scale_f = ref_widen(dt, (uint32_t)b);
      break;
  }
}

Test(cuda_ops, device_scalar) {
  for (int t = 0; t < ncclNumTypes; t++) {
    ncclDataType_t dt = (ncclDataType_t)t;
    size_t size = weft_dtype_size(dt), n = 1037;
    unsigned char *in = malloc(n * size), *local = malloc(n * size);
    unsigned char *want = malloc(n * size), *got = malloc(n * size);
    cr_assert(in && local && want && got);
    for (size_t i = 0; i < n * size; i++) {
      in[i] = (unsigned char)next_rand();
      local[i] = (unsigned char)next_rand();
    }
    uint64_t e[64];
    size_t ne = edges_for(dt, e);
    for (size_t s = 0; s < ne + 4; s++) {
      uint64_t sbits = s < ne ? e[s] : next_rand();
      unsigned char scalar[8];
      memcpy(scalar, &sbits, 8);
      weft_redop_t ref = {.dtype = dt, .kind = WEFT_RED_SUM, .prescale = 1, .postdiv = 1};
      read_scalar_like_redop(dt, scalar, &ref);
      // The shim's op carries a different host scalar, which must be ignored.
      weft_redop_t op = {.dtype = dt,
                         .kind = WEFT_RED_SUM,
                         .prescale = 0,
                         .scale_i = 77,
                         .scale_f = 77.0,
                         .postdiv = 1};
      for (int final = 0; final <= 1; final++) {
        weft_reduce(&ref, want, in, local, n, final);
        cr_assert_eq(weft_cuda_host_reduce(&op, scalar, got, in, local, n, final, 32), 0);
        compare("reduce, device scalar", dt, got, want, n * size, 0, n, 0);
        weft_reduce_first(&ref, want, local, n, final);
        cr_assert_eq(weft_cuda_host_reduce_first(&op, scalar, got, local, n, final, 32), 0);
        compare("first, device scalar", dt, got, want, n * size, 0, n, 0);
      }
    }
    free(in);
    free(local);
    free(want);
    free(got);
  }
}

// ---- copies and arguments ----

Test(cuda_ops, copy_every_offset) {
  unsigned char src[5000 + 64], dst[5000 + 64], want[5000 + 64];
  for (size_t i = 0; i < sizeof src; i++) src[i] = (unsigned char)next_rand();
  static const size_t lens[] = {0, 1, 15, 16, 17, 31, 33, 100, 4999};
  for (size_t os = 0; os < 18; os++)
    for (size_t od = 0; od < 18; od++)
      for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
        memset(dst, FILL, sizeof dst);
        memset(want, FILL, sizeof want);
        memcpy(want + od, src + os, lens[l]);
        cr_assert_eq(weft_cuda_host_copy(dst + od, src + os, lens[l], 1 + (os + l) % 9), 0);
        cr_assert(memcmp(dst, want, sizeof dst) == 0, "copy of %zu bytes, offsets %zu -> %zu",
                  lens[l], os, od);
        // op == NULL: reduce_first is a copy of count bytes.
        memset(dst, FILL, sizeof dst);
        cr_assert_eq(weft_cuda_host_reduce_first(NULL, NULL, dst + od, src + os, lens[l], 0, 4), 0);
        cr_assert(memcmp(dst, want, sizeof dst) == 0);
      }
}

// The host memcpy()s vectors wherever they are, so check the plan itself:
// vectors start 16-byte aligned on every pointer, the head is shorter than
// one vector, the tail too, and vectors are used whenever the pointers
// share their offset modulo 16 and are element-aligned.
Test(cuda_ops, span_plan) {
  static const size_t sizes[] = {1, 2, 4, 8};
  for (size_t z = 0; z < 4; z++) {
    size_t size = sizes[z], lanes = 16 / size;
    for (uintptr_t oa = 0; oa < 32; oa++)
      for (uintptr_t ob = 0; ob < 32; ob += 3)
        for (size_t count = 0; count < 70; count += 1 + count / 8) {
          const void *a = (const void *)(0x10000 + oa), *b = (const void *)(0x20000 + ob);
          size_t head, nvec;
          int ea = weft_cuda_host_plan(size, count, a, b, a, &head, &nvec);
          cr_assert_eq(ea, oa % size == 0 && ob % size == 0);
          size_t tail = count - head - nvec * lanes;
          cr_assert(head + nvec * lanes <= count);
          if (nvec == 0) continue;
          cr_assert(ea && oa % 16 == ob % 16);
          cr_assert_eq((0x10000 + oa + head * size) % 16, 0, "size %zu offset %zu head %zu", size,
                       (size_t)oa, head);
          cr_assert(head < lanes && tail < lanes);
        }
    // Co-aligned and long enough: vectors must be used.
    size_t head, nvec;
    weft_cuda_host_plan(size, 100, (const void *)(0x10000 + 2 * size),
                        (const void *)(0x20000 + 2 * size), NULL, &head, &nvec);
    cr_assert(nvec > 0 && head == (16 - 2 * size) % 16 / size);
  }
}

Test(cuda_ops, invalid_arguments) {
  float a[4] = {1, 2, 3, 4}, b[4] = {0};
  weft_redop_t op = {.dtype = ncclFloat32, .kind = WEFT_RED_SUM, .postdiv = 1};
  weft_redop_t bad_type = op, bad_kind = op;
  bad_type.dtype = (ncclDataType_t)ncclNumTypes;
  bad_kind.kind = (weft_red_kind_t)7;
  cr_expect_eq(weft_cuda_host_reduce(&bad_type, NULL, b, a, a, 4, 0, 1), -1);
  cr_expect_eq(weft_cuda_host_reduce(&bad_kind, NULL, b, a, a, 4, 0, 1), -1);
  cr_expect_eq(weft_cuda_host_reduce(NULL, NULL, b, a, a, 4, 0, 1), -1);
  cr_expect_eq(weft_cuda_host_reduce(&op, NULL, NULL, a, a, 4, 0, 1), -1);
  cr_expect_eq(weft_cuda_host_reduce(&op, NULL, b, a, a, SIZE_MAX / 2, 0, 1), -1);
  cr_expect_eq(weft_cuda_host_reduce(&op, NULL, NULL, NULL, NULL, 0, 0, 1), 0);  // count 0
  cr_expect_eq(b[0], 0.0f);
}
