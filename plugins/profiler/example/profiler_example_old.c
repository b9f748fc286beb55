/*
 * profiler_example_old.c — the example profiler's entry points for ABI
 * versions 5 to 1 (ncclProfiler_v5 ... _v1): each descriptor is read into
 * version 6's layout for profiler_example.c, and what an old version adds
 * (versions 1 to 3 name the communicator in a Coll or P2p descriptor;
 * versions 1 and 2 give trafficBytes; version 1 numbers the call, the
 * datatype, the reduction, the algorithm and the protocol) becomes extra
 * arguments of the event. Version 1's numbers are written as NCCL's names.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "profiler_example.h"

// Whether this build exports version v (profiler_example.c: -DWEFT_EXAMPLE_ONLY_V).
#if defined(WEFT_EXAMPLE_ONLY_V)
#define EXPORTS(v) (WEFT_EXAMPLE_ONLY_V == (v))
#else
#define EXPORTS(v) 1
#endif
#define EXPORTED __attribute__((visibility("default")))

static const char *const func_names[] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce", "SendRecv",
                                         "Send",      "Recv",   "AlltoAll",  "Scatter",       "Gather"};
static const char *const type_names[] = {"ncclInt8",    "ncclUint8",   "ncclInt32",   "ncclUint32",
                                         "ncclInt64",   "ncclUint64",  "ncclFloat16", "ncclFloat32",
                                         "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
static const char *const algo_names[NCCL_NUM_ALGORITHMS] = {"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN",
                                                            "NVLS", "NVLS_TREE", "PAT"};
static const char *const proto_names[NCCL_NUM_PROTOCOLS] = {"LL", "LL128", "SIMPLE"};
#define NAME_OF(table, i) ((size_t)(i) < sizeof(table) / sizeof(table[0]) ? table[i] : "unknown")

// Versions 1 to 4 share the ProxyOp and ProxyStep descriptors.
#define READ_PROXY(n, o)                              \
  do {                                                \
    if ((o)->type == ncclProfileProxyOp) {            \
      (n).proxyOp.pid = (o)->proxyOp.pid;             \
      (n).proxyOp.channelId = (o)->proxyOp.channelId; \
      (n).proxyOp.peer = (o)->proxyOp.peer;           \
      (n).proxyOp.nSteps = (o)->proxyOp.nSteps;       \
      (n).proxyOp.chunkSize = (o)->proxyOp.chunkSize; \
      (n).proxyOp.isSend = (o)->proxyOp.isSend;       \
    } else if ((o)->type == ncclProfileProxyStep) {   \
      (n).proxyStep.step = (o)->proxyStep.step;       \
    }                                                 \
  } while (0)

static void read_head(ncclProfilerEventDescr_v6_t *n, uint64_t type, void *parent, int rank) {
  memset(n, 0, sizeof(*n));
  n->type = type;
  n->parentObj = parent;
  n->rank = rank;
}

// The communicator as a version 1 to 3 descriptor names it.
static void comm_args(char *out, size_t cap, const char *name, uint64_t hash) {
  snprintf(out, cap, ",\"commHash\":\"%016" PRIx64 "\",\"commName\":\"%s\"", hash, name != NULL ? name : "");
}

/* ---------- version 5: version 6 without the copy-engine events ---------- */

static ncclResult_t init_v5(void **context, uint64_t commId, int *eActivationMask, const char *commName, int nNodes,
                            int nranks, int rank, ncclDebugLogger_t logfn) {
  (void)nNodes;
  return example_setup(context, 5, commId, 1, rank, nranks, commName, eActivationMask, logfn);
}

static ncclResult_t start_v5(void *context, void **eHandle, ncclProfilerEventDescr_v5_t *d) {
  ncclProfilerEventDescr_v6_t n;
  memset(&n, 0, sizeof(n));
  memcpy(&n, d, sizeof(*d));  // version 6 only added union members
  return example_start(context, eHandle, &n, "");
}

static ncclResult_t record_v5(void *eHandle, ncclProfilerEventState_v5_t s, ncclProfilerEventStateArgs_v5_t *a) {
  return example_record(eHandle, s, a != NULL ? a->kernelCh.pTimer : 0);
}

/* ---------- version 4 ---------- */

static ncclResult_t init_v4(void **context, int *eActivationMask, const char *commName, uint64_t commHash,
                            int nNodes, int nranks, int rank, ncclDebugLogger_t logfn) {
  (void)nNodes;
  return example_setup(context, 4, commHash, 1, rank, nranks, commName, eActivationMask, logfn);
}

static ncclResult_t start_v4(void *context, void **eHandle, ncclProfilerEventDescr_v4_t *d) {
  ncclProfilerEventDescr_v6_t n;
  read_head(&n, d->type, d->parentObj, d->rank);
  if (d->type == ncclProfileColl) {
    n.coll.seqNumber = d->coll.seqNumber;
    n.coll.func = d->coll.func;
    n.coll.count = d->coll.count;
    n.coll.root = d->coll.root;
    n.coll.datatype = d->coll.datatype;
    n.coll.algo = d->coll.algo;
    n.coll.proto = d->coll.proto;
    n.coll.nChannels = d->coll.nChannels;
  } else if (d->type == ncclProfileP2p) {
    n.p2p.func = d->p2p.func;
    n.p2p.count = d->p2p.count;
    n.p2p.peer = d->p2p.peer;
    n.p2p.datatype = d->p2p.datatype;
    n.p2p.nChannels = d->p2p.nChannels;
  } else if (d->type == ncclProfileKernelCh) {
    n.kernelCh.channelId = d->kernelCh.channelId;
    n.kernelCh.pTimer = d->kernelCh.pTimer;
  }
  READ_PROXY(n, d);
  return example_start(context, eHandle, &n, "");
}

static ncclResult_t record_v4(void *eHandle, ncclProfilerEventState_v4_t s, ncclProfilerEventStateArgs_v4_t *a) {
  return example_record(eHandle, s, a != NULL ? a->kernelCh.pTimer : 0);
}

/* ---------- versions 3 and 2: strings, and the communicator in the descriptor ---------- */

static ncclResult_t init_v3(void **context, int *eActivationMask) {
  return example_setup(context, 3, 0, 0, -1, -1, NULL, eActivationMask, NULL);
}

static ncclResult_t start_v3(void *context, void **eHandle, ncclProfilerEventDescr_v3_t *d) {
  ncclProfilerEventDescr_v6_t n;
  char extra[256] = "";
  read_head(&n, d->type, d->parentObj, d->rank);
  if (d->type == ncclProfileColl) {
    n.coll.seqNumber = d->coll.seqNumber;
    n.coll.func = d->coll.func;
    n.coll.count = d->coll.count;
    n.coll.root = d->coll.root;
    n.coll.datatype = d->coll.datatype;
    n.coll.algo = d->coll.algo;
    n.coll.proto = d->coll.proto;
    n.coll.nChannels = d->coll.nMaxChannels;
    comm_args(extra, sizeof(extra), d->coll.name, d->coll.commHash);
  } else if (d->type == ncclProfileP2p) {
    n.p2p.func = d->p2p.func;
    n.p2p.count = d->p2p.count;
    n.p2p.peer = d->p2p.peer;
    n.p2p.datatype = d->p2p.datatype;
    comm_args(extra, sizeof(extra), d->p2p.name, d->p2p.commHash);
  } else if (d->type == ncclProfileKernelCh) {  // no timers before version 4
    n.kernelCh.channelId = d->kernelCh.channelId;
  }
  READ_PROXY(n, d);
  return example_start(context, eHandle, &n, extra);
}

static ncclResult_t init_v2(void **context, int *eActivationMask) {
  return example_setup(context, 2, 0, 0, -1, -1, NULL, eActivationMask, NULL);
}

static ncclResult_t start_v2(void *context, void **eHandle, ncclProfilerEventDescr_v2_t *d) {
  ncclProfilerEventDescr_v6_t n;
  char extra[256] = "";
  read_head(&n, d->type, d->parentObj, d->rank);
  if (d->type == ncclProfileColl) {
    n.coll.seqNumber = d->coll.seqNumber;
    n.coll.func = d->coll.func;
    n.coll.count = d->coll.count;
    n.coll.root = d->coll.root;
    n.coll.datatype = d->coll.datatype;
    n.coll.algo = d->coll.algo;
    n.coll.proto = d->coll.proto;
    n.coll.nChannels = d->coll.nMaxChannels;
    comm_args(extra, sizeof(extra), d->coll.name, d->coll.commHash);
    size_t at = strlen(extra);
    snprintf(extra + at, sizeof(extra) - at, ",\"trafficBytes\":%zu", d->coll.trafficBytes);
  } else if (d->type == ncclProfileP2p) {
    n.p2p.func = d->p2p.func;
    n.p2p.count = d->p2p.count;
    n.p2p.peer = d->p2p.peer;
    n.p2p.datatype = d->p2p.datatype;
    comm_args(extra, sizeof(extra), d->p2p.name, d->p2p.commHash);
  }
  READ_PROXY(n, d);
  return example_start(context, eHandle, &n, extra);
}

/* ---------- version 1: numbers ---------- */

static ncclResult_t init_v1(void **context, int *eActivationMask) {
  return example_setup(context, 1, 0, 0, -1, -1, NULL, eActivationMask, NULL);
}

static ncclResult_t start_v1(void *context, void **eHandle, ncclProfilerEventDescr_v1_t *d) {
  ncclProfilerEventDescr_v6_t n;
  char extra[320] = "";
  read_head(&n, d->type, d->parentObj, d->rank);
  if (d->type == ncclProfileColl) {
    n.coll.seqNumber = d->coll.seqNumber;
    n.coll.func = NAME_OF(func_names, d->coll.func);
    n.coll.count = d->coll.count;
    n.coll.root = d->coll.root;
    n.coll.datatype = NAME_OF(type_names, d->coll.datatype);
    n.coll.algo = NAME_OF(algo_names, d->coll.algo);
    n.coll.proto = NAME_OF(proto_names, d->coll.proto);
    n.coll.nChannels = d->coll.nMaxChannels;
    comm_args(extra, sizeof(extra), d->coll.name, d->coll.commHash);
    size_t at = strlen(extra);
    snprintf(extra + at, sizeof(extra) - at, ",\"trafficBytes\":%zu,\"op\":%u,\"isCollnet\":%d,\"isNvls\":%d",
             d->coll.trafficBytes, (unsigned)d->coll.op, d->coll.isCollnet, d->coll.isNvls);
  } else if (d->type == ncclProfileP2p) {
    n.p2p.func = NAME_OF(func_names, d->p2p.func);
    n.p2p.count = d->p2p.count;
    n.p2p.peer = d->p2p.peer;
    n.p2p.datatype = NAME_OF(type_names, d->p2p.datatype);
    comm_args(extra, sizeof(extra), d->p2p.name, d->p2p.commHash);
  }
  READ_PROXY(n, d);
  return example_start(context, eHandle, &n, extra);
}

// Versions 1 to 3 keep no state this example reads.
static ncclResult_t record_none(void *eHandle, ncclProfilerEventState_t s, ncclProfilerEventStateArgs_v1_t *a) {
  (void)eHandle, (void)s, (void)a;
  return ncclSuccess;
}

#define TABLE(v, rec)                                                                                         \
  {.name = "weft-example-trace", .init = init_v##v, .startEvent = start_v##v, .stopEvent = example_stop,       \
   .recordEventState = rec, .finalize = example_finish}

#if EXPORTS(5)
EXPORTED const ncclProfiler_v5_t ncclProfiler_v5 = TABLE(5, record_v5);
#else
static const ncclProfiler_v5_t unused_v5 __attribute__((unused)) = TABLE(5, record_v5);
#endif
#if EXPORTS(4)
EXPORTED const ncclProfiler_v4_t ncclProfiler_v4 = TABLE(4, record_v4);
#else
static const ncclProfiler_v4_t unused_v4 __attribute__((unused)) = TABLE(4, record_v4);
#endif
#if EXPORTS(3)
EXPORTED const ncclProfiler_v3_t ncclProfiler_v3 = TABLE(3, record_none);
#else
static const ncclProfiler_v3_t unused_v3 __attribute__((unused)) = TABLE(3, record_none);
#endif
#if EXPORTS(2)
EXPORTED const ncclProfiler_v2_t ncclProfiler_v2 = TABLE(2, record_none);
#else
static const ncclProfiler_v2_t unused_v2 __attribute__((unused)) = TABLE(2, record_none);
#endif
#if EXPORTS(1)
EXPORTED const ncclProfiler_v1_t ncclProfiler_v1 = TABLE(1, record_none);
#else
static const ncclProfiler_v1_t unused_v1 __attribute__((unused)) = TABLE(1, record_none);
#endif
