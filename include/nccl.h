/*
 * nccl.h — weft's public API header, binary-compatible with NCCL 2.30.7.
 *
 * A program compiled against NVIDIA's nccl.h runs unchanged on weft's
 * libnccl.so.2, and a program compiled against this file runs on NVIDIA's:
 * every type, enum value, struct layout, initializer, macro and function
 * signature below matches NCCL 2.30.7. Programs built against 2.28.9's
 * header keep working too: the calls they make have the same signatures,
 * and the library reads a 2.28 caller's smaller ncclConfig_t by its size
 * and version (the fields 2.30 added take their defaults). The include
 * guard is the same as NVIDIA's, so whichever header comes first wins and
 * the other is a no-op.
 *
 * CUDA is optional. When <cuda_runtime.h> can be found (and WEFT_NO_CUDA is
 * not defined) it is included, as NCCL does; otherwise cudaStream_t is
 * declared here as the same opaque pointer type CUDA uses. On host memory a
 * NULL stream means "complete the call before returning"; see weft.h for
 * weft's host streams.
 *
 * Every entry point exists under two names: ncclX, which applications call
 * and tools may interpose, and pncclX, the underlying definition (the
 * profiling-interface convention).
 */
#ifndef NCCL_H_
#define NCCL_H_

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

// ---- CUDA types: the real ones when available, a compatible stand-in else.
#if !defined(WEFT_NO_CUDA) && defined(__has_include)
#if __has_include(<cuda_runtime.h>)
#define WEFT_NCCL_H_HAVE_CUDA 1
#endif
#endif

#ifdef WEFT_NCCL_H_HAVE_CUDA
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#if CUDART_VERSION >= 11000
#include <cuda_bf16.h>
#endif
#if defined(__cplusplus) && CUDART_VERSION >= 11080
#include <cuda_fp8.h>
#endif
#else
// Same definition as CUDA's driver_types.h: an opaque stream pointer.
typedef struct CUstream_st *cudaStream_t;
#endif

// ---- Version. Codes before 2.9 used X*1000; from 2.9 on, X*10000.
#define NCCL_MAJOR 2
#define NCCL_MINOR 30
#define NCCL_PATCH 7
#define NCCL_SUFFIX ""

#define NCCL_VERSION_CODE 23007
#define NCCL_VERSION(X, Y, Z)                                                  \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z)                      \
                          : (X) * 10000 + (Y) * 100 + (Z))

#ifdef __cplusplus
extern "C" {
#endif

// ---- Handles.
typedef struct ncclComm *ncclComm_t;             // a communicator
typedef struct ncclWindow_vidmem *ncclWindow_t;  // a registered memory window
#define NCCL_COMM_NULL NULL

// The token every rank of a new communicator must share (opaque bytes).
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

// ---- Result codes returned by every call.
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,  // non-blocking call still running
  ncclTimeout = 8,     // a wait passed its limit (weft: WEFT_TIMEOUT with WEFT_TIMEOUT_FAIL=1)
  ncclNumResults = 9
} ncclResult_t;

// ---- Sentinels for "not set" configuration fields and special arguments.
#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1  // ncclCommSplit color: this rank joins no group
#define NCCL_UNDEF_FLOAT -1.0f

// The value of the magic field of ncclConfig_t (and of nccl_device.h's
// versioned structs) that says the struct came from its initializer.
#define NCCL_API_MAGIC 0xcafebeef

// ncclCommWindowRegister flags and the alignment a window's buffer needs.
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_STRICT_ORDERING 0x02  // puts land in order (weft: always)
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

// Values of ncclConfig_t.CTAPolicy.
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

// ncclCommShrink flags: plain shrink, or abort the parent's pending work first.
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

// ncclCommRevoke flags (only the default exists).
#define NCCL_REVOKE_DEFAULT 0x00

// ---- Communicator configuration. Start from NCCL_CONFIG_INITIALIZER, then
// set the fields you care about; size/magic/version identify the layout, so
// a library reads only the fields the caller's header had (2.28.9's struct
// ends at nvlinkCentricSched). What weft does with each field: docs/config.md.
typedef struct ncclConfig_v23000 {
  size_t size;            // sizeof(ncclConfig_t) as seen by the caller
  unsigned int magic;     // NCCL_API_MAGIC
  unsigned int version;   // NCCL_VERSION_CODE of the caller's header
  int blocking;           // 0: init/collectives may return ncclInProgress
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char *netName;    // force a network backend by name
  int splitShare;         // children of ncclCommSplit share resources
  int trafficClass;
  const char *commName;   // label used in logs
  int collnetEnable;
  int CTAPolicy;          // NCCL_CTA_POLICY_*
  int shrinkShare;        // children of ncclCommShrink share resources
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
  int graphUsageMode;     // (2.29) 0, 1 or 2: how the communicator meets CUDA graphs
  int numRmaCtx;          // (2.29) contexts for one-sided calls; 0 turns them off
  int maxP2pPeers;        // (2.30) peers a rank exchanges point-to-point with at once
  int graphStreamOrdering;  // (2.30.5) 0 or 1: captured calls keep stream order
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                \
  {                                                                            \
    sizeof(ncclConfig_t),                             /* size */               \
    NCCL_API_MAGIC,                                   /* magic */              \
    NCCL_VERSION_CODE,                                /* version */            \
    NCCL_CONFIG_UNDEF_INT,                            /* blocking */           \
    NCCL_CONFIG_UNDEF_INT,                            /* cgaClusterSize */     \
    NCCL_CONFIG_UNDEF_INT,                            /* minCTAs */            \
    NCCL_CONFIG_UNDEF_INT,                            /* maxCTAs */            \
    NCCL_CONFIG_UNDEF_PTR,                            /* netName */            \
    NCCL_CONFIG_UNDEF_INT,                            /* splitShare */         \
    NCCL_CONFIG_UNDEF_INT,                            /* trafficClass */       \
    NCCL_CONFIG_UNDEF_PTR,                            /* commName */           \
    NCCL_CONFIG_UNDEF_INT,                            /* collnetEnable */      \
    NCCL_CONFIG_UNDEF_INT,                            /* CTAPolicy */          \
    NCCL_CONFIG_UNDEF_INT,                            /* shrinkShare */        \
    NCCL_CONFIG_UNDEF_INT,                            /* nvlsCTAs */           \
    NCCL_CONFIG_UNDEF_INT,                            /* nChannelsPerNetPeer */\
    NCCL_CONFIG_UNDEF_INT,                            /* nvlinkCentricSched */ \
    NCCL_CONFIG_UNDEF_INT,                            /* graphUsageMode */     \
    NCCL_CONFIG_UNDEF_INT,                            /* numRmaCtx */          \
    NCCL_CONFIG_UNDEF_INT,                            /* maxP2pPeers */        \
    NCCL_CONFIG_UNDEF_INT,                            /* graphStreamOrdering */\
  }

// ---- Result of ncclGroupSimulateEnd. Start from NCCL_SIM_INFO_INITIALIZER.
typedef struct ncclSimInfo_v22200 {
  size_t size;           // sizeof(ncclSimInfo_t) as seen by the caller
  unsigned int magic;    // 0x74685283
  unsigned int version;  // NCCL_VERSION code of the caller's header
  float estimatedTime;   // filled in: predicted time of the group, in us
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER                                              \
  {                                                                            \
    sizeof(ncclSimInfo_t),                            /* size */               \
    0x74685283,                                       /* magic */              \
    NCCL_VERSION_CODE,                                /* version */            \
    NCCL_UNDEF_FLOAT                                  /* estimatedTime */      \
  }

// ---- Reduction operators. Values from ncclNumOps up are user operators
// made by ncclRedOpCreatePreMulSum. ncclMaxRedOp is the largest value that
// still fits the enum's historical size (computed from a helper enum so the
// expression tracks the compiler's choice of enum width).
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

// ---- Element types (the second name in a row is an alias).
typedef enum {
  ncclInt8 = 0,       ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,      ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,    ncclHalf = 6,
  ncclFloat32 = 7,    ncclFloat = 7,
  ncclFloat64 = 8,    ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

// ---- Where the scalar of ncclRedOpCreatePreMulSum lives: read from device
// memory while the collective runs, or read from host memory at creation.
typedef enum {
  ncclScalarDevice = 0,
  ncclScalarHostImmediate = 1
} ncclScalarResidence_t;

// ======================================================================
// Memory
// ======================================================================

// Allocate / free a buffer suited to registration and zero-copy transfers
// (the allocation may be rounded up).
ncclResult_t ncclMemAlloc(void **ptr, size_t size);
ncclResult_t pncclMemAlloc(void **ptr, size_t size);
ncclResult_t ncclMemFree(void *ptr);
ncclResult_t pncclMemFree(void *ptr);

// ======================================================================
// Version, ids, communicator life cycle
// ======================================================================

// Store the library's NCCL_VERSION_CODE in *version.
ncclResult_t ncclGetVersion(int *version);
ncclResult_t pncclGetVersion(int *version);

// Make a fresh id; one rank calls this and hands the id to all the others.
ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId *uniqueId);

// Join communicator `commId` as `rank` of `nranks`, with options (config may
// be NULL). Collective over all ranks: call from separate threads or
// processes, or inside a group.
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config);
ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t *config);

// Same with default options.
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank);

// Make all `ndev` communicators of one clique from a single thread; comm
// must hold ndev handles. devlist (may be NULL) picks the device of each rank.
ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist);
ncclResult_t pncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist);

// Flush outstanding work; the communicator reports ncclInProgress until it is
// quiet everywhere, after which ncclCommDestroy frees it without waiting.
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t pncclCommFinalize(ncclComm_t comm);

// Free this rank's resources of the communicator.
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm);

// Stop whatever is running on the communicator and free it.
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm);

// Cancel in-flight work so that destroy/split/shrink can proceed; revokeFlags
// must be NCCL_REVOKE_DEFAULT.
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags);

// Partition a communicator: ranks passing the same color form a new one,
// ordered by key. NCCL_SPLIT_NOCOLOR yields *newcomm == NULL. A NULL config
// inherits the parent's.
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config);
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                            ncclConfig_t *config);

// New communicator without the listed ranks; survivors are renumbered densely.
// shrinkFlags is one of NCCL_SHRINK_*.
ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                            ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags);
ncclResult_t pncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                             ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags);

// A unique id for growing comm: one existing rank asks, and
// hands it to the new ranks. No second id while one is unconsumed.
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId *uniqueId);
ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId *uniqueId);
// A communicator of nRanks: comm's ranks (rank -1; only the one
// that got the id passes it) keep their ranks, new ranks (comm NULL, the id,
// their rank) join. A NULL config inherits comm's.
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
                          ncclComm_t *newcomm, ncclConfig_t *config);
ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
                           ncclComm_t *newcomm, ncclConfig_t *config);

// Like ncclCommInitRankConfig, but bootstraps from nId ids (the same list, in
// the same order, on every rank) to spread the start-up load.
ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId *commIds, ncclConfig_t *config);
ncclResult_t pncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                       ncclUniqueId *commIds, ncclConfig_t *config);

// ======================================================================
// Errors and queries
// ======================================================================

// Fixed text for a result code.
const char *ncclGetErrorString(ncclResult_t result);
const char *pncclGetErrorString(ncclResult_t result);

// Text of the most recent failure (comm may be NULL).
const char *ncclGetLastError(ncclComm_t comm);
const char *pncclGetLastError(ncclComm_t comm);

// Re-read the logging environment (NCCL_DEBUG and friends). Deprecated:
// as in NCCL 2.30, a program sees it as a call that does nothing unless it
// defines NCCL_OS_LINUX; the library still exports both names, for programs
// built against older headers.
#ifdef NCCL_OS_LINUX
__attribute__((deprecated("ncclResetDebugInit is not supported as part of the NCCL API and will be removed in the future")))
void ncclResetDebugInit(void);
__attribute__((deprecated("pncclResetDebugInit is not supported as part of the NCCL API and will be removed in the future")))
void pncclResetDebugInit(void);
#else
#define ncclResetDebugInit()
#define pncclResetDebugInit()
#endif

// Report an error that happened in the background (ncclInProgress while a
// non-blocking operation is still running).
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError);

// Number of ranks, device of this rank, and this rank's index.
ncclResult_t ncclCommCount(const ncclComm_t comm, int *count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int *count);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int *device);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int *rank);

// ======================================================================
// Suspending, memory statistics, buffer registration
// ======================================================================

// Suspend a communicator (no calls until ncclCommResume);
// NCCL_SUSPEND_MEM also releases the memory that can be released.
#define NCCL_SUSPEND_MEM 0x01
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t ncclCommResume(ncclComm_t comm);
ncclResult_t pncclCommResume(ncclComm_t comm);

// What device memory the communicator holds, in bytes (or, for
// ncclStatGpuMemSuspended, 1 while it is suspended with NCCL_SUSPEND_MEM).
typedef enum {
  ncclStatGpuMemSuspend = 0,    // held and releasable by ncclCommSuspend
  ncclStatGpuMemSuspended = 1,  // 0 active, 1 suspended
  ncclStatGpuMemPersist = 2,    // held and not releasable
  ncclStatGpuMemTotal = 3       // all of it
} ncclCommMemStat_t;
ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t *value);
ncclResult_t pncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t *value);

// Register / release a buffer for zero-copy transfers.
ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle);
ncclResult_t pncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle);
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle);
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void *handle);

// Register / release a window: the same buffer on every rank (collective).
// winFlags is a combination of NCCL_WIN_*.
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                    int winFlags);
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                     int winFlags);
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
// This rank's buffer of the window.
ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void **outUserPtr);
ncclResult_t pncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void **outUserPtr);

// ======================================================================
// User reduction operators
// ======================================================================

// Make an operator that multiplies each input by *scalar, then sums. Valid
// only with `comm` and `datatype`; `residence` says when *scalar is read.
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm);

// Release an operator made above, once no call using it is still being issued.
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

// ======================================================================
// Collectives. Every rank of the communicator makes the matching call; the
// call returns once the work is queued on `stream`. Counts are in elements.
// A single thread driving several ranks must wrap the calls in a group.
// ======================================================================

// Reduce into recvbuff of rank `root` (recvbuff unused elsewhere).
// In place when sendbuff == recvbuff.
ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream);
ncclResult_t pncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                         cudaStream_t stream);

// In-place broadcast of buff from `root` (older form of ncclBroadcast).
ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream);

// Copy `root`'s sendbuff into every rank's recvbuff.
ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t pncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                            ncclDataType_t datatype, int root, ncclComm_t comm,
                            cudaStream_t stream);

// Reduce across ranks; every rank receives the full result.
ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t pncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                            cudaStream_t stream);

// Reduce nranks*recvcount elements; rank i keeps block i of the result.
// In place when recvbuff == sendbuff + rank*recvcount.
ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t pncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                cudaStream_t stream);

// Concatenate every rank's sendcount elements, rank i's at i*sendcount.
// In place when sendbuff == recvbuff + rank*sendcount.
ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

// Block j of sendbuff goes to rank j; block i of recvbuff comes from rank i.
ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

// Collect every rank's block at recvbuff + i*count on `root`.
// In place when sendbuff == recvbuff + root*count.
ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, int root, ncclComm_t comm,
                        cudaStream_t stream);
ncclResult_t pncclGather(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm,
                         cudaStream_t stream);

// `root` hands block i of sendbuff to rank i.
// In place when recvbuff == sendbuff + root*count.
ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm,
                         cudaStream_t stream);
ncclResult_t pncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t datatype, int root, ncclComm_t comm,
                          cudaStream_t stream);

// ======================================================================
// Point to point. The peer posts the matching ncclRecv / ncclSend with the
// same count and type. Exchanges that depend on each other must be issued
// in one group.
// ======================================================================

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);

// ======================================================================
// Groups. Calls between ncclGroupStart and ncclGroupEnd are collected and
// issued together at ncclGroupEnd: this lets one thread drive many ranks,
// fuses small operations and lets sends and receives progress together.
// Groups nest; only the outermost end issues the work. Communicator
// creation and collectives may each be grouped, but not in the same group.
// ======================================================================

ncclResult_t ncclGroupStart(void);
ncclResult_t pncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t pncclGroupEnd(void);

// Close the group without running it; report the predicted cost in simInfo.
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo);
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t *simInfo);

// ======================================================================
// One-sided calls. A put writes count elements into peer's part
// of a window, at peerWinOffset bytes, then raises peer's signal; a wait
// returns once each descriptor's opCnt signals from its peer have arrived
// (on top of those earlier waits consumed). ctx, sigIdx and flags are 0.
// weft: host memory, the ranks of this host, NULL stream (complete on return).
// ======================================================================

ncclResult_t ncclPutSignal(const void *localbuff, size_t count, ncclDataType_t datatype, int peer,
                           ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclPutSignal(const void *localbuff, size_t count, ncclDataType_t datatype, int peer,
                            ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
                            ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream);

typedef struct {
  int opCnt;   // signals to wait for
  int peer;    // from this rank
  int sigIdx;  // 0
  int ctx;     // 0
} ncclWaitSignalDesc_t;

ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclWaitSignal(int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm, cudaStream_t stream);

// ======================================================================
// Parameters: every knob weft reads (docs/env.md), by its
// environment name ("NCCL_ALGO", "WEFT_TIMEOUT"). Integer knobs are 64-bit
// signed (ncclParamGetI64), the others strings; a getter of another type
// returns ncclInvalidArgument, as does an unknown key. Returned strings and
// tables belong to the library and stay valid until the same call is made
// again on the same thread.
// ======================================================================

typedef struct ncclParamHandle *ncclParamHandle_t;

ncclResult_t ncclParamBind(ncclParamHandle_t *out, const char *key);
ncclResult_t pncclParamBind(ncclParamHandle_t *out, const char *key);
ncclResult_t ncclParamGetI8(ncclParamHandle_t h, int8_t *out);
ncclResult_t pncclParamGetI8(ncclParamHandle_t h, int8_t *out);
ncclResult_t ncclParamGetI16(ncclParamHandle_t h, int16_t *out);
ncclResult_t pncclParamGetI16(ncclParamHandle_t h, int16_t *out);
ncclResult_t ncclParamGetI32(ncclParamHandle_t h, int32_t *out);
ncclResult_t pncclParamGetI32(ncclParamHandle_t h, int32_t *out);
ncclResult_t ncclParamGetI64(ncclParamHandle_t h, int64_t *out);
ncclResult_t pncclParamGetI64(ncclParamHandle_t h, int64_t *out);
ncclResult_t ncclParamGetU8(ncclParamHandle_t h, uint8_t *out);
ncclResult_t pncclParamGetU8(ncclParamHandle_t h, uint8_t *out);
ncclResult_t ncclParamGetU16(ncclParamHandle_t h, uint16_t *out);
ncclResult_t pncclParamGetU16(ncclParamHandle_t h, uint16_t *out);
ncclResult_t ncclParamGetU32(ncclParamHandle_t h, uint32_t *out);
ncclResult_t pncclParamGetU32(ncclParamHandle_t h, uint32_t *out);
ncclResult_t ncclParamGetU64(ncclParamHandle_t h, uint64_t *out);
ncclResult_t pncclParamGetU64(ncclParamHandle_t h, uint64_t *out);
// The value as text (string knobs only; "" when unset).
ncclResult_t ncclParamGetStr(ncclParamHandle_t h, const char **out);
ncclResult_t pncclParamGetStr(ncclParamHandle_t h, const char **out);
// The value's bytes (an integer's 8, a string's with its NUL) into out.
ncclResult_t ncclParamGet(ncclParamHandle_t h, void *out, int maxLen, int *len);
ncclResult_t pncclParamGet(ncclParamHandle_t h, void *out, int maxLen, int *len);
// Any knob's value as text, by key.
ncclResult_t ncclParamGetParameter(const char *key, const char **value, int *valueLen);
ncclResult_t pncclParamGetParameter(const char *key, const char **value, int *valueLen);
// Every key.
ncclResult_t ncclParamGetAllParameterKeys(const char ***table, int *tableLen);
ncclResult_t pncclParamGetAllParameterKeys(const char ***table, int *tableLen);
// Every knob, its type, description, value, where the value came from and its default, on stdout.
void ncclParamDumpAll(void);
void pncclParamDumpAll(void);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // NCCL_H_
