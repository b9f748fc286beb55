/*
 * test_api_comm.c — creating communicators through the public API only:
 * ncclCommSplit (key order, ties, NCCL_SPLIT_NOCOLOR, splits of splits,
 * destroy order), ncclConfig_t (blocking, commName, bad magic, bad blocking),
 * non-blocking initialisation (one rank per process, and one thread that
 * initialises every rank of a job), ncclCommInitAll and
 * ncclCommInitRankScalable.
 *
 * Multi-process tests fork their ranks through harness.h; the test
 * process then creates the unique ids and so hosts the rendezvous. A rank
 * reports failed checks on stderr and exits with their count; the test
 * waits with a deadline and kills what is left.
 */
#include <criterion/criterion.h>

#include "harness.h"

/* ---------- helpers used by ranks ---------- */

// Checks count and rank of comm.
static void check_shape(ncclComm_t comm, int want_count, int want_rank) {
  int count = -1, rank = -1;
  WEFT_TEST_CHECK_RES(ncclCommCount(comm, &count), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclCommUserRank(comm, &rank), ncclSuccess);
  WEFT_TEST_CHECK(count == want_count, "count %d, expected %d", count, want_count);
  WEFT_TEST_CHECK(rank == want_rank, "rank %d, expected %d", rank, want_rank);
}

// AllReduce (sum) of `mine` over comm must give `want` everywhere.
static void check_allreduce(ncclComm_t comm, double mine, double want) {
  enum { N = 1000 };
  double *buf = malloc(N * sizeof(double));
  WEFT_TEST_CHECK(buf != NULL, "malloc");
  if (buf == NULL) return;
  for (int i = 0; i < N; i++) buf[i] = mine + i;
  int nranks = 0;
  ncclCommCount(comm, &nranks);
  WEFT_TEST_CHECK_RES(ncclAllReduce(buf, buf, N, ncclFloat64, ncclSum, comm, NULL), ncclSuccess);
  int bad = 0;
  for (int i = 0; i < N; i++) bad += buf[i] != want + (double)i * nranks;
  WEFT_TEST_CHECK(bad == 0, "%d of %d elements wrong (buf[0]=%g, expected %g)", bad, N, buf[0], want);
  free(buf);
}

/* ---------- ncclCommSplit ---------- */

// Parent ranks with the same parity, ordered as the split must order them.
static int split_rank_reversed(int rank, int nranks) {
  int before = 0;
  for (int q = rank % 2; q < nranks; q += 2) before += q > rank;  // key -q: larger q first
  return before;
}

static int split_body(int rank, int nranks, ncclUniqueId *ids, void *arg) {
  (void)arg;
  ncclComm_t parent = weft_test_init_rank(nranks, ids[0], rank);
  if (parent == NULL) return weft_test_failures();
  int color = rank % 2, members = 0;
  double sum = 0;
  for (int q = color; q < nranks; q += 2, members++) sum += q + 1;

  // Color by parity, reversed order through negative keys.
  ncclComm_t child = NULL;
  WEFT_TEST_CHECK_RES(ncclCommSplit(parent, color, -rank, &child, NULL), ncclSuccess);
  WEFT_TEST_CHECK(child != NULL, "split gave no communicator");
  if (child == NULL) return weft_test_failures();
  int my = split_rank_reversed(rank, nranks);
  check_shape(child, members, my);
  int32_t who[WEFT_TEST_MAX_RANKS] = {0}, me32 = rank;
  WEFT_TEST_CHECK_RES(ncclAllGather(&me32, who, 1, ncclInt32, child, NULL), ncclSuccess);
  for (int i = 0; i < members; i++) {
    int want = -1;
    for (int q = color; q < nranks; q += 2)
      if (split_rank_reversed(q, nranks) == i) want = q;
    WEFT_TEST_CHECK(who[i] == want, "child rank %d is parent rank %d, expected %d", i, who[i], want);
  }
  check_allreduce(child, rank + 1, sum);

  // Ties (keys 1,1,1,0,0) break by parent rank; the last rank opts out.
  ncclComm_t tie = (ncclComm_t)&tie;  // must be overwritten with NULL
  int tie_key = rank < 3 ? 1 : 0;
  int tie_color = rank == nranks - 1 ? NCCL_SPLIT_NOCOLOR : 7;
  WEFT_TEST_CHECK_RES(ncclCommSplit(parent, tie_color, tie_key, &tie, NULL), ncclSuccess);
  if (rank == nranks - 1) {
    WEFT_TEST_CHECK(tie == NULL, "NCCL_SPLIT_NOCOLOR rank got %p, expected NULL", (void *)tie);
  } else {
    int zero_keys = nranks - 1 - 3, want = rank < 3 ? zero_keys + rank : rank - 3;
    check_shape(tie, nranks - 1, want);
    double tsum = 0;
    for (int q = 0; q < nranks - 1; q++) tsum += 10 * q;
    check_allreduce(tie, 10 * rank, tsum);
    WEFT_TEST_CHECK_RES(ncclCommDestroy(tie), ncclSuccess);
  }

  // A split of the split: the first two child ranks, same key.
  ncclComm_t grand = NULL;
  WEFT_TEST_CHECK_RES(ncclCommSplit(child, my < 2 ? 0 : NCCL_SPLIT_NOCOLOR, 5, &grand, NULL), ncclSuccess);
  if (my < 2) {
    WEFT_TEST_CHECK(grand != NULL, "split of a split gave no communicator");
    if (grand != NULL) {
      check_shape(grand, 2, my);
      check_allreduce(grand, my + 1, 3);
    }
  } else {
    WEFT_TEST_CHECK(grand == NULL, "NCCL_SPLIT_NOCOLOR rank got %p", (void *)grand);
  }

  // Even ranks destroy children first; odd ranks destroy the parent first
  // and the child must keep working without it.
  if (color == 0) {
    WEFT_TEST_CHECK_RES(ncclCommDestroy(grand), ncclSuccess);
    WEFT_TEST_CHECK_RES(ncclCommDestroy(child), ncclSuccess);
    WEFT_TEST_CHECK_RES(ncclCommDestroy(parent), ncclSuccess);
  } else {
    WEFT_TEST_CHECK_RES(ncclCommDestroy(parent), ncclSuccess);
    check_allreduce(child, rank + 1, sum);
    WEFT_TEST_CHECK_RES(ncclCommDestroy(child), ncclSuccess);
    WEFT_TEST_CHECK_RES(ncclCommDestroy(grand), ncclSuccess);
  }
  return weft_test_failures();
}

Test(api_comm, split_orders_by_key_then_rank, .timeout = 60) {
  weft_test_env_timeout(20);
  WEFT_TEST_EXPECT_FORK_OK(6, 1, split_body, NULL, 45);
}

// Split arguments that every rank gets wrong alike fail without a hang.
static int split_bad_args_body(int rank, int nranks, ncclUniqueId *ids, void *arg) {
  (void)arg;
  ncclComm_t comm = weft_test_init_rank(nranks, ids[0], rank);
  if (comm == NULL) return weft_test_failures();
  ncclComm_t child = (ncclComm_t)&child;
  WEFT_TEST_CHECK_RES(ncclCommSplit(comm, -5, 0, &child, NULL), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(ncclCommSplit(comm, 0, 0, NULL, NULL), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(ncclCommSplit(NULL, 0, 0, &child, NULL), ncclInvalidArgument);
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 0x12345678;
  WEFT_TEST_CHECK_RES(ncclCommSplit(comm, 0, 0, &child, &bad), ncclInvalidArgument);
  ncclConfig_t twice = NCCL_CONFIG_INITIALIZER;
  twice.blocking = 2;
  WEFT_TEST_CHECK_RES(ncclCommSplit(comm, 0, 0, &child, &twice), ncclInvalidArgument);
  // The parent still works after the refusals.
  check_allreduce(comm, rank, nranks * (nranks - 1) / 2.0);
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  return weft_test_failures();
}

Test(api_comm, split_rejects_bad_arguments, .timeout = 40) {
  weft_test_env_timeout(10);
  WEFT_TEST_EXPECT_FORK_OK(2, 1, split_bad_args_body, NULL, 30);
}

/* ---------- ncclConfig_t ---------- */

static int config_named_body(int rank, int nranks, ncclUniqueId *ids, void *arg) {
  (void)arg;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 1;
  cfg.commName = "api-test-comm";
  ncclComm_t comm = NULL;
  WEFT_TEST_CHECK_RES(ncclCommInitRankConfig(&comm, nranks, ids[0], rank, &cfg), ncclSuccess);
  if (comm == NULL) return weft_test_failures();
  ncclResult_t async = ncclInternalError;
  WEFT_TEST_CHECK_RES(ncclCommGetAsyncError(comm, &async), ncclSuccess);
  WEFT_TEST_CHECK(async == ncclSuccess, "async error %d after a blocking init", (int)async);
  check_shape(comm, nranks, rank);
  check_allreduce(comm, rank, nranks * (nranks - 1) / 2.0);
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  return weft_test_failures();
}

Test(api_comm, config_blocking_with_name, .timeout = 40) {
  weft_test_env_timeout(20);
  WEFT_TEST_EXPECT_FORK_OK(3, 1, config_named_body, NULL, 30);
}

Test(api_comm, config_rejects_bad_magic_and_blocking, .timeout = 20) {
  weft_test_env_timeout(5);
  ncclUniqueId id;
  cr_assert_eq(ncclGetUniqueId(&id), ncclSuccess);
  double t0 = weft_test_now();
  ncclComm_t comm = NULL;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.magic = 0xdeadbeef;
  WEFT_TEST_EXPECT_RES(ncclCommInitRankConfig(&comm, 2, id, 0, &cfg), ncclInvalidArgument);
  ncclConfig_t two = NCCL_CONFIG_INITIALIZER;
  two.blocking = 2;
  WEFT_TEST_EXPECT_RES(ncclCommInitRankConfig(&comm, 2, id, 0, &two), ncclInvalidArgument);
  ncclConfig_t neg = NCCL_CONFIG_INITIALIZER;
  neg.blocking = -1;
  WEFT_TEST_EXPECT_RES(ncclCommInitRankConfig(&comm, 2, id, 0, &neg), ncclInvalidArgument);
  ncclConfig_t ok = NCCL_CONFIG_INITIALIZER;
  WEFT_TEST_EXPECT_RES(ncclCommInitRankScalable(&comm, 2, 0, 1, &id, &two), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclCommInitRankConfig(NULL, 2, id, 0, &ok), ncclInvalidArgument);
  cr_expect_lt(weft_test_now() - t0, 2.0, "refusals must not wait for peers");
}

static ncclResult_t wait_async(ncclComm_t comm, double limit_s) {
  double end = weft_test_now() + limit_s;
  ncclResult_t async = ncclInProgress;
  while (weft_test_now() < end) {
    ncclResult_t r = ncclCommGetAsyncError(comm, &async);
    if (r != ncclSuccess) return r;
    if (async != ncclInProgress) return async;
    weft_test_sleep_ms(2);
  }
  return ncclInProgress;
}

static int nonblocking_body(int rank, int nranks, ncclUniqueId *ids, void *arg) {
  (void)arg;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t comm = NULL;
  ncclResult_t r = ncclCommInitRankConfig(&comm, nranks, ids[0], rank, &cfg);
  WEFT_TEST_CHECK(r == ncclInProgress || r == ncclSuccess, "non-blocking init returned %d", (int)r);
  WEFT_TEST_CHECK(comm != NULL, "non-blocking init gave no communicator handle");
  if (comm == NULL) return weft_test_failures();
  WEFT_TEST_CHECK_RES(wait_async(comm, 20), ncclSuccess);
  check_shape(comm, nranks, rank);
  check_allreduce(comm, rank, nranks * (nranks - 1) / 2.0);
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  return weft_test_failures();
}

Test(api_comm, nonblocking_init_per_process, .timeout = 40) {
  weft_test_env_timeout(20);
  WEFT_TEST_EXPECT_FORK_OK(3, 1, nonblocking_body, NULL, 30);
}

// AllReduce (sum of rank) over comms[0..n-1] from one thread, in one group.
static void group_allreduce_all(ncclComm_t *comms, int n) {
  enum { N = 4099 };
  float *buf[WEFT_TEST_MAX_RANKS];
  for (int r = 0; r < n; r++) {
    buf[r] = malloc(N * sizeof(float));
    cr_assert_not_null(buf[r]);
    for (int i = 0; i < N; i++) buf[r][i] = (float)(r + (i % 7));
  }
  WEFT_TEST_EXPECT_RES(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; r++)
    WEFT_TEST_EXPECT_RES(ncclAllReduce(buf[r], buf[r], N, ncclFloat32, ncclSum, comms[r], NULL), ncclSuccess);
  ncclResult_t end = ncclGroupEnd();
  cr_expect(end == ncclSuccess || end == ncclInProgress, "ncclGroupEnd returned %d", (int)end);
  for (int r = 0; end == ncclInProgress && r < n; r++) WEFT_TEST_EXPECT_RES(wait_async(comms[r], 20), ncclSuccess);
  float base = (float)(n * (n - 1) / 2);
  for (int r = 0; r < n; r++) {
    int bad = 0;
    for (int i = 0; i < N; i++) bad += buf[r][i] != base + (float)(n * (i % 7));
    cr_expect_eq(bad, 0, "rank %d: %d elements wrong (buf[0]=%g, expected %g)", r, bad, buf[r][0], base);
    free(buf[r]);
  }
}

Test(api_comm, nonblocking_init_all_ranks_from_one_thread, .timeout = 40) {
  weft_test_env_timeout(20);
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
    WEFT_TEST_EXPECT_RES(ncclCommCount(comms[r], &count), ncclSuccess);
    WEFT_TEST_EXPECT_RES(ncclCommUserRank(comms[r], &rank), ncclSuccess);
    cr_expect(count == N && rank == r, "comm %d: count %d rank %d", r, count, rank);
  }
  group_allreduce_all(comms, N);
  for (int r = 0; r < N; r++) WEFT_TEST_EXPECT_RES(ncclCommDestroy(comms[r]), ncclSuccess);
}

/* ---------- ncclCommInitAll ---------- */

Test(api_comm, init_all_and_one_group_over_every_comm, .timeout = 40) {
  weft_test_env_timeout(20);
  enum { N = 4 };
  ncclComm_t comms[N] = {0};
  cr_assert_eq(ncclCommInitAll(comms, N, NULL), ncclSuccess);
  for (int r = 0; r < N; r++) {
    int count = 0, rank = -1, dev = -1;
    WEFT_TEST_EXPECT_RES(ncclCommCount(comms[r], &count), ncclSuccess);
    WEFT_TEST_EXPECT_RES(ncclCommUserRank(comms[r], &rank), ncclSuccess);
    WEFT_TEST_EXPECT_RES(ncclCommCuDevice(comms[r], &dev), ncclSuccess);
    cr_expect(count == N && rank == r && dev == r, "comm %d: count %d rank %d device %d", r, count, rank, dev);
  }
  group_allreduce_all(comms, N);
  group_allreduce_all(comms, N);  // and again on the same communicators
  for (int r = 0; r < N; r++) WEFT_TEST_EXPECT_RES(ncclCommDestroy(comms[r]), ncclSuccess);

  int devs[3] = {7, 5, 3};
  ncclComm_t three[3] = {0};
  cr_assert_eq(ncclCommInitAll(three, 3, devs), ncclSuccess);
  for (int r = 0; r < 3; r++) {
    int dev = -1;
    WEFT_TEST_EXPECT_RES(ncclCommCuDevice(three[r], &dev), ncclSuccess);
    cr_expect_eq(dev, devs[r], "comm %d: device %d, expected devlist[%d]=%d", r, dev, r, devs[r]);
  }
  group_allreduce_all(three, 3);
  for (int r = 0; r < 3; r++) WEFT_TEST_EXPECT_RES(ncclCommDestroy(three[r]), ncclSuccess);
}

Test(api_comm, init_all_rejects_bad_arguments, .timeout = 20) {
  weft_test_env_timeout(5);
  ncclComm_t comms[2] = {0};
  WEFT_TEST_EXPECT_RES(ncclCommInitAll(comms, 0, NULL), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclCommInitAll(comms, -3, NULL), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclCommInitAll(NULL, 2, NULL), ncclInvalidArgument);
  int bad_dev[2] = {0, -1};
  WEFT_TEST_EXPECT_RES(ncclCommInitAll(comms, 2, bad_dev), ncclInvalidArgument);
}

/* ---------- ncclCommInitRankScalable ---------- */

static int scalable_body(int rank, int nranks, ncclUniqueId *ids, void *arg) {
  (void)arg;
  ncclComm_t comm = NULL;
  WEFT_TEST_CHECK_RES(ncclCommInitRankScalable(&comm, nranks, rank, 2, ids, NULL), ncclSuccess);
  if (comm == NULL) return weft_test_failures();
  check_shape(comm, nranks, rank);
  check_allreduce(comm, rank * 2.0, (double)nranks * (nranks - 1));
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  return weft_test_failures();
}

Test(api_comm, init_scalable_two_ids_five_ranks, .timeout = 40) {
  weft_test_env_timeout(8);
  WEFT_TEST_EXPECT_FORK_OK(5, 2, scalable_body, NULL, 30);
}

Test(api_comm, init_scalable_rejects_bad_id_counts, .timeout = 20) {
  weft_test_env_timeout(5);
  ncclUniqueId ids[2];
  cr_assert_eq(ncclGetUniqueId(&ids[0]), ncclSuccess);
  ids[1] = ids[0];
  ncclComm_t comm = NULL;
  WEFT_TEST_EXPECT_RES(ncclCommInitRankScalable(&comm, 2, 0, 0, ids, NULL), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclCommInitRankScalable(&comm, 2, 0, 3, ids, NULL), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclCommInitRankScalable(&comm, 2, 0, 1, NULL, NULL), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclCommInitRankScalable(&comm, 2, 2, 1, ids, NULL), ncclInvalidArgument);
}
