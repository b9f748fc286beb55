/*
 * profiler_bind.h — the seam between weft's profiler events
 * (profiler_plugin.c) and the ABI versions a plugin may export
 * (profiler_v1.c ... profiler_v6.c).
 *
 * weft describes every event in the newest layout, version 6's; the
 * binding of the version the plugin was loaded at turns that into its own
 * descriptor and calls the plugin. Only the event types in a binding's
 * `types` reach it. One library is loaded per process, so its binding is
 * one too; each communicator's state is a weft_profiler_t.
 */
#ifndef WEFT_PROFILER_BIND_H
#define WEFT_PROFILER_BIND_H

#include "hooks.h"
#include "profiler_abi.h"

typedef struct weft_profiler weft_profiler_t;

typedef struct {
  int version;  // 1 ... 6
  int types;    // the ncclProfile* event types weft reports at this version
  // Calls the plugin's init for one communicator.
  ncclResult_t (*init)(void **context, int *mask, const weft_plugin_comm_t *c);
  // Starts an event: d in version 6's layout, l the operation of a Coll or
  // P2p event (NULL for the others). Returns the plugin's handle, or NULL.
  void *(*start)(const weft_profiler_t *p, ncclProfilerEventDescr_v6_t *d, const weft_prof_launch_t *l);
  ncclResult_t (*stop)(void *handle);
  // Records a state: the GroupApi states (versions 5 on; args NULL) and
  // ncclProfilerKernelChStop (versions 4 on; args->kernelCh.pTimer). NULL
  // where the version records neither.
  ncclResult_t (*record)(void *handle, ncclProfilerEventState_t state, ncclProfilerEventStateArgs_v6_t *args);
  ncclResult_t (*finalize)(void *context);
} weft_prof_abi_t;

struct weft_profiler {
  const weft_prof_abi_t *abi;
  void *ctx;               // the plugin's context for this communicator
  int mask;                // its eActivationMask (the plugin may change it at any time)
  int rank, nranks;
  uint64_t comm_hash;
  const char *comm_name;   // NULL without one
  uint64_t seq[WEFT_NUM_COLLS];  // the collectives launched so far, per function (a Coll's seqNumber)
};

// The events weft reports: Group, Coll, P2p, ProxyOp, ProxyStep; from
// version 3 on KernelCh (with its timer from version 4); from version 5 on
// the GroupApi, CollApi and P2pApi events.
#define WEFT_PROF_TYPES_V1 \
  (ncclProfileGroup | ncclProfileColl | ncclProfileP2p | ncclProfileProxyOp | ncclProfileProxyStep)
#define WEFT_PROF_TYPES_V3 (WEFT_PROF_TYPES_V1 | ncclProfileKernelCh)
#define WEFT_PROF_TYPES_V5 (WEFT_PROF_TYPES_V3 | ncclProfileGroupApi | ncclProfileCollApi | ncclProfileP2pApi)

// Each returns the binding of the plugin table `table` (the exported
// symbol of its version) and sets *name to the plugin's name.
const weft_prof_abi_t *weft_profiler_bind_v6(const void *table, const char **name);
const weft_prof_abi_t *weft_profiler_bind_v5(const void *table, const char **name);
const weft_prof_abi_t *weft_profiler_bind_v4(const void *table, const char **name);
const weft_prof_abi_t *weft_profiler_bind_v3(const void *table, const char **name);
const weft_prof_abi_t *weft_profiler_bind_v2(const void *table, const char **name);
const weft_prof_abi_t *weft_profiler_bind_v1(const void *table, const char **name);

// Fills the profiler's entries of weft_plugin_hooks (profiler_events.c)
// for the plugin loaded at `loaded`.
void weft_profiler_events_install(const weft_prof_abi_t *loaded);

// Versions 1 to 4: a ProxyOp descriptor alike in layout to version 6's.
#define WEFT_PROF_COPY_PROXY_OP(o, d)                  \
  do {                                              \
    (o).proxyOp.pid = (d)->proxyOp.pid;             \
    (o).proxyOp.channelId = (d)->proxyOp.channelId; \
    (o).proxyOp.peer = (d)->proxyOp.peer;           \
    (o).proxyOp.nSteps = (d)->proxyOp.nSteps;       \
    (o).proxyOp.chunkSize = (d)->proxyOp.chunkSize; \
    (o).proxyOp.isSend = (d)->proxyOp.isSend;       \
  } while (0)

// NCCL's count of bytes a call moves per byte of its operand (versions 1
// and 2's trafficBytes): twice for AllReduce, once per rank for AllGather
// and ReduceScatter, once otherwise.
static inline size_t weft_prof_traffic_bytes(const weft_prof_launch_t *l, int nranks) {
  size_t per = l->coll == WEFT_COLL_ALLREDUCE                                             ? 2
               : l->coll == WEFT_COLL_ALLGATHER || l->coll == WEFT_COLL_REDUCESCATTER ? (size_t)nranks
                                                                                        : 1;
  return l->count * l->esize * per;
}

#endif
