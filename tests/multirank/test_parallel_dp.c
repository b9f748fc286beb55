/*
 * test_parallel_dp.c — data parallelism over a flat buffer: DDP against a
 * serial AdamW on the averaged gradient, ZeRO-1/2/3 after 10 AdamW steps
 * against DDP (fp32: within 1e-6; both averaging modes; gradient
 * accumulation; layers whose last shard is uneven), bf16 mixed precision,
 * the live engines' memory against the paper's formulas, and bad input.
 *
 * The "model" is a list of layers whose gradient is tanh(w - target),
 * with targets that differ by rank, micro-batch, layer and element, so
 * the result depends on every rank's contribution. Every rank can compute
 * every rank's targets, which gives the serial reference.
 */
#include <criterion/criterion.h>

#include "dp.h"
#include "harness.h"

enum { NLAYERS = 4, STEPS = 10 };
static const size_t layer_sizes[NLAYERS] = {37, 64, 5, 101};  // uneven on 3 and 4 ranks
static const weft_adamw_t adamw = {.lr = 0.02f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f, .weight_decay = 0.1f};

static size_t psi(void) {
  size_t n = 0;
  for (int l = 0; l < NLAYERS; l++) n += layer_sizes[l];
  return n;
}

static float target(int rank, int micro, int layer, size_t i) {
  uint64_t h = weft_test_mix64(((uint64_t)rank << 48) ^ ((uint64_t)micro << 40) ^ ((uint64_t)layer << 32) ^ i);
  return (float)((h >> 40) * (2.0 / 16777216.0) - 1.0);
}

static float initial(size_t i) { return (float)((weft_test_mix64(i + 77) >> 40) * (1.0 / 16777216.0) - 0.5); }

// Trains STEPS steps through the engine's protocol; the full params land in `out`.
static void train(ncclComm_t comm, int rank, weft_dp_stage_t stage, weft_dp_precision_t prec, weft_dp_average_t avg,
                  int accum, float *out) {
  weft_dp_config_t cfg = {stage, prec, avg, accum, NLAYERS, layer_sizes};
  weft_dp_t *dp = NULL;
  WEFT_TEST_CHECK_RES(weft_dp_create(comm, &cfg, &dp), ncclSuccess);
  if (dp == NULL) return;
  float *init = malloc(psi() * sizeof(float)), w[128], gf[128];
  for (size_t i = 0; i < psi(); i++) init[i] = initial(i);
  WEFT_TEST_CHECK_RES(weft_dp_load_params(dp, init), ncclSuccess);
  for (int step = 0; step < STEPS; step++) {
    for (int m = 0; m < accum; m++) {
      WEFT_TEST_CHECK_RES(weft_dp_begin_micro(dp, m), ncclSuccess);
      for (int l = 0; l < NLAYERS; l++) {  // forward: touch every layer, prefetching the next
        void *p;
        WEFT_TEST_CHECK_RES(weft_dp_layer_params(dp, l, l + 1 < NLAYERS ? l + 1 : -1, &p), ncclSuccess);
        WEFT_TEST_CHECK_RES(weft_dp_layer_release(dp, l), ncclSuccess);
      }
      for (int l = NLAYERS - 1; l >= 0; l--) {
        void *p, *g;
        WEFT_TEST_CHECK_RES(weft_dp_layer_params(dp, l, l - 1, &p), ncclSuccess);
        WEFT_TEST_CHECK_RES(weft_dp_layer_grads(dp, l, &g), ncclSuccess);
        weft_dp_to_float(prec, p, w, layer_sizes[l]);
        for (size_t i = 0; i < layer_sizes[l]; i++) gf[i] = tanhf(w[i] - target(rank, m, l, i));
        weft_dp_add_float(prec, gf, g, layer_sizes[l]);
        WEFT_TEST_CHECK_RES(weft_dp_layer_grads_done(dp, l), ncclSuccess);
        WEFT_TEST_CHECK_RES(weft_dp_layer_release(dp, l), ncclSuccess);
      }
    }
    WEFT_TEST_CHECK_RES(weft_dp_step(dp, &adamw), ncclSuccess);
  }
  WEFT_TEST_CHECK_RES(weft_dp_read_params(dp, out), ncclSuccess);
  // The engine holds exactly what the model says, which is the paper's formula at the padded size.
  weft_dp_memory_t live, model;
  int n = 0;
  ncclCommCount(comm, &n);
  WEFT_TEST_CHECK_RES(weft_dp_memory(dp, &live), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_dp_memory_model(stage, prec, n, NLAYERS, layer_sizes, &model), ncclSuccess);
  WEFT_TEST_CHECK(memcmp(&live, &model, sizeof(live)) == 0, "stage %d: live memory %zu bytes, model %zu", stage,
                  live.total_bytes, model.total_bytes);
  WEFT_TEST_CHECK((double)live.total_bytes == weft_dp_paper_bytes(stage, prec, (double)live.psi_padded, n),
                  "stage %d: %zu bytes", stage, live.total_bytes);
  WEFT_TEST_CHECK_RES(weft_dp_destroy(dp), ncclSuccess);
  free(init);
}

// Serial fp32 reference: AdamW on the gradient averaged over ranks and micro-batches.
static void serial(int nranks, int accum, float *out) {
  size_t n = psi();
  float *m = calloc(n, sizeof(float)), *v = calloc(n, sizeof(float));
  for (size_t i = 0; i < n; i++) out[i] = initial(i);
  for (int step = 1; step <= STEPS; step++) {
    size_t base = 0;
    for (int l = 0; l < NLAYERS; l++, base += layer_sizes[l - 1])
      for (size_t i = 0; i < layer_sizes[l]; i++) {
        double g = 0;
        for (int r = 0; r < nranks; r++)
          for (int k = 0; k < accum; k++) g += tanhf(out[base + i] - target(r, k, l, i));
        float gr = (float)(g / (nranks * accum)), *w = &out[base + i];
        m[base + i] = adamw.beta1 * m[base + i] + (1 - adamw.beta1) * gr;
        v[base + i] = adamw.beta2 * v[base + i] + (1 - adamw.beta2) * gr * gr;
        float mh = m[base + i] / (1 - powf(adamw.beta1, step)), vh = v[base + i] / (1 - powf(adamw.beta2, step));
        *w -= adamw.lr * (mh / (sqrtf(vh) + adamw.eps) + adamw.weight_decay * *w);
      }
  }
  free(m), free(v);
}

static double max_diff(const float *a, const float *b, size_t n) {
  double d = 0;
  for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
  return d;
}

typedef struct {
  weft_dp_precision_t prec;
  int accum;
  double tol_serial, tol_ddp;
} dp_case_t;

static int dp_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  const dp_case_t *c = arg;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return weft_test_failures();
  size_t n = psi();
  float *ddp = calloc(n, sizeof(float)), *ref = calloc(n, sizeof(float)), *z = calloc(n, sizeof(float));
  float *start = calloc(n, sizeof(float));
  train(comm, rank, WEFT_DP_DDP, c->prec, WEFT_DP_AVG_NCCL, c->accum, ddp);
  serial(nranks, c->accum, ref);
  for (size_t i = 0; i < n; i++) start[i] = initial(i);
  WEFT_TEST_CHECK(max_diff(ddp, start, n) > 0.05, "training did not move the parameters");
  double d = max_diff(ddp, ref, n);
  WEFT_TEST_CHECK(d <= c->tol_serial, "DDP vs serial AdamW: max diff %g", d);
  for (int stage = WEFT_DP_ZERO1; stage <= WEFT_DP_ZERO3; stage++)
    for (int avg = WEFT_DP_AVG_NCCL; avg <= WEFT_DP_AVG_PREMULSUM; avg++) {
      train(comm, rank, stage, c->prec, avg, c->accum, z);
      d = max_diff(z, ddp, n);
      WEFT_TEST_CHECK(d <= c->tol_ddp, "ZeRO-%d (%s) vs DDP: max diff %g", stage, avg ? "PreMulSum" : "ncclAvg", d);
      // Every rank ends with the same parameters.
      uint64_t h = weft_test_hash(z, n * sizeof(float)), all[WEFT_TEST_MAX_RANKS];
      WEFT_TEST_CHECK_RES(ncclAllGather(&h, all, 1, ncclUint64, comm, NULL), ncclSuccess);
      for (int r = 0; r < nranks; r++) WEFT_TEST_CHECK(all[r] == h, "ZeRO-%d: rank %d's parameters differ", stage, r);
    }
  ncclCommDestroy(comm);
  free(ddp), free(ref), free(z), free(start);
  return weft_test_failures();
}

Test(parallel_dp, zero_stages_equal_ddp_fp32_uneven_shards, .timeout = 120) {
  weft_test_env_defaults();
  dp_case_t c = {WEFT_DP_FP32, 1, 1e-5, 1e-6};
  cr_expect_eq(weft_test_fork_ranks(4, dp_body, &c, 100), 0, "see stderr");
}

Test(parallel_dp, zero_stages_equal_ddp_with_accumulation_on_three_ranks, .timeout = 120) {
  weft_test_env_defaults();
  dp_case_t c = {WEFT_DP_FP32, 3, 1e-5, 1e-6};
  cr_expect_eq(weft_test_fork_ranks(3, dp_body, &c, 100), 0, "see stderr");
}

Test(parallel_dp, mixed_precision_bf16, .timeout = 120) {
  weft_test_env_defaults();
  // bf16 gradients carry 8 significant bits; reductions in another order
  // may round differently, and AdamW normalises a gradient's size away.
  dp_case_t c = {WEFT_DP_BF16, 2, 0.05, 0.05};
  cr_expect_eq(weft_test_fork_ranks(2, dp_body, &c, 100), 0, "see stderr");
}

static int errors_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return weft_test_failures();
  weft_dp_t *dp = NULL;
  size_t bad_sizes[2] = {4, 0};
  weft_dp_config_t cfg = {WEFT_DP_ZERO2, WEFT_DP_FP32, WEFT_DP_AVG_NCCL, 1, NLAYERS, layer_sizes};
  weft_dp_config_t c = cfg;
  c.accum_steps = 0;
  WEFT_TEST_CHECK_RES(weft_dp_create(comm, &c, &dp), ncclInvalidArgument);
  c = cfg, c.stage = (weft_dp_stage_t)5;
  WEFT_TEST_CHECK_RES(weft_dp_create(comm, &c, &dp), ncclInvalidArgument);
  c = cfg, c.nlayers = 2, c.layer_sizes = bad_sizes;
  WEFT_TEST_CHECK_RES(weft_dp_create(comm, &c, &dp), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(weft_dp_create(NULL, &cfg, &dp), ncclInvalidArgument);
  WEFT_TEST_CHECK(dp == NULL, "a failed create left a handle");
  WEFT_TEST_CHECK_RES(weft_dp_create(comm, &cfg, &dp), ncclSuccess);
  void *g;
  WEFT_TEST_CHECK_RES(weft_dp_layer_grads(dp, 0, &g), ncclInvalidArgument);  // no micro-batch begun
  WEFT_TEST_CHECK_RES(weft_dp_begin_micro(dp, 0), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_dp_layer_grads(dp, NLAYERS, &g), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(weft_dp_layer_grads(dp, 1, &g), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_dp_step(dp, &adamw), ncclInvalidArgument);  // layer 1 never marked done
  WEFT_TEST_CHECK_RES(weft_dp_layer_grads_done(dp, 1), ncclSuccess);
  weft_adamw_t bad = adamw;
  bad.beta1 = 1.0f;
  WEFT_TEST_CHECK_RES(weft_dp_step(dp, &bad), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(weft_dp_step(dp, &adamw), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_dp_destroy(dp), ncclSuccess);
  ncclCommDestroy(comm);
  return weft_test_failures();
}

Test(parallel_dp, bad_input_is_rejected, .timeout = 60) {
  weft_test_env_defaults();
  cr_expect_eq(weft_test_fork_ranks(2, errors_body, NULL, 40), 0, "see stderr");
}
