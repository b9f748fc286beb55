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
  // cp > 1 (train_cp.c)
  weft_cp_t cp;
  int *cp_ids;          // a whole micro-batch of ids (decoding), then work for gathering rows
  // Model chunks (train_vpp.c): chunk v's blocks, its models at models[v * slots ...]
  int chunks;           // V with --schedule interleaved, else 1
  gpt_stage_t *chunk;   // chunk[0] = stage without interleaving
  int micro_begun;      // interleaved: the engine's micro-batch so far this step
  int defer_done;       // interleaved, DDP/ZeRO-1: this backward is not its layers' last micro-batch
  struct train_moe *moe;  // --experts: EP groups and the experts' engine (train_moe.c), else NULL
};

// Micro-batch of sequences first .. first+B-1 of a split into t->ids, t->targets
// (with --cp, this rank's rows of them).
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

// train_cp.c. The context-parallel group and its buffers (collective-free).
ncclResult_t train_cp_init(trainer_t *t);
void train_cp_free(trainer_t *t);
// Rows of a micro-batch on this rank: seq / cp * batch.
int train_tokens(const trainer_t *t);
// After filling t->ids, t->targets for whole sequences: keep this rank's rows.
void train_cp_select(trainer_t *t);
// Where decoding writes whole sequences of ids (t->ids when cp = 1), and
// the step that puts this rank's rows of them into t->ids.
int *train_cp_ids(trainer_t *t);
void train_cp_use_ids(trainer_t *t, const int *ids);
// Every rank's rows (train_tokens ints at the start of `rows`) into all
// seq * batch rows of `rows`, on every rank of the group.
ncclResult_t train_cp_gather(trainer_t *t, int *rows);
// train_vpp.c: the interleaved schedule. The flags' check (named in the
// message); the stage's chunks and, interleaved, t->slots (called by
// train_pp_plan once t->stage is its balanced run); whether the stage holds
// a block; one step's micro-batches through weft_pp_interleaved_run; the
// evaluation's forward through the virtual stages.
ncclResult_t train_vpp_check(const train_cfg_t *c);
ncclResult_t train_vpp_plan(trainer_t *t);
int train_vpp_holds(const trainer_t *t, int block);
ncclResult_t train_vpp_run(trainer_t *t, size_t act);
ncclResult_t train_vpp_forward(trainer_t *t, const int *targets, float *loss);

#endif // WEFT_TRAINER_TRAIN_INTERNAL_H
