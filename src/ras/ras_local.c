/*
 * ras_local.c — what this process can say about the job: the state of its
 * own ranks, and of the other ranks of its host that its communicators
 * map.
 *
 * Each rank keeps its latest operation and its launch counts in the status
 * of its control segment (src/core/segment.h), which every rank of the
 * host maps. So a process answers for its neighbours too: a rank stopped
 * with SIGSTOP cannot answer, but its counts, standing still, are read
 * from beside it, and /proc says it is stopped; a killed rank's last
 * counts outlive it in the same mappings, and /proc says it is gone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "ras_internal.h"

int weft_ras_proc_state(int pid) {
  char path[64], buf[512];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return WEFT_RAS_PROC_DEAD;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *paren = strrchr(buf, ')');  // the command may hold spaces and parentheses
  if (paren == NULL || paren[1] != ' ') return WEFT_RAS_PROC_UNKNOWN;
  switch (paren[2]) {
    case 'T':
    case 't':
      return WEFT_RAS_PROC_STOPPED;
    case 'Z':
    case 'X':
    case 'x':
      return WEFT_RAS_PROC_DEAD;
    default:
      return WEFT_RAS_PROC_RUNNING;
  }
}

// A rank's status is written by its owner while this thread reads it: a
// sequence lock (version odd while written) makes the copy consistent, and
// the copy's plain reads are the lock's reader side, not a race, so
// ThreadSanitizer is told not to watch them (as it cannot watch weft-status
// reading them from another process).
#define RACY_READER __attribute__((no_sanitize("thread")))

// A consistent copy of a rank's status (its version even and unchanged around it).
RACY_READER static void read_status(const weft_status_t *s, weft_ras_rank_t *r) {
  for (int tries = 0; tries < 100; tries++) {
    uint64_t v = atomic_load_explicit(&s->version, memory_order_acquire);
    if (v & 1) continue;
    r->seq = s->seq;
    r->op_state = s->state;
    r->coll = s->coll;
    r->waiting_on = s->waiting_on;
    r->ops_done = s->ops_done;
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&s->version, memory_order_relaxed) == v) break;
  }
  for (int c = 0; c < WEFT_STATUS_NCOLLS; c++)
    r->launched[c] = atomic_load_explicit(&s->launched[c], memory_order_relaxed);
}

// ncclCommFinalize's mark: a flag its owner sets once; a stale read only delays the report.
RACY_READER static int finalized(const struct ncclComm *comm) { return comm->finalized; }

static int add(weft_ras_rank_t **recs, int *n, int *cap) {
  if (*n == *cap) {
    int nc = *cap ? *cap * 2 : 16;
    weft_ras_rank_t *r = realloc(*recs, (size_t)nc * sizeof(*r));
    if (r == NULL) return -1;
    *recs = r;
    *cap = nc;
  }
  memset(&(*recs)[*n], 0, sizeof(**recs));
  return (*n)++;
}

// The records of one communicator: its own rank, then its host's others.
static int comm_records(const weft_ras_comm_t *c, weft_ras_rank_t **recs, int *n, int *cap) {
  struct ncclComm *comm = c->comm;
  const weft_segment_t *seg = comm->seg;
  ncclResult_t host_abort = weft_segment_abort_code(seg);
  const weft_segment_header_t *me = seg != NULL && seg->hdr != NULL ? seg->hdr[c->rank] : NULL;
  for (int p = 0; p < c->nranks; p++) {
    const weft_segment_header_t *h = seg != NULL && seg->hdr != NULL ? seg->hdr[p] : NULL;
    // Another host's rank: its own host answers for it; the first rank of
    // each host names it, so a rank no process can answer for is still named.
    if (p != c->rank && h == NULL && seg->leader != c->rank) continue;
    int i = add(recs, n, cap);
    if (i < 0) return -1;
    weft_ras_rank_t *r = &(*recs)[i];
    r->comm_hash = c->hash;
    r->nranks = c->nranks;
    r->rank = p;
    r->pid = c->members[p].pid;
    r->waiting_on = -1;
    snprintf(r->host, sizeof(r->host), "%s", c->members[p].host);
    if (p != c->rank && h == NULL) {
      r->source = WEFT_RAS_MEMBER;
      continue;
    }
    r->async_error = host_abort;
    if (h != NULL) read_status(&h->status, r);
    if (p == c->rank) {
      r->source = WEFT_RAS_OWN;
      r->proc = WEFT_RAS_PROC_RUNNING;
      int err = atomic_load(&comm->async_error);
      if (err != ncclSuccess && err != ncclInProgress) r->async_error = err;
      r->finalized = (uint8_t)finalized(comm);
      r->aborted = (uint8_t)atomic_load(&comm->aborted);
    } else {
      r->source = WEFT_RAS_SEEN;
      r->closed = (uint8_t)atomic_load(&h->closed);
      // Another pid namespace: /proc here says nothing about it.
      r->proc = me != NULL && h->pidns == me->pidns && h->pidns != 0 ? (uint8_t)weft_ras_proc_state(h->pid)
                                                                     : WEFT_RAS_PROC_UNKNOWN;
    }
  }
  return 0;
}

weft_ras_rank_t *weft_ras_local_records(int *n) {
  weft_ras_rank_t *recs = NULL;
  int cap = 0;
  *n = 0;
  pthread_mutex_lock(&weft_ras_lock);
  for (const weft_ras_comm_t *c = weft_ras_comms; c != NULL; c = c->next)
    if (comm_records(c, &recs, n, &cap) != 0) break;
  pthread_mutex_unlock(&weft_ras_lock);
  return recs;
}

int weft_ras_member(uint64_t hash, int rank, weft_ras_peer_t *out) {
  int found = 0;
  pthread_mutex_lock(&weft_ras_lock);
  for (const weft_ras_comm_t *c = weft_ras_comms; c != NULL && !found; c = c->next)
    if (c->hash == hash && rank >= 0 && rank < c->nranks) {
      *out = c->members[rank];
      found = 1;
    }
  pthread_mutex_unlock(&weft_ras_lock);
  return found;
}
