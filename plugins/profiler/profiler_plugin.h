/*
 * profiler_plugin.h — NCCL profiler plugins in weft (NCCL_PROFILER_PLUGIN).
 *
 * The library is opened once per process and the newest of its
 * ncclProfiler_v6 ... _v1 initialised once per communicator, which then
 * reports (profiler_events.c): a Group event per communicator for each
 * launched group, parent of a Coll or P2p event per operation (started at
 * launch, stopped when the operation finishes or fails), with a ProxyOp
 * event per lane and a ProxyStep per step under it when asked for; and,
 * from version 5 on, a GroupApi event per outermost group and a CollApi /
 * P2pApi event around each call, the API event being the parent of the
 * operation's Coll / P2p. Each version gets its own descriptor layout
 * (profiler_v1.c ... profiler_v6.c). An event starts when its type or one
 * below it is in the plugin's activation mask, as in NCCL. The core reaches
 * it through the profiler's entries of weft_plugin_hooks (hooks.h), which
 * stay NULL while no profiler is loaded: every hook site is then one branch.
 */
#ifndef WEFT_PROFILER_PLUGIN_H
#define WEFT_PROFILER_PLUGIN_H

#include "hooks.h"

// Loads the library (first time; fills the profiler's hooks) and returns
// its state for this communicator, or NULL.
void *weft_profiler_comm_init(const weft_plugin_comm_t *c);
void weft_profiler_comm_free(void *prof);

#endif
