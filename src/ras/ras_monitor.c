/*
 * ras_monitor.c — MONITOR's events: what changed between two gatherings.
 *
 * Lifecycle events, NCCL's names where NCCL has the event:
 *   PEER_NEW          a process joined the job (a communicator with it was made)
 *   PEER_DEAD         a process died (its neighbours see it gone, or its RAS port refuses)
 *   PEER_STOPPED      a process is stopped (SIGSTOP, a debugger): its ranks lag
 *   PEER_UNREACHABLE  a process stopped answering (its host is cut off, or it hangs)
 *   PEER_ALIVE        a stopped or silent process answers again
 *   COMM_NEW          a communicator appeared (its ranks joined)
 *   COMM_FAILED       a rank of a communicator reports an error
 * The first gathering after MONITOR only sets the baseline.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ras_internal.h"

struct weft_ras_seen {
  weft_ras_peer_t *procs;
  int *state, nprocs;
  uint64_t *comms;
  uint8_t *failed;
  int ncomms;
};

static void event(const char *name, const weft_ras_peer_t *p, const char *details, weft_ras_out_t *text,
                  weft_ras_out_t *json) {
  char stamp[64];
  time_t now = time(NULL);
  struct tm tm;
  strftime(stamp, sizeof(stamp), "%F %T", localtime_r(&now, &tm));
  if (p != NULL) {
    weft_ras_out(text, "[%s] %s: process %d on host %s%s%s\n", stamp, name, p->pid, p->host, details[0] ? " " : "",
                 details);
    weft_ras_out(json,
                 "{\n  \"timestamp\": \"%s\",\n  \"group\": \"LIFECYCLE\",\n  \"event\": \"%s\",\n  \"peer\": {\n"
                 "    \"host\": \"%s\",\n    \"pid\": %d,\n    \"cuda_devs\": [],\n    \"nvml_devs\": []\n  },\n"
                 "  \"details\": \"%s\"\n}\n",
                 stamp, name, p->host, p->pid, details);
  } else {
    weft_ras_out(text, "[%s] %s: %s\n", stamp, name, details);
    weft_ras_out(
        json,
        "{\n  \"timestamp\": \"%s\",\n  \"group\": \"LIFECYCLE\",\n  \"event\": \"%s\",\n  \"details\": \"%s\"\n}\n",
        stamp, name, details);
  }
}

static const char *const change[] = {"PEER_ALIVE", "PEER_STOPPED", "PEER_DEAD", "PEER_UNREACHABLE"};

static void peer_events(const weft_ras_seen_t *s, const weft_ras_view_t *v, weft_ras_out_t *t, weft_ras_out_t *j) {
  const weft_ras_job_t *job = v->job;
  for (int i = 0; i < job->nprocs; i++) {
    int k = 0;
    while (k < s->nprocs &&
           !(s->procs[k].pid == job->procs[i].pid && strcmp(s->procs[k].host, job->procs[i].host) == 0))
      k++;
    if (k == s->nprocs)
      event("PEER_NEW", &job->procs[i], "joined the job", t, j);
    else if (s->state[k] != v->pstate[i])
      event(change[v->pstate[i]], &job->procs[i], v->pstate[i] == WEFT_RAS_P_STOPPED ? "is stopped; its ranks lag" : "",
            t, j);
  }
}

static void comm_events(const weft_ras_seen_t *s, const weft_ras_view_t *v, weft_ras_out_t *t, weft_ras_out_t *j) {
  char d[160];
  for (int i = 0; i < v->ncomms; i++) {
    const weft_ras_vcomm_t *c = &v->comms[i];
    int k = 0;
    while (k < s->ncomms && s->comms[k] != c->hash) k++;
    if (k == s->ncomms) {
      snprintf(d, sizeof(d), "communicator %016llx of %d ranks", (unsigned long long)c->hash, c->nranks);
      event("COMM_NEW", NULL, d, t, j);
    }
    int failed = (c->errors & (WEFT_RAS_ERR_ERROR | WEFT_RAS_ERR_DEAD)) != 0;
    if (failed && (k == s->ncomms || !s->failed[k])) {
      snprintf(d, sizeof(d), "communicator %016llx of %d ranks failed: %d in error, %d dead",
               (unsigned long long)c->hash, c->nranks, c->nerror, c->ndead);
      event("COMM_FAILED", NULL, d, t, j);
    }
  }
}

void weft_ras_monitor_forget(weft_ras_seen_t **seen) {
  if (*seen == NULL) return;
  free((*seen)->procs);
  free((*seen)->state);
  free((*seen)->comms);
  free((*seen)->failed);
  free(*seen);
  *seen = NULL;
}

void weft_ras_monitor_events(weft_ras_seen_t **seen, const weft_ras_view_t *v, weft_ras_out_t *text,
                             weft_ras_out_t *json) {
  weft_ras_seen_t *now = calloc(1, sizeof(*now));
  const weft_ras_job_t *job = v->job;
  if (now == NULL) return;
  now->procs = malloc((size_t)job->nprocs * sizeof(*now->procs) + 1);
  now->state = malloc((size_t)job->nprocs * sizeof(int) + 1);
  now->comms = malloc((size_t)v->ncomms * sizeof(uint64_t) + 1);
  now->failed = malloc((size_t)v->ncomms + 1);
  if (!now->procs || !now->state || !now->comms || !now->failed) {
    weft_ras_monitor_forget(&now);
    return;
  }
  memcpy(now->procs, job->procs, (size_t)job->nprocs * sizeof(*now->procs));
  memcpy(now->state, v->pstate, (size_t)job->nprocs * sizeof(int));
  now->nprocs = job->nprocs;
  for (int i = 0; i < v->ncomms; i++) {
    now->comms[i] = v->comms[i].hash;
    now->failed[i] = (v->comms[i].errors & (WEFT_RAS_ERR_ERROR | WEFT_RAS_ERR_DEAD)) != 0;
  }
  now->ncomms = v->ncomms;
  if (*seen != NULL) {
    peer_events(*seen, v, text, json);
    comm_events(*seen, v, text, json);
  }
  weft_ras_monitor_forget(seen);
  *seen = now;
}
