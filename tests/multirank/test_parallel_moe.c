/*
 * test_parallel_moe.c — the mixture-of-experts layer (parallel/moe.h) with
 * expert parallelism against the same layer on one rank.
 *
 * An EP group of P ranks, each with its own T tokens, must compute what P
 * one-rank calls on those tokens compute: every rank's output, input
 * gradient and load-balancing loss, the router's gradient summed over the
 * ranks, and each local expert's gradient (the sum over every source's
 * tokens), within 1e-5 relative. Each forked rank computes the one-rank
 * reference itself (no communicator), source after source, accumulating
 * the gradients as a data-parallel sum would.
 *
 * Routing cases: top-2 (Mixtral's renormalised weights) and top-1
 * (Switch's probabilities, and renormalised), dropless (grouped
 * send/recv) and with a capacity that drops (padded AlltoAll), dropping by
 * probability and by position, an expert that no token chooses (so one EP
 * rank computes nothing and must still take part), and two experts per
 * rank. Layouts: EP 1, 2, 4; TP 2 inside the experts x EP 2; and EP 2
 * inside a data-parallel group of 4 (weft_ep_groups_create), where the
 * experts' gradients reduced over the expert-data-parallel group must be
 * the whole group's sum. Routing groups (context parallelism) of 2 and 4
 * ranks must route, drop and compute as one call over all their tokens.
 * A one-rank test checks the layer's gradients against central finite
 * differences, so the reference itself is right.
 */
#include <cblas.h>
#include <criterion/criterion.h>

#include "harness.h"
#include "moe.h"

enum { T = 16, H = 8, F = 16 };

typedef struct {
  const char *name;
  int experts, topk;
  float capacity_factor;
  int renormalize;
  weft_moe_drop_t drop;
  float aux;
  int starve;        // the last expert's router column makes it never chosen
  int expect_drops;  // the reference must drop something
} moe_case_t;

static const moe_case_t cases[] = {
    {"top2 dropless", 4, 2, 0.0f, 1, WEFT_MOE_DROP_PROBS, 0.01f, 0, 0},
    {"top2 capacity 0.5 drops by probability", 4, 2, 0.5f, 1, WEFT_MOE_DROP_PROBS, 0.01f, 0, 1},
    {"top1 capacity 1.0 drops by position", 4, 1, 1.0f, 0, WEFT_MOE_DROP_POSITION, 0.01f, 0, 1},
    {"top1 dropless", 4, 1, 0.0f, 0, WEFT_MOE_DROP_PROBS, 0.1f, 0, 0},
    {"top1 renormalised", 4, 1, 0.0f, 1, WEFT_MOE_DROP_PROBS, 0.01f, 0, 0},
    {"top2 starved expert, capacity 1.25", 4, 2, 1.25f, 1, WEFT_MOE_DROP_PROBS, 0.01f, 1, 0},
    {"top2 starved expert, dropless", 4, 2, 0.0f, 1, WEFT_MOE_DROP_PROBS, 0.0f, 1, 0},
    {"8 experts top2 capacity 1.0", 8, 2, 1.0f, 1, WEFT_MOE_DROP_PROBS, 0.01f, 0, 1},
};
enum { NCASES = sizeof(cases) / sizeof(cases[0]) };

static float *fill(size_t n, unsigned long long seed) {
  float *p = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) p[i] = (float)((weft_test_mix64(seed * 1000003ull + i) >> 40) * (2.0 / 16777216.0) - 1.0);
  return p;
}

static float *zeros(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

static weft_moe_config_t config(const moe_case_t *c) {
  return (weft_moe_config_t){H, F, c->experts, c->topk, c->capacity_factor, c->aux, c->renormalize, c->drop};
}

// Source s's tokens; with `starve` feature 0 is 1 for every token.
static float *tokens(const moe_case_t *c, int s) {
  float *x = fill((size_t)T * H, 100 + (unsigned long long)s);
  for (int t = 0; c->starve && t < T; t++) x[(size_t)t * H] = 1.0f;
  return x;
}

// The router; with `starve` the last expert's logit is -30 x_0 = -30,
// below every other expert's (|logit| <= 8), so no token picks it.
static float *router_weights(const moe_case_t *c) {
  int E = c->experts;
  float *w = fill((size_t)H * E, 11);
  for (int r = 0; c->starve && r < H; r++) w[(size_t)r * E + E - 1] = r == 0 ? -30.0f : 0.0f;
  return w;
}

// max |a - b| <= 1e-5 * max |b|.
static void expect_close(const char *c, const char *what, const float *a, const float *b, size_t n) {
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < n; i++) {
    diff = fmax(diff, fabs((double)a[i] - b[i]));
    scale = fmax(scale, fabs((double)b[i]));
  }
  WEFT_TEST_CHECK(diff <= 1e-5 * scale, "%s: %s: max diff %g, relative %g", c, what, diff, diff / scale);
}

typedef struct {
  float *y, *dx, aux;        // of source `me`
  float *grouter, *gexperts; // summed over the sources (full experts)
  int dropped, routed_last;  // over the sources
} ref_t;

// One rank, no communicator: sources 0 .. nsrc-1 one after another.
static void reference(const moe_case_t *c, int nsrc, int me, const float *router, const float *experts, ref_t *r) {
  weft_tp_t one;
  weft_tp_init(&one, NULL, 0);
  weft_moe_t moe;
  weft_moe_config_t cfg = config(c);
  WEFT_TEST_CHECK_RES(weft_moe_init(&moe, &cfg, &one, NULL), ncclSuccess);
  size_t nf = weft_moe_expert_full_nparams(&moe), E = (size_t)c->experts;
  float *acts = zeros(weft_moe_nacts(&moe, T)), *y = zeros(T * H), *dx = zeros(T * H);
  int *routed = calloc(E, sizeof(int));
  *r = (ref_t){zeros(T * H), zeros(T * H), 0, zeros(H * E), zeros(E * nf), 0, 0};
  for (int s = 0; s < nsrc; s++) {
    float *x = tokens(c, s), *dy = fill((size_t)T * H, 7000 + (unsigned long long)s), aux = 0;
    weft_moe_stats_t st = {.routed = routed};
    WEFT_TEST_CHECK_RES(weft_moe_forward(&moe, router, experts, T, x, y, acts, &aux, &st), ncclSuccess);
    WEFT_TEST_CHECK_RES(weft_moe_backward(&moe, router, experts, r->grouter, r->gexperts, T, dy, dx, acts),
                        ncclSuccess);
    WEFT_TEST_CHECK(st.kept + st.dropped == T * c->topk, "%s: kept %d + dropped %d", c->name, st.kept, st.dropped);
    r->dropped += st.dropped;
    r->routed_last += routed[E - 1];
    if (s == me) {
      memcpy(r->y, y, T * H * sizeof(float));
      memcpy(r->dx, dx, T * H * sizeof(float));
      r->aux = aux;
    }
    free(x), free(dy);
  }
  free(acts), free(y), free(dx), free(routed);
}

static void free_ref(ref_t *r) { free(r->y), free(r->dx), free(r->grouter), free(r->gexperts); }

typedef struct {
  int tp, ep;
  int groups;  // 1: EP groups from weft_ep_groups_create over the whole job (a DP group)
} layout_t;

typedef struct {
  weft_tp_t tp;
  ncclComm_t ep_comm, sum_comm, edp_comm;  // sum_comm: the ranks whose router gradients add up
  int src, nsrc;                           // this rank's token source, sources in the reference
} groups_t;

static void check_case(const moe_case_t *c, const groups_t *g) {
  int E = c->experts;
  float *router = router_weights(c), *experts = fill((size_t)E * ((size_t)H * F + F + F * H + H), 12);
  ref_t ref;
  reference(c, g->nsrc, g->src, router, experts, &ref);
  if (c->expect_drops) WEFT_TEST_CHECK(ref.dropped > 0, "%s: the capacity dropped nothing", c->name);
  if (c->starve) WEFT_TEST_CHECK(ref.routed_last == 0, "%s: the last expert got %d tokens", c->name, ref.routed_last);

  weft_moe_t moe;
  weft_moe_config_t cfg = config(c);
  WEFT_TEST_CHECK_RES(weft_moe_init(&moe, &cfg, &g->tp, g->ep_comm), ncclSuccess);
  int El = moe.local_experts, first = moe.ep_rank * El;
  size_t nl = weft_moe_expert_nparams(&moe), nf = weft_moe_expert_full_nparams(&moe);
  float *local = zeros(El * nl), *gexp = zeros(El * nl), *want = zeros(El * nl), *grouter = zeros((size_t)H * E);
  for (int l = 0; l < El; l++) {
    WEFT_TEST_CHECK_RES(weft_moe_expert_shard(&moe, experts + (first + l) * nf, local + l * nl), ncclSuccess);
    WEFT_TEST_CHECK_RES(weft_moe_expert_shard(&moe, ref.gexperts + (first + l) * nf, want + l * nl), ncclSuccess);
  }
  float *x = tokens(c, g->src), *dy = fill((size_t)T * H, 7000 + (unsigned long long)g->src);
  float *y = zeros(T * H), *dx = zeros(T * H), *acts = zeros(weft_moe_nacts(&moe, T)), aux = -1;
  int *received = calloc((size_t)El, sizeof(int));
  weft_moe_stats_t st = {.received = received};
  WEFT_TEST_CHECK_RES(weft_moe_forward(&moe, router, local, T, x, y, acts, &aux, &st), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_moe_backward(&moe, router, local, grouter, gexp, T, dy, dx, acts), ncclSuccess);
  expect_close(c->name, "forward", y, ref.y, T * H);
  expect_close(c->name, "input gradient", dx, ref.dx, T * H);
  expect_close(c->name, "load-balancing loss", &aux, &ref.aux, 1);
  if (c->aux > 0) WEFT_TEST_CHECK(aux > 0.5f * c->aux, "%s: aux %g for coefficient %g", c->name, aux, c->aux);
  WEFT_TEST_CHECK_RES(ncclAllReduce(grouter, grouter, (size_t)H * E, ncclFloat32, ncclSum, g->sum_comm, NULL),
                      ncclSuccess);
  expect_close(c->name, "router gradient", grouter, ref.grouter, (size_t)H * E);
  if (g->edp_comm != NULL)  // the experts' data-parallel reduction
    WEFT_TEST_CHECK_RES(ncclAllReduce(gexp, gexp, El * nl, ncclFloat32, ncclSum, g->edp_comm, NULL), ncclSuccess);
  expect_close(c->name, "expert gradients", gexp, want, El * nl);
  if (c->starve && first + El == E) {  // this rank holds the expert nobody chose
    WEFT_TEST_CHECK(received[El - 1] == 0, "%s: the starved expert computed %d rows", c->name, received[El - 1]);
    for (size_t i = 0; i < nl; i++)
      WEFT_TEST_CHECK(gexp[(El - 1) * nl + i] == 0.0f, "%s: starved expert gradient[%zu] = %g", c->name, i,
                      gexp[(El - 1) * nl + i]);
  }
  free(router), free(experts), free(local), free(gexp), free(want), free(grouter), free(x), free(dy), free(y);
  free(dx), free(acts), free(received);
  free_ref(&ref);
}

static ncclComm_t split(ncclComm_t comm, int color, int key) {
  ncclComm_t out = NULL;
  WEFT_TEST_CHECK_RES(ncclCommSplit(comm, color, key, &out, NULL), ncclSuccess);
  return out;
}

// Refusals: shapes that cannot work are named, never run.
static void check_refusals(ncclComm_t world, int nranks) {
  weft_tp_t one;
  weft_tp_init(&one, NULL, 0);
  weft_moe_t moe;
  weft_moe_config_t bad = {H, F, 4, 5, 0, 0, 1, WEFT_MOE_DROP_PROBS};
  WEFT_TEST_CHECK_RES(weft_moe_init(&moe, &bad, &one, NULL), ncclInvalidArgument);  // top-5 of 4
  bad = (weft_moe_config_t){H, F, 6, 2, 0, 0, 1, WEFT_MOE_DROP_PROBS};
  WEFT_TEST_CHECK_RES(weft_moe_init(&moe, &bad, &one, world), ncclInvalidArgument);  // 4 ranks, 6 experts
  weft_ep_groups_t g;
  WEFT_TEST_CHECK_RES(weft_ep_groups_create(world, NULL, 3, &g), ncclInvalidArgument);  // 3 does not divide 4
  WEFT_TEST_CHECK(g.ep_comm == NULL && g.edp_comm == NULL, "a refused split left communicators");
  (void)nranks;
}

static int moe_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  const layout_t *lay = arg;
  openblas_set_num_threads(1);
  ncclComm_t world = weft_test_init_rank(nranks, id, rank);
  if (world == NULL) return weft_test_failures();
  groups_t g = {.src = rank, .nsrc = nranks};
  weft_ep_groups_t eg = {0};
  ncclComm_t tp_comm = NULL, ep_comm = NULL;
  if (lay->groups) {  // the whole job is one data-parallel group
    WEFT_TEST_CHECK_RES(weft_ep_groups_create(world, NULL, lay->ep, &eg), ncclSuccess);
    WEFT_TEST_CHECK(eg.ep_size == lay->ep && eg.ep_rank == rank % lay->ep && eg.edp_size == nranks / lay->ep &&
                        eg.edp_rank == rank / lay->ep,
                    "ep %d/%d edp %d/%d", eg.ep_rank, eg.ep_size, eg.edp_rank, eg.edp_size);
    weft_tp_init(&g.tp, NULL, 0);
    g.ep_comm = eg.ep_comm, g.edp_comm = eg.edp_comm, g.sum_comm = world;
  } else {  // TP innermost, EP over the rest; the TP ranks of an EP rank share its tokens
    if (lay->tp > 1) tp_comm = split(world, rank / lay->tp, rank % lay->tp);
    if (lay->ep > 1) ep_comm = lay->tp == 1 ? world : split(world, rank % lay->tp, rank / lay->tp);
    weft_tp_init(&g.tp, tp_comm, 0);
    g.ep_comm = ep_comm, g.sum_comm = ep_comm != NULL ? ep_comm : world;
    g.src = rank / lay->tp, g.nsrc = lay->ep;
  }
  for (int i = 0; i < NCASES; i++) check_case(&cases[i], &g);
  if (nranks == 4 && !lay->groups && lay->tp == 1) check_refusals(world, nranks);
  weft_ep_groups_destroy(&eg);
  if (tp_comm != NULL) ncclCommDestroy(tp_comm);
  if (ep_comm != NULL && ep_comm != world) ncclCommDestroy(ep_comm);
  ncclCommDestroy(world);
  return weft_test_failures();
}

static void run_moe(int n, layout_t lay) {
  weft_test_env_defaults();
  cr_expect_eq(weft_test_fork_ranks(n, moe_body, &lay, 90), 0, "see stderr");
}

Test(parallel_moe, ep1, .timeout = 120) { run_moe(1, (layout_t){1, 1, 0}); }
Test(parallel_moe, ep2, .timeout = 120) { run_moe(2, (layout_t){1, 2, 0}); }
Test(parallel_moe, ep4, .timeout = 120) { run_moe(4, (layout_t){1, 4, 0}); }
Test(parallel_moe, tp2_inside_experts_ep2, .timeout = 120) { run_moe(4, (layout_t){2, 2, 0}); }
Test(parallel_moe, ep2_in_dp4_expert_dp_reduction, .timeout = 120) { run_moe(4, (layout_t){1, 2, 1}); }

// ---- Routing groups: G ranks split one call of G T tokens as context
// parallelism does (rank r holds chunks r and 2G-1-r of 2G), against one
// rank routing the whole call: the capacity counts the call's tokens and
// each expert keeps what one rank keeps over all of them. Each rank's
// objective is G (its y . dy) + its aux, whose mean over the group is the
// call's y . dy + aux, so dx is G times the reference's rows, the mean aux
// the reference's, and the mean gradients the reference's.

static int group_index(int G, int r, int t) {
  int half = T / 2;
  return t < half ? r * half + t : (2 * G - 1 - r) * half + t - half;
}

static void check_group_case(const moe_case_t *c, ncclComm_t world, int G, int r) {
  int E = c->experts, all = G * T;
  weft_tp_t one;
  weft_tp_init(&one, NULL, 0);
  weft_moe_config_t cfg = config(c);
  weft_moe_t ref, moe;
  WEFT_TEST_CHECK_RES(weft_moe_init(&ref, &cfg, &one, NULL), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_moe_init(&moe, &cfg, &one, NULL), ncclSuccess);
  int index[T];
  for (int t = 0; t < T; t++) index[t] = group_index(G, r, t);
  WEFT_TEST_CHECK_RES(weft_moe_route_group(&moe, world, T, index), ncclSuccess);
  WEFT_TEST_CHECK(weft_moe_capacity(&moe, T) == weft_moe_capacity(&ref, all), "%s: capacity %d, one call's %d",
                  c->name, weft_moe_capacity(&moe, T), weft_moe_capacity(&ref, all));
  size_t nf = weft_moe_expert_full_nparams(&ref), np = (size_t)E * nf;
  float *router = router_weights(c), *experts = fill(np, 12);
  float *x_all = fill((size_t)all * H, 100), *dy_all = fill((size_t)all * H, 7000);
  for (int t = 0; c->starve && t < all; t++) x_all[(size_t)t * H] = 1.0f;
  float *y_ref = zeros((size_t)all * H), *dx_ref = zeros((size_t)all * H), *gr_ref = zeros((size_t)H * E);
  float *ge_ref = zeros(np), *acts_ref = zeros(weft_moe_nacts(&ref, all)), aux_ref = 0;
  weft_moe_stats_t st_ref = {0}, st = {0};
  WEFT_TEST_CHECK_RES(weft_moe_forward(&ref, router, experts, all, x_all, y_ref, acts_ref, &aux_ref, &st_ref),
                      ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_moe_backward(&ref, router, experts, gr_ref, ge_ref, all, dy_all, dx_ref, acts_ref),
                      ncclSuccess);
  float *x = zeros(T * H), *dy = zeros(T * H), *y = zeros(T * H), *dx = zeros(T * H), *want_y = zeros(T * H);
  float *want_dx = zeros(T * H), *gr = zeros((size_t)H * E), *ge = zeros(np), *acts = zeros(weft_moe_nacts(&moe, T));
  for (int t = 0; t < T; t++)
    for (int j = 0; j < H; j++) {
      size_t at = (size_t)index[t] * H + j, here = (size_t)t * H + j;
      x[here] = x_all[at], dy[here] = (float)G * dy_all[at];
      want_y[here] = y_ref[at], want_dx[here] = (float)G * dx_ref[at];
    }
  float aux = -1;
  WEFT_TEST_CHECK_RES(weft_moe_forward(&moe, router, experts, T, x, y, acts, &aux, &st), ncclSuccess);
  WEFT_TEST_CHECK_RES(weft_moe_backward(&moe, router, experts, gr, ge, T, dy, dx, acts), ncclSuccess);
  expect_close(c->name, "group forward", y, want_y, T * H);
  expect_close(c->name, "group input gradient", dx, want_dx, T * H);
  int dropped = st.dropped;
  WEFT_TEST_CHECK_RES(ncclAllReduce(&aux, &aux, 1, ncclFloat32, ncclAvg, world, NULL), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclAllReduce(&dropped, &dropped, 1, ncclInt32, ncclSum, world, NULL), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclAllReduce(gr, gr, (size_t)H * E, ncclFloat32, ncclAvg, world, NULL), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclAllReduce(ge, ge, np, ncclFloat32, ncclAvg, world, NULL), ncclSuccess);
  expect_close(c->name, "group load-balancing loss (mean)", &aux, &aux_ref, 1);
  WEFT_TEST_CHECK(dropped == st_ref.dropped, "%s: the group dropped %d, one call %d", c->name, dropped,
                  st_ref.dropped);
  if (c->expect_drops) WEFT_TEST_CHECK(st_ref.dropped > 0, "%s: the capacity dropped nothing", c->name);
  expect_close(c->name, "group router gradient (mean)", gr, gr_ref, (size_t)H * E);
  expect_close(c->name, "group expert gradients (mean)", ge, ge_ref, np);
  WEFT_TEST_CHECK_RES(weft_moe_forward(&moe, router, experts, T - 1, x, y, acts, &aux, NULL), ncclInvalidArgument);
  free(router), free(experts), free(x_all), free(dy_all), free(y_ref), free(dx_ref), free(gr_ref), free(ge_ref);
  free(acts_ref), free(x), free(dy), free(y), free(dx), free(want_y), free(want_dx), free(gr), free(ge), free(acts);
}

static int group_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  openblas_set_num_threads(1);
  ncclComm_t world = weft_test_init_rank(nranks, id, rank);
  if (world == NULL) return weft_test_failures();
  for (int i = 0; i < NCASES; i++) check_group_case(&cases[i], world, nranks, rank);
  weft_tp_t one;
  weft_tp_init(&one, NULL, 0);
  weft_moe_t moe;
  weft_moe_config_t cfg = config(&cases[0]);
  WEFT_TEST_CHECK_RES(weft_moe_init(&moe, &cfg, &one, NULL), ncclSuccess);
  int bad[T];
  for (int t = 0; t < T; t++) bad[t] = nranks * T + t;  // outside the group's tokens
  WEFT_TEST_CHECK_RES(weft_moe_route_group(&moe, world, T, bad), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(weft_moe_route_group(&moe, world, T, NULL), ncclInvalidArgument);
  ncclCommDestroy(world);
  return weft_test_failures();
}

static void run_group(int n) {
  weft_test_env_defaults();
  cr_expect_eq(weft_test_fork_ranks(n, group_body, NULL, 90), 0, "see stderr");
}

Test(parallel_moe, routing_group_of_2_is_one_call, .timeout = 120) { run_group(2); }
Test(parallel_moe, routing_group_of_4_is_one_call, .timeout = 120) { run_group(4); }

// ---- The layer's gradients against central finite differences (one rank).
// L = sum(y * dy) + aux, in double; the backward with dy gives dL. A step
// of 1e-3 changes no routing decision on this data (checked: the kept and
// dropped counts and the per-expert counts stay those of the base point).

typedef struct {
  weft_moe_t moe;
  float *router, *experts, *x, *dy, *y, *acts;
  int routed[8], kept;
} fd_t;

static double objective(fd_t *f, int *same_routing) {
  float aux = 0;
  int routed[8];
  weft_moe_stats_t st = {.routed = routed};
  cr_assert_eq(weft_moe_forward(&f->moe, f->router, f->experts, T, f->x, f->y, f->acts, &aux, &st), ncclSuccess);
  double l = aux;
  for (int i = 0; i < T * H; i++) l += (double)f->y[i] * f->dy[i];
  *same_routing = st.kept == f->kept && memcmp(routed, f->routed, (size_t)f->moe.cfg.experts * sizeof(int)) == 0;
  return l;
}

static void finite_differences(const moe_case_t *c) {
  weft_tp_t one;
  weft_tp_init(&one, NULL, 0);
  fd_t f;
  weft_moe_config_t cfg = config(c);
  cr_assert_eq(weft_moe_init(&f.moe, &cfg, &one, NULL), ncclSuccess);
  int E = c->experts;
  size_t nf = weft_moe_expert_full_nparams(&f.moe);
  f.router = fill((size_t)H * E, 21), f.experts = fill(E * nf, 22), f.x = fill(T * H, 23), f.dy = fill(T * H, 24);
  f.y = zeros(T * H), f.acts = zeros(weft_moe_nacts(&f.moe, T));
  float *gr = zeros((size_t)H * E), *ge = zeros(E * nf), *gx = zeros(T * H), aux;
  weft_moe_stats_t st = {.routed = f.routed};
  cr_assert_eq(weft_moe_forward(&f.moe, f.router, f.experts, T, f.x, f.y, f.acts, &aux, &st), ncclSuccess);
  f.kept = st.kept;
  cr_assert_eq(weft_moe_backward(&f.moe, f.router, f.experts, gr, ge, T, f.dy, gx, f.acts), ncclSuccess);
  struct {
    const char *what;
    float *p, *g;
    size_t n;
  } sets[] = {{"router", f.router, gr, (size_t)H * E}, {"experts", f.experts, ge, E * nf}, {"input", f.x, gx, T * H}};
  int checked = 0, skipped = 0;
  for (size_t s = 0; s < 3; s++)
    for (size_t i = s % 5; i < sets[s].n; i += 7) {  // a spread sample of each set
      float keep = sets[s].p[i], eps = 1e-3f;
      int same_up, same_down;
      sets[s].p[i] = keep + eps;
      double up = objective(&f, &same_up);
      sets[s].p[i] = keep - eps;
      double down = objective(&f, &same_down);
      sets[s].p[i] = keep;
      if (!same_up || !same_down) {
        skipped++;
        continue;
      }
      double num = (up - down) / ((double)(keep + eps) - (double)(keep - eps));  // the steps as stored
      double ana = sets[s].g[i];
      cr_expect(fabs(num - ana) <= 2e-3 + 1e-2 * fabs(ana), "%s: %s[%zu]: finite difference %.6f, backward %.6f",
                c->name, sets[s].what, i, num, ana);
      checked++;
    }
  cr_expect(checked > 100 && skipped * 10 < checked, "%s: %d checked, %d skipped for a routing change", c->name,
            checked, skipped);
  free(f.router), free(f.experts), free(f.x), free(f.dy), free(f.y), free(f.acts), free(gr), free(ge), free(gx);
}

Test(parallel_moe, gradients_match_finite_differences, .timeout = 60) {
  openblas_set_num_threads(1);
  for (int i = 0; i < 5; i++) finite_differences(&cases[i]);
}

// ---- The stated rules, computed here independently in double (one rank):
// softmax top-k with ties to the lower index, the weights (renormalised or
// not), C = ceil(factor * T * k / E), which assignments drop, the output
// as the weighted sum of the kept experts' MLPs, and Switch's loss.

static double gelu(double x) { return 0.5 * x * (1.0 + tanh(0.7978845608 * (x + 0.044715 * x * x * x))); }

// Expert e's output for token row x (full parameters [W1 | b1 | W2 | b2]).
static void expert_out(const float *p, const float *x, double *out) {
  const float *w1 = p, *b1 = w1 + H * F, *w2 = b1 + F, *b2 = w2 + F * H;
  for (int c = 0; c < H; c++) out[c] = b2[c];
  for (int j = 0; j < F; j++) {
    double a = b1[j];
    for (int r = 0; r < H; r++) a += (double)x[r] * w1[r * F + j];
    a = gelu(a);
    for (int c = 0; c < H; c++) out[c] += a * w2[j * H + c];
  }
}

static void check_rules(const moe_case_t *c) {
  int E = c->experts, k = c->topk;
  weft_tp_t one;
  weft_tp_init(&one, NULL, 0);
  weft_moe_t moe;
  weft_moe_config_t cfg = config(c);
  cr_assert_eq(weft_moe_init(&moe, &cfg, &one, NULL), ncclSuccess);
  size_t nf = weft_moe_expert_full_nparams(&moe);
  float *router = router_weights(c), *experts = fill(E * nf, 12), *x = tokens(c, 0), *y = zeros(T * H), aux = 0;
  float *acts = zeros(weft_moe_nacts(&moe, T));
  int *slots = calloc((size_t)T * k, sizeof(int));
  weft_moe_stats_t st = {.slots = slots};
  cr_assert_eq(weft_moe_forward(&moe, router, experts, T, x, y, acts, &aux, &st), ncclSuccess);
  double p[T][8], mass[8] = {0};
  int routed[8] = {0}, order[T][8];
  for (int t = 0; t < T; t++) {
    double max = -1e300, sum = 0;
    for (int e = 0; e < E; e++) {
      p[t][e] = 0;
      for (int r = 0; r < H; r++) p[t][e] += (double)x[t * H + r] * router[r * E + e];
      max = fmax(max, p[t][e]);
    }
    for (int e = 0; e < E; e++) sum += (p[t][e] = exp(p[t][e] - max));
    for (int e = 0; e < E; e++) p[t][e] /= sum, mass[e] += p[t][e] / T, order[t][e] = e;
    for (int i = 0; i < E; i++)  // by probability, ties to the lower index
      for (int j = i + 1; j < E; j++)
        if (p[t][order[t][j]] > p[t][order[t][i]]) {
          int s = order[t][i];
          order[t][i] = order[t][j], order[t][j] = s;
        }
    for (int i = 0; i < k; i++) {
      int got = slots[t * k + i] >= 0 ? slots[t * k + i] : -1 - slots[t * k + i];
      cr_expect_eq(got, order[t][i], "%s: token %d slot %d: expert %d, want %d", c->name, t, i, got, order[t][i]);
      routed[order[t][i]]++;
    }
  }
  int cap = c->capacity_factor > 0 ? (int)ceil((double)c->capacity_factor * T * k / E) : T;
  cap = cap < T ? cap : T;
  cr_expect_eq(st.capacity, c->capacity_factor > 0 ? cap : -1, "%s: capacity", c->name);
  for (int e = 0; e < E; e++) {  // per expert: min(routed, C) kept, the right ones dropped
    int kept = 0;
    for (int s = 0; s < T * k; s++) {
      if (slots[s] != e) continue;
      kept++;
      for (int u = 0; u < T * k; u++) {
        if (slots[u] != -1 - e) continue;
        if (c->drop == WEFT_MOE_DROP_POSITION)
          cr_expect(s < u, "%s: expert %d kept token %d but dropped the earlier %d", c->name, e, s / k, u / k);
        else
          cr_expect(p[s / k][e] >= p[u / k][e], "%s: expert %d kept p=%g, dropped p=%g", c->name, e, p[s / k][e],
                    p[u / k][e]);
      }
    }
    cr_expect_eq(kept, routed[e] < cap ? routed[e] : cap, "%s: expert %d kept %d of %d (C=%d)", c->name, e, kept,
                 routed[e], cap);
  }
  double want_aux = 0, scale = 1e-30, diff = 0;
  for (int e = 0; e < E; e++) want_aux += (double)routed[e] / (T * k) * mass[e];
  want_aux *= (double)c->aux * E;
  cr_expect(fabs(aux - want_aux) <= 1e-5 * fmax(want_aux, 1e-6), "%s: aux %.8f, want %.8f", c->name, aux, want_aux);
  for (int t = 0; t < T; t++) {
    double want[H] = {0}, out[H], norm = 0;
    for (int i = 0; i < k; i++) norm += c->renormalize ? p[t][order[t][i]] : 0;
    for (int i = 0; i < k; i++) {
      if (slots[t * k + i] < 0) continue;
      int e = slots[t * k + i];
      double w = c->renormalize ? p[t][e] / norm : p[t][e];
      expert_out(experts + e * nf, x + t * H, out);
      for (int col = 0; col < H; col++) want[col] += w * out[col];
    }
    for (int col = 0; col < H; col++) {
      diff = fmax(diff, fabs(y[t * H + col] - want[col]));
      scale = fmax(scale, fabs(want[col]));
    }
  }
  cr_expect(diff <= 1e-4 * scale, "%s: output differs from the rules by %g (scale %g)", c->name, diff, scale);
  free(router), free(experts), free(x), free(y), free(acts), free(slots);
}

Test(parallel_moe, routing_capacity_and_loss_follow_the_rules, .timeout = 60) {
  openblas_set_num_threads(1);
  for (int i = 0; i < NCASES; i++) check_rules(&cases[i]);
}
