/*
 * test_api_comm.c — creating communicators through the public API only:
 * ncclCommSplit (key order, ties, NCCL_SPLIT_NOCOLOR, splits of splits,
 * destroy order), ncclConfig_t (blocking, commName, bad magic, bad blocking),
 * non-blocking initialisation (one rank per process, and one thread that
 * initialises every rank of a job), ncclCommInitAll and
 * ncclCommInitRankScalable.
 *
 * Multi-process tests fork their ranks from the test process, which calls
 * ncclGetUniqueId and so hosts the rendezvous. A rank reports failed checks
 * on stderr and exits with their count; the test waits with a deadline and
 * kills what is left.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"
#include "weft.h"

#define MAX_RANKS 16
#define RANK_TIMED_OUT (-1)
#define RANK_RUNNING (-2)

/* ---------- checks inside a forked rank ---------- */

static int g_rank = -1;  // this process's rank once forked
static int g_fails;      // failed checks in this rank

#define CHECK(cond, ...)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      g_fails++;                                                                         \
      fprintf(stderr, "[rank %d] %s:%d: check failed: %s: ", g_rank, __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                                      \
      fputc('\n', stderr);                                                               \
    }                                                                                    \
  } while (0)

#define CHECK_RES(call, want)                                                           \
  do {                                                                                  \
    ncclResult_t r_ = (call);                                                           \
    CHECK(r_ == (want), "returned %d (%s), expected %d", (int)r_, ncclGetErrorString(r_), (int)(want)); \
  } while (0)

// The same, in the test process itself.
#define EXPECT_RES(call, want)                                                          \
  do {                                                                                  \
    ncclResult_t r_ = (call);                                                           \
    cr_expect(r_ == (want), "%s returned %d (%s), expected %d", #call, (int)r_, ncclGetErrorString(r_), \
              (int)(want));                                                             \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// Loopback only, and bounded waits, before the library reads either knob.
static void base_env(const char *timeout_s) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("WEFT_TIMEOUT", timeout_s, 1);
}

/* ---------- forking ranks ---------- */

typedef void (*rank_fn)(int rank, int nranks, void *arg);

// Forks nranks ranks running fn; waits until all exit or limit_s passes,
// then kills the rest. status[r]: exit code, 128+signal, or RANK_TIMED_OUT.
static void run_ranks(int nranks, rank_fn fn, void *arg, double limit_s, int *status) {
  pid_t pids[MAX_RANKS];
  cr_assert(nranks >= 1 && nranks <= MAX_RANKS);
  fflush(NULL);
  for (int r = 0; r < nranks; r++) {
    pid_t pid = fork();
    if (pid == 0) {
      g_rank = r;
      g_fails = 0;
      fn(r, nranks, arg);
      fflush(NULL);
      _exit(g_fails > 100 ? 100 : g_fails);
    }
    if (pid < 0) {
      for (int q = 0; q < r; q++) kill(pids[q], SIGKILL);
      cr_assert_fail("fork: %s", strerror(errno));
    }
    pids[r] = pid;
    status[r] = RANK_RUNNING;  // still running
  }
  double end = now_s() + limit_s;
  for (int left = nranks; left > 0;) {
    for (int r = 0; r < nranks; r++) {
      int st;
      if (status[r] != RANK_RUNNING || waitpid(pids[r], &st, WNOHANG) != pids[r]) continue;
      status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      left--;
    }
    if (left > 0 && now_s() > end) {
      for (int r = 0; r < nranks; r++) {
        if (status[r] != RANK_RUNNING) continue;
        kill(pids[r], SIGKILL);
        waitpid(pids[r], NULL, 0);
        status[r] = RANK_TIMED_OUT;
      }
      break;
    }
    if (left > 0) sleep_ms(5);
  }
}

static void expect_ranks_ok(int nranks, const int *status) {
  for (int r = 0; r < nranks; r++) {
    if (status[r] == RANK_TIMED_OUT) cr_expect_fail("rank %d did not finish in time (killed)", r);
    else if (status[r] >= 128) cr_expect_fail("rank %d died of signal %d", r, status[r] - 128);
    else cr_expect_eq(status[r], 0, "rank %d reported %d failed checks (see stderr)", r, status[r]);
  }
}

/* ---------- helpers used by ranks ---------- */

typedef struct {
  ncclUniqueId id[4];
} job_t;

static void new_ids(job_t *job, int n) {
  for (int i = 0; i < n; i++) cr_assert_eq(ncclGetUniqueId(&job->id[i]), ncclSuccess, "ncclGetUniqueId");
}

static ncclComm_t init_rank(int nranks, ncclUniqueId id, int rank) {
  ncclComm_t comm = NULL;
  CHECK_RES(ncclCommInitRank(&comm, nranks, id, rank), ncclSuccess);
  return comm;
}

// Checks count and rank of comm.
static void check_shape(ncclComm_t comm, int want_count, int want_rank) {
  int count = -1, rank = -1;
  CHECK_RES(ncclCommCount(comm, &count), ncclSuccess);
  CHECK_RES(ncclCommUserRank(comm, &rank), ncclSuccess);
  CHECK(count == want_count, "count %d, expected %d", count, want_count);
  CHECK(rank == want_rank, "rank %d, expected %d", rank, want_rank);
}

// AllReduce (sum) of `mine` over comm must give `want` everywhere.
static void check_allreduce(ncclComm_t comm, double mine, double want) {
  enum { N = 1000 };
  double *buf = malloc(N * sizeof(double));
  CHECK(buf != NULL, "malloc");
  if (buf == NULL) return;
  for (int i = 0; i < N; i++) buf[i] = mine + i;
  int nranks = 0;
  ncclCommCount(comm, &nranks);
  CHECK_RES(ncclAllReduce(buf, buf, N, ncclFloat64, ncclSum, comm, NULL), ncclSuccess);
  int bad = 0;
  for (int i = 0; i < N; i++) bad += buf[i] != want + (double)i * nranks;
  CHECK(bad == 0, "%d of %d elements wrong (buf[0]=%g, expected %g)", bad, N, buf[0], want);
  free(buf);
}

/* ---------- ncclCommSplit ---------- */

// Parent ranks with the same parity, ordered as the split must order them.
static int split_rank_reversed(int rank, int nranks) {
  int before = 0;
  for (int q = rank % 2; q < nranks; q += 2) before += q > rank;  // key -q: larger q first
  return before;
}

static void split_body(int rank, int nranks, void *arg) {
  job_t *job = arg;
  ncclComm_t parent = init_rank(nranks, job->id[0], rank);
  if (parent == NULL) return;
  int color = rank % 2, members = 0;
  double sum = 0;
  for (int q = color; q < nranks; q += 2, members++) sum += q + 1;

  // Color by parity, reversed order through negative keys.
  ncclComm_t child = NULL;
  CHECK_RES(ncclCommSplit(parent, color, -rank, &child, NULL), ncclSuccess);
  CHECK(child != NULL, "split gave no communicator");
  if (child == NULL) return;
  int my = split_rank_reversed(rank, nranks);
  check_shape(child, members, my);
  int32_t who[MAX_RANKS] = {0}, me32 = rank;
  CHECK_RES(ncclAllGather(&me32, who, 1, ncclInt32, child, NULL), ncclSuccess);
  for (int i = 0; i < members; i++) {
    int want = -1;
    for (int q = color; q < nranks; q += 2)
      if (split_rank_reversed(q, nranks) == i) want = q;
    CHECK(who[i] == want, "child rank %d is parent rank %d, expected %d", i, who[i], want);
  }
  check_allreduce(child, rank + 1, sum);

  // Ties (keys 1,1,1,0,0) break by parent rank; the last rank opts out.
  ncclComm_t tie = (ncclComm_t)&tie;  // must be overwritten with NULL
  int tie_key = rank < 3 ? 1 : 0;
  CHECK_RES(ncclCommSplit(parent, rank == nranks - 1 ? NCCL_SPLIT_NOCOLOR : 7, tie_key, &tie, NULL), ncclSuccess);
  if (rank == nranks - 1) {
    CHECK(tie == NULL, "NCCL_SPLIT_NOCOLOR rank got %p, expected NULL", (void *)tie);
  } else {
    int zero_keys = nranks - 1 - 3, want = rank < 3 ? zero_keys + rank : rank - 3;
    check_shape(tie, nranks - 1, want);
    double tsum = 0;
    for (int q = 0; q < nranks - 1; q++) tsum += 10 * q;
    check_allreduce(tie, 10 * rank, tsum);
    CHECK_RES(ncclCommDestroy(tie), ncclSuccess);
  }

  // A split of the split: the first two child ranks, same key.
  ncclComm_t grand = NULL;
  CHECK_RES(ncclCommSplit(child, my < 2 ? 0 : NCCL_SPLIT_NOCOLOR, 5, &grand, NULL), ncclSuccess);
  if (my < 2) {
    CHECK(grand != NULL, "split of a split gave no communicator");
    if (grand != NULL) {
      check_shape(grand, 2, my);
      check_allreduce(grand, my + 1, 3);
    }
  } else {
    CHECK(grand == NULL, "NCCL_SPLIT_NOCOLOR rank got %p", (void *)grand);
  }

  // Even ranks destroy children first; odd ranks destroy the parent first
  // and the child must keep working without it.
  if (color == 0) {
    CHECK_RES(ncclCommDestroy(grand), ncclSuccess);
    CHECK_RES(ncclCommDestroy(child), ncclSuccess);
    CHECK_RES(ncclCommDestroy(parent), ncclSuccess);
  } else {
    CHECK_RES(ncclCommDestroy(parent), ncclSuccess);
    check_allreduce(child, rank + 1, sum);
    CHECK_RES(ncclCommDestroy(child), ncclSuccess);
    CHECK_RES(ncclCommDestroy(grand), ncclSuccess);
  }
}

Test(api_comm, split_orders_by_key_then_rank, .timeout = 60) {
  base_env("20");
  job_t job;
  new_ids(&job, 1);
  int status[6];
  run_ranks(6, split_body, &job, 45, status);
  expect_ranks_ok(6, status);
}

// Split arguments that every rank gets wrong alike fail without a hang.
static void split_bad_args_body(int rank, int nranks, void *arg) {
  job_t *job = arg;
  ncclComm_t comm = init_rank(nranks, job->id[0], rank);
  if (comm == NULL) return;
  ncclComm_t child = (ncclComm_t)&child;
  CHECK_RES(ncclCommSplit(comm, -5, 0, &child, NULL), ncclInvalidArgument);
  CHECK_RES(ncclCommSplit(comm, 0, 0, NULL, NULL), ncclInvalidArgument);
  CHECK_RES(ncclCommSplit(NULL, 0, 0, &child, NULL), ncclInvalidArgument);
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 0x12345678;
  CHECK_RES(ncclCommSplit(comm, 0, 0, &child, &bad), ncclInvalidArgument);
  ncclConfig_t twice = NCCL_CONFIG_INITIALIZER;
  twice.blocking = 2;
  CHECK_RES(ncclCommSplit(comm, 0, 0, &child, &twice), ncclInvalidArgument);
  // The parent still works after the refusals.
  check_allreduce(comm, rank, nranks * (nranks - 1) / 2.0);
  CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
}

Test(api_comm, split_rejects_bad_arguments, .timeout = 40) {
  base_env("10");
  job_t job;
  new_ids(&job, 1);
  int status[2];
  run_ranks(2, split_bad_args_body, &job, 30, status);
  expect_ranks_ok(2, status);
}

/* ---------- ncclConfig_t ---------- */

static void config_named_body(int rank, int nranks, void *arg) {
  job_t *job = arg;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 1;
  cfg.commName = "api-test-comm";
  ncclComm_t comm = NULL;
  CHECK_RES(ncclCommInitRankConfig(&comm, nranks, job->id[0], rank, &cfg), ncclSuccess);
  if (comm == NULL) return;
  ncclResult_t async = ncclInternalError;
  CHECK_RES(ncclCommGetAsyncError(comm, &async), ncclSuccess);
  CHECK(async == ncclSuccess, "async error %d after a blocking init", (int)async);
  check_shape(comm, nranks, rank);
  check_allreduce(comm, rank, nranks * (nranks - 1) / 2.0);
  CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
}

Test(api_comm, config_blocking_with_name, .timeout = 40) {
  base_env("20");
  job_t job;
  new_ids(&job, 1);
  int status[3];
  run_ranks(3, config_named_body, &job, 30, status);
  expect_ranks_ok(3, status);
}

Test(api_comm, config_rejects_bad_magic_and_blocking, .timeout = 20) {
  base_env("5");
  ncclUniqueId id;
  cr_assert_eq(ncclGetUniqueId(&id), ncclSuccess);
  double t0 = now_s();
  ncclComm_t comm = NULL;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.magic = 0xdeadbeef;
  EXPECT_RES(ncclCommInitRankConfig(&comm, 2, id, 0, &cfg), ncclInvalidArgument);
  ncclConfig_t two = NCCL_CONFIG_INITIALIZER;
  two.blocking = 2;
  EXPECT_RES(ncclCommInitRankConfig(&comm, 2, id, 0, &two), ncclInvalidArgument);
  ncclConfig_t neg = NCCL_CONFIG_INITIALIZER;
  neg.blocking = -1;
  EXPECT_RES(ncclCommInitRankConfig(&comm, 2, id, 0, &neg), ncclInvalidArgument);
  ncclConfig_t ok = NCCL_CONFIG_INITIALIZER;
  EXPECT_RES(ncclCommInitRankScalable(&comm, 2, 0, 1, &id, &two), ncclInvalidArgument);
  EXPECT_RES(ncclCommInitRankConfig(NULL, 2, id, 0, &ok), ncclInvalidArgument);
  cr_expect_lt(now_s() - t0, 2.0, "refusals must not wait for peers");
}

static ncclResult_t wait_async(ncclComm_t comm, double limit_s) {
  double end = now_s() + limit_s;
  ncclResult_t async = ncclInProgress;
  while (now_s() < end) {
    ncclResult_t r = ncclCommGetAsyncError(comm, &async);
    if (r != ncclSuccess) return r;
    if (async != ncclInProgress) return async;
    sleep_ms(2);
  }
  return ncclInProgress;
}

static void nonblocking_body(int rank, int nranks, void *arg) {
  job_t *job = arg;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t comm = NULL;
  ncclResult_t r = ncclCommInitRankConfig(&comm, nranks, job->id[0], rank, &cfg);
  CHECK(r == ncclInProgress || r == ncclSuccess, "non-blocking init returned %d", (int)r);
  CHECK(comm != NULL, "non-blocking init gave no communicator handle");
  if (comm == NULL) return;
  CHECK_RES(wait_async(comm, 20), ncclSuccess);
  check_shape(comm, nranks, rank);
  check_allreduce(comm, rank, nranks * (nranks - 1) / 2.0);
  CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
}

Test(api_comm, nonblocking_init_per_process, .timeout = 40) {
  base_env("20");
  job_t job;
  new_ids(&job, 1);
  int status[3];
  run_ranks(3, nonblocking_body, &job, 30, status);
  expect_ranks_ok(3, status);
}

// AllReduce (sum of rank) over comms[0..n-1] from one thread, in one group.
static void group_allreduce_all(ncclComm_t *comms, int n) {
  enum { N = 4099 };
  float *buf[MAX_RANKS];
  for (int r = 0; r < n; r++) {
    buf[r] = malloc(N * sizeof(float));
    cr_assert_not_null(buf[r]);
    for (int i = 0; i < N; i++) buf[r][i] = (float)(r + (i % 7));
  }
  EXPECT_RES(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; r++) EXPECT_RES(ncclAllReduce(buf[r], buf[r], N, ncclFloat32, ncclSum, comms[r], NULL), ncclSuccess);
  ncclResult_t end = ncclGroupEnd();
  cr_expect(end == ncclSuccess || end == ncclInProgress, "ncclGroupEnd returned %d", (int)end);
  for (int r = 0; end == ncclInProgress && r < n; r++) EXPECT_RES(wait_async(comms[r], 20), ncclSuccess);
  float base = (float)(n * (n - 1) / 2);
  for (int r = 0; r < n; r++) {
    int bad = 0;
    for (int i = 0; i < N; i++) bad += buf[r][i] != base + (float)(n * (i % 7));
    cr_expect_eq(bad, 0, "rank %d: %d elements wrong (buf[0]=%g, expected %g)", r, bad, buf[r][0], base);
    free(buf[r]);
  }
}

Test(api_comm, nonblocking_init_all_ranks_from_one_thread, .timeout = 40) {
  base_env("20");
  enum { N = 4 };
  ncclUniqueId id;
  cr_assert_eq(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comms[N] = {0};
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  for (int r = 0; r < N; r++) {
    ncclResult_t res = ncclCommInitRankConfig(&comms[r], N, id, r, &cfg);
    cr_assert(res == ncclInProgress || res == ncclSuccess, "rank %d: non-blocking init returned %d", r, (int)res);
    cr_assert_not_null(comms[r], "rank %d: no handle", r);
  }
  for (int r = 0; r < N; r++) cr_assert_eq(wait_async(comms[r], 20), ncclSuccess, "rank %d did not come up", r);
  for (int r = 0; r < N; r++) {
    int count = 0, rank = -1;
    EXPECT_RES(ncclCommCount(comms[r], &count), ncclSuccess);
    EXPECT_RES(ncclCommUserRank(comms[r], &rank), ncclSuccess);
    cr_expect(count == N && rank == r, "comm %d: count %d rank %d", r, count, rank);
  }
  group_allreduce_all(comms, N);
  for (int r = 0; r < N; r++) EXPECT_RES(ncclCommDestroy(comms[r]), ncclSuccess);
}

/* ---------- ncclCommInitAll ---------- */

Test(api_comm, init_all_and_one_group_over_every_comm, .timeout = 40) {
  base_env("20");
  enum { N = 4 };
  ncclComm_t comms[N] = {0};
  cr_assert_eq(ncclCommInitAll(comms, N, NULL), ncclSuccess);
  for (int r = 0; r < N; r++) {
    int count = 0, rank = -1, dev = -1;
    EXPECT_RES(ncclCommCount(comms[r], &count), ncclSuccess);
    EXPECT_RES(ncclCommUserRank(comms[r], &rank), ncclSuccess);
    EXPECT_RES(ncclCommCuDevice(comms[r], &dev), ncclSuccess);
    cr_expect(count == N && rank == r && dev == r, "comm %d: count %d rank %d device %d", r, count, rank, dev);
  }
  group_allreduce_all(comms, N);
  group_allreduce_all(comms, N);  // and again on the same communicators
  for (int r = 0; r < N; r++) EXPECT_RES(ncclCommDestroy(comms[r]), ncclSuccess);

  int devs[3] = {7, 5, 3};
  ncclComm_t three[3] = {0};
  cr_assert_eq(ncclCommInitAll(three, 3, devs), ncclSuccess);
  for (int r = 0; r < 3; r++) {
    int dev = -1;
    EXPECT_RES(ncclCommCuDevice(three[r], &dev), ncclSuccess);
    cr_expect_eq(dev, devs[r], "comm %d: device %d, expected devlist[%d]=%d", r, dev, r, devs[r]);
  }
  group_allreduce_all(three, 3);
  for (int r = 0; r < 3; r++) EXPECT_RES(ncclCommDestroy(three[r]), ncclSuccess);
}

Test(api_comm, init_all_rejects_bad_arguments, .timeout = 20) {
  base_env("5");
  ncclComm_t comms[2] = {0};
  EXPECT_RES(ncclCommInitAll(comms, 0, NULL), ncclInvalidArgument);
  EXPECT_RES(ncclCommInitAll(comms, -3, NULL), ncclInvalidArgument);
  EXPECT_RES(ncclCommInitAll(NULL, 2, NULL), ncclInvalidArgument);
  int bad_dev[2] = {0, -1};
  EXPECT_RES(ncclCommInitAll(comms, 2, bad_dev), ncclInvalidArgument);
}

/* ---------- ncclCommInitRankScalable ---------- */

static void scalable_body(int rank, int nranks, void *arg) {
  job_t *job = arg;
  ncclComm_t comm = NULL;
  CHECK_RES(ncclCommInitRankScalable(&comm, nranks, rank, 2, job->id, NULL), ncclSuccess);
  if (comm == NULL) return;
  check_shape(comm, nranks, rank);
  check_allreduce(comm, rank * 2.0, (double)nranks * (nranks - 1));
  CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
}

Test(api_comm, init_scalable_two_ids_five_ranks, .timeout = 40) {
  base_env("8");
  job_t job;
  new_ids(&job, 2);
  int status[5];
  run_ranks(5, scalable_body, &job, 30, status);
  expect_ranks_ok(5, status);
}

Test(api_comm, init_scalable_rejects_bad_id_counts, .timeout = 20) {
  base_env("5");
  ncclUniqueId ids[2];
  cr_assert_eq(ncclGetUniqueId(&ids[0]), ncclSuccess);
  ids[1] = ids[0];
  ncclComm_t comm = NULL;
  EXPECT_RES(ncclCommInitRankScalable(&comm, 2, 0, 0, ids, NULL), ncclInvalidArgument);
  EXPECT_RES(ncclCommInitRankScalable(&comm, 2, 0, 3, ids, NULL), ncclInvalidArgument);
  EXPECT_RES(ncclCommInitRankScalable(&comm, 2, 0, 1, NULL, NULL), ncclInvalidArgument);
  EXPECT_RES(ncclCommInitRankScalable(&comm, 2, 2, 1, ids, NULL), ncclInvalidArgument);
}
