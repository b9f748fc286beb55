/*
 * model_pass.c — forward and backward passes of the GPT model (model.h),
 * and greedy decoding's argmax over vocabulary-parallel logits.
 *
 * The LM head is tied to the token embedding: logits = LNf(x) · E_rᵀ on
 * this rank's vocabulary rows E_r. Its backward is a column-parallel
 * linear's: dE_r = dlogitsᵀ · LNf(x) stays local, the input gradient
 * dlogits · E_r is a partial sum over the group and is all-reduced.
 *
 * A pipeline stage runs its blocks only; the first embeds, the last has
 * the final LayerNorm, the LM head and the loss.
 *
 * Sequence parallelism (model.h): the residual stream is this rank's
 * `rows` = T/tp rows. The LM head needs every row (its vocabulary columns
 * of all tokens), so the final LayerNorm's shard is all-gathered, and the
 * head's input gradient, a partial sum over the vocabulary shards, is
 * reduce-scattered instead of all-reduced. In backward the embedding's
 * output gradient is all-gathered once; the lookup's rows and the
 * position embedding's are then summed over all T rows on every rank, so
 * the replicated position embedding gets its whole gradient without an
 * all-reduce.
 */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "model_internal.h"

static float *at(float *base, size_t per, int i) { return base + per * (size_t)i; }

static ncclResult_t tp_sum(const weft_tp_t *tp, float *buf, size_t n) {
  if (tp->size > 1) PAR_CHECK(ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, tp->comm, NULL));
  return ncclSuccess;
}

// Under sequence parallelism: every rank's `rows` rows into all T rows,
// and this rank's rows of the group sum of T rows.
static ncclResult_t tp_gather(const weft_tp_t *tp, const float *shard, float *full, size_t n) {
  PAR_CHECK(ncclAllGather(shard, full, n, ncclFloat32, tp->comm, NULL));
  return ncclSuccess;
}

static ncclResult_t tp_scatter(const weft_tp_t *tp, const float *full, float *shard, size_t n) {
  PAR_CHECK(ncclReduceScatter(full, shard, n, ncclFloat32, ncclSum, tp->comm, NULL));
  return ncclSuccess;
}

static int sequence_parallel(const gpt_t *m) { return m->tp.sequence_parallel && m->tp.size > 1; }

static void add(float *y, const float *x, size_t n) {
  for (size_t i = 0; i < n; i++) y[i] += x[i];
}

// Where block l's activations live: its own slot, or the one slot that
// recomputation reuses.
static int slot(const gpt_t *m, int l) { return m->slots == 1 ? 0 : l; }

// Block l from its input x[l] to x[l+1]. Run again in backward when
// recomputing: the same arithmetic, so the same bits.
static ncclResult_t block_forward(gpt_t *m, const gpt_store_t *st, int l, const float *p) {
  int h = m->d.hidden, T = m->T, R = m->rows, s = slot(m, l);
  size_t rh = (size_t)R * h;
  const float *x = at(m->x, rh, l);
  float *mid = at(m->xmid, rh, s), *out = at(m->x, rh, l + 1);
  float *ln1 = at(m->ln_out, rh, 2 * s), *ln2 = at(m->ln_out, rh, 2 * s + 1);
  PAR_CHECK(weft_tp_layernorm_forward(&m->tp, h, p, R, x, ln1, at(m->ln_acts, m->ln_na, 2 * s)));
  PAR_CHECK(gpt_attn_forward(m, p + m->attn_off, ln1, mid, at(m->attn_acts, m->attn_na, s)));
  add(mid, x, rh);
  PAR_CHECK(weft_tp_layernorm_forward(&m->tp, h, p + m->ln2_off, R, mid, ln2, at(m->ln_acts, m->ln_na, 2 * s + 1)));
  if (gpt_is_moe(&m->d, m->stage.first + l))  // router and experts in the MLP's place
    PAR_CHECK(gpt_moe_forward(m, st, m->stage.first + l, s, p + m->mlp_off, ln2, out, at(m->mlp_acts, m->mlp_na, s)));
  else
    PAR_CHECK(weft_tp_mlp_forward(&m->tp, h, m->d.ffn, p + m->mlp_off, T, ln2, out, at(m->mlp_acts, m->mlp_na, s)));
  add(out, mid, rh);
  return ncclSuccess;
}

ncclResult_t gpt_forward(gpt_t *m, const gpt_store_t *st, const int *ids, const int *targets, float *loss) {
  return gpt_forward_stage(m, st, ids, targets, NULL, NULL, loss);
}

// Block l (global) of this stage: its activations sit at l - first.
ncclResult_t gpt_forward_stage(gpt_t *m, const gpt_store_t *st, const int *ids, const int *targets, const float *in,
                               float *out, float *loss) {
  int h = m->d.hidden, T = m->T, R = m->rows, L = m->d.layers, b0 = m->stage.first, nb = m->stage.last - b0;
  size_t th = (size_t)T * h, rh = (size_t)R * h;
  float *p;
  if ((!m->stage.embed && in == NULL) || (!m->stage.head && out == NULL))
    PAR_INVALID("gpt_forward_stage: a stage without %s needs `%s`", m->stage.embed ? "the head" : "embeddings",
                m->stage.embed ? "out" : "in");
  if (m->stage.embed) {
    memcpy(m->ids, ids, (size_t)T * sizeof(int));
    PAR_CHECK(st->params(st->ctx, 0, 1, &p));
    PAR_CHECK(weft_tp_embed_forward(&m->tp, m->d.vocab, h, p, T, ids, m->x, m->work + th));  // SP: to the shard
    const float *wpe = p + (size_t)m->vrows * h;
    int row0 = sequence_parallel(m) ? m->tp.rank * R : 0;  // this shard's first row of the T
    for (int r = 0; r < R; r++) add(m->x + (size_t)r * h, wpe + (size_t)gpt_row_position(m, row0 + r) * h, (size_t)h);
    PAR_CHECK(st->release(st->ctx, 0));
  } else {
    memcpy(m->x, in, rh * sizeof(float));
  }
  for (int l = 0; l < nb; l++) {
    PAR_CHECK(st->params(st->ctx, b0 + l + 1, b0 + l + 2, &p));
    PAR_CHECK(block_forward(m, st, l, p));
    PAR_CHECK(st->release(st->ctx, b0 + l + 1));
  }
  m->has_targets = m->stage.head && targets != NULL;
  if (!m->stage.head) {
    memcpy(out, at(m->x, rh, nb), rh * sizeof(float));
    return ncclSuccess;
  }
  if (targets != NULL) memcpy(m->targets, targets, (size_t)T * sizeof(int));
  float *lnf = sequence_parallel(m) ? m->lnf_out + th : m->lnf_out;  // this rank's rows
  PAR_CHECK(st->params(st->ctx, L + 1, 0, &p));
  PAR_CHECK(weft_tp_layernorm_forward(&m->tp, h, p, R, at(m->x, rh, nb), lnf, at(m->ln_acts, m->ln_na, 2 * m->slots)));
  PAR_CHECK(st->release(st->ctx, L + 1));
  if (sequence_parallel(m)) PAR_CHECK(tp_gather(&m->tp, lnf, m->lnf_out, rh));
  PAR_CHECK(st->params(st->ctx, 0, -1, &p));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, m->vrows, h, 1.0f, m->lnf_out, h, p, h, 0.0f, m->logits,
              m->vrows);
  PAR_CHECK(st->release(st->ctx, 0));
  if (targets == NULL) return ncclSuccess;
  float *dlogits = m->logits + (size_t)T * m->vrows, *ce = m->work + 2 * th;
  return weft_tp_vocab_cross_entropy(&m->tp, m->d.vocab, T, m->logits, targets, loss, dlogits, ce);
}

static ncclResult_t block_backward(gpt_t *m, const gpt_store_t *st, int l, const float *p, float *g, float *grad,
                                   float *tmp) {
  int h = m->d.hidden, T = m->T, R = m->rows;
  size_t rh = (size_t)R * h;
  // The last block's activations are still in the slot from the forward.
  if (m->stage.recompute && l < m->stage.last - m->stage.first - 1) PAR_CHECK(block_forward(m, st, l, p));
  int block = m->stage.first + l;
  l = slot(m, l);
  if (gpt_is_moe(&m->d, block))
    PAR_CHECK(gpt_moe_backward(m, st, block, l, p + m->mlp_off, g + m->mlp_off, grad, tmp,
                               at(m->mlp_acts, m->mlp_na, l)));
  else
    PAR_CHECK(weft_tp_mlp_backward(&m->tp, h, m->d.ffn, p + m->mlp_off, g + m->mlp_off, T, grad, tmp,
                                   at(m->mlp_acts, m->mlp_na, l)));
  PAR_CHECK(weft_tp_layernorm_backward(&m->tp, h, p + m->ln2_off, g + m->ln2_off, R, tmp, tmp,
                                       at(m->ln_acts, m->ln_na, 2 * l + 1)));
  add(grad, tmp, rh);
  PAR_CHECK(gpt_attn_backward(m, p + m->attn_off, g + m->attn_off, grad, tmp, at(m->attn_acts, m->attn_na, l)));
  PAR_CHECK(weft_tp_layernorm_backward(&m->tp, h, p, g, R, tmp, tmp, at(m->ln_acts, m->ln_na, 2 * l)));
  add(grad, tmp, rh);
  return ncclSuccess;
}

ncclResult_t gpt_backward(gpt_t *m, const gpt_store_t *st) { return gpt_backward_stage(m, st, NULL, NULL); }

ncclResult_t gpt_backward_stage(gpt_t *m, const gpt_store_t *st, const float *dout, float *din) {
  int h = m->d.hidden, T = m->T, R = m->rows, L = m->d.layers, V = m->vrows, b0 = m->stage.first,
      nb = m->stage.last - b0;
  size_t th = (size_t)T * h, rh = (size_t)R * h;
  float *grad = m->work, *tmp = m->work + th, *dlogits = m->logits + (size_t)T * V, *p, *g;
  int sp = sequence_parallel(m);
  if ((!m->stage.head && dout == NULL) || (!m->stage.embed && din == NULL))
    PAR_INVALID("gpt_backward_stage: a middle stage needs dout and din");
  if (m->stage.head) {
    if (!m->has_targets) PAR_INVALID("gpt_backward: the last forward had no targets");
    PAR_CHECK(st->params(st->ctx, 0, L + 1, &p));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, h, V, 1.0f, dlogits, V, p, h, 0.0f, sp ? tmp : grad, h);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, V, h, T, 1.0f, dlogits, V, m->lnf_out, h, 0.0f, m->dwte, h);
    PAR_CHECK(st->release(st->ctx, 0));
    PAR_CHECK(sp ? tp_scatter(&m->tp, tmp, grad, rh) : tp_sum(&m->tp, grad, th));
    if (!m->stage.embed) {  // the tied weight's LM-head part, on the last stage
      PAR_CHECK(st->grads(st->ctx, 0, &g));
      add(g, m->dwte, (size_t)V * h);
      PAR_CHECK(st->grads_done(st->ctx, 0));
    }
    PAR_CHECK(st->params(st->ctx, L + 1, b0 + nb, &p));
    PAR_CHECK(st->grads(st->ctx, L + 1, &g));
    PAR_CHECK(weft_tp_layernorm_backward(&m->tp, h, p, g, R, grad, grad, at(m->ln_acts, m->ln_na, 2 * m->slots)));
    PAR_CHECK(st->grads_done(st->ctx, L + 1));
    PAR_CHECK(st->release(st->ctx, L + 1));
  } else {
    memcpy(grad, dout, rh * sizeof(float));
  }
  for (int l = nb - 1; l >= 0; l--) {
    PAR_CHECK(st->params(st->ctx, b0 + l + 1, b0 + l, &p));
    PAR_CHECK(st->grads(st->ctx, b0 + l + 1, &g));
    PAR_CHECK(block_backward(m, st, l, p, g, grad, tmp));
    PAR_CHECK(st->grads_done(st->ctx, b0 + l + 1));
    PAR_CHECK(st->release(st->ctx, b0 + l + 1));
  }
  if (!m->stage.embed) {
    memcpy(din, grad, rh * sizeof(float));
    return ncclSuccess;
  }
  weft_tp_t rows_all = m->tp;  // the lookup's gradient from all T rows
  rows_all.sequence_parallel = 0;
  if (sp) PAR_CHECK(tp_gather(&m->tp, grad, tmp, rh));
  const float *dy = sp ? tmp : grad;
  PAR_CHECK(st->grads(st->ctx, 0, &g));
  if (m->stage.head) add(g, m->dwte, (size_t)V * h);
  PAR_CHECK(weft_tp_embed_backward(&rows_all, m->d.vocab, h, g, T, m->ids, dy, NULL));
  float *gpe = g + (size_t)V * h;
  for (int r = 0; r < T; r++) add(gpe + (size_t)gpt_row_position(m, r) * h, dy + (size_t)r * h, (size_t)h);
  PAR_CHECK(st->grads_done(st->ctx, 0));
  return ncclSuccess;
}

ncclResult_t gpt_argmax(gpt_t *m, int *out) {
  int T = m->T, V = m->vrows, lo = m->tp.rank * V, n = m->d.vocab - lo < V ? m->d.vocab - lo : V;
  float *mine = m->work + 2 * (size_t)T * m->d.hidden + 3 * (size_t)T, *all = mine + 2 * (size_t)T;
  for (int t = 0; t < T; t++) {
    const float *row = m->logits + (size_t)t * V;
    int best = 0;
    for (int c = 1; c < n; c++) best = row[c] > row[best] ? c : best;
    mine[2 * t] = n > 0 ? row[best] : -INFINITY;
    mine[2 * t + 1] = (float)(lo + best);
  }
  if (m->tp.size > 1) {
    PAR_CHECK(ncclAllGather(mine, all, 2 * (size_t)T, ncclFloat32, m->tp.comm, NULL));
  } else {
    memcpy(all, mine, 2 * (size_t)T * sizeof(float));
  }
  for (int t = 0; t < T; t++) {
    int best = 0;  // ranks hold increasing ids, so ties go to the lowest id
    for (int r = 1; r < m->tp.size; r++)
      if (all[2 * ((size_t)r * T + t)] > all[2 * (size_t)t + 2 * (size_t)best * T]) best = r;
    out[t] = (int)all[2 * ((size_t)best * T + t) + 1];
  }
  return ncclSuccess;
}
