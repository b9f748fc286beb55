/*
 * tuner_plugin.h — NCCL tuner plugins in weft (NCCL_TUNER_PLUGIN).
 *
 * The library is opened once per process (plugin_dl.h's naming scheme) and
 * the newest of its ncclTunerPlugin_v6 ... _v2 is initialised once per
 * communicator.
 * For every AllReduce, Broadcast, Reduce, AllGather and ReduceScatter weft
 * then fills NCCL's algorithm x protocol cost table from its own cost model
 * (the mapping is in tuner_plugin.c and docs/plugins.md;
 * entries weft cannot run, or NCCL_ALGO excludes, are -1), lets the plugin
 * edit it, and runs the algorithm of the cheapest entry. A plugin that
 * leaves the table as it was, or fails the call, leaves weft's own choice.
 * (Version 2 has no table: it names an algorithm and protocol. Version 6
 * may also lower the bytes per step, getChunkSize.)
 * The core reaches it through weft_plugin_hooks.tune (hooks.h).
 */
#ifndef WEFT_TUNER_PLUGIN_H
#define WEFT_TUNER_PLUGIN_H

#include "hooks.h"

// Loads the plugin (first time; fills weft_plugin_hooks.tune) and returns
// its state for this communicator, or NULL (no plugin, or its init failed:
// WARN, the built-in tuner serves the communicator).
void *weft_tuner_plugin_comm_init(const weft_plugin_comm_t *c);
void weft_tuner_plugin_comm_free(void *tuner);

#endif
