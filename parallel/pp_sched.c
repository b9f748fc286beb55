/*
 * pp_sched.c — pipeline schedules, stage balancing and the bubble they
 * imply (pure arithmetic, no communication).
 *
 * GPipe: all forwards, then all backwards. 1F1B: stage s first runs
 * P-1-s warm-up forwards, then alternates one forward and one backward,
 * then drains the remaining backwards: a micro-batch's activations live
 * from its forward to its backward, so at most P-s are held at once.
 */
#include <float.h>
#include <stdlib.h>

#include "par_util.h"
#include "pp.h"
#include "pp_replay.h"

static ncclResult_t check_shape(const char *api, weft_pp_kind_t kind, int stages, int micro) {
  if ((int)kind == WEFT_PP_INTERLEAVED)
    PAR_INVALID("%s: the interleaved schedule has model chunks: use weft_pp_interleaved_* (pp_interleaved.h)", api);
  if ((int)kind != WEFT_PP_GPIPE && (int)kind != WEFT_PP_1F1B) PAR_INVALID("%s: kind=%d is not a schedule", api, (int)kind);
  if (stages < 1 || micro < 1) PAR_INVALID("%s: stages=%d micro=%d, both must be at least 1", api, stages, micro);
  return ncclSuccess;
}

ncclResult_t weft_pp_schedule(weft_pp_kind_t kind, int stages, int stage, int micro, weft_pp_op_t *ops) {
  ncclResult_t res = check_shape("weft_pp_schedule", kind, stages, micro);
  if (res != ncclSuccess) return res;
  if (stage < 0 || stage >= stages) PAR_INVALID("weft_pp_schedule: stage=%d is not in 0..%d", stage, stages - 1);
  if (ops == NULL) PAR_INVALID("weft_pp_schedule: ops is NULL");
  int n = 0, warm = kind == WEFT_PP_GPIPE ? micro : stages - 1 - stage;
  if (warm > micro) warm = micro;
  for (int m = 0; m < warm; m++) ops[n++] = (weft_pp_op_t){0, m};
  for (int m = 0; m < micro - warm; m++) {
    ops[n++] = (weft_pp_op_t){0, warm + m};
    ops[n++] = (weft_pp_op_t){1, m};
  }
  for (int m = micro - warm; m < micro; m++) ops[n++] = (weft_pp_op_t){1, m};
  return ncclSuccess;
}

ncclResult_t weft_pp_balance(const double *cost, int nlayers, int stages, int *first) {
  if (cost == NULL || first == NULL) PAR_INVALID("weft_pp_balance: %s is NULL", cost ? "first" : "cost");
  if (stages < 1 || nlayers < stages)
    PAR_INVALID("weft_pp_balance: %d layers cannot fill %d stages (each needs one)", nlayers, stages);
  for (int l = 0; l < nlayers; l++)
    if (!(cost[l] > 0)) PAR_INVALID("weft_pp_balance: cost[%d]=%g, costs must be positive", l, cost[l]);
  // best[k][i]: smallest maximum stage cost for layers 0..i-1 on k stages.
  size_t w = (size_t)nlayers + 1;
  double *best = malloc((size_t)(stages + 1) * w * sizeof(double)), *prefix = malloc(w * sizeof(double));
  int *cut = malloc((size_t)(stages + 1) * w * sizeof(int));
  if (best == NULL || prefix == NULL || cut == NULL) {
    free(best), free(prefix), free(cut);
    return weft_par_error(ncclSystemError, "weft_pp_balance: out of memory");
  }
  prefix[0] = 0;
  for (int l = 0; l < nlayers; l++) prefix[l + 1] = prefix[l] + cost[l];
  for (size_t i = 0; i < (size_t)(stages + 1) * w; i++) best[i] = DBL_MAX;
  best[0] = 0;
  for (int k = 1; k <= stages; k++)
    for (int i = k; i <= nlayers; i++)
      for (int j = k - 1; j < i; j++) {
        double prev = best[(size_t)(k - 1) * w + j], here = prefix[i] - prefix[j];
        double worst = prev > here ? prev : here;
        if (prev < DBL_MAX && worst < best[(size_t)k * w + i]) {
          best[(size_t)k * w + i] = worst;
          cut[(size_t)k * w + i] = j;
        }
      }
  first[stages] = nlayers;
  for (int k = stages, i = nlayers; k >= 1; k--) first[k - 1] = i = cut[(size_t)k * w + i];
  free(best), free(prefix), free(cut);
  return ncclSuccess;
}

ncclResult_t weft_pp_simulate(weft_pp_kind_t kind, int stages, int micro, double tf, double tb, double *bubble) {
  ncclResult_t res = check_shape("weft_pp_simulate", kind, stages, micro);
  if (res != ncclSuccess) return res;
  if (bubble == NULL || !(tf > 0) || !(tb > 0)) PAR_INVALID("weft_pp_simulate: need tf, tb > 0 and a bubble pointer");
  int n = 2 * micro;
  weft_pp_op_t *order = malloc((size_t)n * sizeof(*order));
  weft_pp_chunk_op_t *ops = malloc((size_t)stages * n * sizeof(*ops));  // one chunk per stage
  if (order == NULL || ops == NULL) {
    free(order), free(ops);
    return weft_par_error(ncclSystemError, "weft_pp_simulate: out of memory");
  }
  for (int s = 0; s < stages; s++) {
    weft_pp_schedule(kind, stages, s, micro, order);
    for (int i = 0; i < n; i++)
      ops[(size_t)s * n + i] = (weft_pp_chunk_op_t){.backward = order[i].backward, .chunk = 0, .micro = order[i].micro};
  }
  res = weft_pp_replay("weft_pp_simulate", stages, 1, micro, ops, tf, tb, bubble);
  free(order), free(ops);
  return res;
}
