/*
 * plan_stage.c — which layers each pipeline stage holds.
 *
 * p stages share L layers as evenly as whole layers allow: every stage gets
 * floor(L/p) or one more. The extra layers go to the middle stages first,
 * because the first stage also runs the embedding and the last the output
 * layer and the loss; when p divides L + 2 this is exactly Llama 3's layout
 * (Llama Team 2024, section 3.3.2: one layer fewer on the first and the
 * last stage). A mixture-of-experts model's dense layers (the first
 * dense_layers, and all but every moe_every-th) land wherever the split
 * puts them, so stages can differ in MoE layers too.
 */
#include "plan_internal.h"

static int stage_count(int L, int p, int i) {
  int base = L / p, extra = L % p;
  if (extra == 0) return base;
  // Order of preference for the extra layers: stages 1 .. p-2, then 0, then p-1.
  int rank = i == 0 ? p - 2 : i == p - 1 ? p - 1 : i - 1;
  if (p == 1) rank = 0;
  return base + (rank < extra ? 1 : 0);
}

int plan_stage_split(const plan_model_t *m, int p, int i, plan_stage_t *out) {
  int L = m->layers;
  if (p < 1 || p > L || i < 0 || i >= p) return -1;
  int first = 0;
  for (int k = 0; k < i; k++) first += stage_count(L, p, k);
  out->first = first;
  out->count = stage_count(L, p, i);
  out->moe = 0;
  for (int k = first; k < first + out->count; k++) out->moe += plan_model_layer_is_moe(m, k);
  return 0;
}

int plan_stage_max_layers(const plan_model_t *m, int p) {
  if (p < 1 || p > m->layers) return 0;
  return (m->layers + p - 1) / p;
}
