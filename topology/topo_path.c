/*
 * topo_path.c — the best path between two nodes, its class and bandwidth,
 * and each GPU's nearest NIC.
 *
 * A label-setting search (Dijkstra) orders partial paths by class (NCCL's
 * LOC < NVL < NVB < PIX < PXB < PHB < SYS < NET), then bottleneck bandwidth,
 * then hop count; all three only get worse as a path grows, so the first
 * time a node is settled its path is the best. The class of a hop depends on
 * the node it leaves: through a CPU it is at least PHB, between two PCI
 * switches PXB, NVLink through a GPU NVB. GPUs and NVSwitches forward NVLink
 * traffic only, a NIC only to its ports, a port nothing.
 *
 * GPUs that meet over NVLink use every NVLink route between them at once
 * (traffic is spread over all links and switches), so such a path's
 * bandwidth is the most those routes carry together: the maximum flow from
 * one GPU to the other over NVLinks whose inner nodes are NVSwitches. Two
 * GPUs on the same switches get the sum over the switches they share (each
 * switch min(link in, link out)); on switches joined to other switches the
 * switch-to-switch links count too.
 */
#include "topo.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  weft_path_class_t cls;
  double bw;
  int hops, prev_link, done;
} label_t;

static int better(weft_path_class_t c1, double b1, int h1, const label_t *l) {
  if (c1 != l->cls) return c1 < l->cls;
  if (b1 > l->bw + 1e-9 || b1 < l->bw - 1e-9) return b1 > l->bw;
  return h1 < l->hops;
}

static weft_path_class_t max_cls(weft_path_class_t a, weft_path_class_t b) { return a > b ? a : b; }

// Class of the hop from u to v over link l, or DIS when u may not forward.
static weft_path_class_t hop_class(const weft_topo_t *t, int u, int from, int in_link, int l, int v) {
  const weft_topo_node_t *U = &t->nodes[u], *V = &t->nodes[v];
  weft_link_kind_t k = t->links[l].kind;
  int through = u != from;
  weft_link_kind_t in = through ? t->links[in_link].kind : WEFT_LINK_LOC;
  if (through) {
    if ((U->kind == WEFT_TOPO_GPU || U->kind == WEFT_TOPO_NVS) && (in != WEFT_LINK_NVL || k != WEFT_LINK_NVL))
      return WEFT_PATH_DIS;
    if (U->kind == WEFT_TOPO_NIC && (k != WEFT_LINK_NET || in == WEFT_LINK_NET)) return WEFT_PATH_DIS;
    if (U->kind == WEFT_TOPO_NET) return WEFT_PATH_DIS;
  }
  weft_path_class_t c;
  switch (k) {
  case WEFT_LINK_NVL: c = through && U->kind == WEFT_TOPO_GPU ? WEFT_PATH_NVB : WEFT_PATH_NVL; break;
  case WEFT_LINK_SYS: c = WEFT_PATH_SYS; break;
  case WEFT_LINK_PCI:
    if (U->kind == WEFT_TOPO_CPU || V->kind == WEFT_TOPO_CPU)
      c = WEFT_PATH_PHB;
    else if (U->kind == WEFT_TOPO_PCI && V->kind == WEFT_TOPO_PCI)
      c = WEFT_PATH_PXB;
    else
      c = WEFT_PATH_PIX;
    break;
  default: c = WEFT_PATH_LOC; break;
  }
  if (through && U->kind == WEFT_TOPO_CPU) c = max_cls(c, WEFT_PATH_PHB);
  return c;
}

// GB/s GPU a can send GPU b over NVLink at once: the maximum flow over NVL
// links (each carries its bw in each direction) through NVSwitches only
// (augmenting paths found breadth first). -1 on ENOMEM.
static double nvl_fabric_bw(const weft_topo_t *t, int a, int b) {
  double *flow = calloc((size_t)t->nlinks + 1, sizeof(double)); // along link.a -> link.b
  int *via = malloc(sizeof(int) * (size_t)(t->nnodes + 1));    // link that reached a node
  int *queue = malloc(sizeof(int) * (size_t)(t->nnodes + 1));
  double total = -1;
  if (!flow || !via || !queue) goto out;
  for (total = 0;;) {
    for (int i = 0; i < t->nnodes; i++) via[i] = -2;
    via[a] = -1;
    int head = 0, tail = 0;
    queue[tail++] = a;
    while (head < tail && via[b] == -2) {
      int u = queue[head++];
      if (u != a && t->nodes[u].kind != WEFT_TOPO_NVS) continue; // only switches pass traffic on
      for (int i = 0; i < t->nodes[u].nadj; i++) {
        int l = t->nodes[u].adj[i];
        const weft_topo_link_t *k = &t->links[l];
        int v = k->a == u ? k->b : k->a;
        double room = k->bw - (k->a == u ? flow[l] : -flow[l]);
        if (k->kind != WEFT_LINK_NVL || via[v] != -2 || room <= 1e-9) continue;
        via[v] = l;
        queue[tail++] = v;
      }
    }
    if (via[b] == -2) break;
    double push = 0;
    for (int v = b; v != a;) { // the narrowest room along the way
      const weft_topo_link_t *k = &t->links[via[v]];
      int u = k->a == v ? k->b : k->a;
      double room = k->bw - (k->a == u ? flow[via[v]] : -flow[via[v]]);
      if (v == b || room < push) push = room;
      v = u;
    }
    for (int v = b; v != a;) {
      const weft_topo_link_t *k = &t->links[via[v]];
      int u = k->a == v ? k->b : k->a;
      flow[via[v]] += k->a == u ? push : -push;
      v = u;
    }
    total += push;
  }
out:
  free(flow);
  free(via);
  free(queue);
  return total;
}

int weft_topo_path(const weft_topo_t *t, int from, int to, weft_topo_path_t *path) {
  memset(path, 0, sizeof(*path));
  path->cls = WEFT_PATH_DIS;
  if (from < 0 || to < 0 || from >= t->nnodes || to >= t->nnodes) return -1;
  path->nodes[0] = from;
  if (from == to) {
    path->cls = WEFT_PATH_LOC;
    path->bw = WEFT_TOPO_LOC_BW;
    return 0;
  }
  label_t *lab = malloc((size_t)t->nnodes * sizeof(*lab));
  if (!lab) return -1;
  for (int i = 0; i < t->nnodes; i++) lab[i] = (label_t){WEFT_PATH_DIS, 0, 1 << 30, -1, 0};
  lab[from] = (label_t){WEFT_PATH_LOC, WEFT_TOPO_LOC_BW, 0, -1, 0};
  for (;;) {
    int u = -1;
    for (int i = 0; i < t->nnodes; i++)
      if (!lab[i].done && lab[i].cls != WEFT_PATH_DIS && (u < 0 || better(lab[i].cls, lab[i].bw, lab[i].hops, &lab[u])))
        u = i;
    if (u < 0 || u == to) break;
    lab[u].done = 1;
    if (lab[u].hops >= WEFT_TOPO_MAX_HOPS) continue;
    const weft_topo_node_t *U = &t->nodes[u];
    for (int i = 0; i < U->nadj; i++) {
      int l = U->adj[i];
      int v = t->links[l].a == u ? t->links[l].b : t->links[l].a;
      if (lab[v].done || l == lab[u].prev_link) continue;
      weft_path_class_t c = hop_class(t, u, from, lab[u].prev_link, l, v);
      if (c == WEFT_PATH_DIS) continue;
      c = max_cls(c, lab[u].cls);
      double bw = t->links[l].bw < lab[u].bw ? t->links[l].bw : lab[u].bw;
      if (better(c, bw, lab[u].hops + 1, &lab[v])) lab[v] = (label_t){c, bw, lab[u].hops + 1, l, 0};
    }
  }
  int ok = lab[to].cls != WEFT_PATH_DIS;
  if (ok) {
    int n = lab[to].hops;
    path->nhops = n;
    path->cls = lab[to].cls;
    path->bw = lab[to].bw;
    for (int v = to, h = n - 1; h >= 0; h--) {
      int l = lab[v].prev_link;
      int u = t->links[l].a == v ? t->links[l].b : t->links[l].a;
      path->hops[h] = (weft_topo_hop_t){l, t->links[l].a == u ? 0 : 1, t->links[l].bw};
      path->nodes[h + 1] = v;
      path->lat_us += t->links[l].lat_us;
      v = u;
    }
    if (path->cls == WEFT_PATH_NVL && t->nodes[from].kind == WEFT_TOPO_GPU && t->nodes[to].kind == WEFT_TOPO_GPU) {
      double fabric = nvl_fabric_bw(t, from, to);
      if (fabric > path->bw) { // this route is one of several used at once
        path->bw = fabric;
        for (int h = 0; h < n; h++) path->hops[h].cap = fabric;
      }
    }
  }
  free(lab);
  return ok ? 0 : -1;
}

// The fastest port of a NIC, in GB/s (0 without ports).
static double nic_port_bw(const weft_topo_t *t, int nic) {
  double best = 0;
  const weft_topo_node_t *n = &t->nodes[nic];
  for (int i = 0; i < n->nadj; i++) {
    const weft_topo_link_t *l = &t->links[n->adj[i]];
    if (l->kind == WEFT_LINK_NET && l->bw > best) best = l->bw;
  }
  return best;
}

int weft_topo_nic_ties(const weft_topo_t *t, int from, const unsigned char *allowed, int *cand, int max,
                       weft_topo_nearness_t *best_out) {
  label_t best = {WEFT_PATH_DIS, 0, 1 << 30, -1, 0};
  int ncand = 0;
  for (int n = 0; n < t->nnodes; n++) {
    if (t->nodes[n].kind != WEFT_TOPO_NIC || (allowed && !allowed[n])) continue;
    weft_topo_path_t p;
    if (weft_topo_path(t, from, n, &p)) continue;
    double port = nic_port_bw(t, n);
    double bw = port > 0 && port < p.bw ? port : p.bw;
    if (better(p.cls, bw, p.nhops, &best)) {
      best = (label_t){p.cls, bw, p.nhops, -1, 0};
      ncand = 0;
    }
    if (p.cls == best.cls && bw > best.bw - 1e-9 && bw < best.bw + 1e-9 && p.nhops == best.hops && ncand < max)
      cand[ncand++] = n;
  }
  if (best_out) *best_out = (weft_topo_nearness_t){best.cls, best.bw, best.hops};
  return ncand;
}

int weft_topo_nearest_nics_among(const weft_topo_t *t, const unsigned char *allowed, int *nic, int max) {
  int ngpus = 0;
  int *first = calloc((size_t)t->nnodes + 1, sizeof(int)); // first[g]: g's best candidate
  int *cand = calloc((size_t)t->nnodes + 1, sizeof(int));
  if (!first || !cand) {
    free(first);
    free(cand);
    return -1;
  }
  for (int g = 0; g < t->nnodes; g++) {
    if (t->nodes[g].kind != WEFT_TOPO_GPU) continue;
    int ncand = weft_topo_nic_ties(t, g, allowed, cand, t->nnodes + 1, NULL);
    int pick = -1;
    if (ncand > 0) {
      // Spread GPUs that see the same NICs over them, in GPU order.
      int k = 0;
      for (int e = 0; e < ngpus && e < max; e++) k += first[e] == cand[0];
      pick = cand[k % ncand];
    }
    if (ngpus < max) {
      first[ngpus] = ncand > 0 ? cand[0] : -1;
      nic[ngpus] = pick;
    }
    ngpus++;
  }
  free(first);
  free(cand);
  return ngpus;
}

int weft_topo_nearest_nics(const weft_topo_t *t, int *nic, int max) { return weft_topo_nearest_nics_among(t, NULL, nic, max); }
