/*
 * test_parallel_cp.c — context parallelism against one rank: ring
 * attention with causal load balancing (parallel/cp.h) on CP = 1, 2 and 4
 * ranks and on TP 2 x CP 2 and TP 2 x CP 4 meshes computes the one-rank
 * attention (weft_tp_attn_*) forward and backward: outputs, input
 * gradients and (summed over the CP group, TP-sharded) parameter gradients
 * within 1e-5 of the largest reference magnitude (measured: below 1e-6;
 * the online softmax and the blocked sums round differently from the
 * one-rank softmax, nothing more).
 *
 * Also: the load-balanced positions (rank r holds chunks r and 2P-1-r),
 * selecting and gathering rows, the mesh's TP, CP, PP, DP order and its
 * DP x CP group, and a sequence that does not split into 2 * CP chunks
 * refused with ncclInvalidArgument.
 */
#include <cblas.h>
#include <criterion/criterion.h>

#include "cp.h"
#include "harness.h"
#include "mesh.h"
#include "tp.h"

static float *fill(size_t n, unsigned seed) {
  float *p = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) p[i] = (float)((weft_test_mix64(seed * 1000003ull + i) >> 40) * (2.0 / 16777216.0) - 1.0);
  return p;
}

static float *zeros(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

// max |a - b| <= 1e-5 * max |b|.
static void expect_close(const char *what, int cp, int tp, const float *a, const float *b, size_t n) {
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < n; i++) {
    diff = fmax(diff, fabs((double)a[i] - b[i]));
    scale = fmax(scale, fabs((double)b[i]));
  }
  WEFT_TEST_CHECK(diff <= 1e-5 * scale, "cp %d tp %d %s: max diff %g, relative %g", cp, tp, what, diff, diff / scale);
}

typedef struct {
  int tp, cp;
} layout_t;

// Positions of every rank: each appears exactly once, rank r holds chunks r, 2P-1-r.
static void check_positions(const weft_cp_t *cp, int seq) {
  int local = weft_cp_local_seq(cp, seq), c = seq / (2 * cp->size);
  WEFT_TEST_CHECK(local == seq / cp->size, "local seq %d", local);
  for (int l = 0; l < local; l++) {
    int want = l < c ? cp->rank * c + l : (2 * cp->size - 1 - cp->rank) * c + (l - c);
    WEFT_TEST_CHECK(weft_cp_position(cp, seq, l) == want, "position of %d: %d, expected %d", l,
                    weft_cp_position(cp, seq, l), want);
  }
  int all[64] = {0}, mine[64], got[64], work[64];
  for (int l = 0; l < local; l++) mine[l] = weft_cp_position(cp, seq, l);
  WEFT_TEST_CHECK_RES(weft_cp_gather_rows(cp, seq, 1, sizeof(int), mine, got, work), ncclSuccess);
  for (int p = 0; p < seq; p++) {
    WEFT_TEST_CHECK(got[p] == p, "gathered position %d holds %d", p, got[p]);
    all[p] = p;
  }
  WEFT_TEST_CHECK_RES(weft_cp_select_rows(cp, seq, 1, sizeof(int), all, all), ncclSuccess);
  for (int l = 0; l < local; l++) WEFT_TEST_CHECK(all[l] == mine[l], "selected row %d: %d", l, all[l]);
}

static void check_attn(const weft_cp_t *cp, const weft_tp_t *tp, const weft_tp_t *one, int seq) {
  weft_tp_attn_dims_t d = {.hidden = 16, .heads = 4, .seq = seq, .batch = 2};
  int h = d.hidden, T = seq * d.batch, Tl = T / cp->size;
  size_t nfull = weft_tp_attn_nparams(one, &d), np = weft_tp_attn_nparams(tp, &d);
  float *full = fill(nfull, 10), *x = fill((size_t)T * h, 11), *dy = fill((size_t)T * h, 12);
  float *y1 = zeros((size_t)T * h), *dx1 = zeros((size_t)T * h), *g1 = zeros(nfull);
  float *a1 = zeros(weft_tp_attn_nacts(one, &d));
  // The one-rank reference, its rows of this rank, its TP shard of the gradients.
  WEFT_TEST_CHECK_RES(weft_tp_attn_forward(one, &d, full, x, y1, a1), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_tp_attn_backward(one, &d, full, g1, dy, dx1, a1), ncclSuccess);
  size_t rb = (size_t)h * sizeof(float);
  WEFT_TEST_CHECK_RES(weft_cp_select_rows(cp, seq, d.batch, rb, x, x), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_cp_select_rows(cp, seq, d.batch, rb, dy, dy), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_cp_select_rows(cp, seq, d.batch, rb, y1, y1), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_cp_select_rows(cp, seq, d.batch, rb, dx1, dx1), ncclSuccess);
  float *p = zeros(np), *g = zeros(np), *gref = zeros(np), *y = zeros((size_t)Tl * h), *dx = zeros((size_t)Tl * h);
  float *acts = zeros(weft_cp_attn_nacts(cp, tp, &d));
  WEFT_TEST_CHECK_RES(weft_tp_attn_shard(tp, &d, full, p), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_tp_attn_shard(tp, &d, g1, gref), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_cp_attn_forward(cp, tp, &d, p, x, y, acts), ncclSuccess);
  expect_close("forward", cp->size, tp->size, y, y1, (size_t)Tl * h);
  WEFT_TEST_CHECK_RES(weft_cp_attn_backward(cp, tp, &d, p, g, dy, dx, acts), ncclSuccess);
  expect_close("dx", cp->size, tp->size, dx, dx1, (size_t)Tl * h);
  if (cp->size > 1) WEFT_TEST_CHECK_RES(ncclAllReduce(g, g, np, ncclFloat32, ncclSum, cp->comm, NULL), ncclSuccess);
  expect_close("parameter grads", cp->size, tp->size, g, gref, np);
  // A second step on the same buffers gives the same output (nothing left over).
  float *y2 = zeros((size_t)Tl * h);
  WEFT_TEST_CHECK_RES(weft_cp_attn_forward(cp, tp, &d, p, x, y2, acts), ncclSuccess);
  WEFT_TEST_CHECK(memcmp(y, y2, (size_t)Tl * h * sizeof(float)) == 0, "a second forward differs");
  free(full), free(x), free(dy), free(y1), free(dx1), free(g1), free(a1), free(p), free(g), free(gref), free(y);
  free(dx), free(acts), free(y2);
}

static int cp_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  const layout_t *lay = arg;
  openblas_set_num_threads(1);
  ncclComm_t world = weft_test_init_rank(nranks, id, rank);
  if (world == NULL) return weft_test_failures();
  weft_mesh_t *mesh = NULL;
  WEFT_TEST_CHECK_RES(weft_mesh_create(world, (weft_mesh_shape_t){lay->tp, 1, 1, lay->cp}, &mesh), ncclSuccess);
  if (mesh == NULL) return weft_test_failures();
  WEFT_TEST_CHECK(mesh->tp_rank == rank % lay->tp && mesh->cp_rank == rank / lay->tp, "coordinates tp %d cp %d",
                  mesh->tp_rank, mesh->cp_rank);
  weft_tp_t tp, one;
  weft_cp_t cp;
  WEFT_TEST_CHECK_RES(weft_tp_init(&tp, lay->tp > 1 ? mesh->tp_comm : NULL, 0), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_tp_init(&one, NULL, 0), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_cp_init(&cp, lay->cp > 1 ? mesh->cp_comm : NULL), ncclSuccess);
  WEFT_TEST_CHECK(cp.size == lay->cp && cp.rank == mesh->cp_rank, "cp %d/%d", cp.rank, cp.size);
  check_positions(&cp, 16);
  check_attn(&cp, &tp, &one, 16);
  check_attn(&cp, &tp, &one, 8 * lay->cp);
  // 2 * cp must divide the sequence.
  weft_tp_attn_dims_t bad = {.hidden = 16, .heads = 4, .seq = 2 * lay->cp + 1, .batch = 1};
  float buf[64];
  if (lay->cp > 1) {
    WEFT_TEST_CHECK_RES(weft_cp_attn_forward(&cp, &tp, &bad, buf, buf, buf, buf), ncclInvalidArgument);
    WEFT_TEST_CHECK_RES(weft_cp_check_seq(&cp, "test", 2 * lay->cp + 2), ncclInvalidArgument);
  }
  WEFT_TEST_CHECK_RES(weft_cp_attn_forward(&cp, &tp, NULL, buf, buf, buf, buf), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(weft_cp_free(&cp), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_mesh_destroy(mesh), ncclSuccess);
  ncclCommDestroy(world);
  return weft_test_failures();
}

static void run_cp(int tp, int cp) {
  layout_t lay = {tp, cp};
  weft_test_env_defaults();
  cr_expect_eq(weft_test_fork_ranks(tp * cp, cp_body, &lay, 100), 0, "see stderr");
}

Test(parallel_cp, ring_of_one_equals_one_rank, .timeout = 120) { run_cp(1, 1); }
Test(parallel_cp, cp2_equals_one_rank, .timeout = 120) { run_cp(1, 2); }
Test(parallel_cp, cp4_equals_one_rank, .timeout = 120) { run_cp(1, 4); }
Test(parallel_cp, tp2_cp2_equals_one_rank, .timeout = 120) { run_cp(2, 2); }
Test(parallel_cp, tp2_cp4_equals_one_rank, .timeout = 120) { run_cp(2, 4); }

// Each group's members, by world rank, must follow world = tp + T*(cp + C*(pp + P*dp)).
static void check_group(ncclComm_t comm, int size, const int *want, const char *name) {
  int n = 0;
  ncclCommCount(comm, &n);
  WEFT_TEST_CHECK(n == size, "%s group has %d ranks, expected %d", name, n, size);
  int32_t mine = weft_test_check_state.rank, all[WEFT_TEST_MAX_RANKS];
  WEFT_TEST_CHECK_RES(ncclAllGather(&mine, all, 1, ncclInt32, comm, NULL), ncclSuccess);
  for (int i = 0; i < n && i < size; i++)
    WEFT_TEST_CHECK(all[i] == want[i], "%s group rank %d is world %d, expected %d", name, i, all[i], want[i]);
}

static int mesh_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  ncclComm_t world = weft_test_init_rank(nranks, id, rank);
  if (world == NULL) return weft_test_failures();
  weft_mesh_t *mesh = NULL;
  WEFT_TEST_CHECK_RES(weft_mesh_create(world, (weft_mesh_shape_t){2, 1, 2, 3}, &mesh), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(weft_mesh_create(world, (weft_mesh_shape_t){2, 1, 2, -1}, &mesh), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(weft_mesh_create(world, (weft_mesh_shape_t){2, 1, 2, 2}, &mesh), ncclSuccess);  // tp, pp, dp, cp
  if (mesh == NULL) return weft_test_failures();
  int t = rank % 2, c = (rank / 2) % 2, d = rank / 4;
  WEFT_TEST_CHECK(mesh->tp_rank == t && mesh->cp_rank == c && mesh->pp_rank == 0 && mesh->dp_rank == d,
                  "coordinates tp %d cp %d pp %d dp %d", mesh->tp_rank, mesh->cp_rank, mesh->pp_rank, mesh->dp_rank);
  WEFT_TEST_CHECK(weft_mesh_world_rank_cp(mesh, t, c, 0, d) == rank, "world rank");
  WEFT_TEST_CHECK(weft_mesh_world_rank(mesh, t, 0, d) == rank, "world rank at this cp rank");
  WEFT_TEST_CHECK(weft_mesh_world_rank_cp(mesh, 0, 2, 0, 0) == -1, "out of range coordinates");
  int tpw[2] = {rank - t, rank - t + 1}, cpw[2] = {rank - 2 * c, rank - 2 * c + 2}, dpw[2] = {rank - 4 * d, rank - 4 * d + 4};
  int dpcp[4] = {t, t + 2, t + 4, t + 6};  // rank cp + 2 * dp
  check_group(mesh->tp_comm, 2, tpw, "TP");
  check_group(mesh->cp_comm, 2, cpw, "CP");
  check_group(mesh->dp_comm, 2, dpw, "DP");
  check_group(mesh->dp_cp_comm, 4, dpcp, "DP x CP");
  WEFT_TEST_CHECK_RES(weft_mesh_destroy(mesh), ncclSuccess);
  ncclCommDestroy(world);
  return weft_test_failures();
}

Test(parallel_cp, mesh_order_tp_cp_pp_dp, .timeout = 60) {
  weft_test_env_defaults();
  cr_expect_eq(weft_test_fork_ranks(8, mesh_body, NULL, 50), 0, "see stderr");
}
