/*
 * profiler_example.c — an example NCCL profiler plugin that writes a
 * Chrome trace: one JSON file per communicator and rank, which
 * chrome://tracing and Perfetto (ui.perfetto.dev) open. It exports
 * ncclProfiler_v6 (the newest: a loader takes it) and, from
 * profiler_example_old.c, _v5 ... _v1; built with -DWEFT_EXAMPLE_ONLY_V=N
 * it exports only ncclProfiler_vN (weft's tests of each version's loader).
 *
 * Files go to the directory WEFT_PROFILER_EXAMPLE_DIR (default "."), named
 * trace-<commHash as 16 hex digits>-r<rank>.json (versions 1 to 3, whose
 * init is not told the communicator: trace-p<pid>-c<n>.json); a directory
 * that cannot be written fails init, so the caller runs without a profiler
 * and says so. The file is {"traceEvents":[...]}: one complete event (ph
 * "X", ts and dur in microseconds of CLOCK_MONOTONIC, so files of one host
 * line up) per event stopped, pid = the event's rank, cat = its type
 * (GroupApi, CollApi, P2pApi, Group, Coll, P2p, ProxyOp, ProxyStep,
 * KernelCh), name = the call ("AllReduce", "Send", ...), "Group API",
 * "Group", "ProxySend"/"ProxyRecv" (a channel's share of an operation),
 * "Step" or "KernelCh", args = the descriptor's fields (a KernelCh's
 * startTimer, and the stopTimer its KernelChStop state gave); then a
 * process_name metadata event
 * naming the rank and the ABI version ("abi"). Events asked for:
 * NCCL_PROFILE_EVENT_MASK if set (0x61f adds ProxyOp and ProxyStep, 0x42
 * is Coll and KernelCh), else
 * GroupApi, CollApi, P2pApi, Group, Coll and P2p. Built from
 * profiler_abi.h alone.
 */
#include "profiler_example.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  FILE *fp;
  pthread_mutex_t lock;
  int version;
  int rank, nranks;  // -1 until an event tells (versions 1 to 3)
  char name[128];
} ctx_t;

typedef struct {
  ctx_t *ctx;
  const char *cat, *name;
  int rank;
  int tid;  // 0 groups, 1 collectives and p2p, 2 API calls, 3 group API, 100 + channel: proxy ops and steps,
            // 200 + channel: kernel channels
  int start_api_over, end_api_begun;  // GroupApi states recorded
  uint64_t stop_timer;                // KernelChStop's timer
  double start_us;
  char args[640];
} event_t;

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

// A JSON string's characters ('"' and '\\' escaped, control characters dropped).
static void json_text(char *out, size_t cap, const char *s) {
  size_t at = 0;
  for (; s != NULL && *s != '\0' && at + 3 < cap; s++) {
    if (*s == '"' || *s == '\\') out[at++] = '\\';
    if ((unsigned char)*s >= 0x20) out[at++] = *s;
  }
  out[at] = '\0';
}

static const char *text(const char *s) { return s != NULL ? s : "?"; }

ncclResult_t example_setup(void **context, int version, uint64_t hash, int has_hash, int rank, int nranks,
                           const char *comm_name, int *mask, ncclDebugLogger_t log) {
  static _Atomic int comms;  // versions 1 to 3 name files by process and count
  const char *dir = getenv("WEFT_PROFILER_EXAMPLE_DIR");
  const char *env_mask = getenv("NCCL_PROFILE_EVENT_MASK");
  char path[4096];
  dir = dir != NULL && dir[0] ? dir : ".";
  if (has_hash) snprintf(path, sizeof(path), "%s/trace-%016" PRIx64 "-r%d.json", dir, hash, rank);
  else snprintf(path, sizeof(path), "%s/trace-p%d-c%d.json", dir, (int)getpid(), comms++);
  ctx_t *c = calloc(1, sizeof(*c));
  if (c == NULL) return ncclSystemError;
  if ((c->fp = fopen(path, "w")) == NULL) {
    if (log != NULL)
      log(NCCL_LOG_WARN, NCCL_PROFILE, __FILE__, __LINE__, "example profiler: cannot write %s: %s", path,
          strerror(errno));
    free(c);
    return ncclSystemError;
  }
  pthread_mutex_init(&c->lock, NULL);
  c->version = version;
  c->rank = rank;
  c->nranks = nranks;
  json_text(c->name, sizeof(c->name), comm_name ? comm_name : "");
  fputs("{\"traceEvents\":[", c->fp);
  *mask = env_mask != NULL && env_mask[0] ? (int)strtol(env_mask, NULL, 0)
                                          : ncclProfileGroupApi | ncclProfileCollApi | ncclProfileP2pApi |
                                                ncclProfileGroup | ncclProfileColl | ncclProfileP2p;
  if (log != NULL)
    log(NCCL_LOG_INFO, NCCL_PROFILE, __FILE__, __LINE__, "example profiler (v%d): rank %d writes %s (event mask 0x%x)",
        version, rank, path, *mask);
  *context = c;
  return ncclSuccess;
}

static event_t *event_new(ctx_t *c, int rank, const char *cat, const char *name, int tid) {
  event_t *e = calloc(1, sizeof(*e));
  if (e == NULL) return NULL;
  e->ctx = c;
  e->rank = rank;
  e->cat = cat;
  e->name = name ? name : "?";
  e->tid = tid;
  e->start_us = now_us();
  return e;
}

// The event's own arguments; the caller appends the extra ones.
static event_t *describe(ctx_t *c, const ncclProfilerEventDescr_v6_t *d) {
  event_t *e = NULL;
  int parent = d->parentObj != NULL;  // compared only: a parent may have been stopped already
  switch (d->type) {
    case ncclProfileGroupApi:
      if ((e = event_new(c, d->rank, "GroupApi", "Group API", 3)) != NULL)
        snprintf(e->args, sizeof(e->args), "\"groupDepth\":%d,\"graphCaptured\":%d", d->groupApi.groupDepth,
                 (int)d->groupApi.graphCaptured);
      return e;
    case ncclProfileCollApi:
      if ((e = event_new(c, d->rank, "CollApi", d->collApi.func, 2)) != NULL)
        snprintf(e->args, sizeof(e->args), "\"count\":%zu,\"datatype\":\"%s\",\"root\":%d,\"parent\":%d",
                 d->collApi.count, text(d->collApi.datatype), d->collApi.root, parent);
      return e;
    case ncclProfileP2pApi:
      if ((e = event_new(c, d->rank, "P2pApi", d->p2pApi.func, 2)) != NULL)
        snprintf(e->args, sizeof(e->args), "\"count\":%zu,\"datatype\":\"%s\",\"parent\":%d", d->p2pApi.count,
                 text(d->p2pApi.datatype), parent);
      return e;
    case ncclProfileGroup: return event_new(c, d->rank, "Group", "Group", 0);
    case ncclProfileColl:
      if ((e = event_new(c, d->rank, "Coll", d->coll.func, 1)) != NULL)
        snprintf(e->args, sizeof(e->args),
                 "\"seq\":%" PRIu64 ",\"count\":%zu,\"datatype\":\"%s\",\"root\":%d,\"algo\":\"%s\","
                 "\"proto\":\"%s\",\"nChannels\":%u,\"parent\":%d",
                 d->coll.seqNumber, d->coll.count, text(d->coll.datatype), d->coll.root, text(d->coll.algo),
                 text(d->coll.proto), (unsigned)d->coll.nChannels, parent);
      return e;
    case ncclProfileP2p:
      if ((e = event_new(c, d->rank, "P2p", d->p2p.func, 1)) != NULL)
        snprintf(e->args, sizeof(e->args),
                 "\"peer\":%d,\"count\":%zu,\"datatype\":\"%s\",\"nChannels\":%u,\"parent\":%d", d->p2p.peer,
                 d->p2p.count, text(d->p2p.datatype), (unsigned)d->p2p.nChannels, parent);
      return e;
    case ncclProfileProxyOp:
      if ((e = event_new(c, d->rank, "ProxyOp", d->proxyOp.isSend ? "ProxySend" : "ProxyRecv",
                         100 + d->proxyOp.channelId)))
        snprintf(e->args, sizeof(e->args), "\"channel\":%u,\"peer\":%d,\"nSteps\":%d,\"chunkSize\":%d",
                 (unsigned)d->proxyOp.channelId, d->proxyOp.peer, d->proxyOp.nSteps, d->proxyOp.chunkSize);
      return e;
    case ncclProfileProxyStep: {
      const event_t *op = d->parentObj;  // our ProxyOp event: still open while its steps run
      if ((e = event_new(c, d->rank, "ProxyStep", "Step", op != NULL ? op->tid : 99)) != NULL)
        snprintf(e->args, sizeof(e->args), "\"step\":%d", d->proxyStep.step);
      return e;
    }
    case ncclProfileKernelCh:
      if ((e = event_new(c, d->rank, "KernelCh", "KernelCh", 200 + d->kernelCh.channelId)) != NULL)
        snprintf(e->args, sizeof(e->args), "\"channel\":%u,\"startTimer\":%" PRIu64 ",\"parent\":%d",
                 (unsigned)d->kernelCh.channelId, d->kernelCh.pTimer, parent);
      return e;
    case ncclProfileCeColl:  // a library with copy-engine collectives (NCCL) reports these
      if ((e = event_new(c, d->rank, "CeColl", d->ceColl.func, 4)) != NULL)
        snprintf(e->args, sizeof(e->args), "\"count\":%zu,\"datatype\":\"%s\",\"syncStrategy\":\"%s\",\"batches\":%u",
                 d->ceColl.count, text(d->ceColl.datatype), text(d->ceColl.syncStrategy), d->ceColl.numBatches);
      return e;
    case ncclProfileCeSync: return event_new(c, d->rank, "CeSync", d->ceCollSync.isComplete ? "Complete" : "Ready", 4);
    case ncclProfileCeBatch:
      if ((e = event_new(c, d->rank, "CeBatch", "Batch", 4)) != NULL)
        snprintf(e->args, sizeof(e->args), "\"numOps\":%d,\"totalBytes\":%zu", d->ceCollBatch.numOps,
                 d->ceCollBatch.totalBytes);
      return e;
    default: return NULL;  // not recorded
  }
}

ncclResult_t example_start(void *context, void **handle, const ncclProfilerEventDescr_v6_t *d, const char *extra) {
  *handle = NULL;
  event_t *e = describe(context, d);
  if (e == NULL) return ncclSuccess;
  size_t at = strlen(e->args);
  snprintf(e->args + at, sizeof(e->args) - at, "%s", at == 0 && extra[0] == ',' ? extra + 1 : extra);
  *handle = e;
  return ncclSuccess;
}

ncclResult_t example_stop(void *handle) {
  event_t *e = handle;
  if (e == NULL) return ncclSuccess;
  ctx_t *c = e->ctx;
  double end = now_us();
  char states[64] = "";
  if (e->tid == 3)
    snprintf(states, sizeof(states), ",\"startApiOver\":%d,\"endApiBegun\":%d", e->start_api_over, e->end_api_begun);
  if (e->tid >= 200) snprintf(states, sizeof(states), ",\"stopTimer\":%" PRIu64, e->stop_timer);
  pthread_mutex_lock(&c->lock);
  if (c->rank < 0) c->rank = e->rank;
  fprintf(c->fp, "\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d,"
          "\"args\":{%s%s}},",
          e->name, e->cat, e->start_us, end - e->start_us, e->rank, e->tid, e->args, states);
  pthread_mutex_unlock(&c->lock);
  free(e);
  return ncclSuccess;
}

ncclResult_t example_record(void *handle, ncclProfilerEventState_t state, uint64_t timer) {
  event_t *e = handle;
  if (e != NULL && e->tid >= 200 && state == ncclProfilerKernelChStop) e->stop_timer = timer;
  if (e == NULL || e->tid != 3) return ncclSuccess;  // besides, only the GroupApi states are kept
  if (state == ncclProfilerGroupStartApiStop) e->start_api_over = 1;
  if (state == ncclProfilerGroupEndApiStart) e->end_api_begun = 1;
  return ncclSuccess;
}

ncclResult_t example_finish(void *context) {
  ctx_t *c = context;
  char of[32] = "";  // versions 1 to 3 are not told the communicator's size
  if (c->nranks > 0) snprintf(of, sizeof(of), " of %d", c->nranks);
  fprintf(c->fp,
          "\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
          "\"args\":{\"name\":\"rank %d%s%s%s\",\"abi\":%d}}\n]}\n",
          c->rank, c->rank, of, c->name[0] ? " " : "", c->name, c->version);
  fclose(c->fp);
  pthread_mutex_destroy(&c->lock);
  free(c);
  return ncclSuccess;
}

/* ---------- version 6 ---------- */

static ncclResult_t init_v6(void **context, uint64_t commId, int *eActivationMask, const char *commName, int nNodes,
                            int nranks, int rank, ncclDebugLogger_t logfn) {
  (void)nNodes;
  return example_setup(context, 6, commId, 1, rank, nranks, commName, eActivationMask, logfn);
}

static ncclResult_t start_v6(void *context, void **eHandle, ncclProfilerEventDescr_v6_t *d) {
  return example_start(context, eHandle, d, "");
}

static ncclResult_t record_v6(void *eHandle, ncclProfilerEventState_v6_t s, ncclProfilerEventStateArgs_v6_t *a) {
  return example_record(eHandle, s, a != NULL ? a->kernelCh.pTimer : 0);
}

#if !defined(WEFT_EXAMPLE_ONLY_V) || WEFT_EXAMPLE_ONLY_V == 6
__attribute__((visibility("default"))) const ncclProfiler_v6_t ncclProfiler_v6 = {
    .name = "weft-example-trace", .init = init_v6, .startEvent = start_v6, .stopEvent = example_stop,
    .recordEventState = record_v6, .finalize = example_finish};
#else
static const ncclProfiler_v6_t unused_v6 __attribute__((unused)) = {
    .init = init_v6, .startEvent = start_v6, .recordEventState = record_v6};
#endif
