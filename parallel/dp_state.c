/*
 * dp_state.c — the optimizer state of a data-parallel engine in a layout-
 * independent form, for checkpoints: Adam's moments m and v as full fp32
 * vectors (Ψ values, laid out as in weft_dp_load_params) and the AdamW step
 * counter behind the bias correction. Reading gathers the ZeRO shards;
 * loading keeps this rank's part, so a state read on N ranks loads on M.
 */
#include <stdlib.h>
#include <string.h>

#include "dp_internal.h"
#include "weft.h"

// Elements of layer l this rank owns (unpadded) and where they start in the
// layer.
static size_t owned(const weft_dp_t *dp, int l, size_t *lo) {
  size_t n = dp->lay.size[l], s = dp->lay.shard[l];
  *lo = (size_t)dp->rank * s;
  return *lo >= n ? 0 : (n - *lo < s ? n - *lo : s);
}

ncclResult_t weft_dp_read_optim(weft_dp_t *dp, float *m, float *v,
                                long *steps) {
  if (dp == NULL || m == NULL || v == NULL || steps == NULL)
    PAR_INVALID("weft_dp_read_optim: an argument is NULL");
  PAR_CHECK(weft_dp_sync(dp));
  const weft_dp_layout_t *lay = &dp->lay;
  *steps = dp->steps;
  if (dp->stage == WEFT_DP_DDP) { // every rank holds the full moments
    for (int l = 0; l < lay->nlayers; l++) {
      memcpy(m + lay->orig_off[l], dp->m + lay->full_off[l],
             lay->size[l] * sizeof(float));
      memcpy(v + lay->orig_off[l], dp->v + lay->full_off[l],
             lay->size[l] * sizeof(float));
    }
    return ncclSuccess;
  }
  float *tmp = malloc(lay->max_padded * sizeof(float));
  if (tmp == NULL)
    return weft_par_error(ncclSystemError, "weft_dp_read_optim: out of memory");
  ncclResult_t res = ncclSuccess;
  for (int l = 0; l < lay->nlayers && res == ncclSuccess; l++) {
    for (int k = 0; k < 2 && res == ncclSuccess; k++) {
      const float *shard = (k == 0 ? dp->m : dp->v) + lay->shard_off[l];
      res = ncclAllGather(shard, tmp, lay->shard[l], ncclFloat32, dp->comm,
                          dp->stream);
      if (res == ncclSuccess)
        res = weftStreamSynchronize(dp->stream);
      if (res == ncclSuccess)
        memcpy((k == 0 ? m : v) + lay->orig_off[l], tmp,
               lay->size[l] * sizeof(float));
    }
  }
  free(tmp);
  if (res != ncclSuccess)
    return weft_par_error(res, "weft_dp_read_optim: gather failed: %s",
                          ncclGetErrorString(res));
  return ncclSuccess;
}

ncclResult_t weft_dp_load_optim(weft_dp_t *dp, const float *m, const float *v,
                                long steps) {
  if (dp == NULL || m == NULL || v == NULL)
    PAR_INVALID("weft_dp_load_optim: an argument is NULL");
  if (steps < 0)
    PAR_INVALID("weft_dp_load_optim: steps=%ld is negative", steps);
  PAR_CHECK(weft_dp_sync(dp));
  const weft_dp_layout_t *lay = &dp->lay;
  for (int l = 0; l < lay->nlayers; l++) {
    const float *sm = m + lay->orig_off[l], *sv = v + lay->orig_off[l];
    if (dp->stage == WEFT_DP_DDP) {
      memcpy(dp->m + lay->full_off[l], sm, lay->size[l] * sizeof(float));
      memcpy(dp->v + lay->full_off[l], sv, lay->size[l] * sizeof(float));
      continue;
    }
    size_t lo, mine = owned(dp, l, &lo);
    memcpy(dp->m + lay->shard_off[l], sm + lo, mine * sizeof(float));
    memcpy(dp->v + lay->shard_off[l], sv + lo, mine * sizeof(float));
  }
  dp->steps = steps;
  return ncclSuccess;
}
