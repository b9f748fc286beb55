/*
 * topo_finalize.c — turns a described tree into the graph paths run on.
 *
 * Loaders only record what a description says: nodes in a tree with their
 * attributes, and NVLinks by target bus id. Here every loader's output gets
 * the same treatment: PCI devices are recognised by class (GPU 0x03xx from
 * NVIDIA, NIC 0x02xx, NVSwitch 0x0680), omitted attributes get their
 * documented defaults (written back, so a dump says what was assumed), tree
 * edges become PCI or network links, every pair of CPUs is joined by an
 * inter-socket link, and NVLinks are resolved (a target that is not in the
 * tree and has the NVSwitch class becomes an NVSwitch node). An NVLink is
 * worth the GPU generation's figure, or the MB/s per link the description
 * gives where that is more; links between NVSwitches (from hwloc's
 * NVLinkBandwidth, or <nvswitchlink>) join switches. Groups of NVSwitches
 * the description leaves apart are then joined (topo_nvswitch.c).
 */
#include "topo.h"

#include <stdlib.h>
#include <string.h>

static int attr_int(const weft_topo_attrs_t *a, const char *key, int def) {
  const char *v = weft_topo_attr_get(a, key);
  if (!v || !*v) return def;
  char *end;
  long x = strtol(v, &end, 0);
  return end == v ? def : (int)x;
}

static int is_nvidia(const weft_topo_node_t *n) {
  const char *v = weft_topo_attr_get(&n->attrs, "vendor");
  return !v || strtol(v, NULL, 0) == 0x10de;
}

static int has_child_kind(const weft_topo_t *t, int node, weft_topo_kind_t kind) {
  for (int i = node + 1; i < t->nnodes; i++)
    if (t->nodes[i].parent == node && t->nodes[i].kind == kind) return 1;
  return 0;
}

// Recognise PCI devices by class; fill what a PCI-only description omits.
static int classify(weft_topo_t *t, int i, int *ngpus) {
  weft_topo_node_t *n = &t->nodes[i];
  n->pci_class = attr_int(&n->attrs, "class", -1);
  if (n->kind == WEFT_TOPO_PCI && n->pci_class >= 0) {
    if ((n->pci_class >> 16) == 0x03 && is_nvidia(n))
      n->kind = WEFT_TOPO_GPU;
    else if ((n->pci_class >> 16) == 0x02)
      n->kind = WEFT_TOPO_NIC;
    else if ((n->pci_class >> 8) == 0x0680 && is_nvidia(n))
      n->kind = WEFT_TOPO_NVS;
    if (n->kind != WEFT_TOPO_PCI) n->on_pci = 1;
  }
  if (n->kind == WEFT_TOPO_PCI || n->on_pci) {
    const char *speed = weft_topo_attr_get(&n->attrs, "link_speed");
    if (!speed || !*speed) {
      if (weft_topo_attr_set(&n->attrs, "link_speed", "8.0 GT/s PCIe")) return -1;
    }
    if (attr_int(&n->attrs, "link_width", 0) <= 0 && weft_topo_attr_set(&n->attrs, "link_width", "16")) return -1;
  }
  if (n->kind == WEFT_TOPO_GPU) {
    int dev = attr_int(&n->dev, "dev", *ngpus);
    n->sm = attr_int(&n->dev, "sm", weft_topo_gpu_sm_from_device(attr_int(&n->attrs, "device", 0)));
    if (!weft_topo_attr_get(&n->dev, "dev") && weft_topo_attr_setf(&n->dev, "dev", "%d", dev)) return -1;
    if (n->sm && !weft_topo_attr_get(&n->dev, "sm") && weft_topo_attr_setf(&n->dev, "sm", "%d", n->sm)) return -1;
    if (!weft_topo_attr_get(&n->dev, "rank") && weft_topo_attr_setf(&n->dev, "rank", "%d", dev)) return -1;
    if (!weft_topo_attr_get(&n->dev, "gdr") && weft_topo_attr_set(&n->dev, "gdr", "1")) return -1;
    (*ngpus)++;
  }
  return 0;
}

// A NIC described without ports gets one, at the default speed.
static int add_default_port(weft_topo_t *t, int nic, int *nnets) {
  if (has_child_kind(t, nic, WEFT_TOPO_NET)) return 0;
  int p = weft_topo_add_node(t, WEFT_TOPO_NET, nic);
  if (p < 0) return -1;
  weft_topo_node_t *n = &t->nodes[p], *parent = &t->nodes[nic];
  const char *busid = weft_topo_attr_get(&parent->attrs, "busid");
  const char *speed = weft_topo_attr_get(&parent->attrs, "link_speed");
  char name[40];
  weft_topo_busid_norm(busid ? busid : "net", name, sizeof(name));
  if (weft_topo_attr_set(&n->attrs, "name", name) || weft_topo_attr_setf(&n->attrs, "dev", "%d", *nnets) ||
      weft_topo_attr_setf(&n->attrs, "speed", "%d", weft_topo_default_net_mbps(speed)) ||
      weft_topo_attr_set(&n->attrs, "port", "1") || weft_topo_attr_set(&n->attrs, "gdr", "0"))
    return -1;
  return 0;
}

static int find_link(const weft_topo_t *t, int a, int b, weft_link_kind_t kind) {
  for (int l = 0; l < t->nlinks; l++) {
    const weft_topo_link_t *k = &t->links[l];
    if (k->kind == kind && ((k->a == a && k->b == b) || (k->a == b && k->b == a))) return l;
  }
  return -1;
}

static int resolve_nvlinks(weft_topo_t *t, char *err, size_t errlen) {
  for (int i = 0; i < t->nnvlinks; i++) {
    weft_topo_nvlink_t *nv = &t->nvlinks[i];
    weft_topo_node_t *from = &t->nodes[nv->from];
    int switch_link = from->kind == WEFT_TOPO_NVS; // NVSwitch to NVSwitch
    if ((from->kind != WEFT_TOPO_GPU && !switch_link) || nv->count <= 0) continue;
    int to = weft_topo_find_busid(t, nv->target);
    if (to == nv->from) continue; // virtual machines list a GPU's links to itself
    if (to < 0) {
      if (nv->tclass >= 0 && (nv->tclass >> 8) != 0x0680) continue; // a GPU outside this description
      to = weft_topo_add_node(t, WEFT_TOPO_NVS, -1);
      if (to < 0) goto nomem;
      from = &t->nodes[nv->from];
      snprintf(t->nodes[to].busid, sizeof(t->nodes[to].busid), "%s", nv->target);
      if (weft_topo_attr_set(&t->nodes[to].attrs, "busid", nv->target)) goto nomem;
    }
    if (switch_link && t->nodes[to].kind != WEFT_TOPO_NVS) continue; // switches join switches only
    // An NVLink to a non-NVIDIA bridge (POWER's NPU) is an NVLink to that CPU.
    if (t->nodes[to].kind == WEFT_TOPO_PCI) to = t->nodes[to].cpu;
    if (to < 0) continue;
    double bw = nv->count * weft_topo_nvlink_link_bw(from->sm, nv->mbps);
    int l = find_link(t, nv->from, to, WEFT_LINK_NVL);
    if (l >= 0) {
      if (t->links[l].count < nv->count || (t->links[l].count == nv->count && t->links[l].bw < bw)) {
        t->links[l].count = nv->count;
        t->links[l].bw = bw;
      }
    } else if (weft_topo_add_link(t, nv->from, to, WEFT_LINK_NVL, bw, nv->count) < 0)
      goto nomem;
  }
  return 0;
nomem:
  snprintf(err, errlen, "out of memory");
  return -1;
}

static int build_adjacency(weft_topo_t *t) {
  for (int i = 0; i < t->nnodes; i++) {
    free(t->nodes[i].adj);
    t->nodes[i].adj = NULL;
    t->nodes[i].nadj = 0;
  }
  int *deg = calloc((size_t)t->nnodes + 1, sizeof(int));
  if (!deg) return -1;
  for (int l = 0; l < t->nlinks; l++) deg[t->links[l].a]++, deg[t->links[l].b]++;
  for (int i = 0; i < t->nnodes; i++) {
    if (deg[i] && !(t->nodes[i].adj = malloc((size_t)deg[i] * sizeof(int)))) {
      free(deg);
      return -1;
    }
  }
  free(deg);
  for (int l = 0; l < t->nlinks; l++) {
    weft_topo_node_t *a = &t->nodes[t->links[l].a], *b = &t->nodes[t->links[l].b];
    a->adj[a->nadj++] = l;
    b->adj[b->nadj++] = l;
  }
  return 0;
}

static int tree_links(weft_topo_t *t) {
  for (int i = 0; i < t->nnodes; i++) {
    weft_topo_node_t *n = &t->nodes[i];
    if (n->parent < 0) continue;
    if (n->kind == WEFT_TOPO_NET) {
      n->net_mbps = attr_int(&n->attrs, "speed", 0);
      if (n->net_mbps <= 0) {
        const char *ls = weft_topo_attr_get(&t->nodes[n->parent].attrs, "link_speed");
        n->net_mbps = weft_topo_default_net_mbps(ls);
        if (weft_topo_attr_setf(&n->attrs, "speed", "%d", n->net_mbps)) return -1;
      }
      if (weft_topo_add_link(t, n->parent, i, WEFT_LINK_NET, n->net_mbps / 8000.0, 1) < 0) return -1;
      continue;
    }
    double bw = WEFT_TOPO_LOC_BW; // a NIC that is not a PCI device (virtual)
    if (n->kind == WEFT_TOPO_PCI || n->on_pci)
      bw = weft_topo_pci_bw(weft_topo_attr_get(&n->attrs, "link_speed"), attr_int(&n->attrs, "link_width", 16));
    if (weft_topo_add_link(t, n->parent, i, WEFT_LINK_PCI, bw, 1) < 0) return -1;
  }
  return 0;
}

static int cpu_links(weft_topo_t *t) {
  for (int i = 0; i < t->nnodes; i++) {
    if (t->nodes[i].kind != WEFT_TOPO_CPU) continue;
    for (int j = i + 1; j < t->nnodes; j++) {
      if (t->nodes[j].kind != WEFT_TOPO_CPU) continue;
      double a = weft_topo_cpu_bw(&t->nodes[i].attrs), b = weft_topo_cpu_bw(&t->nodes[j].attrs);
      if (weft_topo_add_link(t, i, j, WEFT_LINK_SYS, a < b ? a : b, 1) < 0) return -1;
    }
  }
  return 0;
}

int weft_topo_finalize(weft_topo_t *t, char *err, size_t errlen) {
  if (t->finalized) return 0;
  int ncpus = 0, ngpus = 0, nnets = 0;
  for (int i = 0; i < t->nnodes; i++) {
    weft_topo_node_t *n = &t->nodes[i];
    if (n->kind == WEFT_TOPO_CPU) {
      n->cpu = i;
      n->numa = attr_int(&n->attrs, "numaid", ncpus);
      if (!weft_topo_attr_get(&n->attrs, "numaid") && weft_topo_attr_setf(&n->attrs, "numaid", "%d", n->numa))
        goto nomem;
      ncpus++;
    } else if (n->parent >= 0) {
      n->cpu = t->nodes[n->parent].cpu;
      n->numa = t->nodes[n->parent].numa;
    }
    const char *busid = weft_topo_attr_get(&n->attrs, "busid");
    if (busid && n->kind != WEFT_TOPO_CPU && n->kind != WEFT_TOPO_NET)
      weft_topo_busid_norm(busid, n->busid, sizeof(n->busid));
    if (classify(t, i, &ngpus)) goto nomem;
  }
  if (ncpus == 0) {
    snprintf(err, errlen, "%s: the description has no CPU (<cpu> element or NUMA node)", t->source);
    return -1;
  }
  int nnodes = t->nnodes; // ports added below need no second look
  for (int i = 0; i < nnodes; i++)
    if (t->nodes[i].kind == WEFT_TOPO_NET) nnets++;
  for (int i = 0; i < nnodes; i++)
    if (t->nodes[i].kind == WEFT_TOPO_NIC) {
      int before = t->nnodes;
      if (add_default_port(t, i, &nnets)) goto nomem;
      if (t->nnodes > before) {
        t->nodes[before].cpu = t->nodes[i].cpu;
        t->nodes[before].numa = t->nodes[i].numa;
        nnets++;
      }
    }
  if (tree_links(t) || cpu_links(t)) goto nomem;
  if (resolve_nvlinks(t, err, errlen)) return -1;
  if (weft_topo_join_nvswitch_groups(t) < 0 || build_adjacency(t)) goto nomem;
  t->finalized = 1;
  return 0;
nomem:
  snprintf(err, errlen, "out of memory");
  return -1;
}
