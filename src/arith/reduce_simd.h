/*
 * reduce_simd.h — which instruction set the host reductions use, chosen once
 * per process from the CPU's features (and WEFT_SIMD), private to
 * src/arith and its callers' initialisation.
 *
 * Every level gives the same bits as the portable C loops: the wider levels
 * run the same arithmetic (fp32 for the 16- and 8-bit floats, one rounding
 * per operation, round to nearest even, no flush of subnormals, the same NaN
 * rules), only more elements per instruction. None of them uses FMA: the
 * prescale and the sum are two roundings, as in the portable loops.
 */
#ifndef WEFT_REDUCE_SIMD_H
#define WEFT_REDUCE_SIMD_H

#include <stddef.h>

#include "reduce_kern.h"

typedef enum {
  WEFT_SIMD_NONE = 0,  // portable C (what the compiler makes of it for the base ISA)
  WEFT_SIMD_AVX2,      // AVX2 + F16C (+ FMA present, unused)
  WEFT_SIMD_AVX512,    // AVX-512 F, BW, VL
  WEFT_SIMD_LEVELS
} weft_simd_level_t;

// The loops of one level.
typedef struct {
  weft_simd_level_t level;
  const char *name;  // "none", "avx2", "avx512"
  // Integers, float32 and float64 (weft_reduce_kern_t), NULL for the others.
  const weft_reduce_kern_t *(*native)(ncclDataType_t dt);
  // fp16, bf16, fp8: as weft_reduce_small / weft_reduce_small_first, except
  // that d may only equal a, b or s, never overlap them partly.
  void (*small)(const weft_redop_t *op, void *d, const void *a, const void *b, size_t n, int div);
  void (*small_first)(const weft_redop_t *op, void *d, const void *s, size_t n, int div);
} weft_simd_impl_t;

// The level in use: the first call to weft_simd_configure fixed it, or, if
// nothing configured it before the first reduction, the best this CPU has.
const weft_simd_impl_t *weft_simd_current(void);

// Fix the level for the process from a WEFT_SIMD value: NULL, "" or "auto"
// (the best the CPU has), "avx512", "avx2" or "none" (a level the CPU lacks
// falls to the best below it). Only the first call (or the first reduction)
// decides; returns the level in use. *unknown is set when `mode` was not
// understood (auto is used).
const weft_simd_impl_t *weft_simd_configure(const char *mode, int *unknown);

// The loops of a level if this CPU (and build) can run it, else NULL.
// For tests and benchmarks, which call them without changing the process's level.
const weft_simd_impl_t *weft_simd_impl(weft_simd_level_t level);

// Make `level` the one in use (tests and benchmarks); -1 if unavailable.
int weft_simd_force(weft_simd_level_t level);

// The 16- and 8-bit floats' vector loops (reduce_small_avx2.c, _avx512.c).
#if defined(WEFT_SIMD_X86)
void weft_reduce_small_avx2(const weft_redop_t *op, void *d, const void *a, const void *b, size_t n,
                            int div);
void weft_reduce_small_first_avx2(const weft_redop_t *op, void *d, const void *s, size_t n,
                                  int div);
void weft_reduce_small_avx512(const weft_redop_t *op, void *d, const void *a, const void *b,
                              size_t n, int div);
void weft_reduce_small_first_avx512(const weft_redop_t *op, void *d, const void *s, size_t n,
                                    int div);
#endif

#endif
