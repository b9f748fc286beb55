/*
 * mlpstack.h — a small model built from the parallel layer's pieces, to
 * run and check 3D parallelism end to end: L blocks of
 *   x <- x + MLP(LayerNorm(x))     (Megatron MLP, optional sequence parallel)
 * with a squared-error loss against a target, trained with AdamW.
 * Blocks are assigned to pipeline stages with weft_pp_balance, micro-
 * batches run through weft_pp_run (GPipe or 1F1B), each stage's blocks
 * are the layers of a data-parallel engine (DDP or ZeRO-1/2/3, fp32).
 *
 * The data is synthetic and deterministic: global micro-batch g (data-
 * parallel rank d runs g = d*M .. d*M+M-1) has the same tokens whatever
 * the layout, so any (tp, pp, dp) trains exactly the same model as one
 * rank with dp*M micro-batches per step.
 */
#ifndef WEFT_PAR_MLPSTACK_H
#define WEFT_PAR_MLPSTACK_H

#include "dp.h"
#include "pp.h"
#include "tp.h"

typedef struct {
  int hidden, ffn, layers;
  int tokens;              // per micro-batch
  int micro;               // micro-batches per data-parallel rank per step (M)
  int sequence_parallel;
  weft_dp_stage_t zero;    // DDP or ZeRO stage
  weft_pp_kind_t schedule;
  unsigned long long seed;
  weft_adamw_t adamw;
} weft_mlpstack_config_t;

typedef struct weft_mlpstack weft_mlpstack_t;

// Collective over the three groups (each may have one rank).
ncclResult_t weft_mlpstack_create(const weft_mlpstack_config_t *cfg, ncclComm_t tp_comm, ncclComm_t pp_comm,
                                  ncclComm_t dp_comm, weft_mlpstack_t **out);
ncclResult_t weft_mlpstack_destroy(weft_mlpstack_t *st);

// One training step; *loss is the mean loss over every micro-batch of the
// step (the same on every rank). stats may be NULL.
ncclResult_t weft_mlpstack_step(weft_mlpstack_t *st, float *loss, weft_pp_stats_t *stats);

// Floats in this rank's parameters (its stage's blocks, its TP part).
size_t weft_mlpstack_local_count(const weft_mlpstack_t *st);
// This rank's parameters (collective over the data-parallel group).
ncclResult_t weft_mlpstack_local_params(weft_mlpstack_t *st, float *out);
// This rank's part of a full parameter vector of all blocks (as laid out
// by a one-rank stack): to compare a layout against one rank.
ncclResult_t weft_mlpstack_shard_full(const weft_mlpstack_t *st, const float *full, float *out);
// Floats in a full block: 2h + (h*f + f) + (f*h + h).
size_t weft_mlpstack_block_full(const weft_mlpstack_config_t *cfg);
// This rank's blocks [first, last) and stage.
void weft_mlpstack_blocks(const weft_mlpstack_t *st, int *first, int *last);

#endif  // WEFT_PAR_MLPSTACK_H
