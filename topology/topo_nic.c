/*
 * topo_nic.c — which network device a rank uses, as NCCL gives each GPU
 * the NIC nearest it: a pure function of the topology, the rank's place
 * among the ranks of its host (and its GPU's bus id) and the devices the
 * network backend offers, so that it can be tested on topology files. The
 * network transport asks it once per communicator
 * (transports/net/net_device.c).
 *
 * Devices are matched to the topology's NICs by name (a port's <net
 * name=...>: an interface or an RDMA device, and the RDMA port where both
 * name one), else by PCI bus id (ignoring the function digit when the
 * exact id is not there). Only matched devices are candidates. With one
 * device, no topology, or no device the topology knows, the answer is
 * device 0, as before there was a choice.
 *
 * - A host with GPUs: the rank drives the GPU with its bus id, else the
 *   (local rank mod nGPUs)-th, as WEFT_BIND assumes; it uses the candidate
 *   NIC nearest that GPU, GPUs that see the same nearest NICs spread over
 *   them in GPU order (weft_topo_nearest_nics_among). Several devices on
 *   that NIC (its ports) are spread the same way.
 * - A host without GPUs: the rank sits where WEFT_BIND's plan puts it
 *   (topo_bind_plan.c): beside the r-th NIC when the host has no more
 *   ranks than NICs on PCI, else on its NUMA node(s). Its candidates are
 *   the devices of that NIC, else the devices nearest its NUMA node(s); the
 *   local ranks with the same candidates take them in turn (the i-th such
 *   rank the (i mod k)-th of k), so several NICs on a node are used as
 *   rails, and since only the topology and the local rank decide, the same
 *   local rank takes the same rail on every host built alike. Without CPU
 *   affinity in the topology every candidate counts as near.
 */
#include "topo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int attr_int(const weft_topo_attrs_t *a, const char *key, int dflt) {
  const char *v = weft_topo_attr_get(a, key);
  char *end;
  long x = v ? strtol(v, &end, 0) : 0;
  return v && end != v ? (int)x : dflt;
}

int weft_topo_netdev_match(const weft_topo_t *t, const weft_topo_netdev_t *d) {
  if (!t || !d) return -1;
  if (d->name && *d->name) {
    int loose = -1;
    for (int i = 0; i < t->nnodes; i++) {
      const weft_topo_node_t *n = &t->nodes[i];
      const char *name = weft_topo_attr_get(&n->attrs, "name");
      if (n->kind != WEFT_TOPO_NET || !name || strcmp(name, d->name) != 0) continue;
      if (n->parent < 0 || t->nodes[n->parent].kind != WEFT_TOPO_NIC) continue;
      int port = attr_int(&n->attrs, "port", 0);
      if (d->port > 0 && port > 0 && port != d->port) continue;  // another port of that device
      if (d->port > 0 && port == d->port) return n->parent;
      if (loose < 0) loose = n->parent;
    }
    if (loose >= 0) return loose;
  }
  if (d->busid && *d->busid) {
    char norm[32];
    weft_topo_busid_norm(d->busid, norm, sizeof(norm));
    int n = weft_topo_find_busid(t, norm);
    if (n >= 0 && t->nodes[n].kind == WEFT_TOPO_NIC) return n;
    const char *dot = strrchr(norm, '.');
    size_t stem = dot ? (size_t)(dot - norm) + 1 : 0;  // "dddd:bb:dd." : another function of that device
    for (int i = 0; stem && i < t->nnodes; i++)
      if (t->nodes[i].kind == WEFT_TOPO_NIC && strncmp(t->nodes[i].busid, norm, stem) == 0) return i;
  }
  return -1;
}

static int nearer(const weft_topo_nearness_t *a, const weft_topo_nearness_t *b) {
  if (a->cls != b->cls) return a->cls < b->cls;
  if (a->bw > b->bw + 1e-9 || a->bw < b->bw - 1e-9) return a->bw > b->bw;
  return a->hops < b->hops;
}

static int as_near(const weft_topo_nearness_t *a, const weft_topo_nearness_t *b) {
  return !nearer(a, b) && !nearer(b, a);
}

typedef struct {
  const weft_topo_t *t;
  const int *dev_nic;      // [ndevs]: each device's NIC node, -1 unmatched
  int ndevs;
  unsigned char *allowed;  // [nnodes]: NICs some device is on
} ctx_t;

// The devices whose NIC has mark[nic] set, in the topology's order of their
// NICs (then the backend's), so that hosts alike agree whatever order their
// backends list devices in; returns how many.
static int devices_on(const ctx_t *c, const unsigned char *mark, int *set) {
  int n = 0;
  for (int nic = 0; nic < c->t->nnodes; nic++)
    for (int d = 0; mark[nic] && d < c->ndevs; d++)
      if (c->dev_nic[d] == nic) set[n++] = d;
  return n;
}

// Does CPU node `cpu` hold any of the plan's CPUs?
static int holds_any(const weft_topo_t *t, int cpu, const weft_topo_bind_t *b) {
  int n = weft_topo_cpu_cores(t, cpu, NULL, 0), hit = 0;
  int *cores = n > 0 ? malloc(sizeof(int) * (size_t)n) : NULL;
  if (!cores) return 0;
  n = weft_topo_cpu_cores(t, cpu, cores, n);
  for (int i = 0; i < n && !hit; i++)
    for (int j = 0; j < b->ncpus && !hit; j++) hit = cores[i] == b->cpus[j];
  free(cores);
  return hit;
}

// Local rank r of a host without GPUs: the devices it may use (set), and where it sits (*numa: -1 several or unknown; *affinity 0
// when the topology has no CPU affinity). Returns the count, -1 on ENOMEM.
static int cpu_candidates(const ctx_t *c, int r, int local_size, int *set, int *numa, int *affinity) {
  const weft_topo_t *t = c->t;
  weft_topo_bind_t b;
  char err[256];
  *numa = -1;
  *affinity = 0;
  unsigned char *mark = calloc((size_t)t->nnodes, 1);
  if (!mark) return -1;
  int n = 0;
  if (weft_topo_bind_plan(t, r, local_size, NULL, 0, &b, err, sizeof(err)) == 0) {
    *affinity = 1;
    *numa = b.numa;
    if (b.nic >= 0 && c->allowed[b.nic]) { // beside its own NIC
      mark[b.nic] = 1;
    } else { // the NICs nearest the NUMA node(s) it runs on
      weft_topo_nearness_t best = {WEFT_PATH_DIS, 0, 1 << 30}, near;
      int *cand = malloc(sizeof(int) * (size_t)t->nnodes);
      for (int cpu = 0; cand && cpu < t->nnodes; cpu++) {
        if (t->nodes[cpu].kind != WEFT_TOPO_CPU || !holds_any(t, cpu, &b)) continue;
        int k = weft_topo_nic_ties(t, cpu, c->allowed, cand, t->nnodes, &near);
        if (k == 0) continue;
        if (nearer(&near, &best)) memset(mark, 0, (size_t)t->nnodes), best = near;
        if (as_near(&near, &best))
          for (int i = 0; i < k; i++) mark[cand[i]] = 1;
      }
      if (!cand) n = -1;
      free(cand);
    }
    weft_topo_bind_free(&b);
  }
  if (n == 0) n = devices_on(c, mark, set);
  if (n == 0) n = devices_on(c, c->allowed, set); // nothing nearer than the rest: every candidate
  free(mark);
  return n;
}

static void set_rail(weft_topo_nic_pick_t *p, const int *set, int k, int j) {
  p->dev = set[j % k];
  p->rail = j % k;
  p->rails = k;
}

static void append_rail(weft_topo_nic_pick_t *p) {
  size_t len = strlen(p->why);
  if (p->rails > 1) snprintf(p->why + len, sizeof(p->why) - len, ", rail %d of %d", p->rail, p->rails);
}

static int pick_for_cpu(const ctx_t *c, int local_rank, int local_size, weft_topo_nic_pick_t *p) {
  int *sets = malloc(sizeof(int) * (size_t)c->ndevs * (size_t)(local_rank + 1));
  int *len = malloc(sizeof(int) * (size_t)(local_rank + 1));
  int numa = -1, affinity = 0, rc = -1;
  if (!sets || !len) goto out;
  for (int r = 0; r <= local_rank; r++) // the ranks before this one, to know its turn
    if ((len[r] = cpu_candidates(c, r, local_size, sets + (size_t)r * c->ndevs, &numa, &affinity)) < 0) goto out;
  const int *mine = sets + (size_t)local_rank * c->ndevs;
  int k = len[local_rank], j = 0;
  for (int r = 0; r < local_rank; r++)
    j += len[r] == k && memcmp(sets + (size_t)r * c->ndevs, mine, sizeof(int) * (size_t)k) == 0;
  set_rail(p, mine, k, j);
  p->numa = numa;
  if (!affinity)
    snprintf(p->why, sizeof(p->why), "no CPU affinity in the topology; spread over %d devices", k);
  else if (numa >= 0)
    snprintf(p->why, sizeof(p->why), "nearest its NUMA node %d", numa);
  else
    snprintf(p->why, sizeof(p->why), "nearest its NUMA nodes");
  append_rail(p);
  rc = 0;
out:
  free(sets);
  free(len);
  return rc;
}

static int pick_for_gpu(const ctx_t *c, int local_rank, const char *gpu_busid, int ngpus, weft_topo_nic_pick_t *p) {
  const weft_topo_t *t = c->t;
  int g = -1, gi = -1, want = local_rank % ngpus;
  if (gpu_busid && *gpu_busid) {
    char norm[32];
    weft_topo_busid_norm(gpu_busid, norm, sizeof(norm));
    int n = weft_topo_find_busid(t, norm);
    if (n >= 0 && t->nodes[n].kind == WEFT_TOPO_GPU) g = n;
  }
  for (int i = 0, o = 0; i < t->nnodes && gi < 0; i++) {
    if (t->nodes[i].kind != WEFT_TOPO_GPU) continue;
    if (g == i || (g < 0 && o == want)) g = i, gi = o;
    o++;
  }
  int *near = malloc(sizeof(int) * (size_t)ngpus), *set = malloc(sizeof(int) * (size_t)c->ndevs);
  unsigned char *mark = calloc((size_t)t->nnodes, 1);
  int rc = -1;
  if (!near || !set || !mark || weft_topo_nearest_nics_among(t, c->allowed, near, ngpus) < 0) goto out;
  char label[64];
  weft_topo_label(t, g, label, sizeof(label));
  p->gpu = g;
  p->numa = t->nodes[g].numa;
  int k;
  if (near[gi] >= 0) {
    mark[near[gi]] = 1;
    k = devices_on(c, mark, set);
    int j = 0;
    for (int e = 0; e < gi; e++) j += near[e] == near[gi];
    set_rail(p, set, k, j);
    snprintf(p->why, sizeof(p->why), "nearest its GPU %.40s", label);
  } else { // no path from the GPU to any candidate: the first of them
    k = devices_on(c, c->allowed, set);
    set_rail(p, set, 1, 0);
    snprintf(p->why, sizeof(p->why), "no NIC reachable from its GPU %.40s; the first known one", label);
  }
  append_rail(p);
  rc = 0;
out:
  free(near);
  free(set);
  free(mark);
  return rc;
}

int weft_topo_nic_pick(const weft_topo_t *t, int local_rank, int local_size, const char *gpu_busid,
                       const weft_topo_netdev_t *devs, int ndevs, weft_topo_nic_pick_t *pick) {
  if (!pick) return -1;
  memset(pick, 0, sizeof(*pick));
  pick->nic = pick->gpu = pick->numa = -1;
  pick->rails = 1;
  if (!devs || ndevs < 1 || local_size < 1 || local_rank < 0 || local_rank >= local_size) {
    snprintf(pick->why, sizeof(pick->why), "local rank %d of %d with %d devices: nothing to choose", local_rank,
             local_size, ndevs);
    return -1;
  }
  if (ndevs == 1 || !t) {
    snprintf(pick->why, sizeof(pick->why), ndevs == 1 ? "the only device" : "no topology; the first device");
    return 0;
  }
  int *dev_nic = malloc(sizeof(int) * (size_t)ndevs);
  unsigned char *allowed = calloc((size_t)t->nnodes + 1, 1);
  int matched = 0, rc = -1;
  if (!dev_nic || !allowed) goto out;
  for (int d = 0; d < ndevs; d++) {
    dev_nic[d] = weft_topo_netdev_match(t, &devs[d]);
    if (dev_nic[d] >= 0) allowed[dev_nic[d]] = 1, matched++;
  }
  if (matched == 0) {
    snprintf(pick->why, sizeof(pick->why), "no device is in the topology; the first device");
    rc = 0;
    goto out;
  }
  ctx_t c = {t, dev_nic, ndevs, allowed};
  int ngpus = weft_topo_count(t, WEFT_TOPO_GPU);
  rc = ngpus > 0 ? pick_for_gpu(&c, local_rank, gpu_busid, ngpus, pick) : pick_for_cpu(&c, local_rank, local_size, pick);
  if (rc == 0) pick->nic = dev_nic[pick->dev];
out:
  if (rc < 0) snprintf(pick->why, sizeof(pick->why), "out of memory");
  free(dev_nic);
  free(allowed);
  return rc;
}
