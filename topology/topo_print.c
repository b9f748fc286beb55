/*
 * topo_print.c — the human-readable views of weft-topo: the system as an
 * indented tree with the bandwidth of each node's link upwards, the
 * inter-socket and NVLink links, each GPU's nearest NIC, and the ring and
 * tree with their bottlenecks, what NVML and libibverbs added, and the
 * process's CPU binding.
 */
#include "topo.h"

#include <stdlib.h>
#include <string.h>

static const weft_topo_link_t *uplink(const weft_topo_t *t, int i) {
  const weft_topo_node_t *n = &t->nodes[i];
  for (int k = 0; k < n->nadj; k++) {
    const weft_topo_link_t *l = &t->links[n->adj[k]];
    if (l->kind != WEFT_LINK_NVL && l->kind != WEFT_LINK_SYS && (l->a == n->parent || l->b == n->parent))
      return l;
  }
  return NULL;
}

// NVLinks, listed at their GPU (links between NVSwitches at the first switch).
static void print_nvlinks(const weft_topo_t *t, int i, int depth, FILE *out) {
  char label[64];
  const weft_topo_node_t *n = &t->nodes[i];
  for (int k = 0; k < n->nadj; k++) {
    const weft_topo_link_t *l = &t->links[n->adj[k]];
    if (l->kind != WEFT_LINK_NVL || l->a != i) continue;
    fprintf(out, "%*s  nvlink -> %s %s x%d  [NVL %.1f GB/s]\n", depth * 2, "", weft_topo_kind_name(t->nodes[l->b].kind),
            weft_topo_label(t, l->b, label, sizeof(label)), l->count, l->bw);
  }
}

static void print_node(const weft_topo_t *t, int i, int depth, FILE *out) {
  const weft_topo_node_t *n = &t->nodes[i];
  char label[64], desc[160] = "";
  const weft_topo_attrs_t *a = &n->attrs;
  switch (n->kind) {
  case WEFT_TOPO_CPU: {
    int cores[1];
    const char *v = weft_topo_attr_get(a, "vendor"), *arch = weft_topo_attr_get(a, "arch");
    snprintf(desc, sizeof(desc), "%s %s, %d cores", arch ? arch : "?", v ? v : "?", weft_topo_cpu_cores(t, i, cores, 0));
    break;
  }
  case WEFT_TOPO_GPU:
    snprintf(desc, sizeof(desc), "dev %s sm %d", weft_topo_attr_get(&n->dev, "dev"), n->sm);
    break;
  case WEFT_TOPO_NET:
    snprintf(desc, sizeof(desc), "%g Gb/s", n->net_mbps / 1000.0);
    break;
  case WEFT_TOPO_PCI: {
    const char *cls = weft_topo_attr_get(a, "class");
    snprintf(desc, sizeof(desc), "class %s", cls ? cls : "?");
    break;
  }
  default: break;
  }
  fprintf(out, "%*s%s %s  %s", depth * 2, "", weft_topo_kind_name(n->kind), weft_topo_label(t, i, label, sizeof(label)),
          desc);
  const weft_topo_link_t *up = n->parent >= 0 ? uplink(t, i) : NULL;
  if (up) fprintf(out, "  [%s %.1f GB/s]", weft_link_kind_name(up->kind), up->bw);
  fputc('\n', out);
  print_nvlinks(t, i, depth, out);
  for (int c = i + 1; c < t->nnodes; c++)
    if (t->nodes[c].parent == i) print_node(t, c, depth + 1, out);
}

void weft_topo_print_tree(const weft_topo_t *t, FILE *out) {
  fprintf(out, "%s: %d NUMA nodes, %d GPUs, %d NVSwitches, %d NICs, %d ports\n", t->source,
          weft_topo_count(t, WEFT_TOPO_CPU), weft_topo_count(t, WEFT_TOPO_GPU), weft_topo_count(t, WEFT_TOPO_NVS),
          weft_topo_count(t, WEFT_TOPO_NIC), weft_topo_count(t, WEFT_TOPO_NET));
  if (t->nvml_status[0]) fprintf(out, "%s\n", t->nvml_status);
  if (t->ibv_status[0]) fprintf(out, "%s\n", t->ibv_status);
  for (int i = 0; i < t->nnodes; i++)
    if (t->nodes[i].parent < 0 && t->nodes[i].kind == WEFT_TOPO_CPU) print_node(t, i, 0, out);
  for (int i = 0; i < t->nnodes; i++)
    if (t->nodes[i].kind == WEFT_TOPO_NVS && !t->nodes[i].on_pci) {
      char label[64];
      fprintf(out, "NVS %s  (not a PCI device)\n", weft_topo_label(t, i, label, sizeof(label)));
      print_nvlinks(t, i, 0, out);
    }
  for (int l = 0; l < t->nlinks; l++)
    if (t->links[l].kind == WEFT_LINK_SYS) {
      char a[64], b[64];
      fprintf(out, "SYS %s <-> %s  [%.1f GB/s]\n", weft_topo_label(t, t->links[l].a, a, sizeof(a)),
              weft_topo_label(t, t->links[l].b, b, sizeof(b)), t->links[l].bw);
    }
}

static void print_members(const weft_topo_t *t, const weft_topo_ring_t *r, FILE *out) {
  char label[64];
  for (int i = 0; i < r->n; i++) {
    if (r->is_ranks)
      fprintf(out, "%s%d", i ? " " : "", r->members[i]);
    else
      fprintf(out, "%s%s", i ? " " : "", weft_topo_label(t, r->members[i], label, sizeof(label)));
  }
}

// The rank that drives GPU node g: its position among the GPUs in bus id order.
static int gpu_rank(const weft_topo_t *t, int g) {
  int r = 0;
  for (int i = 0; i < t->nnodes; i++)
    r += t->nodes[i].kind == WEFT_TOPO_GPU && strcmp(t->nodes[i].busid, t->nodes[g].busid) < 0;
  return r;
}

void weft_topo_print_plan(const weft_topo_t *t, const weft_topo_plan_t *plan, FILE *out) {
  int ngpus = weft_topo_count(t, WEFT_TOPO_GPU);
  if (ngpus > 0) {
    int *nic = malloc(sizeof(int) * (size_t)ngpus);
    if (nic && weft_topo_nearest_nics(t, nic, ngpus) == ngpus) {
      fprintf(out, "nearest NIC:\n");
      for (int i = 0, g = 0; i < t->nnodes; i++) {
        if (t->nodes[i].kind != WEFT_TOPO_GPU) continue;
        char a[64], b[64];
        weft_topo_path_t p;
        if (nic[g] >= 0 && weft_topo_path(t, i, nic[g], &p) == 0)
          fprintf(out, "  GPU %s -> NIC %s  %s %.1f GB/s\n", weft_topo_label(t, i, a, sizeof(a)),
                  weft_topo_label(t, nic[g], b, sizeof(b)), weft_path_class_name(p.cls), p.bw);
        else
          fprintf(out, "  GPU %s -> no NIC\n", weft_topo_label(t, i, a, sizeof(a)));
        g++;
      }
    }
    free(nic);
  } else
    fprintf(out, "no GPUs: %d ranks, one per core in core order\n", plan->nranks);
  fprintf(out, "ring (%s): ", plan->ring.is_ranks ? "ranks" : "GPUs");
  print_members(t, &plan->ring, out);
  if (!plan->ring.is_ranks) {  // as a communicator logs it: rank r on the r-th GPU by bus id
    fprintf(out, "\n  as ranks (rank r on the r-th GPU by bus id): Channel 00/01 :");
    int start = 0;  // from rank 0, as NCCL prints it
    for (int i = 0; i < plan->ring.n; i++)
      if (gpu_rank(t, plan->ring.members[i]) == 0) start = i;
    for (int i = 0; i < plan->ring.n; i++)
      fprintf(out, " %d", gpu_rank(t, plan->ring.members[(start + i) % plan->ring.n]));
  }
  fprintf(out, "\n  bottleneck %.1f GB/s per direction\n", plan->ring.bottleneck);
  fprintf(out, "tree (chain from the member nearest a NIC): ");
  print_members(t, &plan->tree, out);
  fprintf(out, "\n  bottleneck %.1f GB/s per direction\n", plan->tree.bottleneck);
}

void weft_topo_print_cpubind(const weft_topo_cpubind_t *b, FILE *out) {
  fprintf(out, "process CPU binding: %s (%d of %d CPUs%s)\n", b->list, b->ncpus, b->navail,
          b->ncpus > 0 && b->ncpus >= b->navail ? ", not bound" : "");
}
