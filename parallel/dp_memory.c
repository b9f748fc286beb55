/*
 * dp_memory.c — the data-parallel layout (layer offsets in full and shard
 * buffers) and the per-rank memory figures it implies.
 *
 * Model states per parameter, after the ZeRO paper (Rajbhandari et al.,
 * 2020), with K bytes of optimizer state:
 *   mixed precision: 2 (16-bit params) + 2 (16-bit grads) + K = 12 (fp32
 *   master, m, v); fp32: 4 + 4 + K = 8 (m, v: the params are the master).
 * Stage 0 (DDP) replicates all of it, ZeRO-1 shards the optimizer state,
 * ZeRO-2 also the gradients, ZeRO-3 also the parameters. A full buffer
 * holds Ψp = Σ N·ceil(n_l/N) elements and a shard Ψp/N, so the bytes equal
 * the paper's formula at Ψp: the formula at Ψ plus the padding.
 */
#include <stdlib.h>

#include "dp_internal.h"

ncclResult_t weft_dp_layout_init(weft_dp_layout_t *lay, int nlayers, const size_t *sizes, int nranks) {
  *lay = (weft_dp_layout_t){.nlayers = nlayers, .nranks = nranks};
  if (nlayers < 1) PAR_INVALID("data parallel: nlayers=%d, need at least 1", nlayers);
  if (sizes == NULL) PAR_INVALID("data parallel: layer_sizes is NULL");
  if (nranks < 1) PAR_INVALID("data parallel: nranks=%d, need at least 1", nranks);
  for (int l = 0; l < nlayers; l++)
    if (sizes[l] == 0) PAR_INVALID("data parallel: layer %d has no parameters", l);
  size_t *all = calloc(5 * (size_t)nlayers, sizeof(size_t));
  if (all == NULL) return weft_par_error(ncclSystemError, "data parallel: out of memory");
  lay->size = all;
  lay->shard = all + nlayers;
  lay->full_off = all + 2 * nlayers;
  lay->shard_off = all + 3 * nlayers;
  lay->orig_off = all + 4 * nlayers;
  for (int l = 0; l < nlayers; l++) {
    lay->size[l] = sizes[l];
    lay->shard[l] = weft_par_shard_size(sizes[l], nranks);
    lay->full_off[l] = lay->psi_padded;
    lay->shard_off[l] = lay->shard_total;
    lay->orig_off[l] = lay->psi;
    lay->psi += sizes[l];
    lay->psi_padded += lay->shard[l] * (size_t)nranks;
    lay->shard_total += lay->shard[l];
    if (lay->shard[l] * (size_t)nranks > lay->max_padded) lay->max_padded = lay->shard[l] * (size_t)nranks;
  }
  return ncclSuccess;
}

void weft_dp_layout_free(weft_dp_layout_t *lay) {
  free(lay->size);
  lay->size = NULL;
}

double weft_dp_paper_bytes(weft_dp_stage_t stage, weft_dp_precision_t precision, double psi, int nranks) {
  double n = nranks;
  if (precision == WEFT_DP_FP32) {
    switch (stage) {
      case WEFT_DP_DDP: return 16 * psi;
      case WEFT_DP_ZERO1: return 8 * psi + 8 * psi / n;
      case WEFT_DP_ZERO2: return 4 * psi + 12 * psi / n;
      default: return 16 * psi / n;
    }
  }
  switch (stage) {
    case WEFT_DP_DDP: return 16 * psi;
    case WEFT_DP_ZERO1: return 4 * psi + 12 * psi / n;
    case WEFT_DP_ZERO2: return 2 * psi + 14 * psi / n;
    default: return 16 * psi / n;
  }
}

void weft_dp_layout_memory(const weft_dp_layout_t *lay, weft_dp_stage_t stage, weft_dp_precision_t precision,
                           weft_dp_memory_t *out) {
  size_t es = precision == WEFT_DP_FP32 ? 4 : 2;
  size_t optim_per_param = precision == WEFT_DP_FP32 ? 8 : 12;
  size_t full = lay->psi_padded, shard = lay->shard_total;
  *out = (weft_dp_memory_t){.psi = lay->psi, .psi_padded = full, .nranks = lay->nranks};
  out->param_bytes = (stage == WEFT_DP_ZERO3 ? shard : full) * es;
  out->grad_bytes = (stage >= WEFT_DP_ZERO2 ? shard : full) * es;
  out->optim_bytes = (stage == WEFT_DP_DDP ? full : shard) * optim_per_param;
  out->total_bytes = out->param_bytes + out->grad_bytes + out->optim_bytes;
  out->paper_bytes = weft_dp_paper_bytes(stage, precision, (double)lay->psi, lay->nranks);
  out->padding_bytes = (double)out->total_bytes - out->paper_bytes;
  if (stage >= WEFT_DP_ZERO2) out->working_bytes += DP_GRAD_SLOTS * lay->max_padded * es;
  if (stage == WEFT_DP_ZERO3) out->working_bytes += DP_PARAM_SLOTS * lay->max_padded * es;
}

static ncclResult_t check_kind(weft_dp_stage_t stage, weft_dp_precision_t precision, const char *api) {
  if ((int)stage < WEFT_DP_DDP || (int)stage > WEFT_DP_ZERO3) PAR_INVALID("%s: stage=%d is not 0..3", api, (int)stage);
  if ((int)precision < WEFT_DP_FP32 || (int)precision > WEFT_DP_FP16)
    PAR_INVALID("%s: precision=%d is not a weft_dp_precision_t", api, (int)precision);
  return ncclSuccess;
}

ncclResult_t weft_dp_memory_model(weft_dp_stage_t stage, weft_dp_precision_t precision, int nranks,
                                  int nlayers, const size_t *layer_sizes, weft_dp_memory_t *out) {
  if (out == NULL) PAR_INVALID("weft_dp_memory_model: out is NULL");
  ncclResult_t res = check_kind(stage, precision, "weft_dp_memory_model");
  if (res != ncclSuccess) return res;
  weft_dp_layout_t lay;
  if ((res = weft_dp_layout_init(&lay, nlayers, layer_sizes, nranks)) != ncclSuccess) return res;
  weft_dp_layout_memory(&lay, stage, precision, out);
  weft_dp_layout_free(&lay);
  return ncclSuccess;
}

ncclResult_t weft_dp_memory(const weft_dp_t *dp, weft_dp_memory_t *out) {
  if (dp == NULL || out == NULL) PAR_INVALID("weft_dp_memory: %s is NULL", dp == NULL ? "dp" : "out");
  *out = dp->mem;
  return ncclSuccess;
}

// Used by weft_dp_create to validate its config before allocating.
ncclResult_t weft_dp_check_kind(weft_dp_stage_t stage, weft_dp_precision_t precision) {
  return check_kind(stage, precision, "weft_dp_create");
}
