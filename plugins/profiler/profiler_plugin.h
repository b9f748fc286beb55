/*
 * profiler_plugin.h — NCCL profiler plugins in weft (NCCL_PROFILER_PLUGIN).
 *
 * The library is opened once per process and its ncclProfiler_v5 (else
 * _v4) initialised once per communicator, which then reports: a Group event
 * per communicator for each launched group, parent of a Coll or P2p event
 * per operation (started at launch, stopped when the operation finishes or
 * fails), with a ProxyOp event per lane and a ProxyStep per step under it
 * when asked for; and, to v5 plugins, a CollApi / P2pApi event around each
 * collective or send/receive call. Only the types in the plugin's
 * activation mask are reported (Group whenever Group, Coll or P2p is on, as
 * NCCL does: it is their parent). With no plugin loaded every hook is one
 * branch: on weft_profiler_active (weft_profiler_on), or on the operation's
 * `profiled` flag.
 */
#ifndef WEFT_PROFILER_PLUGIN_H
#define WEFT_PROFILER_PLUGIN_H

#include <stdatomic.h>

#include "comm.h"
#include "engine.h"

// 1 once a profiler library is loaded in this process (weft_profiler_on() reads it).
extern _Atomic int weft_profiler_active;
static inline int weft_profiler_on(void) {
  return __builtin_expect(atomic_load_explicit(&weft_profiler_active, memory_order_relaxed), 0);
}

void weft_profiler_comm_init(struct ncclComm *comm);  // sets comm->prof, or leaves it NULL
void weft_profiler_comm_free(struct ncclComm *comm);

// A group's operations, once launched (seq known), in call order: call
// op_start for each (first = 1 for the first), then launch_end.
void weft_profiler_op_start(weft_op_t *op, int first);
void weft_profiler_launch_end(void);
// ProxyOp / ProxyStep events (when the plugin asks for them, op->prof_lanes
// is set): a step of lane `lane` is about to be tried (done = 0; starts its
// event once) or has finished (done = 1).
void weft_profiler_step(weft_op_t *op, uint32_t lane, int done);
// The operation finished, failed or is dropped (idempotent; op->profiled set).
void weft_profiler_op_stop(weft_op_t *op);

// v5 API events around a collective / send / receive call; comm is not yet
// validated. Returns the event to hand to api_stop, or NULL.
void *weft_profiler_api_start(ncclComm_t comm, weft_coll_t coll, size_t count, ncclDataType_t dtype, int root,
                              void *stream);
void weft_profiler_api_stop(ncclComm_t comm, void *event);

#endif
