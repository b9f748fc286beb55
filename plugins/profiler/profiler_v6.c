/*
 * profiler_v6.c — binds an NCCL profiler plugin of ABI version 6
 * (ncclProfiler_v6, NCCL 2.29 on): weft's own layout, handed over as is.
 *
 * Version 6 adds the copy-engine events (CeColl, CeSync, CeBatch): NCCL's
 * collectives run by the GPU's copy engines. weft has none (its
 * collectives are run by the CPU over host memory), so it reports none;
 * everything else is version 5's.
 */
#include "plugin_dl.h"
#include "profiler_bind.h"

static const ncclProfiler_v6_t *lib;

static ncclResult_t v6_init(void **context, int *mask, const weft_plugin_comm_t *c) {
  return lib->init(context, c->id_hash, mask, c->name, c->nhosts, c->nranks, c->rank, weft_plugin_logger);
}

static void *v6_start(const weft_profiler_t *p, ncclProfilerEventDescr_v6_t *d, const weft_prof_launch_t *l) {
  (void)l;
  void *h = NULL;
  return lib->startEvent(p->ctx, &h, d) == ncclSuccess ? h : NULL;
}

static ncclResult_t v6_stop(void *h) { return lib->stopEvent(h); }
static ncclResult_t v6_record(void *h, ncclProfilerEventState_t s, ncclProfilerEventStateArgs_v6_t *a) {
  return lib->recordEventState(h, s, a);
}
static ncclResult_t v6_finalize(void *context) { return lib->finalize(context); }

static const weft_prof_abi_t abi = {.version = 6, .types = WEFT_PROF_TYPES_V5, .init = v6_init, .start = v6_start,
                                    .stop = v6_stop, .record = v6_record, .finalize = v6_finalize};

const weft_prof_abi_t *weft_profiler_bind_v6(const void *table, const char **name) {
  lib = table;
  *name = lib->name;
  return &abi;
}
