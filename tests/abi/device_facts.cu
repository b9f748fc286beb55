/*
 * device_facts.cu — layout facts of nccl_device.h's host-visible structs.
 *
 * Built with nvcc twice, against weft's include/nccl_device.h and against
 * NVIDIA's (NCCL 2.28.9), by run_abi.sh; the two outputs must be identical.
 * These are the structs that cross the library boundary: a program passes
 * ncclDevCommRequirements (and its lists) to ncclDevCommCreate, and the
 * library fills the ncclDevComm a kernel then receives by value.
 * It also instantiates the device-side names nccl-tests uses, so a change
 * that breaks their compilation fails here, without a GPU.
 */
#include <cstddef>
#include <cstdio>
#include <type_traits>

#include "nccl_device.h"

#define SIZE(T) printf("sizeof(%s) %zu\n", #T, sizeof(T))
#define OFF(T, f) printf("offsetof(%s, %s) %zu\n", #T, #f, offsetof(T, f))

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
  OFF(ncclGinBarrierHandle, bufHandle);
  SIZE(ncclWindow_vidmem);
  OFF(ncclWindow_vidmem, lsaFlatBase);
  OFF(ncclWindow_vidmem, lsaRank);
  OFF(ncclWindow_vidmem, worldRank);
  OFF(ncclWindow_vidmem, stride4G);
  OFF(ncclWindow_vidmem, mcOffset4K);
  OFF(ncclWindow_vidmem, ginOffset4K);
  OFF(ncclWindow_vidmem, ginWins);
  SIZE(ncclDevComm);
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
  OFF(ncclDevComm, ginContextCount);
  OFF(ncclDevComm, ginTypes);
  OFF(ncclDevComm, ginHandles);
  OFF(ncclDevComm, ginSignalBase);
  OFF(ncclDevComm, ginSignalCount);
  OFF(ncclDevComm, ginCounterBase);
  OFF(ncclDevComm, ginCounterCount);
  OFF(ncclDevComm, ginSignalShadows);
  SIZE(ncclDevCommRequirements);
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
  // Host entry points with their exact types (a mismatch fails to compile;
  // unevaluated, so nothing is linked).
  static_assert(std::is_same<decltype(&ncclDevCommCreate),
                             ncclResult_t (*)(ncclComm_t, ncclDevCommRequirements_t const *, ncclDevComm_t *)>::value,
                "ncclDevCommCreate");
  static_assert(std::is_same<decltype(&ncclDevCommDestroy), ncclResult_t (*)(ncclComm_t, ncclDevComm_t const *)>::value,
                "ncclDevCommDestroy");
  static_assert(std::is_same<decltype(static_cast<ncclTeam_t (*)(ncclComm_t)>(&ncclTeamWorld)),
                             ncclTeam_t (*)(ncclComm_t)>::value,
                "ncclTeamWorld");
  static_assert(std::is_same<decltype(static_cast<int (*)(ncclComm_t, ncclTeam_t, int)>(&ncclTeamRankToWorld)),
                             int (*)(ncclComm_t, ncclTeam_t, int)>::value,
                "ncclTeamRankToWorld");
  return 0;
}
