/*
 * topo_export.c — the machine-readable views: Graphviz (weft-topo --dot),
 * the JSON summary (weft-topo --json) and the graph signature that tests use
 * to compare two graphs regardless of node order.
 */
#include "topo.h"

#include <stdlib.h>
#include <string.h>

// ---- Graphviz ----------------------------------------------------------------

static const char *dot_shape(weft_topo_kind_t k) {
  switch (k) {
  case WEFT_TOPO_CPU: return "box3d";
  case WEFT_TOPO_GPU: return "box";
  case WEFT_TOPO_NVS: return "hexagon";
  case WEFT_TOPO_NIC: return "cds";
  case WEFT_TOPO_NET: return "ellipse";
  default: return "diamond";
  }
}

static const char *dot_color(weft_link_kind_t k) {
  switch (k) {
  case WEFT_LINK_NVL: return "forestgreen";
  case WEFT_LINK_SYS: return "firebrick";
  case WEFT_LINK_NET: return "royalblue";
  default: return "gray30";
  }
}

void weft_topo_print_dot(const weft_topo_t *t, FILE *out) {
  char label[64];
  fprintf(out, "graph topology {\n  rankdir=TB; node [fontname=\"Helvetica\", fontsize=10];\n"
               "  edge [fontname=\"Helvetica\", fontsize=8];\n");
  for (int c = 0; c < t->nnodes; c++) {
    if (t->nodes[c].kind != WEFT_TOPO_CPU) continue;
    fprintf(out, "  subgraph cluster_%d {\n    label=\"NUMA %d\"; style=rounded; color=gray70;\n", c, t->nodes[c].numa);
    for (int i = 0; i < t->nnodes; i++)
      if (t->nodes[i].cpu == c)
        fprintf(out, "    n%d [shape=%s, label=\"%s\\n%s\"];\n", i, dot_shape(t->nodes[i].kind),
                weft_topo_kind_name(t->nodes[i].kind), weft_topo_label(t, i, label, sizeof(label)));
    fprintf(out, "  }\n");
  }
  for (int i = 0; i < t->nnodes; i++)
    if (t->nodes[i].cpu < 0)
      fprintf(out, "  n%d [shape=%s, label=\"%s\\n%s\"];\n", i, dot_shape(t->nodes[i].kind),
              weft_topo_kind_name(t->nodes[i].kind), weft_topo_label(t, i, label, sizeof(label)));
  for (int l = 0; l < t->nlinks; l++) {
    const weft_topo_link_t *k = &t->links[l];
    fprintf(out, "  n%d -- n%d [color=%s, label=\"%s %.0f\"%s];\n", k->a, k->b, dot_color(k->kind),
            weft_link_kind_name(k->kind), k->bw, k->kind == WEFT_LINK_SYS ? ", constraint=false" : "");
  }
  fprintf(out, "}\n");
}

// ---- JSON ----------------------------------------------------------------------

static void json_str(FILE *out, const char *s) {
  fputc('"', out);
  for (; s && *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      fprintf(out, "\\%c", ch);
    else if (ch < 0x20)
      fprintf(out, "\\u%04x", ch);
    else
      fputc(ch, out);
  }
  fputc('"', out);
}

static void json_members(const weft_topo_t *t, const weft_topo_ring_t *r, FILE *out) {
  char label[64];
  fputc('[', out);
  for (int i = 0; i < r->n; i++) {
    if (i) fputs(", ", out);
    if (r->is_ranks)
      fprintf(out, "%d", r->members[i]);
    else
      json_str(out, weft_topo_label(t, r->members[i], label, sizeof(label)));
  }
  fputc(']', out);
}

void weft_topo_print_json(const weft_topo_t *t, const weft_topo_plan_t *plan, const weft_topo_cpubind_t *bind,
                          FILE *out) {
  char label[64];
  int ngpus = weft_topo_count(t, WEFT_TOPO_GPU);
  int *nic = calloc((size_t)ngpus + 1, sizeof(int));
  if (nic && ngpus) weft_topo_nearest_nics(t, nic, ngpus);
  fprintf(out, "{\n  \"source\": ");
  json_str(out, t->source);
  fprintf(out, ",\n  \"numa_nodes\": %d,\n  \"nvswitches\": %d,\n  \"gpus\": [", weft_topo_count(t, WEFT_TOPO_CPU),
          weft_topo_count(t, WEFT_TOPO_NVS));
  for (int i = 0, g = 0; i < t->nnodes && nic; i++) {
    const weft_topo_node_t *n = &t->nodes[i];
    if (n->kind != WEFT_TOPO_GPU) continue;
    fprintf(out, "%s\n    {\"busid\": ", g ? "," : "");
    json_str(out, n->busid);
    fprintf(out, ", \"numa\": %d, \"sm\": %d, \"nearest_nic\": ", n->numa, n->sm);
    weft_topo_path_t p;
    if (nic[g] >= 0 && weft_topo_path(t, i, nic[g], &p) == 0) {
      json_str(out, weft_topo_label(t, nic[g], label, sizeof(label)));
      fprintf(out, ", \"path_to_nic\": \"%s\", \"path_bw_GBps\": %.1f}", weft_path_class_name(p.cls), p.bw);
    } else
      fprintf(out, "null, \"path_to_nic\": null}");
    g++;
  }
  fprintf(out, "\n  ],\n  \"nics\": [");
  int first = 1;
  for (int i = 0; i < t->nnodes; i++) {
    const weft_topo_node_t *n = &t->nodes[i];
    if (n->kind != WEFT_TOPO_NIC) continue;
    int mbps = 0;
    const char *name = NULL;
    for (int c = i + 1; c < t->nnodes; c++)
      if (t->nodes[c].parent == i && t->nodes[c].kind == WEFT_TOPO_NET) {
        if (!name) name = weft_topo_attr_get(&t->nodes[c].attrs, "name");
        if (t->nodes[c].net_mbps > mbps) mbps = t->nodes[c].net_mbps;
      }
    fprintf(out, "%s\n    {\"name\": ", first ? "" : ",");
    json_str(out, name ? name : weft_topo_label(t, i, label, sizeof(label)));
    if (n->busid[0]) {
      fprintf(out, ", \"busid\": ");
      json_str(out, n->busid);
    }
    fprintf(out, ", \"numa\": %d, \"speed_gbps\": %g}", n->numa, mbps / 1000.0);
    first = 0;
  }
  fprintf(out, "\n  ],\n  \"rings\": [");
  if (plan) json_members(t, &plan->ring, out);
  fprintf(out, "],\n  \"ring_bottleneck_GBps\": %.1f,\n  \"trees\": [", plan ? plan->ring.bottleneck : 0.0);
  if (plan) json_members(t, &plan->tree, out);
  fprintf(out, "],\n  \"tree_bottleneck_GBps\": %.1f", plan ? plan->tree.bottleneck : 0.0);
  if (t->nvml_status[0] || t->ibv_status[0]) {
    fprintf(out, ",\n  \"nvml\": ");
    json_str(out, t->nvml_status);
    fprintf(out, ",\n  \"ibverbs\": ");
    json_str(out, t->ibv_status);
  }
  if (bind) {
    fprintf(out, ",\n  \"cpu_binding\": {\"cpus\": ");
    json_str(out, bind->list);
    fprintf(out, ", \"count\": %d, \"available\": %d}", bind->ncpus, bind->navail);
  }
  fprintf(out, "\n}\n");
  free(nic);
}

// ---- signature -------------------------------------------------------------------

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

char *weft_topo_signature(const weft_topo_t *t) {
  int nlines = t->nnodes + t->nlinks;
  char **lines = calloc((size_t)nlines + 1, sizeof(char *));
  if (!lines) return NULL;
  size_t total = 1;
  int k = 0;
  char a[64], b[64];
  for (int i = 0; i < t->nnodes; i++) {
    const weft_topo_node_t *n = &t->nodes[i];
    char parent[64] = "-";
    if (n->parent >= 0) weft_topo_label(t, n->parent, parent, sizeof(parent));
    if (asprintf(&lines[k], "node %s %s numa=%d under=%s sm=%d mbps=%d pci=%d", weft_topo_kind_name(n->kind),
                 weft_topo_label(t, i, a, sizeof(a)), n->numa, parent, n->sm, n->net_mbps, n->on_pci) < 0)
      lines[k] = NULL;
    if (lines[k]) total += strlen(lines[k++]) + 1;
  }
  for (int l = 0; l < t->nlinks; l++) {
    const weft_topo_link_t *x = &t->links[l];
    weft_topo_label(t, x->a, a, sizeof(a));
    weft_topo_label(t, x->b, b, sizeof(b));
    int swap = strcmp(a, b) > 0;
    if (asprintf(&lines[k], "link %s %s %s bw=%.3f count=%d", weft_link_kind_name(x->kind), swap ? b : a, swap ? a : b,
                 x->bw, x->count) < 0)
      lines[k] = NULL;
    if (lines[k]) total += strlen(lines[k++]) + 1;
  }
  qsort(lines, (size_t)k, sizeof(char *), cmp_str);
  char *sig = malloc(total);
  if (sig) {
    char *p = sig;
    for (int i = 0; i < k; i++) p += sprintf(p, "%s\n", lines[i]);
    *p = '\0';
  }
  for (int i = 0; i < k; i++) free(lines[i]);
  free(lines);
  return sig;
}
