/*
 * test_api_streams.c — asynchronous and end-of-life behaviour through the
 * public API only: weft host streams (calls return at once, run in order,
 * complete at weftStreamSynchronize), ncclMemAlloc/ncclMemFree and buffer
 * registration, ncclCommAbort freeing a peer (or another thread) blocked in
 * a collective, and no leaks: no /dev/shm segments left behind, even by a
 * rank killed with SIGKILL, and no file descriptors left open by repeated
 * init/destroy cycles.
 *
 * Multi-process tests fork their ranks from the test process, which calls
 * ncclGetUniqueId and so hosts the rendezvous. A rank reports failed checks
 * on stderr and exits with their count; the test waits with a deadline and
 * kills what is left.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
  ncclUniqueId id;
} job_t;

static ncclComm_t init_rank(int nranks, ncclUniqueId id, int rank) {
  ncclComm_t comm = NULL;
  CHECK_RES(ncclCommInitRank(&comm, nranks, id, rank), ncclSuccess);
  return comm;
}

// A blocking AllReduce (sum of rank) that also lines the ranks up.
static void check_sync_allreduce(ncclComm_t comm, int rank, int nranks) {
  int32_t v[8];
  for (int i = 0; i < 8; i++) v[i] = rank;
  CHECK_RES(ncclAllReduce(v, v, 8, ncclInt32, ncclSum, comm, NULL), ncclSuccess);
  CHECK(v[7] == nranks * (nranks - 1) / 2, "sum %d, expected %d", v[7], nranks * (nranks - 1) / 2);
}

static void *shared_alloc(size_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert(p != MAP_FAILED, "mmap: %s", strerror(errno));
  memset(p, 0, bytes);
  return p;
}

/* ---------- weft host streams ---------- */

enum { STREAM_N = 50000, STREAM_K = 10 };  // 400 KB per call: several FIFO slots

static void stream_body(int rank, int nranks, void *arg) {
  job_t *job = arg;
  ncclComm_t comm = init_rank(nranks, job->id, rank);
  double *buf = malloc(STREAM_N * sizeof(double));
  CHECK(buf != NULL, "malloc");
  if (comm == NULL || buf == NULL) return;
  cudaStream_t s = NULL;
  CHECK_RES(weftStreamCreate(&s), ncclSuccess);
  CHECK(s != NULL, "weftStreamCreate gave NULL");
  for (int i = 0; i < STREAM_N; i++) buf[i] = 1 + i % 2;
  check_sync_allreduce(comm, rank, nranks);

  // Rank 1 comes late, so no rank can finish even its first call before then.
  if (rank == 1) sleep_ms(300);
  double t0 = now_s();
  for (int k = 0; k < STREAM_K; k++)
    CHECK_RES(ncclAllReduce(buf, buf, STREAM_N, ncclFloat64, ncclSum, comm, s), ncclSuccess);
  double queued = now_s() - t0;
  ncclResult_t q = weftStreamQuery(s);
  if (rank != 1) {
    CHECK(queued < 0.25, "%d calls on a stream took %.3f s to return", STREAM_K, queued);
    CHECK(q == ncclInProgress, "weftStreamQuery returned %d while a peer has not joined", (int)q);
  } else {
    CHECK(q == ncclInProgress || q == ncclSuccess, "weftStreamQuery returned %d", (int)q);
  }
  CHECK_RES(weftStreamSynchronize(s), ncclSuccess);
  CHECK_RES(weftStreamQuery(s), ncclSuccess);
  // In place, each call reduces the previous one's output: nranks^K.
  double scale = pow(nranks, STREAM_K);
  int bad = 0;
  for (int i = 0; i < STREAM_N; i++) bad += buf[i] != (1 + i % 2) * scale;
  CHECK(bad == 0, "%d elements wrong: buf[0]=%g buf[1]=%g, expected %g and %g", bad, buf[0], buf[1], scale,
        2 * scale);

  // The stream can be used again after a synchronize.
  CHECK_RES(ncclAllReduce(buf, buf, STREAM_N, ncclFloat64, ncclMin, comm, s), ncclSuccess);
  CHECK_RES(weftStreamSynchronize(s), ncclSuccess);
  CHECK(buf[1] == 2 * scale, "after ncclMin buf[1]=%g", buf[1]);
  CHECK_RES(weftStreamDestroy(s), ncclSuccess);
  CHECK_RES(ncclAllReduce(buf, buf, STREAM_N, ncclFloat64, ncclSum, comm, s), ncclInvalidArgument);
  CHECK_RES(weftStreamSynchronize(s), ncclInvalidArgument);
  CHECK_RES(weftStreamSynchronize(NULL), ncclSuccess);
  CHECK_RES(weftStreamQuery(NULL), ncclSuccess);
  CHECK_RES(weftStreamCreate(NULL), ncclInvalidArgument);
  CHECK_RES(weftStreamDestroy(NULL), ncclInvalidArgument);
  CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  free(buf);
}

Test(api_streams, stream_calls_return_at_once_and_run_in_order, .timeout = 40) {
  base_env("20");
  job_t job;
  cr_assert_eq(ncclGetUniqueId(&job.id), ncclSuccess);
  int status[3];
  run_ranks(3, stream_body, &job, 30, status);
  expect_ranks_ok(3, status);
}

// One thread drives both ranks of a pair, one stream each, without a group:
// only asynchronous calls can make this finish.
Test(api_streams, one_thread_two_ranks_two_streams, .timeout = 30) {
  base_env("10");
  enum { N = 40000, K = 5 };
  ncclComm_t comms[2] = {0};
  cr_assert_eq(ncclCommInitAll(comms, 2, NULL), ncclSuccess);
  cudaStream_t s[2] = {0};
  float *buf[2];
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(weftStreamCreate(&s[r]), ncclSuccess);
    buf[r] = malloc(N * sizeof(float));
    cr_assert_not_null(buf[r]);
    for (int i = 0; i < N; i++) buf[r][i] = (float)(i % 5);
  }
  for (int k = 0; k < K; k++)
    for (int r = 0; r < 2; r++)
      EXPECT_RES(ncclAllReduce(buf[r], buf[r], N, ncclFloat32, ncclSum, comms[r], s[r]), ncclSuccess);
  for (int r = 0; r < 2; r++) EXPECT_RES(weftStreamSynchronize(s[r]), ncclSuccess);
  for (int r = 0; r < 2; r++) {
    int bad = 0;
    for (int i = 0; i < N; i++) bad += buf[r][i] != (float)((i % 5) << K);
    cr_expect_eq(bad, 0, "rank %d: %d elements wrong (buf[1]=%g)", r, bad, buf[r][1]);
  }
  // Both ranks' calls on one stream, in one group.
  EXPECT_RES(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; r++)
    EXPECT_RES(ncclAllReduce(buf[r], buf[r], N, ncclFloat32, ncclMax, comms[r], s[0]), ncclSuccess);
  EXPECT_RES(ncclGroupEnd(), ncclSuccess);
  EXPECT_RES(weftStreamSynchronize(s[0]), ncclSuccess);
  cr_expect(buf[0][1] == (float)(1 << K) && buf[1][1] == (float)(1 << K), "after the grouped max: %g %g",
            buf[0][1], buf[1][1]);
  for (int r = 0; r < 2; r++) {
    EXPECT_RES(weftStreamDestroy(s[r]), ncclSuccess);
    EXPECT_RES(ncclCommDestroy(comms[r]), ncclSuccess);
    free(buf[r]);
  }
}

/* ---------- ncclMemAlloc and registration ---------- */

Test(api_streams, mem_alloc_round_trip, .timeout = 20) {
  enum { MIB = 1 << 20 };
  unsigned char *p = NULL;
  cr_assert_eq(ncclMemAlloc((void **)&p, MIB), ncclSuccess);
  cr_assert_not_null(p);
  for (size_t i = 0; i < MIB; i++) p[i] = (unsigned char)(i * 31 + 7);
  size_t bad = 0;
  for (size_t i = 0; i < MIB; i++) bad += p[i] != (unsigned char)(i * 31 + 7);
  cr_expect_eq(bad, 0, "%zu bytes did not read back", bad);
  void *q = NULL;
  cr_assert_eq(ncclMemAlloc(&q, 100), ncclSuccess);  // an odd size
  memset(q, 1, 100);
  cr_expect_neq(q, (void *)p);
  EXPECT_RES(ncclMemFree(p), ncclSuccess);
  EXPECT_RES(ncclMemFree(q), ncclSuccess);
  EXPECT_RES(ncclMemFree(NULL), ncclSuccess);
  void *z = (void *)&z;
  EXPECT_RES(ncclMemAlloc(&z, 0), ncclInvalidArgument);
  EXPECT_RES(ncclMemAlloc(NULL, 64), ncclInvalidArgument);
}

static void memalloc_body(int rank, int nranks, void *arg) {
  job_t *job = arg;
  enum { N = (1 << 20) / sizeof(float) };
  ncclComm_t comm = init_rank(nranks, job->id, rank);
  float *send = NULL, *recv = NULL;
  CHECK_RES(ncclMemAlloc((void **)&send, N * sizeof(float)), ncclSuccess);
  CHECK_RES(ncclMemAlloc((void **)&recv, N * sizeof(float)), ncclSuccess);
  if (comm == NULL || send == NULL || recv == NULL) return;
  for (size_t i = 0; i < N; i++) send[i] = (float)(rank + 1) * (float)(i % 11);
  CHECK_RES(ncclAllReduce(send, recv, N, ncclFloat32, ncclSum, comm, NULL), ncclSuccess);
  float total = (float)(nranks * (nranks + 1) / 2);
  size_t bad = 0;
  for (size_t i = 0; i < N; i++) bad += recv[i] != total * (float)(i % 11);
  CHECK(bad == 0, "%zu elements wrong (recv[1]=%g, expected %g)", bad, recv[1], total);
  CHECK(send[1] == (float)(rank + 1), "the send buffer changed: %g", send[1]);

  // Registration round trip on the same buffers.
  void *h = NULL;
  CHECK_RES(ncclCommRegister(comm, send, N * sizeof(float), &h), ncclSuccess);
  CHECK(h != NULL, "no registration handle");
  CHECK_RES(ncclAllReduce(send, recv, N, ncclFloat32, ncclSum, comm, NULL), ncclSuccess);
  CHECK(recv[1] == total, "AllReduce from a registered buffer: recv[1]=%g", recv[1]);
  CHECK_RES(ncclCommDeregister(comm, h), ncclSuccess);
  CHECK_RES(ncclCommDeregister(comm, h), ncclInvalidArgument);
  CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  CHECK_RES(ncclMemFree(send), ncclSuccess);
  CHECK_RES(ncclMemFree(recv), ncclSuccess);
}

Test(api_streams, mem_alloc_buffers_in_an_allreduce, .timeout = 40) {
  base_env("20");
  job_t job;
  cr_assert_eq(ncclGetUniqueId(&job.id), ncclSuccess);
  int status[3];
  run_ranks(3, memalloc_body, &job, 30, status);
  expect_ranks_ok(3, status);
}

Test(api_streams, register_and_deregister, .timeout = 20) {
  base_env("10");
  ncclComm_t comms[2] = {0};
  cr_assert_eq(ncclCommInitAll(comms, 2, NULL), ncclSuccess);
  char buf[4096];
  void *h = NULL, *h2 = NULL;
  EXPECT_RES(ncclCommRegister(comms[0], buf, sizeof(buf), &h), ncclSuccess);
  cr_expect_not_null(h);
  EXPECT_RES(ncclCommRegister(comms[0], buf, 100, &h2), ncclSuccess);  // overlapping: a second handle
  cr_expect_neq(h, h2);
  EXPECT_RES(ncclCommDeregister(comms[1], h), ncclInvalidArgument);  // not comms[1]'s
  EXPECT_RES(ncclCommDeregister(comms[0], h), ncclSuccess);
  EXPECT_RES(ncclCommDeregister(comms[0], h), ncclInvalidArgument);
  EXPECT_RES(ncclCommDeregister(comms[0], h2), ncclSuccess);
  EXPECT_RES(ncclCommDeregister(comms[0], NULL), ncclInvalidArgument);
  EXPECT_RES(ncclCommRegister(comms[0], NULL, 64, &h), ncclInvalidArgument);
  EXPECT_RES(ncclCommRegister(comms[0], buf, 64, NULL), ncclInvalidArgument);
  EXPECT_RES(ncclCommRegister(NULL, buf, 64, &h), ncclInvalidArgument);
  // A registration still open at destroy is released with the communicator.
  EXPECT_RES(ncclCommRegister(comms[1], buf, sizeof(buf), &h), ncclSuccess);
  for (int r = 0; r < 2; r++) EXPECT_RES(ncclCommDestroy(comms[r]), ncclSuccess);
}

/* ---------- ncclCommAbort ---------- */

typedef struct {
  int res;
  int async;
  double secs;
} abort_out_t;

static abort_out_t *abort_out;  // shared with the ranks

static void abort_body(int rank, int nranks, void *arg) {
  job_t *job = arg;
  ncclComm_t comm = init_rank(nranks, job->id, rank);
  if (comm == NULL) return;
  check_sync_allreduce(comm, rank, nranks);
  if (rank == 1) {  // never joins the second AllReduce
    sleep_ms(500);
    CHECK_RES(ncclCommAbort(comm), ncclSuccess);
    return;
  }
  enum { N = 1 << 16 };
  float *buf = calloc(N, sizeof(float));
  CHECK(buf != NULL, "calloc");
  if (buf == NULL) return;
  double t0 = now_s();
  ncclResult_t r = ncclAllReduce(buf, buf, N, ncclFloat32, ncclSum, comm, NULL);
  abort_out->secs = now_s() - t0;
  abort_out->res = (int)r;
  ncclResult_t async = ncclSuccess;
  CHECK_RES(ncclCommGetAsyncError(comm, &async), ncclSuccess);
  abort_out->async = (int)async;
  CHECK(r != ncclSuccess, "the AllReduce succeeded although the peer aborted");
  CHECK(abort_out->secs < 5.0, "the AllReduce returned after %.1f s", abort_out->secs);
  CHECK(async != ncclSuccess, "no asynchronous error after the peer aborted");
  CHECK_RES(ncclCommAbort(comm), ncclSuccess);
  free(buf);
}

Test(api_streams, abort_frees_a_peer_blocked_in_a_collective, .timeout = 45) {
  base_env("60");  // far beyond the test: only the abort can free the peer
  abort_out = shared_alloc(sizeof(*abort_out));
  abort_out->res = -1;
  job_t job;
  cr_assert_eq(ncclGetUniqueId(&job.id), ncclSuccess);
  int status[2];
  run_ranks(2, abort_body, &job, 30, status);
  expect_ranks_ok(2, status);
  cr_log_info("peer of an aborted rank: AllReduce returned %d (%s) after %.3f s; async error %d", abort_out->res,
              ncclGetErrorString((ncclResult_t)abort_out->res), abort_out->secs, abort_out->async);
  EXPECT_RES(ncclCommAbort(NULL), ncclSuccess);
  munmap(abort_out, sizeof(*abort_out));
}

typedef struct {
  ncclComm_t comm;
  ncclResult_t res;
  double returned;
} blocked_t;

static void *blocked_allreduce(void *arg) {
  blocked_t *b = arg;
  static float buf[1 << 14];
  b->res = ncclAllReduce(buf, buf, 1 << 14, ncclFloat32, ncclSum, b->comm, NULL);
  b->returned = now_s();
  return NULL;
}

// A watchdog thread aborts a communicator another thread is blocked in.
Test(api_streams, abort_from_another_thread, .timeout = 60) {
  base_env("60");
  for (int round = 0; round < 6; round++) {
    ncclComm_t comms[2] = {0};
    cr_assert_eq(ncclCommInitAll(comms, 2, NULL), ncclSuccess);
    blocked_t b = {.comm = comms[0], .res = ncclSuccess};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, blocked_allreduce, &b), 0);
    sleep_ms(20 + 30 * round);
    double t0 = now_s();
    EXPECT_RES(ncclCommAbort(comms[0]), ncclSuccess);
    pthread_join(th, NULL);
    cr_expect_neq(b.res, ncclSuccess, "round %d: the blocked AllReduce succeeded", round);
    cr_expect_lt(b.returned - t0, 5.0, "round %d: the blocked AllReduce returned %.1f s after the abort", round,
                 b.returned - t0);
    EXPECT_RES(ncclCommDestroy(comms[1]), ncclSuccess);
  }
}

/* ---------- leaks ---------- */

#define SHM_PREFIX "weft-"

typedef struct {
  int n;
  char name[1024][256];
} shm_list_t;

static void list_shm(shm_list_t *l) {
  l->n = 0;
  DIR *d = opendir("/dev/shm");
  cr_assert_not_null(d, "opendir /dev/shm: %s", strerror(errno));
  for (struct dirent *e; (e = readdir(d)) != NULL && l->n < 1024;)
    if (strncmp(e->d_name, SHM_PREFIX, strlen(SHM_PREFIX)) == 0)
      snprintf(l->name[l->n++], sizeof(l->name[0]), "%s", e->d_name);
  closedir(d);
}

// Entries of `after` not in `before` made by one of pids (weft-<pid>-...).
static int new_entries_of(const shm_list_t *before, const shm_list_t *after, const pid_t *pids, int npids) {
  int found = 0;
  for (int i = 0; i < after->n; i++) {
    int old = 0;
    for (int j = 0; j < before->n && !old; j++) old = strcmp(after->name[i], before->name[j]) == 0;
    if (old) continue;
    int pid = atoi(after->name[i] + strlen(SHM_PREFIX)), ours = 0;
    for (int k = 0; k < npids && !ours; k++) ours = pids[k] == pid;
    if (ours) cr_log_error("left behind: /dev/shm/%s", after->name[i]);
    found += ours;
  }
  return found;
}

typedef struct {
  ncclUniqueId id;
  int kill_last;
  pid_t *pids;  // shared: each rank's pid
} leak_job_t;

static void leak_body(int rank, int nranks, void *arg) {
  leak_job_t *job = arg;
  job->pids[rank] = getpid();
  ncclComm_t comm = init_rank(nranks, job->id, rank);
  if (comm == NULL) return;
  if (job->kill_last && rank == nranks - 1) raise(SIGKILL);
  float v[1024];
  for (int i = 0; i < 1024; i++) v[i] = (float)rank;
  ncclResult_t r = ncclAllReduce(v, v, 1024, ncclFloat32, ncclSum, comm, NULL);
  if (job->kill_last) {
    CHECK(r != ncclSuccess, "an AllReduce with a dead rank succeeded");
  } else {
    CHECK(r == ncclSuccess, "AllReduce returned %d", (int)r);
    CHECK(v[5] == (float)(nranks * (nranks - 1) / 2), "sum %g", v[5]);
  }
  CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
}

Test(api_streams, no_shm_segments_left_behind, .timeout = 60) {
  base_env("3");  // the survivors of a killed rank give up quickly
  pid_t *pids = shared_alloc(sizeof(pid_t) * 4);
  for (int round = 0; round < 2; round++) {
    shm_list_t *before = malloc(sizeof(*before)), *after = malloc(sizeof(*after));
    cr_assert(before != NULL && after != NULL);
    list_shm(before);
    leak_job_t job = {.kill_last = round == 1, .pids = pids};
    cr_assert_eq(ncclGetUniqueId(&job.id), ncclSuccess);
    int status[4];
    run_ranks(4, leak_body, &job, 30, status);
    if (round == 0) {
      expect_ranks_ok(4, status);
    } else {
      expect_ranks_ok(3, status);
      cr_expect_eq(status[3], 128 + SIGKILL, "the killed rank exited with status %d", status[3]);
    }
    list_shm(after);
    pid_t all[5] = {pids[0], pids[1], pids[2], pids[3], getpid()};
    cr_expect_eq(new_entries_of(before, after, all, 5), 0, "round %d left /dev/shm/" SHM_PREFIX "* entries",
                 round);
    free(before);
    free(after);
  }
  munmap(pids, sizeof(pid_t) * 4);
}

static int count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  cr_assert_not_null(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static void init_all_cycle(void) {
  ncclComm_t comms[2] = {0};
  cr_assert_eq(ncclCommInitAll(comms, 2, NULL), ncclSuccess);
  int32_t a[16] = {0}, b[16] = {0};
  EXPECT_RES(ncclGroupStart(), ncclSuccess);
  EXPECT_RES(ncclAllReduce(a, a, 16, ncclInt32, ncclSum, comms[0], NULL), ncclSuccess);
  EXPECT_RES(ncclAllReduce(b, b, 16, ncclInt32, ncclSum, comms[1], NULL), ncclSuccess);
  EXPECT_RES(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < 2; r++) EXPECT_RES(ncclCommDestroy(comms[r]), ncclSuccess);
}

Test(api_streams, no_descriptors_left_open, .timeout = 60) {
  base_env("10");
  init_all_cycle();  // anything opened once per process is opened now
  int base = count_fds();
  for (int i = 0; i < 20; i++) init_all_cycle();
  // The rendezvous thread closes its sockets just after the ranks leave.
  int now = count_fds();
  for (double end = now_s() + 3; now > base && now_s() < end; now = count_fds()) sleep_ms(10);
  cr_expect_leq(now, base, "%d descriptors open before 20 init/destroy cycles, %d after", base, now);
}
