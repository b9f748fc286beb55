/*
 * test_env_source.c — the seam between base's knobs and an env plugin
 * (env_source.h), with a loader written here in place of plugins/env/'s:
 * the first knob read runs it, once, even when eight threads read first
 * together; every knob then comes from its source (the logging knobs
 * included), asked once per knob, also through the parameter API, while
 * NCCL_ENV_PLUGIN and NCCL_CONF_FILE do not; the loader's own log lines
 * are held and written under the source's NCCL_DEBUG; what the loader
 * reads is provisional; a loader that returns NULL leaves the built-in
 * source; retiring the source goes back to it.
 *
 * Criterion runs each test in its own process, and nothing reads a knob
 * before the test body sets the loader.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "debug.h"
#include "env.h"
#include "env_source.h"
#include "nccl.h"

static char log_file[64];
static int loads, lookups_timeout, lookups_total, loader_saw_timeout;

// The fake plugin's values: the logging knobs, WEFT_TIMEOUT, NCCL_ALGO and
// (which it must never be asked) NCCL_ENV_PLUGIN.
static const char *fake_get(const char *name) {
  __atomic_add_fetch(&lookups_total, 1, __ATOMIC_RELAXED);
  if (strcmp(name, "WEFT_TIMEOUT") == 0) {
    __atomic_add_fetch(&lookups_timeout, 1, __ATOMIC_RELAXED);
    return "77";
  }
  if (strcmp(name, "NCCL_DEBUG") == 0) return "INFO";
  if (strcmp(name, "NCCL_DEBUG_SUBSYS") == 0) return "INIT,ENV";
  if (strcmp(name, "NCCL_DEBUG_FILE") == 0) return log_file;
  if (strcmp(name, "NCCL_ALGO") == 0) return "tree";
  if (strcmp(name, "NCCL_ENV_PLUGIN") == 0) return "asked-the-plugin";
  return getenv(name);
}

static const weft_env_source_t fake = {.label = "env plugin 'fake'", .get = fake_get};

static const weft_env_source_t *fake_loader(void) {
  __atomic_add_fetch(&loads, 1, __ATOMIC_RELAXED);
  loader_saw_timeout = (int)weft_env_WEFT_TIMEOUT();  // the built-in source's, not kept
  INFO(WEFT_LOG_ENV, "fake loader: loading");
  usleep(20 * 1000);  // long enough for other threads to arrive and wait
  return &fake;
}

static const weft_env_source_t *null_loader(void) {
  __atomic_add_fetch(&loads, 1, __ATOMIC_RELAXED);
  INFO(WEFT_LOG_ENV, "null loader: nothing to load");
  return NULL;
}

static void setup(void) {
  snprintf(log_file, sizeof(log_file), "/tmp/weft-envsrc-%d.log", (int)getpid());
  unlink(log_file);
  const char *clear[] = {"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "NCCL_ALGO", "NCCL_ENV_PLUGIN",
                         "NCCL_CONF_FILE"};
  for (size_t i = 0; i < sizeof(clear) / sizeof(clear[0]); i++) unsetenv(clear[i]);
  setenv("HOME", "/nonexistent-weft-home", 1);  // no ~/.nccl.conf
  setenv("WEFT_TIMEOUT", "5", 1);
}

static void teardown(void) { unlink(log_file); }

static int log_count(const char *needle) {
  FILE *f = fopen(log_file, "r");
  if (f == NULL) return 0;
  char line[1024];
  int n = 0;
  while (fgets(line, sizeof(line), f) != NULL) n += strstr(line, needle) != NULL;
  fclose(f);
  return n;
}

TestSuite(env_source, .init = setup, .fini = teardown, .timeout = 10);

Test(env_source, the_first_read_sees_the_source) {
  weft_env_source_set_loader(fake_loader);
  cr_expect_eq(weft_env_WEFT_TIMEOUT(), 77, "the first knob read already sees the source");
  cr_expect_eq(loads, 1);
  cr_expect_eq(loader_saw_timeout, 5, "what the loader read came from the built-in source");
  cr_expect_str_eq(weft_env_NCCL_ALGO(), "tree");
  cr_expect_str_eq(weft_env_knob_origin(weft_env_knob_find("WEFT_TIMEOUT")), "env plugin 'fake'");
  cr_expect_null(weft_env_NCCL_ENV_PLUGIN(), "NCCL_ENV_PLUGIN is never asked of the plugin");
  for (int i = 0; i < 3; i++) cr_expect_eq(weft_env_WEFT_TIMEOUT(), 77);
  cr_expect_eq(lookups_timeout, 1, "asked once per knob, the loader's provisional read not counted");
  // The parameter API reads the same cache.
  ncclParamHandle_t h;
  int64_t v = 0;
  cr_assert_eq(ncclParamBind(&h, "WEFT_TIMEOUT"), ncclSuccess);
  cr_assert_eq(ncclParamGetI64(h, &v), ncclSuccess);
  cr_expect_eq(v, 77);
  const char *s = NULL;
  cr_assert_eq(ncclParamBind(&h, "NCCL_DEBUG"), ncclSuccess);
  cr_assert_eq(ncclParamGetStr(h, &s), ncclSuccess);
  cr_expect_str_eq(s, "INFO");
}

Test(env_source, the_loaders_log_lines_follow_the_sources_settings) {
  weft_env_source_set_loader(fake_loader);
  WARN("a first line, which reads NCCL_DEBUG");  // NCCL_DEBUG and NCCL_DEBUG_FILE only the source sets
  cr_expect_eq(log_count("NCCL INFO fake loader: loading"), 1, "held, then written to the source's file");
  cr_expect_eq(log_count("NCCL WARN a first line"), 1);
  cr_expect_eq(log_count("WEFT_TIMEOUT set by"), 0, "not yet read");
  cr_expect_eq(weft_env_WEFT_TIMEOUT(), 77);
  cr_expect_eq(log_count("WEFT_TIMEOUT set by env plugin 'fake' to 77"), 1);
}

static void *read_first(void *arg) {
  int *out = arg;
  out[0] = (int)weft_env_WEFT_TIMEOUT();
  out[1] = strcmp(weft_env_NCCL_ALGO(), "tree") == 0;
  return NULL;
}

Test(env_source, concurrent_first_reads_wait_for_one_load) {
  weft_env_source_set_loader(fake_loader);
  enum { N = 8 };
  pthread_t t[N];
  int res[N][2];
  memset(res, 0, sizeof(res));
  for (int i = 0; i < N; i++) cr_assert_eq(pthread_create(&t[i], NULL, read_first, res[i]), 0);
  for (int i = 0; i < N; i++) pthread_join(t[i], NULL);
  cr_expect_eq(loads, 1, "loaded once");
  for (int i = 0; i < N; i++) {
    cr_expect_eq(res[i][0], 77, "thread %d read %d", i, res[i][0]);
    cr_expect(res[i][1], "thread %d", i);
  }
  cr_expect_eq(lookups_timeout, 1);
}

Test(env_source, a_loader_returning_null_leaves_the_builtin_source) {
  weft_env_source_set_loader(null_loader);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "ENV", 1);
  setenv("NCCL_DEBUG_FILE", log_file, 1);
  cr_expect_eq(weft_env_WEFT_TIMEOUT(), 5);
  cr_expect_eq(loads, 1);
  cr_expect_str_eq(weft_env_knob_origin(weft_env_knob_find("WEFT_TIMEOUT")), "environment");
  cr_expect_eq(log_count("null loader: nothing to load"), 1);
  cr_expect_eq(lookups_total, 0);
}

Test(env_source, retiring_goes_back_to_the_builtin_source) {
  weft_env_source_set_loader(fake_loader);
  cr_expect_eq(weft_env_WEFT_TIMEOUT(), 77);
  weft_env_source_retire();
  int before = lookups_total;
  cr_expect_eq(weft_env_WEFT_TIMEOUT(), 77, "a value read stays");
  cr_expect_null(weft_env_NCCL_ALGO(), "a knob read later comes from the environment");
  weft_env_reset();
  cr_expect_eq(weft_env_WEFT_TIMEOUT(), 5);
  cr_expect_eq(lookups_total, before, "the retired source is not asked again");
}
