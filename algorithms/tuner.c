/*
 * tuner.c — algorithm and slice choice (see tuner.h).
 */
#include "tuner.h"

void weft_tuner_choose(const weft_link_params_t *link, weft_coll_args_t *args, size_t esize, weft_algo_t *algo) {
  switch (args->coll) {
    case WEFT_COLL_ALLREDUCE:
    case WEFT_COLL_ALLGATHER:
    case WEFT_COLL_REDUCESCATTER: *algo = WEFT_ALGO_RING; break;
    case WEFT_COLL_BROADCAST:
    case WEFT_COLL_REDUCE: *algo = WEFT_ALGO_CHAIN; break;
    default: *algo = WEFT_ALGO_DIRECT; break;
  }
  size_t slot_elems = link->slot_bytes / esize;
  size_t half = link->nslots / 2 > 0 ? link->nslots / 2 : 1;
  args->slice = slot_elems * half;
  if (args->slice == 0) args->slice = 1;
}
