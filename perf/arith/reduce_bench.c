/*
 * reduce_bench.c — the host reduction loops alone: GB/s per datatype and op
 * at each instruction-set level (reduce_simd.h), beside memcpy on the same
 * buffers, in cache and out of it.
 *
 * One measurement is weft_reduce(dst = a OP b) over n elements, repeated
 * until about 20 ms have passed; its GB/s counts the bytes moved (two read,
 * one written: 3 n size), memcpy's counts two (one read, one written), so
 * a reduction at memory speed shows about memcpy's figure. Each figure is
 * the median of --runs measurements. Inputs are finite normal values, as in
 * training (no subnormal slow paths).
 *
 *   reduce_bench [--bytes N]... [--runs R] [--dtype NAME] [--op NAME]
 *
 * Defaults: --bytes 32768 --bytes 67108864 (per buffer), --runs 5, every
 * datatype and op.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dtype.h"
#include "reduce.h"
#include "reduce_simd.h"

static const ncclDataType_t TYPES[] = {ncclInt8,    ncclUint8,    ncclInt32,      ncclUint32,
                                       ncclInt64,   ncclUint64,   ncclFloat16,    ncclFloat32,
                                       ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
#define NTYPES (sizeof TYPES / sizeof TYPES[0])
static const char *OPS[] = {"sum", "prod", "max", "min", "avg", "premulsum"};
#define NOPS (sizeof OPS / sizeof OPS[0])

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

// The op as the collectives lower it for 2 ranks (reduce.h).
static weft_redop_t make_op(ncclDataType_t dt, int op) {
  weft_redop_t r = {.dtype = dt, .kind = op < 4 ? (weft_red_kind_t)op : WEFT_RED_SUM};
  int is_float = weft_dtype_is_float(dt);
  if (op == 4 && is_float) r.prescale = 1, r.scale_f = 0.5;
  if (op == 4 && !is_float) r.postdiv = 2;
  if (op == 5) r.prescale = 1, r.scale_f = 0.75, r.scale_i = 3;
  return r;
}

// Median GB/s of `runs` measurements of one reduction (op != NULL) or memcpy.
static double measure(const weft_redop_t *op, char *d, const char *a, const char *b, size_t bytes,
                      int runs) {
  double gbs[64];
  size_t n = op ? bytes / weft_dtype_size(op->dtype) : bytes;
  double moved = (double)bytes * (op ? 3.0 : 2.0);
  for (int r = 0; r < runs; r++) {
    long iters = 0;
    double t0 = now(), t;
    do {
      if (op)
        weft_reduce(op, d, a, b, n, 1);
      else
        memcpy(d, a, bytes);
      iters++;
    } while ((t = now()) - t0 < 0.02);
    gbs[r] = moved * (double)iters / (t - t0) / 1e9;
  }
  qsort(gbs, (size_t)runs, sizeof gbs[0], cmp_double);
  return gbs[runs / 2];
}

// Finite normal values of every type: small integers in every byte, then
// each float element overwritten with a converted value in [0.5, 2).
static void fill(ncclDataType_t dt, char *p, size_t bytes, unsigned seed) {
  size_t size = weft_dtype_size(dt), n = bytes / size;
  for (size_t i = 0; i < bytes; i++) p[i] = (char)((i * 7 + seed) % 13 + 1);
  for (size_t i = 0; i < n && weft_dtype_is_float(dt); i++) {
    float v = 0.5f + (float)((i * 2654435761u + seed) % 1000) / 667.0f;
    char *e = p + i * size;
    if (dt == ncclFloat32) memcpy(e, &v, 4);
    if (dt == ncclFloat64) { double w = v; memcpy(e, &w, 8); }
    if (dt == ncclFloat16) { uint16_t h = weft_float_to_half(v); memcpy(e, &h, 2); }
    if (dt == ncclBfloat16) { uint16_t h = weft_float_to_bf16(v); memcpy(e, &h, 2); }
    if (dt == ncclFloat8e4m3) *e = (char)weft_float_to_e4m3(v);
    if (dt == ncclFloat8e5m2) *e = (char)weft_float_to_e5m2(v);
  }
}

static void bench_size(size_t bytes, int runs, const char *want_dt, const char *want_op) {
  char *a = aligned_alloc(64, bytes), *b = aligned_alloc(64, bytes), *d = aligned_alloc(64, bytes);
  if (!a || !b || !d) {
    fprintf(stderr, "reduce_bench: cannot allocate 3 x %zu bytes\n", bytes);
    exit(1);
  }
  memset(d, 0, bytes);
  printf("\n# %zu bytes per buffer; GB/s (reduction: 3 x bytes moved, memcpy: 2 x)\n", bytes);
  printf("%-10s %-10s", "dtype", "op");
  for (int l = 0; l < WEFT_SIMD_LEVELS; l++) {
    const weft_simd_impl_t *impl = weft_simd_impl((weft_simd_level_t)l);
    if (impl != NULL) printf(" %9s", impl->name);
  }
  printf(" %9s\n", "memcpy");
  for (size_t t = 0; t < NTYPES; t++) {
    if (want_dt && strcmp(want_dt, weft_dtype_name(TYPES[t])) != 0) continue;
    fill(TYPES[t], a, bytes, 1);
    fill(TYPES[t], b, bytes, 5);
    for (size_t o = 0; o < NOPS; o++) {
      if (want_op && strcmp(want_op, OPS[o]) != 0) continue;
      weft_redop_t op = make_op(TYPES[t], (int)o);
      printf("%-10s %-10s", weft_dtype_name(TYPES[t]), OPS[o]);
      for (int l = 0; l < WEFT_SIMD_LEVELS; l++) {
        if (weft_simd_force((weft_simd_level_t)l) != 0) continue;
        printf(" %9.2f", measure(&op, d, a, b, bytes, runs));
        fflush(stdout);
      }
      printf(" %9.2f\n", measure(NULL, d, a, b, bytes, runs));
    }
  }
  free(a);
  free(b);
  free(d);
}

int main(int argc, char **argv) {
  size_t sizes[8], nsizes = 0;
  int runs = 5;
  const char *want_dt = NULL, *want_op = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--bytes") == 0 && nsizes < 8)
      sizes[nsizes++] = strtoull(argv[i + 1], NULL, 0);
    else if (strcmp(argv[i], "--runs") == 0) runs = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--dtype") == 0) want_dt = argv[i + 1];
    else if (strcmp(argv[i], "--op") == 0) want_op = argv[i + 1];
    else {
      fprintf(stderr, "usage: reduce_bench [--bytes N]... [--runs R] [--dtype NAME] [--op NAME]\n");
      return 2;
    }
  }
  if (runs < 1 || runs > 64) runs = 5;
  if (nsizes == 0) sizes[nsizes++] = 32768, sizes[nsizes++] = 64u << 20;
  for (size_t s = 0; s < nsizes; s++) bench_size(sizes[s] & ~(size_t)63, runs, want_dt, want_op);
  return 0;
}
