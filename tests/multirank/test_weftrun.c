/*
 * test_weftrun.c — the launcher and environment-based initialisation.
 *
 * Runs $WEFT_BUILD_DIR/bin/weftrun (default build/) on the helper programs
 * in $WEFT_BUILD_DIR/tests/progs/ (sources in tests/multirank/progs/):
 * usage errors, exit-status propagation, stopping the other ranks, the time
 * limit, signal forwarding, tagged output, and AllReduce jobs started by
 * weftrun and by hand-made torchrun/Slurm environments. Also checks
 * weftInitFromEnv's refusals of bad environments and the text form of
 * ncclUniqueId. Every weftrun run carries its own -t limit, so a failing
 * test leaves no ranks behind; each test removes its scratch folders.
 */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"
#include "weft.h"
#include "harness.h"

#define MAX_ARGS 32

// Variables that would make a child pick a launcher other than the one a
// test means; cleared in every child before the test's own are set.
static const char *const launcher_vars[] = {
    "WEFT_UNIQUE_ID", "WEFT_RANK", "WEFT_NRANKS", "WEFT_LOCAL_RANK", "WEFT_LOCAL_SIZE",
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
    "MASTER_ADDR", "MASTER_PORT", "NCCL_COMM_ID", "WEFT_MASTER_PORT_OFFSET", NULL};

static void build_path(char *buf, size_t len, const char *rel) {
  const char *dir = getenv("WEFT_BUILD_DIR");
  snprintf(buf, len, "%s/%s", dir && *dir ? dir : "build", rel);
  cr_assert(access(buf, X_OK) == 0, "%s is missing: build the project first", buf);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Scratch folders of the running test; removed by its .fini.
static char tmpdirs[4][64];
static int ntmpdirs;

static void make_tmpdir(char *dir, size_t len) {
  snprintf(dir, len, "/tmp/weftrun_test.XXXXXX");
  cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
  if (ntmpdirs < 4) snprintf(tmpdirs[ntmpdirs++], sizeof(tmpdirs[0]), "%s", dir);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

static void remove_tmpdirs(void) {
  for (int i = 0; i < ntmpdirs; i++) nftw(tmpdirs[i], remove_entry, 8, FTW_DEPTH | FTW_PHYS);
  ntmpdirs = 0;
}

// Starts argv with stdout+stderr to `out`; `env` holds "NAME=VALUE" to set
// after the launcher variables are cleared (NULL-terminated, may be NULL).
static pid_t spawn(char *const argv[], char *const env[], const char *out) {
  fflush(NULL);
  pid_t pid = fork();
  cr_assert(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    for (int i = 0; launcher_vars[i]; i++) unsetenv(launcher_vars[i]);
    setenv("WEFT_TIMEOUT", "30", 1);  // a broken rendezvous fails, not hangs
    setenv("NCCL_DEBUG", "WARN", 1);  // WARN lines land in `out` too
    for (int i = 0; env && env[i]; i++) putenv(env[i]);
    int fd = open(out, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) _exit(126);
    dup2(fd, 1);
    dup2(fd, 2);
    execv(argv[0], argv);
    fprintf(stderr, "cannot execute %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  return pid;
}

// Exit code, or 128 + signal, as a shell reports it.
static int wait_status(pid_t pid) {
  int st;
  while (waitpid(pid, &st, 0) < 0) cr_assert(errno == EINTR, "waitpid: %s", strerror(errno));
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int run(char *const argv[], char *const env[], const char *out, double *elapsed) {
  double t0 = now_s();
  int status = wait_status(spawn(argv, env, out));
  if (elapsed) *elapsed = now_s() - t0;
  return status;
}

static char *slurp(const char *path) {
  static char text[1 << 16];
  text[0] = '\0';
  FILE *f = fopen(path, "r");
  if (f == NULL) return text;
  size_t n = fread(text, 1, sizeof(text) - 1, f);
  text[n] = '\0';
  fclose(f);
  return text;
}

static int file_exists(const char *dir, const char *name, int rank) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s.%d", dir, name, rank);
  return access(path, F_OK) == 0;
}

static pid_t read_pid(const char *dir, int rank) {
  char path[512];
  snprintf(path, sizeof(path), "%s/pid.%d", dir, rank);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "rank %d wrote no pid file", rank);
  int pid = 0;
  cr_assert_eq(fscanf(f, "%d", &pid), 1);
  fclose(f);
  return (pid_t)pid;
}

static void assert_gone(pid_t pid, int rank) {
  errno = 0;
  cr_assert(kill(pid, 0) == -1 && errno == ESRCH, "rank %d (pid %d) is still alive", rank,
            (int)pid);
}

static int free_port(void) {
  int port = weft_test_free_port();
  cr_assert(port > 0, "no free port: %s", strerror(errno));
  return port;
}

// weftrun -t 60 [extra...] -n N prog [args...]; returns the exit status.
static int weftrun(int n, const char *const extra[], const char *prog, const char *const args[],
                   const char *out, double *elapsed) {
  static char launcher[512], progpath[512], rel[256], nbuf[16];
  build_path(launcher, sizeof(launcher), "bin/weftrun");
  snprintf(rel, sizeof(rel), "tests/progs/%s", prog);
  build_path(progpath, sizeof(progpath), rel);
  char *argv[MAX_ARGS];
  int k = 0;
  argv[k++] = launcher;
  argv[k++] = "-t";
  argv[k++] = "60";
  for (int i = 0; extra && extra[i]; i++) argv[k++] = (char *)extra[i];
  snprintf(nbuf, sizeof(nbuf), "%d", n);
  argv[k++] = "-n";
  argv[k++] = nbuf;
  argv[k++] = progpath;
  for (int i = 0; args && args[i]; i++) argv[k++] = (char *)args[i];
  argv[k] = NULL;
  return run(argv, NULL, out, elapsed);
}

// ---- argument handling

Test(weftrun, usage_errors_exit_2, .timeout = 20, .fini = remove_tmpdirs) {
  char launcher[512], dir[64], out[128];
  build_path(launcher, sizeof(launcher), "bin/weftrun");
  make_tmpdir(dir, sizeof(dir));
  const char *cases[][5] = {{NULL},
                            {"-n", "0", "/bin/true", NULL},
                            {"-n", "x", "/bin/true", NULL},
                            {"-n", "2", NULL},
                            {"--bogus", "-n", "1", "/bin/true", NULL},
                            {"-n", "1", "-t", "-1", "/bin/true"},
                            {"/bin/true", NULL}};
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    char *argv[8] = {launcher};
    for (int i = 0; i < 5 && cases[c][i]; i++) argv[i + 1] = (char *)cases[c][i];
    snprintf(out, sizeof(out), "%s/out.%zu", dir, c);
    cr_expect_eq(run(argv, NULL, out, NULL), 2, "case %zu should be a usage error", c);
    cr_expect_not_null(strstr(slurp(out), "usage: weftrun"), "case %zu: no usage text", c);
  }
}

Test(weftrun, missing_program_exits_127, .timeout = 20, .fini = remove_tmpdirs) {
  char launcher[512], dir[64], out[128];
  build_path(launcher, sizeof(launcher), "bin/weftrun");
  make_tmpdir(dir, sizeof(dir));
  snprintf(out, sizeof(out), "%s/out", dir);
  char *argv1[] = {launcher, "-n", "2", "weft-no-such-program-xyz", NULL};
  cr_assert_eq(run(argv1, NULL, out, NULL), 127);
  cr_assert_not_null(strstr(slurp(out), "command not found"));
  char *argv2[] = {launcher, "-n", "2", "-t", "20", "/nonexistent/dir/prog", NULL};
  cr_assert_eq(run(argv2, NULL, out, NULL), 127);
  cr_assert_not_null(strstr(slurp(out), "cannot execute '/nonexistent/dir/prog'"));
}

// ---- process control

Test(weftrun, all_ranks_succeed, .timeout = 30, .fini = remove_tmpdirs) {
  char dir[64], out[128];
  make_tmpdir(dir, sizeof(dir));
  snprintf(out, sizeof(out), "%s/out", dir);
  const char *args[] = {"-1", "0", dir, "0", NULL};
  cr_assert_eq(weftrun(3, NULL, "exit_code", args, out, NULL), 0, "output:\n%s", slurp(out));
  for (int r = 0; r < 3; r++) cr_assert(file_exists(dir, "pid", r), "rank %d never ran", r);
}

Test(weftrun, failing_rank_stops_the_others, .timeout = 30, .fini = remove_tmpdirs) {
  char dir[64], out[128], msg[128];
  make_tmpdir(dir, sizeof(dir));
  snprintf(out, sizeof(out), "%s/out", dir);
  const char *args[] = {"1", "3", dir, "60", NULL};
  double elapsed;
  cr_assert_eq(weftrun(4, NULL, "exit_code", args, out, &elapsed), 3, "output:\n%s", slurp(out));
  cr_assert_lt(elapsed, 2.8, "took %.2f s: SIGTERM did not stop the sleeping ranks", elapsed);
  snprintf(msg, sizeof(msg), "rank 1 (pid %d) exited with status 3", (int)read_pid(dir, 1));
  cr_assert_not_null(strstr(slurp(out), msg), "no '%s' in:\n%s", msg, slurp(out));
  for (int r = 0; r < 4; r++) {
    assert_gone(read_pid(dir, r), r);
    if (r != 1) cr_assert(file_exists(dir, "term", r), "rank %d got no SIGTERM", r);
  }
}

Test(weftrun, rank_killed_by_signal, .timeout = 30, .fini = remove_tmpdirs) {
  char dir[64], out[128];
  make_tmpdir(dir, sizeof(dir));
  snprintf(out, sizeof(out), "%s/out", dir);
  const char *args[] = {"0", "-9", dir, "60", NULL};
  cr_assert_eq(weftrun(2, NULL, "exit_code", args, out, NULL), 128 + SIGKILL);
  cr_assert_not_null(strstr(slurp(out), "killed by signal 9"), "output:\n%s", slurp(out));
  assert_gone(read_pid(dir, 1), 1);
}

Test(weftrun, time_limit_exits_124, .timeout = 30, .fini = remove_tmpdirs) {
  char dir[64], out[128];
  make_tmpdir(dir, sizeof(dir));
  snprintf(out, sizeof(out), "%s/out", dir);
  const char *extra[] = {"-t", "1", NULL};  // the later -t wins
  const char *args[] = {"-1", "0", dir, "60", NULL};
  double elapsed;
  cr_assert_eq(weftrun(2, extra, "exit_code", args, out, &elapsed), 124, "output:\n%s", slurp(out));
  cr_assert(elapsed >= 0.9 && elapsed < 5.0, "took %.2f s", elapsed);
  cr_assert_not_null(strstr(slurp(out), "time limit"));
  cr_assert_not_null(strstr(slurp(out), "still running: 0"), "output:\n%s", slurp(out));
  for (int r = 0; r < 2; r++) assert_gone(read_pid(dir, r), r);
}

Test(weftrun, sigterm_is_forwarded, .timeout = 30, .fini = remove_tmpdirs) {
  char launcher[512], prog[512], dir[64], out[128];
  build_path(launcher, sizeof(launcher), "bin/weftrun");
  build_path(prog, sizeof(prog), "tests/progs/exit_code");
  make_tmpdir(dir, sizeof(dir));
  snprintf(out, sizeof(out), "%s/out", dir);
  char *argv[] = {launcher, "-t", "60", "-n", "3", prog, "-1", "0", dir, "60", NULL};
  pid_t pid = spawn(argv, NULL, out);
  for (int waited = 0; !(file_exists(dir, "pid", 0) && file_exists(dir, "pid", 1) &&
                         file_exists(dir, "pid", 2));
       waited++) {
    cr_assert_lt(waited, 1000, "ranks never started:\n%s", slurp(out));
    usleep(10000);
  }
  cr_assert_eq(kill(pid, SIGTERM), 0);
  cr_assert_eq(wait_status(pid), 128 + SIGTERM, "output:\n%s", slurp(out));
  for (int r = 0; r < 3; r++) {
    cr_assert(file_exists(dir, "term", r), "rank %d never saw SIGTERM", r);
    assert_gone(read_pid(dir, r), r);
  }
}

Test(weftrun, tag_output_prefixes_lines, .timeout = 30, .fini = remove_tmpdirs) {
  char dir[64], out[128];
  make_tmpdir(dir, sizeof(dir));
  snprintf(out, sizeof(out), "%s/out", dir);
  const char *extra[] = {"--tag-output", NULL};
  const char *args[] = {"-1", "0", dir, "0", NULL};
  cr_assert_eq(weftrun(2, extra, "exit_code", args, out, NULL), 0, "output:\n%s", slurp(out));
  char *text = slurp(out);
  cr_assert_not_null(strstr(text, "[0] rank 0 of 2 pid "), "output:\n%s", text);
  cr_assert_not_null(strstr(text, "[1] rank 1 of 2 pid "), "output:\n%s", text);
  cr_assert_not_null(strstr(text, "[1] rank 1 stderr line\n"), "output:\n%s", text);
  cr_assert(strncmp(text, "rank ", 5) != 0 && strstr(text, "\nrank ") == NULL,
            "an untagged line:\n%s", text);
}

// ---- communicators from the environment

static void weftrun_allreduce(int n) {
  char dir[64], out[128], want[64];
  make_tmpdir(dir, sizeof(dir));
  snprintf(out, sizeof(out), "%s/out", dir);
  cr_assert_eq(weftrun(n, NULL, "env_allreduce", NULL, out, NULL), 0, "output:\n%s", slurp(out));
  for (int r = 0; r < n; r++) {
    snprintf(want, sizeof(want), "rank %d of %d ok", r, n);
    cr_assert_not_null(strstr(slurp(out), want), "no '%s' in:\n%s", want, slurp(out));
  }
}

Test(weftrun, allreduce_1_rank, .timeout = 60, .fini = remove_tmpdirs) { weftrun_allreduce(1); }
Test(weftrun, allreduce_2_ranks, .timeout = 60, .fini = remove_tmpdirs) { weftrun_allreduce(2); }
Test(weftrun, allreduce_4_ranks, .timeout = 60, .fini = remove_tmpdirs) { weftrun_allreduce(4); }

// n processes started by hand with a launcher's variables; rank r gets
// "<rank_var>=r" plus the shared settings in `common`.
static void launcher_job(int n, const char *rank_var, const char *const common[]) {
  char prog[512], dir[64], out[128];
  build_path(prog, sizeof(prog), "tests/progs/env_allreduce");
  make_tmpdir(dir, sizeof(dir));
  snprintf(out, sizeof(out), "%s/out", dir);
  pid_t pids[8];
  for (int r = 0; r < n; r++) {
    char *env[16];
    int k = 0;
    for (; common[k]; k++) env[k] = (char *)common[k];
    char rank_entry[64];
    snprintf(rank_entry, sizeof(rank_entry), "%s=%d", rank_var, r);
    env[k++] = rank_entry;
    env[k] = NULL;
    char *argv[] = {prog, NULL};
    pids[r] = spawn(argv, env, out);
  }
  for (int r = 0; r < n; r++)
    cr_expect_eq(wait_status(pids[r]), 0, "rank %d failed; output:\n%s", r, slurp(out));
}

Test(init_env, torchrun_style, .timeout = 60, .fini = remove_tmpdirs) {
  char port[32];
  snprintf(port, sizeof(port), "MASTER_PORT=%d", free_port() - 1);  // + offset 1 = the free one
  const char *common[] = {"WORLD_SIZE=3", "MASTER_ADDR=127.0.0.1", port,
                          "NCCL_SOCKET_IFNAME=lo", NULL};
  launcher_job(3, "RANK", common);
}

Test(init_env, slurm_with_nccl_comm_id, .timeout = 60, .fini = remove_tmpdirs) {
  char comm_id[64];
  snprintf(comm_id, sizeof(comm_id), "NCCL_COMM_ID=127.0.0.1:%d", free_port());
  const char *common[] = {"SLURM_NTASKS=2", comm_id, "NCCL_SOCKET_IFNAME=lo", NULL};
  launcher_job(2, "SLURM_PROCID", common);
}

// One process with a bad environment: must fail at once, naming the problem.
static void bad_env(char *const env[], const char *expect) {
  char prog[512], dir[64], out[128];
  build_path(prog, sizeof(prog), "tests/progs/env_allreduce");
  make_tmpdir(dir, sizeof(dir));
  snprintf(out, sizeof(out), "%s/out", dir);
  char *argv[] = {prog, NULL};
  double elapsed;
  int status = run(argv, env, out, &elapsed);
  cr_assert_eq(status, 20 + ncclInvalidArgument, "exit %d, output:\n%s", status, slurp(out));
  cr_assert_lt(elapsed, 5.0, "took %.1f s to refuse", elapsed);
  cr_assert_not_null(strstr(slurp(out), expect), "no '%s' in:\n%s", expect, slurp(out));
}

Test(init_env, rank_not_an_integer, .timeout = 20, .fini = remove_tmpdirs) {
  char *env[] = {"RANK=x", "WORLD_SIZE=4", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500", NULL};
  bad_env(env, "RANK='x'");
}

Test(init_env, rank_out_of_range, .timeout = 20, .fini = remove_tmpdirs) {
  char *env[] = {"RANK=5", "WORLD_SIZE=4", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500", NULL};
  bad_env(env, "rank 5 out of range for WORLD_SIZE=4");
}

Test(init_env, missing_address, .timeout = 20, .fini = remove_tmpdirs) {
  char *env[] = {"RANK=0", "WORLD_SIZE=2", NULL};
  bad_env(env, "no rendezvous address");
}

Test(init_env, missing_world_size, .timeout = 20, .fini = remove_tmpdirs) {
  char *env[] = {"OMPI_COMM_WORLD_RANK=0", NULL};
  bad_env(env, "OMPI_COMM_WORLD_SIZE");
}

Test(init_env, bad_master_port, .timeout = 20, .fini = remove_tmpdirs) {
  char *env[] = {"PMI_RANK=0", "PMI_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=70000", NULL};
  bad_env(env, "MASTER_PORT='70000'");
}

Test(init_env, no_launcher, .timeout = 20, .fini = remove_tmpdirs) {
  bad_env(NULL, "no launcher found");
}

Test(init_env, bad_weftrun_variables, .timeout = 20, .fini = remove_tmpdirs) {
  char *env1[] = {"WEFT_UNIQUE_ID=abc", "WEFT_RANK=0", "WEFT_NRANKS=1", NULL};
  bad_env(env1, "WEFT_UNIQUE_ID");
  static char id[300] = "WEFT_UNIQUE_ID=";
  memset(id + strlen(id), '0', 256);
  char *env2[] = {id, "WEFT_NRANKS=2", NULL};
  bad_env(env2, "WEFT_RANK");
  char *env3[] = {id, "WEFT_RANK=2", "WEFT_NRANKS=2", NULL};
  bad_env(env3, "rank 2 out of range for WEFT_NRANKS=2");
}

// ---- ncclUniqueId as text (in-process)

Test(unique_id_text, round_trip_is_lowercase_hex, .timeout = 10) {
  ncclUniqueId id, back;
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++) id.internal[i] = (char)(i * 37 + 11);
  char text[WEFT_UNIQUE_ID_STRLEN];
  cr_assert_eq(weftUniqueIdToString(&id, text, sizeof(text)), ncclSuccess);
  cr_assert_eq(strlen(text), 256);
  cr_assert_eq(strspn(text, "0123456789abcdef"), 256);
  cr_assert_eq(strncmp(text, "0b30", 4), 0, "byte order: %.8s", text);
  memset(&back, 0, sizeof(back));
  cr_assert_eq(weftUniqueIdFromString(text, &back), ncclSuccess);
  cr_assert_eq(memcmp(&id, &back, sizeof(id)), 0);
}

Test(unique_id_text, rejects_bad_input, .timeout = 10) {
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  char text[WEFT_UNIQUE_ID_STRLEN + 8];
  cr_assert_eq(weftUniqueIdToString(&id, text, WEFT_UNIQUE_ID_STRLEN - 1), ncclInvalidArgument);
  cr_assert_eq(weftUniqueIdToString(NULL, text, sizeof(text)), ncclInvalidArgument);
  cr_assert_eq(weftUniqueIdToString(&id, NULL, sizeof(text)), ncclInvalidArgument);
  cr_assert_eq(weftUniqueIdToString(&id, text, sizeof(text)), ncclSuccess);
  cr_assert_eq(weftUniqueIdFromString(NULL, &id), ncclInvalidArgument);
  cr_assert_eq(weftUniqueIdFromString(text, NULL), ncclInvalidArgument);
  text[255] = '\0';  // too short
  cr_assert_eq(weftUniqueIdFromString(text, &id), ncclInvalidArgument);
  text[255] = '0';
  text[256] = '0';   // too long
  text[257] = '\0';
  cr_assert_eq(weftUniqueIdFromString(text, &id), ncclInvalidArgument);
  text[256] = '\0';
  text[17] = 'g';    // not hex
  cr_assert_eq(weftUniqueIdFromString(text, &id), ncclInvalidArgument);
  text[17] = '0';
  cr_assert_eq(weftUniqueIdFromString(text, &id), ncclSuccess);
}
