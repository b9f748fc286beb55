/*
 * topo_bind_plan.c — which CPUs a rank should run on (WEFT_BIND=1): a pure
 * function of the topology and the rank's place among the ranks of its
 * host, so that it can be tested on any topology file.
 *
 * - A host with GPUs: local rank r drives the (r mod nGPUs)-th GPU and runs
 *   on the NUMA node that GPU hangs under; the ranks sharing a node split
 *   its cores into contiguous shares, in local-rank order.
 * - No GPU, and no more local ranks than NICs on PCI: rank r runs near the
 *   r-th NIC, in the same way (a network-bound rank next to its adapter).
 * - Otherwise (CPU-only hosts): the ranks are spread over the NUMA nodes,
 *   consecutive ranks on the same node, each with a contiguous share of its
 *   cores; fewer ranks than nodes get whole nodes each.
 *
 * Shares are cut in cores, not CPUs: core_of maps each OS CPU to its core,
 * so SMT siblings stay together (NULL: every CPU is its own core). A share
 * never comes out empty: more ranks than cores share cores.
 */
#include "topo.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  int node;   // CPU node index
  int *pus;   // its OS CPUs, ascending
  int npus;
} numa_t;

static int cmp_int(const void *a, const void *b) { return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b); }

static int core_key(const int *core_of, int ncore_of, int pu) {
  return core_of && pu >= 0 && pu < ncore_of ? core_of[pu] : pu;
}

// Appends to out the CPUs of cores [j*c/m, (j+1)*c/m) of this node, where c
// is its core count; at least one core.
static int take_share(const numa_t *nd, int j, int m, const int *core_of, int ncore_of, int *out, int nout) {
  int *keys = malloc(sizeof(int) * (size_t)nd->npus), c = 0;
  if (!keys) return -1;
  for (int i = 0; i < nd->npus; i++) { // distinct cores in order of their first CPU
    int k = core_key(core_of, ncore_of, nd->pus[i]), seen = 0;
    for (int x = 0; x < c && !seen; x++) seen = keys[x] == k;
    if (!seen) keys[c++] = k;
  }
  int lo = (int)((long)j * c / m), hi = (int)((long)(j + 1) * c / m);
  if (hi <= lo) hi = lo + 1;
  for (int i = 0; i < nd->npus; i++) {
    int k = core_key(core_of, ncore_of, nd->pus[i]);
    for (int x = lo; x < hi && x < c; x++)
      if (keys[x] == k) out[nout++] = nd->pus[i];
  }
  free(keys);
  return nout;
}

// The CPU node that local rank r is anchored to (GPU or NIC mode), -1 none.
static int anchor(const weft_topo_t *t, weft_topo_kind_t kind, int r, int count, int *dev) {
  int want = r % count, seen = 0;
  for (int i = 0; i < t->nnodes; i++) {
    const weft_topo_node_t *n = &t->nodes[i];
    if (n->kind != kind || (kind == WEFT_TOPO_NIC && !n->on_pci)) continue;
    if (seen++ == want) {
      *dev = i;
      return n->cpu;
    }
  }
  return -1;
}

static int node_pos(const numa_t *nodes, int nn, int cpu) {
  for (int k = 0; k < nn; k++)
    if (nodes[k].node == cpu) return k;
  return 0; // a device under a node without cores: the first node
}

int weft_topo_bind_plan(const weft_topo_t *t, int local_rank, int local_size, const int *core_of, int ncore_of,
                        weft_topo_bind_t *b, char *err, size_t errlen) {
  memset(b, 0, sizeof(*b));
  b->numa = b->gpu = b->nic = -1;
  if (local_size < 1 || local_rank < 0 || local_rank >= local_size) {
    snprintf(err, errlen, "local rank %d of %d is not a rank of the host", local_rank, local_size);
    return -1;
  }
  int ncpu = weft_topo_count(t, WEFT_TOPO_CPU), nn = 0, total = 0, rc = -1;
  numa_t *nodes = calloc((size_t)ncpu + 1, sizeof(numa_t));
  if (!nodes) goto nomem;
  for (int i = 0; i < t->nnodes; i++) {
    if (t->nodes[i].kind != WEFT_TOPO_CPU) continue;
    int n = weft_topo_cpu_cores(t, i, NULL, 0);
    if (n <= 0) continue; // memory-only node, or no affinity given
    numa_t *nd = &nodes[nn++];
    nd->node = i;
    if (!(nd->pus = malloc(sizeof(int) * (size_t)n))) goto nomem;
    nd->npus = weft_topo_cpu_cores(t, i, nd->pus, n);
    total += nd->npus;
  }
  if (nn == 0) {
    snprintf(err, errlen, "%s: no CPU affinity in the topology, nothing to bind to", t->source);
    goto out;
  }
  if (!(b->cpus = malloc(sizeof(int) * (size_t)total))) goto nomem;
  int ngpus = weft_topo_count(t, WEFT_TOPO_GPU), nnics = 0;
  for (int i = 0; i < t->nnodes; i++) nnics += t->nodes[i].kind == WEFT_TOPO_NIC && t->nodes[i].on_pci;
  weft_topo_kind_t kind = ngpus > 0 ? WEFT_TOPO_GPU : local_size <= nnics ? WEFT_TOPO_NIC : WEFT_TOPO_CPU;
  int k = 0, j = 0, m = 1, last = -1;
  if (kind != WEFT_TOPO_CPU) { // anchored: share the node with the ranks anchored to it
    int dev = -1, mine = node_pos(nodes, nn, anchor(t, kind, local_rank, kind == WEFT_TOPO_GPU ? ngpus : nnics, &dev));
    m = 0;
    for (int r = 0; r < local_size; r++) {
      int other = -1;
      if (node_pos(nodes, nn, anchor(t, kind, r, kind == WEFT_TOPO_GPU ? ngpus : nnics, &other)) != mine) continue;
      if (r == local_rank) j = m;
      m++;
    }
    k = last = mine;
    *(kind == WEFT_TOPO_GPU ? &b->gpu : &b->nic) = dev;
  } else if (local_size <= nn) { // whole nodes
    k = (int)((long)local_rank * nn / local_size);
    last = (int)((long)(local_rank + 1) * nn / local_size) - 1;
  } else { // several ranks per node
    while (k + 1 < nn && (long)(k + 1) * local_size / nn <= local_rank) k++;
    int first = (int)((long)k * local_size / nn);
    m = (int)((long)(k + 1) * local_size / nn) - first;
    j = local_rank - first;
    last = k;
  }
  for (int x = k; x <= last; x++) {
    int got = x == last && k == last ? take_share(&nodes[x], j, m, core_of, ncore_of, b->cpus, b->ncpus)
                                     : take_share(&nodes[x], 0, 1, core_of, ncore_of, b->cpus, b->ncpus);
    if (got < 0) goto nomem;
    b->ncpus = got;
  }
  qsort(b->cpus, (size_t)b->ncpus, sizeof(int), cmp_int);
  if (k == last) b->numa = t->nodes[nodes[k].node].numa;
  b->share = j;
  b->sharers = m;
  rc = 0;
  goto out;
nomem:
  snprintf(err, errlen, "out of memory");
out:
  for (int x = 0; nodes && x < nn; x++) free(nodes[x].pus);
  free(nodes);
  if (rc) weft_topo_bind_free(b);
  return rc;
}

void weft_topo_bind_free(weft_topo_bind_t *b) {
  free(b->cpus);
  b->cpus = NULL;
  b->ncpus = 0;
}
