/*
 * profiler_v4.c — binds an NCCL profiler plugin of ABI version 4
 * (ncclProfiler_v4, NCCL 2.27).
 *
 * Against version 5: no API events (GroupApi, CollApi, P2pApi), the event
 * type is one byte, init takes the communicator's name before its hash,
 * and a Coll or P2p event's parent is its Group (version 5 moved that to
 * parentGroup and made the parent the API event). Its KernelCh events
 * carry their timers, as version 5's.
 */
#include <string.h>

#include "plugin_dl.h"
#include "profiler_bind.h"

static const ncclProfiler_v4_t *lib;

static ncclResult_t v4_init(void **context, int *mask, const weft_plugin_comm_t *c) {
  return lib->init(context, mask, c->name, c->id_hash, c->nhosts, c->nranks, c->rank, weft_plugin_logger);
}

static void *v4_start(const weft_profiler_t *p, ncclProfilerEventDescr_v6_t *d, const weft_prof_launch_t *l) {
  (void)l;
  ncclProfilerEventDescr_v4_t o;
  memset(&o, 0, sizeof(o));
  o.type = (uint8_t)d->type;
  o.parentObj = d->parentObj;
  o.rank = d->rank;
  if (d->type == ncclProfileColl) {
    o.parentObj = d->coll.parentGroup;
    o.coll.seqNumber = d->coll.seqNumber;
    o.coll.func = d->coll.func;
    o.coll.sendBuff = d->coll.sendBuff;
    o.coll.recvBuff = d->coll.recvBuff;
    o.coll.count = d->coll.count;
    o.coll.root = d->coll.root;
    o.coll.datatype = d->coll.datatype;
    o.coll.nChannels = d->coll.nChannels;
    o.coll.nWarps = d->coll.nWarps;
    o.coll.algo = d->coll.algo;
    o.coll.proto = d->coll.proto;
  } else if (d->type == ncclProfileP2p) {
    o.parentObj = d->p2p.parentGroup;
    o.p2p.func = d->p2p.func;
    o.p2p.buff = d->p2p.buff;
    o.p2p.datatype = d->p2p.datatype;
    o.p2p.count = d->p2p.count;
    o.p2p.peer = d->p2p.peer;
    o.p2p.nChannels = d->p2p.nChannels;
  } else if (d->type == ncclProfileProxyOp) {
    WEFT_PROF_COPY_PROXY_OP(o, d);
  } else if (d->type == ncclProfileProxyStep) {
    o.proxyStep.step = d->proxyStep.step;
  } else if (d->type == ncclProfileKernelCh) {
    o.kernelCh.channelId = d->kernelCh.channelId;
    o.kernelCh.pTimer = d->kernelCh.pTimer;
  }
  void *h = NULL;
  return lib->startEvent(p->ctx, &h, &o) == ncclSuccess ? h : NULL;
}

static ncclResult_t v4_stop(void *h) { return lib->stopEvent(h); }

// Only KernelChStop is recorded at version 4 (its arguments: version 5's, laid out alike).
static ncclResult_t v4_record(void *h, ncclProfilerEventState_t s, ncclProfilerEventStateArgs_v6_t *a) {
  ncclProfilerEventStateArgs_v4_t o;
  memset(&o, 0, sizeof(o));
  if (a != NULL) o.kernelCh.pTimer = a->kernelCh.pTimer;
  return lib->recordEventState(h, s, &o);
}
static ncclResult_t v4_finalize(void *context) { return lib->finalize(context); }

static const weft_prof_abi_t abi = {.version = 4, .types = WEFT_PROF_TYPES_V3, .init = v4_init, .start = v4_start,
                                    .stop = v4_stop, .record = v4_record, .finalize = v4_finalize};

const weft_prof_abi_t *weft_profiler_bind_v4(const void *table, const char **name) {
  lib = table;
  *name = lib->name;
  return &abi;
}
