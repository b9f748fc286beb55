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
 * NCCL does: it is their parent). The core reaches it through the
 * profiler's entries of weft_plugin_hooks (hooks.h), which stay NULL while
 * no profiler is loaded: every hook site is then one branch.
 */
#ifndef WEFT_PROFILER_PLUGIN_H
#define WEFT_PROFILER_PLUGIN_H

#include "hooks.h"

// Loads the library (first time; fills the profiler's hooks) and returns
// its state for this communicator, or NULL.
void *weft_profiler_comm_init(const weft_plugin_comm_t *c);
void weft_profiler_comm_free(void *prof);

#endif
