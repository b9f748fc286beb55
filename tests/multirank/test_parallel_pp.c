/*
 * test_parallel_pp.c — the mesh, pipelines and 3D layouts through the
 * model of parallel/mlpstack.h:
 *  - the mesh's coordinates and groups for 2 x 2 x 2, and bad shapes;
 *  - pipelines of p = 2 and 4 stages with M = 1, 4, 8 micro-batches, GPipe
 *    and 1F1B, equal the single-stage run (same arithmetic: bitwise);
 *  - 8 ranks as tp 2 x pp 2 x dp 2 (with and without sequence parallel,
 *    ZeRO-1 and ZeRO-3) equal one rank running all micro-batches, within
 *    1e-5 relative;
 *  - the interleaved schedule on 1, 2 and 4 stages with V = 1, 2, 3 chunks and
 *    M = P, 2P, 3P micro-batches: a chain of P*V virtual stages has
 *    bitwise one rank's losses and gradients (see chain_case).
 * Each rank computes the one-rank reference itself on a communicator of
 * its own and compares its part of the parameters and the losses.
 */
#include <cblas.h>
#include <criterion/criterion.h>

#include "harness.h"
#include "mesh.h"
#include "mlpstack.h"
#include "pp_interleaved.h"

enum { STEPS = 2 };

static weft_mlpstack_config_t base_config(void) {
  weft_mlpstack_config_t c = {.hidden = 8, .ffn = 16, .layers = 4, .tokens = 8, .micro = 1, .sequence_parallel = 0,
                              .zero = WEFT_DP_ZERO1, .schedule = WEFT_PP_1F1B, .seed = 5,
                              .adamw = {.lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f, .weight_decay = 0.01f}};
  return c;
}

// Trains the one-rank model; full params into `full`, losses into loss[STEPS].
static void reference(ncclComm_t self, weft_mlpstack_config_t c, float *full, float *loss) {
  weft_mlpstack_t *st = NULL;
  c.sequence_parallel = 0;
  WEFT_TEST_CHECK_RES(weft_mlpstack_create(&c, NULL, self, self, &st), ncclSuccess);
  if (st == NULL) return;
  for (int s = 0; s < STEPS; s++) WEFT_TEST_CHECK_RES(weft_mlpstack_step(st, &loss[s], NULL), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_mlpstack_local_params(st, full), ncclSuccess);
  weft_mlpstack_destroy(st);
}

// Trains `c` on the mesh and compares with the reference (micro * dp micro-batches on one rank).
static void compare(const weft_mesh_t *mesh, ncclComm_t self, weft_mlpstack_config_t c, double tol, const char *what) {
  weft_mlpstack_config_t rc = c;
  rc.micro = c.micro * mesh->shape.dp;
  float *full = calloc((size_t)c.layers * weft_mlpstack_block_full(&c), sizeof(float)), ref_loss[STEPS], loss[STEPS];
  reference(self, rc, full, ref_loss);
  weft_mlpstack_t *st = NULL;
  WEFT_TEST_CHECK_RES(weft_mlpstack_create(&c, mesh->tp_comm, mesh->pp_comm, mesh->dp_comm, &st), ncclSuccess);
  if (st == NULL) {
    free(full);
    return;
  }
  weft_pp_stats_t stats;
  for (int s = 0; s < STEPS; s++) WEFT_TEST_CHECK_RES(weft_mlpstack_step(st, &loss[s], &stats), ncclSuccess);
  size_t n = weft_mlpstack_local_count(st);
  float *mine = calloc(n, sizeof(float)), *want = calloc(n, sizeof(float));
  WEFT_TEST_CHECK_RES(weft_mlpstack_local_params(st, mine), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_mlpstack_shard_full(st, full, want), ncclSuccess);
  double diff = 0, scale = 0;
  for (size_t i = 0; i < n; i++) diff = fmax(diff, fabs((double)mine[i] - want[i])), scale = fmax(scale, fabs(want[i]));
  if (tol == 0)
    WEFT_TEST_CHECK(memcmp(mine, want, n * sizeof(float)) == 0, "%s: params not bitwise equal (max diff %g)", what, diff);
  else
    WEFT_TEST_CHECK(diff <= tol * scale, "%s: params differ by %g (relative %g)", what, diff, diff / scale);
  for (int s = 0; s < STEPS; s++)
    WEFT_TEST_CHECK(fabs(loss[s] - ref_loss[s]) <= 1e-5 * fabs(ref_loss[s]), "%s: step %d loss %.8g, one rank %.8g",
                    what, s, loss[s], ref_loss[s]);
  WEFT_TEST_CHECK(ref_loss[STEPS - 1] < ref_loss[0], "%s: the loss did not fall (%g -> %g)", what, ref_loss[0],
                  ref_loss[STEPS - 1]);
  WEFT_TEST_CHECK(stats.bubble_formula == (double)(mesh->shape.pp - 1) / c.micro, "%s: bubble formula %g", what,
                  stats.bubble_formula);
  weft_mlpstack_destroy(st);
  free(full), free(mine), free(want);
}

static int pipeline_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  openblas_set_num_threads(1);
  ncclComm_t world = weft_test_init_rank(nranks, id, rank), self = NULL;
  if (world == NULL) return weft_test_failures();
  weft_mesh_t *mesh = NULL;
  WEFT_TEST_CHECK_RES(weft_mesh_create(world, (weft_mesh_shape_t){1, nranks, 1, 1}, &mesh), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclCommSplit(world, rank, 0, &self, NULL), ncclSuccess);
  if (mesh == NULL || self == NULL) return weft_test_failures();
  int micros[3] = {1, 4, 8};
  for (int k = 0; k < 3; k++)
    for (int sched = WEFT_PP_GPIPE; sched <= WEFT_PP_1F1B; sched++) {
      weft_mlpstack_config_t c = base_config();
      c.micro = micros[k];
      c.schedule = sched;
      char what[64];
      snprintf(what, sizeof(what), "p=%d M=%d %s", nranks, c.micro, sched ? "1F1B" : "GPipe");
      compare(mesh, self, c, 0, what);
    }
  weft_mesh_destroy(mesh);
  ncclCommDestroy(self);
  ncclCommDestroy(world);
  return weft_test_failures();
}

Test(parallel_pp, two_stages_equal_one, .timeout = 120) {
  weft_test_env_defaults();
  cr_expect_eq(weft_test_fork_ranks(2, pipeline_body, NULL, 100), 0, "see stderr");
}

Test(parallel_pp, four_stages_equal_one, .timeout = 120) {
  weft_test_env_defaults();
  cr_expect_eq(weft_test_fork_ranks(4, pipeline_body, NULL, 100), 0, "see stderr");
}

// Each group's members, by world rank, must follow the layout rule.
static void check_group(ncclComm_t comm, int size, int first, int stride, const char *name) {
  int n = 0, me = 0;
  ncclCommCount(comm, &n);
  WEFT_TEST_CHECK(n == size, "%s group has %d ranks, expected %d", name, n, size);
  int32_t mine = weft_test_check_state.rank, all[WEFT_TEST_MAX_RANKS];
  WEFT_TEST_CHECK_RES(ncclAllGather(&mine, all, 1, ncclInt32, comm, NULL), ncclSuccess);
  ncclCommUserRank(comm, &me);
  for (int i = 0; i < n; i++)
    WEFT_TEST_CHECK(all[i] == first + i * stride, "%s group rank %d is world %d, expected %d", name, i, all[i],
                    first + i * stride);
}

static int mesh_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  ncclComm_t world = weft_test_init_rank(nranks, id, rank);
  if (world == NULL) return weft_test_failures();
  weft_mesh_t *mesh = (weft_mesh_t *)&mesh;
  WEFT_TEST_CHECK_RES(weft_mesh_create(world, (weft_mesh_shape_t){3, 1, 2, 1}, &mesh), ncclInvalidArgument);
  WEFT_TEST_CHECK(mesh == NULL, "a failed create left a mesh");
  WEFT_TEST_CHECK_RES(weft_mesh_create(world, (weft_mesh_shape_t){0, 4, 2, 1}, &mesh), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(weft_mesh_create(world, (weft_mesh_shape_t){2, 2, 2, 2}, &mesh), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(weft_mesh_create(NULL, (weft_mesh_shape_t){2, 2, 2, 1}, &mesh), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(weft_mesh_create(world, (weft_mesh_shape_t){2, 2, 2, 0}, &mesh), ncclSuccess);
  if (mesh == NULL) return weft_test_failures();
  WEFT_TEST_CHECK(mesh->tp_rank == rank % 2 && mesh->pp_rank == (rank / 2) % 2 && mesh->dp_rank == rank / 4,
                  "coordinates (%d,%d,%d)", mesh->tp_rank, mesh->pp_rank, mesh->dp_rank);
  WEFT_TEST_CHECK(weft_mesh_world_rank(mesh, mesh->tp_rank, mesh->pp_rank, mesh->dp_rank) == rank, "world rank");
  WEFT_TEST_CHECK(weft_mesh_world_rank(mesh, 2, 0, 0) == -1, "out of range coordinates");
  check_group(mesh->tp_comm, 2, rank - mesh->tp_rank, 1, "TP");
  check_group(mesh->pp_comm, 2, rank - 2 * mesh->pp_rank, 2, "PP");
  check_group(mesh->dp_comm, 2, rank - 4 * mesh->dp_rank, 4, "DP");
  WEFT_TEST_CHECK_RES(weft_mesh_destroy(mesh), ncclSuccess);
  ncclCommDestroy(world);
  return weft_test_failures();
}

Test(parallel_pp, mesh_groups_and_bad_shapes, .timeout = 60) {
  weft_test_env_defaults();
  cr_expect_eq(weft_test_fork_ranks(8, mesh_body, NULL, 50), 0, "see stderr");
}

static int three_d_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  openblas_set_num_threads(1);
  ncclComm_t world = weft_test_init_rank(nranks, id, rank), self = NULL;
  if (world == NULL) return weft_test_failures();
  weft_mesh_t *mesh = NULL;
  WEFT_TEST_CHECK_RES(weft_mesh_create(world, (weft_mesh_shape_t){2, 2, 2, 1}, &mesh), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclCommSplit(world, rank, 0, &self, NULL), ncclSuccess);
  if (mesh == NULL || self == NULL) return weft_test_failures();
  for (int sp = 0; sp <= 1; sp++)
    for (int zero = WEFT_DP_ZERO1; zero <= WEFT_DP_ZERO3; zero += 2) {
      weft_mlpstack_config_t c = base_config();
      c.micro = 2;
      c.sequence_parallel = sp;
      c.zero = zero;
      char what[64];
      snprintf(what, sizeof(what), "2x2x2 %s ZeRO-%d", sp ? "SP" : "TP", zero);
      compare(mesh, self, c, 1e-5, what);
    }
  weft_mesh_destroy(mesh);
  ncclCommDestroy(self);
  ncclCommDestroy(world);
  return weft_test_failures();
}

Test(parallel_pp, three_d_2x2x2_equals_one_rank, .timeout = 120) {
  weft_test_env_defaults();
  cr_expect_eq(weft_test_fork_ranks(8, three_d_body, NULL, 100), 0, "see stderr");
}

// ---- The interleaved schedule (pp_interleaved.h) ----------------------
// A chain of P*V virtual stages, y = tanh(x W_j), loss 0.5 * sum(y^2) / rows
// on the last: weft_pp_interleaved_run on P ranks with V chunks each must
// give bitwise the losses and the gradients of every W_j that one rank
// gets running the chain micro-batch by micro-batch, since each chunk's
// backwards add into its gradient in micro-batch order. The callbacks also
// check which boundary buffers they get and that they run in the schedule's
// order.
enum { CHAIN_H = 8 };

typedef struct {
  int P, V, M, s, rows, next_op, bad_order;
  weft_pp_chunk_op_t *ops;
  float *w, *gw;     // this rank's chunks' W and dW (chunk-major)
  float *xs, *ys;    // per (chunk, micro): the chunk's input and output
  double *loss;      // per micro-batch (last virtual stage)
} chain_t;

static float chain_weight(int j, int i) {
  return sinf(0.37f * (float)(j * CHAIN_H * CHAIN_H + i) + 0.11f) * 0.6f;
}

static void chain_input(int micro, int rows, float *x) {
  for (int i = 0; i < rows * CHAIN_H; i++) x[i] = cosf(0.013f * (float)(micro * 977 + i));
}

static void chain_forward_math(const float *w, const float *x, float *y, int rows) {
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < CHAIN_H; c++) {
      float acc = 0;
      for (int k = 0; k < CHAIN_H; k++) acc += x[r * CHAIN_H + k] * w[k * CHAIN_H + c];
      y[r * CHAIN_H + c] = tanhf(acc);
    }
}

// dy -> dx, adding dW; dy is overwritten with the pre-activation gradient.
static void chain_backward_math(const float *w, float *gw, const float *x, const float *y, float *dy, float *dx,
                                int rows) {
  for (int i = 0; i < rows * CHAIN_H; i++) dy[i] *= 1.0f - y[i] * y[i];
  for (int k = 0; k < CHAIN_H; k++)
    for (int c = 0; c < CHAIN_H; c++) {
      float acc = 0;
      for (int r = 0; r < rows; r++) acc += x[r * CHAIN_H + k] * dy[r * CHAIN_H + c];
      gw[k * CHAIN_H + c] += acc;
    }
  if (dx == NULL) return;
  for (int r = 0; r < rows; r++)
    for (int k = 0; k < CHAIN_H; k++) {
      float acc = 0;
      for (int c = 0; c < CHAIN_H; c++) acc += dy[r * CHAIN_H + c] * w[k * CHAIN_H + c];
      dx[r * CHAIN_H + k] = acc;
    }
}

static float chain_loss_grad(const float *y, float *dy, int rows) {
  double loss = 0;
  for (int i = 0; i < rows * CHAIN_H; i++) loss += 0.5 * y[i] * y[i] / rows, dy[i] = y[i] / (float)rows;
  return (float)loss;
}

static void chain_note_op(chain_t *c, int backward, int chunk, int micro) {
  const weft_pp_chunk_op_t *want = &c->ops[c->next_op++];
  if (want->backward != backward || want->chunk != chunk || want->micro != micro) c->bad_order++;
}

static size_t chain_act(const chain_t *c) { return (size_t)c->rows * CHAIN_H; }

static ncclResult_t chain_forward(void *user, int chunk, int micro, const float *in, float *out) {
  chain_t *c = user;
  int vs = chunk * c->P + c->s, last = vs == c->P * c->V - 1;
  chain_note_op(c, 0, chunk, micro);
  WEFT_TEST_CHECK((in == NULL) == (vs == 0) && (out == NULL) == last, "forward chunk %d: in %p out %p", chunk,
                  (const void *)in, (void *)out);
  size_t n = chain_act(c), slot = ((size_t)chunk * c->M + micro) * n;
  if (in == NULL)
    chain_input(micro, c->rows, c->xs + slot);
  else
    memcpy(c->xs + slot, in, n * sizeof(float));
  chain_forward_math(c->w + (size_t)chunk * CHAIN_H * CHAIN_H, c->xs + slot, c->ys + slot, c->rows);
  if (out != NULL) memcpy(out, c->ys + slot, n * sizeof(float));
  return ncclSuccess;
}

static ncclResult_t chain_backward(void *user, int chunk, int micro, const float *dout, float *din) {
  chain_t *c = user;
  int vs = chunk * c->P + c->s, last = vs == c->P * c->V - 1;
  chain_note_op(c, 1, chunk, micro);
  WEFT_TEST_CHECK((dout == NULL) == last && (din == NULL) == (vs == 0), "backward chunk %d: dout %p din %p", chunk,
                  (const void *)dout, (void *)din);
  size_t n = chain_act(c), slot = ((size_t)chunk * c->M + micro) * n;
  float *dy = malloc(n * sizeof(float));
  if (dy == NULL) return ncclSystemError;
  if (dout == NULL)
    c->loss[micro] = chain_loss_grad(c->ys + slot, dy, c->rows);
  else
    memcpy(dy, dout, n * sizeof(float));
  size_t wo = (size_t)chunk * CHAIN_H * CHAIN_H;
  chain_backward_math(c->w + wo, c->gw + wo, c->xs + slot, c->ys + slot, dy, din, c->rows);
  free(dy);
  return ncclSuccess;
}

// One rank running the whole chain: the gradients of all P*V matrices, the losses.
static void chain_reference(int nv, int M, int rows, float *gw, double *loss) {
  size_t n = (size_t)rows * CHAIN_H, hh = CHAIN_H * CHAIN_H;
  float *w = malloc(nv * hh * sizeof(float)), *x = malloc((size_t)(nv + 1) * n * sizeof(float));
  float *dy = malloc(n * sizeof(float)), *dx = malloc(n * sizeof(float));
  for (int j = 0; j < nv; j++)
    for (size_t i = 0; i < hh; i++) w[j * hh + i] = chain_weight(j, (int)i);
  memset(gw, 0, nv * hh * sizeof(float));
  for (int m = 0; m < M; m++) {
    chain_input(m, rows, x);
    for (int j = 0; j < nv; j++) chain_forward_math(w + j * hh, x + j * n, x + (j + 1) * n, rows);
    loss[m] = chain_loss_grad(x + nv * n, dy, rows);
    for (int j = nv - 1; j >= 0; j--) {
      chain_backward_math(w + j * hh, gw + j * hh, x + j * n, x + (j + 1) * n, dy, j > 0 ? dx : NULL, rows);
      memcpy(dy, dx, n * sizeof(float));
    }
  }
  free(w), free(x), free(dy), free(dx);
}

static void chain_case(ncclComm_t pp, int P, int s, int V, int M, int rows) {
  int nv = P * V;
  size_t n = (size_t)rows * CHAIN_H, hh = CHAIN_H * CHAIN_H;
  chain_t c = {P, V, M, s, rows, 0, 0, malloc(2 * (size_t)V * M * sizeof(weft_pp_chunk_op_t)),
               malloc(V * hh * sizeof(float)), calloc(V * hh, sizeof(float)),
               malloc((size_t)V * M * n * sizeof(float)), malloc((size_t)V * M * n * sizeof(float)),
               calloc((size_t)M, sizeof(double))};
  float *ref_gw = malloc(nv * hh * sizeof(float));
  double *ref_loss = malloc((size_t)M * sizeof(double));
  WEFT_TEST_CHECK_RES(weft_pp_interleaved_schedule(P, s, V, M, c.ops), ncclSuccess);
  for (int v = 0; v < V; v++)
    for (size_t i = 0; i < hh; i++) c.w[v * hh + i] = chain_weight(v * P + s, (int)i);
  weft_pp_chunk_stage_t fns = {chain_forward, chain_backward, &c};
  weft_pp_stats_t stats = {0};
  WEFT_TEST_CHECK_RES(weft_pp_interleaved_run(pp, V, M, n, &fns, &stats), ncclSuccess);
  chain_reference(nv, M, rows, ref_gw, ref_loss);
  WEFT_TEST_CHECK(c.next_op == 2 * V * M && c.bad_order == 0, "P=%d V=%d M=%d: %d operations, %d out of order", P, V,
                  M, c.next_op, c.bad_order);
  for (int v = 0; v < V; v++)
    WEFT_TEST_CHECK(memcmp(c.gw + v * hh, ref_gw + (size_t)(v * P + s) * hh, hh * sizeof(float)) == 0,
                    "P=%d V=%d M=%d rows=%d: the gradient of virtual stage %d is not one rank's", P, V, M, rows, v * P + s);
  if (s == P - 1)
    for (int m = 0; m < M; m++)
      WEFT_TEST_CHECK(c.loss[m] == ref_loss[m], "P=%d V=%d M=%d: micro-batch %d loss %.9g, one rank %.9g", P, V, M, m,
                      c.loss[m], ref_loss[m]);
  WEFT_TEST_CHECK(stats.bubble_formula == (double)(P - 1) / ((double)V * M), "bubble formula %g", stats.bubble_formula);
  free(c.ops), free(c.w), free(c.gw), free(c.xs), free(c.ys), free(c.loss), free(ref_gw), free(ref_loss);
}

static int interleaved_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  ncclComm_t world = weft_test_init_rank(nranks, id, rank);
  if (world == NULL) return weft_test_failures();
  for (int V = 1; V <= 3; V++)
    for (int k = 1; k <= 3; k++) chain_case(world, nranks, rank, V, k * nranks, 4);
  chain_case(world, nranks, rank, 2, 2 * nranks, 2048);  // 64 KiB boundary tensors
  weft_pp_chunk_stage_t none = {chain_forward, chain_backward, NULL};  // M not a multiple of P: refused
  if (nranks > 1) WEFT_TEST_CHECK_RES(weft_pp_interleaved_run(world, 2, nranks + 1, 8, &none, NULL), ncclInvalidArgument);
  ncclCommDestroy(world);
  return weft_test_failures();
}

// One stage holding every chunk: results are handed over without communication.
Test(parallel_pp, interleaved_one_stage_hands_results_to_itself, .timeout = 60) {
  weft_test_env_defaults();
  cr_expect_eq(weft_test_fork_ranks(1, interleaved_body, NULL, 50), 0, "see stderr");
}

Test(parallel_pp, interleaved_two_stages_equal_one, .timeout = 120) {
  weft_test_env_defaults();
  cr_expect_eq(weft_test_fork_ranks(2, interleaved_body, NULL, 100), 0, "see stderr");
}

Test(parallel_pp, interleaved_four_stages_equal_one, .timeout = 120) {
  weft_test_env_defaults();
  cr_expect_eq(weft_test_fork_ranks(4, interleaved_body, NULL, 100), 0, "see stderr");
}
