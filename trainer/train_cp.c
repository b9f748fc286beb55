/*
 * train_cp.c — context parallelism in the trainer (--cp P): every rank of
 * a CP group runs the same sequences, each holding its two load-balanced
 * chunks of their positions (parallel/cp.h). The data is filled for the
 * whole sequence and this rank's rows are kept; greedy decoding gathers
 * the next tokens of all rows back from the group. Gradients and losses
 * are averaged over the DP x CP group (train.c, the mesh's dp_cp_comm):
 * each rank's loss is the mean over its rows, all ranks hold as many, so
 * the average is the mean over the whole sequence.
 */
#include <stdlib.h>
#include <string.h>

#include "par_util.h"
#include "train_internal.h"

ncclResult_t train_cp_init(trainer_t *t) {
  const train_cfg_t *c = &t->cfg;
  PAR_CHECK(weft_cp_init(&t->cp, c->cp > 1 ? t->mesh->cp_comm : NULL));
  if (c->cp > 1 && (t->cp_ids = malloc(2 * (size_t)c->dims.seq * c->batch * sizeof(int))) == NULL)
    return weft_par_error(ncclSystemError, "out of memory");
  return ncclSuccess;
}

void train_cp_free(trainer_t *t) {
  weft_cp_free(&t->cp);
  free(t->cp_ids);
}

int train_tokens(const trainer_t *t) { return t->cfg.dims.seq / t->cfg.cp * t->cfg.batch; }

void train_cp_select(trainer_t *t) {
  if (t->cfg.cp == 1) return;
  int S = t->cfg.dims.seq, B = t->cfg.batch;
  weft_cp_select_rows(&t->cp, S, B, sizeof(int), t->ids, t->ids);
  weft_cp_select_rows(&t->cp, S, B, sizeof(int), t->targets, t->targets);
}

int *train_cp_ids(trainer_t *t) { return t->cfg.cp > 1 ? t->cp_ids : t->ids; }

void train_cp_use_ids(trainer_t *t, const int *ids) {
  if (ids != t->ids) weft_cp_select_rows(&t->cp, t->cfg.dims.seq, t->cfg.batch, sizeof(int), ids, t->ids);
}

ncclResult_t train_cp_gather(trainer_t *t, int *rows) {
  if (t->cfg.cp == 1) return ncclSuccess;
  int *work = t->cp_ids + (size_t)t->cfg.dims.seq * t->cfg.batch;
  return weft_cp_gather_rows(&t->cp, t->cfg.dims.seq, t->cfg.batch, sizeof(int), rows, rows, work);
}
