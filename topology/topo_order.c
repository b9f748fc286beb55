/*
 * topo_order.c — where the ranks of one host sit in the graph, and the ring
 * they should form.
 *
 * A rank sits at its GPU when it drives one, else at the NUMA node its
 * process is bound to. The ranks' ring is the topology's ring search over
 * those places (topo_search.c: the best bottleneck, then the fewest switch
 * and socket crossings), started at the rank nearest a NIC, as NCCL starts
 * its intra-node chains there. A ring is only ever changed for a gain: when
 * rank order is as good, rank order it stays, so a host whose ranks all sit
 * alike (one socket, no GPUs; an NVSwitch machine) keeps the order it had.
 */
#include "topo.h"

#include <stdlib.h>
#include <string.h>

int weft_topo_place(const weft_topo_t *t, const char *gpu_busid, const int *cpus, int ncpus) {
  if (gpu_busid != NULL && gpu_busid[0] != '\0') {
    char id[32];
    weft_topo_busid_norm(gpu_busid, id, sizeof(id));
    int g = weft_topo_find_busid(t, id);
    if (g >= 0 && t->nodes[g].kind == WEFT_TOPO_GPU) return g;
  }
  if (ncpus <= 0) return -1;
  enum { MAX_CORES = 4096 };
  int *cores = malloc(sizeof(int) * MAX_CORES), found = -1;
  if (cores == NULL) return -1;
  for (int i = 0; i < t->nnodes && found != -2; i++) {
    if (t->nodes[i].kind != WEFT_TOPO_CPU) continue;
    int k = weft_topo_cpu_cores(t, i, cores, MAX_CORES), all = 1;
    if (k > MAX_CORES) k = MAX_CORES;
    for (int c = 0; c < ncpus && all; c++) {
      int in = 0;
      for (int j = 0; j < k && !in; j++) in = cores[j] == cpus[c];
      all = in;
    }
    if (all && k > 0) found = found == -1 ? i : -2;  // two nodes holding them all: a broken mask
  }
  free(cores);
  return found >= 0 ? found : -1;
}

// How near node is to a NIC: the best path class to any NIC.
static weft_path_class_t nic_distance(const weft_topo_t *t, int node) {
  weft_path_class_t best = WEFT_PATH_DIS;
  for (int i = 0; i < t->nnodes; i++) {
    weft_topo_path_t p;
    if (t->nodes[i].kind == WEFT_TOPO_NIC && weft_topo_path(t, node, i, &p) == 0 && p.cls < best) best = p.cls;
  }
  return best;
}

static void identity(int *order, int n) {
  for (int i = 0; i < n; i++) order[i] = i;
}

// Is the ring over nodes a[] a real gain over the one over nodes b[]?
static int better(const weft_topo_t *t, const int *a, const int *b, int n) {
  double bw_a = weft_topo_order_bw(t, a, n, 1), bw_b = weft_topo_order_bw(t, b, n, 1);
  if (bw_a > bw_b + 1e-9) return 1;
  return bw_a > bw_b - 1e-9 && weft_topo_order_cost(t, a, n) < weft_topo_order_cost(t, b, n);
}

int weft_topo_rank_order(const weft_topo_t *t, const int *place, int n, int *order, double *bw) {
  identity(order, n);
  if (bw) *bw = 0;
  if (n <= 0) return 0;
  int known = 1, alike = 1;
  for (int i = 0; i < n; i++) {
    known &= place[i] >= 0 && place[i] < t->nnodes;
    alike &= place[i] == place[0];
  }
  if (!known) return 0;
  if (bw) *bw = weft_topo_order_bw(t, place, n, 1);
  if (alike || n <= 2) return 0;  // every order of two ranks is the same ring
  int *found = malloc(sizeof(int) * (size_t)n), *nodes = malloc(sizeof(int) * (size_t)n);
  double found_bw = 0;
  if (found == NULL || nodes == NULL || weft_topo_ring_search(t, place, n, found, &found_bw) != 0) {
    free(found);
    free(nodes);
    return -1;
  }
  for (int k = 0; k < n; k++) nodes[k] = place[found[k]];
  int changed = 0;
  if (better(t, nodes, place, n)) {
    int start = 0;  // the first position nearest a NIC
    weft_path_class_t near = WEFT_PATH_DIS;
    for (int k = 0; k < n; k++) {
      weft_path_class_t d = nic_distance(t, nodes[k]);
      if (d < near) near = d, start = k;
    }
    for (int k = 0; k < n; k++) order[k] = found[(start + k) % n];
    for (int k = 0; k < n; k++) changed |= order[k] != k;
    if (bw) *bw = found_bw;
  }
  free(found);
  free(nodes);
  return changed;
}
