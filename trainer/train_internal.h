/*
 * train_internal.h — a run's state, shared by train.c (the step, the
 * evaluation), train_pp.c (pipeline stages) and train_ckpt.c (saving and
 * resuming).
 */
#ifndef WEFT_TRAINER_TRAIN_INTERNAL_H
#define WEFT_TRAINER_TRAIN_INTERNAL_H

#include "train.h"

struct trainer {
  train_cfg_t cfg;
  weft_mesh_t *mesh;
  weft_tp_t tp;
  gpt_t *model;       // models[0]
  gpt_t **models;     // one per micro-batch in flight on this stage (pp > 1), else one
  int slots;
  gpt_stage_t stage;  // this stage's blocks; the whole model when pp = 1
  int *local;         // model layer (0..L+1) -> the engine's layer on this stage, -1: elsewhere
  weft_dp_t *dp;
  gpt_store_t store;
  data_t *data;
  float *norm_weight; // per local parameter, for the gradient norm
  int *seq, *ids, *targets;
  // pp > 1
  ncclComm_t emb_comm;  // first + last stage, same (tp, dp): the tied embedding
  float *emb_acc;       // its gradient over a step's micro-batches (on those two stages)
  float *act;           // a boundary activation (evaluation)
  long batch_first;     // the step's first sequence on this data-parallel rank
  double loss_sum;      // losses of the step's micro-batches (last stage)
  struct train_moe *moe;  // --experts: EP groups and the experts' engine (train_moe.c), else NULL
};

// Micro-batch of sequences first .. first+B-1 of a split into t->ids, t->targets.
void trainer_fill_batch(trainer_t *t, int split, long first);

// train_pp.c. Plans this rank's stage (balanced blocks), the layer map and
// the engine's layer sizes (*sizes, *nlocal; the caller frees *sizes), and
// creates emb_comm. Collective over the world.
ncclResult_t train_pp_plan(trainer_t *t, size_t **sizes, int *nlocal);
// The parameters this stage holds, from a vector of all layers (TP-local).
void train_pp_select(const trainer_t *t, const float *all, float *mine);
// The reverse, collective over the pipeline group: `count` vectors of this
// stage's layers (stage_n apart) -> `count` vectors of all layers (all_n
// apart), each layer from a stage that holds it.
ncclResult_t train_pp_gather(trainer_t *t, const float *mine, size_t stage_n, int count, float *all, size_t all_n);
// The number of parameters this stage holds (TP-local).
size_t train_pp_stage_count(const trainer_t *t);
// The model's parameter store: the engine, through the layer map.
gpt_store_t train_pp_store(trainer_t *t);
// One step's micro-batches through the pipeline schedule (pp > 1); the
// sum of their losses on every stage.
ncclResult_t train_pp_step(trainer_t *t, long first, double *loss_sum);
// A forward of t->ids through all stages (targets NULL: logits only); the
// loss on every stage.
ncclResult_t train_forward(trainer_t *t, const int *targets, float *loss);
// After train_forward: the greedy next token of every row on every stage.
ncclResult_t train_argmax(trainer_t *t, int *next);

#endif // WEFT_TRAINER_TRAIN_INTERNAL_H
