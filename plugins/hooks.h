/*
 * hooks.h — how the core calls the tuner and profiler plugins.
 *
 * One table of function pointers, weft_plugin_hooks, that the plugin
 * loaders fill when a library loads (plugins/tuner/, plugins/profiler/);
 * an entry stays NULL while no plugin of its kind is loaded, so each call
 * site in the core costs one branch. The core describes communicators and
 * operations to the plugins in the plain structs below, so no plugin code
 * sees the communicator or the engine's operations.
 */
#ifndef WEFT_PLUGIN_HOOKS_H
#define WEFT_PLUGIN_HOOKS_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"
#include "schedule.h"
#include "tuner.h"

// A communicator, as the plugins are told of it at the end of its initialisation.
typedef struct {
  uint64_t id_hash;
  const char *name;     // config.commName, or NULL
  int rank, nranks, nhosts;
  const int *host_of;   // [nranks]: host index of each rank
} weft_plugin_comm_t;

// The profiler's events of one operation: kept in the operation by the
// core, written by the profiler only (api_event: by the core, from api_start).
typedef struct {
  int on;                         // events are open for it: op_stop must close them
  uint32_t nlanes;
  void *api_event;                // its call's CollApi / P2pApi event, or NULL (its parent from version 5 on)
  void *event;                    // its Coll or P2p event
  struct weft_prof_group *group;  // the launch's Group event
  struct weft_prof_lane *lanes;   // [nlanes]: each lane's ProxyOp, open ProxyStep and KernelCh events, or NULL
} weft_prof_op_t;

// An operation, as the profiler is told of it once launched.
typedef struct {
  int rank;
  int is_p2p;
  weft_coll_t coll;
  weft_algo_t algo;
  const void *sendbuff;
  void *recvbuff;
  size_t count;
  int root;                       // collectives: the root; point-to-point: the peer
  ncclDataType_t dtype;
  size_t esize;                   // bytes per element
  int redop;                      // the call's ncclRedOp_t; 0 without a reduction
  size_t chunk_bytes;             // bytes per step
  const weft_schedule_t *sched;
  int done;                       // nothing to move: it finished at launch
} weft_prof_launch_t;

typedef struct {
  // Tuner: after weft_tuner_choose, may change *algo and (tuner v6's
  // getChunkSize) lower args->slice.
  void (*tune)(void *tuner, const weft_tuner_params_t *p, weft_coll_args_t *args, size_t esize, weft_algo_t *algo);
  // Profiler. A group's operations, once launched, in call order: op_start
  // for each (first = 1 for the first; prof is NULL for an operation whose
  // communicator has no profiler), then launch_end.
  void (*op_start)(void *prof, weft_prof_op_t *po, const weft_prof_launch_t *launch, int first);
  void (*launch_end)(void);
  // A step of `lane` (at index `cursor` in it) is about to be tried (done =
  // 0) or has finished (done = 1); called only while po->lanes is set.
  void (*step)(void *prof, weft_prof_op_t *po, uint32_t lane, uint32_t cursor, int done);
  // The operation finished, failed or is dropped; called only while po->on.
  void (*op_stop)(void *prof, weft_prof_op_t *po);
  // Around each collective / send / receive call (group_depth: the
  // caller's ncclGroupStart depth): the API events of version 5 on.
  // api_start returns the call's event, or NULL; api_stop follows every
  // api_start, with its answer.
  void *(*api_start)(void *prof, int rank, weft_coll_t coll, size_t count, ncclDataType_t dtype, int root,
                     void *stream, int group_depth);
  void (*api_stop)(void *event);
  // The outermost ncclGroupEnd (or ncclGroupSimulateEnd) begins (launched
  // = 0) and is over (launched = 1).
  void (*group_end)(int launched);
} weft_plugin_hooks_t;

extern weft_plugin_hooks_t weft_plugin_hooks;

// At the end of a communicator's initialisation: loads the plugins the
// first time (filling weft_plugin_hooks) and initialises them for it. Never
// fails: a plugin that does not load or initialise is not used (WARN), and
// *tuner or *prof is left NULL.
void weft_plugins_comm_init(const weft_plugin_comm_t *c, void **tuner, void **prof);
void weft_plugins_comm_free(void *tuner, void *prof);

#endif
