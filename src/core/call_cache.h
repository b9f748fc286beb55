/*
 * call_cache.h — the communicator's decision cache: the tuner's answers for
 * the call shapes it has seen (call_cache.c).
 *
 * Training loops repeat the same call shapes, and a small call's cost is
 * mostly software: asking the tuner again (NCCL_ALGO masks, each
 * algorithm's fitness, the layout) cost a fifth of an 8-byte Broadcast,
 * and across hosts the tuner prices every algorithm by replaying its
 * schedule. The answer depends only on the call's shape and on settings
 * that do not change while the communicator lives, so answers are kept
 * here, the one cache in front of the tuner (a pure function); a tuner
 * plugin, which may answer differently each time, is always asked.
 */
#ifndef WEFT_CALL_CACHE_H
#define WEFT_CALL_CACHE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "schedule.h"
#include "tuner.h"

// Shapes are hashed to a set; each set keeps its last WAYS answers. 64 in
// all: the distinct calls of an FSDP or pipeline step (one per layer shape
// and collective) fit.
#define WEFT_CALL_CACHE_SETS 16
#define WEFT_CALL_CACHE_WAYS 4

// One shape and its answer. `version` is odd while written (a reader that
// sees it change asks the tuner instead).
typedef struct {
  _Atomic uint64_t version;
  _Atomic uint64_t word[8];  // key, then slice and answer (call_cache.c)
} weft_call_cache_entry_t;

typedef struct {
  weft_call_cache_entry_t way[WEFT_CALL_CACHE_WAYS];
  _Atomic unsigned next;  // the way the next new shape replaces
} weft_call_cache_set_t;

typedef struct {
  weft_call_cache_set_t set[WEFT_CALL_CACHE_SETS];
} weft_call_cache_t;

// The algorithm, args->slice and protocol for this call: remembered, or
// from the tuner (and remembered). Fails as weft_tuner_choose does.
ncclResult_t weft_call_choose(weft_call_cache_t *cache, const weft_tuner_params_t *tp, weft_coll_args_t *args,
                              size_t esize, weft_algo_t *algo, weft_proto_t *proto);

#endif
