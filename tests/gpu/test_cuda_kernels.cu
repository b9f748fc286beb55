/*
 * test_cuda_kernels.cu — libweft-cuda.so's kernels on a real device against
 * the host backend (weft_reduce / weft_reduce_first, linked from the
 * library's objects).
 *
 * Every datatype x op x transform (none, prescale, postdiv, both) x final,
 * over random bits salted with edge values, with vector/head/tail,
 * all-scalar (mismatched offsets) and byte-misaligned layouts, in place,
 * on a created stream and on the default one; the device-resident scalar
 * variants; the copy; argument errors. Guard bytes around dst must stay
 * untouched. Integers must match exactly; floats bit for bit except that a
 * NaN matches any NaN (the GPU's arithmetic returns its canonical NaN where
 * the CPU keeps a payload).
 *
 * Not Criterion: a plain program for tests/run.sh's GPU section. Exit 0 all
 * passed, 1 something failed, 77 skipped (no CUDA device visible), saying
 * which on stdout.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "nccl.h"
extern "C" {  // the host backend's C headers (no extern "C" of their own)
#include "dtype.h"
#include "reduce.h"
}
#include "cuda_kernels.h"

static int passed, failed;

#define CUDA_OK(call)                                                                    \
  do {                                                                                   \
    cudaError_t e_ = (call);                                                             \
    if (e_ != cudaSuccess) {                                                             \
      printf("FATAL %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 0x2545f4914f6cdd1dull;
}

static int elem_is_nan(ncclDataType_t dt, const unsigned char *p) {
  uint64_t b = 0;
  memcpy(&b, p, weft_dtype_size(dt));
  switch (dt) {
    case ncclFloat16:
      return isnan(weft_half_to_float((uint16_t)b));
    case ncclBfloat16:
      return isnan(weft_bf16_to_float((uint16_t)b));
    case ncclFloat8e4m3:
      return isnan(weft_e4m3_to_float((uint8_t)b));
    case ncclFloat8e5m2:
      return isnan(weft_e5m2_to_float((uint8_t)b));
    case ncclFloat32: {
      float f;
      memcpy(&f, p, 4);
      return isnan(f);
    }
    case ncclFloat64: {
      double d;
      memcpy(&d, p, 8);
      return isnan(d);
    }
    default:
      return 0;
  }
}

// 1 when got matches want; inside [lo, lo + n*size) a NaN matches any NaN.
static int same(ncclDataType_t dt, const unsigned char *got, const unsigned char *want,
                size_t bytes, size_t lo, size_t n, char *why, size_t whylen) {
  size_t size = weft_dtype_size(dt);
  for (size_t b = 0; b < bytes; b++) {
    if (got[b] == want[b]) continue;
    int inside = b >= lo && (b - lo) / size < n;
    size_t e = inside ? (b - lo) / size : 0;
    if (inside && elem_is_nan(dt, got + lo + e * size) && elem_is_nan(dt, want + lo + e * size)) {
      b = lo + (e + 1) * size - 1;
      continue;
    }
    uint64_t g = 0, w = 0;
    if (inside) {
      memcpy(&g, got + lo + e * size, size);
      memcpy(&w, want + lo + e * size, size);
    }
    snprintf(why, whylen, "byte %zu (%s element %zu): got 0x%llx, host 0x%llx", b,
             inside ? "inside" : "outside", e, (unsigned long long)g, (unsigned long long)w);
    return 0;
  }
  return 1;
}

static void report(int ok, const char *what, const char *why) {
  if (ok) {
    passed++;
  } else {
    failed++;
    if (failed <= 20) printf("FAIL %s: %s\n", what, why);
  }
}

// Random bits, every 7th element an edge value of the type.
static void fill(ncclDataType_t dt, unsigned char *p, size_t n) {
  static const uint64_t f16[] = {0x0000, 0x8000, 0x3c00, 0x7c00, 0xfc00, 0x7e00, 0x7d01,
                                 0x7bff, 0x0001, 0x03ff, 0x0400, 0x1000, 0x3c01};
  static const uint64_t bf[] = {0x0000, 0x8000, 0x3f80, 0x7f80, 0xff80, 0x7fc0, 0x7f81,
                                0x7f7f, 0x0001, 0x007f, 0x0080, 0x3b80, 0x3f81};
  static const uint64_t f32[] = {0,           0x80000000u, 0x3f800000u, 0x7f800000u, 0xff800000u,
                                 0x7fc00000u, 0x7f800001u, 0x7f7fffffu, 1,           0x007fffffu,
                                 0x00800000u, 0x33800000u, 0x3f800001u};
  static const uint64_t f64[] = {0,
                                 0x8000000000000000ull,
                                 0x3ff0000000000000ull,
                                 0x7ff0000000000000ull,
                                 0xfff0000000000000ull,
                                 0x7ff8000000000000ull,
                                 0x7ff0000000000001ull,
                                 1,
                                 0x000fffffffffffffull,
                                 0x3ca0000000000000ull,
                                 0x3ff0000000000001ull};
  static const uint64_t ints[] = {0,
                                  1,
                                  0x7f,
                                  0x80,
                                  0xff,
                                  0x7fffffff,
                                  0x80000000u,
                                  0xffffffffu,
                                  0x7fffffffffffffffull,
                                  0x8000000000000000ull,
                                  ~0ull};
  const uint64_t *e = ints;
  size_t ne = sizeof ints / sizeof ints[0];
  switch (dt) {
    case ncclFloat16:
      e = f16;
      ne = sizeof f16 / 8;
      break;
    case ncclBfloat16:
      e = bf;
      ne = sizeof bf / 8;
      break;
    case ncclFloat32:
      e = f32;
      ne = sizeof f32 / 8;
      break;
    case ncclFloat64:
      e = f64;
      ne = sizeof f64 / 8;
      break;
    default:
      break;
  }
  size_t size = weft_dtype_size(dt);
  for (size_t i = 0; i < n; i++) {
    uint64_t v = i % 7 == 0 ? e[(i / 7) % ne] : next_rand();
    if (i % 14 == 7) v |= 1ull << (8 * size - 1);  // the negative edges too
    memcpy(p + i * size, &v, size);
  }
}

#define GUARD 64
#define FILL 0x5a

struct Layout {
  size_t od, oi, ol;
  int in_place;  // 1: dst is in, 2: dst is local
};

static void test_reduce(const weft_redop_t *op, size_t n, int final, const Layout &L,
                        cudaStream_t st, const char *scalar_dev, const weft_redop_t *ref_op) {
  size_t size = weft_dtype_size(op->dtype), bytes = n * size, alloc = bytes + 2 * GUARD + 16;
  std::vector<unsigned char> h[3], ref[3];
  unsigned char *d[3];
  for (int k = 0; k < 3; k++) {
    h[k].assign(alloc, FILL);
    CUDA_OK(cudaMalloc((void **)&d[k], alloc));
  }
  size_t off[3] = {GUARD + L.od, GUARD + L.oi, GUARD + L.ol};
  fill(op->dtype, &h[1][off[1]], n);
  fill(op->dtype, &h[2][off[2]], n);
  for (int k = 0; k < 3; k++) {
    ref[k] = h[k];
    CUDA_OK(cudaMemcpy(d[k], h[k].data(), alloc, cudaMemcpyHostToDevice));
  }
  int k = L.in_place;
  size_t dk = k ? off[k] : off[0];
  weft_reduce(ref_op, &ref[k][dk], &ref[1][off[1]], &ref[2][off[2]], n, final);
  int rc = scalar_dev ? weft_cuda_reduce_dscalar(op, scalar_dev, d[k] + dk, d[1] + off[1],
                                                 d[2] + off[2], n, final, st)
                      : weft_cuda_reduce(op, d[k] + dk, d[1] + off[1], d[2] + off[2], n, final, st);
  char what[256], why[256] = "";
  snprintf(what, sizeof what,
           "reduce %s kind=%d pre=%d div=%d final=%d n=%zu layout=%zu/%zu/%zu/%d%s",
           weft_dtype_name(op->dtype), (int)op->kind, op->prescale, op->postdiv, final, n, L.od,
           L.oi, L.ol, L.in_place, scalar_dev ? " device-scalar" : "");
  if (rc != 0) {
    snprintf(why, sizeof why, "returned %d (%s)", rc, weft_cuda_error_string(rc));
    report(0, what, why);
  } else {
    CUDA_OK(cudaStreamSynchronize(st));
    CUDA_OK(cudaMemcpy(h[k].data(), d[k], alloc, cudaMemcpyDeviceToHost));
    report(same(op->dtype, h[k].data(), ref[k].data(), alloc, dk, n, why, sizeof why), what, why);
  }
  for (int j = 0; j < 3; j++) CUDA_OK(cudaFree(d[j]));
}

static void test_first(const weft_redop_t *op, size_t n, int final, const Layout &L,
                       cudaStream_t st, const char *scalar_dev, const weft_redop_t *ref_op) {
  size_t size = weft_dtype_size(op->dtype), bytes = n * size, alloc = bytes + 2 * GUARD + 16;
  std::vector<unsigned char> hd(alloc, FILL), hs(alloc, FILL);
  fill(op->dtype, &hs[GUARD + L.oi], n);
  unsigned char *dd, *ds;
  CUDA_OK(cudaMalloc((void **)&dd, alloc));
  CUDA_OK(cudaMalloc((void **)&ds, alloc));
  CUDA_OK(cudaMemcpy(dd, hd.data(), alloc, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(ds, hs.data(), alloc, cudaMemcpyHostToDevice));
  std::vector<unsigned char> &rbuf = L.in_place ? hs : hd;
  std::vector<unsigned char> ref = rbuf;
  size_t doff = L.in_place ? GUARD + L.oi : GUARD + L.od;
  unsigned char *dev = L.in_place ? ds : dd;
  weft_reduce_first(ref_op, &ref[doff], &hs[GUARD + L.oi], n, final);
  if (L.in_place) {  // the reference ran on a copy; redo it in place
    ref = hs;
    weft_reduce_first(ref_op, &ref[doff], &ref[doff], n, final);
  }
  int rc = scalar_dev ? weft_cuda_reduce_first_dscalar(op, scalar_dev, dev + doff,
                                                       ds + GUARD + L.oi, n, final, st)
                      : weft_cuda_reduce_first(op, dev + doff, ds + GUARD + L.oi, n, final, st);
  char what[256], why[256] = "";
  snprintf(what, sizeof what, "first %s pre=%d div=%d final=%d n=%zu layout=%zu/%zu/%d%s",
           weft_dtype_name(op->dtype), op->prescale, op->postdiv, final, n, L.od, L.oi, L.in_place,
           scalar_dev ? " device-scalar" : "");
  if (rc != 0) {
    snprintf(why, sizeof why, "returned %d (%s)", rc, weft_cuda_error_string(rc));
    report(0, what, why);
  } else {
    CUDA_OK(cudaStreamSynchronize(st));
    CUDA_OK(cudaMemcpy(rbuf.data(), dev, alloc, cudaMemcpyDeviceToHost));
    report(same(op->dtype, rbuf.data(), ref.data(), alloc, doff, n, why, sizeof why), what, why);
  }
  CUDA_OK(cudaFree(dd));
  CUDA_OK(cudaFree(ds));
}

static void test_copy(cudaStream_t st) {
  const size_t max = (1u << 20) + 100;
  std::vector<unsigned char> src(max), got(max), want(max);
  for (auto &c : src) c = (unsigned char)next_rand();
  unsigned char *ds, *dd;
  CUDA_OK(cudaMalloc((void **)&ds, max));
  CUDA_OK(cudaMalloc((void **)&dd, max));
  CUDA_OK(cudaMemcpy(ds, src.data(), max, cudaMemcpyHostToDevice));
  const size_t lens[] = {0, 1, 15, 16, 17, 4097, 1u << 20};
  for (size_t os = 0; os < 18; os += 5)
    for (size_t od = 0; od < 18; od += 3)
      for (size_t len : lens) {
        CUDA_OK(cudaMemset(dd, FILL, max));
        memset(want.data(), FILL, max);
        memcpy(&want[od], &src[os], len);
        int rc = weft_cuda_copy(dd + od, ds + os, len, st);
        CUDA_OK(cudaStreamSynchronize(st));
        CUDA_OK(cudaMemcpy(got.data(), dd, max, cudaMemcpyDeviceToHost));
        char what[128];
        snprintf(what, sizeof what, "copy %zu bytes %zu -> %zu", len, os, od);
        report(rc == 0 && got == want, what, rc ? weft_cuda_error_string(rc) : "bytes differ");
      }
  CUDA_OK(cudaFree(ds));
  CUDA_OK(cudaFree(dd));
}

static void test_errors(void) {
  weft_redop_t op = {ncclFloat32, WEFT_RED_SUM, 0, 0, 0.0, 1};
  weft_redop_t bad = op;
  bad.dtype = (ncclDataType_t)99;
  float *d;
  CUDA_OK(cudaMalloc((void **)&d, 64));
  report(weft_cuda_reduce(&bad, d, d, d, 4, 0, 0) == cudaErrorInvalidValue, "unknown datatype",
         "not rejected");
  report(weft_cuda_reduce(&op, nullptr, d, d, 4, 0, 0) == cudaErrorInvalidValue, "NULL dst",
         "not rejected");
  report(weft_cuda_reduce(&op, nullptr, nullptr, nullptr, 0, 0, 0) == 0, "count 0", "not a no-op");
  report(weft_cuda_reduce_dscalar(&op, nullptr, d, d, d, 4, 0, 0) == cudaErrorInvalidValue,
         "NULL scalar", "not rejected");
  report(weft_cuda_kernels_abi() == WEFT_CUDA_KERNELS_ABI, "ABI version", "mismatch");
  CUDA_OK(cudaFree(d));
}

int main(void) {
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev == 0) {
    printf("skipped: no CUDA device visible (cudaGetDeviceCount: %s, %d devices)\n",
           e == cudaSuccess ? "ok" : cudaGetErrorString(e), ndev);
    return 77;
  }
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  printf("device 0: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  cudaStream_t st;
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

  struct Variant {
    int prescale;
    double scale_f;
    int64_t scale_i;
    int postdiv;
  } variants[] = {
      {0, 0, 0, 1}, {1, 1.0 / 3, 3, 1}, {1, -2.5, -7, 1}, {0, 0, 0, 3}, {1, 0.25, 5, 7}};
  const size_t counts[] = {1, 17, 4099, (1u << 20) + 3};
  for (int t = 0; t < ncclNumTypes; t++) {
    ncclDataType_t dt = (ncclDataType_t)t;
    size_t s = weft_dtype_size(dt);
    const Layout layouts[] = {{0, 0, 0, 0},     {3 * s, 3 * s, 3 * s, 0},
                              {0, s, 2 * s, 0}, {s > 1 ? 1u : 0u, s > 1 ? 3u : 0u, 0, 0},
                              {0, 0, 0, 1},     {s, 5 * s, 5 * s, 2}};
    for (int kind = 0; kind <= WEFT_RED_MIN; kind++)
      for (const Variant &v : variants)
        for (int final = 0; final <= 1; final++)
          for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            weft_redop_t op = {dt,       (weft_red_kind_t)kind, v.prescale, v.scale_i, v.scale_f,
                               v.postdiv};
            const Layout &L = layouts[(c + kind + final) % 6];
            cudaStream_t use = (c % 2) ? st : (cudaStream_t)0;
            test_reduce(&op, counts[c], final, L, use, nullptr, &op);
            if (kind == 0) test_first(&op, counts[c], final, L, use, nullptr, &op);
          }
    // ncclScalarDevice: scalar 3 (or 0.75) in device memory, of type dt.
    unsigned char scalar[8];
    weft_redop_t ref = {dt, WEFT_RED_SUM, 1, 3, 0.75, 1};
    uint64_t bits = 3;
    if (dt == ncclFloat16)
      bits = weft_float_to_half(0.75f);
    else if (dt == ncclBfloat16)
      bits = weft_float_to_bf16(0.75f);
    else if (dt == ncclFloat8e4m3)
      bits = weft_float_to_e4m3(0.75f);
    else if (dt == ncclFloat8e5m2)
      bits = weft_float_to_e5m2(0.75f);
    else if (dt == ncclFloat32) {
      float f = 0.75f;
      memcpy(&bits, &f, 4);
    } else if (dt == ncclFloat64) {
      double f = 0.75;
      memcpy(&bits, &f, 8);
    }
    memcpy(scalar, &bits, 8);
    char *dscalar;
    CUDA_OK(cudaMalloc((void **)&dscalar, 8));
    CUDA_OK(cudaMemcpy(dscalar, scalar, 8, cudaMemcpyHostToDevice));
    weft_redop_t op = {dt, WEFT_RED_SUM, 0, 99, 99.0, 1};  // host scalar must be ignored
    for (int final = 0; final <= 1; final++) {
      test_reduce(&op, 4099, final, layouts[final], st, dscalar, &ref);
      test_first(&op, 4099, final, layouts[final], st, dscalar, &ref);
    }
    CUDA_OK(cudaFree(dscalar));
  }
  test_copy(st);
  test_errors();
  CUDA_OK(cudaStreamDestroy(st));
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
