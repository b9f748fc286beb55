/*
 * layout.c — the host order of a call's ranks (see layout.h).
 *
 * A counting sort by host: one pass counts each host's ranks, a prefix sum
 * gives each host's first position, a second pass places the ranks in rank
 * order within their host. When the hosts are already contiguous in rank
 * order (the usual launch: consecutive ranks per host), positions equal
 * ranks and only the host starts are kept. A call that brings the
 * communicator's own order (args.order, args.pos) uses it as it is; only the
 * host starts are counted, when asked for.
 *
 * NUMA groups are numbered by sorting the ranks by (host, NUMA node): each
 * new pair in that order is the next group.
 */
#include "layout.h"

#include <stdlib.h>

#include "checks.h"

// host_of lists each host's ranks contiguously, hosts in increasing order.
static int contiguous(const int *host_of, int n) {
  for (int r = 1; r < n; r++)
    if (host_of[r] != host_of[r - 1] && host_of[r] != host_of[r - 1] + 1) return 0;
  return host_of[0] == 0;
}

ncclResult_t weft_layout_init(weft_layout_t *l, const weft_coll_args_t *a, int need_hosts) {
  int n = a->nranks, m = weft_coll_hosts(a);
  *l = (weft_layout_t){.nranks = n, .nhosts = m};
  if (a->order != NULL) {  // the communicator's order: each host's ranks already side by side
    l->order = a->order;
    l->pos = a->pos;
  }
  if (m == 1) return ncclSuccess;  // one host: nothing to allocate
  l->host_of = a->host_of;
  for (int r = 0; r < n; r++) {
    if (a->host_of[r] < 0 || a->host_of[r] >= m) {
      WARN("schedule: rank %d is on host %d, outside [0, %d)", r, a->host_of[r], m);
      return ncclInvalidArgument;
    }
  }
  int in_order = a->order != NULL || contiguous(a->host_of, n);
  if (in_order && !need_hosts) return ncclSuccess;
  size_t ints = (size_t)m + 1 + (in_order ? 0 : 2 * (size_t)n);
  l->mem = calloc(ints, sizeof(int));
  if (l->mem == NULL) {
    WARN("schedule: out of memory for the host order of %d ranks", n);
    return ncclSystemError;
  }
  l->start = l->mem;
  for (int r = 0; r < n; r++) l->start[a->host_of[r] + 1]++;
  for (int h = 0; h < m; h++) {
    if (l->start[h + 1] == 0) {
      WARN("schedule: host %d of %d has no ranks", h, m);
      return ncclInvalidArgument;
    }
    l->start[h + 1] += l->start[h];
  }
  if (in_order) return ncclSuccess;
  int *order = l->mem + m + 1, *pos = order + n;
  // Fill each host's positions in rank order; pos[] doubles as the cursor.
  for (int h = 0; h < m; h++) pos[h] = l->start[h];
  for (int r = 0; r < n; r++) order[pos[a->host_of[r]]++] = r;
  for (int p = 0; p < n; p++) pos[order[p]] = p;
  l->order = order;
  l->pos = pos;
  if (!need_hosts) l->start = NULL;
  return ncclSuccess;
}

void weft_layout_free(weft_layout_t *l) {
  if (l == NULL) return;
  free(l->mem);
  l->mem = l->start = NULL;
  l->order = l->pos = NULL;
}

int weft_layout_even(const weft_coll_args_t *a, int *per_host) {
  weft_layout_t l;
  int even = 0;
  if (weft_layout_init(&l, a, 1) == ncclSuccess) {
    even = 1;
    for (int h = 1; h < l.nhosts && even; h++)
      even = weft_layout_host_size(&l, h) == weft_layout_host_size(&l, 0);
    if (even && per_host) *per_host = weft_layout_host_size(&l, 0);
  }
  weft_layout_free(&l);
  return even;
}

typedef struct {
  int host, numa, rank;
} numa_key_t;

static int by_host_numa(const void *x, const void *y) {
  const numa_key_t *a = x, *b = y;
  if (a->host != b->host) return a->host < b->host ? -1 : 1;
  if (a->numa != b->numa) return a->numa < b->numa ? -1 : 1;
  return (a->rank > b->rank) - (a->rank < b->rank);
}

int weft_layout_numa_groups(const int *host_of, int nhosts, const int *numa, int n, int *numa_of) {
  if (n < 1 || numa == NULL || numa_of == NULL) return 0;
  for (int r = 0; r < n; r++)
    if (numa[r] < 0 || (host_of && (host_of[r] < 0 || host_of[r] >= nhosts))) return 0;
  numa_key_t *k = malloc(sizeof(*k) * (size_t)n);
  if (k == NULL) return 0;
  for (int r = 0; r < n; r++) k[r] = (numa_key_t){.host = host_of ? host_of[r] : 0, .numa = numa[r], .rank = r};
  qsort(k, (size_t)n, sizeof(*k), by_host_numa);
  int groups = 1, split = 0;  // split: some host spans two NUMA nodes
  for (int i = 1; i < n; i++) {
    if (k[i].host == k[i - 1].host && k[i].numa == k[i - 1].numa) continue;
    split |= k[i].host == k[i - 1].host;
    groups++;
  }
  if (split) {
    for (int i = 0, g = 0; i < n; i++) {
      if (i > 0 && (k[i].host != k[i - 1].host || k[i].numa != k[i - 1].numa)) g++;
      numa_of[k[i].rank] = g;
    }
  }
  free(k);
  return split ? groups : 0;
}
