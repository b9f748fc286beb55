/*
 * moe_capacity.c — which assignments an over-full expert keeps (the rule
 * in moe.h), over this rank's tokens or over a routing group's, and the
 * group's per-expert counts the load-balancing loss uses.
 *
 * A routing group (context parallelism) splits one call's tokens between
 * its ranks. Each rank gathers every rank's assignments (expert, router
 * probability and place in the group's token order) and runs the same
 * decision over all of them, so every rank keeps exactly the assignments
 * of its own tokens one rank would keep over the whole call.
 */
#include <stdlib.h>
#include <string.h>

#include "moe_internal.h"

typedef struct {
  float p;         // the router's probability of this assignment
  int32_t slot;    // token index * k + i in the group's order: ascending is token order
  int32_t expert;  // the assignment's expert
  int32_t at;      // where it sat in the gathered array (rank * T k + local slot)
} candidate_t;

static int by_expert_prob_slot(const void *x, const void *y) {
  const candidate_t *a = x, *b = y;
  if (a->expert != b->expert) return a->expert < b->expert ? -1 : 1;
  if (a->p != b->p) return a->p > b->p ? -1 : 1;
  return (a->slot > b->slot) - (a->slot < b->slot);
}

static int by_expert_slot(const void *x, const void *y) {
  const candidate_t *a = x, *b = y;
  if (a->expert != b->expert) return a->expert < b->expert ? -1 : 1;
  return (a->slot > b->slot) - (a->slot < b->slot);
}

ncclResult_t weft_moe_route_group(weft_moe_t *moe, ncclComm_t comm, int tokens, const int *index) {
  if (moe == NULL || moe->route_size < 1) PAR_INVALID("weft_moe_route_group: moe was not set up by weft_moe_init");
  int G = 1;
  if (comm != NULL) PAR_CHECK(ncclCommCount(comm, &G));
  if (G == 1) {
    moe->route_comm = NULL, moe->route_size = 1, moe->route_tokens = 0, moe->route_index = NULL;
    return ncclSuccess;
  }
  if (tokens < 1 || index == NULL)
    PAR_INVALID("weft_moe_route_group: tokens=%d, index %s (need tokens >= 1 and an index)", tokens,
                index == NULL ? "NULL" : "given");
  long all = (long)G * tokens;
  for (int t = 0; t < tokens; t++)
    if (index[t] < 0 || index[t] >= all)
      PAR_INVALID("weft_moe_route_group: index[%d]=%d is outside the group's %ld tokens", t, index[t], all);
  moe->route_comm = comm, moe->route_size = G, moe->route_tokens = tokens, moe->route_index = index;
  return ncclSuccess;
}

ncclResult_t weft_moe_group_routed(const weft_moe_t *moe, const moe_dims_t *d, moe_acts_t *a) {
  memcpy(a->grouted, a->routed, (size_t)d->E * sizeof(int32_t));
  if (moe->route_size == 1 || !(moe->cfg.aux_coef > 0)) return ncclSuccess;  // only the aux loss reads them
  return ncclAllReduce(a->grouted, a->grouted, (size_t)d->E, ncclInt32, ncclSum, moe->route_comm, NULL);
}

// Every assignment of the group, rank by rank (this rank's alone without a group).
static ncclResult_t gather(const weft_moe_t *moe, const moe_dims_t *d, const moe_acts_t *a, int rank,
                           candidate_t *all) {
  size_t tk = (size_t)d->T * d->k;
  candidate_t *mine = all + (size_t)rank * tk;
  for (size_t s = 0; s < tk; s++) {
    size_t t = s / (size_t)d->k;
    int32_t token = moe->route_size > 1 ? moe->route_index[t] : (int32_t)t;
    mine[s] = (candidate_t){a->probs[t * (size_t)d->E + (size_t)a->expert[s]],
                            token * d->k + (int32_t)(s % (size_t)d->k), a->expert[s], 0};
  }
  if (moe->route_size > 1)  // four 4-byte fields a candidate
    PAR_CHECK(ncclAllGather(mine, all, 4 * tk, ncclInt32, moe->route_comm, NULL));
  for (size_t j = 0; j < (size_t)moe->route_size * tk; j++) all[j].at = (int32_t)j;
  return ncclSuccess;
}

ncclResult_t weft_moe_apply_capacity(const weft_moe_t *moe, const moe_dims_t *d, moe_acts_t *a) {
  size_t tk = (size_t)d->T * d->k, n = (size_t)moe->route_size * tk;
  memset(a->scount, 0, (size_t)d->E * sizeof(int32_t));
  if (d->cap < 0) {  // no capacity: every assignment is kept
    for (size_t s = 0; s < tk; s++) a->pos[s] = 0, a->scount[a->expert[s]]++;
    a->meta[1] = (int32_t)tk, a->meta[2] = 0;
    return ncclSuccess;
  }
  int rank = 0;
  if (moe->route_size > 1) PAR_CHECK(ncclCommUserRank(moe->route_comm, &rank));
  candidate_t *all = malloc(n * sizeof(*all));
  unsigned char *keep = malloc(n);
  if (all == NULL || keep == NULL) {
    free(all), free(keep);
    return weft_par_error(ncclSystemError, "weft_moe_forward: out of memory deciding the capacity of %zu slots", n);
  }
  ncclResult_t res = gather(moe, d, a, rank, all);
  if (res == ncclSuccess) {
    qsort(all, n, sizeof(*all), moe->cfg.drop == WEFT_MOE_DROP_POSITION ? by_expert_slot : by_expert_prob_slot);
    for (size_t j = 0, first = 0; j < n; j++) {  // the first C of each expert's run are kept
      if (j > 0 && all[j].expert != all[j - 1].expert) first = j;
      keep[all[j].at] = j - first < (size_t)d->cap;
    }
    int kept = 0;
    for (size_t s = 0; s < tk; s++) {
      int k = keep[(size_t)rank * tk + s];
      a->pos[s] = k ? 0 : -1;
      a->scount[a->expert[s]] += k;
      kept += k;
    }
    a->meta[1] = kept, a->meta[2] = (int32_t)tk - kept;
  }
  free(all), free(keep);
  return res;
}
