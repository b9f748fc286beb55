/*
 * device_facts.cu — layout facts of nccl_device.h's host-visible structs.
 *
 * Built with nvcc against weft's include/nccl_device.h and against NVIDIA's,
 * by run_abi.sh: against NVIDIA's of the same release (2.30.7, from an
 * NVIDIA/nccl checkout) the outputs must be identical, against an older one
 * (2.28.9 in CUDA's include) they may differ only as
 * differences_from_<release>.txt says. These are the structs that cross the
 * library boundary: a program passes ncclDevCommRequirements (and its
 * lists) to ncclDevCommCreate and ncclCommProperties to
 * ncclCommQueryProperties, and the library fills the ncclDevComm a kernel
 * then receives by value. Each line is a fact's name (no space outside
 * parentheses) and its value; what only a 2.30 header has is printed only
 * for one. It also instantiates the device-side names nccl-tests uses, so a
 * change that breaks their compilation fails here, without a GPU.
 */
#include <cstddef>
#include <cstdio>
#include <type_traits>

#include "nccl_device.h"

#define HAS_2_30 (NCCL_VERSION_CODE >= NCCL_VERSION(2, 30, 0))

#define SIZE(T) printf("sizeof(%s) %zu\n", #T, sizeof(T))
#define OFF(T, f) printf("offsetof(%s,%s) %zu\n", #T, #f, offsetof(T, f))
#define INT(x) printf("%s %lld\n", #x, (long long)(x))
// A host entry point has exactly the spelled-out type.
#define SIG(fn, type) printf("sig(%s) %s\n", #fn, std::is_same<decltype(&fn), type>::value ? "ok" : "MISMATCH")

// Compiled, never launched: the calls nccl-tests 2.19 makes from kernels.
__global__ void uses(ncclWindow_t w, ncclDevComm devComm) {
  ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), devComm, ncclTeamLsa(devComm), devComm.lsaBarrier, blockIdx.x};
  bar.sync(ncclCoopCta(), cuda::memory_order_acquire);
  ncclLsaBarrierSession<ncclCoopCta> mbar{ncclCoopCta(), devComm, ncclTeamTagLsa(), blockIdx.x, true};
  mbar.sync(ncclCoopCta(), cuda::memory_order_release);
  float *p = (float *)ncclGetLsaPointer(w, 0, devComm.rank);
  float *m = (float *)ncclGetLsaMultimemPointer(w, 0, devComm);
  float *l = (float *)ncclGetLocalPointer(w, 0);
  p[threadIdx.x] = m[threadIdx.x] + l[threadIdx.x];
  ncclGin gin{devComm, 0};
  uint64_t v = gin.readSignal(blockIdx.x);
  ncclBarrierSession<ncclCoopCta> gbar{ncclCoopCta(), ncclTeamTagWorld(), gin, blockIdx.x};
  gbar.sync(ncclCoopCta(), cuda::memory_order_acquire, ncclGinFenceLevel::Relaxed);
  gin.put(ncclTeamWorld(devComm), 0, w, 0, w, 0, 4, ncclGin_SignalInc{blockIdx.x});
  gin.waitSignal(ncclCoopCta(), blockIdx.x, v + 1);
  gin.flush(ncclCoopCta());
}

int main() {
  SIZE(ncclTeam);
  OFF(ncclTeam, nRanks);
  OFF(ncclTeam, rank);
  OFF(ncclTeam, stride);
  SIZE(ncclMultimemHandle);
  SIZE(ncclLsaBarrierHandle);
  OFF(ncclLsaBarrierHandle, nBarriers);
  SIZE(ncclGinBarrierHandle);
#if HAS_2_30
  OFF(ncclGinBarrierHandle, unused);
#else
  OFF(ncclGinBarrierHandle, bufHandle);
#endif
  SIZE(ncclLLA2AHandle);
  OFF(ncclLLA2AHandle, bufHandle);
  OFF(ncclLLA2AHandle, nSlots);
  SIZE(ncclWindow_vidmem);
  OFF(ncclWindow_vidmem, lsaFlatBase);
  OFF(ncclWindow_vidmem, lsaRank);
  OFF(ncclWindow_vidmem, worldRank);
  OFF(ncclWindow_vidmem, stride4G);
  OFF(ncclWindow_vidmem, mcOffset4K);
  OFF(ncclWindow_vidmem, ginOffset4K);
  OFF(ncclWindow_vidmem, ginWins);
#ifdef NCCL_GIN_MAX_CONTEXTS
  INT(NCCL_GIN_MAX_CONTEXTS);
#endif
#ifdef NCCL_GIN_MAX_CONNECTIONS
  INT(NCCL_GIN_MAX_CONNECTIONS);
#endif
  INT(ncclGinSignalInc);
  INT(ncclGinSignalAdd);
#if HAS_2_30
  OFF(ncclWindow_vidmem, ginMultiSegmentWins);
  OFF(ncclWindow_vidmem, numSegments);
  SIZE(ncclSegmentWindow);
  OFF(ncclSegmentWindow, ginWins);
  OFF(ncclSegmentWindow, segmentSize);
  OFF(ncclSegmentWindow, memType);
  printf("same(ncclWindow_vidmem_t) %d\n", (int)std::is_same<ncclWindow_vidmem_t, ncclWindow_vidmem>::value);
  SIZE(ncclResourceWindow_vidmem_t);
  OFF(ncclResourceWindow_vidmem_t, lsaFlatBase);
  OFF(ncclResourceWindow_vidmem_t, stride4G);
  OFF(ncclResourceWindow_vidmem_t, mcOffset4K);
  SIZE(ncclGinRequest_t);
  INT(NCCL_GIN_CONNECTION_NONE);
  INT(NCCL_GIN_CONNECTION_FULL);
  INT(NCCL_GIN_CONNECTION_RAIL);
  SIZE(ncclGinConnectionType_t);
  INT(NCCL_GIN_TYPE_NONE);
  INT(NCCL_GIN_TYPE_PROXY);
  INT(NCCL_GIN_TYPE_GDAKI);
  INT(NCCL_GIN_TYPE_GPI);
  SIZE(ncclGinType_t);
#endif
  SIZE(ncclDevComm);
#if HAS_2_30
  OFF(ncclDevComm, magic);
  OFF(ncclDevComm, version);
#endif
  OFF(ncclDevComm, rank);
  OFF(ncclDevComm, nRanks);
  OFF(ncclDevComm, nRanks_rcp32);
  OFF(ncclDevComm, lsaRank);
  OFF(ncclDevComm, lsaSize);
  OFF(ncclDevComm, lsaSize_rcp32);
  OFF(ncclDevComm, windowTable);
  OFF(ncclDevComm, resourceWindow);
  OFF(ncclDevComm, resourceWindow_inlined);
  OFF(ncclDevComm, lsaMultimem);
  OFF(ncclDevComm, lsaBarrier);
  OFF(ncclDevComm, railGinBarrier);
#if HAS_2_30
  OFF(ncclDevComm, hybridWorldGinBarrier);
  OFF(ncclDevComm, ginConnectionCount);
  OFF(ncclDevComm, ginNetDeviceTypes);
  OFF(ncclDevComm, ginContextsRailed);
  OFF(ncclDevComm, ginConnectionsRailed);
  OFF(ncclDevComm, ginStrongLegacySignals);
  OFF(ncclDevComm, abortFlag);
  OFF(ncclDevComm, hybridLsaBarrier);
  OFF(ncclDevComm, hybridRailGinBarrier);
  OFF(ncclDevComm, worldGinBarrier);
  printf("sizeof(ncclDevComm.ginContextCount) %zu\n", sizeof(((ncclDevComm *)0)->ginContextCount));
#else
  OFF(ncclDevComm, ginTypes);
  OFF(ncclDevComm, ginSignalBase);
  OFF(ncclDevComm, ginCounterBase);
#endif
  OFF(ncclDevComm, ginContextCount);
  OFF(ncclDevComm, ginHandles);
  OFF(ncclDevComm, ginSignalCount);
  OFF(ncclDevComm, ginCounterCount);
  OFF(ncclDevComm, ginSignalShadows);
  SIZE(ncclDevCommRequirements);
#if HAS_2_30
  OFF(ncclDevCommRequirements, size);
  OFF(ncclDevCommRequirements, magic);
  OFF(ncclDevCommRequirements, version);
#endif
  OFF(ncclDevCommRequirements, resourceRequirementsList);
  OFF(ncclDevCommRequirements, teamRequirementsList);
  OFF(ncclDevCommRequirements, lsaMultimem);
  OFF(ncclDevCommRequirements, barrierCount);
  OFF(ncclDevCommRequirements, lsaBarrierCount);
  OFF(ncclDevCommRequirements, railGinBarrierCount);
  OFF(ncclDevCommRequirements, lsaLLA2ABlockCount);
  OFF(ncclDevCommRequirements, lsaLLA2ASlotCount);
  OFF(ncclDevCommRequirements, ginForceEnable);
  OFF(ncclDevCommRequirements, ginContextCount);
  OFF(ncclDevCommRequirements, ginSignalCount);
  OFF(ncclDevCommRequirements, ginCounterCount);
#if HAS_2_30
  OFF(ncclDevCommRequirements, ginConnectionType);
  OFF(ncclDevCommRequirements, ginExclusiveContexts);
  OFF(ncclDevCommRequirements, ginQueueDepth);
  OFF(ncclDevCommRequirements, ginTrafficClass);
  OFF(ncclDevCommRequirements, worldGinBarrierCount);
  OFF(ncclDevCommRequirements, ginStrongSignalsRequired);
  OFF(ncclDevCommRequirements, ginVaSignalsRequired);
  {
    ncclDevCommRequirements_t r = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    printf("reqs.size %zu\nreqs.magic 0x%x\nreqs.version %u\n", r.size, r.magic, r.version);
    printf("reqs.lists %d %d\n", r.resourceRequirementsList == NULL, r.teamRequirementsList == NULL);
    printf("reqs.counts %d %d %d %d %d %d %d %d %d %d\n", (int)r.lsaMultimem, r.barrierCount, r.lsaBarrierCount,
           r.railGinBarrierCount, r.lsaLLA2ABlockCount, r.lsaLLA2ASlotCount, (int)r.ginForceEnable,
           r.ginContextCount, r.ginSignalCount, r.ginCounterCount);
    printf("reqs.gin %d %d %d %d %d %d %d\n", (int)r.ginConnectionType, (int)r.ginExclusiveContexts,
           r.ginQueueDepth, r.ginTrafficClass, r.worldGinBarrierCount, (int)r.ginStrongSignalsRequired,
           (int)r.ginVaSignalsRequired);
  }
  SIZE(ncclCommProperties);
  OFF(ncclCommProperties, size);
  OFF(ncclCommProperties, magic);
  OFF(ncclCommProperties, version);
  OFF(ncclCommProperties, rank);
  OFF(ncclCommProperties, nRanks);
  OFF(ncclCommProperties, cudaDev);
  OFF(ncclCommProperties, nvmlDev);
  OFF(ncclCommProperties, deviceApiSupport);
  OFF(ncclCommProperties, multimemSupport);
  OFF(ncclCommProperties, ginType);
  OFF(ncclCommProperties, nLsaTeams);
  OFF(ncclCommProperties, hostRmaSupport);
  OFF(ncclCommProperties, railedGinType);
  {
    ncclCommProperties_t p = NCCL_COMM_PROPERTIES_INITIALIZER;
    printf("props.header %zu 0x%x %u\n", p.size, p.magic, p.version);
    printf("props.rest %d %d %d %d %d %d %d %d %d %d\n", p.rank, p.nRanks, p.cudaDev, p.nvmlDev,
           (int)p.deviceApiSupport, (int)p.multimemSupport, (int)p.ginType, p.nLsaTeams, (int)p.hostRmaSupport,
           (int)p.railedGinType);
  }
#endif
  SIZE(ncclDevResourceRequirements);
  OFF(ncclDevResourceRequirements, next);
  OFF(ncclDevResourceRequirements, bufferSize);
  OFF(ncclDevResourceRequirements, bufferAlign);
  OFF(ncclDevResourceRequirements, outBufferHandle);
  OFF(ncclDevResourceRequirements, ginSignalCount);
  OFF(ncclDevResourceRequirements, ginCounterCount);
  OFF(ncclDevResourceRequirements, outGinSignalStart);
  OFF(ncclDevResourceRequirements, outGinCounterStart);
  SIZE(ncclTeamRequirements);
  OFF(ncclTeamRequirements, next);
  OFF(ncclTeamRequirements, team);
  OFF(ncclTeamRequirements, multimem);
  OFF(ncclTeamRequirements, outMultimemHandle);
  // Host entry points with their exact types (unevaluated: nothing is linked).
  SIG(ncclDevCommCreate, ncclResult_t (*)(ncclComm_t, ncclDevCommRequirements_t const *, ncclDevComm_t *));
  SIG(ncclDevCommDestroy, ncclResult_t (*)(ncclComm_t, ncclDevComm_t const *));
  SIG(ncclLsaBarrierCreateRequirement,
      ncclResult_t (*)(ncclTeam_t, int, ncclLsaBarrierHandle_t *, ncclDevResourceRequirements_t *));
  SIG(ncclGinBarrierCreateRequirement,
      ncclResult_t (*)(ncclComm_t, ncclTeam_t, int, ncclGinBarrierHandle_t *, ncclDevResourceRequirements_t *));
  SIG(ncclLLA2ACalcSlots, int (*)(int, int));
  SIG(ncclLLA2ACreateRequirement, ncclResult_t (*)(int, int, ncclLLA2AHandle_t *, ncclDevResourceRequirements_t *));
  printf("sig(ncclTeamWorld) %d\n", (int)std::is_same<decltype(static_cast<ncclTeam_t (*)(ncclComm_t)>(&ncclTeamWorld)),
                                                        ncclTeam_t (*)(ncclComm_t)>::value);
  printf("sig(ncclTeamRankToWorld) %d\n",
         (int)std::is_same<decltype(static_cast<int (*)(ncclComm_t, ncclTeam_t, int)>(&ncclTeamRankToWorld)),
                           int (*)(ncclComm_t, ncclTeam_t, int)>::value);
#if HAS_2_30
  SIG(ncclCommQueryProperties, ncclResult_t (*)(ncclComm_t, ncclCommProperties_t *));
  SIG(ncclGetLsaMultimemDevicePointer, ncclResult_t (*)(ncclWindow_t, size_t, void **));
  SIG(ncclGetMultimemDevicePointer, ncclResult_t (*)(ncclWindow_t, size_t, ncclMultimemHandle_t, void **));
  SIG(ncclGetLsaDevicePointer, ncclResult_t (*)(ncclWindow_t, size_t, int, void **));
  SIG(ncclGetPeerDevicePointer, ncclResult_t (*)(ncclWindow_t, size_t, int, void **));
#endif
  return 0;
}
