/*
 * profiler_v5.c — binds an NCCL profiler plugin of ABI version 5
 * (ncclProfiler_v5, NCCL 2.28).
 *
 * Version 6 only added members (the copy-engine descriptors) to version
 * 5's union, so a version 5 descriptor is a copy of the first bytes of
 * weft's version 6 one; the checks below hold the two layouts together.
 * Same events as version 6: weft has no copy-engine ones.
 */
#include <stddef.h>
#include <string.h>

#include "plugin_dl.h"
#include "profiler_bind.h"

#define SAME_AT(member)                                                                                  \
  _Static_assert(offsetof(ncclProfilerEventDescr_v5_t, member) == offsetof(ncclProfilerEventDescr_v6_t, member), \
                 "v5 and v6 differ at " #member)
SAME_AT(type);
SAME_AT(parentObj);
SAME_AT(rank);
SAME_AT(groupApi.groupDepth);
SAME_AT(collApi.graphCaptured);
SAME_AT(p2pApi.graphCaptured);
SAME_AT(coll.parentGroup);
SAME_AT(p2p.parentGroup);
SAME_AT(proxyOp.isSend);
SAME_AT(proxyStep.step);
SAME_AT(kernelCh.pTimer);
_Static_assert(sizeof(ncclProfilerEventDescr_v5_t) <= sizeof(ncclProfilerEventDescr_v6_t), "v5 is v6's prefix");

static const ncclProfiler_v5_t *lib;

static ncclResult_t v5_init(void **context, int *mask, const weft_plugin_comm_t *c) {
  return lib->init(context, c->id_hash, mask, c->name, c->nhosts, c->nranks, c->rank, weft_plugin_logger);
}

static void *v5_start(const weft_profiler_t *p, ncclProfilerEventDescr_v6_t *d, const weft_prof_launch_t *l) {
  (void)l;
  ncclProfilerEventDescr_v5_t o;
  memcpy(&o, d, sizeof(o));
  void *h = NULL;
  return lib->startEvent(p->ctx, &h, &o) == ncclSuccess ? h : NULL;
}

static ncclResult_t v5_stop(void *h) { return lib->stopEvent(h); }
static ncclResult_t v5_record(void *h, ncclProfilerEventState_t s, ncclProfilerEventStateArgs_v6_t *a) {
  return lib->recordEventState(h, s, a);
}
static ncclResult_t v5_finalize(void *context) { return lib->finalize(context); }

static const weft_prof_abi_t abi = {.version = 5, .types = WEFT_PROF_TYPES_V5, .init = v5_init, .start = v5_start,
                                    .stop = v5_stop, .record = v5_record, .finalize = v5_finalize};

const weft_prof_abi_t *weft_profiler_bind_v5(const void *table, const char **name) {
  lib = table;
  *name = lib->name;
  return &abi;
}
