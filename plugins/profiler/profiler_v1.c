/*
 * profiler_v1.c — binds an NCCL profiler plugin of ABI version 1
 * (ncclProfiler_v1, NCCL 2.23).
 *
 * Version 2's events with numbers for names: func is NCCL's ncclFunc_t
 * (AlltoAll, Scatter and Gather, which NCCL 2.23 lacked, get the numbers
 * NCCL gave them later: 8, 9, 10), datatype the ncclDataType_t, op the
 * call's ncclRedOp_t (0 for calls without a reduction), algo the NCCL
 * algorithm the tuner plugin's table places weft's algorithm at
 * (docs/plugins.md; NCCL_ALGO_UNDEF, 255 as a byte, for weft's direct
 * AlltoAll, Gather and Scatter, which have none), proto SIMPLE, and
 * isCollnet, isNvls 0 (weft has neither).
 */
#include <string.h>

#include "profiler_bind.h"

static const ncclProfiler_v1_t *lib;

static uint8_t func_number(weft_coll_t c) {
  switch (c) {
    case WEFT_COLL_ALLREDUCE: return ncclFuncAllReduce;
    case WEFT_COLL_BROADCAST: return ncclFuncBroadcast;
    case WEFT_COLL_REDUCE: return ncclFuncReduce;
    case WEFT_COLL_ALLGATHER: return ncclFuncAllGather;
    case WEFT_COLL_REDUCESCATTER: return ncclFuncReduceScatter;
    case WEFT_COLL_ALLTOALL: return ncclFuncAlltoAll;
    case WEFT_COLL_GATHER: return ncclFuncGather;
    case WEFT_COLL_SCATTER: return ncclFuncScatter;
    case WEFT_COLL_SEND: return ncclFuncSend;
    case WEFT_COLL_RECV: return ncclFuncRecv;
    default: return 0xff;  // not a call weft reports
  }
}

static uint8_t algo_number(weft_algo_t a) {
  switch (a) {
    case WEFT_ALGO_RING:
    case WEFT_ALGO_CHAIN: return NCCL_ALGO_RING;
    case WEFT_ALGO_TREE: return NCCL_ALGO_TREE;
    case WEFT_ALGO_ONESHOT: return NCCL_ALGO_COLLNET_DIRECT;
    case WEFT_ALGO_READ: return NCCL_ALGO_NVLS;
    case WEFT_ALGO_HIER:
    case WEFT_ALGO_NUMA: return NCCL_ALGO_NVLS_TREE;
    case WEFT_ALGO_RECURSIVE:
    case WEFT_ALGO_RABENSEIFNER: return NCCL_ALGO_PAT;
    default: return (uint8_t)NCCL_ALGO_UNDEF;
  }
}

static ncclResult_t v1_init(void **context, int *mask, const weft_plugin_comm_t *c) {
  (void)c;
  return lib->init(context, mask);
}

static void *v1_start(const weft_profiler_t *p, ncclProfilerEventDescr_v6_t *d, const weft_prof_launch_t *l) {
  ncclProfilerEventDescr_v1_t o;
  memset(&o, 0, sizeof(o));
  o.type = (uint8_t)d->type;
  o.parentObj = d->parentObj;
  o.rank = d->rank;
  if (d->type == ncclProfileColl) {
    o.parentObj = d->coll.parentGroup;
    o.coll.name = p->comm_name;
    o.coll.commHash = p->comm_hash;
    o.coll.seqNumber = d->coll.seqNumber;
    o.coll.func = func_number(l->coll);
    o.coll.sendBuff = d->coll.sendBuff;
    o.coll.recvBuff = d->coll.recvBuff;
    o.coll.count = d->coll.count;
    o.coll.root = d->coll.root;
    o.coll.datatype = (uint8_t)l->dtype;
    o.coll.op = (uint32_t)l->redop;
    o.coll.trafficBytes = weft_prof_traffic_bytes(l, p->nranks);
    o.coll.nMaxChannels = d->coll.nChannels;
    o.coll.nWarps = d->coll.nWarps;
    o.coll.algo = algo_number(l->algo);
    o.coll.proto = NCCL_PROTO_SIMPLE;
  } else if (d->type == ncclProfileP2p) {
    o.parentObj = d->p2p.parentGroup;
    o.p2p.name = p->comm_name;
    o.p2p.commHash = p->comm_hash;
    o.p2p.func = func_number(l->coll);
    o.p2p.buff = d->p2p.buff;
    o.p2p.datatype = (uint8_t)l->dtype;
    o.p2p.count = d->p2p.count;
    o.p2p.peer = d->p2p.peer;
  } else if (d->type == ncclProfileProxyOp) {
    WEFT_PROF_COPY_PROXY_OP(o, d);
  } else if (d->type == ncclProfileProxyStep) {
    o.proxyStep.step = d->proxyStep.step;
  }
  void *h = NULL;
  return lib->startEvent(p->ctx, &h, &o) == ncclSuccess ? h : NULL;
}

static ncclResult_t v1_stop(void *h) { return lib->stopEvent(h); }
static ncclResult_t v1_finalize(void *context) { return lib->finalize(context); }

static const weft_prof_abi_t abi = {.version = 1, .types = WEFT_PROF_TYPES_V1, .init = v1_init, .start = v1_start,
                                    .stop = v1_stop, .finalize = v1_finalize};

const weft_prof_abi_t *weft_profiler_bind_v1(const void *table, const char **name) {
  lib = table;
  *name = lib->name;
  return &abi;
}
