/*
 * test_shrink.c — ncclCommShrink and ncclCommRevoke through the public API:
 * shrinking a healthy communicator (NCCL_SHRINK_DEFAULT, ranks as processes
 * and as threads), shrinking away a rank killed with SIGKILL, the last one
 * or rank 0 (NCCL_SHRINK_ABORT), exclude lists that differ between
 * survivors (every survivor fails: at once when the lowest survivor sees
 * the difference, within WEFT_TIMEOUT otherwise), an attempt abandoned
 * before the lowest survivor came (the next one still works), revoking a
 * communicator while another thread is blocked in a collective (blocking
 * and non-blocking), then splitting or shrinking it, and bad arguments.
 *
 * Ranks are forked through harness.h (the test process hosts the
 * rendezvous). Survivors count their open descriptors before the shrink and
 * after destroying the new communicator, and the test looks for
 * /dev/shm/weft-<pid>-* entries of its ranks at the end: nothing may be
 * left behind.
 */
#include <criterion/criterion.h>
#include <dirent.h>

#include "harness.h"

/* ---------- helpers ---------- */

static int count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (d == NULL) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) n += e->d_name[0] != '.';
  closedir(d);
  return n - 1;  // the directory's own descriptor
}

// Entries /dev/shm/weft-<pid>-* of any of the pids.
static int shm_left_by(const pid_t *pids, int n) {
  DIR *d = opendir("/dev/shm");
  if (d == NULL) return 0;
  int found = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (strncmp(e->d_name, "weft-", 5) != 0) continue;
    int pid = atoi(e->d_name + 5);
    for (int i = 0; i < n; i++)
      if (pids[i] == pid) {
        cr_log_error("left behind: /dev/shm/%s", e->d_name);
        found++;
      }
  }
  closedir(d);
  return found;
}

// Sum over comm of `mine` (int64, 257 elements: element i gets mine + i).
static void check_sum(ncclComm_t comm, int64_t mine, int64_t want) {
  enum { N = 257 };
  int64_t buf[N];
  int nranks = 0;
  WEFT_TEST_CHECK_RES(ncclCommCount(comm, &nranks), ncclSuccess);
  for (int i = 0; i < N; i++) buf[i] = mine + i;
  WEFT_TEST_CHECK_RES(ncclAllReduce(buf, buf, N, ncclInt64, ncclSum, comm, NULL), ncclSuccess);
  int bad = 0;
  for (int i = 0; i < N; i++) bad += buf[i] != want + (int64_t)i * nranks;
  WEFT_TEST_CHECK(bad == 0, "%d of %d elements wrong (buf[0]=%lld, expected %lld)", bad, N, (long long)buf[0],
                  (long long)want);
}

// The new communicator's ranks must be the survivors in parent order.
static void check_members(ncclComm_t child, int parent_rank, const int *surv, int m) {
  int count = -1, rank = -1;
  WEFT_TEST_CHECK_RES(ncclCommCount(child, &count), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclCommUserRank(child, &rank), ncclSuccess);
  WEFT_TEST_CHECK(count == m, "new communicator has %d ranks, expected %d", count, m);
  int32_t who[WEFT_TEST_MAX_RANKS] = {0}, me = parent_rank;
  WEFT_TEST_CHECK_RES(ncclAllGather(&me, who, 1, ncclInt32, child, NULL), ncclSuccess);
  for (int i = 0; i < m && i < count; i++)
    WEFT_TEST_CHECK(who[i] == surv[i], "new rank %d is parent rank %d, expected %d", i, who[i], surv[i]);
  WEFT_TEST_CHECK(rank >= 0 && rank < m && surv[rank] == parent_rank, "parent rank %d became rank %d", parent_rank,
                  rank);
}

typedef struct {
  pid_t pids[WEFT_TEST_MAX_RANKS];
  int64_t fail_ms[WEFT_TEST_MAX_RANKS];  // how long a call took to fail
  int res[WEFT_TEST_MAX_RANKS];
  int flag;
  int victim;  // the rank that kills itself
} shared_t;

static shared_t *shared_new(void) {
  shared_t *s = weft_test_shared_alloc(sizeof(shared_t));
  cr_assert_not_null(s, "shared memory");
  return s;
}

static int64_t ms_since(double t0) { return (int64_t)((weft_test_now() - t0) * 1000); }

/* ---------- (a) NCCL_SHRINK_DEFAULT, every rank alive ---------- */

static int default_body(int rank, int nranks, ncclUniqueId *ids, void *arg) {
  shared_t *sh = arg;
  sh->pids[rank] = getpid();
  ncclComm_t parent = weft_test_init_rank(nranks, ids[0], rank);
  if (parent == NULL) return weft_test_failures();
  if (rank != 2) {
    int fds = count_fds();
    int exclude[1] = {2}, surv[3] = {0, 1, 3};
    ncclComm_t child = NULL;
    WEFT_TEST_CHECK_RES(ncclCommShrink(parent, exclude, 1, &child, NULL, NCCL_SHRINK_DEFAULT), ncclSuccess);
    WEFT_TEST_CHECK(child != NULL, "no new communicator");
    if (child != NULL) {
      check_members(child, rank, surv, 3);
      check_sum(child, rank + 1, 1 + 2 + 4);
      WEFT_TEST_CHECK_RES(ncclCommDestroy(child), ncclSuccess);
    }
    WEFT_TEST_CHECK(count_fds() == fds, "%d descriptors open after the shrunk communicator is gone, %d before",
                    count_fds(), fds);
  }
  check_sum(parent, rank + 1, 1 + 2 + 3 + 4);  // the parent is untouched and still works
  WEFT_TEST_CHECK_RES(ncclCommDestroy(parent), ncclSuccess);
  return weft_test_failures();
}

Test(shrink, default_excludes_a_live_rank, .timeout = 60) {
  weft_test_env_defaults();
  shared_t *sh = shared_new();
  WEFT_TEST_EXPECT_FORK_OK(4, 1, default_body, sh, 50);
  cr_expect_eq(shm_left_by(sh->pids, 4), 0);
  weft_test_shared_free(sh, sizeof(*sh));
}

/* ---------- (a') the same with ranks as threads of one process ---------- */

static int thread_body(int rank, int nranks, ncclComm_t comm, void *arg) {
  (void)arg;
  (void)nranks;
  if (rank == 3) return 0;  // excluded: takes no part
  int exclude[1] = {3}, surv[3] = {0, 1, 2};
  ncclComm_t child = NULL;
  WEFT_TEST_CHECK_RES(ncclCommShrink(comm, exclude, 1, &child, NULL, NCCL_SHRINK_DEFAULT), ncclSuccess);
  if (child == NULL) return 1;
  check_members(child, rank, surv, 3);
  check_sum(child, 10 * rank, 0 + 10 + 20);
  WEFT_TEST_CHECK_RES(ncclCommDestroy(child), ncclSuccess);
  return weft_test_failures();
}

Test(shrink, default_with_thread_ranks, .timeout = 60) {
  weft_test_env_defaults();
  ncclComm_t comms[4] = {0};
  cr_assert_eq(ncclCommInitAll(comms, 4, NULL), ncclSuccess);
  cr_expect_eq(weft_test_thread_ranks(4, comms, thread_body, NULL), 0);
  for (int r = 0; r < 4; r++) WEFT_TEST_EXPECT_RES(ncclCommDestroy(comms[r]), ncclSuccess);
}

/* ---------- (b) NCCL_SHRINK_ABORT after a rank was killed ---------- */

static int abort_body(int rank, int nranks, ncclUniqueId *ids, void *arg) {
  shared_t *sh = arg;
  sh->pids[rank] = getpid();
  ncclComm_t parent = weft_test_init_rank(nranks, ids[0], rank);
  if (parent == NULL) return weft_test_failures();
  check_sum(parent, rank, 0 + 1 + 2 + 3);
  if (rank == sh->victim) raise(SIGKILL);  // dies with its communicator open

  // The next collective waits on the dead rank and fails (WEFT_TIMEOUT=3).
  int64_t buf[64] = {0};
  double t0 = weft_test_now();
  ncclResult_t r = ncclAllReduce(buf, buf, 64, ncclInt64, ncclSum, parent, NULL);
  sh->fail_ms[rank] = ms_since(t0);
  WEFT_TEST_CHECK(r != ncclSuccess, "AllReduce with a dead rank succeeded");
  ncclResult_t async = ncclSuccess;
  WEFT_TEST_CHECK_RES(ncclCommGetAsyncError(parent, &async), ncclSuccess);
  WEFT_TEST_CHECK(async != ncclSuccess, "ncclCommGetAsyncError reports no error after the failure");

  int fds = count_fds();
  int exclude[1] = {sh->victim}, surv[3], m = 0, sum = 0;
  for (int q = 0; q < nranks; q++)
    if (q != sh->victim) surv[m++] = q, sum += q;
  ncclComm_t child = NULL;
  t0 = weft_test_now();
  WEFT_TEST_CHECK_RES(ncclCommShrink(parent, exclude, 1, &child, NULL, NCCL_SHRINK_ABORT), ncclSuccess);
  sh->res[rank] = (int)ms_since(t0);
  if (child != NULL) {
    check_members(child, rank, surv, 3);
    check_sum(child, 100 + rank, 300 + sum);
    check_sum(child, rank, sum);
    WEFT_TEST_CHECK_RES(ncclCommDestroy(child), ncclSuccess);
  }
  WEFT_TEST_CHECK(count_fds() == fds, "%d descriptors open after the shrunk communicator is gone, %d before",
                  count_fds(), fds);
  // The parent stays failed: new work is refused or fails, and it can still be destroyed.
  WEFT_TEST_CHECK(ncclAllReduce(buf, buf, 64, ncclInt64, ncclSum, parent, NULL) != ncclSuccess,
                  "the aborted parent ran a collective");
  WEFT_TEST_CHECK_RES(ncclCommDestroy(parent), ncclSuccess);
  return weft_test_failures();
}

static void expect_abort_shrink(int victim) {
  weft_test_env_timeout(3);
  shared_t *sh = shared_new();
  sh->victim = victim;
  int status[4];
  int bad = weft_test_fork_ranks_ids(4, 1, abort_body, sh, 50, status);
  cr_expect_eq(bad, 1, "only the killed rank may fail (%d did)", bad);
  for (int r = 0; r < 4; r++) {
    if (r == victim) continue;
    cr_expect_eq(status[r], 0, "survivor %d: outcome %d", r, status[r]);
    cr_expect(sh->fail_ms[r] < 10000, "rank %d: AllReduce took %lld ms to fail", r, (long long)sh->fail_ms[r]);
    cr_log_info("rank %d: AllReduce failed after %lld ms; shrink took %d ms", r, (long long)sh->fail_ms[r],
                sh->res[r]);
  }
  cr_expect_eq(status[victim], WEFT_TEST_KILLED_BY(SIGKILL), "rank %d: outcome %d", victim, status[victim]);
  cr_expect_eq(shm_left_by(sh->pids, 4), 0);
  weft_test_shared_free(sh, sizeof(*sh));
}

Test(shrink, abort_after_the_last_rank_was_killed, .timeout = 60) { expect_abort_shrink(3); }

// Rank 0 dies: rank 1 leads the survivors, and rank 0's segment (which holds
// the host's abort word) outlives it in the survivors' mappings.
Test(shrink, abort_after_rank_0_was_killed, .timeout = 60) { expect_abort_shrink(0); }

/* ---------- (c) survivors that disagree ---------- */

// Ranks 0 and 1 exclude {3}, rank 2 excludes {1, 3}: the lowest survivor
// (rank 0 for everyone) sees the difference and every caller fails fast.
// Then all three agree and the shrink works (a failed attempt leaves nothing
// in the way of the next).
static int mismatch_body(int rank, int nranks, ncclUniqueId *ids, void *arg) {
  shared_t *sh = arg;
  sh->pids[rank] = getpid();
  ncclComm_t parent = weft_test_init_rank(nranks, ids[0], rank);
  if (parent == NULL) return weft_test_failures();
  if (rank != 3) {
    int ours[1] = {3}, other[2] = {3, 1};
    ncclComm_t child = (ncclComm_t)&child;  // must become NULL
    double t0 = weft_test_now();
    ncclResult_t r = rank == 2 ? ncclCommShrink(parent, other, 2, &child, NULL, NCCL_SHRINK_DEFAULT)
                               : ncclCommShrink(parent, ours, 1, &child, NULL, NCCL_SHRINK_DEFAULT);
    sh->fail_ms[rank] = ms_since(t0);
    sh->res[rank] = (int)r;
    WEFT_TEST_CHECK(r == ncclInvalidUsage, "mismatched shrink returned %d (%s)", (int)r, ncclGetErrorString(r));
    WEFT_TEST_CHECK(child == NULL, "a failed shrink left *newcomm set");

    int surv[3] = {0, 1, 2};
    child = NULL;
    WEFT_TEST_CHECK_RES(ncclCommShrink(parent, ours, 1, &child, NULL, NCCL_SHRINK_DEFAULT), ncclSuccess);
    if (child != NULL) {
      check_members(child, rank, surv, 3);
      check_sum(child, rank, 0 + 1 + 2);
      WEFT_TEST_CHECK_RES(ncclCommDestroy(child), ncclSuccess);
    }
  }
  __atomic_add_fetch(&sh->flag, 1, __ATOMIC_SEQ_CST);  // rank 3 keeps its listener until the others are done
  for (int i = 0; i < 3000 && __atomic_load_n(&sh->flag, __ATOMIC_SEQ_CST) < nranks; i++) weft_test_sleep_ms(10);
  WEFT_TEST_CHECK_RES(ncclCommDestroy(parent), ncclSuccess);
  return weft_test_failures();
}

Test(shrink, mismatched_lists_fail_on_every_survivor, .timeout = 60) {
  weft_test_env_defaults();
  shared_t *sh = shared_new();
  WEFT_TEST_EXPECT_FORK_OK(4, 1, mismatch_body, sh, 50);
  for (int r = 0; r < 3; r++) {
    cr_expect(sh->fail_ms[r] < 5000, "rank %d took %lld ms to see the mismatch", r, (long long)sh->fail_ms[r]);
    cr_log_info("rank %d: mismatch reported after %lld ms", r, (long long)sh->fail_ms[r]);
  }
  cr_expect_eq(shm_left_by(sh->pids, 4), 0);
  weft_test_shared_free(sh, sizeof(*sh));
}

// Rank 1 excludes {0, 3} and so reports to itself, while ranks 0 and 2
// exclude {3} and report to rank 0: no leader sees every list, so each
// caller fails when WEFT_TIMEOUT (3 s) passes, none hangs.
static int split_view_body(int rank, int nranks, ncclUniqueId *ids, void *arg) {
  shared_t *sh = arg;
  sh->pids[rank] = getpid();
  ncclComm_t parent = weft_test_init_rank(nranks, ids[0], rank);
  if (parent == NULL) return weft_test_failures();
  if (rank != 3) {
    int ours[1] = {3}, other[2] = {0, 3};
    ncclComm_t child = NULL;
    double t0 = weft_test_now();
    ncclResult_t r = rank == 1 ? ncclCommShrink(parent, other, 2, &child, NULL, NCCL_SHRINK_DEFAULT)
                               : ncclCommShrink(parent, ours, 1, &child, NULL, NCCL_SHRINK_DEFAULT);
    sh->fail_ms[rank] = ms_since(t0);
    WEFT_TEST_CHECK(r != ncclSuccess, "a shrink with differing lists succeeded");
    WEFT_TEST_CHECK(child == NULL, "a failed shrink left *newcomm set");
    if (child != NULL) ncclCommDestroy(child);
  }
  __atomic_add_fetch(&sh->flag, 1, __ATOMIC_SEQ_CST);
  for (int i = 0; i < 3000 && __atomic_load_n(&sh->flag, __ATOMIC_SEQ_CST) < nranks; i++) weft_test_sleep_ms(10);
  WEFT_TEST_CHECK_RES(ncclCommDestroy(parent), ncclSuccess);
  return weft_test_failures();
}

Test(shrink, differing_leaders_fail_by_timeout, .timeout = 60) {
  weft_test_env_timeout(3);
  shared_t *sh = shared_new();
  WEFT_TEST_EXPECT_FORK_OK(4, 1, split_view_body, sh, 50);
  for (int r = 0; r < 3; r++) {
    cr_expect(sh->fail_ms[r] < 12000, "rank %d took %lld ms to fail", r, (long long)sh->fail_ms[r]);
    cr_log_info("rank %d: failed after %lld ms", r, (long long)sh->fail_ms[r]);
  }
  cr_expect_eq(shm_left_by(sh->pids, 4), 0);
  weft_test_shared_free(sh, sizeof(*sh));
}

// Rank 1 shrinks alone and gives up (WEFT_TIMEOUT=1) before rank 0, the
// lowest survivor, calls: its hello waits in rank 0's listener. When both
// then shrink, rank 0 drops that stale hello and the shrink works.
static int stale_body(int rank, int nranks, ncclUniqueId *ids, void *arg) {
  shared_t *sh = arg;
  sh->pids[rank] = getpid();
  ncclComm_t parent = weft_test_init_rank(nranks, ids[0], rank);
  if (parent == NULL) return weft_test_failures();
  int exclude[1] = {2}, surv[2] = {0, 1};
  if (rank == 1) {
    ncclComm_t child = NULL;
    WEFT_TEST_CHECK_RES(ncclCommShrink(parent, exclude, 1, &child, NULL, NCCL_SHRINK_DEFAULT), ncclRemoteError);
    __atomic_store_n(&sh->flag, 1, __ATOMIC_SEQ_CST);
  }
  if (rank != 2) {
    for (int i = 0; i < 3000 && __atomic_load_n(&sh->flag, __ATOMIC_SEQ_CST) == 0; i++) weft_test_sleep_ms(10);
    ncclComm_t child = NULL;
    WEFT_TEST_CHECK_RES(ncclCommShrink(parent, exclude, 1, &child, NULL, NCCL_SHRINK_DEFAULT), ncclSuccess);
    if (child != NULL) {
      check_members(child, rank, surv, 2);
      check_sum(child, rank, 1);
      WEFT_TEST_CHECK_RES(ncclCommDestroy(child), ncclSuccess);
    }
    __atomic_add_fetch(&sh->flag, 1, __ATOMIC_SEQ_CST);
  }
  for (int i = 0; i < 3000 && __atomic_load_n(&sh->flag, __ATOMIC_SEQ_CST) < 3; i++) weft_test_sleep_ms(10);
  WEFT_TEST_CHECK_RES(ncclCommDestroy(parent), ncclSuccess);
  return weft_test_failures();
}

Test(shrink, a_stale_attempt_does_not_spoil_the_next, .timeout = 60) {
  weft_test_env_timeout(1);
  shared_t *sh = shared_new();
  WEFT_TEST_EXPECT_FORK_OK(3, 1, stale_body, sh, 50);
  cr_expect_eq(shm_left_by(sh->pids, 3), 0);
  weft_test_shared_free(sh, sizeof(*sh));
}

/* ---------- (d) ncclCommRevoke while a collective is blocked ---------- */

typedef struct {
  ncclComm_t comm;
  ncclResult_t res;
  double returned;
} blocked_t;

static void *blocked_allreduce(void *p) {
  blocked_t *b = p;
  int64_t buf[32] = {0};
  b->res = ncclAllReduce(buf, buf, 32, ncclInt64, ncclSum, b->comm, NULL);  // rank 1 never joins it
  b->returned = weft_test_now();
  return NULL;
}

static int revoke_body(int rank, int nranks, ncclUniqueId *ids, void *arg) {
  shared_t *sh = arg;
  sh->pids[rank] = getpid();
  ncclComm_t comm = weft_test_init_rank(nranks, ids[0], rank);
  if (comm == NULL) return weft_test_failures();
  int64_t buf[32] = {0};
  if (rank == 0) {
    blocked_t b = {.comm = comm, .res = ncclSuccess};
    pthread_t th;
    WEFT_TEST_CHECK(pthread_create(&th, NULL, blocked_allreduce, &b) == 0, "pthread_create");
    weft_test_sleep_ms(300);
    double t0 = weft_test_now();
    WEFT_TEST_CHECK_RES(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT), ncclSuccess);
    pthread_join(th, NULL);
    sh->fail_ms[0] = (int64_t)((b.returned - t0) * 1000);
    WEFT_TEST_CHECK(b.res != ncclSuccess, "the blocked AllReduce succeeded after the revoke");
    WEFT_TEST_CHECK(b.returned - t0 < 1.0, "the blocked AllReduce returned %.3f s after the revoke",
                    b.returned - t0);
    __atomic_store_n(&sh->flag, 1, __ATOMIC_SEQ_CST);  // rank 1 may go on
  } else {
    for (int i = 0; i < 3000 && __atomic_load_n(&sh->flag, __ATOMIC_SEQ_CST) == 0; i++) weft_test_sleep_ms(10);
    // Rank 0's revocation reached this rank: its collective fails at once.
    double t0 = weft_test_now();
    ncclResult_t r = ncclAllReduce(buf, buf, 32, ncclInt64, ncclSum, comm, NULL);
    WEFT_TEST_CHECK(r == ncclRemoteError, "AllReduce on a peer's revoked communicator returned %d (%s)", (int)r,
                    ncclGetErrorString(r));
    sh->fail_ms[1] = ms_since(t0);
    WEFT_TEST_CHECK_RES(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT), ncclSuccess);
  }
  // Revoked: new work is refused, finalize is invalid, a second revoke too.
  WEFT_TEST_CHECK_RES(ncclAllReduce(buf, buf, 32, ncclInt64, ncclSum, comm, NULL), ncclInvalidUsage);
  WEFT_TEST_CHECK_RES(ncclSend(buf, 1, ncclInt64, 1 - rank, comm, NULL), ncclInvalidUsage);
  WEFT_TEST_CHECK_RES(ncclCommFinalize(comm), ncclInvalidUsage);
  WEFT_TEST_CHECK_RES(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT), ncclInvalidArgument);
  ncclResult_t async = ncclInternalError;
  WEFT_TEST_CHECK_RES(ncclCommGetAsyncError(comm, &async), ncclSuccess);
  WEFT_TEST_CHECK(async == ncclSuccess, "a quiet revoked communicator reports %d", (int)async);
  // A revoked communicator can still be split; the new one works.
  ncclComm_t child = NULL;
  WEFT_TEST_CHECK_RES(ncclCommSplit(comm, 0, rank, &child, NULL), ncclSuccess);
  if (child != NULL) {
    check_sum(child, rank, 1);
    WEFT_TEST_CHECK_RES(ncclCommDestroy(child), ncclSuccess);
  }
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  return weft_test_failures();
}

Test(revoke, releases_a_blocked_collective, .timeout = 60) {
  weft_test_env_defaults();
  shared_t *sh = shared_new();
  WEFT_TEST_EXPECT_FORK_OK(2, 1, revoke_body, sh, 50);
  cr_log_info("blocked AllReduce returned %lld ms after the revoke; the peer's failed in %lld ms",
              (long long)sh->fail_ms[0], (long long)sh->fail_ms[1]);
  cr_expect_eq(shm_left_by(sh->pids, 2), 0);
  weft_test_shared_free(sh, sizeof(*sh));
}

// A non-blocking communicator: ncclCommRevoke may return ncclInProgress
// while the blocked collective stops; ncclCommGetAsyncError then turns to
// ncclSuccess within a second, and the communicator can be destroyed.
static int nonblocking_body(int rank, int nranks, ncclUniqueId *ids, void *arg) {
  shared_t *sh = arg;
  sh->pids[rank] = getpid();
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t comm = NULL;
  ncclResult_t r = ncclCommInitRankConfig(&comm, nranks, ids[0], rank, &cfg);
  WEFT_TEST_CHECK(r == ncclSuccess || r == ncclInProgress, "init returned %d", (int)r);
  ncclResult_t state = ncclInProgress;
  for (int i = 0; i < 30000 && state == ncclInProgress; i++) {
    WEFT_TEST_CHECK_RES(ncclCommGetAsyncError(comm, &state), ncclSuccess);
    if (state == ncclInProgress) weft_test_sleep_ms(1);
  }
  WEFT_TEST_CHECK(state == ncclSuccess, "non-blocking init ended with %d", (int)state);
  if (rank == 0) {
    blocked_t b = {.comm = comm, .res = ncclSuccess};
    pthread_t th;
    WEFT_TEST_CHECK(pthread_create(&th, NULL, blocked_allreduce, &b) == 0, "pthread_create");
    weft_test_sleep_ms(300);
    double t0 = weft_test_now();
    r = ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT);
    WEFT_TEST_CHECK(r == ncclSuccess || r == ncclInProgress, "revoke returned %d", (int)r);
    state = ncclInProgress;
    while (state == ncclInProgress && weft_test_now() - t0 < 1.0) {
      WEFT_TEST_CHECK_RES(ncclCommGetAsyncError(comm, &state), ncclSuccess);
      if (state == ncclInProgress) weft_test_sleep_ms(1);
    }
    WEFT_TEST_CHECK(state == ncclSuccess, "revoked communicator reports %d after %.3f s", (int)state,
                    weft_test_now() - t0);
    pthread_join(th, NULL);
    WEFT_TEST_CHECK(b.res != ncclSuccess && b.res != ncclInProgress, "the blocked AllReduce returned %d",
                    (int)b.res);
  }
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  return weft_test_failures();
}

Test(revoke, non_blocking_communicator, .timeout = 60) {
  weft_test_env_defaults();
  shared_t *sh = shared_new();
  WEFT_TEST_EXPECT_FORK_OK(2, 1, nonblocking_body, sh, 50);
  cr_expect_eq(shm_left_by(sh->pids, 2), 0);
  weft_test_shared_free(sh, sizeof(*sh));
}

// Revoke, then shrink the revoked communicator (both ranks of a pair in one
// process; rank 1 is excluded and destroyed afterwards).
Test(revoke, then_shrink, .timeout = 30) {
  weft_test_env_defaults();
  ncclComm_t comms[2] = {0};
  cr_assert_eq(ncclCommInitAll(comms, 2, NULL), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclCommRevoke(comms[0], NCCL_REVOKE_DEFAULT), ncclSuccess);
  int exclude[1] = {1};
  ncclComm_t child = NULL;
  WEFT_TEST_EXPECT_RES(ncclCommShrink(comms[0], exclude, 1, &child, NULL, NCCL_SHRINK_DEFAULT), ncclSuccess);
  cr_assert_not_null(child);
  int32_t v = 5;
  WEFT_TEST_EXPECT_RES(ncclAllReduce(&v, &v, 1, ncclInt32, ncclSum, child, NULL), ncclSuccess);
  cr_expect_eq(v, 5);
  WEFT_TEST_EXPECT_RES(ncclCommDestroy(child), ncclSuccess);
  for (int r = 0; r < 2; r++) WEFT_TEST_EXPECT_RES(ncclCommDestroy(comms[r]), ncclSuccess);
}

/* ---------- (e) bad arguments ---------- */

Test(shrink, bad_arguments, .timeout = 30) {
  weft_test_env_defaults();
  ncclComm_t comms[4] = {0};
  cr_assert_eq(ncclCommInitAll(comms, 4, NULL), ncclSuccess);
  ncclComm_t c = comms[0], child = (ncclComm_t)&child;
  const ncclResult_t IA = ncclInvalidArgument;
  int one[1] = {2}, dup[2] = {2, 2}, self[2] = {3, 0}, range[1] = {4}, neg[1] = {-1}, all[4] = {0, 1, 2, 3};
  WEFT_TEST_EXPECT_RES(ncclCommShrink(NULL, one, 1, &child, NULL, NCCL_SHRINK_DEFAULT), IA);
  WEFT_TEST_EXPECT_RES(ncclCommShrink(c, one, 1, NULL, NULL, NCCL_SHRINK_DEFAULT), IA);
  WEFT_TEST_EXPECT_RES(ncclCommShrink(c, NULL, 1, &child, NULL, NCCL_SHRINK_DEFAULT), IA);
  cr_expect_null(child, "*newcomm is NULL after a failed shrink");
  WEFT_TEST_EXPECT_RES(ncclCommShrink(c, one, 0, &child, NULL, NCCL_SHRINK_DEFAULT), IA);
  WEFT_TEST_EXPECT_RES(ncclCommShrink(c, one, -1, &child, NULL, NCCL_SHRINK_DEFAULT), IA);
  WEFT_TEST_EXPECT_RES(ncclCommShrink(c, dup, 2, &child, NULL, NCCL_SHRINK_DEFAULT), IA);
  WEFT_TEST_EXPECT_RES(ncclCommShrink(c, self, 2, &child, NULL, NCCL_SHRINK_DEFAULT), IA);
  WEFT_TEST_EXPECT_RES(ncclCommShrink(c, range, 1, &child, NULL, NCCL_SHRINK_DEFAULT), IA);
  WEFT_TEST_EXPECT_RES(ncclCommShrink(c, neg, 1, &child, NULL, NCCL_SHRINK_DEFAULT), IA);
  WEFT_TEST_EXPECT_RES(ncclCommShrink(c, all, 4, &child, NULL, NCCL_SHRINK_DEFAULT), IA);
  WEFT_TEST_EXPECT_RES(ncclCommShrink(c, one, 1, &child, NULL, 2), IA);
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 0;
  WEFT_TEST_EXPECT_RES(ncclCommShrink(c, one, 1, &child, &bad, NCCL_SHRINK_DEFAULT), IA);
  cr_expect_null(child, "*newcomm is NULL after a failed shrink");
  long garbage[16] = {0};
  WEFT_TEST_EXPECT_RES(ncclCommShrink((ncclComm_t)(void *)garbage, one, 1, &child, NULL, NCCL_SHRINK_DEFAULT), IA);

  WEFT_TEST_EXPECT_RES(ncclCommRevoke(NULL, NCCL_REVOKE_DEFAULT), ncclSuccess);  // as NCCL
  WEFT_TEST_EXPECT_RES(ncclCommRevoke(c, 1), IA);
  WEFT_TEST_EXPECT_RES(ncclCommRevoke(c, -1), IA);
  WEFT_TEST_EXPECT_RES(ncclCommRevoke((ncclComm_t)(void *)garbage, NCCL_REVOKE_DEFAULT), IA);

  // None of it touched the communicators.
  int32_t v[4] = {1, 2, 3, 4};
  WEFT_TEST_EXPECT_RES(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 4; r++)
    WEFT_TEST_EXPECT_RES(ncclAllReduce(&v[r], &v[r], 1, ncclInt32, ncclSum, comms[r], NULL), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < 4; r++) cr_expect_eq(v[r], 10, "rank %d: %d", r, v[r]);
  for (int r = 0; r < 4; r++) WEFT_TEST_EXPECT_RES(ncclCommDestroy(comms[r]), ncclSuccess);
}
