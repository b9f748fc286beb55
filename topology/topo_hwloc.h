/*
 * topo_hwloc.h — what the hwloc loader (topo_hwloc.c) shares with its
 * reader of distance matrices (topo_hwloc_dist.c).
 */
#ifndef WEFT_TOPO_HWLOC_H
#define WEFT_TOPO_HWLOC_H

#include <hwloc.h>

#include "topo.h"

typedef struct {
  weft_topo_t *t;
  hwloc_topology_t h;
  int live; // this machine: sysfs may be read
} weft_hwloc_ctx_t;

// The CPU node (NUMA node) an hwloc object hangs under; the first CPU when
// it has none; -1 when the graph has no CPU yet.
int weft_hwloc_cpu_of(weft_hwloc_ctx_t *c, hwloc_obj_t obj);
// The graph node made for a PCI bridge or device, -1 when none was.
int weft_hwloc_node_of(hwloc_obj_t obj);
// Reads hwloc's distance matrices into the graph (NVLinks); logs at INFO
// those it does not read. 0, or -1 on ENOMEM.
int weft_hwloc_add_distances(weft_hwloc_ctx_t *c);

#endif
