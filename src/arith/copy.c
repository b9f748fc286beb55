/*
 * copy.c — non-temporal copies (see copy.h).
 *
 * x86-64: one 64-byte streaming store per line where the CPU has AVX-512
 * (checked once at run time), else four 16-byte SSE2 streaming stores,
 * which every x86-64 CPU has. Other architectures use memcpy.
 */
#include "copy.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

// One full line per store where AVX-512 exists.
__attribute__((target("avx512f"))) static void copy_lines_avx512(char *d, const char *s, size_t lines) {
  for (size_t i = 0; i < lines; i++, d += 64, s += 64) _mm512_stream_si512((void *)d, _mm512_loadu_si512(s));
}

void weft_copy_nt(void *dst, const void *src, size_t n) {
  char *d = dst;
  const char *s = src;
  if (n < 256) {  // not worth the fence
    memcpy(d, s, n);
    return;
  }
  static int avx512 = -1;
  if (avx512 < 0) avx512 = __builtin_cpu_supports("avx512f");
  if (avx512) {
    size_t head = (64 - ((uintptr_t)d & 63)) & 63;
    memcpy(d, s, head);
    d += head, s += head, n -= head;
    copy_lines_avx512(d, s, n / 64);
    d += n / 64 * 64, s += n / 64 * 64, n %= 64;
    memcpy(d, s, n);
    _mm_sfence();
    return;
  }
  size_t head = (16 - ((uintptr_t)d & 15)) & 15;
  memcpy(d, s, head);
  d += head, s += head, n -= head;
  for (; n >= 64; d += 64, s += 64, n -= 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)s), b = _mm_loadu_si128((const __m128i *)(s + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(s + 32)), e = _mm_loadu_si128((const __m128i *)(s + 48));
    _mm_stream_si128((__m128i *)d, a);
    _mm_stream_si128((__m128i *)(d + 16), b);
    _mm_stream_si128((__m128i *)(d + 32), c);
    _mm_stream_si128((__m128i *)(d + 48), e);
  }
  memcpy(d, s, n);
  _mm_sfence();
}

#else

void weft_copy_nt(void *dst, const void *src, size_t n) { memcpy(dst, src, n); }

#endif
