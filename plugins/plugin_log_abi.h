/*
 * plugin_log_abi.h — what NCCL's tuner and profiler plugin ABIs share: its
 * log levels, subsystem bits and logger type (nccl_common.h), and its
 * numbering of collective kinds, algorithms and protocols (the tuner's
 * table axes; a v1 profiler descriptor's func, algo and proto). Declared
 * here once, from the layout of
 * NCCL's public headers; tuner_abi.h and profiler_abi.h include it, so an
 * example plugin needs only its own folder and this one.
 */
#ifndef WEFT_PLUGIN_LOG_ABI_H
#define WEFT_PLUGIN_LOG_ABI_H

// NCCL's log levels and subsystem bits (nccl_common.h), and its logger.
typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

typedef enum {
  NCCL_INIT = 0x1,
  NCCL_COLL = 0x2,
  NCCL_P2P = 0x4,
  NCCL_SHM = 0x8,
  NCCL_NET = 0x10,
  NCCL_GRAPH = 0x20,
  NCCL_TUNING = 0x40,
  NCCL_ENV = 0x80,
  NCCL_ALLOC = 0x100,
  NCCL_CALL = 0x200,
  NCCL_PROXY = 0x400,
  NCCL_NVLS = 0x800,
  NCCL_BOOTSTRAP = 0x1000,
  NCCL_REG = 0x2000,
  NCCL_PROFILE = 0x4000,
  NCCL_RAS = 0x8000,
  NCCL_ALL = ~0
} ncclDebugLogSubSys;

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                                  const char *fmt, ...);

// Collective kinds as NCCL numbers them; the tuner sees the first five.
typedef enum {
  ncclFuncBroadcast = 0,
  ncclFuncReduce = 1,
  ncclFuncAllGather = 2,
  ncclFuncReduceScatter = 3,
  ncclFuncAllReduce = 4,
  ncclFuncSendRecv = 5,
  ncclFuncSend = 6,
  ncclFuncRecv = 7,
  ncclFuncAlltoAll = 8,  // NCCL 2.28 on
  ncclFuncScatter = 9,
  ncclFuncGather = 10
} ncclFunc_t;

// Algorithms and protocols as NCCL numbers them (the tuner's cost table is
// float[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS]).
#define NCCL_ALGO_UNDEF -1
#define NCCL_ALGO_TREE 0
#define NCCL_ALGO_RING 1
#define NCCL_ALGO_COLLNET_DIRECT 2
#define NCCL_ALGO_COLLNET_CHAIN 3
#define NCCL_ALGO_NVLS 4
#define NCCL_ALGO_NVLS_TREE 5
#define NCCL_ALGO_PAT 6
#define NCCL_NUM_ALGORITHMS 7

#define NCCL_PROTO_UNDEF -1
#define NCCL_PROTO_LL 0
#define NCCL_PROTO_LL128 1
#define NCCL_PROTO_SIMPLE 2
#define NCCL_NUM_PROTOCOLS 3

#endif  // WEFT_PLUGIN_LOG_ABI_H
