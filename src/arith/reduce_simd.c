/*
 * reduce_simd.c — picks the host reductions' instruction set once per
 * process: the best of AVX-512 (F, BW, VL), AVX2 (with F16C and FMA, as
 * every AVX2 CPU has) and portable C that the CPU runs, or what WEFT_SIMD
 * asks for (the library's initialisation passes it in; src/arith reads no
 * knobs itself, so its objects also serve as the CUDA kernels' reference).
 *
 * The choice is one atomic pointer to a table of loops, set by the first
 * configure call or the first reduction, whichever comes first; later calls
 * see the same table. Builds for other architectures have the portable
 * level only.
 */
#include "reduce_simd.h"

#include <stdatomic.h>
#include <string.h>
#if defined(WEFT_SIMD_X86)
#include <cpuid.h>
#endif

static const weft_reduce_kern_t *native_none(ncclDataType_t dt) {
  const weft_reduce_kern_t *k = weft_reduce_int_kern(dt);
  return k ? k : weft_reduce_float_kern(dt);
}

#if defined(WEFT_SIMD_X86)
static const weft_reduce_kern_t *native_avx2(ncclDataType_t dt) {
  const weft_reduce_kern_t *k = weft_reduce_int_kern_avx2(dt);
  return k ? k : weft_reduce_float_kern_avx2(dt);
}
static const weft_reduce_kern_t *native_avx512(ncclDataType_t dt) {
  const weft_reduce_kern_t *k = weft_reduce_int_kern_avx512(dt);
  return k ? k : weft_reduce_float_kern_avx512(dt);
}
#endif

static const weft_simd_impl_t impls[WEFT_SIMD_LEVELS] = {
    [WEFT_SIMD_NONE] = {WEFT_SIMD_NONE, "none", native_none, weft_reduce_small,
                        weft_reduce_small_first},
#if defined(WEFT_SIMD_X86)
    [WEFT_SIMD_AVX2] = {WEFT_SIMD_AVX2, "avx2", native_avx2, weft_reduce_small_avx2,
                        weft_reduce_small_first_avx2},
    [WEFT_SIMD_AVX512] = {WEFT_SIMD_AVX512, "avx512", native_avx512, weft_reduce_small_avx512,
                          weft_reduce_small_first_avx512},
#endif
};

#if defined(WEFT_SIMD_X86)
// F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports does
// not know the name.
static int cpu_has_f16c(void) {
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
}
#endif

static int cpu_has(weft_simd_level_t level) {
#if defined(WEFT_SIMD_X86)
  __builtin_cpu_init();
  switch (level) {
    case WEFT_SIMD_NONE: return 1;
    case WEFT_SIMD_AVX2:
      return __builtin_cpu_supports("avx2") && cpu_has_f16c() && __builtin_cpu_supports("fma");
    case WEFT_SIMD_AVX512:
      return cpu_has(WEFT_SIMD_AVX2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
    default: return 0;
  }
#else
  return level == WEFT_SIMD_NONE;
#endif
}

const weft_simd_impl_t *weft_simd_impl(weft_simd_level_t level) {
  if ((unsigned)level >= WEFT_SIMD_LEVELS || impls[level].name == NULL || !cpu_has(level))
    return NULL;
  return &impls[level];
}

// The best level at or below `want` that this CPU runs.
static const weft_simd_impl_t *best_upto(weft_simd_level_t want) {
  for (int l = (int)want; l > WEFT_SIMD_NONE; l--) {
    const weft_simd_impl_t *impl = weft_simd_impl((weft_simd_level_t)l);
    if (impl != NULL) return impl;
  }
  return &impls[WEFT_SIMD_NONE];
}

static _Atomic(const weft_simd_impl_t *) current;

// Install `impl` unless a level is already in use; returns the one in use.
static const weft_simd_impl_t *install(const weft_simd_impl_t *impl) {
  const weft_simd_impl_t *expected = NULL;
  if (atomic_compare_exchange_strong(&current, &expected, impl)) return impl;
  return expected;
}

const weft_simd_impl_t *weft_simd_configure(const char *mode, int *unknown) {
  weft_simd_level_t want = WEFT_SIMD_LEVELS - 1;
  if (unknown != NULL) *unknown = 0;
  if (mode != NULL && strcmp(mode, "") != 0 && strcmp(mode, "auto") != 0) {
    int l = 0;
    while (l < WEFT_SIMD_LEVELS && strcmp(mode, impls[l].name ? impls[l].name : "") != 0) l++;
    if (l < WEFT_SIMD_LEVELS)
      want = (weft_simd_level_t)l;
    else if (strcmp(mode, "avx512") == 0 || strcmp(mode, "avx2") == 0)
      want = WEFT_SIMD_NONE;  // a level this build has no code for
    else if (unknown != NULL)
      *unknown = 1;
  }
  return install(best_upto(want));
}

const weft_simd_impl_t *weft_simd_current(void) {
  const weft_simd_impl_t *impl = atomic_load_explicit(&current, memory_order_acquire);
  return impl != NULL ? impl : install(best_upto(WEFT_SIMD_LEVELS - 1));
}

int weft_simd_force(weft_simd_level_t level) {
  const weft_simd_impl_t *impl = weft_simd_impl(level);
  if (impl == NULL) return -1;
  atomic_store(&current, impl);
  return 0;
}
