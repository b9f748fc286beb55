/*
 * test_prog_util.c — the size parser and clock every weft program shares
 * (tools/common/prog_util.c): nccl-tests' spellings are taken, anything
 * else is refused without touching the result.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <time.h>

#include "prog_util.h"

static size_t parsed(const char *s) {
  size_t v = 12345;
  cr_assert_eq(weft_prog_parse_size(s, &v), 0, "'%s' was refused", s);
  return v;
}

Test(prog_util, sizes_as_nccl_tests_writes_them, .timeout = 10) {
  cr_expect_eq(parsed("0"), 0);
  cr_expect_eq(parsed("8"), 8);
  cr_expect_eq(parsed("64K"), 65536);
  cr_expect_eq(parsed("64k"), 65536);
  cr_expect_eq(parsed("1M"), 1u << 20);
  cr_expect_eq(parsed("2G"), (size_t)2 << 30);
  cr_expect_eq(parsed("2GB"), (size_t)2 << 30);
  cr_expect_eq(parsed("256b"), 256);
  cr_expect_eq(parsed("0.5M"), 1u << 19);
  cr_expect_eq(parsed(".5K"), 512);
  cr_expect_eq(parsed("0x10"), 16);
  cr_expect_eq(parsed("18446744073709551615"), (size_t)UINT64_MAX);
  cr_expect_eq(parsed("17179869183G"), (size_t)17179869183 << 30);
}

Test(prog_util, malformed_negative_and_overflowing_sizes_are_refused, .timeout = 10) {
  const char *bad[] = {"", " 8", "-1", "+8", "8 ", "1Q", "1KK", "K", ".", "0x", "1.5.5", "nan", "inf", "1e3",
                       "18446744073709551616", "17179869184G", "99999999999999999999.0", "0.5T"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    size_t v = 777;
    cr_expect_eq(weft_prog_parse_size(bad[i], &v), -1, "'%s' was taken as %zu", bad[i], v);
    cr_expect_eq(v, 777, "'%s' changed the result", bad[i]);
  }
  size_t v = 777;
  cr_expect_eq(weft_prog_parse_size(NULL, &v), -1);
}

Test(prog_util, the_clock_is_monotonic_and_agrees_with_itself, .timeout = 10) {
  double s0 = weft_prog_now_s();
  int64_t n0 = weft_prog_now_ns();
  struct timespec ts = {0, 2000000};
  nanosleep(&ts, NULL);
  double s1 = weft_prog_now_s();
  int64_t n1 = weft_prog_now_ns();
  cr_expect_geq(n1 - n0, 2000000, "slept 2 ms, the clock moved %lld ns", (long long)(n1 - n0));
  cr_expect_geq(s1 - s0, 0.002);
  cr_expect_lt(s1 - s0, 5.0);
  cr_expect_lt(((double)n0 * 1e-9 - s0) * ((double)n0 * 1e-9 - s0), 1.0, "seconds and nanoseconds disagree");
}
