/*
 * test_parallel_pp.c — the mesh, pipelines and 3D layouts through the
 * model of parallel/mlpstack.h:
 *  - the mesh's coordinates and groups for 2 x 2 x 2, and bad shapes;
 *  - pipelines of p = 2 and 4 stages with M = 1, 4, 8 micro-batches, GPipe
 *    and 1F1B, equal the single-stage run (same arithmetic: bitwise);
 *  - 8 ranks as tp 2 x pp 2 x dp 2 (with and without sequence parallel,
 *    ZeRO-1 and ZeRO-3) equal one rank running all micro-batches, within
 *    1e-5 relative.
 * Each rank computes the one-rank reference itself on a communicator of
 * its own and compares its part of the parameters and the losses.
 */
#include <cblas.h>
#include <criterion/criterion.h>

#include "harness.h"
#include "mesh.h"
#include "mlpstack.h"

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
