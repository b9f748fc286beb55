/*
 * train_internal.h — a run's state, shared by train.c (the step, the
 * evaluation) and train_ckpt.c (saving and resuming).
 */
#ifndef WEFT_TRAINER_TRAIN_INTERNAL_H
#define WEFT_TRAINER_TRAIN_INTERNAL_H

#include "train.h"

struct trainer {
  train_cfg_t cfg;
  weft_mesh_t *mesh;
  weft_tp_t tp;
  gpt_t *model;
  weft_dp_t *dp;
  gpt_store_t store;
  data_t *data;
  float *norm_weight; // per local parameter, for the gradient norm
  int *seq, *ids, *targets;
};

#endif // WEFT_TRAINER_TRAIN_INTERNAL_H
