/*
 * train.h — one training run: the configuration weft-train parses, the
 * trainer that owns the mesh, model, data-parallel engine and data, and
 * the step / evaluation calls main.c drives.
 *
 * The global batch of a step is dp · grad_accum · batch sequences; data-
 * parallel rank r runs sequences (r·K + k)·B .. +B-1 of it in micro-batch
 * k, so every layout with the same global batch trains the same model.
 * With pp > 1 those K micro-batches go through the pipeline's schedule.
 */
#ifndef WEFT_TRAINER_TRAIN_H
#define WEFT_TRAINER_TRAIN_H

#include "data.h"
#include "dp.h"
#include "mesh.h"
#include "model.h"
#include "optim.h"
#include "pp.h"

typedef struct {
  gpt_dims_t dims;            // vocab comes from the data
  int batch, grad_accum;      // sequences per micro-batch, micro-batches per step
  int tp, pp, dp, zero;
  int cp;                     // context parallel: each sequence split over cp ranks (2 * cp chunks)
  int sp;                     // 1: sequence parallelism in the tensor-parallel group (--sp)
  int chunks;                 // model chunks per pipeline stage (--chunks, --schedule interleaved)
  int ep;                     // expert parallel (divides dp and dims.experts); MoE shape in dims
  weft_pp_kind_t schedule;    // pipeline schedule (pp > 1); its micro-batches are grad_accum
  int recompute;              // 1: keep block inputs only, recompute activations in backward
  int steps, eval_every, eval_batches, eval_problems, print_every;
  lr_schedule_t lr;
  float beta1, beta2, eps, weight_decay, clip;
  const char *data_path, *log_path;
  // main.c's: checkpoints and the loss curve
  const char *save_path, *resume_path, *plot_path;
  int save_every, stop_after;  // 0: off
  int digits;
  unsigned long long seed;
} train_cfg_t;

typedef struct {
  float loss, lr, grad_norm;
  double seconds;  // wall time of the step
  float aux_loss;  // MoE load-balancing loss (all MoE blocks); -1 without experts
} step_result_t;

typedef struct {
  float val_loss;
  float accuracy;  // exact-match accuracy of greedy answers; -1 when the data has no task
  int problems;
} eval_result_t;

typedef struct trainer trainer_t;

// Collective over `world`. On failure prints why and returns non-success.
ncclResult_t trainer_create(const train_cfg_t *cfg, ncclComm_t world, trainer_t **out);
void trainer_destroy(trainer_t *t);
const weft_mesh_t *trainer_mesh(const trainer_t *t);
const data_t *trainer_data(const trainer_t *t);
size_t trainer_param_count(const trainer_t *t);  // Ψ of the full model
size_t trainer_activation_bytes(const trainer_t *t);  // this rank's, every micro-batch in flight
int trainer_moe_capacity(const trainer_t *t);  // tokens an expert takes per micro-batch, -1: no capacity
double trainer_flops_per_step(const trainer_t *t);

ncclResult_t trainer_step(trainer_t *t, int step, step_result_t *out);
ncclResult_t trainer_eval(trainer_t *t, eval_result_t *out);

// Checkpoints (train_ckpt.c, file format in ckpt.h). Collective over the
// world: the parameters and Adam's moments are gathered from the ZeRO and
// tensor-parallel shards into the unsharded model, and world rank 0 writes
// them atomically. Resuming reads the file on every rank and keeps each
// rank's part, so a checkpoint of any layout resumes in any other; it fails
// (ncclInvalidArgument, with a message) on a file of another model shape.
ncclResult_t trainer_save(trainer_t *t, const char *path, int steps_done);
ncclResult_t trainer_resume(trainer_t *t, const char *path, int *steps_done);

#endif  // WEFT_TRAINER_TRAIN_H
