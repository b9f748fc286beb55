/*
 * train_vpp.c — the interleaved pipeline schedule in the trainer
 * (--schedule interleaved --chunks V, parallel/pp_interleaved.h): each of
 * the P stages holds V model chunks, the L blocks cut into P·V equal runs
 * and chunk v of stage s being run v·P + s, so stage 0 embeds (run 0) and
 * stage P-1 has the head (run P·V-1). The stage's data-parallel engine
 * holds the union of its chunks' layers; every chunk has its own models
 * (activations), one per micro-batch it keeps in flight.
 *
 * The engine's micro-batch counter: backwards of several chunks
 * interleave, but the first backward of micro-batch m is always chunk
 * V-1's and they come in micro-batch order, so the counter is begun there.
 * DDP and ZeRO-1 reduce a layer's gradient at its grads_done while the
 * counter is at the last micro-batch; under interleaving a chunk may still
 * add earlier micro-batches then, so the store passes on grads_done only
 * for each chunk's last micro-batch (for the others it is a no-op in those
 * stages anyway: dp.h). ZeRO-2/3 reduce every micro-batch as they come.
 * Each layer still adds its micro-batches in order, so the arithmetic is
 * 1F1B's.
 */
#include <stdlib.h>
#include <string.h>

#include "par_util.h"
#include "pp_interleaved.h"
#include "train_internal.h"
#include "train_moe.h"

static int interleaved(const train_cfg_t *c) { return c->schedule == WEFT_PP_INTERLEAVED; }

ncclResult_t train_vpp_check(const train_cfg_t *c) {
  if (!interleaved(c)) {
    if (c->chunks != 1) PAR_INVALID("--chunks %d needs --schedule interleaved", c->chunks);
    return ncclSuccess;
  }
  int P = c->pp, V = c->chunks, L = c->dims.layers, M = c->grad_accum;
  if (P < 2) PAR_INVALID("--schedule interleaved needs a pipeline: --pp is %d, it must be at least 2", P);
  if (V < 1) PAR_INVALID("--chunks %d: must be at least 1", V);
  if (L % P != 0)
    PAR_INVALID("--schedule interleaved: --layers %d does not split into --pp %d stages of equal model chunks", L, P);
  if ((L / P) % V != 0)
    PAR_INVALID("--schedule interleaved: --chunks %d does not divide the %d layers per stage (--layers %d / --pp %d)",
                V, L / P, L, P);
  if (M % P != 0)
    PAR_INVALID("--schedule interleaved: --micro-batches %d is not a multiple of --pp %d (micro-batches go through "
                "the stages in groups of %d)", M, P, P);
  return ncclSuccess;
}

ncclResult_t train_vpp_plan(trainer_t *t) {
  const train_cfg_t *c = &t->cfg;
  int P = c->pp, s = t->mesh->pp_rank;
  t->chunks = interleaved(c) ? c->chunks : 1;
  t->chunk = malloc((size_t)t->chunks * sizeof(gpt_stage_t));
  int *held = malloc((size_t)t->chunks * sizeof(int));
  ncclResult_t res = ncclSuccess;
  if (t->chunk == NULL || held == NULL) {
    res = weft_par_error(ncclSystemError, "out of memory");
    goto out;
  }
  if (!interleaved(c)) {
    t->chunk[0] = t->stage;
    goto out;
  }
  int V = t->chunks, nv = P * V, per = c->dims.layers / nv;
  for (int v = 0; v < V; v++) {
    int vs = v * P + s;
    t->chunk[v] = (gpt_stage_t){vs * per, (vs + 1) * per, vs == 0, vs == nv - 1, c->recompute};
  }
  // The stage as a whole: its first and last block, embeddings on the first stage, the head on the last.
  t->stage = (gpt_stage_t){t->chunk[0].first, t->chunk[V - 1].last, s == 0, s == P - 1, c->recompute};
  PAR_CHECK_GOTO(weft_pp_interleaved_in_flight(P, s, V, c->grad_accum, held), res, out);
  t->slots = 1;
  for (int v = 0; v < V; v++) t->slots = held[v] > t->slots ? held[v] : t->slots;
out:
  free(held);
  return res;
}

int train_vpp_holds(const trainer_t *t, int block) {
  for (int v = 0; v < t->chunks; v++)
    if (block >= t->chunk[v].first && block < t->chunk[v].last) return 1;
  return 0;
}

static gpt_t *chunk_model(trainer_t *t, int chunk, int micro) {
  return t->models[(size_t)chunk * t->slots + micro % t->slots];
}

static ncclResult_t chunk_forward(void *user, int chunk, int micro, const float *in, float *out) {
  trainer_t *t = user;
  const gpt_stage_t *st = &t->chunk[chunk];
  float loss = 0;
  if (st->embed || st->head) trainer_fill_batch(t, DATA_TRAIN, t->batch_first + (long)micro * t->cfg.batch);
  PAR_CHECK(gpt_forward_stage(chunk_model(t, chunk, micro), &t->store, t->ids, t->targets, in, out, &loss));
  if (st->head) t->loss_sum += loss;
  return ncclSuccess;
}

static ncclResult_t chunk_backward(void *user, int chunk, int micro, const float *dout, float *din) {
  trainer_t *t = user;
  if (micro > t->micro_begun) {
    if (micro != t->micro_begun + 1)
      return weft_par_error(ncclInternalError, "interleaved pipeline: micro-batch %d begins after %d", micro,
                            t->micro_begun);
    PAR_CHECK(weft_dp_begin_micro(t->dp, micro));
    PAR_CHECK(train_moe_begin_micro(t, micro));  // the experts' engine, the same way
    t->micro_begun = micro;
  }
  t->defer_done = t->cfg.zero < 2 && micro < t->cfg.grad_accum - 1;
  ncclResult_t res = gpt_backward_stage(chunk_model(t, chunk, micro), &t->store, dout, din);
  t->defer_done = 0;
  return res;
}

ncclResult_t train_vpp_run(trainer_t *t, size_t act) {
  weft_pp_chunk_stage_t fns = {chunk_forward, chunk_backward, t};
  t->micro_begun = -1;
  return weft_pp_interleaved_run(t->mesh->pp_comm, t->chunks, t->cfg.grad_accum, act, &fns, NULL);
}

// Evaluation: virtual stages one after another (receive, forward, send),
// V times round the pipeline.
ncclResult_t train_vpp_forward(trainer_t *t, const int *targets, float *loss) {
  int P = t->cfg.pp, s = t->mesh->pp_rank, nv = P * t->chunks;
  size_t n = (size_t)gpt_rows(t->model) * t->cfg.dims.hidden;
  ncclComm_t pp = t->mesh->pp_comm;
  float l = 0;
  for (int v = 0; v < t->chunks; v++) {
    int vs = v * P + s;
    if (vs > 0) PAR_CHECK(ncclRecv(t->act, n, ncclFloat32, (s + P - 1) % P, pp, NULL));
    PAR_CHECK(gpt_forward_stage(chunk_model(t, v, 0), &t->store, t->ids, targets, t->act, t->act, &l));
    if (vs < nv - 1) PAR_CHECK(ncclSend(t->act, n, ncclFloat32, (s + 1) % P, pp, NULL));
  }
  if (targets != NULL) {
    PAR_CHECK(ncclAllReduce(&l, &l, 1, ncclFloat32, ncclSum, pp, NULL));  // from the last stage
    *loss = l;
  }
  return ncclSuccess;
}
