/*
 * profiler_v2.c — binds an NCCL profiler plugin of ABI version 2
 * (ncclProfiler_v2, NCCL 2.24-2.25).
 *
 * Version 3's descriptors and a Coll event's trafficBytes: NCCL's count of
 * the bytes the call moves (the operand's bytes, twice for AllReduce, once
 * per rank for AllGather and ReduceScatter).
 */
#include <string.h>

#include "profiler_bind.h"

static const ncclProfiler_v2_t *lib;

static ncclResult_t v2_init(void **context, int *mask, const weft_plugin_comm_t *c) {
  (void)c;
  return lib->init(context, mask);
}

static void *v2_start(const weft_profiler_t *p, ncclProfilerEventDescr_v6_t *d, const weft_prof_launch_t *l) {
  ncclProfilerEventDescr_v2_t o;
  memset(&o, 0, sizeof(o));
  o.type = (uint8_t)d->type;
  o.parentObj = d->parentObj;
  o.rank = d->rank;
  if (d->type == ncclProfileColl) {
    o.parentObj = d->coll.parentGroup;
    o.coll.name = p->comm_name;
    o.coll.commHash = p->comm_hash;
    o.coll.seqNumber = d->coll.seqNumber;
    o.coll.func = d->coll.func;
    o.coll.sendBuff = d->coll.sendBuff;
    o.coll.recvBuff = d->coll.recvBuff;
    o.coll.count = d->coll.count;
    o.coll.root = d->coll.root;
    o.coll.datatype = d->coll.datatype;
    o.coll.trafficBytes = weft_prof_traffic_bytes(l, p->nranks);
    o.coll.nMaxChannels = d->coll.nChannels;
    o.coll.nWarps = d->coll.nWarps;
    o.coll.algo = d->coll.algo;
    o.coll.proto = d->coll.proto;
  } else if (d->type == ncclProfileP2p) {
    o.parentObj = d->p2p.parentGroup;
    o.p2p.name = p->comm_name;
    o.p2p.commHash = p->comm_hash;
    o.p2p.func = d->p2p.func;
    o.p2p.buff = d->p2p.buff;
    o.p2p.datatype = d->p2p.datatype;
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

static ncclResult_t v2_stop(void *h) { return lib->stopEvent(h); }
static ncclResult_t v2_finalize(void *context) { return lib->finalize(context); }

static const weft_prof_abi_t abi = {.version = 2, .types = WEFT_PROF_TYPES_V1, .init = v2_init, .start = v2_start,
                                    .stop = v2_stop, .finalize = v2_finalize};

const weft_prof_abi_t *weft_profiler_bind_v2(const void *table, const char **name) {
  lib = table;
  *name = lib->name;
  return &abi;
}
