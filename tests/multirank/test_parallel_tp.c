/*
 * test_parallel_tp.c — every tensor-parallel layer, forward and backward,
 * with tp = 1, 2 and 4 ranks, with and without sequence parallelism,
 * against the same layer computed on one rank: outputs, input gradients
 * and (sharded) parameter gradients within 1e-5 relative, the
 * column-parallel forward bitwise.
 *
 * Each forked rank computes the one-rank reference itself (a weft_tp_t of
 * size 1), then its own part, and compares its slice of the reference.
 */
#include <cblas.h>
#include <criterion/criterion.h>

#include "harness.h"
#include "tp.h"

enum { T = 8 };  // tokens: divisible by every tp tested

static float *fill(size_t n, unsigned seed) {
  float *p = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) p[i] = (float)((weft_test_mix64(seed * 1000003ull + i) >> 40) * (2.0 / 16777216.0) - 1.0);
  return p;
}

static float *zeros(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

// max |a - b| <= 1e-5 * max |b| (and exactly equal when `bitwise`).
static void expect_close(const char *what, const float *a, const float *b, size_t n, int bitwise) {
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < n; i++) {
    diff = fmax(diff, fabs((double)a[i] - b[i]));
    scale = fmax(scale, fabs((double)b[i]));
  }
  if (bitwise)
    WEFT_TEST_CHECK(memcmp(a, b, n * sizeof(float)) == 0, "%s: not bitwise equal (max diff %g)", what, diff);
  else
    WEFT_TEST_CHECK(diff <= 1e-5 * scale, "%s: max diff %g, relative %g", what, diff, diff / scale);
}

// Columns [r*w .. ) of each of `parts` groups: this rank's column slice of rows x cols.
static float *slice_cols(const float *m, int rows, int cols, int parts, int size, int rank) {
  int group = cols / parts, w = group / size;
  float *out = malloc((size_t)rows * parts * w * sizeof(float));
  for (int r = 0; r < rows; r++)
    for (int q = 0; q < parts; q++)
      memcpy(out + (size_t)r * parts * w + q * w, m + (size_t)r * cols + q * group + rank * w, w * sizeof(float));
  return out;
}

// This rank's rows under sequence parallelism (all rows without it).
static const float *my_rows(const weft_tp_t *tp, const float *m, int cols) {
  return tp->sequence_parallel ? m + (size_t)tp->rank * (T / tp->size) * cols : m;
}

static void check_column(const weft_tp_t *tp, const weft_tp_t *one) {
  int in = 6, out = 24, parts = 3, ol = out / tp->size, rows = weft_tp_local_rows(tp, T);
  float *full = fill((size_t)in * out + out, 1), *x = fill((size_t)T * in, 2), *dyf = fill((size_t)T * out, 3);
  float *xs1 = zeros(T * in), *y1 = zeros(T * out), *g1 = zeros((size_t)in * out + out), *dx1 = zeros(T * in), *w1 = zeros(T * in);
  WEFT_TEST_CHECK_RES(weft_tp_column_forward(one, in, out, full, T, x, xs1, y1), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_tp_column_backward(one, in, out, full, g1, T, xs1, dyf, dx1, w1), ncclSuccess);
  float *p = zeros(weft_tp_column_nparams(tp, in, out)), *g = zeros(weft_tp_column_nparams(tp, in, out));
  float *gref = zeros(weft_tp_column_nparams(tp, in, out)), *xs = zeros(T * in), *y = zeros(T * ol);
  float *dx = zeros(T * in), *work = zeros(T * in);
  WEFT_TEST_CHECK_RES(weft_tp_column_shard(tp, in, out, parts, full, p), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_tp_column_shard(tp, in, out, parts, g1, gref), ncclSuccess);
  float *dy = slice_cols(dyf, T, out, parts, tp->size, tp->rank), *yref = slice_cols(y1, T, out, parts, tp->size, tp->rank);
  WEFT_TEST_CHECK_RES(weft_tp_column_forward(tp, in, out, p, T, my_rows(tp, x, in), xs, y), ncclSuccess);
  expect_close("column forward", y, yref, (size_t)T * ol, 1);
  WEFT_TEST_CHECK_RES(weft_tp_column_backward(tp, in, out, p, g, T, xs, dy, dx, work), ncclSuccess);
  expect_close("column dx", dx, my_rows(tp, dx1, in), (size_t)rows * in, 0);
  expect_close("column grads", g, gref, weft_tp_column_nparams(tp, in, out), 0);
  free(full), free(x), free(dyf), free(xs1), free(y1), free(g1), free(dx1), free(w1), free(p), free(g), free(gref);
  free(xs), free(y), free(dx), free(work), free(dy), free(yref);
}

static void check_row(const weft_tp_t *tp, const weft_tp_t *one) {
  int in = 16, out = 6, il = in / tp->size, rows = weft_tp_local_rows(tp, T);
  float *full = fill((size_t)in * out + out, 4), *xf = fill((size_t)T * in, 5), *dyf = fill((size_t)T * out, 6);
  float *y1 = zeros(T * out), *g1 = zeros((size_t)in * out + out), *dx1 = zeros(T * in), *w1 = zeros(T * out);
  WEFT_TEST_CHECK_RES(weft_tp_row_forward(one, in, out, full, T, xf, y1, w1), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_tp_row_backward(one, in, out, full, g1, T, xf, dyf, dx1, w1), ncclSuccess);
  size_t np = weft_tp_row_nparams(tp, in, out);
  float *p = zeros(np), *g = zeros(np), *gref = zeros(np), *y = zeros(T * out), *dx = zeros(T * il), *work = zeros(T * out);
  WEFT_TEST_CHECK_RES(weft_tp_row_shard(tp, in, out, full, p), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_tp_row_shard(tp, in, out, g1, gref), ncclSuccess);
  float *x = slice_cols(xf, T, in, 1, tp->size, tp->rank), *dxref = slice_cols(dx1, T, in, 1, tp->size, tp->rank);
  WEFT_TEST_CHECK_RES(weft_tp_row_forward(tp, in, out, p, T, x, y, work), ncclSuccess);
  expect_close("row forward", y, my_rows(tp, y1, out), (size_t)rows * out, 0);
  WEFT_TEST_CHECK_RES(weft_tp_row_backward(tp, in, out, p, g, T, x, my_rows(tp, dyf, out), dx, work), ncclSuccess);
  expect_close("row dx", dx, dxref, (size_t)T * il, 0);
  expect_close("row grads", g, gref, np, 0);
  free(full), free(xf), free(dyf), free(y1), free(g1), free(dx1), free(w1), free(p), free(g), free(gref), free(y);
  free(dx), free(work), free(x), free(dxref);
}

static void check_mlp(const weft_tp_t *tp, const weft_tp_t *one) {
  int h = 6, f = 16, rows = weft_tp_local_rows(tp, T);
  size_t nfull = (size_t)h * f + f + (size_t)f * h + h, np = weft_tp_mlp_nparams(tp, h, f);
  float *full = fill(nfull, 7), *x = fill((size_t)T * h, 8), *dy = fill((size_t)T * h, 9);
  float *y1 = zeros(T * h), *dx1 = zeros(T * h), *g1 = zeros(nfull), *a1 = zeros(weft_tp_mlp_nacts(one, h, f, T));
  WEFT_TEST_CHECK_RES(weft_tp_mlp_forward(one, h, f, full, T, x, y1, a1), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_tp_mlp_backward(one, h, f, full, g1, T, dy, dx1, a1), ncclSuccess);
  float *p = zeros(np), *g = zeros(np), *gref = zeros(np), *y = zeros(T * h), *dx = zeros(T * h);
  float *acts = zeros(weft_tp_mlp_nacts(tp, h, f, T));
  WEFT_TEST_CHECK_RES(weft_tp_mlp_shard(tp, h, f, full, p), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_tp_mlp_shard(tp, h, f, g1, gref), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_tp_mlp_forward(tp, h, f, p, T, my_rows(tp, x, h), y, acts), ncclSuccess);
  expect_close("mlp forward", y, my_rows(tp, y1, h), (size_t)rows * h, 0);
  WEFT_TEST_CHECK_RES(weft_tp_mlp_backward(tp, h, f, p, g, T, my_rows(tp, dy, h), dx, acts), ncclSuccess);
  expect_close("mlp dx", dx, my_rows(tp, dx1, h), (size_t)rows * h, 0);
  expect_close("mlp grads", g, gref, np, 0);
  free(full), free(x), free(dy), free(y1), free(dx1), free(g1), free(a1), free(p), free(g), free(gref), free(y);
  free(dx), free(acts);
}

static void check_attn(const weft_tp_t *tp, const weft_tp_t *one) {
  weft_tp_attn_dims_t d = {.hidden = 8, .heads = 4, .seq = 4, .batch = 2};
  int h = d.hidden, rows = weft_tp_local_rows(tp, T);
  size_t nfull = weft_tp_attn_nparams(one, &d), np = weft_tp_attn_nparams(tp, &d);
  float *full = fill(nfull, 10), *x = fill((size_t)T * h, 11), *dy = fill((size_t)T * h, 12);
  float *y1 = zeros(T * h), *dx1 = zeros(T * h), *g1 = zeros(nfull), *a1 = zeros(weft_tp_attn_nacts(one, &d));
  WEFT_TEST_CHECK_RES(weft_tp_attn_forward(one, &d, full, x, y1, a1), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_tp_attn_backward(one, &d, full, g1, dy, dx1, a1), ncclSuccess);
  float *p = zeros(np), *g = zeros(np), *gref = zeros(np), *y = zeros(T * h), *dx = zeros(T * h);
  float *acts = zeros(weft_tp_attn_nacts(tp, &d));
  WEFT_TEST_CHECK_RES(weft_tp_attn_shard(tp, &d, full, p), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_tp_attn_shard(tp, &d, g1, gref), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_tp_attn_forward(tp, &d, p, my_rows(tp, x, h), y, acts), ncclSuccess);
  expect_close("attention forward", y, my_rows(tp, y1, h), (size_t)rows * h, 0);
  WEFT_TEST_CHECK_RES(weft_tp_attn_backward(tp, &d, p, g, my_rows(tp, dy, h), dx, acts), ncclSuccess);
  expect_close("attention dx", dx, my_rows(tp, dx1, h), (size_t)rows * h, 0);
  expect_close("attention grads", g, gref, np, 0);
  // Causality: the first token's output must not depend on later tokens.
  float *x2 = fill((size_t)T * h, 11), *y2 = zeros(T * h);
  for (int i = d.batch * h; i < T * h; i++) x2[i] += 1.0f;  // change every position but the first
  WEFT_TEST_CHECK_RES(weft_tp_attn_forward(one, &d, full, x2, y2, a1), ncclSuccess);
  expect_close("attention causality", y2, y1, (size_t)d.batch * h, 1);
  free(full), free(x), free(dy), free(y1), free(dx1), free(g1), free(a1), free(p), free(g), free(gref), free(y);
  free(dx), free(acts), free(x2), free(y2);
}

static void check_vocab(const weft_tp_t *tp, const weft_tp_t *one) {
  int v = 10, h = 4, vr = weft_tp_vocab_rows(tp, v), rows = weft_tp_local_rows(tp, T);
  int ids[T] = {0, 9, 3, 3, 7, 5, 1, 8}, targets[T] = {9, 0, 2, 8, 6, 4, 3, 9};
  float *full = fill((size_t)v * h, 13), *dy = fill((size_t)T * h, 14);
  float *y1 = zeros(T * h), *g1 = zeros((size_t)v * h), *w = zeros(T * h);
  WEFT_TEST_CHECK_RES(weft_tp_embed_forward(one, v, h, full, T, ids, y1, w), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_tp_embed_backward(one, v, h, g1, T, ids, dy, w), ncclSuccess);
  float *p = zeros((size_t)vr * h), *g = zeros((size_t)vr * h), *gref = zeros((size_t)vr * h), *y = zeros(T * h);
  WEFT_TEST_CHECK_RES(weft_tp_vocab_shard(tp, v, h, full, p), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_tp_vocab_shard(tp, v, h, g1, gref), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_tp_embed_forward(tp, v, h, p, T, ids, y, w), ncclSuccess);
  expect_close("embedding forward", y, my_rows(tp, y1, h), (size_t)rows * h, 1);
  WEFT_TEST_CHECK_RES(weft_tp_embed_backward(tp, v, h, g, T, ids, my_rows(tp, dy, h), w), ncclSuccess);
  expect_close("embedding grads", g, gref, (size_t)vr * h, 0);
  // Cross-entropy on logits split by vocabulary.
  float *logits = fill((size_t)T * v, 15), *dl1 = zeros(T * v), *work = zeros(3 * T), loss1 = 0, loss = 0;
  WEFT_TEST_CHECK_RES(weft_tp_vocab_cross_entropy(one, v, T, logits, targets, &loss1, dl1, work), ncclSuccess);
  float *mine = zeros((size_t)T * vr), *dl = zeros((size_t)T * vr), *dlref = zeros((size_t)T * vr);
  int lo = tp->rank * vr;
  for (int t = 0; t < T; t++)
    for (int c = 0; c < vr && lo + c < v; c++) {
      mine[t * vr + c] = logits[t * v + lo + c];
      dlref[t * vr + c] = dl1[t * v + lo + c];
    }
  WEFT_TEST_CHECK_RES(weft_tp_vocab_cross_entropy(tp, v, T, mine, targets, &loss, dl, work), ncclSuccess);
  expect_close("cross-entropy loss", &loss, &loss1, 1, 0);
  expect_close("cross-entropy dlogits", dl, dlref, (size_t)T * vr, 0);
  WEFT_TEST_CHECK(loss1 > 1.0f && loss1 < 5.0f, "loss %g is not plausible for 10 classes", loss1);
  int bad[T] = {0, 0, 0, 0, 0, 0, 0, 10};
  WEFT_TEST_CHECK_RES(weft_tp_embed_forward(tp, v, h, p, T, bad, y, w), ncclInvalidArgument);
  free(full), free(dy), free(y1), free(g1), free(w), free(p), free(g), free(gref), free(y), free(logits), free(dl1);
  free(work), free(mine), free(dl), free(dlref);
}

static void check_per_token(const weft_tp_t *tp, const weft_tp_t *one) {
  int h = 8, rows = weft_tp_local_rows(tp, T);
  float *p = fill(2 * h, 16), *x = fill((size_t)T * h, 17), *dy = fill((size_t)T * h, 18);
  float *y1 = zeros(T * h), *dx1 = zeros(T * h), *g1 = zeros(2 * h), *a1 = zeros(weft_tp_layernorm_nacts(h, T));
  WEFT_TEST_CHECK_RES(weft_tp_layernorm_forward(one, h, p, T, x, y1, a1), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_tp_layernorm_backward(one, h, p, g1, T, dy, dx1, a1), ncclSuccess);
  float *y = zeros(T * h), *dx = zeros(T * h), *g = zeros(2 * h), *acts = zeros(weft_tp_layernorm_nacts(h, rows));
  WEFT_TEST_CHECK_RES(weft_tp_layernorm_forward(tp, h, p, rows, my_rows(tp, x, h), y, acts), ncclSuccess);
  expect_close("layernorm forward", y, my_rows(tp, y1, h), (size_t)rows * h, 0);
  WEFT_TEST_CHECK_RES(weft_tp_layernorm_backward(tp, h, p, g, rows, my_rows(tp, dy, h), dx, acts), ncclSuccess);
  expect_close("layernorm dx", dx, my_rows(tp, dx1, h), (size_t)rows * h, 0);
  if (tp->sequence_parallel || tp->size == 1) expect_close("layernorm grads", g, g1, 2 * (size_t)h, 0);
  // Dropout: the same mask for any sharding; about `rate` of the values dropped.
  WEFT_TEST_CHECK_RES(weft_tp_dropout(one, h, T, 0.25f, 99, x, y1), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_tp_dropout(tp, h, T, 0.25f, 99, my_rows(tp, x, h), y), ncclSuccess);
  expect_close("dropout", y, my_rows(tp, y1, h), (size_t)rows * h, 1);
  int dropped = 0;
  for (int i = 0; i < T * h; i++) dropped += y1[i] == 0.0f;
  WEFT_TEST_CHECK(dropped > 4 && dropped < 28, "dropout dropped %d of 64 at rate 0.25", dropped);
  free(p), free(x), free(dy), free(y1), free(dx1), free(g1), free(a1), free(y), free(dx), free(g), free(acts);
}

static int tp_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  openblas_set_num_threads(1);
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return weft_test_failures();
  for (int sp = 0; sp <= 1; sp++) {
    weft_tp_t tp, one;
    WEFT_TEST_CHECK_RES(weft_tp_init(&tp, comm, sp), ncclSuccess);
    WEFT_TEST_CHECK_RES(weft_tp_init(&one, NULL, 0), ncclSuccess);
    WEFT_TEST_CHECK(tp.size == nranks && tp.rank == rank, "tp %d/%d", tp.rank, tp.size);
    check_column(&tp, &one);
    check_row(&tp, &one);
    check_mlp(&tp, &one);
    check_attn(&tp, &one);
    check_vocab(&tp, &one);
    check_per_token(&tp, &one);
  }
  weft_tp_t tp;
  weft_tp_init(&tp, comm, 1);
  float buf[6 * 16];
  if (nranks > 1)  // 7 tokens do not split into sequence shards
    WEFT_TEST_CHECK_RES(weft_tp_mlp_forward(&tp, 6, 16, buf, 7, buf, buf, buf), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(weft_tp_column_forward(&tp, 6, 16, NULL, 8, buf, buf, buf), ncclInvalidArgument);
  ncclCommDestroy(comm);
  return weft_test_failures();
}

static void run_tp(int n) {
  weft_test_env_defaults();
  cr_expect_eq(weft_test_fork_ranks(n, tp_body, NULL, 60), 0, "see stderr");
}

Test(parallel_tp, every_layer_on_one_rank, .timeout = 90) { run_tp(1); }
Test(parallel_tp, every_layer_on_two_ranks, .timeout = 90) { run_tp(2); }
Test(parallel_tp, every_layer_on_four_ranks, .timeout = 90) { run_tp(4); }
