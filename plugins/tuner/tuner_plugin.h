/*
 * tuner_plugin.h — NCCL tuner plugins in weft (NCCL_TUNER_PLUGIN).
 *
 * The library is opened once per process (plugin_dl.h's naming scheme) and
 * its ncclTunerPlugin_v5 (else _v4) is initialised once per communicator.
 * For every AllReduce, Broadcast, Reduce, AllGather and ReduceScatter weft
 * then fills NCCL's algorithm x protocol cost table from its own cost model
 * (the mapping is in tuner_plugin.c and docs/plugins.md;
 * entries weft cannot run, or NCCL_ALGO excludes, are -1), lets the plugin
 * edit it, and runs the algorithm of the cheapest entry. A plugin that
 * leaves the table as it was, or fails the call, leaves weft's own choice.
 */
#ifndef WEFT_TUNER_PLUGIN_H
#define WEFT_TUNER_PLUGIN_H

#include "comm.h"
#include "tuner.h"

// At the end of communicator initialisation: loads the plugin (first time)
// and sets comm->tuner, or leaves it NULL (no plugin, or its init failed:
// WARN, the built-in tuner serves the communicator).
void weft_tuner_plugin_comm_init(struct ncclComm *comm);
void weft_tuner_plugin_comm_free(struct ncclComm *comm);

// After weft_tuner_choose: lets comm->tuner (not NULL) change *algo.
void weft_tuner_plugin_apply(struct ncclComm *comm, const weft_tuner_params_t *p, const weft_coll_args_t *args,
                             size_t esize, weft_algo_t *algo);

#endif
