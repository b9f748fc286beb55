/*
 * device_api.c — the host entry points of NCCL 2.28's device API
 * (include/nccl_device.h).
 *
 * Why they exist: programs built against NCCL 2.28 (nccl-tests, for one)
 * link ncclDevCommCreate/ncclDevCommDestroy even when they never use a
 * device communicator, so libnccl.so.2 must define them to load at all.
 * weft has no GPU backend yet, so nothing here makes device state: a
 * device communicator, a barrier or an LL all-to-all requirement is
 * refused with ncclInvalidUsage and a WARN that says why. Teams and LL
 * slot counts are plain arithmetic and are answered: the world team is
 * every rank; the load/store-accessible (LSA) team is the rank alone,
 * since weft maps no peer's memory into this rank's GPU; the rail team
 * (world over LSA) is therefore the world.
 */
#include <string.h>

#include "api.h"
#include "checks.h"
#include "comm.h"
#include "nccl_device.h"

static const char no_backend[] = "the NCCL device API needs weft's GPU backend, which is not built yet";

NCCL_API(ncclResult_t, ncclDevCommCreate, ncclComm_t comm, ncclDevCommRequirements_t const *reqs,
         ncclDevComm_t *outDevComm);
ncclResult_t pncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const *reqs, ncclDevComm_t *outDevComm) {
  WEFTCHECK(weft_comm_check(comm, "ncclDevCommCreate"));
  if (reqs == NULL) {
    WARN("ncclDevCommCreate: reqs is NULL");
    return ncclInvalidArgument;
  }
  if (outDevComm == NULL) {
    WARN("ncclDevCommCreate: outDevComm is NULL");
    return ncclInvalidArgument;
  }
  WARN(
      "ncclDevCommCreate(lsaBarrierCount=%d, barrierCount=%d, lsaMultimem=%d, "
      "ginSignalCount=%d): %s",
      reqs->lsaBarrierCount, reqs->barrierCount, (int)reqs->lsaMultimem, reqs->ginSignalCount, no_backend);
  return ncclInvalidUsage;
}

NCCL_API(ncclResult_t, ncclDevCommDestroy, ncclComm_t comm, ncclDevComm_t const *devComm);
ncclResult_t pncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const *devComm) {
  WEFTCHECK(weft_comm_check(comm, "ncclDevCommDestroy"));
  WARN("ncclDevCommDestroy(devComm=%p): no device communicator can exist: %s", (const void *)devComm, no_backend);
  return ncclInvalidUsage;
}

NCCL_API(ncclResult_t, ncclLsaBarrierCreateRequirement, ncclTeam_t team, int nBarriers,
         ncclLsaBarrierHandle_t *outHandle, ncclDevResourceRequirements_t *outReq);
ncclResult_t pncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers, ncclLsaBarrierHandle_t *outHandle,
                                              ncclDevResourceRequirements_t *outReq) {
  (void)outHandle;
  (void)outReq;
  WARN("ncclLsaBarrierCreateRequirement(team nRanks=%d, nBarriers=%d): %s", team.nRanks, nBarriers, no_backend);
  return ncclInvalidUsage;
}

NCCL_API(ncclResult_t, ncclGinBarrierCreateRequirement, ncclComm_t comm, ncclTeam_t team, int nBarriers,
         ncclGinBarrierHandle_t *outHandle, ncclDevResourceRequirements_t *outReq);
ncclResult_t pncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                              ncclGinBarrierHandle_t *outHandle,
                                              ncclDevResourceRequirements_t *outReq) {
  (void)outHandle;
  (void)outReq;
  WEFTCHECK(weft_comm_check(comm, "ncclGinBarrierCreateRequirement"));
  WARN("ncclGinBarrierCreateRequirement(team nRanks=%d, nBarriers=%d): %s", team.nRanks, nBarriers, no_backend);
  return ncclInvalidUsage;
}

NCCL_API(int, ncclLLA2ACalcSlots, int maxElts, int maxEltSize);
int pncclLLA2ACalcSlots(int maxElts, int maxEltSize) { return maxElts * ((maxEltSize + 7) / 8); }

NCCL_API(ncclResult_t, ncclLLA2ACreateRequirement, int nBlocks, int nSlots, ncclLLA2AHandle_t *outHandle,
         ncclDevResourceRequirements_t *outReq);
ncclResult_t pncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t *outHandle,
                                         ncclDevResourceRequirements_t *outReq) {
  (void)outHandle;
  (void)outReq;
  WARN("ncclLLA2ACreateRequirement(nBlocks=%d, nSlots=%d): %s", nBlocks, nSlots, no_backend);
  return ncclInvalidUsage;
}

// A team of a communicator that fails the check is empty: these calls have
// no error code, so an empty team is the only honest answer.
static ncclTeam_t team_of(ncclComm_t comm, const char *api, int lsa) {
  ncclTeam_t t;
  memset(&t, 0, sizeof(t));
  if (weft_comm_check(comm, api) != ncclSuccess) return t;
  t.nRanks = lsa ? 1 : comm->nranks;
  t.rank = lsa ? 0 : comm->rank;
  t.stride = 1;
  return t;
}

NCCL_API(ncclTeam_t, ncclTeamWorld, ncclComm_t comm);
ncclTeam_t pncclTeamWorld(ncclComm_t comm) { return team_of(comm, "ncclTeamWorld", 0); }

NCCL_API(ncclTeam_t, ncclTeamLsa, ncclComm_t comm);
ncclTeam_t pncclTeamLsa(ncclComm_t comm) { return team_of(comm, "ncclTeamLsa", 1); }

NCCL_API(ncclTeam_t, ncclTeamRail, ncclComm_t comm);
ncclTeam_t pncclTeamRail(ncclComm_t comm) { return team_of(comm, "ncclTeamRail", 0); }

// The world rank of member `rank` of `team` (a team this rank belongs to).
NCCL_API(int, ncclTeamRankToWorld, ncclComm_t comm, ncclTeam_t team, int rank);
int pncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank) {
  if (weft_comm_check(comm, "ncclTeamRankToWorld") != ncclSuccess) return -1;
  return comm->rank + (rank - team.rank) * team.stride;
}

// The LSA-team index of that member; the LSA team is this rank alone.
NCCL_API(int, ncclTeamRankToLsa, ncclComm_t comm, ncclTeam_t team, int rank);
int pncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank) {
  if (weft_comm_check(comm, "ncclTeamRankToLsa") != ncclSuccess) return -1;
  return (comm->rank + (rank - team.rank) * team.stride) - comm->rank;
}
