/*
 * profiler_abi.h — NCCL's profiler plugin ABI (versions 1 to 6), declared
 * for weft and for profiler plugins built against weft.
 *
 * Written from the layout of NCCL's public plugin headers (profiler_v1.h
 * ... profiler_v6.h, nccl_profiler.h): same field order, types and values,
 * so a plugin built for NCCL loads into weft and one built here into NCCL.
 * A plugin exports one or more of ncclProfiler_v6 ... ncclProfiler_v1; the
 * newest found wins. Versions 4 to 6 are declared here, 1 to 3 (init
 * without the communicator, descriptors naming it instead) in
 * profiler_abi_v1_v3.h, which this header includes. Needs only nccl.h;
 * plugins include this and link nothing of weft.
 */
#ifndef WEFT_PROFILER_ABI_H
#define WEFT_PROFILER_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nccl.h"

#include "../plugin_log_abi.h"

typedef pid_t ncclPid_t;

// Event types (bits of the activation mask).
enum {
  ncclProfileGroup = (1 << 0),         // a launched group: parent of its collectives and p2p calls
  ncclProfileColl = (1 << 1),          // one collective
  ncclProfileP2p = (1 << 2),           // one send or receive
  ncclProfileProxyOp = (1 << 3),       // a channel's share of an operation with one peer
  ncclProfileProxyStep = (1 << 4),     // one step of a proxy operation
  ncclProfileProxyCtrl = (1 << 5),     // the proxy thread's state
  ncclProfileKernelCh = (1 << 6),      // a kernel's channel
  ncclProfileNetPlugin = (1 << 7),     // events defined by a network plugin
  ncclProfileGroupApi = (1 << 8),      // v5: ncclGroupStart .. ncclGroupEnd
  ncclProfileCollApi = (1 << 9),       // v5: the collective API call itself
  ncclProfileP2pApi = (1 << 10),       // v5: the send/receive API call itself
  ncclProfileKernelLaunch = (1 << 11),  // v5: a kernel launch
  ncclProfileCeColl = (1 << 12),        // v6: a collective run by the GPU's copy engines
  ncclProfileCeSync = (1 << 13),        // v6: a synchronisation step of one
  ncclProfileCeBatch = (1 << 14)        // v6: a batch of its copies
};

typedef enum {
  ncclProfilerProxyOpSendPosted = 0,
  ncclProfilerProxyOpSendRemFifoWait = 1,
  ncclProfilerProxyOpSendTransmitted = 2,
  ncclProfilerProxyOpSendDone = 3,
  ncclProfilerProxyOpRecvPosted = 4,
  ncclProfilerProxyOpRecvReceived = 5,
  ncclProfilerProxyOpRecvTransmitted = 6,
  ncclProfilerProxyOpRecvDone = 7,
  ncclProfilerProxyStepSendGPUWait = 8,
  ncclProfilerProxyStepSendWait = 9,
  ncclProfilerProxyStepRecvWait = 10,
  ncclProfilerProxyStepRecvFlushWait = 11,
  ncclProfilerProxyStepRecvGPUWait = 12,
  ncclProfilerProxyCtrlIdle = 13,
  ncclProfilerProxyCtrlActive = 14,
  ncclProfilerProxyCtrlSleep = 15,
  ncclProfilerProxyCtrlWakeup = 16,
  ncclProfilerProxyCtrlAppend = 17,
  ncclProfilerProxyCtrlAppendEnd = 18,
  ncclProfilerProxyOpInProgress_v4 = 19,
  ncclProfilerProxyStepSendPeerWait_v4 = 20,
  ncclProfilerNetPluginUpdate = 21,
  ncclProfilerKernelChStop = 22,
  ncclProfilerGroupStartApiStop = 23,  // v5: a GroupApi event's ncclGroupStart part is over
  ncclProfilerGroupEndApiStart = 24,   // v5: its ncclGroupEnd begins
  ncclProfilerCeCollStart = 25,        // v6: copy-engine states (NCCL itself does not record them)
  ncclProfilerCeCollComplete = 26,
  ncclProfilerCeSyncStart = 27,
  ncclProfilerCeSyncComplete = 28,
  ncclProfilerCeBatchStart = 29,
  ncclProfilerCeBatchComplete = 30
} ncclProfilerEventState_t;

typedef ncclProfilerEventState_t ncclProfilerEventState_v1_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v2_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v3_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v4_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v5_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v6_t;

// ---- Version 6 (NCCL 2.29 on): version 5 and the copy-engine events ----

typedef struct {
  uint64_t type;    // one ncclProfile* bit
  void *parentObj;  // the parent's handle, or NULL
  int rank;         // the rank reporting
  union {
    // The members version 5 has, alike in layout:
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char *func;
      size_t count;
      const char *datatype;
      int root;
      void *stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char *func;
      size_t count;
      const char *datatype;
      void *stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void *stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char *func;
      void const *sendBuff;
      void *recvBuff;
      size_t count;
      int root;
      const char *datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char *algo;
      const char *proto;
      void *parentGroup;
    } coll;
    struct {
      const char *func;
      void *buff;
      const char *datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void *parentGroup;
    } p2p;
    struct {
      ncclPid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void *data;
    } netPlugin;
    // New in version 6: a collective the copy engines run (parent: its CollApi) ...
    struct {
      uint64_t seqNumber;
      const char *func;
      void const *sendBuff;
      void *recvBuff;
      size_t count;
      int root;
      const char *datatype;
      const char *syncStrategy;  // how the ranks synchronise ("MC" multicast, "UC" unicast)
      bool intraBatchSync;
      uint32_t batchSize;
      uint32_t numBatches;
      uint32_t ceSeqNum;
      void *stream;
    } ceColl;
    // ... one of its synchronisations (parent: the CeColl) ...
    struct {
      bool isComplete;
      int nRanks;
    } ceCollSync;
    // ... and one batch of its copies (parent: the CeColl).
    struct {
      int numOps;
      size_t totalBytes;
      bool useIntraSync;
    } ceCollBatch;
  };
} ncclProfilerEventDescr_v6_t;

// ---- Version 5 (NCCL 2.28) ----

typedef struct {
  uint64_t type;    // one ncclProfile* bit
  void *parentObj;  // the parent's handle (a collective's group), or NULL
  int rank;         // the rank reporting
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char *func;
      size_t count;
      const char *datatype;
      int root;
      void *stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char *func;
      size_t count;
      const char *datatype;
      void *stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void *stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char *func;
      void const *sendBuff;
      void *recvBuff;
      size_t count;
      int root;
      const char *datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char *algo;
      const char *proto;
      void *parentGroup;
    } coll;
    struct {
      const char *func;
      void *buff;
      const char *datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void *parentGroup;
    } p2p;
    struct {
      ncclPid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void *data;
    } netPlugin;
  };
} ncclProfilerEventDescr_v5_t;

typedef union {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void *data;
  } netPlugin;
  struct {
    uint64_t pTimer;
  } kernelCh;
} ncclProfilerEventStateArgs_v5_t;

typedef struct {
  const char *name;
  // One call per communicator; the plugin sets *eActivationMask to the event types it wants.
  ncclResult_t (*init)(void **context, uint64_t commId, int *eActivationMask, const char *commName, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void *context, void **eHandle, ncclProfilerEventDescr_v5_t *eDescr);
  ncclResult_t (*stopEvent)(void *eHandle);
  ncclResult_t (*recordEventState)(void *eHandle, ncclProfilerEventState_v5_t eState,
                                   ncclProfilerEventStateArgs_v5_t *eStateArgs);
  ncclResult_t (*finalize)(void *context);
} ncclProfiler_v5_t;

// Version 6 records states with version 5's arguments (copy-engine events have none).
typedef ncclProfilerEventStateArgs_v5_t ncclProfilerEventStateArgs_v6_t;

typedef struct {
  const char *name;
  ncclResult_t (*init)(void **context, uint64_t commId, int *eActivationMask, const char *commName, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void *context, void **eHandle, ncclProfilerEventDescr_v6_t *eDescr);
  ncclResult_t (*stopEvent)(void *eHandle);
  ncclResult_t (*recordEventState)(void *eHandle, ncclProfilerEventState_v6_t eState,
                                   ncclProfilerEventStateArgs_v6_t *eStateArgs);
  ncclResult_t (*finalize)(void *context);
} ncclProfiler_v6_t;

// ---- Version 4 (NCCL 2.27) ----

typedef struct {
  uint8_t type;
  void *parentObj;
  int rank;
  union {
    struct {
      uint64_t seqNumber;
      const char *func;
      void const *sendBuff;
      void *recvBuff;
      size_t count;
      int root;
      const char *datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char *algo;
      const char *proto;
    } coll;
    struct {
      const char *func;
      void *buff;
      const char *datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
    } p2p;
    struct {
      ncclPid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void *data;
    } netPlugin;
  };
} ncclProfilerEventDescr_v4_t;

typedef union {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void *data;
  } netPlugin;
  struct {
    uint64_t pTimer;
  } kernelCh;
} ncclProfilerEventStateArgs_v4_t;

typedef struct {
  const char *name;
  ncclResult_t (*init)(void **context, int *eActivationMask, const char *commName, uint64_t commHash, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void *context, void **eHandle, ncclProfilerEventDescr_v4_t *eDescr);
  ncclResult_t (*stopEvent)(void *eHandle);
  ncclResult_t (*recordEventState)(void *eHandle, ncclProfilerEventState_v4_t eState,
                                   ncclProfilerEventStateArgs_v4_t *eStateArgs);
  ncclResult_t (*finalize)(void *context);
} ncclProfiler_v4_t;

#include "profiler_abi_v1_v3.h"

#define NCCL_PROFILER_PLUGIN_SYMBOL_V6 "ncclProfiler_v6"
#define NCCL_PROFILER_PLUGIN_SYMBOL_V5 "ncclProfiler_v5"
#define NCCL_PROFILER_PLUGIN_SYMBOL_V4 "ncclProfiler_v4"
#define NCCL_PROFILER_PLUGIN_SYMBOL_V3 "ncclProfiler_v3"
#define NCCL_PROFILER_PLUGIN_SYMBOL_V2 "ncclProfiler_v2"
#define NCCL_PROFILER_PLUGIN_SYMBOL_V1 "ncclProfiler_v1"

#endif
