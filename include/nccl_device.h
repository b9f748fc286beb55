/*
 * nccl_device.h — NCCL 2.30's device API, as far as weft provides it today.
 *
 * What: the host part of NCCL 2.30.7's device API with NCCL's layouts —
 * ncclDevComm and the requirement structs (versioned since 2.30: start from
 * NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER), the window and handle structs,
 * teams, ncclCommProperties, ncclDevCommCreate/Destroy and the host calls
 * that return device pointers of a window — and, for CUDA C++, the
 * device-side names programs call from kernels (ncclCoop*,
 * ncclGetLsaPointer, ncclLsaBarrierSession, ncclGin, ncclBarrierSession).
 * Written from NCCL's documented interface, not copied.
 *
 * Why: a program built against NCCL 2.28 or 2.30 (nccl-tests, for one)
 * includes nccl_device.h, so weft must ship it for such programs to build
 * against weft alone. weft has no GPU backend yet: ncclDevCommCreate and the
 * device-pointer calls return ncclInvalidUsage with a WARN, so no device
 * communicator ever exists and the device-side calls below are unreachable;
 * if one is reached anyway it prints what it is and traps instead of
 * touching memory. ncclCommQueryProperties answers truthfully (no device
 * API support, no multimem, no GIN). Coops and teams, which are plain
 * arithmetic, are implemented.
 */
#ifndef WEFT_NCCL_DEVICE_H
#define WEFT_NCCL_DEVICE_H

#include <stddef.h>
#include <stdint.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif

#include "nccl.h"

// CUDA's driver header gives ncclSegmentWindow's memory-location type; without
// it, an int of the same size stands in (CUmemLocationType is a C enum).
#if !defined(WEFT_NO_CUDA) && defined(__has_include)
#if __has_include(<cuda.h>)
#include <cuda.h>
#define WEFT_NCCL_DEVICE_H_HAVE_CUDA_DRIVER 1
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

// ---- Handles and plain types (NCCL 2.30.7 layouts).
typedef uint32_t ncclDevResourceHandle;
typedef ncclDevResourceHandle ncclDevResourceHandle_t;
typedef uint32_t ncclGinSignal_t;
typedef uint32_t ncclGinCounter_t;

// An outstanding GIN operation (flushAsync/wait), opaque to the program.
typedef struct {
  uint64_t opaque[2];
} ncclGinRequest_t;

typedef struct ncclTeam {
  int nRanks, rank, stride;  // members are rank0 + i*stride for i < nRanks
} ncclTeam_t;

typedef struct ncclMultimemHandle {
  void *mcBasePtr;
} ncclMultimemHandle_t;

typedef struct ncclLsaBarrierHandle {
  ncclDevResourceHandle_t bufHandle;
  int nBarriers;
} ncclLsaBarrierHandle_t;

typedef struct ncclGinBarrierHandle {
  ncclGinSignal_t signal0;
  ncclDevResourceHandle_t unused;  // 2.28: bufHandle; no longer used
} ncclGinBarrierHandle_t;

typedef struct ncclLLA2AHandle {
  ncclDevResourceHandle_t bufHandle;
  uint32_t nSlots;
} ncclLLA2AHandle_t;

// GPU-initiated networking: at most this many network connections per
// device communicator (2.28 called them contexts: NCCL_GIN_MAX_CONTEXTS).
#define NCCL_GIN_MAX_CONNECTIONS 4
typedef struct ncclGinGpuCtx *ncclGinGpuCtx_t;
typedef void *ncclGinWindow_t;
typedef enum ncclGinSignalOp_t { ncclGinSignalInc = 0, ncclGinSignalAdd = 1 } ncclGinSignalOp_t;

// How a device communicator's GIN connections reach the other ranks.
typedef enum {
  NCCL_GIN_CONNECTION_NONE,
  NCCL_GIN_CONNECTION_FULL,
  NCCL_GIN_CONNECTION_RAIL,
} ncclGinConnectionType_t;

// The GIN implementation a communicator has (ncclCommProperties). The gaps
// keep the values of the network plugin's device types.
typedef enum {
  NCCL_GIN_TYPE_NONE = 0,
  NCCL_GIN_TYPE_PROXY = 2,
  NCCL_GIN_TYPE_GDAKI = 3,
  NCCL_GIN_TYPE_GPI = 4,
} ncclGinType_t;

// One physical segment of a window made of several.
struct ncclSegmentWindow {
  ncclGinWindow_t ginWins[NCCL_GIN_MAX_CONNECTIONS];
  size_t segmentSize;
#ifdef WEFT_NCCL_DEVICE_H_HAVE_CUDA_DRIVER
  CUmemLocationType memType;
#else
  int memType;  // a CUmemLocationType
#endif
};

// A registered window as the device sees it (nccl.h: ncclWindow_t points here).
struct ncclWindow_vidmem {
  void *winHost;
  char *lsaFlatBase;   // rank 0 of the LSA team's first byte
  int lsaRank;
  int worldRank;
  uint32_t stride4G;
  uint32_t mcOffset4K;
  uint32_t ginOffset4K;
  ncclGinWindow_t ginWins[NCCL_GIN_MAX_CONNECTIONS];
  struct ncclSegmentWindow *ginMultiSegmentWins;  // numSegments of them, or NULL
  int numSegments;
};
typedef struct ncclWindow_vidmem ncclWindow_vidmem_t;

// The part of a window that resource-buffer addressing needs, at the same
// offsets as in ncclWindow_vidmem; the rest is padding.
typedef struct ncclResourceWindow_vidmem {
  char reserved1[8];
  char *lsaFlatBase;
  char reserved2[8];
  uint32_t stride4G;
  uint32_t mcOffset4K;
  char reserved3[32];
} ncclResourceWindow_vidmem_t;

struct ncclDevCommWindowTable;  // defined by the library; pointer only
typedef struct ncclDevCommWindowTable *ncclDevCommWindowTable_t;

// What a kernel receives by value: filled by ncclDevCommCreate. magic and
// version (2.30) say which layout the library filled.
typedef struct ncclDevComm {
  unsigned int magic;
  unsigned int version;
  int rank, nRanks;
  uint32_t nRanks_rcp32;
  int lsaRank, lsaSize;
  uint32_t lsaSize_rcp32;
  ncclDevCommWindowTable_t windowTable;
  ncclWindow_t resourceWindow;
  ncclResourceWindow_vidmem_t resourceWindow_inlined;
  ncclGinBarrierHandle_t hybridWorldGinBarrier;
  ncclMultimemHandle_t lsaMultimem;
  ncclLsaBarrierHandle_t lsaBarrier;
  ncclGinBarrierHandle_t railGinBarrier;
  uint8_t ginConnectionCount;
  uint8_t ginNetDeviceTypes[NCCL_GIN_MAX_CONNECTIONS];
  void *ginHandles[NCCL_GIN_MAX_CONNECTIONS];
  int ginSignalCount;
  int ginCounterCount;
  uint64_t *ginSignalShadows;
  uint32_t ginContextCount;
  bool ginConnectionsRailed;
  bool ginStrongLegacySignals;
  bool ginContextsRailed;
  uint32_t *abortFlag;  // set when the communicator is aborted
  ncclLsaBarrierHandle_t hybridLsaBarrier;
  ncclGinBarrierHandle_t hybridRailGinBarrier;
  ncclGinBarrierHandle_t worldGinBarrier;
} ncclDevComm_t;

typedef struct ncclDevResourceRequirements ncclDevResourceRequirements_t;
typedef struct ncclTeamRequirements ncclTeamRequirements_t;

// What the caller asks ncclDevCommCreate for. Start from
// NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER (2.30: size/magic/version say
// which layout the caller has), then set.
typedef struct ncclDevCommRequirements {
  size_t size;
  unsigned int magic;    // NCCL_API_MAGIC
  unsigned int version;  // NCCL_VERSION_CODE of the caller's header
  ncclDevResourceRequirements_t *resourceRequirementsList;
  ncclTeamRequirements_t *teamRequirementsList;
  bool lsaMultimem;
  int barrierCount;
  int lsaBarrierCount;
  int railGinBarrierCount;
  int lsaLLA2ABlockCount, lsaLLA2ASlotCount;
  bool ginForceEnable;
  int ginContextCount;   // a hint
  int ginSignalCount;    // signals 0..ginSignalCount-1
  int ginCounterCount;   // counters 0..ginCounterCount-1
  ncclGinConnectionType_t ginConnectionType;
  bool ginExclusiveContexts;
  int ginQueueDepth;
  int ginTrafficClass;
  int worldGinBarrierCount;
  bool ginStrongSignalsRequired;  // false: kernels use no strong GIN signals
  bool ginVaSignalsRequired;      // false: kernels use no VA GIN signals
} ncclDevCommRequirements_t;

#define NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER                                 \
  {                                                                            \
    sizeof(ncclDevCommRequirements_t), /* size */                              \
    NCCL_API_MAGIC,                    /* magic */                             \
    NCCL_VERSION_CODE,                 /* version */                           \
    NULL,                              /* resourceRequirementsList */          \
    NULL,                              /* teamRequirementsList */              \
    false,                             /* lsaMultimem */                       \
    0,                                 /* barrierCount */                      \
    0,                                 /* lsaBarrierCount */                   \
    0,                                 /* railGinBarrierCount */               \
    0,                                 /* lsaLLA2ABlockCount */                \
    0,                                 /* lsaLLA2ASlotCount */                 \
    false,                             /* ginForceEnable */                    \
    4,                                 /* ginContextCount */                   \
    0,                                 /* ginSignalCount */                    \
    0,                                 /* ginCounterCount */                   \
    NCCL_GIN_CONNECTION_NONE,          /* ginConnectionType */                 \
    false,                             /* ginExclusiveContexts */              \
    0,                                 /* ginQueueDepth */                     \
    NCCL_CONFIG_UNDEF_INT,             /* ginTrafficClass */                   \
    0,                                 /* worldGinBarrierCount */              \
    true,                              /* ginStrongSignalsRequired */          \
    true,                              /* ginVaSignalsRequired */              \
  }

struct ncclDevResourceRequirements {
  ncclDevResourceRequirements_t *next;
  size_t bufferSize, bufferAlign;
  ncclDevResourceHandle_t *outBufferHandle;  // filled by ncclDevCommCreate when not NULL
  int ginSignalCount;
  int ginCounterCount;
  ncclGinSignal_t *outGinSignalStart;
  ncclGinCounter_t *outGinCounterStart;
};

struct ncclTeamRequirements {
  ncclTeamRequirements_t *next;
  ncclTeam_t team;
  bool multimem;
  ncclMultimemHandle_t *outMultimemHandle;  // filled by ncclDevCommCreate when not NULL
};

// What a communicator offers the device API (ncclCommQueryProperties).
// Start from NCCL_COMM_PROPERTIES_INITIALIZER.
typedef struct ncclCommProperties {
  size_t size;
  unsigned int magic;    // NCCL_API_MAGIC
  unsigned int version;  // NCCL_VERSION_CODE of the caller's header
  int rank;
  int nRanks;
  int cudaDev;
  int nvmlDev;
  bool deviceApiSupport;
  bool multimemSupport;
  ncclGinType_t ginType;
  int nLsaTeams;          // filled for callers built against 2.29.4 or later, as the rest below
  bool hostRmaSupport;    // one-sided calls (ncclPutSignal, ...) work on this communicator
  ncclGinType_t railedGinType;
} ncclCommProperties_t;

#define NCCL_COMM_PROPERTIES_INITIALIZER                                       \
  {                                                                            \
    sizeof(ncclCommProperties_t), /* size */                                   \
    NCCL_API_MAGIC,               /* magic */                                  \
    NCCL_VERSION_CODE,            /* version */                                \
  }

// ---- Host entry points. weft: ncclDevCommCreate, the resource requirements
// and the device-pointer calls return ncclInvalidUsage (no GPU backend);
// ncclDevCommDestroy of a devComm that was never created is ncclInvalidUsage
// too. ncclCommQueryProperties answers. Teams are computed: the world team
// is every rank, the LSA (load/store-accessible) team is the rank alone,
// since weft maps no peer's memory into this one's GPU.
ncclResult_t ncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t *props);
ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const *reqs, ncclDevComm_t *outDevComm);
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const *devComm);
ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void **outPtr);
ncclResult_t ncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset, ncclMultimemHandle_t multimem,
                                          void **outPtr);
ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank, void **outPtr);
ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void **outPtr);
ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers, ncclLsaBarrierHandle_t *outHandle,
                                             ncclDevResourceRequirements_t *outReq);
ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                             ncclGinBarrierHandle_t *outHandle, ncclDevResourceRequirements_t *outReq);
// Low-latency all-to-all: slots for maxElts elements of maxEltSize bytes
// (8 payload bytes per slot), and its resource requirement.
int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t *outHandle,
                                        ncclDevResourceRequirements_t *outReq);
ncclTeam_t ncclTeamWorld(ncclComm_t comm);
ncclTeam_t ncclTeamLsa(ncclComm_t comm);
ncclTeam_t ncclTeamRail(ncclComm_t comm);
int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);

#ifdef __cplusplus
}  // extern "C"
#endif

// ---- Device side: CUDA C++ only.
#if defined(__cplusplus) && defined(__CUDACC__)
#include <cstdio>
#include <cuda/atomic>

#define WEFT_DEV __device__ __forceinline__
#define WEFT_HOSTDEV __host__ __device__ __forceinline__

// Reached only if a device communicator existed, which weft never makes.
__device__ __noinline__ inline void weft_device_api_unsupported(const char *what) {
  printf(
      "weft: %s: the NCCL device API needs weft's GPU backend, which is not "
      "built yet\n",
      what);
  __trap();
}

struct ncclTeamTagWorld {};
struct ncclTeamTagLsa {};
struct ncclTeamTagRail {};

WEFT_HOSTDEV ncclTeam ncclTeamWorld(ncclDevComm const &c) { return ncclTeam{c.nRanks, c.rank, 1}; }
WEFT_HOSTDEV ncclTeam ncclTeamLsa(ncclDevComm const &c) { return ncclTeam{c.lsaSize, c.lsaRank, 1}; }
// The rail team: this rank's position across LSA teams (world over LSA).
WEFT_HOSTDEV ncclTeam ncclTeamRail(ncclDevComm const &c) {
  return ncclTeam{c.nRanks / c.lsaSize, c.rank / c.lsaSize, c.lsaSize};
}
WEFT_HOSTDEV int ncclTeamRankToWorld(ncclDevComm const &c, ncclTeam t, int r) {
  return c.rank + (r - t.rank) * t.stride;
}
WEFT_HOSTDEV int ncclTeamRankToLsa(ncclDevComm const &c, ncclTeam t, int r) {
  return ncclTeamRankToWorld(c, t, r) - (c.rank - c.lsaRank);
}

// Cooperative groups, the subset NCCL defines: thread_rank, size, sync.
template <int nThreadsPow2>
struct ncclCoopTile {  // an aligned power-of-two set of lanes in a warp
  static_assert(nThreadsPow2 > 0 && nThreadsPow2 <= 32 && (nThreadsPow2 & (nThreadsPow2 - 1)) == 0,
                "tile size must be a power of two up to 32");
  WEFT_DEV int thread_rank() const { return (threadIdx.x % 32) % nThreadsPow2; }
  WEFT_DEV constexpr int size() const { return nThreadsPow2; }
  WEFT_DEV constexpr int num_threads() const { return nThreadsPow2; }
  WEFT_DEV uint32_t laneMask() const {
    return (0xffffffffu >> (32 - nThreadsPow2)) << ((threadIdx.x % 32) & ~(nThreadsPow2 - 1));
  }
  WEFT_DEV void sync() {
    if (nThreadsPow2 > 1) __syncwarp(laneMask());
  }
};
typedef ncclCoopTile<1> ncclCoopThread;
typedef ncclCoopTile<32> ncclCoopWarp;

struct ncclCoopCta {  // every thread of the block
  WEFT_DEV int thread_rank() const { return threadIdx.x; }
  WEFT_DEV int size() const { return blockDim.x; }
  WEFT_DEV int num_threads() const { return blockDim.x; }
  WEFT_DEV void sync() { __syncthreads(); }
};

// Window pointers.
WEFT_DEV void *ncclGetLocalPointer(ncclWindow_t, size_t) {
  weft_device_api_unsupported("ncclGetLocalPointer");
  return nullptr;
}
WEFT_DEV void *ncclGetLsaPointer(ncclWindow_t, size_t, int) {
  weft_device_api_unsupported("ncclGetLsaPointer");
  return nullptr;
}
WEFT_DEV void *ncclGetPeerPointer(ncclWindow_t, size_t, int) {
  weft_device_api_unsupported("ncclGetPeerPointer");
  return nullptr;
}
WEFT_DEV void *ncclGetLsaMultimemPointer(ncclWindow_t, size_t, ncclDevComm const &) {
  weft_device_api_unsupported("ncclGetLsaMultimemPointer");
  return nullptr;
}

// Barrier over the LSA team.
template <typename Coop>
struct ncclLsaBarrierSession {
  WEFT_DEV ncclLsaBarrierSession(Coop, ncclDevComm const &, ncclTeam, ncclLsaBarrierHandle, uint32_t, bool = false,
                                 ncclMultimemHandle = {}) {
    weft_device_api_unsupported("ncclLsaBarrierSession");
  }
  WEFT_DEV ncclLsaBarrierSession(Coop, ncclDevComm const &, ncclTeamTagLsa, uint32_t, bool = false) {
    weft_device_api_unsupported("ncclLsaBarrierSession");
  }
  ncclLsaBarrierSession(ncclLsaBarrierSession const &) = delete;
  WEFT_DEV void arrive(Coop, cuda::memory_order) { weft_device_api_unsupported("ncclLsaBarrierSession::arrive"); }
  WEFT_DEV void wait(Coop, cuda::memory_order) { weft_device_api_unsupported("ncclLsaBarrierSession::wait"); }
  WEFT_DEV void sync(Coop, cuda::memory_order) { weft_device_api_unsupported("ncclLsaBarrierSession::sync"); }
};

// GPU-initiated networking (GIN): completion actions and the context. A
// strong signal also settles the puts before it to that peer, a weak one only
// its own; the VA forms name the signal by window and offset. The 2.28 names
// without Strong/Weak remain (deprecated in 2.30).
struct ncclGin_None {};
struct ncclGin_SignalAdd {
  ncclGinSignal_t signal;
  uint64_t value;
};
struct ncclGin_SignalInc {
  ncclGinSignal_t signal;
};
struct ncclGin_StrongSignalAdd {
  ncclGinSignal_t signal;
  uint64_t value;
};
struct ncclGin_WeakSignalAdd {
  ncclGinSignal_t signal;
  uint64_t value;
};
struct ncclGin_StrongSignalInc {
  ncclGinSignal_t signal;
};
struct ncclGin_WeakSignalInc {
  ncclGinSignal_t signal;
};
struct ncclGin_VASignalInc {
  ncclWindow_t signalWindow;
  size_t signalOffset;
};
struct ncclGin_StrongVASignalInc {
  ncclWindow_t signalWindow;
  size_t signalOffset;
};
struct ncclGin_WeakVASignalInc {
  ncclWindow_t signalWindow;
  size_t signalOffset;
};
struct ncclGin_VASignalAdd {
  ncclWindow_t signalWindow;
  size_t signalOffset;
  uint64_t value;
};
struct ncclGin_StrongVASignalAdd {
  ncclWindow_t signalWindow;
  size_t signalOffset;
  uint64_t value;
};
struct ncclGin_WeakVASignalAdd {
  ncclWindow_t signalWindow;
  size_t signalOffset;
  uint64_t value;
};
struct ncclGin_CounterInc {
  ncclGinCounter_t counter;
};
struct ncclGin_WeakCounterInc {
  ncclGinCounter_t counter;
};
enum class ncclGinFenceLevel { Relaxed };

struct ncclGin {
  ncclDevComm const &comm;
  WEFT_DEV ncclGin(ncclDevComm const &c, int) : comm(c) { weft_device_api_unsupported("ncclGin"); }
  template <typename RemoteAction = ncclGin_None, typename LocalAction = ncclGin_None, typename Coop = ncclCoopThread>
  WEFT_DEV void put(ncclTeam, int, ncclWindow_t, size_t, ncclWindow_t, size_t, size_t, RemoteAction = RemoteAction{},
                    LocalAction = LocalAction{}, Coop = Coop{}) const {
    weft_device_api_unsupported("ncclGin::put");
  }
  template <typename RemoteAction, typename Coop = ncclCoopThread>
  WEFT_DEV void signal(ncclTeam, int, RemoteAction, Coop = Coop{}) const {
    weft_device_api_unsupported("ncclGin::signal");
  }
  template <typename Coop>
  WEFT_DEV void flush(Coop, cuda::memory_order = cuda::memory_order_acquire) const {
    weft_device_api_unsupported("ncclGin::flush");
  }
  WEFT_DEV uint64_t readSignal(ncclGinSignal_t, int = 64, cuda::memory_order = cuda::memory_order_acquire) const {
    weft_device_api_unsupported("ncclGin::readSignal");
    return 0;
  }
  template <typename Coop>
  WEFT_DEV void waitSignal(Coop, ncclGinSignal_t, uint64_t, int = 64,
                           cuda::memory_order = cuda::memory_order_acquire) const {
    weft_device_api_unsupported("ncclGin::waitSignal");
  }
  WEFT_DEV uint64_t readCounter(ncclGinCounter_t, int = 56, cuda::memory_order = cuda::memory_order_acquire) const {
    weft_device_api_unsupported("ncclGin::readCounter");
    return 0;
  }
  template <typename Coop>
  WEFT_DEV void waitCounter(Coop, ncclGinCounter_t, uint64_t, int = 56,
                            cuda::memory_order = cuda::memory_order_acquire) const {
    weft_device_api_unsupported("ncclGin::waitCounter");
  }
};

// Barrier over the world (LSA inside, GIN across) or the LSA team.
template <typename Coop>
struct ncclBarrierSession {
  WEFT_DEV ncclBarrierSession(Coop, ncclTeamTagWorld, ncclGin, uint32_t, bool = false) {
    weft_device_api_unsupported("ncclBarrierSession");
  }
  WEFT_DEV ncclBarrierSession(Coop, ncclTeamTagLsa, ncclDevComm const &, uint32_t, bool = false) {
    weft_device_api_unsupported("ncclBarrierSession");
  }
  ncclBarrierSession(ncclBarrierSession const &) = delete;
  WEFT_DEV void sync(Coop, cuda::memory_order, ncclGinFenceLevel) {
    weft_device_api_unsupported("ncclBarrierSession::sync");
  }
};

#undef WEFT_DEV
#undef WEFT_HOSTDEV
#endif  // __cplusplus && __CUDACC__

#endif  // WEFT_NCCL_DEVICE_H
