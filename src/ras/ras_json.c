/*
 * ras_json.c — the JSON answer to STATUS (after SET FORMAT json), in the
 * shape NCCL's RAS gives, so that tools reading NCCL's JSON read weft's:
 * the versions, a timestamp, the communicators with their ranks (status
 * and per-collective counts) and missing ranks, and how the gathering went.
 * weft adds, per rank, "process_state" and "lagging", and counts for the
 * collectives NCCL does not count (AlltoAll, Gather, Scatter).
 */
#include <stdio.h>
#include <time.h>

#include "ras_internal.h"

static void json_rank(const weft_ras_vcomm_t *c, int q, int first, weft_ras_out_t *o) {
  const weft_ras_vrank_t *vr = &c->r[q];
  const weft_ras_rank_t *r = vr->rec;
  weft_ras_out(o, "%s        {\n          \"rank\": %d,\n          \"host\": \"%s\",\n          \"pid\": %d,\n",
               first ? "" : ",\n", q, r->host, r->pid);
  weft_ras_out(o, "          \"cuda_dev\": -1,\n          \"nvml_dev\": -1,\n");
  weft_ras_out(o, "          \"status\": {\n            \"init_state\": 0,\n            \"async_error\": %d,\n",
               r->async_error);
  weft_ras_out(o,
               "            \"finalize_called\": %s,\n            \"destroy_flag\": %s,\n            \"abort_flag\": "
               "%s\n          },\n",
               r->finalized ? "true" : "false", r->closed ? "true" : "false", r->aborted ? "true" : "false");
  weft_ras_out(o, "          \"collective_counts\": {\n");
  // NCCL's five first, in NCCL's order (ncclFunc_t), then weft's others.
  static const int order[WEFT_STATUS_NCOLLS] = {1, 2, 3, 4, 0, 5, 6, 7};
  for (int k = 0; k < WEFT_STATUS_NCOLLS; k++)
    weft_ras_out(o, "            \"%s\": %llu%s\n", weft_ras_coll_name(order[k]),
                 (unsigned long long)r->launched[order[k]], k + 1 < WEFT_STATUS_NCOLLS ? "," : "");
  weft_ras_out(o, "          },\n          \"process_state\": \"%s\",\n          \"lagging\": %s\n        }",
               weft_ras_pstate_name(vr->pstate), vr->lagging ? "true" : "false");
}

static void json_missing(const weft_ras_vcomm_t *c, int q, int first, weft_ras_out_t *o) {
  const weft_ras_vrank_t *vr = &c->r[q];
  const char *host = vr->pid >= 0 ? vr->host : "unknown";
  int pid = vr->pid;
  weft_ras_out(o, "%s        {\n          \"rank\": %d,\n          \"host\": \"%s\",\n          \"pid\": %d,\n",
               first ? "" : ",\n", q, host, pid);
  weft_ras_out(o, "          \"cuda_dev\": -1,\n          \"nvml_dev\": -1,\n");
  weft_ras_out(o,
               "          \"status\": {\n            \"unresponsive\": true,\n            \"considered_dead\": %s\n    "
               "      },\n",
               vr->pstate == WEFT_RAS_P_DEAD ? "true" : "false");
  weft_ras_out(o, "          \"process_state\": \"%s\"\n        }", weft_ras_pstate_name(vr->pstate));
}

// Present: a record from a process that is alive or stopped; missing: the rest.
static int present(const weft_ras_vrank_t *vr) {
  return vr->rec != NULL && (vr->pstate == WEFT_RAS_P_ALIVE || vr->pstate == WEFT_RAS_P_STOPPED);
}

void weft_ras_report_json(const weft_ras_view_t *v, weft_ras_out_t *o) {
  char stamp[64];
  time_t now = time(NULL);
  struct tm tm;
  strftime(stamp, sizeof(stamp), "%F %T", localtime_r(&now, &tm));
  weft_ras_out(o,
               "{\n  \"nccl_version\": \"%d.%d.%d\",\n  \"cuda_runtime_version\": 0,\n  \"cuda_driver_version\": 0,\n",
               NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
  weft_ras_out(o, "  \"timestamp\": \"%s\",\n  \"communicators_count\": %d,\n  \"communicators\": [\n", stamp,
               v->ncomms);
  for (int i = 0; i < v->ncomms; i++) {
    const weft_ras_vcomm_t *c = &v->comms[i];
    int n = 0;
    for (int q = 0; q < c->nranks; q++) n += present(&c->r[q]);
    weft_ras_out(o, "%s    {\n      \"hash\": \"0x%llx\",\n      \"secondary_hash\": \"0x0:0x0\",\n", i ? ",\n" : "",
                 (unsigned long long)c->hash);
    weft_ras_out(
        o, "      \"size\": %d,\n      \"ranks_count\": %d,\n      \"missing_ranks_count\": %d,\n      \"ranks\": [\n",
        c->nranks, n, c->nranks - n);
    int first = 1;
    for (int q = 0; q < c->nranks; q++)
      if (present(&c->r[q])) json_rank(c, q, first, o), first = 0;
    weft_ras_out(o, "\n      ],\n      \"missing_ranks\": [\n");
    first = 1;
    for (int q = 0; q < c->nranks; q++)
      if (!present(&c->r[q])) json_missing(c, q, first, o), first = 0;
    weft_ras_out(o, "\n      ]\n    }");
  }
  weft_ras_out(o, "\n  ],\n  \"ras\": {\n    \"collection_time_sec\": %.3f,\n    \"timeouts_count\": %d\n  }\n}\n",
               v->seconds, v->job->timeouts);
}
