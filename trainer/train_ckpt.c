/*
 * train_ckpt.c — saving and resuming a run (see train.h; the file format
 * is ckpt.h). The parameters and Adam's moments leave the ZeRO engine as
 * full vectors of this rank's tensor-parallel part (weft_dp_read_params,
 * weft_dp_read_optim), the TP group all-gathers those, and world rank 0
 * puts every part in its place in the unsharded model (gpt_unshard).
 * With pipeline stages, each stage reads only its layers and the pipeline
 * group completes them (train_pp_gather) before the TP gather. Resuming
 * runs the other way on every rank without communication: gpt_shard_full,
 * train_pp_select (this stage's layers), then weft_dp_load_params /
 * weft_dp_load_optim. A checkpoint holds the unsharded model, so it resumes
 * in any (tp, pp, dp, zero) layout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "model_moe.h"
#include "par_util.h"
#include "train_internal.h"
#include "train_moe.h"

// 0 on every rank when `ok` held on every rank (so all ranks stop together).
static ncclResult_t agree(trainer_t *t, int ok, int *all_ok) {
  int bad = !ok;
  PAR_CHECK(
      ncclAllReduce(&bad, &bad, 1, ncclInt32, ncclMax, t->mesh->world, NULL));
  *all_ok = !bad;
  return ncclSuccess;
}

// Rank 0 of the world: the unsharded model from every TP rank's parts (and
// the experts, whole, at the end), written out.
static int write_file(trainer_t *t, const char *path, const float *parts,
                      size_t local_n, const float *experts,
                      const ckpt_header_t *h) {
  size_t full_n = (size_t)h->nparams;
  float *full = calloc(3 * full_n, sizeof(float));
  char err[512] = "out of memory";
  int ok = full != NULL;
  for (int r = 0; r < t->cfg.tp && ok; r++)
    for (int k = 0; k < 3 && ok; k++)
      ok = gpt_unshard(t->model, r, parts + ((size_t)r * 3 + k) * local_n,
                       full + k * full_n) == ncclSuccess;
  size_t ne = gpt_moe_full_count(&h->dims);
  for (int k = 0; k < 3 && ok && experts != NULL; k++)
    memcpy(full + k * full_n + full_n - ne, experts + k * ne, ne * sizeof(float));
  if (ok)
    ok = ckpt_write(path, h, full, full + full_n, full + 2 * full_n, err,
                    sizeof(err)) == 0;
  if (!ok)
    fprintf(stderr, "weft-train: cannot save the checkpoint: %s\n", err);
  free(full);
  return ok;
}

ncclResult_t trainer_save(trainer_t *t, const char *path, int steps_done) {
  const train_cfg_t *c = &t->cfg;
  size_t local_n = gpt_local_count(t->model), stage_n = train_pp_stage_count(t);
  int tp = c->tp, ok = 0;
  float *mine = calloc(3 * local_n, sizeof(float));
  float *stage = c->pp > 1 ? calloc(3 * stage_n, sizeof(float)) : mine;
  float *all = tp > 1 ? malloc((size_t)tp * 3 * local_n * sizeof(float)) : mine;
  ncclResult_t res = agree(t, mine != NULL && stage != NULL && all != NULL, &ok);
  if (res == ncclSuccess && !ok)
    res = weft_par_error(ncclSystemError, "out of memory for a checkpoint");
  long adam_steps = 0;
  // This stage's parameters, m and v; with pp > 1 the pipeline group
  // completes them into all layers, then the TP group gathers its parts.
  if (res == ncclSuccess)
    res = weft_dp_read_params(t->dp, stage);
  if (res == ncclSuccess)
    res = weft_dp_read_optim(t->dp, stage + stage_n, stage + 2 * stage_n,
                             &adam_steps);
  if (res == ncclSuccess && c->pp > 1)
    res = train_pp_gather(t, stage, stage_n, 3, mine, local_n);
  if (res == ncclSuccess && tp > 1)
    res = ncclAllGather(mine, all, 3 * local_n, ncclFloat32, t->mesh->tp_comm,
                        NULL);
  float *experts = NULL; // 3 x every expert, on world rank 0
  if (res == ncclSuccess)
    res = train_moe_gather(t, &experts);
  if (res == ncclSuccess) {
    ckpt_header_t h = {c->dims,
                       steps_done,
                       c->seed,
                       adam_steps,
                       (int64_t)c->dp * c->grad_accum * c->batch,
                       gpt_full_count(&c->dims)};
    ok = t->mesh->rank != 0 || write_file(t, path, all, local_n, experts, &h);
    if ((res = agree(t, ok, &ok)) == ncclSuccess && !ok)
      res = ncclSystemError;
  }
  free(experts);
  if (all != mine)
    free(all);
  if (stage != mine)
    free(stage);
  free(mine);
  return res;
}

static int same_dims(const gpt_dims_t *a, const gpt_dims_t *b) {
  return a->vocab == b->vocab && a->seq == b->seq && a->layers == b->layers &&
         a->hidden == b->hidden && a->heads == b->heads && a->ffn == b->ffn &&
         a->experts == b->experts &&
         (a->experts == 0 || a->moe_every == b->moe_every);
}

ncclResult_t trainer_resume(trainer_t *t, const char *path, int *steps_done) {
  const train_cfg_t *c = &t->cfg;
  int talk = t->mesh->rank == 0;
  ckpt_header_t h;
  char err[512];
  if (ckpt_read_header(path, &h, err, sizeof(err)) != 0) {
    if (talk)
      fprintf(stderr, "weft-train: --resume %s\n", err);
    return ncclInvalidArgument;
  }
  const gpt_dims_t *a = &h.dims, *b = &c->dims;
  if (!same_dims(a, b)) {
    if (talk)
      fprintf(stderr,
              "weft-train: --resume %s: the checkpoint's model (vocab %d seq "
              "%d layers %d hidden %d heads %d ffn %d experts %d moe-every %d) "
              "is not this run's (vocab %d seq %d layers %d hidden %d heads %d "
              "ffn %d experts %d moe-every %d)\n",
              path, a->vocab, a->seq, a->layers, a->hidden, a->heads, a->ffn,
              a->experts, a->moe_every, b->vocab, b->seq, b->layers, b->hidden,
              b->heads, b->ffn, b->experts, b->moe_every);
    return ncclInvalidArgument;
  }
  if (h.step >= c->steps) {
    if (talk)
      fprintf(stderr,
              "weft-train: --resume %s: the checkpoint is at step %lld; "
              "--steps %d leaves nothing to do\n",
              path, (long long)h.step, c->steps);
    return ncclInvalidArgument;
  }
  long global = (long)c->dp * c->grad_accum * c->batch;
  if (talk && h.global_batch != global)
    printf("note: the checkpoint was trained with %lld sequences per step, "
           "this run takes %ld\n",
           (long long)h.global_batch, global);
  size_t full_n = (size_t)h.nparams, local_n = gpt_local_count(t->model);
  float *full = malloc(3 * full_n * sizeof(float)),
        *local = malloc(local_n * sizeof(float));
  ncclResult_t res = ncclSuccess;
  if (full == NULL || local == NULL) {
    res = weft_par_error(ncclSystemError, "out of memory reading %s", path);
  } else if (ckpt_read(path, &h, full, full + full_n, full + 2 * full_n, err,
                       sizeof(err)) != 0) {
    if (talk)
      fprintf(stderr, "weft-train: --resume %s\n", err);
    res = ncclInvalidArgument;
  }
  // Each of parameters, m and v: this rank's TP part of all layers, then
  // this stage's layers of it.
  size_t stage_n = train_pp_stage_count(t);
  float *stage = NULL;
  if (res == ncclSuccess &&
      (stage = malloc(3 * stage_n * sizeof(float))) == NULL)
    res = weft_par_error(ncclSystemError, "out of memory reading %s", path);
  for (int k = 0; k < 3 && res == ncclSuccess; k++) {
    res = gpt_shard_full(t->model, full + k * full_n, local);
    train_pp_select(t, local, stage + k * stage_n);
  }
  size_t dense_n = full_n - gpt_moe_full_count(&c->dims);
  if (res == ncclSuccess) // this rank's experts of this stage
    res = train_moe_load(t, full + dense_n, full + full_n + dense_n,
                         full + 2 * full_n + dense_n, (long)h.adam_steps);
  if (res == ncclSuccess)
    res = weft_dp_load_params(t->dp, stage);
  if (res == ncclSuccess)
    res = weft_dp_load_optim(t->dp, stage + stage_n, stage + 2 * stage_n,
                             (long)h.adam_steps);
  free(full), free(local), free(stage);
  if (res == ncclSuccess)
    *steps_done = (int)h.step;
  return res;
}
