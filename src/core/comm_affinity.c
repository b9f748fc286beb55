/*
 * comm_affinity.c — a rank's threads near its GPU or its NIC, as NCCL
 * places its own.
 *
 * While a communicator initialises, the calling thread runs on the CPUs of
 * the NUMA node its GPU (or, for a rank on host memory, the NIC its network
 * traffic uses) hangs under, so the threads started then — the network
 * proxy among them — inherit that placement, and memory first touched then
 * lands on that node. Within the process's own binding: a launcher that
 * bound the rank elsewhere wins, unless NCCL_IGNORE_CPU_AFFINITY=1. The
 * thread gets its own affinity back when init ends (weft_comm_restore_affinity).
 */
#include <sched.h>
#include <stdlib.h>

#include "comm.h"
#include "debug.h"
#include "env.h"
#include "topo.h"

// The CPUs of node's NUMA node, within `allowed` unless NCCL_IGNORE_CPU_AFFINITY.
static int near_cpus(const weft_topo_t *t, int node, const cpu_set_t *allowed, cpu_set_t *out) {
  enum { MAX_CORES = 4096 };
  CPU_ZERO(out);
  if (t == NULL || node < 0 || node >= t->nnodes || t->nodes[node].cpu < 0) return 0;
  int *cores = malloc(sizeof(int) * MAX_CORES);
  if (cores == NULL) return 0;
  int k = weft_topo_cpu_cores(t, t->nodes[node].cpu, cores, MAX_CORES);
  int ignore = weft_env_NCCL_IGNORE_CPU_AFFINITY() != 0;
  for (int i = 0; i < k && i < MAX_CORES; i++)
    if (cores[i] >= 0 && cores[i] < CPU_SETSIZE && (ignore || CPU_ISSET(cores[i], allowed))) CPU_SET(cores[i], out);
  free(cores);
  return CPU_COUNT(out) > 0;
}

void weft_comm_threads_near(struct ncclComm *comm, const weft_topo_t *t, int node, const char *what) {
  if (comm->init_affinity != NULL) return;  // placed already (near its GPU)
  cpu_set_t allowed, near;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 || !near_cpus(t, node, &allowed, &near)) return;
  if (CPU_EQUAL(&near, &allowed)) return;  // nothing to narrow
  cpu_set_t *saved = malloc(sizeof(*saved));
  if (saved == NULL || sched_setaffinity(0, sizeof(near), &near) != 0) {
    free(saved);
    return;
  }
  *saved = allowed;
  comm->init_affinity = saved;
  INFO(WEFT_LOG_INIT, "rank %d: threads started during init run on the %d CPUs of NUMA node %d, near %s", comm->rank,
       CPU_COUNT(&near), t->nodes[node].numa, what);
}

void weft_comm_restore_affinity(struct ncclComm *comm) {
  cpu_set_t *saved = comm->init_affinity;
  if (saved == NULL) return;
  if (sched_setaffinity(0, sizeof(*saved), saved) != 0)
    WARN("rank %d: could not give the initialising thread its CPU affinity back", comm->rank);
  free(saved);
  comm->init_affinity = NULL;
}
