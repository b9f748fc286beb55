/*
 * topo_bind.c — the process's CPU binding: reading it (weft-topo reports it)
 * and setting it (WEFT_BIND=1), with hwloc for CPUs and libnuma's memory
 * policy for memory. What to bind to is decided in topo_bind_plan.c.
 *
 * hwloc's binding calls need a topology; a light one (no I/O devices) is
 * loaded on first use and kept for the life of the process.
 */
#include "topo.h"

#include <errno.h>
#include <hwloc.h>
#include <numa.h>
#include <numaif.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static hwloc_topology_t light;
static int light_ok;

static void light_load(void) {
  if (hwloc_topology_init(&light) < 0) return;
  if (hwloc_topology_load(light) < 0) {
    hwloc_topology_destroy(light);
    return;
  }
  light_ok = 1;
}

__attribute__((destructor)) static void light_free(void) {
  if (light_ok) hwloc_topology_destroy(light);
  light_ok = 0;
}

static hwloc_topology_t light_get(void) {
  pthread_once(&once, light_load);
  return light_ok ? light : NULL;
}

void weft_topo_cpulist(const int *cpus, int n, char *buf, size_t len) {
  size_t off = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && off < len; i++) {
    int j = i;
    while (j + 1 < n && cpus[j + 1] == cpus[j] + 1) j++;
    int w = j > i ? snprintf(buf + off, len - off, "%s%d-%d", off ? "," : "", cpus[i], cpus[j])
                  : snprintf(buf + off, len - off, "%s%d", off ? "," : "", cpus[i]);
    if (w < 0) break;
    off += (size_t)w;
    i = j;
  }
}

int weft_topo_core_map(int **core_of) {
  *core_of = NULL;
  long conf = sysconf(_SC_NPROCESSORS_CONF);
  int n = conf > 0 && conf < (1 << 20) ? (int)conf : 0;
  if (n == 0 || !(*core_of = malloc(sizeof(int) * (size_t)n))) return 0;
  for (int c = 0; c < n; c++) {
    char path[128], buf[256];
    snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", c);
    FILE *f = fopen(path, "r");
    (*core_of)[c] = f && fgets(buf, sizeof(buf), f) ? atoi(buf) : c; // the first sibling names the core
    if (f) fclose(f);
  }
  return n;
}

int weft_topo_cpubind_get(weft_topo_cpubind_t *b) {
  hwloc_topology_t h = light_get();
  hwloc_bitmap_t set = h ? hwloc_bitmap_alloc() : NULL;
  if (!set || hwloc_get_cpubind(h, set, HWLOC_CPUBIND_PROCESS) < 0) {
    hwloc_bitmap_free(set);
    snprintf(b->list, sizeof(b->list), "unknown");
    b->ncpus = b->navail = 0;
    return -1;
  }
  hwloc_bitmap_list_snprintf(b->list, sizeof(b->list), set);
  b->ncpus = hwloc_bitmap_weight(set);
  b->navail = hwloc_bitmap_weight(hwloc_topology_get_allowed_cpuset(h));
  hwloc_bitmap_free(set);
  return 0;
}

static int membind(int node, char *err, size_t errlen) {
  if (numa_available() < 0) return 0; // no NUMA support in this kernel: nothing to bind
  struct bitmask *m = numa_allocate_nodemask();
  if (!m) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  numa_bitmask_setbit(m, (unsigned)node);
  int rc = set_mempolicy(MPOL_BIND, m->maskp, m->size + 1);
  if (rc)
    snprintf(err, errlen, "memory binding to NUMA node %d failed: %s", node, strerror(errno));
  numa_free_nodemask(m);
  return rc ? -1 : 0;
}

int weft_topo_bind_apply(const weft_topo_bind_t *b, int mem, char *err, size_t errlen) {
  hwloc_topology_t h = light_get();
  if (!h) {
    snprintf(err, errlen, "hwloc could not load this machine's topology");
    return -1;
  }
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  if (!set) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  for (int i = 0; i < b->ncpus; i++) hwloc_bitmap_set(set, (unsigned)b->cpus[i]);
  int rc = hwloc_set_cpubind(h, set, HWLOC_CPUBIND_PROCESS);
  if (rc < 0) rc = hwloc_set_cpubind(h, set, HWLOC_CPUBIND_THREAD); // threads came and went meanwhile
  hwloc_bitmap_free(set);
  if (rc < 0) {
    char list[256];
    weft_topo_cpulist(b->cpus, b->ncpus, list, sizeof(list));
    snprintf(err, errlen, "binding to CPUs %s failed: %s", list, strerror(errno));
    return -1;
  }
  return mem && b->numa >= 0 ? membind(b->numa, err, errlen) : 0;
}
