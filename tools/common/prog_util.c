/*
 * prog_util.c — sizes on the command line and the monotonic clock for
 * weft's programs (see prog_util.h).
 */
#include "prog_util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int weft_prog_parse_size(const char *s, size_t *out) {
  if (s == NULL || !((s[0] >= '0' && s[0] <= '9') || s[0] == '.')) return -1;  // also refuses '-', '+' and spaces
  int hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  char *end;
  errno = 0;
  unsigned long long whole = strtoull(s, &end, hex ? 16 : 10);
  double fraction = -1;  // >= 0: the text had a decimal point
  if (!hex && *end == '.') {
    fraction = strtod(s, &end);
    if (errno != 0 || end == s || !(fraction >= 0)) return -1;
  } else if (errno != 0 || end == s) {
    return -1;
  }
  int shift = 0;
  const char *units = "KkMmGg", *u = *end != '\0' ? strchr(units, *end) : NULL;
  if (u != NULL) shift = 10 * (1 + (int)(u - units) / 2), end++;
  if (*end == 'B' || *end == 'b') end++;
  if (*end != '\0') return -1;
  if (fraction >= 0) {
    double v = fraction * (double)(1ull << shift);
    if (v >= 18446744073709551615.0 || v > (double)SIZE_MAX) return -1;
    *out = (size_t)v;
    return 0;
  }
  if (whole > (unsigned long long)(SIZE_MAX >> shift)) return -1;
  *out = (size_t)whole << shift;
  return 0;
}

int64_t weft_prog_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

double weft_prog_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
