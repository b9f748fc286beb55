/*
 * ras_view.c — the job's records digested for a report: each process
 * alive, stopped, dead or unreachable; each communicator with the best
 * record of each rank, its status, what is wrong with it, and its place
 * in the groups of communicators of one size and state.
 *
 * A process that answered is alive. One that did not is what its
 * neighbours saw in /proc (stopped, dead), else dead when its RAS port
 * refused the connection, else unreachable (its host is cut off, or it is
 * hung). A rank is lagging when it launched fewer collectives of a type
 * than another rank of its communicator, or when its process is stopped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ras_internal.h"

static const char *const coll_names[WEFT_STATUS_NCOLLS] = {"AllReduce",     "Broadcast", "Reduce", "AllGather",
                                                           "ReduceScatter", "AlltoAll",  "Gather", "Scatter"};
const char *weft_ras_coll_name(int c) { return c >= 0 && c < WEFT_STATUS_NCOLLS ? coll_names[c] : "?"; }
const char *weft_ras_pstate_name(int p) {
  return p == WEFT_RAS_P_ALIVE     ? "alive"
         : p == WEFT_RAS_P_STOPPED ? "stopped"
         : p == WEFT_RAS_P_DEAD    ? "dead"
                                   : "unreachable";
}

static void process_states(const weft_ras_job_t *job, weft_ras_view_t *v) {
  for (int i = 0; i < job->nprocs; i++) {
    int s = job->heard[i] == WEFT_RAS_ANSWERED  ? WEFT_RAS_P_ALIVE
            : job->heard[i] == WEFT_RAS_REFUSED ? WEFT_RAS_P_DEAD
                                                : WEFT_RAS_P_UNREACHABLE;
    for (int k = 0; k < job->nrecs && s != WEFT_RAS_P_ALIVE; k++) {
      const weft_ras_rank_t *r = &job->recs[k];
      if (r->source != WEFT_RAS_SEEN || r->pid != job->procs[i].pid || strcmp(r->host, job->procs[i].host) != 0)
        continue;
      if (r->proc == WEFT_RAS_PROC_DEAD && !r->closed)
        s = WEFT_RAS_P_DEAD;
      else if (r->proc == WEFT_RAS_PROC_STOPPED && s != WEFT_RAS_P_DEAD)
        s = WEFT_RAS_P_STOPPED;
    }
    v->pstate[i] = s;
    v->nalive += s == WEFT_RAS_P_ALIVE;
    v->nstopped += s == WEFT_RAS_P_STOPPED;
    v->ndead += s == WEFT_RAS_P_DEAD;
    v->nunreachable += s == WEFT_RAS_P_UNREACHABLE;
    int seen = 0;
    for (int j = 0; j < i && !seen; j++) seen = strcmp(job->procs[j].host, job->procs[i].host) == 0;
    v->nhosts += !seen;
  }
  v->nprocs = job->nprocs;
}

static int by_comm_rank(const void *a, const void *b) {
  const weft_ras_rank_t *x = *(const weft_ras_rank_t *const *)a, *y = *(const weft_ras_rank_t *const *)b;
  if (x->comm_hash != y->comm_hash) return x->comm_hash < y->comm_hash ? -1 : 1;
  if (x->rank != y->rank) return x->rank - y->rank;
  return x->source - y->source;  // the rank's own record first
}

// What one rank's record (or its absence) says, into c's counts and bits.
static void judge_rank(weft_ras_vcomm_t *c, int rank) {
  weft_ras_vrank_t *vr = &c->r[rank];
  const weft_ras_rank_t *r = vr->rec;
  if (r == NULL || vr->pstate == WEFT_RAS_P_UNREACHABLE) {
    c->nmissing++;
    c->errors |= WEFT_RAS_ERR_INCOMPLETE;
  } else if (vr->pstate == WEFT_RAS_P_DEAD) {
    c->ndead++;
    c->errors |= WEFT_RAS_ERR_DEAD;
  }
  if (r == NULL) return;
  c->status |= r->aborted ? WEFT_RAS_ST_ABORT : r->finalized || r->closed ? WEFT_RAS_ST_FINALIZE : WEFT_RAS_ST_RUNNING;
  if (r->async_error != 0) {
    c->nerror++;
    c->errors |= WEFT_RAS_ERR_ERROR;
  }
}

static int build_comm(const weft_ras_view_t *v, const weft_ras_rank_t *const *recs, int n, weft_ras_vcomm_t *c) {
  const weft_ras_job_t *job = v->job;
  c->hash = recs[0]->comm_hash;
  c->nranks = recs[0]->nranks;
  c->r = calloc((size_t)c->nranks, sizeof(*c->r));
  if (c->r == NULL) return -1;
  for (int q = 0; q < c->nranks; q++) c->r[q].pid = -1;
  for (int k = 0; k < n; k++) {  // the rank's own record first (sorted so), else one from beside it
    weft_ras_vrank_t *vr = recs[k]->rank >= 0 && recs[k]->rank < c->nranks ? &c->r[recs[k]->rank] : NULL;
    if (vr == NULL || vr->pid >= 0) continue;
    vr->pid = recs[k]->pid;
    snprintf(vr->host, sizeof(vr->host), "%s", recs[k]->host);
    if (recs[k]->source != WEFT_RAS_MEMBER) vr->rec = recs[k];
  }
  char **hosts = calloc((size_t)c->nranks, sizeof(char *));
  int *per_host = calloc((size_t)c->nranks, sizeof(int));
  if (hosts == NULL || per_host == NULL) {
    free(hosts);
    free(per_host);
    return -1;
  }
  for (int q = 0; q < c->nranks; q++) {
    weft_ras_vrank_t *vr = &c->r[q];
    weft_ras_peer_t who;
    if (vr->pid < 0 && weft_ras_member(c->hash, q, &who)) {
      vr->pid = who.pid;
      snprintf(vr->host, sizeof(vr->host), "%s", who.host);
    }
    const char *host = vr->pid >= 0 ? vr->host : NULL;
    vr->proc = host != NULL ? weft_ras_find_proc(job, vr->pid, host) : -1;
    vr->pstate = vr->proc >= 0                            ? v->pstate[vr->proc]
                 : vr->rec == NULL                        ? WEFT_RAS_P_UNREACHABLE
                 : vr->rec->source == WEFT_RAS_OWN        ? WEFT_RAS_P_ALIVE
                 : vr->rec->proc == WEFT_RAS_PROC_DEAD    ? WEFT_RAS_P_DEAD
                 : vr->rec->proc == WEFT_RAS_PROC_STOPPED ? WEFT_RAS_P_STOPPED
                                                          : WEFT_RAS_P_ALIVE;
    judge_rank(c, q);
    int h = 0;
    while (h < c->nhosts && host != NULL && strcmp(hosts[h], host) != 0) h++;
    if (host != NULL && h == c->nhosts) hosts[c->nhosts++] = (char *)host;
    if (host != NULL) per_host[h]++;
    if (vr->rec != NULL && vr->pstate != WEFT_RAS_P_DEAD)
      for (int t = 0; t < WEFT_STATUS_NCOLLS; t++)
        if (vr->rec->launched[t] > c->most[t]) c->most[t] = vr->rec->launched[t];
  }
  c->rph_min = c->nranks;
  for (int h = 0; h < c->nhosts; h++) {
    if (per_host[h] < c->rph_min) c->rph_min = per_host[h];
    if (per_host[h] > c->rph_max) c->rph_max = per_host[h];
  }
  if (c->nhosts == 0) c->rph_min = 0;
  free(hosts);
  free(per_host);
  for (int q = 0; q < c->nranks; q++) {
    weft_ras_vrank_t *vr = &c->r[q];
    if (vr->rec == NULL || vr->pstate == WEFT_RAS_P_DEAD || vr->pstate == WEFT_RAS_P_UNREACHABLE) continue;
    int behind = vr->pstate == WEFT_RAS_P_STOPPED;
    for (int t = 0; t < WEFT_STATUS_NCOLLS; t++) behind |= vr->rec->launched[t] < c->most[t];
    vr->lagging = behind;
    c->nlagging += behind;
  }
  if (c->nlagging) c->errors |= WEFT_RAS_ERR_LAGGING;
  return 0;
}

// Largest first, then the most hosts, then by state: NCCL's order of groups.
static int by_group(const void *a, const void *b) {
  const weft_ras_vcomm_t *x = a, *y = b;
  if (x->nranks != y->nranks) return y->nranks - x->nranks;
  if (x->nhosts != y->nhosts) return y->nhosts - x->nhosts;
  if (x->status != y->status) return x->status - y->status;
  if (x->errors != y->errors) return x->errors - y->errors;
  return x->hash < y->hash ? -1 : x->hash > y->hash;
}

int weft_ras_view_build(const weft_ras_job_t *job, weft_ras_view_t *v) {
  memset(v, 0, sizeof(*v));
  v->job = job;
  v->seconds = (double)(job->end_ns - job->start_ns) / 1e9;
  v->pstate = calloc((size_t)job->nprocs + 1, sizeof(int));
  const weft_ras_rank_t **recs = calloc((size_t)job->nrecs + 1, sizeof(*recs));
  v->comms = calloc((size_t)job->nrecs + 1, sizeof(*v->comms));
  if (v->pstate == NULL || recs == NULL || v->comms == NULL) goto fail;
  process_states(job, v);
  for (int k = 0; k < job->nrecs; k++) recs[k] = &job->recs[k];
  qsort(recs, (size_t)job->nrecs, sizeof(*recs), by_comm_rank);
  for (int k = 0; k < job->nrecs;) {
    int e = k;
    while (e < job->nrecs && recs[e]->comm_hash == recs[k]->comm_hash) e++;
    if (build_comm(v, recs + k, e - k, &v->comms[v->ncomms++]) != 0) goto fail;
    k = e;
  }
  free(recs);
  qsort(v->comms, (size_t)v->ncomms, sizeof(*v->comms), by_group);
  for (int i = 0; i < v->ncomms; i++) {
    weft_ras_vcomm_t *c = &v->comms[i], *p = i ? &v->comms[i - 1] : NULL;
    int same = p != NULL && p->nranks == c->nranks && p->nhosts == c->nhosts && p->status == c->status &&
               p->errors == c->errors;
    c->group = same ? p->group : v->ngroups++;
    c->in_group = same ? p->in_group + 1 : 0;
  }
  return 0;
fail:
  free(recs);
  weft_ras_view_free(v);
  return -1;
}

void weft_ras_view_free(weft_ras_view_t *v) {
  for (int i = 0; v->comms != NULL && i < v->ncomms; i++) free(v->comms[i].r);
  free(v->comms);
  free(v->pstate);
  memset(v, 0, sizeof(*v));
}
