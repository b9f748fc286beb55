/*
 * test_trainer_moe.c — the GPT with mixture-of-experts blocks (one rank):
 * every parameter's gradient, routers and experts included, against
 * central finite differences of the training objective (cross-entropy
 * plus the load-balancing losses), with top-2 and top-1 routing, a
 * capacity that drops and MoE in every second block; the full vector's
 * layout (experts after the final LayerNorm) and the sharding of experts
 * and its inverse.
 *
 * Bound: as test_trainer_grad.c, norm-wise relative error <= 1e-2 per
 * layer, with ε = 3e-3: rounding the float objective (≈ 2.5, ulp 2.4e-7)
 * costs ≈ 4e-5 absolute per entry, the truncation O(ε²). Routing is a step
 * function: a step that moves a token across a top-k or capacity boundary
 * makes the objective jump, which the second difference f(+ε) - 2 f(0) +
 * f(-ε) shows (about 1e-2 then, below 1e-4 where smooth) whatever the
 * backward says; such entries are skipped, and at most 1% may be.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "model_moe.h"
#include "moe.h"
#include "tp.h"

static unsigned long long rng_state = 7;
static float uniform(void) {  // [-1, 1)
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)(rng_state >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

typedef struct {
  float **p, **g;
} flat_t;
static ncclResult_t flat_params(void *c, int l, int next, float **p) {
  (void)next;
  *p = ((flat_t *)c)->p[l];
  return ncclSuccess;
}
static ncclResult_t flat_release(void *c, int l) { (void)c, (void)l; return ncclSuccess; }
static ncclResult_t flat_grads(void *c, int l, float **g) {
  *g = ((flat_t *)c)->g[l];
  return ncclSuccess;
}
static ncclResult_t flat_done(void *c, int l) { (void)c, (void)l; return ncclSuccess; }

static double objective(gpt_t *m, const gpt_store_t *st, const int *ids, const int *targets) {
  float loss;
  cr_assert_eq(gpt_forward(m, st, ids, targets, &loss), ncclSuccess);
  return (double)loss + gpt_moe_last_aux(m);
}

static void whole_model(int topk, float capacity, int every) {
  gpt_dims_t d = {11, 4, 4, 8, 2, 16, 4, topk, every, capacity, 0.05f};
  int batch = 2, tokens = d.seq * batch, nmoe = gpt_moe_blocks(&d), nl = d.layers + 2 + nmoe;
  weft_tp_t tp;
  cr_assert_eq(weft_tp_init(&tp, NULL, 0), ncclSuccess);
  gpt_t *m;
  cr_assert_eq(gpt_create(&d, batch, &tp, &m), ncclSuccess);
  size_t n = gpt_full_count(&d);
  cr_assert_eq(n, gpt_local_count(m) + (size_t)nmoe * gpt_expert_layer_size(m), "one rank holds everything");
  float *params = malloc(n * sizeof(float)), *grads = calloc(n, sizeof(float)), *pp[16], *gp[16];
  gpt_init_full(&d, 7, params);
  for (size_t i = 0; i < n; i++) params[i] += 0.3f * uniform();  // every gradient well above rounding
  size_t off = 0, sizes[16];
  for (int l = 0; l < nl; l++) {
    sizes[l] = l < gpt_nlayers(m) ? gpt_layer_size(m, l) : gpt_expert_layer_size(m);
    cr_assert_eq(sizes[l], gpt_full_layer_size(&d, l), "layer %d", l);
    pp[l] = params + off, gp[l] = grads + off;
    off += sizes[l];
  }
  cr_assert_eq(off, n);
  for (int b = 0, j = 0; b < d.layers; b++)
    cr_expect_eq(gpt_expert_layer(&d, b), gpt_is_moe(&d, b) ? d.layers + 2 + j++ : -1, "block %d", b);
  flat_t ctx = {pp, gp};
  gpt_store_t st = {flat_params, flat_release, flat_grads, flat_done, &ctx};
  int ids[8], targets[8];
  for (int i = 0; i < tokens; i++) ids[i] = (3 * i + 1) % d.vocab, targets[i] = (5 * i + 2) % d.vocab;
  double base = objective(m, &st, ids, targets);
  cr_assert_eq(gpt_backward(m, &st), ncclSuccess);
  cr_expect(gpt_moe_aux_take(m) > 0, "the backward counted the load-balancing loss");
  const float eps = 3e-3f;
  int checked = 0, skipped = 0;
  for (int l = 0; l < nl; l++) {
    double diff2 = 0, norm2 = 0;
    for (size_t i = 0; i < sizes[l]; i++) {
      float keep = pp[l][i];
      pp[l][i] = keep + eps;
      double up = objective(m, &st, ids, targets);
      pp[l][i] = keep - eps;
      double down = objective(m, &st, ids, targets);
      pp[l][i] = keep;
      double num = (up - down) / (2.0 * eps), ana = gp[l][i], second = fabs(up - 2 * base + down);
      if (second > 1e-3) {  // a jump (smooth ones stay below 1e-4): a routing boundary crossed
        skipped++;
        continue;
      }
      diff2 += (num - ana) * (num - ana), norm2 += ana * ana;
      checked++;
    }
    double rel = sqrt(diff2) / (sqrt(norm2) + 1e-12);
    cr_expect(norm2 > 0, "top-%d layer %d: the analytic gradient is zero", topk, l);
    cr_expect(rel <= 1e-2, "top-%d capacity %g every %d: layer %d: relative error %.3g", topk, capacity, every, l,
              rel);
  }
  cr_expect(skipped * 100 < checked, "top-%d: %d entries checked, %d skipped at a routing boundary", topk, checked,
            skipped);
  gpt_destroy(m);
  free(params), free(grads);
}

Test(trainer_moe, whole_model_top2_capacity, .timeout = 60) { whole_model(2, 1.0f, 1); }
Test(trainer_moe, whole_model_top1_dropless_every_2nd_block, .timeout = 60) { whole_model(1, 0.0f, 2); }

// A MoE block's experts: sharded over EP 2 x TP 2 and put back, they are
// the full layer again (b2 from TP rank 0 only). Sharding does not
// communicate; the groups only give each (ep, tp) rank its coordinates.
Test(trainer_moe, expert_shard_round_trip, .timeout = 30) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 0);
  gpt_dims_t d = {11, 4, 2, 8, 2, 16, 4, 2, 1, 0.0f, 0.0f};
  size_t nf = gpt_full_layer_size(&d, d.layers + 2);
  float *full = malloc(nf * sizeof(float)), *back = calloc(nf, sizeof(float));
  for (size_t i = 0; i < nf; i++) full[i] = (float)i + 1;
  ncclComm_t tpc[2], epc[2];
  cr_assert_eq(ncclCommInitAll(tpc, 2, NULL), ncclSuccess);
  cr_assert_eq(ncclCommInitAll(epc, 2, NULL), ncclSuccess);
  for (int ep = 0; ep < 2; ep++)
    for (int r = 0; r < 2; r++) {
      weft_tp_t tp;
      cr_assert_eq(weft_tp_init(&tp, tpc[r], 0), ncclSuccess);
      gpt_t *m;
      cr_assert_eq(gpt_create_ep(&d, 2, &tp, &(gpt_stage_t){0, d.layers, 1, 1, 0}, epc[ep], &m), ncclSuccess);
      cr_assert_eq(gpt_ep_rank(m), ep);
      size_t n = gpt_expert_layer_size(m);
      float *local = malloc(n * sizeof(float));
      cr_assert_eq(gpt_expert_shard(m, full, local), ncclSuccess);
      cr_assert_eq(gpt_expert_unshard(m, local, back, r == 0), ncclSuccess);
      free(local);
      gpt_destroy(m);
    }
  cr_expect_eq(memcmp(full, back, nf * sizeof(float)), 0, "sharded and unsharded experts differ");
  for (int i = 0; i < 2; i++) ncclCommDestroy(tpc[i]), ncclCommDestroy(epc[i]);
  free(full), free(back);
}
