/*
 * layout.h — where the ranks of a call sit: hosts, host order, local indices.
 *
 * Multi-host schedules want each host's ranks side by side: a ring that
 * visits them contiguously crosses each host boundary once per direction,
 * recursive doubling pairs neighbours on one host before it pairs hosts, and
 * the hierarchical and tree schedules address "the i-th rank of host h".
 * The host order sorts ranks by (host, rank). When host_of is NULL, spans a
 * single host, or already lists hosts contiguously, the host order is rank
 * order and nothing is allocated, so single-host schedules cost what they
 * did before. A call may bring its own order instead (weft_coll_args_t's
 * order and pos: the ring the communicator chose from the machine's
 * topology, each host's ranks still side by side); it is used as given,
 * without a copy. NUMA groups (a host and one of its NUMA nodes, numa_of)
 * are laid out the same way: weft_coll_by_numa shows a call with its NUMA
 * groups as its hosts, so a schedule built over hosts (hier.c) runs over
 * NUMA nodes unchanged. Private to algorithms/, except
 * weft_layout_numa_groups, which the communicator calls at init.
 */
#ifndef WEFT_LAYOUT_H
#define WEFT_LAYOUT_H

#include "schedule.h"

typedef struct {
  int nranks, nhosts;
  const int *host_of;  // NULL: one host
  const int *order;    // [nranks] rank at each host-order position; NULL: rank order
  const int *pos;      // [nranks] host-order position of each rank; NULL: rank order
  int *start;          // [nhosts + 1] first position of each host; NULL: one host
  int *mem;            // the one allocation behind order, pos and start
} weft_layout_t;

// Fill *l from the call's host_of / nhosts. `need_hosts`: also the first
// position of every host (weft_layout_host_first/size). Refuses (WARN,
// ncclInvalidArgument) a host index outside [0, nhosts) or a host without
// ranks. Free with weft_layout_free, also after a failure.
ncclResult_t weft_layout_init(weft_layout_t *l, const weft_coll_args_t *a, int need_hosts);
void weft_layout_free(weft_layout_t *l);

static inline int weft_layout_rank_at(const weft_layout_t *l, int p) { return l->order ? l->order[p] : p; }
static inline int weft_layout_pos(const weft_layout_t *l, int r) { return l->pos ? l->pos[r] : r; }
static inline int weft_layout_host(const weft_layout_t *l, int r) { return l->host_of ? l->host_of[r] : 0; }
static inline int weft_layout_host_first(const weft_layout_t *l, int h) { return l->start ? l->start[h] : 0; }
static inline int weft_layout_host_size(const weft_layout_t *l, int h) {
  return l->start ? l->start[h + 1] - l->start[h] : l->nranks;
}
// Index of rank r among its host's ranks (0 for the host's lowest rank).
static inline int weft_layout_local(const weft_layout_t *l, int r) {
  return weft_layout_pos(l, r) - weft_layout_host_first(l, weft_layout_host(l, r));
}

// Do all hosts hold the same number of ranks? Sets *per_host to that number
// when they do. 0 as well for an invalid host_of (or no memory to check it).
int weft_layout_even(const weft_coll_args_t *a, int *per_host);

// Hosts the call spans: nhosts when host_of is given, else 1.
static inline int weft_coll_hosts(const weft_coll_args_t *a) {
  return a->host_of && a->nhosts > 1 ? a->nhosts : 1;
}

// The call seen with its NUMA groups as hosts, in group order (each group's
// ranks side by side, groups of one host together): numa_of and nnuma as
// host_of and nhosts, the communicator's ring order dropped (it keeps hosts,
// not NUMA nodes, side by side). Without numa_of, the call as it is.
static inline weft_coll_args_t weft_coll_by_numa(const weft_coll_args_t *a) {
  weft_coll_args_t g = *a;
  if (a->numa_of != NULL && a->nnuma > 1) {
    g.host_of = a->numa_of;
    g.nhosts = a->nnuma;
    g.order = g.pos = NULL;
  }
  return g;
}

// Numbers the (host, NUMA node) pairs of n ranks: numa_of[r] is rank r's
// group, groups numbered host by host (host_of; NULL: one host), each
// host's NUMA nodes in increasing order. numa[r] is the NUMA node rank r
// sits on, -1 unknown. Returns the number of groups, or 0 (numa_of left
// alone) when some rank's node is unknown, when no host spans two NUMA
// nodes (the groups would be the hosts), or on bad input.
int weft_layout_numa_groups(const int *host_of, int nhosts, const int *numa, int n, int *numa_of);

#endif
