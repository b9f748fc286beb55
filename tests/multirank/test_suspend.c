/*
 * test_suspend.c — ncclCommSuspend, ncclCommResume and ncclCommMemStats
 * (NCCL 2.30) on two forked ranks: a suspended communicator refuses calls
 * (without launching anything, so the ranks stay in step), resumes and works
 * again; the statistics of a host-memory communicator (no device memory)
 * and the bad arguments.
 */
#include <criterion/criterion.h>

#include "harness.h"

static int sum_is(ncclComm_t comm, int rank, float want) {
  float x = (float)(rank + 1), y = 0;
  ncclResult_t r = ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, NULL);
  WEFT_TEST_CHECK(r == ncclSuccess && y == want, "AllReduce returned %s, sum %g (want %g)", ncclGetErrorString(r), y,
                  want);
  return r == ncclSuccess && y == want;
}

static uint64_t stat(ncclComm_t comm, ncclCommMemStat_t s) {
  uint64_t v = 12345;
  WEFT_TEST_CHECK_RES(ncclCommMemStats(comm, s, &v), ncclSuccess);
  return v;
}

static int suspend_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return weft_test_failures();
  sum_is(comm, rank, 3.0f);
  WEFT_TEST_CHECK(stat(comm, ncclStatGpuMemTotal) == 0, "a host-memory communicator holds device memory");
  WEFT_TEST_CHECK(stat(comm, ncclStatGpuMemSuspended) == 0, "active, yet reported suspended");

  WEFT_TEST_CHECK_RES(ncclCommSuspend(comm, 0x4), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(ncclCommSuspend(comm, NCCL_SUSPEND_MEM), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclCommSuspend(comm, NCCL_SUSPEND_MEM), ncclInvalidUsage);
  WEFT_TEST_CHECK(stat(comm, ncclStatGpuMemSuspended) == 1, "suspended with NCCL_SUSPEND_MEM, reported active");
  WEFT_TEST_CHECK(stat(comm, ncclStatGpuMemSuspend) == 0 && stat(comm, ncclStatGpuMemPersist) == 0,
                  "no device memory to release or keep");
  float x = 1, y = 0;
  WEFT_TEST_CHECK_RES(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, NULL), ncclInvalidUsage);
  WEFT_TEST_CHECK_RES(ncclSend(&x, 1, ncclFloat32, 1 - rank, comm, NULL), ncclInvalidUsage);
  WEFT_TEST_CHECK_RES(ncclCommResume(comm), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclCommResume(comm), ncclInvalidUsage);
  sum_is(comm, rank, 3.0f);  // the refused calls launched nothing: the ranks are still in step

  WEFT_TEST_CHECK_RES(ncclCommSuspend(comm, 0), ncclSuccess);
  WEFT_TEST_CHECK(stat(comm, ncclStatGpuMemSuspended) == 0, "suspended without NCCL_SUSPEND_MEM keeps its memory");
  WEFT_TEST_CHECK_RES(ncclCommResume(comm), ncclSuccess);
  sum_is(comm, rank, 3.0f);

  uint64_t v;
  WEFT_TEST_CHECK_RES(ncclCommMemStats(comm, (ncclCommMemStat_t)7, &v), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(ncclCommMemStats(comm, ncclStatGpuMemTotal, NULL), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  return weft_test_failures();
}

Test(suspend, suspend_refuses_calls_and_resume_restores_them, .timeout = 60) {
  weft_test_env_timeout(20);
  cr_expect_eq(weft_test_fork_ranks(2, suspend_body, NULL, 40), 0, "a rank failed (see stderr)");
  uint64_t v;
  cr_expect_eq(ncclCommSuspend(NULL, 0), ncclInvalidArgument);
  cr_expect_eq(ncclCommResume(NULL), ncclInvalidArgument);
  cr_expect_eq(ncclCommMemStats(NULL, ncclStatGpuMemTotal, &v), ncclInvalidArgument);
}
