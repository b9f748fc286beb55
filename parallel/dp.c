/*
 * dp.c — life cycle of a data-parallel engine: checking the config,
 * allocating exactly the model states its ZeRO stage keeps (counted for
 * weft_dp_memory), loading and reading the full parameter vector.
 */
#include <stdlib.h>
#include <string.h>

#include "dp_internal.h"
#include "weft.h"

// calloc that adds the bytes to one of the memory figures.
static void *dp_alloc(size_t count, size_t esize, size_t *counter) {
  if (count == 0) return NULL;
  void *p = calloc(count, esize);
  if (p != NULL) *counter += count * esize;
  return p;
}

static ncclResult_t check_config(const weft_dp_config_t *c) {
  if (c == NULL) PAR_INVALID("weft_dp_create: config is NULL");
  ncclResult_t res = weft_dp_check_kind(c->stage, c->precision);
  if (res != ncclSuccess) return res;
  if ((int)c->average != WEFT_DP_AVG_NCCL && (int)c->average != WEFT_DP_AVG_PREMULSUM)
    PAR_INVALID("weft_dp_create: average=%d is not a weft_dp_average_t", (int)c->average);
  if (c->accum_steps < 1) PAR_INVALID("weft_dp_create: accum_steps=%d, need at least 1", c->accum_steps);
  return ncclSuccess;
}

static ncclResult_t create_op(weft_dp_t *dp) {
  if (dp->average == WEFT_DP_AVG_NCCL) {
    dp->op = ncclAvg;
    return ncclSuccess;
  }
  float scale = 1.0f / ((float)dp->nranks * (float)dp->accum_steps);
  uint16_t half = dp->precision == WEFT_DP_BF16 ? weft_par_to_bf16(scale) : weft_par_to_fp16(scale);
  void *scalar = dp->precision == WEFT_DP_FP32 ? (void *)&scale : (void *)&half;
  PAR_CHECK(ncclRedOpCreatePreMulSum(&dp->op, scalar, dp->dtype, ncclScalarHostImmediate, dp->comm));
  dp->op_created = 1;
  return ncclSuccess;
}

static ncclResult_t allocate(weft_dp_t *dp) {
  const weft_dp_layout_t *lay = &dp->lay;
  size_t full = lay->psi_padded, shard = lay->shard_total, es = dp->esize;
  weft_dp_memory_t *mem = &dp->mem;
  weft_dp_layout_memory(lay, dp->stage, dp->precision, mem);  // the figures; byte counts are redone below
  mem->param_bytes = mem->grad_bytes = mem->optim_bytes = mem->working_bytes = 0;
  size_t opt_count = dp->stage == WEFT_DP_DDP ? full : shard;
  dp->params = dp_alloc(dp->stage == WEFT_DP_ZERO3 ? shard : full, es, &mem->param_bytes);
  dp->grads = dp_alloc(dp->stage >= WEFT_DP_ZERO2 ? shard : full, es, &mem->grad_bytes);
  if (dp->precision != WEFT_DP_FP32) dp->master = dp_alloc(opt_count, sizeof(float), &mem->optim_bytes);
  dp->m = dp_alloc(opt_count, sizeof(float), &mem->optim_bytes);
  dp->v = dp_alloc(opt_count, sizeof(float), &mem->optim_bytes);
  int bad = dp->params == NULL || dp->grads == NULL || dp->m == NULL || dp->v == NULL ||
            (dp->precision != WEFT_DP_FP32 && dp->master == NULL);
  for (int i = 0; i < DP_GRAD_SLOTS && dp->stage >= WEFT_DP_ZERO2; i++) {
    dp->gslots[i] = (dp_slot_t){dp_alloc(lay->max_padded, es, &mem->working_bytes), -1, SLOT_FREE};
    bad |= dp->gslots[i].buf == NULL;
  }
  for (int i = 0; i < DP_PARAM_SLOTS && dp->stage == WEFT_DP_ZERO3; i++) {
    dp->pslots[i] = (dp_slot_t){dp_alloc(lay->max_padded, es, &mem->working_bytes), -1, SLOT_FREE};
    bad |= dp->pslots[i].buf == NULL;
  }
  mem->total_bytes = mem->param_bytes + mem->grad_bytes + mem->optim_bytes;
  mem->padding_bytes = (double)mem->total_bytes - mem->paper_bytes;
  return bad ? weft_par_error(ncclSystemError, "weft_dp_create: out of memory") : ncclSuccess;
}

ncclResult_t weft_dp_create(ncclComm_t comm, const weft_dp_config_t *config, weft_dp_t **out) {
  if (out == NULL) PAR_INVALID("weft_dp_create: dp is NULL");
  *out = NULL;
  if (comm == NULL) PAR_INVALID("weft_dp_create: comm is NULL");
  ncclResult_t res = check_config(config);
  if (res != ncclSuccess) return res;
  weft_dp_t *dp = calloc(1, sizeof(*dp));
  if (dp == NULL) return weft_par_error(ncclSystemError, "weft_dp_create: out of memory");
  dp->comm = comm;
  dp->stage = config->stage;
  dp->precision = config->precision;
  dp->average = config->average;
  dp->accum_steps = config->accum_steps;
  dp->micro = -1;
  dp->grad_mult = 1.0f;
  dp->esize = config->precision == WEFT_DP_FP32 ? 4 : 2;
  dp->dtype = config->precision == WEFT_DP_FP32   ? ncclFloat32
              : config->precision == WEFT_DP_BF16 ? ncclBfloat16
                                                  : ncclFloat16;
  PAR_CHECK_GOTO(ncclCommCount(comm, &dp->nranks), res, fail);
  PAR_CHECK_GOTO(ncclCommUserRank(comm, &dp->rank), res, fail);
  if ((res = weft_dp_layout_init(&dp->lay, config->nlayers, config->layer_sizes, dp->nranks)) != ncclSuccess)
    goto fail;
  if ((res = allocate(dp)) != ncclSuccess) goto fail;
  if ((res = create_op(dp)) != ncclSuccess) goto fail;
  PAR_CHECK_GOTO(weftStreamCreate(&dp->stream), res, fail);
  *out = dp;
  return ncclSuccess;
fail:
  weft_dp_destroy(dp);
  return res;
}

ncclResult_t weft_dp_destroy(weft_dp_t *dp) {
  if (dp == NULL) return ncclSuccess;
  ncclResult_t res = ncclSuccess;
  if (dp->stream != NULL) {
    res = weftStreamSynchronize(dp->stream);
    ncclResult_t r = weftStreamDestroy(dp->stream);
    if (res == ncclSuccess) res = r;
  }
  if (dp->op_created) {
    ncclResult_t r = ncclRedOpDestroy(dp->op, dp->comm);
    if (res == ncclSuccess) res = r;
  }
  for (int i = 0; i < DP_PARAM_SLOTS; i++) free(dp->pslots[i].buf);
  for (int i = 0; i < DP_GRAD_SLOTS; i++) free(dp->gslots[i].buf);
  free(dp->params);
  free(dp->grads);
  free(dp->master);
  free(dp->m);
  free(dp->v);
  weft_dp_layout_free(&dp->lay);
  free(dp);
  return res;
}

ncclResult_t weft_dp_load_params(weft_dp_t *dp, const float *full) {
  if (dp == NULL || full == NULL) PAR_INVALID("weft_dp_load_params: %s is NULL", dp == NULL ? "dp" : "full");
  PAR_CHECK(weft_dp_sync(dp));
  const weft_dp_layout_t *lay = &dp->lay;
  char *params = dp->params;
  for (int l = 0; l < lay->nlayers; l++) {
    const float *src = full + lay->orig_off[l];
    size_t n = lay->size[l], s = lay->shard[l], lo = (size_t)dp->rank * s;
    size_t mine = lo >= n ? 0 : (n - lo < s ? n - lo : s);  // owned, unpadded elements
    if (dp->stage == WEFT_DP_ZERO3) {
      weft_dp_from_float(dp->precision, src + lo, params + lay->shard_off[l] * dp->esize, mine);
    } else {
      weft_dp_from_float(dp->precision, src, params + lay->full_off[l] * dp->esize, n);
    }
    if (dp->master == NULL) continue;
    if (dp->stage == WEFT_DP_DDP)
      memcpy(dp->master + lay->full_off[l], src, n * sizeof(float));
    else
      memcpy(dp->master + lay->shard_off[l], src + lo, mine * sizeof(float));
  }
  return ncclSuccess;
}

ncclResult_t weft_dp_read_params(weft_dp_t *dp, float *full) {
  if (dp == NULL || full == NULL) PAR_INVALID("weft_dp_read_params: %s is NULL", dp == NULL ? "dp" : "full");
  PAR_CHECK(weft_dp_sync(dp));
  const weft_dp_layout_t *lay = &dp->lay;
  char *params = dp->params;
  if (dp->stage != WEFT_DP_ZERO3) {
    for (int l = 0; l < lay->nlayers; l++)
      weft_dp_to_float(dp->precision, params + lay->full_off[l] * dp->esize, full + lay->orig_off[l], lay->size[l]);
    return ncclSuccess;
  }
  char *tmp = malloc(lay->max_padded * dp->esize);
  if (tmp == NULL) return weft_par_error(ncclSystemError, "weft_dp_read_params: out of memory");
  ncclResult_t res = ncclSuccess;
  for (int l = 0; l < lay->nlayers && res == ncclSuccess; l++) {
    res = ncclAllGather(params + lay->shard_off[l] * dp->esize, tmp, lay->shard[l], dp->dtype, dp->comm, dp->stream);
    if (res == ncclSuccess) res = weftStreamSynchronize(dp->stream);
    if (res == ncclSuccess) weft_dp_to_float(dp->precision, tmp, full + lay->orig_off[l], lay->size[l]);
  }
  free(tmp);
  if (res != ncclSuccess) return weft_par_error(res, "weft_dp_read_params: gather failed: %s", ncclGetErrorString(res));
  return ncclSuccess;
}
