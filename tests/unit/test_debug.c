/*
 * test_debug.c — NCCL-compatible logging: level and subsystem parsing, the
 * "host:pid:tid [rank] NCCL LEVEL msg" line format, NCCL_DEBUG_FILE with
 * %h/%p and its stdout fallback, the last-error record, and whole lines from
 * concurrent threads.
 *
 * Each Criterion test runs in its own process, so the environment and the
 * logger's state start fresh in every test.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "debug.h"
#include "env.h"

static char dir[64];

static void make_dir(void) {
  snprintf(dir, sizeof(dir), "/tmp/weft-debug-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void) {
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  rewind(f);
  char *text = calloc((size_t)size + 1, 1);
  cr_assert_not_null(text);
  cr_assert_eq(fread(text, 1, (size_t)size, f), (size_t)size);
  fclose(f);
  return text;
}

// Log into dir/log.%p with the given level and subsystems; returns the path.
static const char *log_to_file(const char *level, const char *subsys, char *path, size_t len) {
  char pattern[128];
  snprintf(pattern, sizeof(pattern), "%s/log.%%p", dir);
  snprintf(path, len, "%s/log.%d", dir, (int)getpid());
  // A process's first knob read looks for an env plugin and logs what it
  // found (INIT, ENV): let that happen before this test's log starts.
  (void)weft_env_WEFT_TIMEOUT();
  weft_env_reset();  // settings are re-read lazily, after the setenvs below
  setenv("NCCL_DEBUG", level, 1);
  if (subsys) setenv("NCCL_DEBUG_SUBSYS", subsys, 1);
  else unsetenv("NCCL_DEBUG_SUBSYS");
  setenv("NCCL_DEBUG_FILE", pattern, 1);
  return path;
}

static void short_host(char *out, size_t len) {
  char name[256];
  cr_assert_eq(gethostname(name, sizeof(name)), 0);
  name[sizeof(name) - 1] = '\0';
  name[strcspn(name, ".")] = '\0';
  snprintf(out, len, "%.63s", name);  // the logger keeps 63 characters
}

// Run fn with stdout sent to a temporary file; return what it printed.
static char *capture_stdout(void (*fn)(void)) {
  char path[] = "/tmp/weft-debug-out-XXXXXX";
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  fflush(stdout);
  int saved = dup(1);
  cr_assert(dup2(fd, 1) == 1);
  fn();
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  close(fd);
  char *text = read_file(path);
  unlink(path);
  return text;
}

Test(debug, info_and_warn_lines_have_nccl_prefix, .init = make_dir, .fini = remove_dir,
     .timeout = 10) {
  char path[128];
  log_to_file("INFO", "ALL", path, sizeof(path));
  weft_debug_set_rank(3);
  INFO(WEFT_LOG_INIT, "hello %d", 42);
  WARN("bad thing %s", "x");
  weft_debug_set_rank(-1);
  INFO(WEFT_LOG_COLL, "unranked\n");  // a trailing newline is not doubled

  char host[128], expect[1024];
  short_host(host, sizeof(host));
  int pid = (int)getpid();
  long tid = (long)syscall(SYS_gettid);
  snprintf(expect, sizeof(expect),
           "%s:%d:%ld [3] NCCL INFO hello 42\n"
           "%s:%d:%ld [3] NCCL WARN bad thing x\n"
           "%s:%d:%ld [-] NCCL INFO unranked\n",
           host, pid, tid, host, pid, tid, host, pid, tid);
  char *text = read_file(path);
  cr_assert_str_eq(text, expect);
  free(text);
}

Test(debug, subsystem_filter, .init = make_dir, .fini = remove_dir, .timeout = 10) {
  char path[128];
  log_to_file("INFO", "^INIT", path, sizeof(path));
  INFO(WEFT_LOG_INIT, "init line");
  INFO(WEFT_LOG_NET, "net line");
  INFO(WEFT_LOG_INIT | WEFT_LOG_SHM, "init or shm line");
  WARN("warnings ignore the filter");
  cr_assert_eq(weft_debug_mask, ~(uint64_t)WEFT_LOG_INIT);
  char *text = read_file(path);
  cr_expect_null(strstr(text, "init line"), "^INIT must suppress INIT lines:\n%s", text);
  cr_expect_not_null(strstr(text, "NCCL INFO net line\n"));
  cr_expect_not_null(strstr(text, "NCCL INFO init or shm line\n"));
  cr_expect_not_null(strstr(text, "NCCL WARN warnings ignore the filter\n"));
  free(text);
}

Test(debug, subsystem_mask_parsing, .timeout = 10) {
  static const struct {
    const char *text;  // NULL: unset
    uint64_t mask;
  } cases[] = {
      {NULL, WEFT_LOG_INIT | WEFT_LOG_BOOTSTRAP | WEFT_LOG_ENV},
      {"", WEFT_LOG_INIT | WEFT_LOG_BOOTSTRAP | WEFT_LOG_ENV},
      {"ALL", ~(uint64_t)0},
      {"^ALL", 0},
      {"net, coll", WEFT_LOG_NET | WEFT_LOG_COLL},
      {"INIT,NET", WEFT_LOG_INIT | WEFT_LOG_NET},
      {"^INIT,NET", ~(uint64_t)(WEFT_LOG_INIT | WEFT_LOG_NET)},
      {"TUNING,BOGUS", WEFT_LOG_TUNING},
      {"RAS,PROFILE,REG,NVLS,PROXY,CALL,ALLOC,GRAPH,SHM,P2P",
       WEFT_LOG_RAS | WEFT_LOG_PROFILE | WEFT_LOG_REG | WEFT_LOG_NVLS | WEFT_LOG_PROXY |
           WEFT_LOG_CALL | WEFT_LOG_ALLOC | WEFT_LOG_GRAPH | WEFT_LOG_SHM | WEFT_LOG_P2P},
  };
  unsetenv("NCCL_DEBUG");
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    if (cases[i].text) setenv("NCCL_DEBUG_SUBSYS", cases[i].text, 1);
    else unsetenv("NCCL_DEBUG_SUBSYS");
    weft_env_reset();
    weft_debug_init();
    cr_expect_eq(weft_debug_mask, cases[i].mask, "NCCL_DEBUG_SUBSYS=%s -> %#llx",
                 cases[i].text ? cases[i].text : "(unset)", (unsigned long long)weft_debug_mask);
  }
}

Test(debug, level_parsing, .timeout = 10) {
  static const struct {
    const char *text;
    int level;
  } cases[] = {
      {NULL, WEFT_LEVEL_NONE},        {"", WEFT_LEVEL_NONE},
      {"VERSION", WEFT_LEVEL_VERSION}, {"warn", WEFT_LEVEL_WARN},
      {"Info", WEFT_LEVEL_INFO},      {"ABORT", WEFT_LEVEL_ABORT},
      {"trace", WEFT_LEVEL_TRACE},    {"bogus", WEFT_LEVEL_WARN},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    if (cases[i].text) setenv("NCCL_DEBUG", cases[i].text, 1);
    else unsetenv("NCCL_DEBUG");
    weft_env_reset();
    weft_debug_init();
    cr_expect_eq(weft_debug_level, cases[i].level, "NCCL_DEBUG=%s -> %d",
                 cases[i].text ? cases[i].text : "(unset)", weft_debug_level);
  }
  unsetenv("NCCL_DEBUG");
  weft_env_reset();
  weft_debug_init();
  cr_assert(!WEFT_LOG_ENABLED(WEFT_LEVEL_INFO, WEFT_LOG_INIT), "INFO must be off by default");
}

Test(debug, trace_lines_name_file_and_line, .init = make_dir, .fini = remove_dir,
     .timeout = 10) {
  char path[128];
  log_to_file("TRACE", "COLL", path, sizeof(path));
  int line = __LINE__ + 1;
  TRACE(WEFT_LOG_COLL, "traced %s", "step");
  TRACE(WEFT_LOG_NET, "filtered out");
  char *text = read_file(path);
  char expect[128];
  snprintf(expect, sizeof(expect), " NCCL TRACE test_debug.c:%d traced step\n", line);
  cr_expect_not_null(strstr(text, expect), "missing '%s' in:\n%s", expect, text);
  cr_expect_null(strstr(text, "filtered out"));
  free(text);
}

static void warn_twice_quietly(void) {
  unsetenv("NCCL_DEBUG");
  weft_env_reset();
  WARN("first %d", 1);
  WARN("second %s", "two");
  INFO(WEFT_LOG_INIT, "not printed");
}

Test(debug, last_error_is_kept_even_when_not_printed, .timeout = 10) {
  cr_assert_str_eq(weft_debug_last_error(), "");
  char *out = capture_stdout(warn_twice_quietly);
  cr_expect_str_eq(out, "", "nothing may be printed without NCCL_DEBUG: '%s'", out);
  free(out);
  cr_assert_str_eq(weft_debug_last_error(), "second two");

  char big[3000];
  memset(big, 'z', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  WARN("%s", big);
  const char *err = weft_debug_last_error();
  cr_assert_eq(strlen(err), 1023, "last error is capped at 1 KiB");
  cr_assert_eq(err[0], 'z');
}

static void *warn_from_thread(void *arg) {
  (void)arg;
  WARN("from thread");
  return strdup(weft_debug_last_error());
}

Test(debug, last_error_snapshot_is_per_thread, .timeout = 10) {
  WARN("from main");
  const char *mine = weft_debug_last_error();
  cr_assert_str_eq(mine, "from main");
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, warn_from_thread, NULL), 0);
  char *theirs = NULL;
  pthread_join(t, (void **)&theirs);
  cr_assert_str_eq(theirs, "from thread");
  free(theirs);
  cr_assert_str_eq(mine, "from main", "a snapshot must not change under the caller");
  cr_assert_str_eq(weft_debug_last_error(), "from thread", "a new call sees the latest");
}

enum { THREADS = 8, LINES = 300 };

static void *log_lines(void *arg) {
  int id = (int)(intptr_t)arg;
  weft_debug_set_rank(id);
  char pad[301];
  memset(pad, 'a' + id, 300);
  pad[300] = '\0';
  for (int i = 0; i < LINES; i++) INFO(WEFT_LOG_COLL, "thread %d line %d %s end", id, i, pad);
  return NULL;
}

Test(debug, lines_from_threads_never_interleave, .init = make_dir, .fini = remove_dir,
     .timeout = 30) {
  char path[128];
  log_to_file("INFO", "COLL", path, sizeof(path));
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++)
    cr_assert_eq(pthread_create(&t[i], NULL, log_lines, (void *)(intptr_t)i), 0);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);

  regex_t re;
  cr_assert_eq(regcomp(&re,
                       "^[^: ]+:[0-9]+:[0-9]+ \\[([0-9])\\] NCCL INFO thread ([0-9]) line "
                       "([0-9]+) ([a-z]{300}) end$",
                       REG_EXTENDED),
               0);
  char *text = read_file(path);
  int count[THREADS] = {0};
  int total = 0;
  for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save)) {
    regmatch_t m[5];
    cr_assert_eq(regexec(&re, line, 5, m, 0), 0, "malformed line: %.120s", line);
    int rank = line[m[1].rm_so] - '0', id = line[m[2].rm_so] - '0';
    cr_assert_eq(rank, id, "rank prefix belongs to another thread");
    cr_assert_eq(line[m[4].rm_so], 'a' + id, "payload from another thread");
    cr_assert_eq(line[m[4].rm_eo - 1], 'a' + id);
    count[id]++;
    total++;
  }
  regfree(&re);
  free(text);
  cr_assert_eq(total, THREADS * LINES);
  for (int i = 0; i < THREADS; i++) cr_expect_eq(count[i], LINES, "thread %d", i);
}

static void log_to_unopenable_file(void) {
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT", 1);
  setenv("NCCL_DEBUG_FILE", "/nonexistent-weft-dir/log", 1);
  weft_env_reset();
  INFO(WEFT_LOG_INIT, "still logged");
}

Test(debug, unopenable_file_falls_back_to_stdout, .timeout = 10) {
  char *out = capture_stdout(log_to_unopenable_file);
  cr_expect_not_null(strstr(out, "NCCL WARN NCCL_DEBUG_FILE '/nonexistent-weft-dir/log' cannot be "
                                 "opened"),
                     "%s", out);
  cr_expect_not_null(strstr(out, "NCCL INFO still logged\n"), "%s", out);
  cr_expect_str_eq(weft_debug_last_error(), "", "a settings warning is not the last error");
  free(out);
}

Test(debug, file_name_expands_host_and_pid, .init = make_dir, .fini = remove_dir,
     .timeout = 10) {
  char pattern[128], path[512], host[128];
  short_host(host, sizeof(host));
  snprintf(pattern, sizeof(pattern), "%s/%%h-%%p-100%%%%.log", dir);
  snprintf(path, sizeof(path), "%s/%s-%d-100%%.log", dir, host, (int)getpid());
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", pattern, 1);
  weft_env_reset();
  WARN("into the expanded file");
  char *text = read_file(path);
  cr_assert_not_null(strstr(text, "NCCL WARN into the expanded file\n"), "%s", text);
  free(text);
}

Test(debug, long_messages_are_written_whole, .init = make_dir, .fini = remove_dir,
     .timeout = 10) {
  char path[128];
  log_to_file("INFO", "ALL", path, sizeof(path));
  char *big = malloc(10001);
  cr_assert_not_null(big);
  memset(big, 'q', 10000);
  big[10000] = '\0';
  INFO(WEFT_LOG_INIT, "<%s>", big);
  char *text = read_file(path);
  char *open = strchr(text, '<');
  cr_assert_not_null(open);
  cr_assert_eq(strspn(open + 1, "q"), 10000);
  cr_assert_str_eq(open + 1 + 10000, ">\n");
  free(text);
  free(big);
}

static volatile int stop_logging;

static void *log_until_stopped(void *arg) {
  (void)arg;
  while (!stop_logging) INFO(WEFT_LOG_COLL, "busy");
  return NULL;
}

Test(debug, fork_while_other_threads_log, .init = make_dir, .fini = remove_dir, .timeout = 30) {
  char path[128];
  log_to_file("INFO", "COLL", path, sizeof(path));
  INFO(WEFT_LOG_COLL, "settled");
  pthread_t t[2];
  for (int i = 0; i < 2; i++) cr_assert_eq(pthread_create(&t[i], NULL, log_until_stopped, NULL), 0);
  for (int i = 0; i < 50; i++) {
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {  // the child must be able to log and exit, never hang
      INFO(WEFT_LOG_COLL, "child %d", i);
      WARN("child warning");
      _exit(strcmp(weft_debug_last_error(), "child warning") == 0 ? 0 : 3);
    }
    int status = 0, waited_ms = 0;
    while (waitpid(pid, &status, WNOHANG) == 0 && waited_ms < 5000) usleep(1000), waited_ms++;
    if (waited_ms >= 5000) {  // hung on a lock inherited from a logging thread
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      cr_assert_fail("child %d hung while logging after fork", i);
    }
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d status %#x", i, status);
  }
  stop_logging = 1;
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  char *text = read_file(path);
  cr_assert_not_null(strstr(text, "NCCL INFO child 49\n"));
  free(text);
}
