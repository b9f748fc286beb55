/*
 * test_perf.c — the nccl-tests-style benchmarks in $WEFT_BUILD_DIR/bin
 * (default build/): every *_perf binary runs briefly with two threads and
 * under `weftrun -n 3`, and its report must have nccl-tests' shape — the
 * header, one row per size, #wrong 0 (or N/A) in every row, the footer —
 * with exit status 0. Also: every type and op of all_reduce_perf, several
 * ranks per thread and per process, blocking, NULL-stream and aggregated
 * modes with every root, the JSON report, torchrun-style variables (one
 * rank per process, only rank 0 prints), and clear refusals of bad flags.
 * Each run has a deadline after which its whole process group is killed.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define RUN_LIMIT_S 40
#define MAX_ARGS 40

static const char *const benches[] = {"all_reduce",     "all_gather", "broadcast", "reduce",
                                      "reduce_scatter", "alltoall",   "gather",    "scatter",
                                      "sendrecv",       "hypercube"};
#define NBENCH (sizeof(benches) / sizeof(benches[0]))

// The brief sweep: 8, 32, ..., 512K bytes — 9 sizes.
#define SWEEP "-b", "8", "-e", "1M", "-f", "4", "-n", "2", "-w", "1", "-c", "1"
#define SWEEP_ROWS 9

// Launcher variables a test must not inherit.
static const char *const launcher_vars[] = {"WEFT_UNIQUE_ID",
                                            "WEFT_RANK",
                                            "WEFT_NRANKS",
                                            "RANK",
                                            "WORLD_SIZE",
                                            "SLURM_PROCID",
                                            "SLURM_NTASKS",
                                            "OMPI_COMM_WORLD_RANK",
                                            "OMPI_COMM_WORLD_SIZE",
                                            "PMI_RANK",
                                            "PMI_SIZE",
                                            "MASTER_ADDR",
                                            "MASTER_PORT",
                                            "NCCL_COMM_ID",
                                            NULL};

static void bin_path(char *buf, size_t len, const char *name) {
  const char *dir = getenv("WEFT_BUILD_DIR");
  snprintf(buf, len, "%s/bin/%s", dir && *dir ? dir : "build", name);
  cr_assert(access(buf, X_OK) == 0, "%s is missing: build the project first", buf);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// Runs argv with stdout+stderr captured and `env` ("NAME=VALUE", NULL-
// terminated, may be NULL) added; returns the exit status (128 + signal for
// a signal, -1 past the deadline) and the output in *text.
static int run_env(char *const argv[], char *const env[], char **text) {
  char out[] = "/tmp/weft_perf_test.XXXXXX";
  int fd = mkstemp(out);
  cr_assert(fd >= 0, "mkstemp failed");
  fflush(NULL);
  pid_t pid = fork();
  cr_assert(pid >= 0, "fork failed");
  if (pid == 0) {
    setpgid(0, 0);  // weftrun's ranks too can be killed as one group
    for (int i = 0; launcher_vars[i]; i++) unsetenv(launcher_vars[i]);
    setenv("NCCL_SOCKET_IFNAME", "lo", 1);
    setenv("WEFT_TIMEOUT", "30", 1);
    for (int i = 0; env && env[i]; i++) putenv(env[i]);
    dup2(fd, 1);
    dup2(fd, 2);
    execv(argv[0], argv);
    fprintf(stderr, "cannot execute %s\n", argv[0]);
    _exit(127);
  }
  setpgid(pid, pid);
  int st = 0, status = -1;
  double deadline = now_s() + RUN_LIMIT_S;
  for (;;) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) {
      status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      break;
    }
    if (now_s() > deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &st, 0);
      break;
    }
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  kill(-pid, SIGKILL);  // leftovers of the group, if any
  FILE *f = fdopen(fd, "r");
  cr_assert_not_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  *text = calloc((size_t)n + 1, 1);
  cr_assert_not_null(*text);
  size_t got = fread(*text, 1, (size_t)n, f);
  (*text)[got] = '\0';
  fclose(f);
  unlink(out);
  return status;
}

static int run_cmd(char *const argv[], char **text) { return run_env(argv, NULL, text); }

typedef struct {
  int header, columns, ranks, rows, bad_rows, footer_ok, avg_bw;
  char first_bad[160];
} report_t;

// Reads an nccl-tests report. A data row ends with the out-of-place and
// in-place cells: time algbw busbw #wrong, twice; #wrong must be 0 or N/A.
static void parse(const char *text, report_t *r) {
  memset(r, 0, sizeof(*r));
  char *copy = strdup(text), *save = NULL;
  for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    if (strncmp(line, "# nThread ", 10) == 0 && strstr(line, "validation:"))
      r->header = 1;
    else if (strncmp(line, "#  Rank ", 8) == 0)
      r->ranks++;
    else if (strncmp(line, "#       size", 12) == 0 && strstr(line, "#wrong"))
      r->columns = 1;
    else if (strcmp(line, "# Out of bounds values : 0 OK") == 0)
      r->footer_ok = 1;
    else if (strncmp(line, "# Avg bus bandwidth    : ", 25) == 0)
      r->avg_bw = 1;
    else if (line[0] == ' ') {
      char *tok[20], *s2 = NULL;
      int n = 0;
      char buf[512];
      snprintf(buf, sizeof(buf), "%s", line);
      for (char *t = strtok_r(buf, " ", &s2); t && n < 20; t = strtok_r(NULL, " ", &s2))
        tok[n++] = t;
      int ok = n >= 12 && (!strcmp(tok[n - 1], "0") || !strcmp(tok[n - 1], "N/A")) &&
               !strcmp(tok[n - 5], "0");
      r->rows++;
      if (!ok && r->bad_rows++ == 0) snprintf(r->first_bad, sizeof(r->first_bad), "%s", line);
    }
  }
  free(copy);
}

// Runs one benchmark and checks its report; returns the parsed report.
static report_t expect_clean(char *const argv[], const char *what, int ranks, int rows) {
  char *text = NULL;
  double t0 = now_s();
  int status = run_cmd(argv, &text);
  report_t r;
  parse(text, &r);
  cr_expect_eq(status, 0, "%s: exit status %d (%.1f s)\n%s", what, status, now_s() - t0, text);
  cr_expect(r.header && r.columns, "%s: no nccl-tests header\n%s", what, text);
  cr_expect_eq(r.ranks, ranks, "%s: %d '# Rank' lines, expected %d", what, r.ranks, ranks);
  cr_expect_eq(r.rows, rows, "%s: %d rows, expected %d\n%s", what, r.rows, rows, text);
  cr_expect_eq(r.bad_rows, 0, "%s: %d rows with wrong elements, first: %s", what, r.bad_rows,
               r.first_bad);
  cr_expect(r.footer_ok && r.avg_bw, "%s: footer missing or not OK\n%s", what, text);
  free(text);
  return r;
}

// argv from a NULL-terminated list of strings (copied: execv wants char *).
static void make_argv(char *argv[MAX_ARGS], const char *const *list) {
  int n = 0;
  for (; list[n] && n < MAX_ARGS - 1; n++) argv[n] = strdup(list[n]);
  argv[n] = NULL;
}

static void free_argv(char *argv[]) {
  for (int i = 0; argv[i]; i++) free(argv[i]);
}

Test(perf, every_benchmark_two_threads, .timeout = 120) {
  for (size_t b = 0; b < NBENCH; b++) {
    char path[512], name[64];
    snprintf(name, sizeof(name), "%s_perf", benches[b]);
    bin_path(path, sizeof(path), name);
    char *argv[MAX_ARGS];
    make_argv(argv, (const char *const[]){path, SWEEP, "-t", "2", NULL});
    expect_clean(argv, name, 2, SWEEP_ROWS);
    free_argv(argv);
  }
}

Test(perf, every_benchmark_under_weftrun, .timeout = 180) {
  char weftrun[512];
  bin_path(weftrun, sizeof(weftrun), "weftrun");
  for (size_t b = 0; b < NBENCH; b++) {
    char path[512], name[64];
    snprintf(name, sizeof(name), "%s_perf", benches[b]);
    bin_path(path, sizeof(path), name);
    char *argv[MAX_ARGS];
    make_argv(argv, (const char *const[]){weftrun, "-n", "3", "-t", "60", path, SWEEP, NULL});
    if (strcmp(benches[b], "hypercube") != 0) {
      expect_clean(argv, name, 3, SWEEP_ROWS);
    } else {  // 3 is not a power of two: skipped, as nccl-tests does
      char *text = NULL;
      int status = run_cmd(argv, &text);
      cr_expect_eq(status, 0, "hypercube_perf -n 3: exit %d\n%s", status, text);
      cr_expect_not_null(strstr(text, "nRanks 3 is not a power of 2, skipping"), "%s", text);
      free(text);
    }
    free_argv(argv);
  }
}

// --device 1: buffers from ncclMemAlloc on the current device, calls on
// CUDA streams, checked through host copies; against the stand-in driver
// (tests/fakes/cuda), as processes (weftrun -n 2) and as one thread driving
// two devices in groups (-g 2).
Test(perf, every_benchmark_on_device_buffers, .timeout = 240) {
  char weftrun[512], fake[600], env_lib[640];
  bin_path(weftrun, sizeof(weftrun), "weftrun");
  const char *b = getenv("WEFT_BUILD_DIR");
  snprintf(fake, sizeof(fake), "%s/tests/lib/libweft-fake-cuda.so", b && b[0] ? b : "build");
  snprintf(env_lib, sizeof(env_lib), "WEFT_CUDA_DRIVER_LIB=%s", fake);
  char *env[] = {env_lib, NULL};
  for (size_t k = 0; k < NBENCH; k++) {
    char path[512], name[64];
    snprintf(name, sizeof(name), "%s_perf", benches[k]);
    bin_path(path, sizeof(path), name);
    for (int form = 0; form < 2; form++) {
      char *argv[MAX_ARGS];
      if (form == 0)
        make_argv(argv, (const char *const[]){weftrun, "-n", "2", "-t", "60", path, "--device", "1", SWEEP, NULL});
      else
        make_argv(argv, (const char *const[]){path, "--device", "1", "-g", "2", SWEEP, NULL});
      char *text = NULL;
      int status = run_env(argv, env, &text);
      report_t r;
      parse(text, &r);
      cr_expect(status == 0 && r.footer_ok && r.bad_rows == 0 && r.rows == SWEEP_ROWS,
                "%s --device 1 (%s): exit %d, %d rows, %d wrong\n%s", name, form ? "-g 2" : "weftrun -n 2",
                status, r.rows, r.bad_rows, text);
      free(text);
      free_argv(argv);
    }
  }
}

// The IPC path (WEFT_CUDA_IPC=1: collectives and Send/Recv on the GPU
// through CUDA IPC), with the stand-in driver and kernels and 4 KiB slots,
// so that most sizes take several rounds: all-reduce with every type and
// op (PreMulSum with a different scalar on each rank included; two phases
// from 4 KiB) as 3 processes and as 2 threads, then every other benchmark
// as 3 processes (2 for the hypercube).
// 4 KiB slots; all-reduces of 4 KiB or more among 3 ranks in two phases.
#define IPC_SMALL "WEFT_CUDA_IPC_SCRATCH_BYTES=4096", "WEFT_CUDA_IPC_TWO_PHASE_MIN_BYTES=4096"

static void ipc_env(char *env_lib, char *env_kern, size_t len) {
  const char *b = getenv("WEFT_BUILD_DIR");
  snprintf(env_lib, len, "WEFT_CUDA_DRIVER_LIB=%s/tests/lib/libweft-fake-cuda.so", b && b[0] ? b : "build");
  snprintf(env_kern, len, "WEFT_CUDA_KERNELS_LIB=%s/tests/lib/libweft-fake-cuda-kernels.so", b && b[0] ? b : "build");
}

Test(perf, all_reduce_ipc_path_every_type_and_op, .timeout = 180) {
  char weftrun[512], path[512], env_lib[640], env_kern[640];
  bin_path(weftrun, sizeof(weftrun), "weftrun");
  bin_path(path, sizeof(path), "all_reduce_perf");
  ipc_env(env_lib, env_kern, sizeof(env_lib));
  char *env[] = {env_lib, env_kern, "WEFT_CUDA_IPC=1", IPC_SMALL, NULL};
  for (int form = 0; form < 2; form++) {
    char *argv[MAX_ARGS];
    if (form == 0)
      make_argv(argv, (const char *const[]){weftrun, "-n", "3", "-t", "90", path, "--device", "1", "-b", "8", "-e",
                                            "64K", "-f", "8", "-n", "2", "-d", "all", "-o", "all", NULL});
    else
      make_argv(argv, (const char *const[]){path, "--device", "1", "-t", "2", "-b", "8", "-e", "64K", "-f", "8",
                                            "-n", "2", "-d", "all", "-o", "all", NULL});
    char *text = NULL;
    int status = run_env(argv, env, &text);
    report_t r;
    parse(text, &r);
    cr_expect(status == 0 && r.footer_ok && r.bad_rows == 0 && r.rows == 12 * 6 * 5,
              "IPC path (%s): exit %d, %d rows, %d wrong\n%s", form ? "-t 2" : "weftrun -n 3", status, r.rows,
              r.bad_rows, text);
    free(text);
    free_argv(argv);
  }
}

Test(perf, every_benchmark_on_the_ipc_path, .timeout = 240) {
  char weftrun[512], env_lib[640], env_kern[640];
  bin_path(weftrun, sizeof(weftrun), "weftrun");
  ipc_env(env_lib, env_kern, sizeof(env_lib));
  char *env[] = {env_lib, env_kern, "WEFT_CUDA_IPC=1", IPC_SMALL, "NCCL_DEBUG=INFO",
                 "NCCL_DEBUG_SUBSYS=INIT", NULL};
  for (size_t k = 1; k < NBENCH; k++) {
    char path[512], name[64];
    snprintf(name, sizeof(name), "%s_perf", benches[k]);
    bin_path(path, sizeof(path), name);
    int pow2_only = strcmp(benches[k], "hypercube") == 0;
    char *argv[MAX_ARGS];
    make_argv(argv, (const char *const[]){weftrun, "-n", pow2_only ? "2" : "3", "-t", "60", path, "--device", "1",
                                          "-b", "8", "-e", "256K", "-f", "8", "-n", "2", "-w", "1", "-c", "1",
                                          "-d", "all", NULL});
    char *text = NULL;
    int status = run_env(argv, env, &text);
    report_t r;
    parse(text, &r);
    cr_expect(status == 0 && r.footer_ok && r.bad_rows == 0 && r.rows == 12 * 6,
              "%s --device 1 on the IPC path: exit %d, %d rows, %d wrong\n%s", name, status, r.rows, r.bad_rows,
              text);
    cr_expect(text != NULL && strstr(text, "CUDA IPC path: on") != NULL, "%s: the IPC path was off\n%s", name,
              text);
    free(text);
    free_argv(argv);
  }
}

// Processes x threads x ranks per thread: weftrun -n 2 with -t 2 -g 2 is 8 ranks.
Test(perf, ranks_per_process_and_thread_compose, .timeout = 60) {
  char weftrun[512], path[512];
  bin_path(weftrun, sizeof(weftrun), "weftrun");
  static const char *const which[] = {"all_reduce_perf", "hypercube_perf", "reduce_scatter_perf"};
  for (int i = 0; i < 3; i++) {
    bin_path(path, sizeof(path), which[i]);
    char *argv[MAX_ARGS];
    make_argv(argv,
              (const char *const[]){weftrun, "-n", "2", "-t", "60", path, "-b", "64", "-e", "64K",
                                    "-f", "32", "-n", "2", "-t", "2", "-g", "2", NULL});
    expect_clean(argv, which[i], 8, 3);
    free_argv(argv);
  }
}

// All 12 types x 6 ops (sum prod max min avg mulsum), 3 sizes, 3 ranks.
Test(perf, all_reduce_every_type_and_op, .timeout = 120) {
  char path[512];
  bin_path(path, sizeof(path), "all_reduce_perf");
  char *argv[MAX_ARGS];
  make_argv(argv, (const char *const[]){path, "-b", "8", "-e", "8K", "-f", "32", "-n", "1", "-w",
                                        "0", "-t", "3", "-d", "all", "-o", "all", NULL});
  expect_clean(argv, "all_reduce_perf -d all -o all", 3, 12 * 6 * 3);
  free_argv(argv);
}

// Blocking, NULL-stream, aggregated and rank-0/min/max timing modes, every root.
Test(perf, modes_and_roots, .timeout = 120) {
  static const char *const modes[][6] = {{"-z", "1", NULL},
                                         {"-z", "2", NULL},
                                         {"-z", "3", NULL},
                                         {"-y", "1", "-m", "3", NULL},
                                         {"-m", "4", "-a", "0", NULL},
                                         {"-a", "2", "-C", "1", NULL},
                                         {"-a", "3", "-u", "1", NULL},
                                         {"-R", "1", "-g", "2", NULL}};
  static const char *const which[] = {"reduce_perf", "sendrecv_perf", "hypercube_perf"};
  for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
    for (int w = 0; w < 3; w++) {
      char path[512], what[128];
      bin_path(path, sizeof(path), which[w]);
      const char *list[MAX_ARGS] = {path, "-b", "8",  "-e", "64K", "-f", "8",
                                    "-n", "3",  "-t", "2",  "-r",  "all"};
      int n = 13;
      for (int k = 0; modes[m][k]; k++) list[n++] = modes[m][k];
      list[n] = NULL;
      int ranks = 2 * (strcmp(modes[m][0], "-R") == 0 ? 2 : 1);
      int roots = strcmp(which[w], "reduce_perf") == 0 ? ranks : 1;
      snprintf(what, sizeof(what), "%s %s %s", which[w], modes[m][0], modes[m][1]);
      char *argv[MAX_ARGS];
      make_argv(argv, list);
      expect_clean(argv, what, ranks, 5 * roots);
      free_argv(argv);
    }
  }
}

Test(perf, json_report, .timeout = 60) {
  char path[512], json[] = "/tmp/weft_perf_json.XXXXXX";
  bin_path(path, sizeof(path), "all_gather_perf");
  int fd = mkstemp(json);
  cr_assert(fd >= 0);
  close(fd);
  unlink(json);  // the benchmark creates it and never overwrites
  char *argv[MAX_ARGS];
  make_argv(argv, (const char *const[]){path, "-b", "1K", "-e", "4K", "-f", "2", "-n", "2", "-t",
                                        "2", "-J", json, NULL});
  expect_clean(argv, "all_gather_perf -J", 2, 3);
  free_argv(argv);
  FILE *f = fopen(json, "r");
  cr_assert_not_null(f, "no JSON written to %s", json);
  char body[1 << 14];
  size_t n = fread(body, 1, sizeof(body) - 1, f);
  body[n] = '\0';
  fclose(f);
  unlink(json);
  cr_expect(n > 0 && body[0] == '{' && strstr(body, "}\n") == body + n - 2, "%s", body);
  cr_expect_not_null(strstr(body, "\"results\":[{\"size\":1024,"), "%s", body);
  cr_expect_not_null(strstr(body, "\"out_of_bounds\":{\"count\":0,\"okay\":\"true\"}"), "%s", body);
  int rows = 0;
  for (const char *p = body; (p = strstr(p, "\"in_place\":")) != NULL; p++) rows++;
  cr_expect_eq(rows, 3, "%d JSON rows\n%s", rows, body);
}

Test(perf, bad_flags_are_refused, .timeout = 60) {
  static const char *const bad[][5] = {{"-Q", NULL},        {"-b", "lots", NULL},
                                       {"-n", "0", NULL},   {"-d", "float17", NULL},
                                       {"-o", "xor", NULL}, {"-b", "1M", "-e", "1K", NULL},
                                       {"-z", "9", NULL},   {"-t", NULL},
                                       {"stray", NULL},     {"-r", "7", NULL}};
  static const char *const says[] = {
      "invalid option", "invalid value", "invalid value", "types are",           "ops are",
      "minbytes",       "invalid value", "needs a value", "unexpected argument", "not a rank"};
  char path[512];
  bin_path(path, sizeof(path), "broadcast_perf");
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    const char *list[8] = {path};
    int n = 1;
    for (int k = 0; bad[i][k]; k++) list[n++] = bad[i][k];
    list[n] = NULL;
    char *argv[MAX_ARGS], *text = NULL;
    make_argv(argv, list);
    int status = run_cmd(argv, &text);
    cr_expect(status > 0 && status < 128, "%s: exit status %d (want a usage error)", bad[i][0],
              status);
    cr_expect_not_null(strstr(text, says[i]), "%s: message lacks '%s':\n%s", bad[i][0], says[i],
                       text);
    free(text);
    free_argv(argv);
  }
}

// Under torchrun-style variables each process is one rank; more is refused.
Test(perf, launcher_environment_one_rank_per_process, .timeout = 60) {
  char path[512];
  bin_path(path, sizeof(path), "all_reduce_perf");
  // A free loopback port for the rendezvous: weft listens on MASTER_PORT +
  // WEFT_MASTER_PORT_OFFSET (1).
  int free_port = weft_test_free_port();
  cr_assert(free_port > 0, "no free port");
  char port[16];
  snprintf(port, sizeof(port), "%d", free_port - 1);
  pid_t pids[2];
  char outs[2][40];
  for (int r = 0; r < 2; r++) {
    snprintf(outs[r], sizeof(outs[r]), "/tmp/weft_perf_env.XXXXXX");
    int fd = mkstemp(outs[r]);
    cr_assert(fd >= 0);
    fflush(NULL);
    pids[r] = fork();
    cr_assert(pids[r] >= 0);
    if (pids[r] == 0) {
      for (int i = 0; launcher_vars[i]; i++) unsetenv(launcher_vars[i]);
      char rank[16];
      snprintf(rank, sizeof(rank), "%d", r);
      setenv("RANK", rank, 1), setenv("WORLD_SIZE", "2", 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1), setenv("MASTER_PORT", port, 1);
      setenv("NCCL_SOCKET_IFNAME", "lo", 1), setenv("WEFT_TIMEOUT", "30", 1);
      dup2(fd, 1), dup2(fd, 2);
      alarm(50);
      execl(path, path, "-b", "8", "-e", "4K", "-f", "8", "-n", "2", (char *)NULL);
      _exit(127);
    }
    close(fd);
  }
  for (int r = 0; r < 2; r++) {
    int st;
    waitpid(pids[r], &st, 0);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d failed", r);
  }
  FILE *f = fopen(outs[0], "r");
  cr_assert_not_null(f);
  char text[1 << 14];
  size_t n = fread(text, 1, sizeof(text) - 1, f);
  text[n] = '\0';
  fclose(f);
  report_t rep;
  parse(text, &rep);
  cr_expect(rep.header && rep.ranks == 2 && rep.rows == 4 && rep.bad_rows == 0 && rep.footer_ok,
            "rank 0's report:\n%s", text);
  f = fopen(outs[1], "r");
  cr_assert_not_null(f);
  n = fread(text, 1, sizeof(text) - 1, f);
  fclose(f);
  cr_expect_eq(n, 0, "rank 1 printed %zu bytes; only rank 0 prints", n);
  unlink(outs[0]), unlink(outs[1]);

  char *argv[MAX_ARGS], *out = NULL;
  char *env[] = {"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=1", NULL};
  make_argv(argv, (const char *const[]){path, "-t", "2", NULL});
  int status = run_env(argv, env, &out);
  cr_expect_eq(status, 2, "-t 2 under torchrun variables: exit %d\n%s", status, out);
  cr_expect_not_null(strstr(out, "each process is one rank"), "%s", out);
  free(out);
  free_argv(argv);
}
