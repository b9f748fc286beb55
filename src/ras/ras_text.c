/*
 * ras_text.c — the text answer to STATUS and VERBOSE STATUS, in the
 * sections NCCL's report has: the job summary, the communicators grouped
 * by size and state, the operations each launched, then errors (hosts and
 * processes that did not answer, dead processes, ranks in error) and
 * warnings (lagging ranks), each naming the ranks at fault, their process
 * and their host.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ras_internal.h"

#define DETAIL_MAX 10  // ranks named one by one at most, unless VERBOSE

void weft_ras_out(weft_ras_out_t *o, const char *fmt, ...) {
  va_list ap;
  for (int pass = 0; pass < 2 && !o->failed; pass++) {
    va_start(ap, fmt);
    int need = vsnprintf(o->s != NULL ? o->s + o->len : NULL, o->s != NULL ? o->cap - o->len : 0, fmt, ap);
    va_end(ap);
    if (need < 0)
      o->failed = 1;
    else if (o->s != NULL && o->len + (size_t)need < o->cap) {
      o->len += (size_t)need;
      return;
    } else {
      size_t cap = (o->cap ? o->cap * 2 : 4096) + (size_t)need;
      char *s = realloc(o->s, cap);
      if (s == NULL) o->failed = 1;
      o->s = s != NULL ? s : o->s;
      o->cap = s != NULL ? cap : o->cap;
    }
  }
}

static const char *status_name(int st) {
  return st & WEFT_RAS_ST_ABORT ? "ABORT" : st & WEFT_RAS_ST_FINALIZE ? "FINALIZE" : st ? "RUNNING" : "NOCOMM";
}

static void problems(int e, char *buf, size_t len) {
  static const char *const names[] = {"INCOMPLETE", "ERROR", "LAGGING", "DEAD"};
  size_t used = 0;
  buf[0] = '\0';
  for (int b = 0; b < 4; b++)
    if (e & (1 << b)) used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? "," : "", names[b]);
  if (!used) snprintf(buf, len, "OK");
}

// "process 123 on host 10.0.0.1" for rank q of c.
static const char *who(const weft_ras_vcomm_t *c, int q, char *buf, size_t len) {
  const weft_ras_vrank_t *vr = &c->r[q];
  if (vr->pid >= 0)
    snprintf(buf, len, "process %d on host %s", vr->pid, vr->host);
  else
    snprintf(buf, len, "process unknown");
  return buf;
}

static void summary(const weft_ras_view_t *v, weft_ras_out_t *o) {
  const weft_ras_job_t *job = v->job;
  int lo = job->nprocs, hi = 0;
  for (int i = 0; i < job->nprocs; i++) {
    int n = 0;
    for (int j = 0; j < job->nprocs; j++) n += strcmp(job->procs[i].host, job->procs[j].host) == 0;
    lo = n < lo ? n : lo;
    hi = n > hi ? n : hi;
  }
  char per[32];
  snprintf(per, sizeof(per), lo == hi ? "%d" : "%d-%d", lo, hi);
  weft_ras_out(o, "Job summary\n===========\n\n");
  weft_ras_out(o,
               "  Hosts  Processes  Processes   Alive  Stopped   Dead  Unreachable\n"
               "          per host    (total)\n");
  weft_ras_out(o, "%7d  %9s  %9d  %6d  %7d  %5d  %11d\n\n", v->nhosts, per, v->nprocs, v->nalive, v->nstopped, v->ndead,
               v->nunreachable);
}

static void table(const weft_ras_view_t *v, weft_ras_out_t *o) {
  weft_ras_out(o, "Communicators (gathered in %.3f s)\n=============\n\n", v->seconds);
  if (v->ncomms == 0) {
    weft_ras_out(o, "No communicator reported.\n\n");
    return;
  }
  weft_ras_out(o,
               "Group  Comms   Hosts   Ranks   Ranks  Status    Problems\n"
               "    #          / comm  / host  / comm\n");
  for (int i = 0; i < v->ncomms; i++) {
    const weft_ras_vcomm_t *c = &v->comms[i];
    if (c->in_group) continue;
    int n = 0;
    while (i + n < v->ncomms && v->comms[i + n].group == c->group) n++;
    char rph[24], pb[64];
    snprintf(rph, sizeof(rph), c->rph_min == c->rph_max ? "%d" : "%d-%d", c->rph_min, c->rph_max);
    problems(c->errors, pb, sizeof(pb));
    weft_ras_out(o, "%5d  %5d  %6d  %6s  %6d  %-8s  %s\n", c->group, n, c->nhosts, rph, c->nranks,
                 status_name(c->status), pb);
  }
  weft_ras_out(o, "\n");
}

static void counts_line(const uint64_t *n, weft_ras_out_t *o) {
  int any = 0;
  for (int t = 0; t < WEFT_STATUS_NCOLLS; t++)
    if (n[t]) weft_ras_out(o, "%s%s %llu", any++ ? ", " : "", weft_ras_coll_name(t), (unsigned long long)n[t]);
  if (!any) weft_ras_out(o, "none launched");
}

static void operations(const weft_ras_view_t *v, int verbose, weft_ras_out_t *o) {
  if (v->ncomms == 0) return;
  weft_ras_out(o, "Operations launched\n===================\n\n");
  char buf[160];
  for (int i = 0; i < v->ncomms; i++) {
    const weft_ras_vcomm_t *c = &v->comms[i];
    weft_ras_out(o, "#%d-%d (%016llx), %d ranks: ", c->group, c->in_group, (unsigned long long)c->hash, c->nranks);
    counts_line(c->most, o);
    weft_ras_out(o, "\n");
    for (int q = 0; verbose && q < c->nranks; q++) {
      const weft_ras_rank_t *r = c->r[q].rec;
      weft_ras_out(o, "  rank %d, %s, %s: ", q, who(c, q, buf, sizeof(buf)), weft_ras_pstate_name(c->r[q].pstate));
      if (r != NULL)
        counts_line(r->launched, o);
      else
        weft_ras_out(o, "no data");
      if (r != NULL && r->waiting_on >= 0 && r->op_state == WEFT_STATUS_WAITING)
        weft_ras_out(o, "; waiting on rank %d in %s #%llu", r->waiting_on, weft_ras_coll_name(r->coll),
                     (unsigned long long)r->seq);
      weft_ras_out(o, "\n");
    }
  }
  weft_ras_out(o, "\n");
}

// Processes that did not answer: whole hosts first, then single ones.
static void silent_processes(const weft_ras_view_t *v, weft_ras_out_t *o) {
  const weft_ras_job_t *job = v->job;
  if (v->nunreachable == 0) return;
  weft_ras_out(o, "UNREACHABLE\n");
  for (int i = 0; i < job->nprocs; i++) {
    if (v->pstate[i] != WEFT_RAS_P_UNREACHABLE) continue;
    int first = 1, all = 1, n = 0;
    for (int j = 0; j < job->nprocs; j++) {
      if (strcmp(job->procs[j].host, job->procs[i].host) != 0) continue;
      if (j < i && v->pstate[j] == WEFT_RAS_P_UNREACHABLE) first = 0;
      all &= v->pstate[j] == WEFT_RAS_P_UNREACHABLE;
      n++;
    }
    if (!first) continue;
    if (all && n > 0) {
      weft_ras_out(o, "  host %s: none of its %d process%s answered (pid", job->procs[i].host, n, n > 1 ? "es" : "");
      for (int last = -1, k = 0; k < n; k++) {  // its pids, smallest first
        int next = -1;
        for (int j = 0; j < job->nprocs; j++)
          if (strcmp(job->procs[j].host, job->procs[i].host) == 0 && job->procs[j].pid > last &&
              (next < 0 || job->procs[j].pid < next))
            next = job->procs[j].pid;
        weft_ras_out(o, " %d", next);
        last = next;
      }
      weft_ras_out(o, "): the host is cut off or down\n");
    } else {
      for (int j = i; j < job->nprocs; j++)
        if (v->pstate[j] == WEFT_RAS_P_UNREACHABLE && strcmp(job->procs[j].host, job->procs[i].host) == 0)
          weft_ras_out(o, "  process %d on host %s did not answer (hung, or RAS is off there)\n", job->procs[j].pid,
                       job->procs[j].host);
    }
  }
  weft_ras_out(o, "\n");
}

static void dead_processes(const weft_ras_view_t *v, weft_ras_out_t *o) {
  if (v->ndead == 0) return;
  weft_ras_out(o, "DEAD\n");
  for (int i = 0; i < v->job->nprocs; i++)
    if (v->pstate[i] == WEFT_RAS_P_DEAD)
      weft_ras_out(o, "  process %d on host %s has died\n", v->job->procs[i].pid, v->job->procs[i].host);
  weft_ras_out(o, "\n");
}

static void comm_errors(const weft_ras_vcomm_t *c, int verbose, weft_ras_out_t *o) {
  char buf[160];
  int shown = 0;
  if (c->errors & (WEFT_RAS_ERR_INCOMPLETE | WEFT_RAS_ERR_DEAD)) {
    weft_ras_out(o, "#%d-%d (%016llx) %s\n", c->group, c->in_group, (unsigned long long)c->hash,
                 c->errors & WEFT_RAS_ERR_DEAD ? "DEAD" : "INCOMPLETE");
    if (c->nmissing) weft_ras_out(o, "  no data from %d rank%s\n", c->nmissing, c->nmissing > 1 ? "s" : "");
    if (c->ndead) weft_ras_out(o, "  %d rank%s dead\n", c->ndead, c->ndead > 1 ? "s are" : " is");
    for (int q = 0; q < c->nranks; q++) {
      int p = c->r[q].pstate;
      if ((c->r[q].rec != NULL && p != WEFT_RAS_P_DEAD && p != WEFT_RAS_P_UNREACHABLE) ||
          (!verbose && shown++ >= DETAIL_MAX))
        continue;
      weft_ras_out(o, "  rank %d -- %s, %s\n", q, who(c, q, buf, sizeof(buf)), weft_ras_pstate_name(p));
    }
    weft_ras_out(o, "\n");
  }
  if (c->errors & WEFT_RAS_ERR_ERROR) {
    weft_ras_out(o, "#%d-%d (%016llx) ERROR\n  %d rank%s report an error\n", c->group, c->in_group,
                 (unsigned long long)c->hash, c->nerror, c->nerror > 1 ? "s" : "");
    shown = 0;
    for (int q = 0; q < c->nranks; q++) {
      const weft_ras_rank_t *r = c->r[q].rec;
      if (r == NULL || r->async_error == 0 || (!verbose && shown++ >= DETAIL_MAX)) continue;
      weft_ras_out(o, "  rank %d reports %s -- %s\n", q, ncclGetErrorString((ncclResult_t)r->async_error),
                   who(c, q, buf, sizeof(buf)));
    }
    weft_ras_out(o, "\n");
  }
}

static void comm_lagging(const weft_ras_vcomm_t *c, int verbose, weft_ras_out_t *o) {
  char buf[160];
  weft_ras_out(o, "#%d-%d (%016llx) LAGGING\n", c->group, c->in_group, (unsigned long long)c->hash);
  for (int t = 0; t < WEFT_STATUS_NCOLLS; t++) {
    int at_most = 0, behind = 0;
    for (int q = 0; q < c->nranks; q++) {
      const weft_ras_rank_t *r = c->r[q].rec;
      if (r == NULL || !(c->r[q].pstate == WEFT_RAS_P_ALIVE || c->r[q].pstate == WEFT_RAS_P_STOPPED)) continue;
      at_most += r->launched[t] == c->most[t];
      behind += r->launched[t] < c->most[t];
    }
    if (behind == 0) continue;
    weft_ras_out(o, "  %s: %d rank%s launched %llu, %d fewer\n", weft_ras_coll_name(t), at_most, at_most > 1 ? "s" : "",
                 (unsigned long long)c->most[t], behind);
  }
  int shown = 0;
  for (int q = 0; q < c->nranks; q++) {
    const weft_ras_rank_t *r = c->r[q].rec;
    if (!c->r[q].lagging || (!verbose && shown++ >= DETAIL_MAX)) continue;
    weft_ras_out(o, "  rank %d lags: ", q);
    counts_line(r->launched, o);
    weft_ras_out(o, " -- %s%s\n", who(c, q, buf, sizeof(buf)),
                 c->r[q].pstate == WEFT_RAS_P_STOPPED ? ", stopped (its counts stand still)" : "");
  }
  weft_ras_out(o, "\n");
}

void weft_ras_report_text(const weft_ras_view_t *v, int verbose, weft_ras_out_t *o) {
  weft_ras_out(o, "weft (NCCL %d.%d.%d API), collectives on host memory; RAS protocol %d\n\n", NCCL_MAJOR, NCCL_MINOR,
               NCCL_PATCH, WEFT_RAS_PROTOCOL);
  summary(v, o);
  table(v, o);
  operations(v, verbose, o);
  weft_ras_out(o, "Errors\n======\n\n");
  silent_processes(v, o);
  dead_processes(v, o);
  for (int i = 0; i < v->ncomms; i++) comm_errors(&v->comms[i], verbose, o);
  weft_ras_out(o, "Warnings\n========\n\n");
  if (v->job->timeouts)
    weft_ras_out(o, "TIMEOUT\n  %d process%s did not answer in time\n\n", v->job->timeouts,
                 v->job->timeouts > 1 ? "es" : "");
  for (int i = 0; i < v->ncomms; i++)
    if (v->comms[i].errors & WEFT_RAS_ERR_LAGGING) comm_lagging(&v->comms[i], verbose, o);
}
