/*
 * test_trainer_grad.c — every layer the trainer's GPT uses, and the whole
 * model, against central finite differences (one rank, fp32).
 *
 * Each check draws a random linear functional r, so the scalar is
 * f = Σ r·y (or the model's cross-entropy), and compares the analytic
 * gradient a with n_i = (f(x + ε e_i) − f(x − ε e_i)) / 2ε. Bound: the
 * norm-wise relative error |a − n| / |a| ≤ 1e-2 over every sampled entry.
 * Why that is safe in fp32 with ε = 1e-2 on O(1) inputs: the truncation
 * error of the central difference is O(ε²) ≈ 1e-4 relative, and rounding
 * f (summed in float, |f| ≲ 10, ulp ≈ 1e-6) costs ≈ ulp/ε ≈ 1e-4 absolute
 * per entry against gradients of order 1e-2 .. 1, so a correct backward
 * lands near 1e-3 while a wrong term (a missing factor, a transposed
 * index) is off by O(1).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "model.h"
#include "tp.h"

#define EPS 1e-2f
#define TOL 1e-2

static unsigned long long rng_state = 42;
static float uniform(void) {  // [-1, 1)
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)(rng_state >> 40) * (2.0f / 16777216.0f) - 1.0f;
}
static void randomize(float *v, size_t n, float scale) {
  for (size_t i = 0; i < n; i++) v[i] = scale * uniform();
}
static double dot(const float *a, const float *b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
  return s;
}

typedef struct {
  double diff2, norm2;
} fd_acc_t;

static void fd_add(fd_acc_t *acc, double analytic, double numeric) {
  acc->diff2 += (analytic - numeric) * (analytic - numeric);
  acc->norm2 += analytic * analytic;
}

static void fd_expect(const fd_acc_t *acc, const char *what) {
  double rel = sqrt(acc->diff2) / (sqrt(acc->norm2) + 1e-12);
  cr_expect(acc->norm2 > 0, "%s: the analytic gradient is zero", what);
  cr_expect(rel <= TOL, "%s: relative error %.3g > %.0e", what, rel, TOL);
}

static weft_tp_t one_rank(void) {
  weft_tp_t tp;
  cr_assert_eq(weft_tp_init(&tp, NULL, 0), ncclSuccess);
  return tp;
}

// ---- LayerNorm
enum { H = 8, ROWS = 6 };

static double ln_f(const weft_tp_t *tp, const float *p, const float *x, const float *r) {
  float y[ROWS * H], acts[ROWS * (H + 1)];
  cr_assert_eq(weft_tp_layernorm_forward(tp, H, p, ROWS, x, y, acts), ncclSuccess);
  return dot(y, r, ROWS * H);
}

Test(trainer_grad, layernorm, .timeout = 10) {
  weft_tp_t tp = one_rank();
  float p[2 * H], g[2 * H] = {0}, x[ROWS * H], r[ROWS * H], y[ROWS * H], dx[ROWS * H], acts[ROWS * (H + 1)];
  randomize(p, 2 * H, 1.0f), randomize(x, ROWS * H, 2.0f), randomize(r, ROWS * H, 1.0f);
  cr_assert_eq(weft_tp_layernorm_forward(&tp, H, p, ROWS, x, y, acts), ncclSuccess);
  cr_assert_eq(weft_tp_layernorm_backward(&tp, H, p, g, ROWS, r, dx, acts), ncclSuccess);
  fd_acc_t ax = {0}, ap = {0};
  for (int i = 0; i < ROWS * H; i++) {
    float keep = x[i];
    x[i] = keep + EPS;
    double up = ln_f(&tp, p, x, r);
    x[i] = keep - EPS;
    double down = ln_f(&tp, p, x, r);
    x[i] = keep;
    fd_add(&ax, dx[i], (up - down) / (2 * EPS));
  }
  for (int i = 0; i < 2 * H; i++) {
    float keep = p[i];
    p[i] = keep + EPS;
    double up = ln_f(&tp, p, x, r);
    p[i] = keep - EPS;
    double down = ln_f(&tp, p, x, r);
    p[i] = keep;
    fd_add(&ap, g[i], (up - down) / (2 * EPS));
  }
  fd_expect(&ax, "layernorm dx");
  fd_expect(&ap, "layernorm dgamma, dbeta");
}

// ---- Generic check of a layer y = F(p, x): dx and dp.
typedef double (*layer_f)(const weft_tp_t *tp, const float *p, const float *x, const float *r, void *ctx);

static void check_layer(const char *name, layer_f f, void *ctx, float *p, size_t np, float *x, size_t nx,
                        const float *r, const float *g, const float *dx) {
  weft_tp_t tp = one_rank();
  fd_acc_t ax = {0}, ap = {0};
  for (size_t i = 0; i < nx; i++) {
    float keep = x[i];
    x[i] = keep + EPS;
    double up = f(&tp, p, x, r, ctx);
    x[i] = keep - EPS;
    double down = f(&tp, p, x, r, ctx);
    x[i] = keep;
    fd_add(&ax, dx[i], (up - down) / (2 * EPS));
  }
  for (size_t i = 0; i < np; i++) {
    float keep = p[i];
    p[i] = keep + EPS;
    double up = f(&tp, p, x, r, ctx);
    p[i] = keep - EPS;
    double down = f(&tp, p, x, r, ctx);
    p[i] = keep;
    fd_add(&ap, g[i], (up - down) / (2 * EPS));
  }
  char what[64];
  snprintf(what, sizeof(what), "%s dx", name);
  fd_expect(&ax, what);
  snprintf(what, sizeof(what), "%s dparams", name);
  if (np > 0) fd_expect(&ap, what);
}

// ---- MLP: h -> f -> GELU -> h
enum { F = 16, T = 6 };

static double mlp_f(const weft_tp_t *tp, const float *p, const float *x, const float *r, void *ctx) {
  float y[T * H], *acts = ctx;
  cr_assert_eq(weft_tp_mlp_forward(tp, H, F, p, T, x, y, acts), ncclSuccess);
  return dot(y, r, T * H);
}

Test(trainer_grad, mlp, .timeout = 10) {
  weft_tp_t tp = one_rank();
  size_t np = weft_tp_mlp_nparams(&tp, H, F);
  float *p = malloc(np * sizeof(float)), *g = calloc(np, sizeof(float));
  float *acts = malloc(weft_tp_mlp_nacts(&tp, H, F, T) * sizeof(float));
  float x[T * H], r[T * H], y[T * H], dx[T * H];
  randomize(p, np, 0.5f), randomize(x, T * H, 1.0f), randomize(r, T * H, 1.0f);
  cr_assert_eq(weft_tp_mlp_forward(&tp, H, F, p, T, x, y, acts), ncclSuccess);
  cr_assert_eq(weft_tp_mlp_backward(&tp, H, F, p, g, T, r, dx, acts), ncclSuccess);
  check_layer("mlp", mlp_f, acts, p, np, x, T * H, r, g, dx);
  free(p), free(g), free(acts);
}

// ---- Causal attention: 2 heads, seq 3, batch 2 (rows sequence-major)
static const weft_tp_attn_dims_t AD = {H, 2, 3, 2};

static double attn_f(const weft_tp_t *tp, const float *p, const float *x, const float *r, void *ctx) {
  float y[T * H], *acts = ctx;
  cr_assert_eq(weft_tp_attn_forward(tp, &AD, p, x, y, acts), ncclSuccess);
  return dot(y, r, T * H);
}

Test(trainer_grad, attention, .timeout = 10) {
  weft_tp_t tp = one_rank();
  size_t np = weft_tp_attn_nparams(&tp, &AD);
  float *p = malloc(np * sizeof(float)), *g = calloc(np, sizeof(float));
  float *acts = malloc(weft_tp_attn_nacts(&tp, &AD) * sizeof(float));
  float x[T * H], r[T * H], y[T * H], dx[T * H];
  randomize(p, np, 0.5f), randomize(x, T * H, 1.0f), randomize(r, T * H, 1.0f);
  cr_assert_eq(weft_tp_attn_forward(&tp, &AD, p, x, y, acts), ncclSuccess);
  cr_assert_eq(weft_tp_attn_backward(&tp, &AD, p, g, r, dx, acts), ncclSuccess);
  check_layer("attention", attn_f, acts, p, np, x, T * H, r, g, dx);
  free(p), free(g), free(acts);
}

// ---- Cross-entropy over logits (the loss the model trains with)
enum { VOCAB = 7 };
static const int TARGETS[T] = {0, 3, 6, 2, 2, 5};

static double ce_f(const weft_tp_t *tp, const float *p, const float *x, const float *r, void *ctx) {
  (void)p, (void)r, (void)ctx;
  float loss, work[3 * T];
  cr_assert_eq(weft_tp_vocab_cross_entropy(tp, VOCAB, T, x, TARGETS, &loss, NULL, work), ncclSuccess);
  return loss;
}

Test(trainer_grad, cross_entropy, .timeout = 10) {
  weft_tp_t tp = one_rank();
  float logits[T * VOCAB], dlogits[T * VOCAB], work[3 * T], loss, none = 0;
  randomize(logits, T * VOCAB, 2.0f);
  cr_assert_eq(weft_tp_vocab_cross_entropy(&tp, VOCAB, T, logits, TARGETS, &loss, dlogits, work), ncclSuccess);
  cr_expect(loss > 0);
  check_layer("cross-entropy", ce_f, NULL, &none, 0, logits, T * VOCAB, NULL, &none, dlogits);
}

// ---- The whole model: embeddings, blocks, final LayerNorm, tied LM head.
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

Test(trainer_grad, whole_model, .timeout = 20) {
  gpt_dims_t d = {11, 4, 2, 8, 2, 16, 0, 0, 0, 0, 0};
  int batch = 2, tokens = d.seq * batch;
  weft_tp_t tp = one_rank();
  gpt_t *m;
  cr_assert_eq(gpt_create(&d, batch, &tp, &m), ncclSuccess);
  size_t n = gpt_full_count(&d);
  cr_assert_eq(n, gpt_local_count(m));
  float *params = malloc(n * sizeof(float)), *grads = calloc(n, sizeof(float)), *pp[8], *gp[8];
  gpt_init_full(&d, 7, params);
  randomize(grads, n, 0.3f);  // larger than GPT-2's init, so every gradient is well above rounding
  for (size_t i = 0; i < n; i++) params[i] += grads[i], grads[i] = 0;
  size_t off = 0;
  for (int l = 0; l < gpt_nlayers(m); l++) {
    pp[l] = params + off, gp[l] = grads + off;
    off += gpt_layer_size(m, l);
  }
  flat_t ctx = {pp, gp};
  gpt_store_t st = {flat_params, flat_release, flat_grads, flat_done, &ctx};
  int ids[8], targets[8];
  for (int i = 0; i < tokens; i++) ids[i] = (3 * i + 1) % d.vocab, targets[i] = (5 * i + 2) % d.vocab;
  float loss;
  cr_assert_eq(gpt_forward(m, &st, ids, targets, &loss), ncclSuccess);
  cr_assert_eq(gpt_backward(m, &st), ncclSuccess);
  // Every parameter, grouped by layer: embeddings, each block, final LayerNorm.
  for (int l = 0; l < gpt_nlayers(m); l++) {
    fd_acc_t acc = {0};
    for (size_t i = 0; i < gpt_layer_size(m, l); i++) {
      float keep = pp[l][i], up, down;
      pp[l][i] = keep + EPS;
      cr_assert_eq(gpt_forward(m, &st, ids, targets, &up), ncclSuccess);
      pp[l][i] = keep - EPS;
      cr_assert_eq(gpt_forward(m, &st, ids, targets, &down), ncclSuccess);
      pp[l][i] = keep;
      fd_add(&acc, gp[l][i], ((double)up - down) / (2 * EPS));
    }
    char what[32];
    snprintf(what, sizeof(what), "model layer %d", l);
    fd_expect(&acc, what);
  }
  gpt_destroy(m);
  free(params), free(grads);
}

Test(trainer_grad, bad_shapes, .timeout = 10) {
  weft_tp_t tp = one_rank();
  gpt_t *m = (gpt_t *)&tp;
  gpt_dims_t bad = {11, 4, 2, 9, 2, 16, 0, 0, 0, 0, 0};  // hidden not a multiple of heads
  cr_expect_eq(gpt_create(&bad, 2, &tp, &m), ncclInvalidArgument);
  cr_expect_null(m);
}
