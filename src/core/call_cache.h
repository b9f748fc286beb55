/*
 * call_cache.h — the tuner's answer for the last call shape of each
 * collective, kept per communicator (call_cache.c).
 *
 * Training loops repeat the same call shapes, and a small call's cost is
 * mostly software: asking the tuner again (NCCL_ALGO masks, each
 * algorithm's fitness, the layout) cost a fifth of an 8-byte Broadcast.
 * The answer depends only on the call's shape and on settings that do not
 * change while the communicator lives, so the last one per collective is
 * remembered; a tuner plugin, which may answer differently each time, is
 * always asked.
 */
#ifndef WEFT_CALL_CACHE_H
#define WEFT_CALL_CACHE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "schedule.h"
#include "tuner.h"

// One collective's last shape and answer. `version` is odd while written
// (a reader that sees it change retries the tuner instead).
typedef struct {
  _Atomic uint64_t version;
  _Atomic uint64_t word[8];  // key, then slice and answer (call_cache.c)
} weft_call_cache_entry_t;

typedef struct {
  weft_call_cache_entry_t coll[WEFT_NUM_COLLS];
} weft_call_cache_t;

// The algorithm, args->slice and protocol for this call: remembered, or
// from the tuner (and remembered). Fails as weft_tuner_choose does.
ncclResult_t weft_call_choose(weft_call_cache_t *cache, const weft_tuner_params_t *tp, weft_coll_args_t *args,
                              size_t esize, weft_algo_t *algo, weft_proto_t *proto);

#endif
