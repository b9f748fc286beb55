/*
 * test_trainer_optim.c — the trainer's optimiser: one AdamW step of the
 * data-parallel engine (one rank) against the update written out by hand,
 * the gradient norm and clipping, and the warm-up + cosine schedule.
 */
#include <criterion/criterion.h>
#include <math.h>

#include "dp.h"
#include "optim.h"

static weft_dp_t *one_rank_engine(ncclComm_t *comm, size_t n) {
  weft_dp_t *dp = NULL;
  cr_assert_eq(ncclCommInitAll(comm, 1, NULL), ncclSuccess);
  weft_dp_config_t c = {WEFT_DP_DDP, WEFT_DP_FP32, WEFT_DP_AVG_NCCL, 1, 1, &n};
  cr_assert_eq(weft_dp_create(*comm, &c, &dp), ncclSuccess);
  return dp;
}

// Runs one step with gradient g; returns the new parameters in w.
static void step(weft_dp_t *dp, const float *g, size_t n, const weft_adamw_t *opt, float clip, float *w) {
  float *grads;
  cr_assert_eq(weft_dp_begin_micro(dp, 0), ncclSuccess);
  cr_assert_eq(weft_dp_layer_grads(dp, 0, (void **)&grads), ncclSuccess);
  for (size_t i = 0; i < n; i++) grads[i] += g[i];
  cr_assert_eq(weft_dp_layer_grads_done(dp, 0), ncclSuccess);
  if (clip != 1.0f) cr_assert_eq(weft_dp_scale_grads(dp, clip), ncclSuccess);
  cr_assert_eq(weft_dp_step(dp, opt), ncclSuccess);
  cr_assert_eq(weft_dp_read_params(dp, w), ncclSuccess);
}

Test(trainer_optim, adamw_two_steps_by_hand, .timeout = 10) {
  ncclComm_t comm;
  weft_dp_t *dp = one_rank_engine(&comm, 3);
  float w0[3] = {0.5f, -1.0f, 2.0f}, g1[3] = {0.1f, -0.2f, 0.0f}, g2[3] = {-0.3f, 0.4f, 1.0f}, w[3];
  weft_adamw_t opt = {0.01f, 0.9f, 0.95f, 1e-8f, 0.1f};
  cr_assert_eq(weft_dp_load_params(dp, w0), ncclSuccess);
  step(dp, g1, 3, &opt, 1.0f, w);
  // Step 1: m = 0.1 g, v = 0.05 g², m̂ = g, v̂ = g², so the update is lr·(sign(g) + wd·w).
  double expect1[3];
  for (int i = 0; i < 3; i++) {
    double sign = g1[i] > 0 ? 1 : g1[i] < 0 ? -1 : 0, mhat = g1[i], vhat = (double)g1[i] * g1[i];
    expect1[i] = w0[i] - 0.01 * (mhat / (sqrt(vhat) + 1e-8) + 0.1 * w0[i]);
    cr_expect(fabs(expect1[i] - (w0[i] - 0.01 * (sign + 0.1 * w0[i]))) < 1e-6);
    cr_expect(fabs(w[i] - expect1[i]) < 1e-6, "step 1, w[%d] = %.8f, expected %.8f", i, w[i], expect1[i]);
  }
  step(dp, g2, 3, &opt, 1.0f, w);
  for (int i = 0; i < 3; i++) {  // step 2, written out: bias corrections 1-0.9², 1-0.95²
    double m = 0.9 * (0.1 * g1[i]) + 0.1 * g2[i], v = 0.95 * (0.05 * g1[i] * g1[i]) + 0.05 * g2[i] * g2[i];
    double mhat = m / (1 - 0.81), vhat = v / (1 - 0.9025);
    double expect = expect1[i] - 0.01 * (mhat / (sqrt(vhat) + 1e-8) + 0.1 * expect1[i]);
    cr_expect(fabs(w[i] - expect) < 2e-6, "step 2, w[%d] = %.8f, expected %.8f", i, w[i], expect);
  }
  weft_dp_destroy(dp);
  ncclCommDestroy(comm);
}

Test(trainer_optim, gradient_norm_and_clipping, .timeout = 10) {
  ncclComm_t comm;
  weft_dp_t *dp = one_rank_engine(&comm, 2);
  float w0[2] = {0, 0}, g[2] = {3.0f, 4.0f}, weight[2] = {1.0f, 0.5f}, *grads, w[2];
  cr_assert_eq(weft_dp_load_params(dp, w0), ncclSuccess);
  cr_assert_eq(weft_dp_begin_micro(dp, 0), ncclSuccess);
  cr_assert_eq(weft_dp_layer_grads(dp, 0, (void **)&grads), ncclSuccess);
  grads[0] = g[0], grads[1] = g[1];
  cr_assert_eq(weft_dp_layer_grads_done(dp, 0), ncclSuccess);
  double sumsq = 0;
  cr_assert_eq(weft_dp_grad_sumsq(dp, NULL, &sumsq), ncclSuccess);
  cr_expect(fabs(sumsq - 25.0) < 1e-9, "|g|^2 = %g", sumsq);
  sumsq = 0;
  cr_assert_eq(weft_dp_grad_sumsq(dp, weight, &sumsq), ncclSuccess);
  cr_expect(fabs(sumsq - (9.0 + 8.0)) < 1e-9, "weighted |g|^2 = %g", sumsq);
  cr_expect_float_eq(clip_factor(5.0, 1.0f), 0.2f, 1e-7);
  cr_expect_eq(clip_factor(0.5, 1.0f), 1.0f);
  cr_expect_eq(clip_factor(5.0, 0.0f), 1.0f);
  cr_expect_eq(weft_dp_scale_grads(dp, 0.0f), ncclInvalidArgument);
  // SGD-like check of the scaling: with clipping, Adam's first step is still lr·sign(g) (scale invariant) ...
  weft_adamw_t opt = {0.1f, 0.9f, 0.95f, 1e-8f, 0.0f};
  cr_assert_eq(weft_dp_scale_grads(dp, 0.2f), ncclSuccess);
  cr_assert_eq(weft_dp_step(dp, &opt), ncclSuccess);
  cr_assert_eq(weft_dp_read_params(dp, w), ncclSuccess);
  cr_expect(fabs(w[0] + 0.1f) < 1e-6 && fabs(w[1] + 0.1f) < 1e-6);
  // ... and the clipped gradient is what the moments saw: a second, unclipped step of -g
  // gives m = 0.9·0.1·0.2g − 0.1g, v = 0.95·0.05·(0.2g)² + 0.05 g².
  float neg[2] = {-3.0f, -4.0f};
  step(dp, neg, 2, &opt, 1.0f, w);
  for (int i = 0; i < 2; i++) {
    double gi = g[i], m = 0.09 * 0.2 * gi - 0.1 * gi, v = 0.0475 * 0.04 * gi * gi + 0.05 * gi * gi;
    double expect = -0.1 - 0.1 * (m / 0.19) / (sqrt(v / 0.0975) + 1e-8);
    cr_expect(fabs(w[i] - expect) < 1e-6, "w[%d] = %.8f, expected %.8f", i, w[i], expect);
  }
  weft_dp_destroy(dp);
  ncclCommDestroy(comm);
}

Test(trainer_optim, warmup_then_cosine, .timeout = 10) {
  lr_schedule_t s = {1.0f, 0.1f, 10, 110};
  cr_expect_float_eq(lr_at(&s, 0), 0.1f, 1e-7);
  cr_expect_float_eq(lr_at(&s, 4), 0.5f, 1e-7);
  cr_expect_float_eq(lr_at(&s, 9), 1.0f, 1e-7);
  cr_expect_float_eq(lr_at(&s, 10), 1.0f, 1e-6);    // cosine starts at the peak
  cr_expect_float_eq(lr_at(&s, 109), 0.1f, 1e-6);   // and ends at min_lr on the last step
  float mid = lr_at(&s, 10 + 99 / 2);
  cr_expect(fabs(mid - 0.55f) < 0.01f, "half way: %g", mid);
  for (int i = 11; i < 110; i++) cr_expect(lr_at(&s, i) <= lr_at(&s, i - 1));
}
