/*
 * test_device_api.c — the host entry points of NCCL's device API (2.28 and
 * 2.30; include/nccl_device.h, src/core/device_api.c) through the public API.
 *
 * weft has no GPU backend, so what creates device state must refuse with
 * ncclInvalidUsage (never crash, never leave the communicator unusable),
 * whether the requirements come in 2.30's versioned layout or 2.28's
 * (no header: told apart by the missing magic); the device pointers of a
 * window are refused the same way; bad arguments get ncclInvalidArgument,
 * and the arithmetic calls (teams, LL slot counts) give NCCL's answers for
 * a communicator whose ranks map no peer memory. Two ranks of one process
 * (ncclCommInitAll).
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "harness.h"
#include "nccl_device.h"

static void init_pair(ncclComm_t comms[2]) {
  weft_test_env_timeout(10);
  cr_assert_eq(ncclCommInitAll(comms, 2, NULL), ncclSuccess, "ncclCommInitAll(2)");
}

static void destroy_pair(ncclComm_t comms[2]) {
  for (int r = 0; r < 2; r++) WEFT_TEST_EXPECT_RES(ncclCommDestroy(comms[r]), ncclSuccess);
}

Test(device_api, refused_without_gpu_backend) {
  ncclComm_t comms[2];
  init_pair(comms);
  ncclDevCommRequirements_t reqs;
  memset(&reqs, 0, sizeof(reqs));
  reqs.lsaBarrierCount = 4;
  ncclDevComm_t dc;
  WEFT_TEST_EXPECT_RES(ncclDevCommCreate(comms[0], &reqs, &dc), ncclInvalidUsage);
  WEFT_TEST_EXPECT_RES(ncclDevCommCreate(comms[0], NULL, &dc), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclDevCommCreate(comms[0], &reqs, NULL), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclDevCommCreate(NULL, &reqs, &dc), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclDevCommDestroy(comms[1], &dc), ncclInvalidUsage);

  ncclLsaBarrierHandle_t lh;
  ncclGinBarrierHandle_t gh;
  ncclDevResourceRequirements_t rr;
  WEFT_TEST_EXPECT_RES(ncclLsaBarrierCreateRequirement(ncclTeamLsa(comms[0]), 2, &lh, &rr), ncclInvalidUsage);
  WEFT_TEST_EXPECT_RES(ncclGinBarrierCreateRequirement(comms[0], ncclTeamWorld(comms[0]), 2, &gh, &rr),
                       ncclInvalidUsage);
  WEFT_TEST_EXPECT_RES(ncclLLA2ACreateRequirement(1, 8, NULL, &rr), ncclInvalidUsage);

  // Still usable afterwards.
  int32_t a[8], b[8];
  for (int i = 0; i < 8; i++) a[i] = i, b[i] = 100;
  WEFT_TEST_EXPECT_RES(ncclGroupStart(), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclAllReduce(a, a, 8, ncclInt32, ncclSum, comms[0], NULL), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclAllReduce(b, b, 8, ncclInt32, ncclSum, comms[1], NULL), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclGroupEnd(), ncclSuccess);
  for (int i = 0; i < 8; i++) cr_expect(a[i] == 100 + i && b[i] == 100 + i, "element %d: %d %d", i, a[i], b[i]);
  destroy_pair(comms);
}

Test(device_api, teams_and_slots) {
  ncclComm_t comms[2];
  init_pair(comms);
  for (int r = 0; r < 2; r++) {
    ncclTeam_t w = ncclTeamWorld(comms[r]), l = ncclTeamLsa(comms[r]), rail = ncclTeamRail(comms[r]);
    cr_expect(w.nRanks == 2 && w.rank == r && w.stride == 1, "rank %d world {%d,%d,%d}", r, w.nRanks, w.rank, w.stride);
    cr_expect(l.nRanks == 1 && l.rank == 0 && l.stride == 1, "rank %d lsa {%d,%d,%d}", r, l.nRanks, l.rank, l.stride);
    cr_expect(rail.nRanks == 2 && rail.rank == r, "rank %d rail {%d,%d,%d}", r, rail.nRanks, rail.rank, rail.stride);
    for (int p = 0; p < 2; p++) cr_expect_eq(ncclTeamRankToWorld(comms[r], w, p), p, "rank %d: world %d", r, p);
    cr_expect_eq(ncclTeamRankToWorld(comms[r], l, 0), r, "rank %d: lsa member 0 is itself", r);
    cr_expect_eq(ncclTeamRankToLsa(comms[r], w, r), 0, "rank %d: itself is lsa 0", r);
  }
  ncclTeam_t none = ncclTeamWorld(NULL);
  cr_expect(none.nRanks == 0 && none.rank == 0 && none.stride == 0, "NULL comm: empty team");
  cr_expect_eq(ncclTeamRankToWorld(NULL, none, 0), -1);
  cr_expect_eq(ncclLLA2ACalcSlots(10, 12), 20);
  cr_expect_eq(ncclLLA2ACalcSlots(5, 8), 5);
  cr_expect_eq(ncclLLA2ACalcSlots(3, 1), 3);
  destroy_pair(comms);
}

// 2.30's requirements from their initializer, and a 2.28 program's struct
// (two pointers where 2.30 has size/magic/version), both refused cleanly.
Test(device_api, both_requirement_layouts_refused) {
  ncclComm_t comms[2];
  init_pair(comms);
  ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  cr_expect(reqs.size == sizeof(reqs) && reqs.magic == NCCL_API_MAGIC && reqs.version == NCCL_VERSION_CODE,
            "the initializer's header: size %zu magic 0x%x version %u", reqs.size, reqs.magic, reqs.version);
  cr_expect(reqs.ginContextCount == 4 && reqs.ginTrafficClass == NCCL_CONFIG_UNDEF_INT &&
                reqs.ginStrongSignalsRequired && reqs.ginVaSignalsRequired,
            "the initializer's defaults");
  reqs.lsaBarrierCount = 2;
  ncclDevComm_t dc;
  WEFT_TEST_EXPECT_RES(ncclDevCommCreate(comms[0], &reqs, &dc), ncclInvalidUsage);
  // 2.28.9's struct was 56 bytes starting with resourceRequirementsList.
  void **old = calloc(7, sizeof(void *));
  cr_assert_not_null(old);
  old[0] = (void *)&reqs;  // a list pointer where 2.30 keeps size and magic
  old[1] = (void *)&dc;
  WEFT_TEST_EXPECT_RES(ncclDevCommCreate(comms[0], (const ncclDevCommRequirements_t *)old, &dc), ncclInvalidUsage);
  free(old);
  destroy_pair(comms);
}

Test(device_api, device_pointers_of_a_host_window_refused) {
  weft_test_env_timeout(10);
  ncclUniqueId id;
  cr_assert_eq(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = NULL;
  cr_assert_eq(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess);
  static int32_t buf[1024];
  ncclWindow_t win = NULL;
  cr_assert_eq(ncclCommWindowRegister(comm, buf, sizeof(buf), &win, NCCL_WIN_DEFAULT), ncclSuccess);
  void *p = (void *)&p;
  ncclMultimemHandle_t mm = {NULL};
  WEFT_TEST_EXPECT_RES(ncclGetLsaDevicePointer(win, 0, 0, &p), ncclInvalidUsage);
  cr_expect_null(p, "a refused call must leave no pointer");
  WEFT_TEST_EXPECT_RES(ncclGetPeerDevicePointer(win, 0, 0, &p), ncclInvalidUsage);
  WEFT_TEST_EXPECT_RES(ncclGetLsaMultimemDevicePointer(win, 0, &p), ncclInvalidUsage);
  WEFT_TEST_EXPECT_RES(ncclGetMultimemDevicePointer(win, 0, mm, &p), ncclInvalidUsage);
  WEFT_TEST_EXPECT_RES(ncclGetLsaDevicePointer(NULL, 0, 0, &p), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclGetPeerDevicePointer(win, 0, 0, NULL), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclCommWindowDeregister(comm, win), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclCommDestroy(comm), ncclSuccess);
}
