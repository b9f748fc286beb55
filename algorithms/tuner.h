/*
 * tuner.h — picks the algorithm and the slice (elements per step) for a call.
 *
 * For now every collective has one algorithm (ring, chain or direct); the
 * slice is half a connection's buffer, so one round can be in flight while
 * the next is being filled. The measured cost model arrives with the
 * multi-host algorithms.
 */
#ifndef WEFT_TUNER_H
#define WEFT_TUNER_H

#include <stddef.h>

#include "schedule.h"

typedef struct {
  size_t slot_bytes;  // bytes per connection slot
  size_t nslots;      // slots per connection
} weft_link_params_t;

// Fills algo and args->slice.
void weft_tuner_choose(const weft_link_params_t *link, weft_coll_args_t *args, size_t esize, weft_algo_t *algo);

#endif
