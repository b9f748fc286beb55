/*
 * dp_micro.c — the forward/backward protocol of a data-parallel engine:
 * handing out layer parameters (ZeRO-3: gathered, next layer prefetched),
 * gradient buckets, and queueing each bucket's reduction on the engine's
 * stream the moment the caller says it is complete.
 *
 * All collectives of an engine go to its one stream, in the same order on
 * every rank, so they match across ranks and overlap with the caller's
 * compute. Slots (gathered layers, gradient buckets) are settled lazily by
 * weft_dp_sync when a buffer is needed or at the step.
 */
#include <string.h>

#include "dp_internal.h"
#include "weft.h"

// Gradient calls need a micro-batch begun; parameter calls do not (a
// pipeline runs forwards ahead of the backward that begins a micro-batch).
static ncclResult_t check_layer(const weft_dp_t *dp, int layer, const char *api) {
  if (dp == NULL) PAR_INVALID("%s: dp is NULL", api);
  if (layer < 0 || layer >= dp->lay.nlayers) PAR_INVALID("%s: layer=%d is not in 0..%d", api, layer, dp->lay.nlayers - 1);
  if (dp->micro < 0 && strstr(api, "grads") != NULL) PAR_INVALID("%s: call weft_dp_begin_micro first", api);
  return ncclSuccess;
}

static char *at(void *base, size_t elems, size_t esize) { return (char *)base + elems * esize; }

// Adds the reduced shard of a finished bucket into the gradient shard.
static void fold_bucket(weft_dp_t *dp, dp_slot_t *slot) {
  const weft_dp_layout_t *lay = &dp->lay;
  size_t s = lay->shard[slot->layer];
  char *src = at(slot->buf, (size_t)dp->rank * s, dp->esize), *dst = at(dp->grads, lay->shard_off[slot->layer], dp->esize);
  float chunk[512];
  for (size_t i = 0; i < s; i += 512) {
    size_t k = s - i < 512 ? s - i : 512;
    weft_dp_to_float(dp->precision, src + i * dp->esize, chunk, k);
    weft_dp_add_float(dp->precision, chunk, dst + i * dp->esize, k);
  }
}

ncclResult_t weft_dp_sync(weft_dp_t *dp) {
  PAR_CHECK(weftStreamSynchronize(dp->stream));
  for (int i = 0; i < DP_PARAM_SLOTS; i++)
    if (dp->pslots[i].state == SLOT_GATHERING) dp->pslots[i].state = SLOT_GATHERED;
  for (int i = 0; i < DP_GRAD_SLOTS; i++) {
    dp_slot_t *g = &dp->gslots[i];
    if (g->state != SLOT_REDUCING) continue;
    fold_bucket(dp, g);
    g->state = SLOT_FREE;
    g->layer = -1;
  }
  return ncclSuccess;
}

ncclResult_t weft_dp_begin_micro(weft_dp_t *dp, int micro) {
  if (dp == NULL) PAR_INVALID("weft_dp_begin_micro: dp is NULL");
  if (micro < 0 || micro >= dp->accum_steps)
    PAR_INVALID("weft_dp_begin_micro: micro=%d is not in 0..%d", micro, dp->accum_steps - 1);
  if (micro != dp->micro + 1 && micro != 0)
    PAR_INVALID("weft_dp_begin_micro: micro=%d follows micro=%d", micro, dp->micro);
  dp->micro = micro;
  if (micro != 0) return ncclSuccess;
  PAR_CHECK(weft_dp_sync(dp));
  size_t count = dp->stage >= WEFT_DP_ZERO2 ? dp->lay.shard_total : dp->lay.psi_padded;
  memset(dp->grads, 0, count * dp->esize);
  return ncclSuccess;
}

static dp_slot_t *find_slot(dp_slot_t *slots, int n, int layer) {
  for (int i = 0; i < n; i++)
    if (slots[i].state != SLOT_FREE && slots[i].layer == layer) return &slots[i];
  return NULL;
}


static dp_slot_t *first_free(dp_slot_t *slots, int n) {
  for (int i = 0; i < n; i++)
    if (slots[i].state == SLOT_FREE) return &slots[i];
  return NULL;
}

// A slot for a new gather: a free one, else one holding a finished
// prefetch nobody has asked for yet.
static dp_slot_t *claim_param_slot(weft_dp_t *dp) {
  dp_slot_t *slot = first_free(dp->pslots, DP_PARAM_SLOTS);
  for (int i = 0; i < DP_PARAM_SLOTS && slot == NULL; i++)
    if (dp->pslots[i].state == SLOT_GATHERED) slot = &dp->pslots[i];
  return slot;
}

// Queues the gather of `layer` into a free slot (ZeRO-3).
static ncclResult_t start_gather(weft_dp_t *dp, dp_slot_t *slot, int layer) {
  const weft_dp_layout_t *lay = &dp->lay;
  PAR_CHECK(ncclAllGather(at(dp->params, lay->shard_off[layer], dp->esize), slot->buf, lay->shard[layer], dp->dtype,
                          dp->comm, dp->stream));
  slot->layer = layer;
  slot->state = SLOT_GATHERING;
  return ncclSuccess;
}

ncclResult_t weft_dp_layer_params(weft_dp_t *dp, int layer, int prefetch, void **params) {
  ncclResult_t res = check_layer(dp, layer, "weft_dp_layer_params");
  if (res != ncclSuccess) return res;
  if (params == NULL) PAR_INVALID("weft_dp_layer_params: params is NULL");
  if (dp->stage != WEFT_DP_ZERO3) {
    *params = at(dp->params, dp->lay.full_off[layer], dp->esize);
    return ncclSuccess;
  }
  dp_slot_t *slot = find_slot(dp->pslots, DP_PARAM_SLOTS, layer);
  if (slot != NULL && slot->state == SLOT_IN_USE)
    PAR_INVALID("weft_dp_layer_params: layer %d is already held; release it first", layer);
  if (slot == NULL) {
    if ((slot = claim_param_slot(dp)) == NULL)
      PAR_INVALID("weft_dp_layer_params: %d layers are held at once; release one first", DP_PARAM_SLOTS);
    PAR_CHECK(start_gather(dp, slot, layer));
  }
  if (slot->state == SLOT_GATHERING) PAR_CHECK(weft_dp_sync(dp));
  slot->state = SLOT_IN_USE;
  if (prefetch >= 0 && prefetch < dp->lay.nlayers && find_slot(dp->pslots, DP_PARAM_SLOTS, prefetch) == NULL) {
    dp_slot_t *next = claim_param_slot(dp);
    if (next != NULL) PAR_CHECK(start_gather(dp, next, prefetch));
  }
  *params = slot->buf;
  return ncclSuccess;
}

ncclResult_t weft_dp_layer_release(weft_dp_t *dp, int layer) {
  ncclResult_t res = check_layer(dp, layer, "weft_dp_layer_release");
  if (res != ncclSuccess || dp->stage != WEFT_DP_ZERO3) return res;
  dp_slot_t *slot = find_slot(dp->pslots, DP_PARAM_SLOTS, layer);
  if (slot == NULL || slot->state != SLOT_IN_USE) PAR_INVALID("weft_dp_layer_release: layer %d is not held", layer);
  slot->state = SLOT_FREE;  // its memory goes back to the pool
  slot->layer = -1;
  return ncclSuccess;
}

ncclResult_t weft_dp_layer_grads(weft_dp_t *dp, int layer, void **grads) {
  ncclResult_t res = check_layer(dp, layer, "weft_dp_layer_grads");
  if (res != ncclSuccess) return res;
  if (grads == NULL) PAR_INVALID("weft_dp_layer_grads: grads is NULL");
  if (dp->stage < WEFT_DP_ZERO2) {
    *grads = at(dp->grads, dp->lay.full_off[layer], dp->esize);
    return ncclSuccess;
  }
  dp_slot_t *slot = find_slot(dp->gslots, DP_GRAD_SLOTS, layer);
  if (slot != NULL && slot->state == SLOT_REDUCING) {
    PAR_CHECK(weft_dp_sync(dp));  // the same layer again before the reduction finished
    slot = NULL;
  }
  if (slot == NULL) {
    if ((slot = first_free(dp->gslots, DP_GRAD_SLOTS)) == NULL) {
      PAR_CHECK(weft_dp_sync(dp));
      if ((slot = first_free(dp->gslots, DP_GRAD_SLOTS)) == NULL)
        PAR_INVALID("weft_dp_layer_grads: %d gradient buckets are open; finish one first", DP_GRAD_SLOTS);
    }
    memset(slot->buf, 0, dp->lay.shard[layer] * (size_t)dp->nranks * dp->esize);
    slot->layer = layer;
    slot->state = SLOT_FILLING;
  }
  *grads = slot->buf;
  return ncclSuccess;
}

ncclResult_t weft_dp_layer_grads_done(weft_dp_t *dp, int layer) {
  ncclResult_t res = check_layer(dp, layer, "weft_dp_layer_grads_done");
  if (res != ncclSuccess) return res;
  const weft_dp_layout_t *lay = &dp->lay;
  size_t s = lay->shard[layer], rank_off = (size_t)dp->rank * s;
  if (dp->stage >= WEFT_DP_ZERO2) {
    dp_slot_t *slot = find_slot(dp->gslots, DP_GRAD_SLOTS, layer);
    if (slot == NULL || slot->state != SLOT_FILLING)
      PAR_INVALID("weft_dp_layer_grads_done: layer %d has no open bucket (call weft_dp_layer_grads)", layer);
    PAR_CHECK(ncclReduceScatter(slot->buf, at(slot->buf, rank_off, dp->esize), s, dp->dtype, dp->op, dp->comm,
                                dp->stream));
    slot->state = SLOT_REDUCING;
    return ncclSuccess;
  }
  if (dp->micro != dp->accum_steps - 1) return ncclSuccess;  // accumulate locally until the last micro-batch
  char *g = at(dp->grads, lay->full_off[layer], dp->esize);
  if (dp->stage == WEFT_DP_DDP)
    PAR_CHECK(ncclAllReduce(g, g, s * (size_t)dp->nranks, dp->dtype, dp->op, dp->comm, dp->stream));
  else
    PAR_CHECK(ncclReduceScatter(g, g + rank_off * dp->esize, s, dp->dtype, dp->op, dp->comm, dp->stream));
  return ncclSuccess;
}
