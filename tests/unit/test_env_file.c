/*
 * test_env_file.c — NCCL's configuration files in weft's built-in source:
 * the line format NCCL reads (comments, lines without '=', '\r', '=' in
 * values, nothing trimmed, a name's first line counting), the user's file
 * before /etc/nccl.conf, NCCL_CONF_FILE in place of ~/.nccl.conf, the
 * environment before both (an empty variable included), where a value
 * came from (logs, weft_env_knob_origin), a NCCL_CONF_FILE that cannot be
 * read, and weft_env_reset reading the files again.
 *
 * Criterion runs each test in its own process; HOME is a scratch folder,
 * so the machine's ~/.nccl.conf is never read. /etc/nccl.conf cannot be
 * moved aside: the knobs' tests use values it would not set.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "debug.h"
#include "env.h"
#include "env_file.h"
#include "log_capture.h"

static char dir[64];

static void setup(void) {
  snprintf(dir, sizeof(dir), "/tmp/weft-envfile-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  setenv("HOME", dir, 1);
  unsetenv("NCCL_CONF_FILE");
  unsetenv("WEFT_TIMEOUT");
  unsetenv("WEFT_SLOTS");
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_PROTO");
}

static void teardown(void) {
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  cr_expect_eq(system(cmd), 0);
}

static void write_file(const char *name, const char *text, char *path) {
  snprintf(path, PATH_MAX, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
}

TestSuite(env_file, .init = setup, .fini = teardown, .timeout = 10);

Test(env_file, reads_lines_as_nccl_does) {
  char path[PATH_MAX];
  write_file("conf",
             "# a comment=with an equals sign\n"
             "NCCL_A=1\n"
             "no equals sign here\n"
             "=no name\n"
             "NCCL_B==ens1f0\n"          // NCCL's own example: the value is "=ens1f0"
             "NCCL_C=crlf\r\n"
             " NCCL_D=leading space\n"  // the name is " NCCL_D": nothing is trimmed
             "NCCL_E= spaced value \n"
             "NCCL_A=second\n"          // the first line of a name counts
             "NCCL_F=\n"
             "NCCL_G=no newline at the end",
             path);
  weft_env_files_t *t = weft_env_files_read(path, NULL, NULL);
  cr_assert_not_null(t);
  const char *file = NULL;
  cr_expect_str_eq(weft_env_files_get(t, "NCCL_A", &file), "1");
  cr_expect_str_eq(file, path);
  cr_expect_str_eq(weft_env_files_get(t, "NCCL_B", NULL), "=ens1f0");
  cr_expect_str_eq(weft_env_files_get(t, "NCCL_C", NULL), "crlf");
  cr_expect_null(weft_env_files_get(t, "NCCL_D", NULL));
  cr_expect_str_eq(weft_env_files_get(t, " NCCL_D", NULL), "leading space");
  cr_expect_str_eq(weft_env_files_get(t, "NCCL_E", NULL), " spaced value ");
  cr_expect_str_eq(weft_env_files_get(t, "NCCL_F", NULL), "");
  cr_expect_str_eq(weft_env_files_get(t, "NCCL_G", NULL), "no newline at the end");
  cr_expect_null(weft_env_files_get(t, "# a comment", NULL));
  cr_expect_null(weft_env_files_get(t, "", NULL));
  cr_expect_eq(weft_env_files_count(t), 8);
  weft_env_files_free(t);
}

Test(env_file, the_users_file_comes_before_the_systems) {
  char user[PATH_MAX], sys[PATH_MAX], missing[PATH_MAX];
  write_file("user", "NCCL_A=user\nNCCL_B=user\n", user);
  write_file("system", "NCCL_A=system\nNCCL_C=system\n", sys);
  int err = -1;
  weft_env_files_t *t = weft_env_files_read(user, sys, &err);
  cr_assert_not_null(t);
  cr_expect_eq(err, 0);
  const char *file = NULL;
  cr_expect_str_eq(weft_env_files_get(t, "NCCL_A", &file), "user");
  cr_expect_str_eq(file, user);
  cr_expect_str_eq(weft_env_files_get(t, "NCCL_C", &file), "system");
  cr_expect_str_eq(file, sys);
  weft_env_files_free(t);

  snprintf(missing, sizeof(missing), "%s/missing", dir);
  t = weft_env_files_read(missing, sys, &err);
  cr_assert_not_null(t);
  cr_expect_eq(err, ENOENT, "why the user's file was not read");
  cr_expect_str_eq(weft_env_files_get(t, "NCCL_A", NULL), "system");
  weft_env_files_free(t);
}

Test(env_file, nccl_conf_file_replaces_the_home_file) {
  char path[PATH_MAX];
  cr_expect_eq(weft_env_files_user_path(path, sizeof(path)), 0);
  char home_file[PATH_MAX];
  snprintf(home_file, sizeof(home_file), "%s/.nccl.conf", dir);
  cr_expect_str_eq(path, home_file);
  setenv("NCCL_CONF_FILE", "/some/file", 1);
  cr_expect_eq(weft_env_files_user_path(path, sizeof(path)), 1);
  cr_expect_str_eq(path, "/some/file");
  setenv("NCCL_CONF_FILE", "", 1);  // empty: as unset
  cr_expect_eq(weft_env_files_user_path(path, sizeof(path)), 0);
  unsetenv("NCCL_CONF_FILE");
  unsetenv("HOME");
  cr_expect_eq(weft_env_files_user_path(path, sizeof(path)), -1, "no HOME: no user's file");
}

Test(env_file, knobs_come_from_the_home_file_after_the_environment) {
  char path[PATH_MAX];
  write_file(".nccl.conf", "WEFT_TIMEOUT=44\nNCCL_ALGO=tree\nWEFT_SLOTS=12\nNCCL_PROTO=Simple\n", path);
  setenv("WEFT_SLOTS", "9", 1);  // the environment wins
  setenv("NCCL_PROTO", "", 1);       // so does an empty variable: unset, not the file's
  log_to_file("envfile", "ENV");
  cr_expect_eq(weft_env_WEFT_TIMEOUT(), 44);
  cr_expect_str_eq(weft_env_NCCL_ALGO(), "tree");
  cr_expect_eq(weft_env_WEFT_SLOTS(), 9);
  cr_expect_null(weft_env_NCCL_PROTO());
  int idx = weft_env_knob_find("WEFT_TIMEOUT");
  cr_expect_str_eq(weft_env_knob_origin(idx), path);
  cr_expect_str_eq(weft_env_knob_origin(weft_env_knob_find("WEFT_SLOTS")), "environment");
  cr_expect_null(weft_env_knob_origin(weft_env_knob_find("WEFT_SPIN_NS")), "a default has no origin");
  char line[PATH_MAX + 64];
  snprintf(line, sizeof(line), "WEFT_TIMEOUT set by %s to 44", path);
  cr_expect_eq(log_count(line), 1);
  cr_expect_eq(log_count("WEFT_SLOTS set by environment to 9"), 1);
}

Test(env_file, nccl_conf_file_is_read_instead_of_the_home_file) {
  char home[PATH_MAX], named[PATH_MAX];
  write_file(".nccl.conf", "WEFT_TIMEOUT=44\nNCCL_ALGO=tree\n", home);
  write_file("named.conf", "WEFT_TIMEOUT=33\n", named);
  setenv("NCCL_CONF_FILE", named, 1);
  weft_env_reset();
  cr_expect_eq(weft_env_WEFT_TIMEOUT(), 33);
  cr_expect_null(weft_env_NCCL_ALGO(), "~/.nccl.conf is not read when NCCL_CONF_FILE is set");
  cr_expect_str_eq(weft_env_NCCL_CONF_FILE(), named);
}

Test(env_file, reset_reads_the_files_again) {
  char path[PATH_MAX];
  write_file(".nccl.conf", "WEFT_TIMEOUT=44\n", path);
  weft_env_reset();
  cr_expect_eq(weft_env_WEFT_TIMEOUT(), 44);
  write_file(".nccl.conf", "WEFT_TIMEOUT=45\n", path);
  cr_expect_eq(weft_env_WEFT_TIMEOUT(), 44, "cached");
  weft_env_reset();
  cr_expect_eq(weft_env_WEFT_TIMEOUT(), 45);
}

Test(env_file, an_unreadable_nccl_conf_file_is_a_warning) {
  char missing[PATH_MAX];
  snprintf(missing, sizeof(missing), "%s/missing.conf", dir);
  setenv("NCCL_CONF_FILE", missing, 1);
  setenv("WEFT_TIMEOUT", "21", 1);
  log_to_file("envfile", "ENV");
  cr_expect_eq(weft_env_WEFT_TIMEOUT(), 21, "knobs still come from the environment");
  char line[PATH_MAX + 64];
  snprintf(line, sizeof(line), "WARN NCCL_CONF_FILE='%s' cannot be read", missing);
  cr_expect_eq(log_count(line), 1);
}

Test(env_file, a_bad_integer_names_its_file) {
  char path[PATH_MAX];
  write_file(".nccl.conf", "WEFT_SLOTS=eight\n", path);
  weft_env_reset();
  cr_expect_eq(weft_env_WEFT_SLOTS(), 16);
  char text[PATH_MAX + 128];
  snprintf(text, sizeof(text), "WEFT_SLOTS='eight' (set by %s) is not an integer; using default 16", path);
  cr_expect_str_eq(weft_debug_last_error(), text);
}
