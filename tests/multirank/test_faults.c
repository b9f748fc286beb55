/*
 * test_faults.c — what the survivors see when a rank dies or stops, and
 * aborting a blocked call from another thread.
 *
 * Ranks are forked processes on shared memory, running AllReduce in a
 * loop. A victim rank dies by SIGKILL from a thread of its own while its
 * main thread is inside a collective (the moment is random within a few
 * milliseconds, and the victim records it), or stops with SIGSTOP. Every
 * survivor must get an error, not hang: after SIGKILL within 5 s
 * (WEFT_TIMEOUT is 60 s here, so only death detection can be that fast),
 * after SIGSTOP by WEFT_TIMEOUT (2 s here, with WEFT_TIMEOUT_FAIL=1). Calls
 * after the failure must fail at once, and destroying the failed
 * communicator must work. A peer that is only slow (it sleeps 5 s before
 * the call) is waited for past WEFT_TIMEOUT, after a WARN, unless
 * WEFT_TIMEOUT_FAIL=1 asks for ncclTimeout.
 * Detection latencies are logged (criterion --verbose) for
 * docs/reliability.md.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define COUNT (256 * 1024)  // floats per AllReduce: each call takes a while

typedef struct {
  int victim, sig;
  double died_at;             // when the victim sent itself the signal
  pid_t victim_pid;
  double failed_at[WEFT_TEST_MAX_RANKS];
  int result[WEFT_TEST_MAX_RANKS];
  int later[WEFT_TEST_MAX_RANKS];  // a call made after the failure
  char why[WEFT_TEST_MAX_RANKS][400];  // ncclGetLastError after the failure
} fault_out_t;

static fault_out_t *out;

static void *victim_thread(void *arg) {
  (void)arg;
  weft_test_sleep_ms(5 + rand() % 20);  // while the main thread is inside AllReduce
  out->died_at = weft_test_now();
  out->victim_pid = getpid();
  raise(out->sig);
  return NULL;
}

static int fault_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return 1;
  float *buf = malloc(COUNT * sizeof(float));
  WEFT_TEST_CHECK(buf != NULL, "malloc");
  if (buf == NULL) return weft_test_failures();
  for (int i = 0; i < COUNT; i++) buf[i] = 1.0f;
  // A few calls that succeed, then the victim goes while the rest are in the next ones.
  for (int i = 0; i < 3; i++) WEFT_TEST_CHECK_RES(ncclAllReduce(buf, buf, COUNT, ncclFloat32, ncclSum, comm, NULL), ncclSuccess);
  if (rank == out->victim) {
    srand((unsigned)getpid());
    pthread_t th;
    pthread_create(&th, NULL, victim_thread, NULL);
  }
  ncclResult_t r = ncclSuccess;
  for (int i = 0; i < 100000 && r == ncclSuccess; i++) r = ncclAllReduce(buf, buf, COUNT, ncclFloat32, ncclSum, comm, NULL);
  out->failed_at[rank] = weft_test_now();
  out->result[rank] = (int)r;
  snprintf(out->why[rank], sizeof(out->why[rank]), "%s", ncclGetLastError(comm));
  out->later[rank] = (int)ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, comm, NULL);
  if (rank == (out->victim == 0 ? 1 : 0) && out->sig == SIGSTOP) {
    // The stopped rank has done its part: end it, so the test does not wait for the harness's deadline.
    while (out->victim_pid == 0) weft_test_sleep_ms(1);
    kill(out->victim_pid, SIGKILL);
  }
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  free(buf);
  return weft_test_failures();
}

// n ranks, `victim` sends itself `sig`; survivors must fail within `bound` s.
static void run_fault(int n, int victim, int sig, int timeout_s, double bound) {
  weft_test_env_timeout(timeout_s);
  out = weft_test_shared_alloc(sizeof(*out));
  cr_assert_not_null(out);
  out->victim = victim;
  out->sig = sig;
  int status[WEFT_TEST_MAX_RANKS];
  int bad = weft_test_fork_ranks_ids(n, 1, weft_test_one_id_main, &(weft_test_one_id_t){fault_body, NULL}, 60, status);
  cr_expect_eq(status[victim], WEFT_TEST_KILLED_BY(SIGKILL), "the victim ended with %d", status[victim]);
  cr_expect_eq(bad, 1, "%d ranks did not exit 0 (only the victim should not): see stderr", bad);
  double worst = 0;
  for (int r = 0; r < n; r++) {
    if (r == victim) continue;
    double took = out->failed_at[r] - out->died_at;
    if (took > worst) worst = took;
    cr_expect_neq(out->result[r], ncclSuccess, "rank %d: its collective succeeded", r);
    cr_expect_neq(out->later[r], ncclSuccess, "rank %d: a call after the failure succeeded", r);
    cr_expect_lt(took, bound, "rank %d took %.2f s to fail (bound %.1f s)", r, took, bound);
    if (sig == SIGSTOP)  // the timeout names the call, its progress and whom it waits on
      cr_expect(strstr(out->why[r], "AllReduce #") && strstr(out->why[r], "bytes moved") &&
                    strstr(out->why[r], "waiting on rank(s)"),
                "rank %d: %s", r, out->why[r]);
    else  // a death names the rank that died, or the connection that broke
      cr_expect(strstr(out->why[r], "died") || strstr(out->why[r], "lost its connection"), "rank %d: %s", r,
                out->why[r]);
  }
  cr_log_info("rank %d's error: %s", victim == 0 ? 1 : 0, out->why[victim == 0 ? 1 : 0]);
  cr_log_info("%d ranks, rank %d %s: survivors failed within %.3f s (error %d: %s)", n, victim,
              sig == SIGKILL ? "killed" : "stopped", worst, out->result[victim == 0 ? 1 : 0],
              ncclGetErrorString((ncclResult_t)out->result[victim == 0 ? 1 : 0]));
  weft_test_shared_free(out, sizeof(*out));
}

Test(faults, kill9_mid_allreduce_2_ranks, .timeout = 90) { run_fault(2, 1, SIGKILL, 60, 5.0); }
Test(faults, kill9_mid_allreduce_4_ranks, .timeout = 90) { run_fault(4, 2, SIGKILL, 60, 5.0); }
Test(faults, kill9_mid_allreduce_8_ranks, .timeout = 90) { run_fault(8, 5, SIGKILL, 60, 5.0); }
Test(faults, kill9_of_rank0_8_ranks, .timeout = 90) { run_fault(8, 0, SIGKILL, 60, 5.0); }
Test(faults, sigstop_fails_by_timeout_4_ranks, .timeout = 90) { run_fault(4, 3, SIGSTOP, 2, 5.0); }

/* ---------- a slow peer: a WARN at WEFT_TIMEOUT, then the call completes ---------- */

typedef struct {
  size_t count;  // floats per AllReduce: 2 takes the small-message path, 1M the engine's
  int res[2], wrong[2];
  double secs;   // rank 0's call
  char why[400]; // ncclGetLastError on rank 0 after the call
} slow_out_t;

static slow_out_t *sout;

static int slow_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return 1;
  float *buf = malloc(sout->count * sizeof(float));
  WEFT_TEST_CHECK(buf != NULL, "malloc");
  if (buf == NULL) return weft_test_failures();
  for (size_t i = 0; i < sout->count; i++) buf[i] = (float)(rank + 1);
  if (rank == 1) weft_test_sleep_ms(5000);  // writing a checkpoint, say
  double t0 = weft_test_now();
  ncclResult_t r = ncclAllReduce(buf, buf, sout->count, ncclFloat32, ncclSum, comm, NULL);
  sout->res[rank] = (int)r;
  if (rank == 0) {
    sout->secs = weft_test_now() - t0;
    snprintf(sout->why, sizeof(sout->why), "%s", ncclGetLastError(comm));
  }
  for (size_t i = 0; r == ncclSuccess && i < sout->count; i++) sout->wrong[rank] += buf[i] != 3.0f;
  if (r == ncclSuccess) WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  else ncclCommAbort(comm);
  free(buf);
  return weft_test_failures();
}

static void run_slow(size_t count, int fail) {
  weft_test_env_timeout(2);
  setenv("WEFT_TIMEOUT_FAIL", fail ? "1" : "0", 1);
  sout = weft_test_shared_alloc(sizeof(*sout));
  cr_assert_not_null(sout);
  sout->count = count;
  WEFT_TEST_EXPECT_FORK_OK(2, 1, weft_test_one_id_main, (&(weft_test_one_id_t){slow_body, NULL}), 40);
  if (!fail) {
    for (int r = 0; r < 2; r++) {
      cr_expect_eq(sout->res[r], ncclSuccess, "rank %d: %s", r, ncclGetErrorString((ncclResult_t)sout->res[r]));
      cr_expect_eq(sout->wrong[r], 0, "rank %d: %d wrong elements", r, sout->wrong[r]);
    }
    cr_expect_geq(sout->secs, 4.5, "rank 0 returned after %.2f s, before its peer called", sout->secs);
    // The last of its WARNs, at 2 s and again at 4 s.
    cr_expect(strstr(sout->why, "made no progress for 4 s (WEFT_TIMEOUT)") && strstr(sout->why, "still waiting") &&
                  strstr(sout->why, "waiting on rank(s) 1"),
              "rank 0's WARN: %s", sout->why);
  } else {
    cr_expect_eq(sout->res[0], ncclTimeout, "rank 0: %s", ncclGetErrorString((ncclResult_t)sout->res[0]));
    cr_expect(sout->secs >= 1.9 && sout->secs < 4.5, "rank 0 failed after %.2f s (WEFT_TIMEOUT=2)", sout->secs);
    cr_expect_neq(sout->res[1], ncclSuccess, "rank 1 joined a failed communicator and succeeded");
  }
  cr_log_info("%zu floats, WEFT_TIMEOUT=2, WEFT_TIMEOUT_FAIL=%d: rank 0 returned %s after %.2f s (%s)", count, fail,
              ncclGetErrorString((ncclResult_t)sout->res[0]), sout->secs, sout->why);
  weft_test_shared_free(sout, sizeof(*sout));
}

Test(faults, a_slow_peer_is_waited_for_small_call, .timeout = 60) { run_slow(2, 0); }
Test(faults, a_slow_peer_is_waited_for_engine_call, .timeout = 60) { run_slow(1 << 20, 0); }
Test(faults, a_slow_peer_fails_the_call_when_asked, .timeout = 60) { run_slow(1 << 20, 1); }

/* ---------- a peer that finished the call and then died ---------- */

// A chain Broadcast from rank 0 over 3 ranks: the root is done once its
// neighbour has the data and called, and then dies; the last rank calls
// 1.5 s later. What the root wrote outlives it, so the others must still
// finish the call (docs/reliability.md) and fail only at the next one.
typedef struct {
  int res[3], wrong[3], next[3];
} finished_out_t;

static finished_out_t *fout;

static int finished_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return 1;
  enum { N = 64 };
  float buf[N];
  for (int i = 0; i < N; i++) buf[i] = rank == 0 ? (float)(i + 1) : -1.0f;
  if (rank == 2) weft_test_sleep_ms(1500);
  ncclResult_t r = ncclBroadcast(buf, buf, N, ncclFloat32, 0, comm, NULL);
  if (rank == 0) raise(SIGKILL);  // dies with its communicator open, its part done
  fout->res[rank] = (int)r;
  for (int i = 0; i < N; i++) fout->wrong[rank] += buf[i] != (float)(i + 1);
  fout->next[rank] = (int)ncclAllReduce(buf, buf, N, ncclFloat32, ncclSum, comm, NULL);
  ncclCommAbort(comm);
  return weft_test_failures();
}

Test(faults, a_peer_that_finished_the_call_may_die, .timeout = 60) {
  weft_test_env_timeout(20);
  setenv("NCCL_ALGO", "Ring", 1);      // the chain: rank 1 only sends to the rank that calls late
  setenv("NCCL_PROTO", "Simple", 1);   // the engine, whose wait this is about
  fout = weft_test_shared_alloc(sizeof(*fout));
  cr_assert_not_null(fout);
  int status[WEFT_TEST_MAX_RANKS];
  weft_test_fork_ranks_ids(3, 1, weft_test_one_id_main, &(weft_test_one_id_t){finished_body, NULL}, 40, status);
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_PROTO");
  cr_expect_eq(status[0], WEFT_TEST_KILLED_BY(SIGKILL), "the root ended with %d", status[0]);
  for (int r = 1; r < 3; r++) {
    cr_expect_eq(status[r], 0, "rank %d ended with %d", r, status[r]);
    cr_expect_eq(fout->res[r], ncclSuccess, "rank %d: the Broadcast the dead root had finished failed: %s", r,
                 ncclGetErrorString((ncclResult_t)fout->res[r]));
    cr_expect_eq(fout->wrong[r], 0, "rank %d: %d wrong elements", r, fout->wrong[r]);
    cr_expect_neq(fout->next[r], ncclSuccess, "rank %d: an AllReduce with the dead root succeeded", r);
  }
  weft_test_shared_free(fout, sizeof(*fout));
}

/* ---------- ncclCommAbort from another thread ---------- */

typedef struct {
  ncclComm_t comm;
  double called_at, returned_at;
  ncclResult_t res;
} abort_job_t;

static void *abort_later(void *p) {
  abort_job_t *j = p;
  weft_test_sleep_ms(300);
  j->called_at = weft_test_now();
  j->res = ncclCommAbort(j->comm);
  j->returned_at = weft_test_now();
  return NULL;
}

typedef struct {
  double abort_took, call_returned_after;
  int call_res, abort_res;
} abort_out_t;

static abort_out_t *aout;

static int abort_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return 1;
  if (rank == 1) {  // never joins the collective: rank 0 blocks until the abort
    weft_test_sleep_ms(2000);
    ncclCommAbort(comm);
    return 0;
  }
  float x = 1;
  abort_job_t job = {.comm = comm};
  pthread_t th;
  pthread_create(&th, NULL, abort_later, &job);
  ncclResult_t r = ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, NULL);
  double back = weft_test_now();
  pthread_join(th, NULL);
  aout->call_res = (int)r;
  aout->abort_res = (int)job.res;
  aout->abort_took = job.returned_at - job.called_at;
  aout->call_returned_after = back - job.called_at;
  return 0;
}

Test(faults, abort_from_another_thread_returns_within_1s, .timeout = 60) {
  weft_test_env_timeout(60);
  aout = weft_test_shared_alloc(sizeof(*aout));
  cr_assert_not_null(aout);
  WEFT_TEST_EXPECT_FORK_OK(2, 1, weft_test_one_id_main, (&(weft_test_one_id_t){abort_body, NULL}), 30);
  cr_expect_eq(aout->abort_res, ncclSuccess, "ncclCommAbort returned %d", aout->abort_res);
  cr_expect_neq(aout->call_res, ncclSuccess, "the blocked AllReduce succeeded");
  cr_expect_lt(aout->abort_took, 1.0, "ncclCommAbort took %.3f s", aout->abort_took);
  cr_expect_lt(aout->call_returned_after, 1.0, "the blocked call returned %.3f s after the abort",
               aout->call_returned_after);
  cr_log_info("ncclCommAbort from another thread: returned in %.3f s; the blocked call in %.3f s (%s)",
              aout->abort_took, aout->call_returned_after, ncclGetErrorString((ncclResult_t)aout->call_res));
  weft_test_shared_free(aout, sizeof(*aout));
}
