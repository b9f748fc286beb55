/*
 * abi_facts.c — prints the binary facts of an nccl.h, one "name value" line
 * each, so two headers can be compared with diff.
 *
 * run_abi.sh builds this file against weft's include/nccl.h (with and
 * without CUDA's headers) and against NVIDIA's nccl.h; against a header of
 * the same release the outputs must be byte-identical, against an older
 * one they may differ only as differences_from_<release>.txt says.
 * Covered: version macros and the version formula, every other macro's
 * value and type (a macro the header lacks is left out), every enum
 * constant and enum size, the size, alignment and field offsets of every
 * public struct and its tag, the fields produced by both initializers, the
 * opaque handle types, and the type of every function under both of its
 * names (checked against signatures spelled out here, so a drift in either
 * header shows up as "MISMATCH"). What a header of 2.30 or later has and an
 * older one lacks is printed only for the newer. Each line is a fact's name
 * (no space outside parentheses) and its value. Exits 1 on a mismatch.
 */
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "nccl.h"

// The calls and types NCCL 2.30 added (with 2.29's) are in this header.
#define HAS_2_30 (NCCL_VERSION_CODE >= NCCL_VERSION(2, 30, 0))

static int mismatches;

// A macro's expansion as text (empty for one that expands to nothing).
#define NCCL_FACTS_STR2(...) #__VA_ARGS__
#define NCCL_FACTS_STR(...) NCCL_FACTS_STR2(__VA_ARGS__)

// Name of the type of an expression, for macros whose type matters.
#define TYPE_NAME(x)                                                           \
  _Generic((x), int: "int", unsigned int: "unsigned", long: "long",          \
           unsigned long: "unsigned_long", long long: "long_long",           \
           unsigned long long: "unsigned_long_long", float: "float",         \
           double: "double", char *: "char*", const char *: "const_char*",   \
           void *: "void*", default: "other")

// An integer-valued macro or constant: name, type, value.
#define INT_FACT(m)                                                            \
  printf("%s %s %lld\n", #m, TYPE_NAME(m), (long long)(m))

// Size and alignment of a type.
#define TYPE_FACT(t)                                                           \
  printf("sizeof(%s) %zu\nalignof(%s) %zu\n", #t, sizeof(t), #t, alignof(t))

// Offset and size of a struct member.
#define FIELD_FACT(t, f)                                                       \
  printf("offsetof(%s,%s) %zu\nsizeof(%s.%s) %zu\n", #t, #f, offsetof(t, f), \
         #t, #f, sizeof(((t *)0)->f))

// Two types that must be the same (handles, struct tags).
#define SAME_TYPE(name, a, b)                                                  \
  report(name, __builtin_types_compatible_p(a, b))

// The tag of a typedef'd struct, printed as its value: the tag itself is
// part of the ABI (C++ mangles it), and it changes when the layout does.
#define TAG_FACT(t, tag)                                                       \
  do {                                                                         \
    if (__builtin_types_compatible_p(t, struct tag))                           \
      printf("tag(%s) %s\n", #t, #tag);                                        \
    else                                                                       \
      report("tag(" #t ")", 0);                                                \
  } while (0)

// A function, under both names, must have exactly the spelled-out type.
#define SIG(fn, ret, ...)                                                      \
  do {                                                                         \
    report("sig(" #fn ")",                                                     \
           __builtin_types_compatible_p(__typeof__(fn), ret(__VA_ARGS__)));   \
    report("sig(p" #fn ")",                                                    \
           __builtin_types_compatible_p(__typeof__(p##fn), ret(__VA_ARGS__))); \
  } while (0)

static void report(const char *name, int ok) {
  printf("%s %s\n", name, ok ? "ok" : "MISMATCH");
  if (!ok) mismatches++;
}

static void print_float(const char *name, float v) {
  // %a is exact, so both builds print the same bits.
  printf("%s %a\n", name, (double)v);
}

static void print_ptr(const char *name, const void *p) {
  printf("%s %s\n", name, p == NULL ? "null" : "non-null");
}

static void version_facts(void) {
  INT_FACT(NCCL_MAJOR);
  INT_FACT(NCCL_MINOR);
  INT_FACT(NCCL_PATCH);
  printf("NCCL_SUFFIX \"%s\" %zu\n", NCCL_SUFFIX, sizeof(NCCL_SUFFIX));
  INT_FACT(NCCL_VERSION_CODE);
  INT_FACT(NCCL_VERSION(2, 28, 9));
  INT_FACT(NCCL_VERSION(2, 30, 7));
  INT_FACT(NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH));
  // Both branches of the formula and its boundary.
  INT_FACT(NCCL_VERSION(2, 8, 4));
  INT_FACT(NCCL_VERSION(2, 9, 0));
  INT_FACT(NCCL_VERSION(1, 3, 0));
  INT_FACT(NCCL_VERSION(3, 0, 1));
  INT_FACT(NCCL_VERSION(2, 8, 99));
}

static void macro_facts(void) {
  INT_FACT(NCCL_UNIQUE_ID_BYTES);
  INT_FACT(NCCL_CONFIG_UNDEF_INT);
  print_ptr("NCCL_CONFIG_UNDEF_PTR", NCCL_CONFIG_UNDEF_PTR);
  printf("NCCL_CONFIG_UNDEF_PTR.type %s\n", TYPE_NAME(NCCL_CONFIG_UNDEF_PTR));
  print_ptr("NCCL_COMM_NULL", NCCL_COMM_NULL);
  printf("NCCL_COMM_NULL.type %s\n", TYPE_NAME(NCCL_COMM_NULL));
  INT_FACT(NCCL_SPLIT_NOCOLOR);
  print_float("NCCL_UNDEF_FLOAT", NCCL_UNDEF_FLOAT);
  printf("NCCL_UNDEF_FLOAT.type %s\n", TYPE_NAME(NCCL_UNDEF_FLOAT));
#ifdef NCCL_API_MAGIC
  INT_FACT(NCCL_API_MAGIC);
#endif
  INT_FACT(NCCL_WIN_DEFAULT);
  INT_FACT(NCCL_WIN_COLL_SYMMETRIC);
#ifdef NCCL_WIN_STRICT_ORDERING
  INT_FACT(NCCL_WIN_STRICT_ORDERING);
#endif
  INT_FACT(NCCL_WIN_REQUIRED_ALIGNMENT);
#ifdef NCCL_SUSPEND_MEM
  INT_FACT(NCCL_SUSPEND_MEM);
#endif
  INT_FACT(NCCL_CTA_POLICY_DEFAULT);
  INT_FACT(NCCL_CTA_POLICY_EFFICIENCY);
  INT_FACT(NCCL_CTA_POLICY_ZERO);
  INT_FACT(NCCL_SHRINK_DEFAULT);
  INT_FACT(NCCL_SHRINK_ABORT);
  INT_FACT(NCCL_REVOKE_DEFAULT);
}

static void enum_facts(void) {
  TYPE_FACT(ncclResult_t);
  printf("signed(ncclResult_t) %d\n", !((ncclResult_t)-1 > (ncclResult_t)0));
  INT_FACT(ncclSuccess);
  INT_FACT(ncclUnhandledCudaError);
  INT_FACT(ncclSystemError);
  INT_FACT(ncclInternalError);
  INT_FACT(ncclInvalidArgument);
  INT_FACT(ncclInvalidUsage);
  INT_FACT(ncclRemoteError);
  INT_FACT(ncclInProgress);
#if HAS_2_30
  INT_FACT(ncclTimeout);
#endif
  INT_FACT(ncclNumResults);

  TYPE_FACT(ncclRedOp_dummy_t);
  INT_FACT(ncclNumOps_dummy);
  TYPE_FACT(ncclRedOp_t);
  printf("signed(ncclRedOp_t) %d\n", !((ncclRedOp_t)-1 > (ncclRedOp_t)0));
  INT_FACT(ncclSum);
  INT_FACT(ncclProd);
  INT_FACT(ncclMax);
  INT_FACT(ncclMin);
  INT_FACT(ncclAvg);
  INT_FACT(ncclNumOps);
  INT_FACT(ncclMaxRedOp);

  TYPE_FACT(ncclDataType_t);
  printf("signed(ncclDataType_t) %d\n", !((ncclDataType_t)-1 > (ncclDataType_t)0));
  INT_FACT(ncclInt8);
  INT_FACT(ncclChar);
  INT_FACT(ncclUint8);
  INT_FACT(ncclInt32);
  INT_FACT(ncclInt);
  INT_FACT(ncclUint32);
  INT_FACT(ncclInt64);
  INT_FACT(ncclUint64);
  INT_FACT(ncclFloat16);
  INT_FACT(ncclHalf);
  INT_FACT(ncclFloat32);
  INT_FACT(ncclFloat);
  INT_FACT(ncclFloat64);
  INT_FACT(ncclDouble);
  INT_FACT(ncclBfloat16);
  INT_FACT(ncclFloat8e4m3);
  INT_FACT(ncclFloat8e5m2);
  INT_FACT(ncclNumTypes);

  TYPE_FACT(ncclScalarResidence_t);
  INT_FACT(ncclScalarDevice);
  INT_FACT(ncclScalarHostImmediate);

#if HAS_2_30
  TYPE_FACT(ncclCommMemStat_t);
  INT_FACT(ncclStatGpuMemSuspend);
  INT_FACT(ncclStatGpuMemSuspended);
  INT_FACT(ncclStatGpuMemPersist);
  INT_FACT(ncclStatGpuMemTotal);
#endif
}

static void struct_facts(void) {
  TYPE_FACT(ncclUniqueId);
  FIELD_FACT(ncclUniqueId, internal);

  TYPE_FACT(ncclConfig_t);
#if HAS_2_30
  TAG_FACT(ncclConfig_t, ncclConfig_v23000);
#else
  TAG_FACT(ncclConfig_t, ncclConfig_v22800);
#endif
  FIELD_FACT(ncclConfig_t, size);
  FIELD_FACT(ncclConfig_t, magic);
  FIELD_FACT(ncclConfig_t, version);
  FIELD_FACT(ncclConfig_t, blocking);
  FIELD_FACT(ncclConfig_t, cgaClusterSize);
  FIELD_FACT(ncclConfig_t, minCTAs);
  FIELD_FACT(ncclConfig_t, maxCTAs);
  FIELD_FACT(ncclConfig_t, netName);
  FIELD_FACT(ncclConfig_t, splitShare);
  FIELD_FACT(ncclConfig_t, trafficClass);
  FIELD_FACT(ncclConfig_t, commName);
  FIELD_FACT(ncclConfig_t, collnetEnable);
  FIELD_FACT(ncclConfig_t, CTAPolicy);
  FIELD_FACT(ncclConfig_t, shrinkShare);
  FIELD_FACT(ncclConfig_t, nvlsCTAs);
  FIELD_FACT(ncclConfig_t, nChannelsPerNetPeer);
  FIELD_FACT(ncclConfig_t, nvlinkCentricSched);
#if HAS_2_30
  FIELD_FACT(ncclConfig_t, graphUsageMode);
  FIELD_FACT(ncclConfig_t, numRmaCtx);
  FIELD_FACT(ncclConfig_t, maxP2pPeers);
  FIELD_FACT(ncclConfig_t, graphStreamOrdering);
#endif

  TYPE_FACT(ncclSimInfo_t);
  TAG_FACT(ncclSimInfo_t, ncclSimInfo_v22200);
  FIELD_FACT(ncclSimInfo_t, size);
  FIELD_FACT(ncclSimInfo_t, magic);
  FIELD_FACT(ncclSimInfo_t, version);
  FIELD_FACT(ncclSimInfo_t, estimatedTime);

  SAME_TYPE("type(ncclComm_t)", ncclComm_t, struct ncclComm *);
  SAME_TYPE("type(ncclWindow_t)", ncclWindow_t, struct ncclWindow_vidmem *);
  SAME_TYPE("type(cudaStream_t)", cudaStream_t, struct CUstream_st *);

#if HAS_2_30
  TYPE_FACT(ncclWaitSignalDesc_t);
  FIELD_FACT(ncclWaitSignalDesc_t, opCnt);
  FIELD_FACT(ncclWaitSignalDesc_t, peer);
  FIELD_FACT(ncclWaitSignalDesc_t, sigIdx);
  FIELD_FACT(ncclWaitSignalDesc_t, ctx);
  SAME_TYPE("type(ncclParamHandle_t)", ncclParamHandle_t, struct ncclParamHandle *);
#endif
}

static void initializer_facts(void) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  printf("config.size %zu\n", c.size);
  printf("config.magic 0x%x\n", c.magic);
  printf("config.version %u\n", c.version);
  printf("config.blocking %d\n", c.blocking);
  printf("config.cgaClusterSize %d\n", c.cgaClusterSize);
  printf("config.minCTAs %d\n", c.minCTAs);
  printf("config.maxCTAs %d\n", c.maxCTAs);
  print_ptr("config.netName", c.netName);
  printf("config.splitShare %d\n", c.splitShare);
  printf("config.trafficClass %d\n", c.trafficClass);
  print_ptr("config.commName", c.commName);
  printf("config.collnetEnable %d\n", c.collnetEnable);
  printf("config.CTAPolicy %d\n", c.CTAPolicy);
  printf("config.shrinkShare %d\n", c.shrinkShare);
  printf("config.nvlsCTAs %d\n", c.nvlsCTAs);
  printf("config.nChannelsPerNetPeer %d\n", c.nChannelsPerNetPeer);
  printf("config.nvlinkCentricSched %d\n", c.nvlinkCentricSched);
#if HAS_2_30
  printf("config.graphUsageMode %d\n", c.graphUsageMode);
  printf("config.numRmaCtx %d\n", c.numRmaCtx);
  printf("config.maxP2pPeers %d\n", c.maxP2pPeers);
  printf("config.graphStreamOrdering %d\n", c.graphStreamOrdering);
#endif

  ncclSimInfo_t s = NCCL_SIM_INFO_INITIALIZER;
  printf("siminfo.size %zu\n", s.size);
  printf("siminfo.magic 0x%x\n", s.magic);
  printf("siminfo.version %u\n", s.version);
  print_float("siminfo.estimatedTime", s.estimatedTime);
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static void signature_facts(void) {
  SIG(ncclMemAlloc, ncclResult_t, void **, size_t);
  SIG(ncclMemFree, ncclResult_t, void *);
  SIG(ncclGetVersion, ncclResult_t, int *);
  SIG(ncclGetUniqueId, ncclResult_t, ncclUniqueId *);
  SIG(ncclCommInitRankConfig, ncclResult_t, ncclComm_t *, int, ncclUniqueId, int,
      ncclConfig_t *);
  SIG(ncclCommInitRank, ncclResult_t, ncclComm_t *, int, ncclUniqueId, int);
  SIG(ncclCommInitAll, ncclResult_t, ncclComm_t *, int, const int *);
  SIG(ncclCommFinalize, ncclResult_t, ncclComm_t);
  SIG(ncclCommDestroy, ncclResult_t, ncclComm_t);
  SIG(ncclCommAbort, ncclResult_t, ncclComm_t);
  SIG(ncclCommRevoke, ncclResult_t, ncclComm_t, int);
  SIG(ncclCommSplit, ncclResult_t, ncclComm_t, int, int, ncclComm_t *, ncclConfig_t *);
  SIG(ncclCommShrink, ncclResult_t, ncclComm_t, int *, int, ncclComm_t *, ncclConfig_t *,
      int);
  SIG(ncclCommInitRankScalable, ncclResult_t, ncclComm_t *, int, int, int, ncclUniqueId *,
      ncclConfig_t *);
  SIG(ncclGetErrorString, const char *, ncclResult_t);
  SIG(ncclGetLastError, const char *, ncclComm_t);
#ifdef ncclResetDebugInit
  // 2.30 without NCCL_OS_LINUX: function-like macros, here expanded.
  printf("ncclResetDebugInit() macro:\"%s\"\n", NCCL_FACTS_STR(ncclResetDebugInit()));
  printf("pncclResetDebugInit() macro:\"%s\"\n", NCCL_FACTS_STR(pncclResetDebugInit()));
#else
  SIG(ncclResetDebugInit, void, void);
#endif
  SIG(ncclCommGetAsyncError, ncclResult_t, ncclComm_t, ncclResult_t *);
  SIG(ncclCommCount, ncclResult_t, ncclComm_t, int *);
  SIG(ncclCommCuDevice, ncclResult_t, ncclComm_t, int *);
  SIG(ncclCommUserRank, ncclResult_t, ncclComm_t, int *);
  SIG(ncclCommRegister, ncclResult_t, ncclComm_t, void *, size_t, void **);
  SIG(ncclCommDeregister, ncclResult_t, ncclComm_t, void *);
  SIG(ncclCommWindowRegister, ncclResult_t, ncclComm_t, void *, size_t, ncclWindow_t *, int);
  SIG(ncclCommWindowDeregister, ncclResult_t, ncclComm_t, ncclWindow_t);
  SIG(ncclRedOpCreatePreMulSum, ncclResult_t, ncclRedOp_t *, void *, ncclDataType_t,
      ncclScalarResidence_t, ncclComm_t);
  SIG(ncclRedOpDestroy, ncclResult_t, ncclRedOp_t, ncclComm_t);
  SIG(ncclReduce, ncclResult_t, const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
      int, ncclComm_t, cudaStream_t);
  SIG(ncclBcast, ncclResult_t, void *, size_t, ncclDataType_t, int, ncclComm_t,
      cudaStream_t);
  SIG(ncclBroadcast, ncclResult_t, const void *, void *, size_t, ncclDataType_t, int,
      ncclComm_t, cudaStream_t);
  SIG(ncclAllReduce, ncclResult_t, const void *, void *, size_t, ncclDataType_t,
      ncclRedOp_t, ncclComm_t, cudaStream_t);
  SIG(ncclReduceScatter, ncclResult_t, const void *, void *, size_t, ncclDataType_t,
      ncclRedOp_t, ncclComm_t, cudaStream_t);
  SIG(ncclAllGather, ncclResult_t, const void *, void *, size_t, ncclDataType_t,
      ncclComm_t, cudaStream_t);
  SIG(ncclAlltoAll, ncclResult_t, const void *, void *, size_t, ncclDataType_t, ncclComm_t,
      cudaStream_t);
  SIG(ncclGather, ncclResult_t, const void *, void *, size_t, ncclDataType_t, int,
      ncclComm_t, cudaStream_t);
  SIG(ncclScatter, ncclResult_t, const void *, void *, size_t, ncclDataType_t, int,
      ncclComm_t, cudaStream_t);
  SIG(ncclSend, ncclResult_t, const void *, size_t, ncclDataType_t, int, ncclComm_t,
      cudaStream_t);
  SIG(ncclRecv, ncclResult_t, void *, size_t, ncclDataType_t, int, ncclComm_t,
      cudaStream_t);
  SIG(ncclGroupStart, ncclResult_t, void);
  SIG(ncclGroupEnd, ncclResult_t, void);
  SIG(ncclGroupSimulateEnd, ncclResult_t, ncclSimInfo_t *);
#if HAS_2_30
  SIG(ncclCommGetUniqueId, ncclResult_t, ncclComm_t, ncclUniqueId *);
  SIG(ncclCommGrow, ncclResult_t, ncclComm_t, int, const ncclUniqueId *, int, ncclComm_t *, ncclConfig_t *);
  SIG(ncclCommSuspend, ncclResult_t, ncclComm_t, int);
  SIG(ncclCommResume, ncclResult_t, ncclComm_t);
  SIG(ncclCommMemStats, ncclResult_t, ncclComm_t, ncclCommMemStat_t, uint64_t *);
  SIG(ncclWinGetUserPtr, ncclResult_t, ncclComm_t, ncclWindow_t, void **);
  SIG(ncclPutSignal, ncclResult_t, const void *, size_t, ncclDataType_t, int, ncclWindow_t, size_t, int, int,
      unsigned int, ncclComm_t, cudaStream_t);
  SIG(ncclSignal, ncclResult_t, int, int, int, unsigned int, ncclComm_t, cudaStream_t);
  SIG(ncclWaitSignal, ncclResult_t, int, ncclWaitSignalDesc_t *, ncclComm_t, cudaStream_t);
  SIG(ncclParamBind, ncclResult_t, ncclParamHandle_t *, const char *);
  SIG(ncclParamGetI8, ncclResult_t, ncclParamHandle_t, int8_t *);
  SIG(ncclParamGetI16, ncclResult_t, ncclParamHandle_t, int16_t *);
  SIG(ncclParamGetI32, ncclResult_t, ncclParamHandle_t, int32_t *);
  SIG(ncclParamGetI64, ncclResult_t, ncclParamHandle_t, int64_t *);
  SIG(ncclParamGetU8, ncclResult_t, ncclParamHandle_t, uint8_t *);
  SIG(ncclParamGetU16, ncclResult_t, ncclParamHandle_t, uint16_t *);
  SIG(ncclParamGetU32, ncclResult_t, ncclParamHandle_t, uint32_t *);
  SIG(ncclParamGetU64, ncclResult_t, ncclParamHandle_t, uint64_t *);
  SIG(ncclParamGetStr, ncclResult_t, ncclParamHandle_t, const char **);
  SIG(ncclParamGet, ncclResult_t, ncclParamHandle_t, void *, int, int *);
  SIG(ncclParamGetParameter, ncclResult_t, const char *, const char **, int *);
  SIG(ncclParamGetAllParameterKeys, ncclResult_t, const char ***, int *);
  SIG(ncclParamDumpAll, void, void);
#endif
}
#pragma GCC diagnostic pop

int main(void) {
  version_facts();
  macro_facts();
  enum_facts();
  struct_facts();
  initializer_facts();
  signature_facts();
  if (mismatches) {
    fprintf(stderr, "abi_facts: %d mismatch(es)\n", mismatches);
    return 1;
  }
  return 0;
}
