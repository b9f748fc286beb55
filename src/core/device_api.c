/*
 * device_api.c — the host entry points of NCCL's device API (2.28 and
 * 2.30; include/nccl_device.h).
 *
 * Why they exist: programs built against NCCL 2.28 or 2.30 (nccl-tests, for
 * one) link ncclDevCommCreate/ncclDevCommDestroy even when they never use a
 * device communicator, so libnccl.so.2 must define them to load at all.
 * weft has no GPU backend yet, so nothing here makes device state: a
 * device communicator, a barrier, an LL all-to-all requirement or a device
 * pointer of a window is refused with ncclInvalidUsage and a WARN that says
 * why. ncclCommQueryProperties says so too (no device API support, no
 * multimem, no GIN). Teams and LL slot counts are plain arithmetic and are
 * answered: the world team is every rank; the load/store-accessible (LSA)
 * team is the rank alone, since weft maps no peer's memory into this rank's
 * GPU; the rail team (world over LSA) is therefore the world.
 *
 * Two layouts of ncclDevCommRequirements reach ncclDevCommCreate: 2.30's
 * starts with size/magic/version (NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER),
 * 2.28's with two pointers. Only the first 16 bytes, which both have, are
 * read before the magic says which it is.
 */
#include <stddef.h>
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
  if (reqs->magic != NCCL_API_MAGIC) {  // 2.28's layout has no header; refused by NCCL 2.30 too
    WARN("ncclDevCommCreate: reqs was not initialised with NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER (magic 0x%x; "
         "a program built against NCCL 2.28's nccl_device.h has no such header): %s",
         reqs->magic, no_backend);
    return ncclInvalidUsage;
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

// What this communicator offers the device API: nothing of the GPU's, and
// one-sided host calls when numRmaCtx allows and every rank is on this host
// (rma.c reaches no other). The caller's struct is written only as far as its
// size, and the fields added after 2.29.3 only for callers built later.
NCCL_API(ncclResult_t, ncclCommQueryProperties, ncclComm_t comm, ncclCommProperties_t *props);
ncclResult_t pncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t *props) {
  WEFTCHECK(weft_comm_check(comm, "ncclCommQueryProperties"));
  if (props == NULL) {
    WARN("ncclCommQueryProperties: props is NULL");
    return ncclInvalidArgument;
  }
  if (props->magic != NCCL_API_MAGIC || props->size < offsetof(ncclCommProperties_t, rank)) {
    WARN("ncclCommQueryProperties: props was not initialised with NCCL_COMM_PROPERTIES_INITIALIZER (magic 0x%x, "
         "size %zu)",
         props->magic, props->size);
    return ncclInvalidUsage;
  }
  if (props->version > NCCL_VERSION_CODE) {
    WARN("ncclCommQueryProperties: the program was built against NCCL %u, newer than this library's %d",
         props->version, NCCL_VERSION_CODE);
    return ncclInvalidUsage;
  }
  ncclCommProperties_t p;
  memset(&p, 0, sizeof(p));
  p.size = props->size;
  p.magic = props->magic;
  p.version = props->version;
  p.rank = comm->rank;
  p.nRanks = comm->nranks;
  p.cudaDev = comm->cuda_dev;
  p.nvmlDev = comm->cuda_dev;  // weft numbers devices as CUDA does
  p.deviceApiSupport = false;
  p.multimemSupport = false;
  p.ginType = NCCL_GIN_TYPE_NONE;
  size_t n = props->size < sizeof(p) ? props->size : sizeof(p);
  if (props->version <= (unsigned)NCCL_VERSION(2, 29, 3) && n > offsetof(ncclCommProperties_t, nLsaTeams))
    n = offsetof(ncclCommProperties_t, nLsaTeams);
  p.nLsaTeams = comm->nranks;  // each rank is its own LSA team
  p.hostRmaSupport = comm->num_rma_ctx > 0 && comm->nhosts == 1;
  p.railedGinType = NCCL_GIN_TYPE_NONE;
  memcpy(props, &p, n);
  return ncclSuccess;
}

// The device-pointer calls: weft's windows live in host memory and no device
// maps them, so there is no pointer to give.
static ncclResult_t no_device_pointer(const char *api, ncclWindow_t window, void **outPtr) {
  if (window == NULL) {
    WARN("%s: window is NULL", api);
    return ncclInvalidArgument;
  }
  if (outPtr == NULL) {
    WARN("%s: outPtr is NULL", api);
    return ncclInvalidArgument;
  }
  *outPtr = NULL;
  WARN("%s: weft's windows are host memory that no device maps: %s", api, no_backend);
  return ncclInvalidUsage;
}

NCCL_API(ncclResult_t, ncclGetLsaMultimemDevicePointer, ncclWindow_t window, size_t offset, void **outPtr);
ncclResult_t pncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void **outPtr) {
  (void)offset;
  return no_device_pointer("ncclGetLsaMultimemDevicePointer", window, outPtr);
}

NCCL_API(ncclResult_t, ncclGetMultimemDevicePointer, ncclWindow_t window, size_t offset,
         ncclMultimemHandle_t multimem, void **outPtr);
ncclResult_t pncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset, ncclMultimemHandle_t multimem,
                                           void **outPtr) {
  (void)offset;
  (void)multimem;
  return no_device_pointer("ncclGetMultimemDevicePointer", window, outPtr);
}

NCCL_API(ncclResult_t, ncclGetLsaDevicePointer, ncclWindow_t window, size_t offset, int lsaRank, void **outPtr);
ncclResult_t pncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank, void **outPtr) {
  (void)offset;
  (void)lsaRank;
  return no_device_pointer("ncclGetLsaDevicePointer", window, outPtr);
}

NCCL_API(ncclResult_t, ncclGetPeerDevicePointer, ncclWindow_t window, size_t offset, int peer, void **outPtr);
ncclResult_t pncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void **outPtr) {
  (void)offset;
  (void)peer;
  return no_device_pointer("ncclGetPeerDevicePointer", window, outPtr);
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
