/*
 * test_param.c — NCCL 2.30's parameter API over weft's knob table: binding
 * keys, typed and raw reads of the values the library itself uses, NCCL's
 * strict types, the key list and the dump.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env.h"
#include "nccl.h"

// Every test sets the environment first, then forgets cached knobs.
static void with_env(void) {
  setenv("NCCL_ALGO", "ring", 1);
  setenv("WEFT_TIMEOUT", "42", 1);
  unsetenv("NCCL_PROTO");
  unsetenv("WEFT_SPIN_NS");
  weft_env_reset();
}

TestSuite(param, .init = with_env);

Test(param, binds_every_knob_and_reads_what_the_library_reads, .timeout = 10) {
  ncclParamHandle_t h;
  int64_t v = 0;
  cr_assert_eq(ncclParamBind(&h, "WEFT_TIMEOUT"), ncclSuccess);
  cr_assert_eq(ncclParamGetI64(h, &v), ncclSuccess);
  cr_expect_eq(v, 42);
  cr_expect_eq(v, weft_env_WEFT_TIMEOUT(), "the API and the library agree");
  cr_assert_eq(ncclParamBind(&h, "WEFT_SPIN_NS"), ncclSuccess);
  cr_assert_eq(ncclParamGetI64(h, &v), ncclSuccess);
  cr_expect_eq(v, weft_env_WEFT_SPIN_NS(), "an unset knob reads as its default");

  const char *s = NULL;
  cr_assert_eq(ncclParamBind(&h, "NCCL_ALGO"), ncclSuccess);
  cr_assert_eq(ncclParamGetStr(h, &s), ncclSuccess);
  cr_expect_str_eq(s, "ring");
  cr_assert_eq(ncclParamBind(&h, "NCCL_PROTO"), ncclSuccess);
  cr_assert_eq(ncclParamGetStr(h, &s), ncclSuccess);
  cr_expect_str_eq(s, "", "an unset string knob reads as empty");

  // Every key the table lists binds.
  const char **keys = NULL;
  int n = 0;
  cr_assert_eq(ncclParamGetAllParameterKeys(&keys, &n), ncclSuccess);
  cr_expect_eq(n, weft_env_knob_count());
  int seen_algo = 0;
  for (int i = 0; i < n; i++) {
    cr_expect_eq(ncclParamBind(&h, keys[i]), ncclSuccess, "%s", keys[i]);
    seen_algo |= strcmp(keys[i], "NCCL_ALGO") == 0;
  }
  cr_expect(seen_algo);
}

Test(param, types_are_strict_as_in_nccl, .timeout = 10) {
  ncclParamHandle_t num, str;
  cr_assert_eq(ncclParamBind(&num, "WEFT_TIMEOUT"), ncclSuccess);
  cr_assert_eq(ncclParamBind(&str, "NCCL_ALGO"), ncclSuccess);
  int8_t i8;
  int16_t i16;
  int32_t i32;
  int64_t i64;
  uint8_t u8;
  uint16_t u16;
  uint32_t u32;
  uint64_t u64;
  const char *s;
  cr_expect_eq(ncclParamGetI8(num, &i8), ncclInvalidArgument);
  cr_expect_eq(ncclParamGetI16(num, &i16), ncclInvalidArgument);
  cr_expect_eq(ncclParamGetI32(num, &i32), ncclInvalidArgument);
  cr_expect_eq(ncclParamGetU8(num, &u8), ncclInvalidArgument);
  cr_expect_eq(ncclParamGetU16(num, &u16), ncclInvalidArgument);
  cr_expect_eq(ncclParamGetU32(num, &u32), ncclInvalidArgument);
  cr_expect_eq(ncclParamGetU64(num, &u64), ncclInvalidArgument);
  cr_expect_eq(ncclParamGetStr(num, &s), ncclInvalidArgument, "an integer knob is not a string");
  cr_expect_eq(ncclParamGetI64(str, &i64), ncclInvalidArgument, "a string knob is not an integer");
}

Test(param, bad_arguments_are_refused, .timeout = 10) {
  ncclParamHandle_t h = NULL;
  int64_t v;
  const char *s;
  int len;
  cr_expect_eq(ncclParamBind(&h, "NCCL_NO_SUCH_KNOB"), ncclInvalidArgument);
  cr_expect_eq(ncclParamBind(NULL, "WEFT_TIMEOUT"), ncclInvalidArgument);
  cr_expect_eq(ncclParamBind(&h, NULL), ncclInvalidArgument);
  cr_expect_eq(ncclParamGetI64(NULL, &v), ncclInvalidArgument);
  cr_expect_eq(ncclParamGetI64((ncclParamHandle_t)&v, &v), ncclInvalidArgument, "not a handle the library gave");
  cr_assert_eq(ncclParamBind(&h, "WEFT_TIMEOUT"), ncclSuccess);
  cr_expect_eq(ncclParamGetI64(h, NULL), ncclInvalidArgument);
  cr_expect_eq(ncclParamGetParameter("NCCL_NO_SUCH_KNOB", &s, &len), ncclInvalidArgument);
  cr_expect_null(s);
  cr_expect_eq(len, 0);
  cr_expect_eq(ncclParamGetParameter(NULL, &s, &len), ncclInvalidArgument);
  cr_expect_eq(ncclParamGetAllParameterKeys(NULL, &len), ncclInvalidArgument);
}

Test(param, raw_reads_copy_the_bytes, .timeout = 10) {
  ncclParamHandle_t h;
  char buf[64];
  int len = -1;
  cr_assert_eq(ncclParamBind(&h, "WEFT_TIMEOUT"), ncclSuccess);
  cr_assert_eq(ncclParamGet(h, buf, sizeof(buf), &len), ncclSuccess);
  int64_t v;
  memcpy(&v, buf, sizeof(v));
  cr_expect_eq(len, 8);
  cr_expect_eq(v, 42);
  cr_expect_eq(ncclParamGet(h, buf, 4, &len), ncclInvalidArgument, "too small for 8 bytes");
  cr_expect_eq(len, 0);
  cr_assert_eq(ncclParamBind(&h, "NCCL_ALGO"), ncclSuccess);
  cr_assert_eq(ncclParamGet(h, buf, sizeof(buf), &len), ncclSuccess);
  cr_expect_eq(len, 5, "\"ring\" and its NUL");
  cr_expect_str_eq(buf, "ring");
  cr_expect_eq(ncclParamGet(h, buf, 4, &len), ncclInvalidArgument);
}

Test(param, values_by_key_and_the_dump, .timeout = 10) {
  const char *s = NULL;
  int len = -1;
  cr_assert_eq(ncclParamGetParameter("WEFT_TIMEOUT", &s, &len), ncclSuccess);
  cr_expect_str_eq(s, "42");
  cr_expect_eq(len, 2);
  cr_assert_eq(ncclParamGetParameter("NCCL_ALGO", &s, &len), ncclSuccess);
  cr_expect_str_eq(s, "ring");
  setenv("WEFT_COMM_SECRET", "swordfish", 1);
  weft_env_reset();
  cr_assert_eq(ncclParamGetParameter("WEFT_COMM_SECRET", &s, &len), ncclSuccess);
  cr_expect_str_eq(s, "(hidden)", "a secret is never handed out");

  // The dump, captured from stdout.
  char path[] = "/tmp/weft-param-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  fflush(stdout);
  int saved = dup(STDOUT_FILENO);
  dup2(fd, STDOUT_FILENO);
  ncclParamDumpAll();
  fflush(stdout);
  dup2(saved, STDOUT_FILENO);
  close(saved);
  static char text[1 << 20];
  ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
  close(fd);
  unlink(path);
  cr_assert_gt(n, 0);
  text[n] = '\0';
  cr_expect(strstr(text, "WEFT_TIMEOUT (int64) [published]") != NULL, "%.300s", text);
  cr_expect(strstr(text, "Current value=42 set_by=environment default=300") != NULL);
  cr_expect(strstr(text, "NCCL_PROTO (string)") != NULL);
  cr_expect(strstr(text, "Current value=<unset> set_by=default default=<unset>") != NULL);
  cr_expect(strstr(text, "swordfish") == NULL, "the secret stays out of the dump");
  int entries = 0;
  for (const char *p = text; (p = strstr(p, "    Current value=")) != NULL; p++) entries++;
  cr_expect_eq(entries, weft_env_knob_count(), "one entry per knob");
}
