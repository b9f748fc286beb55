/*
 * test_api_streams.c — asynchronous and end-of-life behaviour through the
 * public API only: weft host streams (calls return at once, run in order,
 * complete at weftStreamSynchronize, callbacks run in their turn), ncclMemAlloc/ncclMemFree and buffer
 * registration, a call's eager start on an idle stream, ncclCommAbort freeing a peer (or another thread) blocked in
 * a collective, and no leaks: no /dev/shm segments left behind, even by a
 * rank killed with SIGKILL, and no file descriptors left open by repeated
 * init/destroy cycles.
 *
 * Multi-process tests fork their ranks through harness.h; the test
 * process then creates the unique id and so hosts the rendezvous. A rank
 * reports failed checks on stderr and exits with their count; the test
 * waits with a deadline and kills what is left.
 */
#include <criterion/criterion.h>
#include <dirent.h>

#include "harness.h"

/* ---------- helpers used by ranks ---------- */

// A blocking AllReduce (sum of rank) that also lines the ranks up.
static void check_sync_allreduce(ncclComm_t comm, int rank, int nranks) {
  int32_t v[8];
  for (int i = 0; i < 8; i++) v[i] = rank;
  WEFT_TEST_CHECK_RES(ncclAllReduce(v, v, 8, ncclInt32, ncclSum, comm, NULL), ncclSuccess);
  WEFT_TEST_CHECK(v[7] == nranks * (nranks - 1) / 2, "sum %d, expected %d", v[7], nranks * (nranks - 1) / 2);
}

// Zeroed memory the forked ranks share with the test process.
static void *shared_alloc(size_t bytes) {
  void *p = weft_test_shared_alloc(bytes);
  cr_assert_not_null(p, "mmap: %s", strerror(errno));
  return p;
}

/* ---------- weft host streams ---------- */

enum { STREAM_N = 50000, STREAM_K = 10 };  // 400 KB per call: several FIFO slots

static int stream_body(int rank, int nranks, ncclUniqueId *ids, void *arg) {
  (void)arg;
  ncclComm_t comm = weft_test_init_rank(nranks, ids[0], rank);
  double *buf = malloc(STREAM_N * sizeof(double));
  WEFT_TEST_CHECK(buf != NULL, "malloc");
  if (comm == NULL || buf == NULL) return weft_test_failures();
  cudaStream_t s = NULL;
  WEFT_TEST_CHECK_RES(weftStreamCreate(&s), ncclSuccess);
  WEFT_TEST_CHECK(s != NULL, "weftStreamCreate gave NULL");
  for (int i = 0; i < STREAM_N; i++) buf[i] = 1 + i % 2;
  check_sync_allreduce(comm, rank, nranks);

  // Rank 1 comes late, so no rank can finish even its first call before then.
  if (rank == 1) weft_test_sleep_ms(300);
  double t0 = weft_test_now();
  for (int k = 0; k < STREAM_K; k++)
    WEFT_TEST_CHECK_RES(ncclAllReduce(buf, buf, STREAM_N, ncclFloat64, ncclSum, comm, s), ncclSuccess);
  double queued = weft_test_now() - t0;
  ncclResult_t q = weftStreamQuery(s);
  if (rank != 1) {
    WEFT_TEST_CHECK(queued < 0.25, "%d calls on a stream took %.3f s to return", STREAM_K, queued);
    WEFT_TEST_CHECK(q == ncclInProgress, "weftStreamQuery returned %d while a peer has not joined", (int)q);
  } else {
    WEFT_TEST_CHECK(q == ncclInProgress || q == ncclSuccess, "weftStreamQuery returned %d", (int)q);
  }
  WEFT_TEST_CHECK_RES(weftStreamSynchronize(s), ncclSuccess);
  WEFT_TEST_CHECK_RES(weftStreamQuery(s), ncclSuccess);
  // In place, each call reduces the previous one's output: nranks^K.
  double scale = pow(nranks, STREAM_K);
  int bad = 0;
  for (int i = 0; i < STREAM_N; i++) bad += buf[i] != (1 + i % 2) * scale;
  WEFT_TEST_CHECK(bad == 0, "%d elements wrong: buf[0]=%g buf[1]=%g, expected %g and %g", bad, buf[0], buf[1], scale,
        2 * scale);

  // The stream can be used again after a synchronize.
  WEFT_TEST_CHECK_RES(ncclAllReduce(buf, buf, STREAM_N, ncclFloat64, ncclMin, comm, s), ncclSuccess);
  WEFT_TEST_CHECK_RES(weftStreamSynchronize(s), ncclSuccess);
  WEFT_TEST_CHECK(buf[1] == 2 * scale, "after ncclMin buf[1]=%g", buf[1]);
  WEFT_TEST_CHECK_RES(weftStreamDestroy(s), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclAllReduce(buf, buf, STREAM_N, ncclFloat64, ncclSum, comm, s), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(weftStreamSynchronize(s), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(weftStreamSynchronize(NULL), ncclSuccess);
  WEFT_TEST_CHECK_RES(weftStreamQuery(NULL), ncclSuccess);
  WEFT_TEST_CHECK_RES(weftStreamCreate(NULL), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(weftStreamDestroy(NULL), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  free(buf);
  return weft_test_failures();
}

Test(api_streams, stream_calls_return_at_once_and_run_in_order, .timeout = 40) {
  weft_test_env_timeout(20);
  WEFT_TEST_EXPECT_FORK_OK(3, 1, stream_body, NULL, 30);
}

// One thread drives both ranks of a pair, one stream each, without a group:
// only asynchronous calls can make this finish.
Test(api_streams, one_thread_two_ranks_two_streams, .timeout = 30) {
  weft_test_env_timeout(10);
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
      WEFT_TEST_EXPECT_RES(ncclAllReduce(buf[r], buf[r], N, ncclFloat32, ncclSum, comms[r], s[r]), ncclSuccess);
  for (int r = 0; r < 2; r++) WEFT_TEST_EXPECT_RES(weftStreamSynchronize(s[r]), ncclSuccess);
  for (int r = 0; r < 2; r++) {
    int bad = 0;
    for (int i = 0; i < N; i++) bad += buf[r][i] != (float)((i % 5) << K);
    cr_expect_eq(bad, 0, "rank %d: %d elements wrong (buf[1]=%g)", r, bad, buf[r][1]);
  }
  // Both ranks' calls on one stream, in one group.
  WEFT_TEST_EXPECT_RES(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; r++)
    WEFT_TEST_EXPECT_RES(ncclAllReduce(buf[r], buf[r], N, ncclFloat32, ncclMax, comms[r], s[0]), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclGroupEnd(), ncclSuccess);
  WEFT_TEST_EXPECT_RES(weftStreamSynchronize(s[0]), ncclSuccess);
  cr_expect(buf[0][1] == (float)(1 << K) && buf[1][1] == (float)(1 << K), "after the grouped max: %g %g",
            buf[0][1], buf[1][1]);
  for (int r = 0; r < 2; r++) {
    WEFT_TEST_EXPECT_RES(weftStreamDestroy(s[r]), ncclSuccess);
    WEFT_TEST_EXPECT_RES(ncclCommDestroy(comms[r]), ncclSuccess);
    free(buf[r]);
  }
}

// What one weftStreamAddCallback call saw when the worker ran it.
typedef struct {
  float *buf;          // the buffer the calls before it reduce
  float seen;          // buf[1] when the callback ran
  ncclResult_t status;
  int order;           // its place among all callbacks run (from 1)
} callback_seen_t;

static _Atomic int callbacks_run;

static void record_callback(cudaStream_t stream, ncclResult_t status, void *arg) {
  (void)stream;
  callback_seen_t *c = arg;
  c->seen = c->buf[1];
  c->status = status;
  c->order = ++callbacks_run;
}

// Callbacks run in stream order, after the calls queued before them, with
// the first failure since the previous callback.
Test(api_streams, callbacks_run_after_the_calls_before_them, .timeout = 30) {
  weft_test_env_timeout(10);
  enum { N = 40000, K = 4 };
  ncclComm_t comms[2] = {0};
  cr_assert_eq(ncclCommInitAll(comms, 2, NULL), ncclSuccess);
  cudaStream_t s[2] = {0};
  float *buf[2];
  callback_seen_t seen[2][K + 2];
  memset(seen, 0, sizeof(seen));
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(weftStreamCreate(&s[r]), ncclSuccess);
    buf[r] = malloc(N * sizeof(float));
    cr_assert_not_null(buf[r]);
    for (int i = 0; i < N; i++) buf[r][i] = 1;
  }
  for (int k = 0; k < K; k++)
    for (int r = 0; r < 2; r++) {
      WEFT_TEST_EXPECT_RES(ncclAllReduce(buf[r], buf[r], N, ncclFloat32, ncclSum, comms[r], s[r]), ncclSuccess);
      seen[r][k].buf = buf[r];
      WEFT_TEST_EXPECT_RES(weftStreamAddCallback(s[r], record_callback, &seen[r][k]), ncclSuccess);
    }
  for (int r = 0; r < 2; r++) WEFT_TEST_EXPECT_RES(weftStreamSynchronize(s[r]), ncclSuccess);
  for (int r = 0; r < 2; r++)
    for (int k = 0; k < K; k++) {
      cr_expect_eq(seen[r][k].status, ncclSuccess, "rank %d callback %d: status %d", r, k, (int)seen[r][k].status);
      cr_expect(seen[r][k].seen == (float)(2 << k), "rank %d callback %d saw %g, expected %g", r, k,
                seen[r][k].seen, (float)(2 << k));
      if (k > 0)
        cr_expect_gt(seen[r][k].order, seen[r][k - 1].order, "rank %d: callback %d ran before callback %d", r, k,
                     k - 1);
    }
  // A call that fails (counts differ between the ranks): the callback after
  // it is told, the next one (no calls between) is not.
  for (int r = 0; r < 2; r++) {
    WEFT_TEST_EXPECT_RES(ncclAllReduce(buf[r], buf[r], r == 0 ? N : N / 2, ncclFloat32, ncclSum, comms[r], s[r]),
                         ncclSuccess);
    seen[r][K].buf = seen[r][K + 1].buf = buf[r];
    WEFT_TEST_EXPECT_RES(weftStreamAddCallback(s[r], record_callback, &seen[r][K]), ncclSuccess);
    WEFT_TEST_EXPECT_RES(weftStreamAddCallback(s[r], record_callback, &seen[r][K + 1]), ncclSuccess);
  }
  for (int r = 0; r < 2; r++) {
    cr_expect_neq(weftStreamSynchronize(s[r]), ncclSuccess, "rank %d: the mismatched call did not fail", r);
    cr_expect_neq(seen[r][K].status, ncclSuccess, "rank %d: the callback after the failure saw success", r);
    cr_expect_eq(seen[r][K + 1].status, ncclSuccess, "rank %d: a callback with no calls before it saw %d", r,
                 (int)seen[r][K + 1].status);
    cr_expect_gt(seen[r][K + 1].order, seen[r][K].order, "rank %d: callbacks out of order", r);
  }
  // The NULL stream runs a callback at once; bad arguments are refused.
  callback_seen_t now = {.buf = buf[0]};
  WEFT_TEST_EXPECT_RES(weftStreamAddCallback(NULL, record_callback, &now), ncclSuccess);
  cr_expect(now.order > 0 && now.status == ncclSuccess, "the NULL stream's callback did not run at once");
  WEFT_TEST_EXPECT_RES(weftStreamAddCallback(s[0], NULL, NULL), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(weftStreamAddCallback((cudaStream_t)(void *)&now, record_callback, &now), ncclInvalidArgument);
  for (int r = 0; r < 2; r++) {
    WEFT_TEST_EXPECT_RES(weftStreamDestroy(s[r]), ncclSuccess);
    ncclCommDestroy(comms[r]);
    free(buf[r]);
  }
}

// Eager start: a call queued on an idle stream first runs on the calling
// thread for WEFT_STREAM_EAGER_NS. Rank 1 comes 200 ms late; rank 0's call
// then returns complete (a budget of 10 s outlasts the wait), after about
// its budget and still pending (50 ms), or at once (0). Either way the
// stream finishes it and the sum is right.
static int eager_body(int rank, int nranks, ncclUniqueId *ids, void *arg) {
  double budget_s = *(const double *)arg;
  ncclComm_t comm = weft_test_init_rank(nranks, ids[0], rank);
  if (comm == NULL) return weft_test_failures();
  cudaStream_t s = NULL;
  WEFT_TEST_CHECK_RES(weftStreamCreate(&s), ncclSuccess);
  check_sync_allreduce(comm, rank, nranks);
  int32_t v[16];
  for (int i = 0; i < 16; i++) v[i] = rank + i;
  if (rank == 1) weft_test_sleep_ms(200);
  double t0 = weft_test_now();
  WEFT_TEST_CHECK_RES(ncclAllReduce(v, v, 16, ncclInt32, ncclSum, comm, s), ncclSuccess);
  double took = weft_test_now() - t0;
  ncclResult_t q = weftStreamQuery(s);
  if (rank == 0 && budget_s > 1) {
    WEFT_TEST_CHECK(took > 0.1, "the call returned after %.3f s, before its late peer came", took);
    WEFT_TEST_CHECK(q == ncclSuccess, "weftStreamQuery returned %d after an eager call completed", (int)q);
  } else if (rank == 0) {
    WEFT_TEST_CHECK(took >= budget_s * 0.9 && took < 0.15, "the call returned after %.3f s (budget %.3f s)", took,
                    budget_s);
    WEFT_TEST_CHECK(q == ncclInProgress, "weftStreamQuery returned %d while its peer has not come", (int)q);
  }
  WEFT_TEST_CHECK_RES(weftStreamSynchronize(s), ncclSuccess);
  int bad = 0;
  for (int i = 0; i < 16; i++) bad += v[i] != 1 + 2 * i;
  WEFT_TEST_CHECK(bad == 0, "%d sums wrong: v[1]=%d, expected 3", bad, v[1]);
  WEFT_TEST_CHECK_RES(weftStreamDestroy(s), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  return weft_test_failures();
}

static void expect_eager(const char *budget_ns, double budget_s) {
  weft_test_env_timeout(20);
  setenv("WEFT_STREAM_EAGER_NS", budget_ns, 1);
  WEFT_TEST_EXPECT_FORK_OK(2, 1, eager_body, &budget_s, 30);
}

Test(api_streams, eager_start_runs_to_completion_within_its_budget, .timeout = 40) {
  expect_eager("10000000000", 10);
}

Test(api_streams, eager_start_hands_over_after_its_budget, .timeout = 40) { expect_eager("50000000", 0.05); }

Test(api_streams, eager_start_off, .timeout = 40) { expect_eager("0", 0); }

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
  WEFT_TEST_EXPECT_RES(ncclMemFree(p), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclMemFree(q), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclMemFree(NULL), ncclSuccess);
  void *z = (void *)&z;
  WEFT_TEST_EXPECT_RES(ncclMemAlloc(&z, 0), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclMemAlloc(NULL, 64), ncclInvalidArgument);
}

static int memalloc_body(int rank, int nranks, ncclUniqueId *ids, void *arg) {
  (void)arg;
  enum { N = (1 << 20) / sizeof(float) };
  ncclComm_t comm = weft_test_init_rank(nranks, ids[0], rank);
  float *send = NULL, *recv = NULL;
  WEFT_TEST_CHECK_RES(ncclMemAlloc((void **)&send, N * sizeof(float)), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclMemAlloc((void **)&recv, N * sizeof(float)), ncclSuccess);
  if (comm == NULL || send == NULL || recv == NULL) return weft_test_failures();
  for (size_t i = 0; i < N; i++) send[i] = (float)(rank + 1) * (float)(i % 11);
  WEFT_TEST_CHECK_RES(ncclAllReduce(send, recv, N, ncclFloat32, ncclSum, comm, NULL), ncclSuccess);
  float total = (float)(nranks * (nranks + 1) / 2);
  size_t bad = 0;
  for (size_t i = 0; i < N; i++) bad += recv[i] != total * (float)(i % 11);
  WEFT_TEST_CHECK(bad == 0, "%zu elements wrong (recv[1]=%g, expected %g)", bad, recv[1], total);
  WEFT_TEST_CHECK(send[1] == (float)(rank + 1), "the send buffer changed: %g", send[1]);

  // Registration round trip on the same buffers.
  void *h = NULL;
  WEFT_TEST_CHECK_RES(ncclCommRegister(comm, send, N * sizeof(float), &h), ncclSuccess);
  WEFT_TEST_CHECK(h != NULL, "no registration handle");
  WEFT_TEST_CHECK_RES(ncclAllReduce(send, recv, N, ncclFloat32, ncclSum, comm, NULL), ncclSuccess);
  WEFT_TEST_CHECK(recv[1] == total, "AllReduce from a registered buffer: recv[1]=%g", recv[1]);
  WEFT_TEST_CHECK_RES(ncclCommDeregister(comm, h), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclCommDeregister(comm, h), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclMemFree(send), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclMemFree(recv), ncclSuccess);
  return weft_test_failures();
}

Test(api_streams, mem_alloc_buffers_in_an_allreduce, .timeout = 40) {
  weft_test_env_timeout(20);
  WEFT_TEST_EXPECT_FORK_OK(3, 1, memalloc_body, NULL, 30);
}

Test(api_streams, register_and_deregister, .timeout = 20) {
  weft_test_env_timeout(10);
  ncclComm_t comms[2] = {0};
  cr_assert_eq(ncclCommInitAll(comms, 2, NULL), ncclSuccess);
  char buf[4096];
  void *h = NULL, *h2 = NULL;
  WEFT_TEST_EXPECT_RES(ncclCommRegister(comms[0], buf, sizeof(buf), &h), ncclSuccess);
  cr_expect_not_null(h);
  WEFT_TEST_EXPECT_RES(ncclCommRegister(comms[0], buf, 100, &h2), ncclSuccess);  // overlapping: a second handle
  cr_expect_neq(h, h2);
  WEFT_TEST_EXPECT_RES(ncclCommDeregister(comms[1], h), ncclInvalidArgument);  // not comms[1]'s
  WEFT_TEST_EXPECT_RES(ncclCommDeregister(comms[0], h), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclCommDeregister(comms[0], h), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclCommDeregister(comms[0], h2), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclCommDeregister(comms[0], NULL), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclCommRegister(comms[0], NULL, 64, &h), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclCommRegister(comms[0], buf, 64, NULL), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclCommRegister(NULL, buf, 64, &h), ncclInvalidArgument);
  // A registration still open at destroy is released with the communicator.
  WEFT_TEST_EXPECT_RES(ncclCommRegister(comms[1], buf, sizeof(buf), &h), ncclSuccess);
  for (int r = 0; r < 2; r++) WEFT_TEST_EXPECT_RES(ncclCommDestroy(comms[r]), ncclSuccess);
}

/* ---------- ncclCommAbort ---------- */

typedef struct {
  int res;
  int async;
  double secs;
} abort_out_t;

static abort_out_t *abort_out;  // shared with the ranks

static int abort_body(int rank, int nranks, ncclUniqueId *ids, void *arg) {
  (void)arg;
  ncclComm_t comm = weft_test_init_rank(nranks, ids[0], rank);
  if (comm == NULL) return weft_test_failures();
  check_sync_allreduce(comm, rank, nranks);
  if (rank == 1) {  // never joins the second AllReduce
    weft_test_sleep_ms(500);
    WEFT_TEST_CHECK_RES(ncclCommAbort(comm), ncclSuccess);
    return weft_test_failures();
  }
  enum { N = 1 << 16 };
  float *buf = calloc(N, sizeof(float));
  WEFT_TEST_CHECK(buf != NULL, "calloc");
  if (buf == NULL) return weft_test_failures();
  double t0 = weft_test_now();
  ncclResult_t r = ncclAllReduce(buf, buf, N, ncclFloat32, ncclSum, comm, NULL);
  abort_out->secs = weft_test_now() - t0;
  abort_out->res = (int)r;
  ncclResult_t async = ncclSuccess;
  WEFT_TEST_CHECK_RES(ncclCommGetAsyncError(comm, &async), ncclSuccess);
  abort_out->async = (int)async;
  WEFT_TEST_CHECK(r != ncclSuccess, "the AllReduce succeeded although the peer aborted");
  WEFT_TEST_CHECK(abort_out->secs < 5.0, "the AllReduce returned after %.1f s", abort_out->secs);
  WEFT_TEST_CHECK(async != ncclSuccess, "no asynchronous error after the peer aborted");
  WEFT_TEST_CHECK_RES(ncclCommAbort(comm), ncclSuccess);
  free(buf);
  return weft_test_failures();
}

Test(api_streams, abort_frees_a_peer_blocked_in_a_collective, .timeout = 45) {
  weft_test_env_timeout(60);  // far beyond the test: only the abort can free the peer
  abort_out = shared_alloc(sizeof(*abort_out));
  abort_out->res = -1;
  WEFT_TEST_EXPECT_FORK_OK(2, 1, abort_body, NULL, 30);
  cr_log_info("peer of an aborted rank: AllReduce returned %d (%s) after %.3f s; async error %d", abort_out->res,
              ncclGetErrorString((ncclResult_t)abort_out->res), abort_out->secs, abort_out->async);
  WEFT_TEST_EXPECT_RES(ncclCommAbort(NULL), ncclSuccess);
  weft_test_shared_free(abort_out, sizeof(*abort_out));
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
  b->returned = weft_test_now();
  return NULL;
}

// A watchdog thread aborts a communicator another thread is blocked in.
Test(api_streams, abort_from_another_thread, .timeout = 60) {
  weft_test_env_timeout(60);
  for (int round = 0; round < 6; round++) {
    ncclComm_t comms[2] = {0};
    cr_assert_eq(ncclCommInitAll(comms, 2, NULL), ncclSuccess);
    blocked_t b = {.comm = comms[0], .res = ncclSuccess};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, blocked_allreduce, &b), 0);
    weft_test_sleep_ms(20 + 30 * round);
    double t0 = weft_test_now();
    WEFT_TEST_EXPECT_RES(ncclCommAbort(comms[0]), ncclSuccess);
    pthread_join(th, NULL);
    cr_expect_neq(b.res, ncclSuccess, "round %d: the blocked AllReduce succeeded", round);
    cr_expect_lt(b.returned - t0, 5.0, "round %d: the blocked AllReduce returned %.1f s after the abort", round,
                 b.returned - t0);
    WEFT_TEST_EXPECT_RES(ncclCommDestroy(comms[1]), ncclSuccess);
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
  int kill_last;
  pid_t *pids;  // shared: each rank's pid
} leak_job_t;

static int leak_body(int rank, int nranks, ncclUniqueId *ids, void *arg) {
  leak_job_t *job = arg;
  job->pids[rank] = getpid();
  ncclComm_t comm = weft_test_init_rank(nranks, ids[0], rank);
  if (comm == NULL) return weft_test_failures();
  if (job->kill_last && rank == nranks - 1) raise(SIGKILL);
  float v[1024];
  for (int i = 0; i < 1024; i++) v[i] = (float)rank;
  ncclResult_t r = ncclAllReduce(v, v, 1024, ncclFloat32, ncclSum, comm, NULL);
  if (job->kill_last) {
    WEFT_TEST_CHECK(r != ncclSuccess, "an AllReduce with a dead rank succeeded");
  } else {
    WEFT_TEST_CHECK(r == ncclSuccess, "AllReduce returned %d", (int)r);
    WEFT_TEST_CHECK(v[5] == (float)(nranks * (nranks - 1) / 2), "sum %g", v[5]);
  }
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  return weft_test_failures();
}

Test(api_streams, no_shm_segments_left_behind, .timeout = 60) {
  weft_test_env_timeout(3);  // the survivors of a killed rank give up quickly
  pid_t *pids = shared_alloc(sizeof(pid_t) * 4);
  for (int round = 0; round < 2; round++) {
    shm_list_t *before = malloc(sizeof(*before)), *after = malloc(sizeof(*after));
    cr_assert(before != NULL && after != NULL);
    list_shm(before);
    leak_job_t job = {.kill_last = round == 1, .pids = pids};
    int status[4];
    cr_assert_geq(weft_test_fork_ranks_ids(4, 1, leak_body, &job, 30, status), 0, "could not start 4 ranks");
    for (int r = 0; r < (round == 0 ? 4 : 3); r++)
      cr_expect_eq(status[r], 0, "rank %d: status %d (see stderr)", r, status[r]);
    if (round == 1)
      cr_expect_eq(status[3], WEFT_TEST_KILLED_BY(SIGKILL), "the killed rank exited with status %d", status[3]);
    list_shm(after);
    pid_t all[5] = {pids[0], pids[1], pids[2], pids[3], getpid()};
    cr_expect_eq(new_entries_of(before, after, all, 5), 0, "round %d left /dev/shm/" SHM_PREFIX "* entries",
                 round);
    free(before);
    free(after);
  }
  weft_test_shared_free(pids, sizeof(pid_t) * 4);
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
  WEFT_TEST_EXPECT_RES(ncclGroupStart(), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclAllReduce(a, a, 16, ncclInt32, ncclSum, comms[0], NULL), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclAllReduce(b, b, 16, ncclInt32, ncclSum, comms[1], NULL), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < 2; r++) WEFT_TEST_EXPECT_RES(ncclCommDestroy(comms[r]), ncclSuccess);
}

Test(api_streams, no_descriptors_left_open, .timeout = 60) {
  weft_test_env_timeout(10);
  init_all_cycle();  // anything opened once per process is opened now
  int base = count_fds();
  for (int i = 0; i < 20; i++) init_all_cycle();
  // The rendezvous thread closes its sockets just after the ranks leave.
  int now = count_fds();
  for (double end = weft_test_now() + 3; now > base && weft_test_now() < end; now = count_fds()) weft_test_sleep_ms(10);
  cr_expect_leq(now, base, "%d descriptors open before 20 init/destroy cycles, %d after", base, now);
}
