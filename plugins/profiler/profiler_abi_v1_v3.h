/*
 * profiler_abi_v1_v3.h — NCCL's first three profiler plugin ABIs (NCCL 2.23
 * to 2.26), declared for weft and for plugins built against weft;
 * included by profiler_abi.h, which declares what they share (event types
 * and states, ncclPid_t).
 *
 * Written from the layout of NCCL's profiler_v1.h ... profiler_v3.h. These
 * versions' init is told nothing of the communicator: a Coll or P2p
 * descriptor names it instead (name, commHash). Version 1 numbers the
 * collective, datatype, algorithm and protocol (ncclFunc_t, ncclDataType_t,
 * NCCL_ALGO_*, NCCL_PROTO_*); version 2 names them as strings; version 3
 * drops trafficBytes and adds the KernelCh and NetPlugin descriptors.
 */
#ifndef WEFT_PROFILER_ABI_V1_V3_H
#define WEFT_PROFILER_ABI_V1_V3_H

// ---- Version 3 (NCCL 2.26) ----

typedef struct {
  uint8_t type;     // one ncclProfile* bit (Group ... NetPlugin)
  void *parentObj;  // the parent's handle (a collective's group), or NULL
  int rank;
  union {
    struct {
      const char *name;   // the communicator's name (config.commName), or NULL
      uint64_t commHash;  // the communicator's hash
      uint64_t seqNumber;
      const char *func;
      void const *sendBuff;
      void *recvBuff;
      size_t count;
      int root;
      const char *datatype;
      uint8_t nMaxChannels;
      uint8_t nWarps;
      const char *algo;
      const char *proto;
    } coll;
    struct {
      const char *name;
      uint64_t commHash;
      const char *func;
      void *buff;
      const char *datatype;
      size_t count;
      int peer;
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
    } kernelCh;
    struct {
      int64_t id;
      void *data;
    } netPlugin;
  };
} ncclProfilerEventDescr_v3_t;

// ---- Version 2 (NCCL 2.24-2.25) ----

typedef struct {
  uint8_t type;  // one ncclProfile* bit (Group ... ProxyCtrl)
  void *parentObj;
  int rank;
  union {
    struct {
      const char *name;
      uint64_t commHash;
      uint64_t seqNumber;
      const char *func;
      void const *sendBuff;
      void *recvBuff;
      size_t count;
      int root;
      const char *datatype;
      size_t trafficBytes;  // NCCL's estimate of the bytes the call moves per rank
      uint8_t nMaxChannels;
      uint8_t nWarps;
      const char *algo;
      const char *proto;
    } coll;
    struct {
      const char *name;
      uint64_t commHash;
      const char *func;
      void *buff;
      const char *datatype;
      size_t count;
      int peer;
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
  };
} ncclProfilerEventDescr_v2_t;

// ---- Version 1 (NCCL 2.23) ----

typedef struct {
  uint8_t type;  // one ncclProfile* bit (Group ... ProxyCtrl)
  void *parentObj;
  int rank;
  union {
    struct {
      const char *name;
      uint64_t commHash;
      uint64_t seqNumber;
      uint8_t func;  // ncclFunc_t
      void const *sendBuff;
      void *recvBuff;
      size_t count;
      int root;
      uint8_t datatype;  // ncclDataType_t
      uint32_t op;       // ncclRedOp_t
      size_t trafficBytes;
      uint8_t nMaxChannels;
      uint8_t nWarps;
      uint8_t algo;   // NCCL_ALGO_*
      uint8_t proto;  // NCCL_PROTO_*
      int isCollnet;
      int isNvls;
    } coll;
    struct {
      const char *name;
      uint64_t commHash;
      uint8_t func;
      void *buff;
      uint8_t datatype;
      size_t count;
      int peer;
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
  };
} ncclProfilerEventDescr_v1_t;

// State arguments, alike in versions 1 to 3.
typedef union {
  struct {
    size_t transSize;
    int steps;
  } proxyOp;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
} ncclProfilerEventStateArgs_v1_t;
typedef ncclProfilerEventStateArgs_v1_t ncclProfilerEventStateArgs_v2_t;
typedef ncclProfilerEventStateArgs_v1_t ncclProfilerEventStateArgs_v3_t;

typedef struct {
  const char *name;
  ncclResult_t (*init)(void **context, int *eActivationMask);  // told nothing of the communicator
  ncclResult_t (*startEvent)(void *context, void **eHandle, ncclProfilerEventDescr_v3_t *eDescr);
  ncclResult_t (*stopEvent)(void *eHandle);
  ncclResult_t (*recordEventState)(void *eHandle, ncclProfilerEventState_v3_t eState,
                                   ncclProfilerEventStateArgs_v3_t *eStateArgs);
  ncclResult_t (*finalize)(void *context);
} ncclProfiler_v3_t;

typedef struct {
  const char *name;
  ncclResult_t (*init)(void **context, int *eActivationMask);  // told nothing of the communicator
  ncclResult_t (*startEvent)(void *context, void **eHandle, ncclProfilerEventDescr_v2_t *eDescr);
  ncclResult_t (*stopEvent)(void *eHandle);
  ncclResult_t (*recordEventState)(void *eHandle, ncclProfilerEventState_v2_t eState,
                                   ncclProfilerEventStateArgs_v2_t *eStateArgs);
  ncclResult_t (*finalize)(void *context);
} ncclProfiler_v2_t;

typedef struct {
  const char *name;
  ncclResult_t (*init)(void **context, int *eActivationMask);  // told nothing of the communicator
  ncclResult_t (*startEvent)(void *context, void **eHandle, ncclProfilerEventDescr_v1_t *eDescr);
  ncclResult_t (*stopEvent)(void *eHandle);
  ncclResult_t (*recordEventState)(void *eHandle, ncclProfilerEventState_v1_t eState,
                                   ncclProfilerEventStateArgs_v1_t *eStateArgs);
  ncclResult_t (*finalize)(void *context);
} ncclProfiler_v1_t;

#endif
