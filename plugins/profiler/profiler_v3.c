/*
 * profiler_v3.c — binds an NCCL profiler plugin of ABI version 3
 * (ncclProfiler_v3, NCCL 2.26).
 *
 * Against version 4: init is told nothing of the communicator, so a Coll
 * or P2p descriptor names it (name: config.commName or NULL; commHash);
 * nChannels is nMaxChannels and a P2p event has none; a KernelCh event
 * has no timers (nor a state to record its stop time in).
 */
#include <string.h>

#include "profiler_bind.h"

static const ncclProfiler_v3_t *lib;

static ncclResult_t v3_init(void **context, int *mask, const weft_plugin_comm_t *c) {
  (void)c;
  return lib->init(context, mask);
}

static void *v3_start(const weft_profiler_t *p, ncclProfilerEventDescr_v6_t *d, const weft_prof_launch_t *l) {
  (void)l;
  ncclProfilerEventDescr_v3_t o;
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
  } else if (d->type == ncclProfileKernelCh) {
    o.kernelCh.channelId = d->kernelCh.channelId;
  }
  void *h = NULL;
  return lib->startEvent(p->ctx, &h, &o) == ncclSuccess ? h : NULL;
}

static ncclResult_t v3_stop(void *h) { return lib->stopEvent(h); }
static ncclResult_t v3_finalize(void *context) { return lib->finalize(context); }

static const weft_prof_abi_t abi = {.version = 3, .types = WEFT_PROF_TYPES_V3, .init = v3_init, .start = v3_start,
                                    .stop = v3_stop, .finalize = v3_finalize};

const weft_prof_abi_t *weft_profiler_bind_v3(const void *table, const char **name) {
  lib = table;
  *name = lib->name;
  return &abi;
}
