/*
 * test_env_plugin.c — NCCL env plugins loaded into weft, each case in a
 * program of its own (build/tests/progs/env_probe) started with the case's
 * environment, so the plugin is loaded once per process, at the program's
 * first knob read, as in any program.
 *
 * The example plugin (plugins/env/example/) gives the values of a file
 * before the environment's. Cases: its values reach weft's knobs
 * (NCCL_DEBUG and the other logging knobs, a WEFT_ knob, a string knob,
 * read through ncclParamGet*) and a knob the file lacks still comes from
 * the environment; its init's log line arrives through the logger; it is
 * asked at most once per knob and finalized at exit; the v1-only build
 * loads at v1; a failing init, a missing library and "none" leave the
 * built-in source with NCCL's messages; the default libnccl-env.so and a
 * plain name are found; NCCL_ENV_PLUGIN may come from NCCL_CONF_FILE.
 * Logs go to files in a scratch folder the test removes.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"  // NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH: the version init must get

#define STR_(x) #x
#define STR(x) STR_(x)

static char dir[64], example[PATH_MAX], v1only[PATH_MAX], probe[PATH_MAX], logs[128];

static void build_path(char *out, const char *rel) {
  const char *b = getenv("WEFT_BUILD_DIR");
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/%s", b != NULL ? b : "build", rel);
  cr_assert_not_null(realpath(path, out), "no %s", path);
}

static void setup(void) {
  snprintf(dir, sizeof(dir), "/tmp/weft-envplug-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  build_path(example, "lib/libnccl-env-example.so");
  build_path(v1only, "tests/plugins/libnccl-env-v1only.so");
  build_path(probe, "tests/progs/env_probe");
  // Nothing of the machine's or the caller's settings: HOME is the scratch
  // folder, so no ~/.nccl.conf is read.
  const char *clear[] = {"NCCL_ENV_PLUGIN", "NCCL_CONF_FILE", "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE",
                         "WEFT_ENV_EXAMPLE_FILE", "WEFT_TIMEOUT", "WEFT_SLOTS", "NCCL_ALGO", "LD_LIBRARY_PATH"};
  for (size_t i = 0; i < sizeof(clear) / sizeof(clear[0]); i++) unsetenv(clear[i]);
  setenv("HOME", dir, 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  snprintf(logs, sizeof(logs), "%s/log.%%p", dir);
}

static void teardown(void) {
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  cr_expect_eq(system(cmd), 0);
}

static void write_file(const char *name, const char *text, char *path_out) {
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
  if (path_out != NULL) snprintf(path_out, PATH_MAX, "%s", path);
}

// The environment's logging: INFO of INIT and ENV into the scratch folder.
static void log_from_environment(void) {
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT,ENV", 1);
  setenv("NCCL_DEBUG_FILE", logs, 1);
}

// A file for the example plugin that sets the logging knobs (nothing in
// the environment does), WEFT_TIMEOUT and NCCL_ALGO.
static void example_file(void) {
  char text[512], path[PATH_MAX];
  snprintf(text, sizeof(text),
           "# the example plugin's values\n"
           "NCCL_DEBUG=INFO\n"
           "NCCL_DEBUG_SUBSYS=INIT,ENV\n"
           "NCCL_DEBUG_FILE=%s\n"
           "WEFT_TIMEOUT=77\n"
           "NCCL_ALGO=ring\n",
           logs);
  write_file("values", text, path);
  setenv("WEFT_ENV_EXAMPLE_FILE", path, 1);
}

// Runs env_probe with the keys; its output goes to the scratch folder's
// "out". Returns its exit status (-1: killed after 60 s).
static int run_probe(void) {
  char out[PATH_MAX];
  snprintf(out, sizeof(out), "%s/out", dir);
  pid_t pid = fork();
  cr_assert(pid >= 0);
  if (pid == 0) {
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0) _exit(126);
    execl(probe, probe, "i:WEFT_TIMEOUT", "i:WEFT_SLOTS", "s:NCCL_DEBUG", "s:NCCL_ALGO", (char *)NULL);
    _exit(127);
  }
  int status = 0;
  for (int waited_ms = 0;; waited_ms += 10) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (waited_ms >= 60000) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The probe's output ("KEY=VALUE" lines, "allreduce ok").
static int out_has(const char *line) {
  char path[PATH_MAX], buf[1024];
  snprintf(path, sizeof(path), "%s/out", dir);
  FILE *f = fopen(path, "r");
  if (f == NULL) return 0;
  int found = 0;
  while (!found && fgets(buf, sizeof(buf), f) != NULL) {
    buf[strcspn(buf, "\n")] = '\0';
    found = strcmp(buf, line) == 0;
  }
  fclose(f);
  return found;
}

// Lines of the scratch folder's log files that contain `text`; the last
// one's text after `text` goes to `rest` (may be NULL).
static int log_count(const char *text, char *rest, size_t restlen) {
  char pattern[128];
  snprintf(pattern, sizeof(pattern), "%s/log.*", dir);
  glob_t g;
  if (glob(pattern, 0, NULL, &g) != 0) return 0;
  int n = 0;
  char line[2048];
  for (size_t i = 0; i < g.gl_pathc; i++) {
    FILE *f = fopen(g.gl_pathv[i], "r");
    if (f == NULL) continue;
    while (fgets(line, sizeof(line), f) != NULL) {
      char *at = strstr(line, text);
      if (at == NULL) continue;
      n++;
      if (rest != NULL) snprintf(rest, restlen, "%s", at + strlen(text));
    }
    fclose(f);
  }
  globfree(&g);
  return n;
}

static void dump_output(void) {
  char cmd[256];
  snprintf(cmd, sizeof(cmd), "cat %s/out %s/log.* 2>/dev/null | head -40 >&2", dir, dir);
  cr_expect_eq(system(cmd), 0);
}

TestSuite(env_plugin, .init = setup, .fini = teardown, .timeout = 90);

Test(env_plugin, v2_values_reach_the_knobs_and_the_parameter_api) {
  example_file();
  setenv("NCCL_ENV_PLUGIN", example, 1);
  setenv("WEFT_TIMEOUT", "5", 1);     // the file's 77 wins: the plugin says so
  setenv("WEFT_SLOTS", "8", 1);  // not in the file: the environment's, through the plugin
  int rc = run_probe();
  if (rc != 0) dump_output();
  cr_assert_eq(rc, 0);
  cr_expect(out_has("WEFT_TIMEOUT=77"));
  cr_expect(out_has("WEFT_SLOTS=8"));
  cr_expect(out_has("NCCL_DEBUG=INFO"));
  cr_expect(out_has("NCCL_ALGO=ring"));
  cr_expect(out_has("allreduce ok"));
  // NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE came from the plugin alone.
  cr_expect_eq(log_count("env plugin 'weft-env-example' loaded from ", NULL, 0), 1);
  cr_expect_eq(log_count("(ncclEnvPlugin_v2, version 2)", NULL, 0), 1);
  cr_expect_eq(log_count("env example: 5 values from ", NULL, 0), 1, "init's line, through the logger, held until the log settings were known");
  cr_expect_eq(log_count("for NCCL " STR(NCCL_MAJOR) "." STR(NCCL_MINOR) "." STR(NCCL_PATCH), NULL, 0), 1,
               "init got the version of include/nccl.h");
  cr_expect_eq(log_count("WEFT_TIMEOUT set by env plugin 'weft-env-example' to 77", NULL, 0), 1);
  cr_expect_eq(log_count("NCCL_ALGO set by env plugin 'weft-env-example' to ring", NULL, 0), 1);
  // Finalized at exit, after at most one lookup per knob.
  char rest[256] = "";
  cr_expect_eq(log_count("env example: finalized after ", rest, sizeof(rest)), 1);
  cr_expect_eq(log_count("env plugin 'weft-env-example' finalized", NULL, 0), 1);
  int lookups = atoi(rest);
  cr_expect(lookups >= 4 && lookups <= 57, "%d lookups: more than one per knob (59 knobs, 2 never asked)", lookups);
}

Test(env_plugin, v1_loads_without_a_logger) {
  example_file();
  setenv("NCCL_ENV_PLUGIN", v1only, 1);
  int rc = run_probe();
  if (rc != 0) dump_output();
  cr_assert_eq(rc, 0);
  cr_expect(out_has("WEFT_TIMEOUT=77"));
  cr_expect(out_has("NCCL_DEBUG=INFO"));
  cr_expect_eq(log_count("env plugin 'weft-env-example-v1' loaded from ", NULL, 0), 1);
  cr_expect_eq(log_count("(ncclEnvPlugin_v1, version 1)", NULL, 0), 1);
  cr_expect_eq(log_count("env example: 5 values", NULL, 0), 0, "version 1 gets no logger");
  cr_expect_eq(log_count("env plugin 'weft-env-example-v1' finalized", NULL, 0), 1);
}

Test(env_plugin, failing_init_falls_back_with_a_warning) {
  char missing[PATH_MAX];
  snprintf(missing, sizeof(missing), "%s/no-such-file", dir);
  setenv("WEFT_ENV_EXAMPLE_FILE", missing, 1);  // the example's init fails
  setenv("NCCL_ENV_PLUGIN", example, 1);
  setenv("WEFT_TIMEOUT", "5", 1);
  log_from_environment();
  int rc = run_probe();
  if (rc != 0) dump_output();
  cr_assert_eq(rc, 0);
  cr_expect(out_has("WEFT_TIMEOUT=5"), "the built-in source serves");
  cr_expect(out_has("allreduce ok"));
  cr_expect_eq(log_count("NCCL WARN env plugin 'weft-env-example' (ncclEnvPlugin_v2): init failed", NULL, 0), 1);
  cr_expect_eq(log_count("NCCL WARN env example: cannot read WEFT_ENV_EXAMPLE_FILE", NULL, 0), 1,
               "the plugin's own warning, through the logger");
  cr_expect_eq(log_count("loaded from", NULL, 0), 0);
  cr_expect_eq(log_count("finalized", NULL, 0), 0, "no finalize after a failed init");
  cr_expect_eq(log_count("WEFT_TIMEOUT set by environment to 5", NULL, 0), 1);
}

Test(env_plugin, missing_library_falls_back) {
  setenv("NCCL_ENV_PLUGIN", "no-such-env-plugin", 1);
  setenv("WEFT_TIMEOUT", "5", 1);
  log_from_environment();
  int rc = run_probe();
  if (rc != 0) dump_output();
  cr_assert_eq(rc, 0);
  cr_expect(out_has("WEFT_TIMEOUT=5"));
  cr_expect(out_has("allreduce ok"));
  cr_expect_eq(log_count("NCCL_ENV_PLUGIN set by environment to no-such-env-plugin", NULL, 0), 1);
  cr_expect_eq(log_count("NCCL WARN env plugin 'no-such-env-plugin' could not be loaded", NULL, 0), 1);
  cr_expect_eq(log_count("libnccl-env-no-such-env-plugin.so", NULL, 0), 1, "both names NCCL tries are named");
}

// libnccl-env.so in a folder of LD_LIBRARY_PATH: the example under the default name.
static void default_library(void) {
  char link[PATH_MAX];
  snprintf(link, sizeof(link), "%s/libnccl-env.so", dir);
  cr_assert_eq(symlink(example, link), 0, "%s", strerror(errno));
  setenv("LD_LIBRARY_PATH", dir, 1);
}

Test(env_plugin, unset_loads_the_default_library) {
  example_file();
  default_library();
  int rc = run_probe();
  if (rc != 0) dump_output();
  cr_assert_eq(rc, 0);
  cr_expect(out_has("WEFT_TIMEOUT=77"));
  cr_expect_eq(log_count("env plugin 'weft-env-example' loaded from libnccl-env.so", NULL, 0), 1);
}

Test(env_plugin, unset_without_a_library_is_quiet) {
  setenv("WEFT_TIMEOUT", "5", 1);
  log_from_environment();
  int rc = run_probe();
  if (rc != 0) dump_output();
  cr_assert_eq(rc, 0);
  cr_expect(out_has("WEFT_TIMEOUT=5"));
  cr_expect_eq(log_count("NCCL INFO no env plugin (libnccl-env.so not found)", NULL, 0), 1);
  cr_expect_eq(log_count("WARN", NULL, 0), 0);
}

Test(env_plugin, none_disables_it) {
  example_file();
  default_library();  // there to be found, were it not disabled
  setenv("NCCL_ENV_PLUGIN", "none", 1);
  setenv("WEFT_TIMEOUT", "5", 1);
  log_from_environment();
  int rc = run_probe();
  if (rc != 0) dump_output();
  cr_assert_eq(rc, 0);
  cr_expect(out_has("WEFT_TIMEOUT=5"));
  cr_expect(out_has("NCCL_ALGO=<unset>"));
  cr_expect_eq(log_count("env plugin disabled (\"none\")", NULL, 0), 1);
  cr_expect_eq(log_count("loaded from", NULL, 0), 0);
}

Test(env_plugin, a_name_finds_the_library_beside_libweft) {
  example_file();
  setenv("NCCL_ENV_PLUGIN", "example", 1);
  int rc = run_probe();
  if (rc != 0) dump_output();
  cr_assert_eq(rc, 0);
  cr_expect(out_has("WEFT_TIMEOUT=77"));
  cr_expect_eq(log_count("libnccl-env-example.so (ncclEnvPlugin_v2, version 2)", NULL, 0), 1);
}

Test(env_plugin, the_configuration_file_may_name_it) {
  example_file();
  char conf[PATH_MAX];
  write_file("conf", "NCCL_ENV_PLUGIN=example\n", conf);
  setenv("NCCL_CONF_FILE", conf, 1);
  int rc = run_probe();
  if (rc != 0) dump_output();
  cr_assert_eq(rc, 0);
  cr_expect(out_has("WEFT_TIMEOUT=77"));
  char text[PATH_MAX + 64];
  snprintf(text, sizeof(text), "NCCL_ENV_PLUGIN set by %s to example", conf);
  cr_expect_eq(log_count(text, NULL, 0), 1);
  cr_expect_eq(log_count("env plugin 'weft-env-example' loaded from", NULL, 0), 1);
}
