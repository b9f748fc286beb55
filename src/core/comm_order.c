/*
 * comm_order.c — the communicator's ring order, from the machine.
 *
 * Rings and chains run in the layout's order (algorithms/layout.h): each
 * host's ranks side by side, hosts in increasing order. Within a host the
 * order is the topology's ring over where the ranks sit (topology/
 * topo_order.c): NVLink before PCI, one PCI switch before two, one socket
 * crossing per direction, started at the rank nearest a NIC. Two rounds over
 * the bootstrap set it up:
 *   1. every rank says where it sits (a node of its host's graph) and which
 *      graph it sees (a signature);
 *   2. every rank orders its own host's ranks and says its position there
 *      and a hash of the whole host order.
 * Each host decides for itself but only ranks of one host must agree; every
 * rank checks, from the same gathered table, that each host's positions
 * form one permutation and its ranks computed one order, and falls back to
 * host order everywhere if not (ranks that see different topology files).
 * Nothing is kept, and the schedules cost what they did, when every host
 * keeps rank order.
 *
 * The first round also carries each rank's NUMA node (its place's), so every
 * rank numbers the same (host, NUMA node) groups (numa_of), which the
 * NUMA-hierarchical AllReduce and the tuner's rule for it read (algorithms/
 * hier.c, tuner.c). Kept only where every rank's node is known and some host
 * spans two.
 *
 * A rank that drives a GPU has its init threads placed near it
 * (comm_affinity.c).
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "comm.h"
#include "placement.h"
#include "env.h"
#include "layout.h"
#include "schedule.h"
#include "topo.h"

typedef struct {
  int32_t place;  // node of the rank's host graph, -1 unknown
  uint32_t sig;   // the graph's signature, 0 none
  int32_t numa;   // the NUMA node (numaid) of that place, -1 unknown
} place_card_t;

typedef struct {
  int32_t pos;    // position among the host's ranks
  uint32_t hash;  // the host order this rank computed
} pos_card_t;

// The CPUs this process may run on.
static int allowed_cpus(cpu_set_t *set, int *cpus, int max) {
  CPU_ZERO(set);
  if (sched_getaffinity(0, sizeof(*set), set) != 0) return 0;
  int n = 0;
  for (int c = 0; c < CPU_SETSIZE && n < max; c++)
    if (CPU_ISSET(c, set)) cpus[n++] = c;
  return n;
}

static uint32_t hash_ints(const int *v, int n) {
  uint32_t h = 2166136261u;
  for (int i = 0; i < n; i++) h = (h ^ (uint32_t)v[i]) * 16777619u;
  return h;
}

// This host's ranks, in rank order (k of them), and the order the topology
// gives them: lorder[p] = index into local[] of the rank at position p.
static int host_order(const struct ncclComm *comm, const weft_topo_t *t, const place_card_t *cards,
                      const int *local, int k, int *lorder, double *bw) {
  const place_card_t *mine = &cards[comm->rank];
  int *place = malloc(sizeof(int) * (size_t)k), changed = 0;
  if (place == NULL) return -1;
  for (int i = 0; i < k; i++)
    place[i] = cards[local[i]].sig == mine->sig && mine->sig != 0 ? cards[local[i]].place : -1;
  if (t != NULL)
    changed = weft_topo_rank_order(t, place, k, lorder, bw);
  else
    for (int i = 0; i < k; i++) lorder[i] = i;
  free(place);
  return changed;
}

// Does every host's set of positions form one permutation, agreed by all
// its ranks? Then fill order/pos and return 1 if some host is reordered.
static int global_order(const struct ncclComm *comm, const pos_card_t *pc, int *order, int *pos, int *bad_host) {
  int n = comm->nranks, changed = 0;
  *bad_host = -1;
  int *start = calloc((size_t)comm->nhosts + 1, sizeof(int));
  if (start == NULL) return -1;
  for (int r = 0; r < n; r++) start[comm->host_of[r] + 1]++;
  for (int h = 0; h < comm->nhosts; h++) start[h + 1] += start[h];
  for (int r = 0; r < n; r++) order[r] = -1;
  for (int h = 0; h < comm->nhosts && *bad_host < 0; h++) {
    uint32_t hash = 0;
    int first = 1;
    for (int r = 0, i = 0; r < n; r++) {
      if (comm->host_of[r] != h) continue;
      int size = start[h + 1] - start[h], p = pc[r].pos;
      if (first) hash = pc[r].hash, first = 0;
      if (p < 0 || p >= size || order[start[h] + p] != -1 || pc[r].hash != hash) {
        *bad_host = h;
        break;
      }
      order[start[h] + p] = r;
      changed |= p != i++;
    }
  }
  free(start);
  if (*bad_host >= 0) return 0;
  for (int p = 0; p < n; p++) pos[order[p]] = p;
  return changed;
}

// Every rank's NUMA group, from the gathered cards (the same on every rank).
static ncclResult_t numa_groups(struct ncclComm *comm, const place_card_t *cards) {
  int n = comm->nranks, *numa = malloc(sizeof(int) * (size_t)n), *of = malloc(sizeof(int) * (size_t)n);
  if (numa == NULL || of == NULL) {
    free(numa);
    free(of);
    return ncclSystemError;
  }
  for (int r = 0; r < n; r++) numa[r] = cards[r].numa;
  int groups = weft_layout_numa_groups(comm->host_of, comm->nhosts, numa, n, of);
  free(numa);
  if (groups > 0) {
    INFO(WEFT_LOG_GRAPH, "rank %d: NUMA group %d of %d (host %d)", comm->rank, of[comm->rank], groups,
         comm->host_of[comm->rank]);
    comm->numa_of = of;
    comm->nnuma = groups;
  } else {
    free(of);
  }
  return ncclSuccess;
}

// NCCL's INIT lines: rank 0 prints the ring from itself ("Channel 00/01 :
// 0 1 3 2", numbers as wide as the largest rank), every rank its neighbours
// and trees.
static void log_rings(const struct ncclComm *comm) {
  int n = comm->nranks, width = snprintf(NULL, 0, "%d", n - 1);
  if (comm->rank == 0) {
    char line[128];
    int o = snprintf(line, sizeof(line), "Channel 00/01 :"), start = comm->pos ? comm->pos[0] : 0;
    for (int i = 0; i < n && o < (int)sizeof(line) - 1; i++) {
      int p = (start + i) % n;
      o += snprintf(line + o, sizeof(line) - (size_t)o, " %*d", width, comm->order ? comm->order[p] : p);
    }
    if (o >= (int)sizeof(line)) snprintf(line + sizeof(line) - 4, 4, "...");
    INFO(WEFT_LOG_INIT, "%s", line);
  }
  int me = comm->pos ? comm->pos[comm->rank] : comm->rank;
  int prev = (me + n - 1) % n, next = (me + 1) % n;
  INFO(WEFT_LOG_GRAPH, "Ring 00 : %d -> %d -> %d", comm->order ? comm->order[prev] : prev, comm->rank,
       comm->order ? comm->order[next] : next);
  weft_coll_args_t a = {.coll = WEFT_COLL_ALLREDUCE, .nranks = n, .rank = comm->rank, .count = 1, .slice = 1,
                        .host_of = comm->host_of, .nhosts = comm->nhosts, .order = comm->order, .pos = comm->pos};
  int up[2], down[2][2];
  if (weft_tree_links(&a, up, down) == ncclSuccess)
    INFO(WEFT_LOG_INIT, "Trees [0] %d/%d/-1->%d->%d [1] %d/%d/-1->%d->%d", down[0][0], down[0][1], comm->rank, up[0],
         down[1][0], down[1][1], comm->rank, up[1]);
}

ncclResult_t weft_comm_order_ranks(struct ncclComm *comm) {
  int n = comm->nranks;
  if (n == 1) return ncclSuccess;
  enum { MAX_CPUS = 1024 };
  char busid[32] = "";
  int uses_gpu = comm->cuda_dev >= 0 && weft_cuda_device_busid(comm->cuda_dev, busid, sizeof(busid)) == 0;
  uint32_t sig = 0;
  const weft_topo_t *t = weft_topo_for_ranks(uses_gpu, &sig);
  ncclResult_t res = ncclSuccess;
  place_card_t *cards = calloc((size_t)n, sizeof(*cards));
  pos_card_t *pc = calloc((size_t)n, sizeof(*pc));
  int *local = malloc(sizeof(int) * (size_t)n), *lorder = malloc(sizeof(int) * (size_t)n);
  int *cpus = malloc(sizeof(int) * MAX_CPUS), *order = malloc(sizeof(int) * 2 * (size_t)n);
  cpu_set_t allowed;
  if (!cards || !pc || !local || !lorder || !cpus || !order) {
    res = ncclSystemError;
    goto out;
  }
  int ncpus = allowed_cpus(&allowed, cpus, MAX_CPUS);
  place_card_t mine = {.place = -1, .sig = sig, .numa = -1};
  if (t != NULL) {
    mine.place = weft_topo_place(t, busid, cpus, ncpus);
    if (mine.place >= 0) mine.numa = t->nodes[mine.place].numa;
  }
  cards[comm->rank] = mine;
  WEFTCHECKGOTO(weft_bootstrap_allgather(&comm->bs, cards, sizeof(*cards)), res, out);
  WEFTCHECKGOTO(numa_groups(comm, cards), res, out);

  int k = 0, me = 0;
  for (int r = 0; r < n; r++)
    if (comm->host_of[r] == comm->host_of[comm->rank]) local[k++] = r;
  double bw = 0;
  int changed = host_order(comm, t, cards, local, k, lorder, &bw);
  if (changed < 0) {
    res = ncclSystemError;
    goto out;
  }
  for (int p = 0; p < k; p++) {
    if (local[lorder[p]] == comm->rank) me = p;
    lorder[p] = local[lorder[p]];  // now ranks
  }
  pc[comm->rank] = (pos_card_t){.pos = me, .hash = hash_ints(lorder, k)};
  WEFTCHECKGOTO(weft_bootstrap_allgather(&comm->bs, pc, sizeof(*pc)), res, out);

  int bad_host;
  int reordered = global_order(comm, pc, order, order + n, &bad_host);
  if (reordered < 0) {
    res = ncclSystemError;
    goto out;
  }
  if (bad_host >= 0)
    WARN("the ranks of host %d computed different ring orders (do they see different topology files?); "
         "using host order", bad_host);
  if (reordered > 0) {
    comm->order = order;
    comm->pos = order + n;
    order = NULL;
  }
  if (t != NULL && cards[comm->rank].place >= 0) {
    char label[64];
    INFO(WEFT_LOG_GRAPH, "rank %d sits at %s %s; host ring of %d ranks %s, bottleneck %.1f GB/s", comm->rank,
         weft_topo_kind_name(t->nodes[cards[comm->rank].place].kind),
         weft_topo_label(t, cards[comm->rank].place, label, sizeof(label)), k,
         changed > 0 ? "reordered by the topology" : "in rank order", bw);
  }
  log_rings(comm);
  if (uses_gpu) weft_comm_threads_near(comm, t, cards[comm->rank].place, "its GPU");
out:
  free(cards);
  free(pc);
  free(local);
  free(lorder);
  free(cpus);
  free(order);
  return res;
}
