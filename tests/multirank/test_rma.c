/*
 * test_rma.c — windows and one-sided calls on host memory (NCCL 2.30)
 * between forked processes: ncclCommWindowRegister, ncclWinGetUserPtr,
 * ncclPutSignal into the next rank's window and into one's own, ncclSignal,
 * ncclWaitSignal (data visible once the signal is, puts in order, counts
 * accumulate), collective deregistration; every bad argument; a wait that
 * times out when asked to and one whose sender dies.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define WIN_INTS 4096
#define PUT_INTS 256
#define PUT_AT 64     // ints into the window where the first put lands
#define ORDERED 100   // 4-byte puts to one place, each with its signal

static int32_t value(int from, int i) { return from * 100000 + i * 7 + 1; }

static int rma_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return weft_test_failures();
  int32_t *buf = calloc(WIN_INTS, sizeof(int32_t)), src[PUT_INTS];
  ncclWindow_t win = NULL;
  WEFT_TEST_CHECK_RES(ncclCommWindowRegister(comm, buf, WIN_INTS * sizeof(int32_t), &win,
                                             NCCL_WIN_COLL_SYMMETRIC | NCCL_WIN_STRICT_ORDERING), ncclSuccess);
  if (win == NULL) return weft_test_failures() + 1;
  void *user = NULL;
  WEFT_TEST_CHECK_RES(ncclWinGetUserPtr(comm, win, &user), ncclSuccess);
  WEFT_TEST_CHECK(user == buf, "ncclWinGetUserPtr gave %p, not the buffer %p", user, (void *)buf);

  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  for (int i = 0; i < PUT_INTS; i++) src[i] = value(rank, i);
  // To the next rank: a block, then ORDERED puts to one int, then a bare signal.
  WEFT_TEST_CHECK_RES(ncclPutSignal(src, PUT_INTS, ncclInt32, next, win, PUT_AT * sizeof(int32_t), 0, 0, 0, comm,
                                    NULL), ncclSuccess);
  for (int32_t k = 1; k <= ORDERED; k++)
    WEFT_TEST_CHECK_RES(ncclPutSignal(&k, 1, ncclInt32, next, win, 0, 0, 0, 0, comm, NULL), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclSignal(next, 0, 0, 0, comm, NULL), ncclSuccess);
  // Into its own window too.
  int32_t mine = -rank - 1;
  WEFT_TEST_CHECK_RES(ncclPutSignal(&mine, 1, ncclInt32, rank, win, (WIN_INTS - 1) * sizeof(int32_t), 0, 0, 0, comm,
                                    NULL), ncclSuccess);

  // From the previous rank: the block and the ordered puts (1 + ORDERED signals) ...
  ncclWaitSignalDesc_t d[2] = {{.opCnt = 1, .peer = prev}, {.opCnt = ORDERED, .peer = prev}};
  WEFT_TEST_CHECK_RES(ncclWaitSignal(2, d, comm, NULL), ncclSuccess);
  int wrong = 0;
  for (int i = 0; i < PUT_INTS; i++) wrong += buf[PUT_AT + i] != value(prev, i);
  WEFT_TEST_CHECK(wrong == 0, "%d of %d ints from rank %d are wrong", wrong, PUT_INTS, prev);
  WEFT_TEST_CHECK(buf[0] == ORDERED, "the last of the ordered puts should be there, found %d", buf[0]);
  // ... then the bare signal, and its own.
  ncclWaitSignalDesc_t bare = {.opCnt = 1, .peer = prev}, self = {.opCnt = 1, .peer = rank};
  WEFT_TEST_CHECK_RES(ncclWaitSignal(1, &bare, comm, NULL), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclWaitSignal(1, &self, comm, NULL), ncclSuccess);
  WEFT_TEST_CHECK(buf[WIN_INTS - 1] == mine, "its own put: %d", buf[WIN_INTS - 1]);

  // Bad arguments: each refused, nothing sent.
  int32_t x = 0;
  WEFT_TEST_CHECK_RES(ncclPutSignal(&x, 1, ncclInt32, next, win, 0, 1, 0, 0, comm, NULL), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(ncclPutSignal(&x, 1, ncclInt32, next, win, 0, 0, 1, 0, comm, NULL), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(ncclPutSignal(&x, 1, ncclInt32, next, win, 0, 0, 0, 1, comm, NULL), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(ncclPutSignal(&x, 1, ncclInt32, next, win, WIN_INTS * sizeof(int32_t) - 2, 0, 0, 0, comm, NULL),
                      ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(ncclPutSignal(&x, 1, ncclInt32, next, win, (size_t)-1, 0, 0, 0, comm, NULL), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(ncclPutSignal(&x, 1, ncclInt32, next, NULL, 0, 0, 0, 0, comm, NULL), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(ncclPutSignal(&x, 1, ncclInt32, nranks, win, 0, 0, 0, 0, comm, NULL), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(ncclPutSignal(&x, 1, (ncclDataType_t)99, next, win, 0, 0, 0, 0, comm, NULL),
                      ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(ncclPutSignal(NULL, 1, ncclInt32, next, win, 0, 0, 0, 0, comm, NULL), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(ncclPutSignal(&x, 1, ncclInt32, next, win, 0, 0, 0, 0, comm, (cudaStream_t)&x),
                      ncclInvalidUsage);
  WEFT_TEST_CHECK_RES(ncclSignal(-1, 0, 0, 0, comm, NULL), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(ncclSignal(next, 0, 1, 0, comm, NULL), ncclInvalidArgument);
  ncclWaitSignalDesc_t bad[3] = {{.opCnt = 0, .peer = prev}, {.opCnt = 1, .peer = prev, .sigIdx = 1},
                                 {.opCnt = 1, .peer = nranks}};
  for (int i = 0; i < 3; i++) WEFT_TEST_CHECK_RES(ncclWaitSignal(1, &bad[i], comm, NULL), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(ncclWaitSignal(0, d, comm, NULL), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(ncclWaitSignal(1, NULL, comm, NULL), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(ncclWinGetUserPtr(comm, (ncclWindow_t)&x, &user), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(ncclWinGetUserPtr(comm, win, NULL), ncclInvalidArgument);
  ncclWindow_t w2 = NULL;
  WEFT_TEST_CHECK_RES(ncclCommWindowRegister(comm, NULL, 64, &w2, 0), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(ncclCommWindowRegister(comm, buf, 64, &w2, 0x100), ncclInvalidArgument);

  WEFT_TEST_CHECK_RES(ncclCommWindowDeregister(comm, win), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclPutSignal(&x, 1, ncclInt32, next, win, 0, 0, 0, 0, comm, NULL), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(ncclCommWindowDeregister(comm, win), ncclInvalidArgument);
  // The collectives still line up after all that.
  int32_t one = 1, sum = 0;
  WEFT_TEST_CHECK_RES(ncclAllReduce(&one, &sum, 1, ncclInt32, ncclSum, comm, NULL), ncclSuccess);
  WEFT_TEST_CHECK(sum == nranks, "AllReduce after the one-sided calls: %d", sum);
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  free(buf);
  return weft_test_failures();
}

Test(rma, put_signal_wait_between_processes_2_ranks, .timeout = 60) {
  weft_test_env_timeout(20);
  cr_expect_eq(weft_test_fork_ranks(2, rma_body, NULL, 40), 0, "a rank failed (see stderr)");
}

Test(rma, put_signal_wait_between_processes_3_ranks, .timeout = 60) {
  weft_test_env_timeout(20);
  cr_expect_eq(weft_test_fork_ranks(3, rma_body, NULL, 40), 0, "a rank failed (see stderr)");
}

typedef struct {
  int res;
  double secs;
} wait_out_t;

static wait_out_t *wout;

// Rank 0 waits for a signal rank 1 never sends: rank 1 stays (mode 0) or dies (mode 1).
static int lonely_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  int dies = *(int *)arg;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return weft_test_failures();
  if (rank == 1) {
    if (dies) _exit(0);  // without a goodbye: a death to the others
    weft_test_sleep_ms(3000);
    ncclCommAbort(comm);
    return 0;
  }
  ncclWaitSignalDesc_t d = {.opCnt = 1, .peer = 1};
  double t0 = weft_test_now();
  wout->res = (int)ncclWaitSignal(1, &d, comm, NULL);
  wout->secs = weft_test_now() - t0;
  ncclCommAbort(comm);
  return 0;
}

Test(rma, a_wait_fails_at_the_timeout_when_asked, .timeout = 60) {
  weft_test_env_timeout(1);  // and WEFT_TIMEOUT_FAIL=1, the harness's default
  wout = weft_test_shared_alloc(sizeof(*wout));
  cr_assert_not_null(wout);
  int dies = 0;
  cr_expect_eq(weft_test_fork_ranks(2, lonely_body, &dies, 40), 0);
  cr_expect_eq(wout->res, ncclTimeout, "returned %s", ncclGetErrorString((ncclResult_t)wout->res));
  cr_expect(wout->secs >= 0.9 && wout->secs < 2.9, "failed after %.2f s (WEFT_TIMEOUT=1)", wout->secs);
  weft_test_shared_free(wout, sizeof(*wout));
}

Test(rma, a_wait_on_a_dead_sender_fails, .timeout = 60) {
  weft_test_env_timeout(60);
  wout = weft_test_shared_alloc(sizeof(*wout));
  cr_assert_not_null(wout);
  int dies = 1;
  int status[2];
  weft_test_one_id_t one = {lonely_body, &dies};
  weft_test_fork_ranks_ids(2, 1, weft_test_one_id_main, &one, 40, status);
  cr_expect_eq(status[0], 0, "rank 0 ended with %d", status[0]);
  cr_expect_eq(wout->res, ncclRemoteError, "returned %s", ncclGetErrorString((ncclResult_t)wout->res));
  cr_expect_lt(wout->secs, 5.0, "noticed the death after %.2f s", wout->secs);
  weft_test_shared_free(wout, sizeof(*wout));
}
