/*
 * topo_search.c — rings and trees over the graph.
 *
 * A ring is scored by its bottleneck: every hop is the best path between
 * consecutive members, and a link (per direction) that several hops cross is
 * shared among them, so a ring that crosses a PCI switch or a socket twice
 * in one direction gets half that link. Ties go to the ring whose hops have
 * the lowest classes (fewest crossings), then the fewest links. Up to nine
 * GPUs every ring is tried (branch and bound, first GPU fixed); beyond that
 * the GPUs are taken in tree order (by NUMA node, then PCI position) and
 * improved by reversing segments while that helps.
 *
 * On a host without GPUs the ring is over ranks placed one per core in core
 * order: sorted by NUMA node, it crosses the socket link once per direction.
 * The tree is the chain NCCL uses inside a node: the ring's order, from the
 * member nearest a NIC.
 */
#include "topo.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  const weft_topo_t *t;
  int n;
  const int *nodes;      // graph node of each member
  weft_topo_path_t *pair; // n x n best paths
  int *usage;             // per link direction
} ring_ctx_t;

static const weft_topo_path_t *pair_path(const ring_ctx_t *c, int i, int j) { return &c->pair[i * c->n + j]; }

static void use(ring_ctx_t *c, int i, int j, int delta) {
  const weft_topo_path_t *p = pair_path(c, i, j);
  for (int h = 0; h < p->nhops; h++) c->usage[p->hops[h].link * 2 + p->hops[h].dir] += delta;
}

// Bottleneck of the hops (order[k], order[k+1]) for k < nh, under c->usage.
static double hops_bw(const ring_ctx_t *c, const int *order, int nh, int n) {
  double bw = WEFT_TOPO_LOC_BW;
  for (int k = 0; k < nh; k++) {
    const weft_topo_path_t *p = pair_path(c, order[k], order[(k + 1) % n]);
    if (p->cls == WEFT_PATH_DIS) return 0;
    for (int h = 0; h < p->nhops; h++) {
      double share = p->hops[h].cap / c->usage[p->hops[h].link * 2 + p->hops[h].dir];
      if (share < bw) bw = share;
    }
  }
  return bw;
}

static int hops_cost(const ring_ctx_t *c, int i, int j) {
  const weft_topo_path_t *p = pair_path(c, i, j);
  return (int)p->cls * 64 + p->nhops;
}

static int ctx_init(ring_ctx_t *c, const weft_topo_t *t, const int *nodes, int n) {
  memset(c, 0, sizeof(*c));
  c->t = t;
  c->n = n;
  c->nodes = nodes;
  c->pair = calloc((size_t)n * n, sizeof(weft_topo_path_t));
  c->usage = calloc((size_t)t->nlinks * 2 + 1, sizeof(int));
  if (!c->pair || !c->usage) return -1;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      weft_topo_path_t *p = &c->pair[i * n + j];
      if (nodes[i] == nodes[j]) { // two ranks on one NUMA node: memory
        p->cls = WEFT_PATH_LOC;
        p->bw = WEFT_TOPO_LOC_BW;
      } else
        weft_topo_path(t, nodes[i], nodes[j], p);
    }
  return 0;
}

static void ctx_free(ring_ctx_t *c) {
  free(c->pair);
  free(c->usage);
}

static double order_bw(ring_ctx_t *c, const int *order, int n, int closed) {
  if (n < 2) return WEFT_TOPO_LOC_BW;
  int nh = closed ? n : n - 1;
  for (int k = 0; k < nh; k++) use(c, order[k], order[(k + 1) % n], 1);
  double bw = hops_bw(c, order, nh, n);
  for (int k = 0; k < nh; k++) use(c, order[k], order[(k + 1) % n], -1);
  return bw;
}

static int order_cost(const ring_ctx_t *c, const int *order, int n) {
  int cost = 0;
  for (int k = 0; k < n && n > 1; k++) cost += hops_cost(c, order[k], order[(k + 1) % n]);
  return cost;
}

double weft_topo_order_bw(const weft_topo_t *t, const int *order, int n, int closed) {
  ring_ctx_t c;
  int *idx = malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
  double bw = 0;
  if (idx && ctx_init(&c, t, order, n) == 0) {
    for (int i = 0; i < n; i++) idx[i] = i;
    bw = order_bw(&c, idx, n, closed);
  }
  if (idx) ctx_free(&c);
  free(idx);
  return bw;
}

static int better_ring(double bw, int cost, double best_bw, int best_cost) {
  if (bw > best_bw + 1e-9) return 1;
  return bw > best_bw - 1e-9 && cost < best_cost;
}

// Branch and bound over orders with member 0 first.
typedef struct {
  ring_ctx_t *c;
  int *cur, *best, *used;
  double best_bw;
  int best_cost;
} bnb_t;

static void bnb(bnb_t *s, int depth, int cost) {
  ring_ctx_t *c = s->c;
  int n = c->n;
  if (depth == n) {
    use(c, s->cur[n - 1], s->cur[0], 1);
    double bw = hops_bw(c, s->cur, n, n);
    int total = cost + hops_cost(c, s->cur[n - 1], s->cur[0]);
    use(c, s->cur[n - 1], s->cur[0], -1);
    if (better_ring(bw, total, s->best_bw, s->best_cost)) {
      s->best_bw = bw;
      s->best_cost = total;
      memcpy(s->best, s->cur, (size_t)n * sizeof(int));
    }
    return;
  }
  for (int j = 1; j < n; j++) {
    if (s->used[j]) continue;
    int prev = s->cur[depth - 1];
    use(c, prev, j, 1);
    s->cur[depth] = j;
    double bw = hops_bw(c, s->cur, depth, n + 1); // hops placed so far (no wrap)
    int ncost = cost + hops_cost(c, prev, j);
    if (better_ring(bw, ncost, s->best_bw, s->best_cost) || s->best_bw < 0) {
      s->used[j] = 1;
      bnb(s, depth + 1, ncost);
      s->used[j] = 0;
    }
    use(c, prev, j, -1);
  }
}

// Tree order (NUMA node, then position in the PCI tree) improved by 2-opt.
static void heuristic(ring_ctx_t *c, int *order) {
  int n = c->n;
  for (int i = 0; i < n; i++) order[i] = i;
  for (int i = 1; i < n; i++) // insertion sort by (numa, node index)
    for (int j = i; j > 0; j--) {
      const weft_topo_node_t *a = &c->t->nodes[c->nodes[order[j - 1]]], *b = &c->t->nodes[c->nodes[order[j]]];
      if (a->numa < b->numa || (a->numa == b->numa && c->nodes[order[j - 1]] <= c->nodes[order[j]])) break;
      int x = order[j];
      order[j] = order[j - 1];
      order[j - 1] = x;
    }
  double bw = order_bw(c, order, n, 1);
  int cost = order_cost(c, order, n);
  for (int pass = 0, improved = 1; improved && pass < 8; pass++) {
    improved = 0;
    for (int i = 1; i < n - 1; i++)
      for (int j = i + 1; j < n; j++) {
        for (int a = i, b = j; a < b; a++, b--) {
          int x = order[a];
          order[a] = order[b];
          order[b] = x;
        }
        double nbw = order_bw(c, order, n, 1);
        int ncost = order_cost(c, order, n);
        if (better_ring(nbw, ncost, bw, cost)) {
          bw = nbw, cost = ncost, improved = 1;
        } else
          for (int a = i, b = j; a < b; a++, b--) {
            int x = order[a];
            order[a] = order[b];
            order[b] = x;
          }
      }
  }
}

int weft_topo_order_cost(const weft_topo_t *t, const int *nodes, int n) {
  int cost = 0;
  for (int k = 0; k < n && n > 1; k++) {
    int a = nodes[k], b = nodes[(k + 1) % n];
    weft_topo_path_t p;
    if (a == b) continue;  // two ranks on one node: cost 0, as ctx_init has it
    if (weft_topo_path(t, a, b, &p) != 0) return 1 << 30;
    cost += (int)p.cls * 64 + p.nhops;
  }
  return cost;
}

int weft_topo_ring_search(const weft_topo_t *t, const int *nodes, int n, int *order, double *bw) {
  ring_ctx_t c;
  if (ctx_init(&c, t, nodes, n)) {
    ctx_free(&c);
    return -1;
  }
  int distinct = 1;
  for (int i = 1; i < n; i++) distinct &= nodes[i] != nodes[i - 1];
  if (n <= 9 && distinct && n > 2) {
    bnb_t s = {&c, calloc((size_t)n, sizeof(int)), order, calloc((size_t)n, sizeof(int)), -1, 1 << 30};
    if (!s.cur || !s.used) {
      free(s.cur);
      free(s.used);
      ctx_free(&c);
      return -1;
    }
    for (int i = 0; i < n; i++) order[i] = i;
    s.cur[0] = 0;
    s.used[0] = 1;
    bnb(&s, 1, 0);
    free(s.cur);
    free(s.used);
  } else
    heuristic(&c, order);
  *bw = order_bw(&c, order, n, 1);
  ctx_free(&c);
  return 0;
}

int weft_topo_cpu_cores(const weft_topo_t *t, int cpu, int *cores, int max) {
  const char *mask = weft_topo_attr_get(&t->nodes[cpu].attrs, "affinity");
  if (!mask) return 0;
  int ngroups = 1, count = 0;
  for (const char *p = mask; *p; p++) ngroups += *p == ',';
  const char *g = mask;
  for (int gi = ngroups - 1; gi >= 0; gi--) { // first group holds the highest cores
    const char *end = strchr(g, ',');
    char buf[24] = {0};
    size_t len = end ? (size_t)(end - g) : strlen(g);
    if (len >= sizeof(buf)) len = sizeof(buf) - 1;
    memcpy(buf, g, len);
    unsigned long bits = strtoul(buf, NULL, 16);
    for (int b = 31; b >= 0; b--)
      if (bits >> b & 1) {
        if (count < max) cores[count] = gi * 32 + b;
        count++;
      }
    g = end ? end + 1 : g + len;
  }
  // Groups were read high to low: sort ascending.
  int n = count < max ? count : max;
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && cores[j - 1] > cores[j]; j--) {
      int x = cores[j];
      cores[j] = cores[j - 1];
      cores[j - 1] = x;
    }
  return count;
}

// CPU-only: rank r sits on the r-th core (cores in ascending order).
static int place_ranks(const weft_topo_t *t, int nranks, int **rank_cpu, int *out_nranks) {
  int ncores = 0, cap = 4096;
  int *core = malloc(sizeof(int) * (size_t)cap), *core_cpu = malloc(sizeof(int) * (size_t)cap);
  int *buf = malloc(sizeof(int) * (size_t)cap);
  if (!core || !core_cpu || !buf) goto fail;
  for (int i = 0; i < t->nnodes; i++) {
    if (t->nodes[i].kind != WEFT_TOPO_CPU) continue;
    int k = weft_topo_cpu_cores(t, i, buf, cap);
    if (k > cap) k = cap;
    if (k == 0) buf[k++] = -1 - i; // no mask: one pseudo core
    for (int j = 0; j < k && ncores < cap; j++) core[ncores] = buf[j], core_cpu[ncores++] = i;
  }
  for (int i = 1; i < ncores; i++) // ascending core id, pseudo cores last
    for (int j = i; j > 0 && (unsigned)core[j - 1] > (unsigned)core[j]; j--) {
      int x = core[j], y = core_cpu[j];
      core[j] = core[j - 1], core_cpu[j] = core_cpu[j - 1];
      core[j - 1] = x, core_cpu[j - 1] = y;
    }
  if (nranks <= 0) nranks = ncores;
  *rank_cpu = malloc(sizeof(int) * (size_t)(nranks > 0 ? nranks : 1));
  if (!*rank_cpu) goto fail;
  for (int r = 0; r < nranks; r++) (*rank_cpu)[r] = core_cpu[r % ncores];
  *out_nranks = nranks;
  free(core), free(core_cpu), free(buf);
  return 0;
fail:
  free(core), free(core_cpu), free(buf);
  return -1;
}

static int ring_alloc(weft_topo_ring_t *r, int n, int tree) {
  r->n = n;
  r->members = calloc((size_t)(n > 0 ? n : 1), sizeof(int));
  r->parent = tree ? calloc((size_t)(n > 0 ? n : 1), sizeof(int)) : NULL;
  return !r->members || (tree && !r->parent) ? -1 : 0;
}

int weft_topo_search(const weft_topo_t *t, int nranks, weft_topo_plan_t *plan) {
  memset(plan, 0, sizeof(*plan));
  int ngpus = weft_topo_count(t, WEFT_TOPO_GPU);
  int *nodes = NULL, *order = NULL, n = 0;
  int cpu_only = ngpus == 0;
  if (cpu_only) {
    if (place_ranks(t, nranks, &nodes, &n)) return -1;
    plan->nranks = n;
    plan->rank_numa = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (!plan->rank_numa) goto fail;
    for (int r = 0; r < n; r++) plan->rank_numa[r] = t->nodes[nodes[r]].numa;
  } else {
    nodes = malloc(sizeof(int) * (size_t)ngpus);
    if (!nodes) return -1;
    for (int i = 0; i < t->nnodes; i++)
      if (t->nodes[i].kind == WEFT_TOPO_GPU) nodes[n++] = i;
    for (int i = 1; i < n; i++)  // rank r drives the r-th GPU by bus id, as CUDA numbers them
      for (int j = i; j > 0 && strcmp(t->nodes[nodes[j - 1]].busid, t->nodes[nodes[j]].busid) > 0; j--) {
        int x = nodes[j];
        nodes[j] = nodes[j - 1];
        nodes[j - 1] = x;
      }
  }
  order = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
  if (!order || ring_alloc(&plan->ring, n, 0) || ring_alloc(&plan->tree, n, 1)) goto fail;
  // The order a communicator would take with one rank per GPU (rank r on
  // the r-th GPU) or per core: the code path init runs (topo_order.c).
  if (weft_topo_rank_order(t, nodes, n, order, NULL) < 0) goto fail;
  int *ring_nodes = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
  if (!ring_nodes) goto fail;
  for (int i = 0; i < n; i++) {
    plan->ring.members[i] = cpu_only ? order[i] : nodes[order[i]];
    ring_nodes[i] = nodes[order[i]];
  }
  plan->ring.is_ranks = plan->tree.is_ranks = cpu_only;
  plan->ring.bottleneck = weft_topo_order_bw(t, ring_nodes, n, 1);
  // Tree: the ring's order as a chain from the member nearest a NIC.
  int root = 0;
  if (!cpu_only) {
    int nic[256];
    int ng = weft_topo_nearest_nics(t, nic, 256);
    weft_path_class_t best = WEFT_PATH_DIS;
    for (int i = 0; i < n && ng > 0; i++) {
      int g = order[i]; // GPU index in node order
      weft_topo_path_t p;
      if (g < 256 && nic[g] >= 0 && weft_topo_path(t, nodes[g], nic[g], &p) == 0 && p.cls < best) best = p.cls, root = i;
    }
  }
  for (int i = 0; i < n; i++) {
    plan->tree.members[i] = plan->ring.members[(root + i) % n];
    plan->tree.parent[i] = i - 1;
    order[i] = ring_nodes[(root + i) % n];
  }
  plan->tree.bottleneck = weft_topo_order_bw(t, order, n, 0);
  free(ring_nodes);
  free(nodes);
  free(order);
  return 0;
fail:
  free(nodes);
  free(order);
  weft_topo_plan_free(plan);
  return -1;
}

void weft_topo_plan_free(weft_topo_plan_t *plan) {
  free(plan->ring.members);
  free(plan->tree.members);
  free(plan->tree.parent);
  free(plan->rank_numa);
  memset(plan, 0, sizeof(*plan));
}
