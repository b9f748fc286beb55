/*
 * topo_hwloc_dist.c — the NVLinks in hwloc's distance matrices.
 *
 * hwloc's NVML backend describes NVLinks as a bandwidth matrix named
 * "NVLinkBandwidth" (values in MB/s, one direction). Its objects are the
 * GPUs' OS devices (nvml0, nvml1, ...) followed by the far ends of their
 * NVLinks that are not GPUs: NVSwitches as PCI devices (which hwloc marks
 * with subtype NVSwitch) and, for POWER's NVLinks to the CPU, an object on
 * the CPU side. Since the objects are of several types the matrix is
 * heterogeneous (in XML, <distances2hetero kind="25">: from the OS,
 * bandwidth, heterogeneous). The value between two objects is the sum, over
 * the NVLinks joining them, of hwloc's figure for one link of that NVLink
 * version: 20000 (NVLink 1), 25000 (NVLinks 2 to 4), 50000 (NVLink 5). The
 * diagonal stands for local memory and is not a link. NVML reports the links
 * of GPUs only, so hwloc writes no switch-to-switch values; a file may still
 * carry them (added with hwloc's distances API, or written by hand).
 *
 * Read here, value v between objects i and j:
 *   GPU - GPU            v / (one link of the GPU's generation) direct NVLinks
 *   GPU - NVSwitch       that many NVLinks to the switch
 *   GPU - CPU object     that many NVLinks to the CPU (a bridge node stands
 *                        for the CPU's NVLink port, as NCCL's XML has it)
 *   NVSwitch - NVSwitch  that many links between the switches, at the
 *                        per-link figure of the matrix's GPUs
 * Each link keeps v / count as its MB/s (weft_topo_nvlink_link_bw). The
 * matrix is symmetric; both directions are recorded as NCCL's XML lists a
 * GPU pair at both GPUs, and finalisation makes one link of each pair.
 *
 * Other matrices are not read, and each is named in an INFO line:
 * NUMALatency (socket links come from the CPU family, as in NCCL),
 * XGMIBandwidth and XGMIHops (ROCm SMI's AMD GPUs, which are not in weft's
 * graph: it holds NVIDIA GPUs, the ones an NCCL library drives),
 * XeLinkBandwidth (Intel GPUs, likewise) and any other name.
 */
#include "debug.h"
#include "topo_hwloc.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int node_class(const weft_topo_t *t, int node) {
  const char *cls = weft_topo_attr_get(&t->nodes[node].attrs, "class");
  return cls ? (int)strtol(cls, NULL, 0) : -1;
}

static int is_switch(const weft_topo_t *t, int node, int cls) {
  const char *vendor = weft_topo_attr_get(&t->nodes[node].attrs, "vendor");
  return (cls >> 8) == 0x0680 && vendor && strtol(vendor, NULL, 0) == 0x10de;
}

// The graph node a matrix object stands for: a GPU or NVSwitch (its PCI
// device), or the bridge for a CPU's NVLink port (made on first use); -1
// for none, -2 on ENOMEM.
static int link_end(weft_hwloc_ctx_t *c, hwloc_obj_t o, int *tclass) {
  if (o->type == HWLOC_OBJ_OS_DEVICE) o = o->parent;
  if (o && o->type == HWLOC_OBJ_PCI_DEVICE) {
    int n = weft_hwloc_node_of(o);
    *tclass = n >= 0 ? node_class(c->t, n) : -1;
    return n;
  }
  if (!o || o->type == HWLOC_OBJ_BRIDGE) return -1;
  int cpu = weft_hwloc_cpu_of(c, o);
  if (cpu < 0) return -1;
  *tclass = 0x068000;
  for (int i = 0; i < c->t->nnodes; i++) // already made?
    if (c->t->nodes[i].parent == cpu && c->t->nodes[i].kind == WEFT_TOPO_PCI &&
        weft_topo_attr_get(&c->t->nodes[i].attrs, "nvlink_port"))
      return i;
  int n = weft_topo_add_node(c->t, WEFT_TOPO_PCI, cpu);
  if (n < 0) return -2;
  weft_topo_attrs_t *a = &c->t->nodes[n].attrs;
  if (weft_topo_attr_setf(a, "busid", "fffe:%02x:00.0", cpu & 0xff) || weft_topo_attr_set(a, "class", "0x068000") ||
      weft_topo_attr_set(a, "vendor", "0x1014") || weft_topo_attr_set(a, "nvlink_port", "1"))
    return -2;
  return n;
}

static int gpu_link_mbps(const weft_topo_t *t, int gpu) {
  const char *dev = weft_topo_attr_get(&t->nodes[gpu].attrs, "device");
  return weft_topo_nvlink_raw_mbps(weft_topo_gpu_sm_from_device(dev ? (int)strtol(dev, NULL, 0) : 0));
}

static int read_nvlinks(weft_hwloc_ctx_t *c, const struct hwloc_distances_s *d, const char *name) {
  weft_topo_t *t = c->t;
  unsigned n = d->nbobjs;
  int *node = calloc(n + 1, sizeof(int)), *cls = calloc(n + 1, sizeof(int));
  int rc = node && cls ? 0 : -1, ngpus = 0, nswitches = 0, nlinks = 0, nswitch_links = 0;
  int switch_rate = 0; // one link between switches: the figure of the matrix's GPUs
  for (unsigned i = 0; i < n && !rc; i++) {
    node[i] = link_end(c, d->objs[i], &cls[i]);
    if (node[i] == -2) rc = -1;
    if (node[i] < 0) continue;
    if ((cls[i] >> 16) == 0x03) {
      ngpus++;
      int rate = gpu_link_mbps(t, node[i]);
      if (rate > switch_rate) switch_rate = rate;
    } else if (is_switch(t, node[i], cls[i]))
      nswitches++;
  }
  if (switch_rate == 0) switch_rate = weft_topo_nvlink_raw_mbps(0);
  for (unsigned i = 0; i < n && !rc; i++)
    for (unsigned j = 0; j < n && !rc; j++) {
      uint64_t mbps = d->values[i * n + j];
      if (i == j || !mbps || node[i] < 0 || node[j] < 0 || node[i] == node[j]) continue;
      int from_gpu = (cls[i] >> 16) == 0x03;
      int between_switches = is_switch(t, node[i], cls[i]) && is_switch(t, node[j], cls[j]);
      if (!from_gpu && !between_switches) continue; // a GPU's links are listed at the GPU
      int rate = from_gpu ? gpu_link_mbps(t, node[i]) : switch_rate;
      uint64_t count = (mbps + (uint64_t)rate / 2) / (uint64_t)rate;
      if (count == 0) count = 1;
      if (count > 1000) count = 1000; // no machine has that many: a file's nonsense, kept within int
      uint64_t per_link = mbps / count;
      if (per_link > INT_MAX) per_link = INT_MAX;
      const char *target = weft_topo_attr_get(&t->nodes[node[j]].attrs, "busid");
      if (!target) continue;
      if (weft_topo_add_nvlink(t, node[i], target, (int)count, cls[j], (int)per_link)) rc = -1;
      int listed_twice = between_switches || (cls[j] >> 16) == 0x03; // at both ends: count once
      if (listed_twice && i > j) continue;
      nlinks += (int)count;
      nswitch_links += between_switches ? (int)count : 0;
    }
  if (!rc)
    INFO(WEFT_LOG_GRAPH, "%s: hwloc %s: %u objects, %d GPUs, %d NVSwitches; %d NVLinks, %d of them between switches",
         t->source, name, n, ngpus, nswitches, nlinks, nswitch_links);
  free(node);
  free(cls);
  return rc;
}

static const char *why_not_read(const char *name) {
  if (strcmp(name, "NUMALatency") == 0) return "socket links come from the CPU family, as in NCCL";
  if (strncmp(name, "XGMI", 4) == 0) return "AMD GPUs (ROCm SMI) are not in weft's graph of NVIDIA GPUs";
  if (strncmp(name, "XeLink", 6) == 0) return "Intel GPUs are not in weft's graph of NVIDIA GPUs";
  return "not a matrix weft reads";
}

int weft_hwloc_add_distances(weft_hwloc_ctx_t *c) {
  unsigned nr = 0;
  if (hwloc_distances_get(c->h, &nr, NULL, 0, 0) < 0 || nr == 0) return 0;
  struct hwloc_distances_s **all = calloc(nr, sizeof(*all));
  if (!all) return -1;
  int rc = 0;
  if (hwloc_distances_get(c->h, &nr, all, 0, 0) < 0) nr = 0;
  for (unsigned k = 0; k < nr; k++) {
    const char *name = hwloc_distances_get_name(c->h, all[k]);
    if (name && strcmp(name, "NVLinkBandwidth") == 0) {
      if (!rc && read_nvlinks(c, all[k], name)) rc = -1;
    } else
      INFO(WEFT_LOG_GRAPH, "%s: hwloc distance matrix %s (%u objects) ignored: %s", c->t->source,
           name ? name : "(unnamed)", all[k]->nbobjs, name ? why_not_read(name) : "not a matrix weft reads");
    hwloc_distances_release(c->h, all[k]);
  }
  free(all);
  return rc;
}
