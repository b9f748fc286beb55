/*
 * test_env.c — environment knobs: the strict integer parser, caching and
 * reset, garbage falling back to the default, string knobs, the one-time
 * "set by environment" log line, and the generated markdown table.
 *
 * Criterion runs each test in its own process, so setenv here does not leak
 * into other tests.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "debug.h"
#include "env.h"
#include "util.h"

// Run fn with stdout sent to a temporary file; return what it printed (malloc'd).
static char *capture_stdout(void (*fn)(void)) {
  char path[] = "/tmp/weft-env-test-XXXXXX";
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  fflush(stdout);
  int saved = dup(1);
  cr_assert(saved >= 0);
  cr_assert(dup2(fd, 1) == 1);
  fn();
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  off_t size = lseek(fd, 0, SEEK_END);
  char *text = calloc((size_t)size + 1, 1);
  cr_assert(text != NULL);
  cr_assert(pread(fd, text, (size_t)size, 0) == size);
  close(fd);
  unlink(path);
  return text;
}

Test(env, parse_int_accepts_good_values, .timeout = 10) {
  static const struct {
    const char *text;
    int64_t value;
  } good[] = {
      {"0", 0},
      {"42", 42},
      {"+5", 5},
      {"-7", -7},
      {"010", 10},  // decimal, not octal
      {"0x10", 16},
      {"0XfF", 255},
      {"-0x10", -16},
      {"4K", 4096},
      {"3k", 3072},
      {"2M", 2 * 1024 * 1024},
      {"1G", 1024 * 1024 * 1024},
      {"0x2K", 2048},
      {"-1M", -1024 * 1024},
      {"9223372036854775807", INT64_MAX},
      {"-9223372036854775808", INT64_MIN},
      {"0x7fffffffffffffff", INT64_MAX},
      {"8589934591G", INT64_C(8589934591) * 1024 * 1024 * 1024},
  };
  for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
    int64_t v = -12345;
    cr_expect_eq(weft_env_parse_int(good[i].text, &v), 0, "'%s' should parse", good[i].text);
    cr_expect_eq(v, good[i].value, "'%s' -> %" PRId64 ", expected %" PRId64, good[i].text, v,
                 good[i].value);
  }
}

Test(env, parse_int_rejects_garbage, .timeout = 10) {
  static const char *bad[] = {
      "",     "abc",  "12abc", "0x",   "0xg",  "1.5",  " 5",    "5 ",    "K",
      "--1",  "+-1",  "1KK",   "1Kb",  "1T",   "0x-1", "1e3",   "- 1",   "12 34",
      "9223372036854775808",   "-9223372036854775809", "99999999999999999999",
      "8589934592G",           "0x10000000000000000",  "\t7",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    int64_t v = 777;
    cr_expect_eq(weft_env_parse_int(bad[i], &v), -1, "'%s' should be rejected", bad[i]);
    cr_expect_eq(v, 777, "'%s' changed the value on failure", bad[i]);
  }
  int64_t v = 777;
  cr_expect_eq(weft_env_parse_int(NULL, &v), -1);
  cr_expect_eq(v, 777);
  cr_expect_eq(weft_env_parse_int("5", NULL), -1);
}

Test(env, int_knob_is_cached_until_reset, .timeout = 10) {
  unsetenv("WEFT_SPIN_NS");
  weft_env_reset();
  cr_assert_eq(weft_env_WEFT_SPIN_NS(), -1, "default when unset");

  setenv("WEFT_SPIN_NS", "123", 1);
  cr_assert_eq(weft_env_WEFT_SPIN_NS(), -1, "value is cached: setenv alone changes nothing");
  weft_env_reset();
  cr_assert_eq(weft_env_WEFT_SPIN_NS(), 123);

  setenv("WEFT_SPIN_NS", "2K", 1);
  cr_assert_eq(weft_env_WEFT_SPIN_NS(), 123);
  weft_env_reset();
  cr_assert_eq(weft_env_WEFT_SPIN_NS(), 2048);

  setenv("WEFT_SPIN_NS", "", 1);  // empty counts as unset
  weft_env_reset();
  cr_assert_eq(weft_env_WEFT_SPIN_NS(), -1);
}

// WEFT_SPIN_NS=-1: poll long while the host's ranks have a core each, briefly once they share.
Test(env, spin_budget_follows_cores_unless_set, .timeout = 10) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  unsetenv("WEFT_SPIN_NS");
  weft_env_reset();
  cr_expect_eq(weft_spin_ns(1), 1000000, "one rank per core polls 1 ms");
  cr_expect_eq(weft_spin_ns((int)cpus), 1000000, "as many ranks as CPUs still poll long");
  cr_expect_eq(weft_spin_ns((int)cpus + 1), 20000, "oversubscribed ranks poll 20 us");
  cr_expect_eq(weft_spin_ns(0), 20000, "unknown sharers poll briefly");
  setenv("WEFT_SPIN_NS", "0", 1);
  weft_env_reset();
  cr_expect_eq(weft_spin_ns(1), 0, "a set value wins");
  setenv("WEFT_SPIN_NS", "5000", 1);
  weft_env_reset();
  cr_expect_eq(weft_spin_ns((int)cpus + 1), 5000);
  unsetenv("WEFT_SPIN_NS");
  weft_env_reset();
}

Test(env, garbage_int_falls_back_to_default_with_warning, .timeout = 10) {
  setenv("WEFT_SLOTS", "eight", 1);
  weft_env_reset();
  cr_assert_eq(weft_env_WEFT_SLOTS(), 16);
  cr_assert_str_eq(weft_debug_last_error(),
                   "WEFT_SLOTS='eight' is not an integer; using default 16");
  setenv("WEFT_TIMEOUT", "30s", 1);
  weft_env_reset();
  cr_assert_eq(weft_env_WEFT_TIMEOUT(), 300);
  cr_assert(strstr(weft_debug_last_error(), "WEFT_TIMEOUT='30s'") != NULL);
}

Test(env, string_knobs, .timeout = 10) {
  unsetenv("NCCL_COMM_ID");
  unsetenv("NCCL_DEBUG_SUBSYS");
  weft_env_reset();
  cr_assert_null(weft_env_NCCL_COMM_ID());
  cr_assert_str_eq(weft_env_NCCL_DEBUG_SUBSYS(), "INIT,BOOTSTRAP,ENV", "table default");

  setenv("NCCL_COMM_ID", "127.0.0.1:4000", 1);
  weft_env_reset();
  const char *first = weft_env_NCCL_COMM_ID();
  cr_assert_str_eq(first, "127.0.0.1:4000");
  setenv("NCCL_COMM_ID", "127.0.0.1:5000", 1);
  cr_assert_eq(weft_env_NCCL_COMM_ID(), first, "cached pointer");
  weft_env_reset();
  cr_assert_str_eq(weft_env_NCCL_COMM_ID(), "127.0.0.1:5000");
  cr_assert_str_eq(first, "127.0.0.1:4000", "an old value stays valid after reset");

  setenv("NCCL_COMM_ID", "", 1);
  weft_env_reset();
  cr_assert_null(weft_env_NCCL_COMM_ID(), "empty string counts as unset");
}

static void *read_knobs(void *arg) {
  int64_t *out = arg;
  for (int i = 0; i < 1000; i++) out[0] += weft_env_WEFT_SLOT_BYTES() == 65536;
  out[1] = (int64_t)(intptr_t)weft_env_WEFT_RANK();
  return NULL;
}

Test(env, concurrent_first_reads_agree, .timeout = 10) {
  setenv("WEFT_SLOT_BYTES", "64K", 1);
  setenv("WEFT_RANK", "3", 1);
  weft_env_reset();
  enum { N = 8 };
  pthread_t t[N];
  int64_t res[N][2];
  memset(res, 0, sizeof(res));
  for (int i = 0; i < N; i++) cr_assert_eq(pthread_create(&t[i], NULL, read_knobs, res[i]), 0);
  for (int i = 0; i < N; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < N; i++) {
    cr_expect_eq(res[i][0], 1000, "thread %d saw a wrong value", i);
    cr_expect_eq(res[i][1], res[0][1], "threads got different cached strings");
  }
  cr_assert_str_eq((const char *)(intptr_t)res[0][1], "3");
}

Test(env, set_by_environment_is_logged_once, .timeout = 10) {
  char dir[] = "/tmp/weft-env-log-XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  char path[128];
  snprintf(path, sizeof(path), "%s/log", dir);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "ENV", 1);
  setenv("NCCL_DEBUG_FILE", path, 1);
  setenv("WEFT_TIMEOUT", "7", 1);
  setenv("WEFT_SLOTS", "16", 1);  // equal to the default: not logged
  setenv("WEFT_COMM_SECRET", "hunter2", 1);
  weft_env_reset();
  cr_assert_eq(weft_env_WEFT_TIMEOUT(), 7);
  cr_assert_eq(weft_env_WEFT_TIMEOUT(), 7);
  cr_assert_eq(weft_env_WEFT_SLOTS(), 16);
  cr_assert_str_eq(weft_env_WEFT_COMM_SECRET(), "hunter2");

  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "log file %s was not created", path);
  char line[512];
  int timeout_lines = 0, slots_lines = 0, secret_lines = 0;
  while (fgets(line, sizeof(line), f)) {
    cr_expect(strstr(line, "hunter2") == NULL, "secret leaked into the log: %s", line);
    if (strstr(line, "NCCL INFO WEFT_TIMEOUT set by environment to 7\n")) timeout_lines++;
    if (strstr(line, "WEFT_SLOTS")) slots_lines++;
    if (strstr(line, "WEFT_COMM_SECRET set by environment")) secret_lines++;
  }
  fclose(f);
  unlink(path);
  rmdir(dir);
  cr_assert_eq(timeout_lines, 1);
  cr_assert_eq(slots_lines, 0);
  cr_assert_eq(secret_lines, 1);
}

static void print_markdown(void) { weft_env_print_markdown(); }

Test(env, markdown_lists_every_knob_in_table_order, .timeout = 10) {
  char *md = capture_stdout(print_markdown);
  cr_assert(strncmp(md, "# Environment variables\n", 24) == 0, "title: %.40s", md);
  cr_assert_not_null(strstr(md, "| Variable | Default | Meaning |\n|---|---|---|\n"));
  const char *pos = md;
  static const char *names[] = {
#define WEFT_ENV_INT(name, def, doc) #name,
#define WEFT_ENV_STR(name, def, doc) #name,
#include "env_table.h"
#undef WEFT_ENV_INT
#undef WEFT_ENV_STR
  };
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    char cell[96];
    snprintf(cell, sizeof(cell), "\n| `%s` | ", names[i]);
    const char *hit = strstr(pos, cell);
    cr_assert_not_null(hit, "%s missing or out of order", names[i]);
    pos = hit + 1;
  }
  cr_assert_not_null(strstr(md, "| `WEFT_TIMEOUT` | `300` | "));
  cr_assert_not_null(strstr(md, "| `NCCL_DEBUG_SUBSYS` | `INIT,BOOTSTRAP,ENV` | "));
  cr_assert_not_null(strstr(md, "| `NCCL_COMM_ID` | (unset) | "));
  free(md);
}

// A renamed knob still reads its old name when the new one is unset, says
// so in the log, and the new name wins when both are set.
Test(env, old_name_is_an_alias) {
  char dir[] = "/tmp/weft-env-alias-XXXXXX", path[64];
  cr_assert(mkdtemp(dir) != NULL);
  snprintf(path, sizeof(path), "%s/log", dir);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "ENV", 1);
  setenv("NCCL_DEBUG_FILE", path, 1);
  unsetenv("WEFT_SLOTS");
  setenv("WEFT_SHM_SLOTS", "8", 1);
  unsetenv("WEFT_SLOT_BYTES");
  setenv("WEFT_SHM_SLOT_BYTES", "128K", 1);
  weft_env_reset();
  cr_assert_eq(weft_env_WEFT_SLOTS(), 8);
  cr_assert_eq(weft_env_WEFT_SLOT_BYTES(), 131072);
  cr_assert_eq(weft_env_knob_find("WEFT_SHM_SLOTS"), weft_env_knob_find("WEFT_SLOTS"));
  cr_assert_str_eq(weft_env_knob_origin(weft_env_knob_find("WEFT_SLOTS")), "environment (as WEFT_SHM_SLOTS)");

  FILE *f = fopen(path, "r");  // read before the reset below starts the log again
  cr_assert_not_null(f);
  char line[512];
  int alias_lines = 0;
  while (fgets(line, sizeof(line), f))
    if (strstr(line, "NCCL INFO WEFT_SLOTS set by environment (as WEFT_SHM_SLOTS) to 8\n")) alias_lines++;
  fclose(f);

  setenv("WEFT_SLOTS", "4", 1);  // the new name wins
  weft_env_reset();
  cr_assert_eq(weft_env_WEFT_SLOTS(), 4);
  cr_assert_str_eq(weft_env_knob_origin(weft_env_knob_find("WEFT_SLOTS")), "environment");
  unlink(path);
  rmdir(dir);
  cr_assert_eq(alias_lines, 1);
}
