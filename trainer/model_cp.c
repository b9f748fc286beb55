/*
 * model_cp.c — context parallelism in the GPT model (parallel/cp.h): with
 * a CP group of P ranks the model holds seq / P positions of each
 * sequence, rank r's chunks r and 2P-1-r of 2P (causal load balancing).
 * Its rows take their position embeddings from those positions, and
 * attention runs over the ring (weft_cp_attn_*); every per-token layer
 * (LayerNorm, MLP, LM head, cross-entropy) is unchanged on the local rows.
 * With one rank the plain layer (weft_tp_attn_*) runs, so the arithmetic
 * is bitwise that of a model without context parallelism.
 */
#include "model_internal.h"

int gpt_row_position(const gpt_t *m, int row) {
  int local = row / m->batch;
  return m->cp.size > 1 ? weft_cp_position(&m->cp, m->d.seq, local) : local;
}

size_t gpt_attn_nacts(const gpt_t *m) {
  return m->cp.size > 1 ? weft_cp_attn_nacts(&m->cp, &m->tp, &m->ad) : weft_tp_attn_nacts(&m->tp, &m->ad);
}

ncclResult_t gpt_attn_forward(gpt_t *m, const float *p, const float *x, float *y, float *acts) {
  if (m->cp.size > 1) return weft_cp_attn_forward(&m->cp, &m->tp, &m->ad, p, x, y, acts);
  return weft_tp_attn_forward(&m->tp, &m->ad, p, x, y, acts);
}

ncclResult_t gpt_attn_backward(gpt_t *m, const float *p, float *g, const float *dy, float *dx, float *acts) {
  if (m->cp.size > 1) return weft_cp_attn_backward(&m->cp, &m->tp, &m->ad, p, g, dy, dx, acts);
  return weft_tp_attn_backward(&m->tp, &m->ad, p, g, dy, dx, acts);
}
