/*
 * profiler_example.c — an example NCCL profiler plugin (ncclProfiler_v5 and
 * _v4) that writes a Chrome trace: one JSON file per communicator and rank,
 * which chrome://tracing and Perfetto (ui.perfetto.dev) open.
 *
 * Files go to the directory WEFT_PROFILER_EXAMPLE_DIR (default "."), named
 * trace-<commHash as 16 hex digits>-r<rank>.json; a directory that cannot
 * be written fails init, so the caller runs without a profiler and says so.
 * The file is {"traceEvents":[...]}: a process_name metadata event, then
 * one complete event (ph "X", ts and dur in microseconds of
 * CLOCK_MONOTONIC, so files of one host line up) per event stopped, pid =
 * rank, cat = the event type (Group, Coll, P2p, CollApi, P2pApi), name =
 * the call ("AllReduce", "Send", ...), "Group", "ProxySend"/"ProxyRecv"
 * (a channel's share of an operation) or "Step", args = the descriptor's
 * fields. Events asked for: NCCL_PROFILE_EVENT_MASK if set (0x61f adds
 * ProxyOp and ProxyStep), else Group, Coll, P2p and the API events. Built
 * from profiler_abi.h alone.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "profiler_abi.h"

typedef struct {
  FILE *fp;
  pthread_mutex_t lock;
  int rank;
  int first;  // no event written yet (no comma before the next)
  int v5;
} ctx_t;

typedef struct {
  ctx_t *ctx;
  const char *cat, *name;
  int tid;  // 0 groups, 1 collectives and p2p, 2 API calls, 100 + channel proxy ops and their steps
  double start_us;
  char args[384];
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

static ncclResult_t setup(void **context, uint64_t hash, int *mask, const char *commName, int nranks, int rank,
                          ncclDebugLogger_t log, int v5) {
  const char *dir = getenv("WEFT_PROFILER_EXAMPLE_DIR");
  const char *env_mask = getenv("NCCL_PROFILE_EVENT_MASK");
  char path[4096];
  snprintf(path, sizeof(path), "%s/trace-%016" PRIx64 "-r%d.json", dir != NULL && dir[0] ? dir : ".", hash, rank);
  ctx_t *c = calloc(1, sizeof(*c));
  if (c == NULL) return ncclSystemError;
  if ((c->fp = fopen(path, "w")) == NULL) {
    log(NCCL_LOG_WARN, NCCL_PROFILE, __FILE__, __LINE__, "example profiler: cannot write %s: %s", path,
        strerror(errno));
    free(c);
    return ncclSystemError;
  }
  pthread_mutex_init(&c->lock, NULL);
  c->rank = rank;
  c->v5 = v5;
  char name[128];
  json_text(name, sizeof(name), commName ? commName : "");
  fprintf(c->fp,
          "{\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
          "\"args\":{\"name\":\"rank %d of %d%s%s\"}}",
          rank, rank, nranks, name[0] ? " " : "", name);
  *mask = env_mask != NULL && env_mask[0] ? (int)strtol(env_mask, NULL, 0)
                                          : ncclProfileGroup | ncclProfileColl | ncclProfileP2p |
                                                ncclProfileCollApi | ncclProfileP2pApi;
  log(NCCL_LOG_INFO, NCCL_PROFILE, __FILE__, __LINE__, "example profiler: rank %d writes %s (event mask 0x%x)", rank,
      path, *mask);
  *context = c;
  return ncclSuccess;
}

static ncclResult_t init_v5(void **context, uint64_t commId, int *eActivationMask, const char *commName, int nNodes,
                            int nranks, int rank, ncclDebugLogger_t logfn) {
  (void)nNodes;
  return setup(context, commId, eActivationMask, commName, nranks, rank, logfn, 1);
}

static ncclResult_t init_v4(void **context, int *eActivationMask, const char *commName, uint64_t commHash,
                            int nNodes, int nranks, int rank, ncclDebugLogger_t logfn) {
  (void)nNodes;
  return setup(context, commHash, eActivationMask, commName, nranks, rank, logfn, 0);
}

static event_t *event_new(ctx_t *c, const char *cat, const char *name, int tid) {
  event_t *e = calloc(1, sizeof(*e));
  if (e == NULL) return NULL;
  e->ctx = c;
  e->cat = cat;
  e->name = name ? name : "?";
  e->tid = tid;
  e->start_us = now_us();
  return e;
}

static ncclResult_t start_v5(void *context, void **eHandle, ncclProfilerEventDescr_v5_t *d) {
  ctx_t *c = context;
  event_t *e = NULL;
  *eHandle = NULL;
  switch (d->type) {
    case ncclProfileGroup: e = event_new(c, "Group", "Group", 0); break;
    case ncclProfileColl:
      if ((e = event_new(c, "Coll", d->coll.func, 1)) != NULL)
        snprintf(e->args, sizeof(e->args),
                 "\"seq\":%" PRIu64 ",\"count\":%zu,\"datatype\":\"%s\",\"root\":%d,\"algo\":\"%s\","
                 "\"proto\":\"%s\",\"nChannels\":%u",
                 d->coll.seqNumber, d->coll.count, d->coll.datatype ? d->coll.datatype : "?", d->coll.root,
                 d->coll.algo ? d->coll.algo : "?", d->coll.proto ? d->coll.proto : "?", (unsigned)d->coll.nChannels);
      break;
    case ncclProfileP2p:
      if ((e = event_new(c, "P2p", d->p2p.func, 1)) != NULL)
        snprintf(e->args, sizeof(e->args), "\"peer\":%d,\"count\":%zu,\"datatype\":\"%s\",\"nChannels\":%u",
                 d->p2p.peer, d->p2p.count, d->p2p.datatype ? d->p2p.datatype : "?", (unsigned)d->p2p.nChannels);
      break;
    case ncclProfileCollApi:
      if ((e = event_new(c, "CollApi", d->collApi.func, 2)) != NULL)
        snprintf(e->args, sizeof(e->args), "\"count\":%zu,\"datatype\":\"%s\",\"root\":%d", d->collApi.count,
                 d->collApi.datatype ? d->collApi.datatype : "?", d->collApi.root);
      break;
    case ncclProfileP2pApi:
      if ((e = event_new(c, "P2pApi", d->p2pApi.func, 2)) != NULL)
        snprintf(e->args, sizeof(e->args), "\"count\":%zu,\"datatype\":\"%s\"", d->p2pApi.count,
                 d->p2pApi.datatype ? d->p2pApi.datatype : "?");
      break;
    case ncclProfileProxyOp:
      if ((e = event_new(c, "ProxyOp", d->proxyOp.isSend ? "ProxySend" : "ProxyRecv", 100 + d->proxyOp.channelId)))
        snprintf(e->args, sizeof(e->args), "\"channel\":%u,\"peer\":%d,\"nSteps\":%d,\"chunkSize\":%d",
                 (unsigned)d->proxyOp.channelId, d->proxyOp.peer, d->proxyOp.nSteps, d->proxyOp.chunkSize);
      break;
    case ncclProfileProxyStep: {
      const event_t *parent = d->parentObj;  // our ProxyOp event, if it was recorded
      if ((e = event_new(c, "ProxyStep", "Step", parent != NULL ? parent->tid : 99)) != NULL)
        snprintf(e->args, sizeof(e->args), "\"step\":%d", d->proxyStep.step);
      break;
    }
    default: return ncclSuccess;  // not recorded
  }
  *eHandle = e;
  return ncclSuccess;
}

// v4 descriptors: the same fields, another layout.
static ncclResult_t start_v4(void *context, void **eHandle, ncclProfilerEventDescr_v4_t *d) {
  ncclProfilerEventDescr_v5_t n;
  memset(&n, 0, sizeof(n));
  n.type = d->type;
  n.rank = d->rank;
  if (d->type == ncclProfileColl) {
    n.coll.seqNumber = d->coll.seqNumber;
    n.coll.func = d->coll.func;
    n.coll.count = d->coll.count;
    n.coll.root = d->coll.root;
    n.coll.datatype = d->coll.datatype;
    n.coll.algo = d->coll.algo;
    n.coll.proto = d->coll.proto;
    n.coll.nChannels = d->coll.nChannels;
  } else if (d->type == ncclProfileProxyOp) {
    n.proxyOp.channelId = d->proxyOp.channelId;
    n.proxyOp.peer = d->proxyOp.peer;
    n.proxyOp.nSteps = d->proxyOp.nSteps;
    n.proxyOp.chunkSize = d->proxyOp.chunkSize;
    n.proxyOp.isSend = d->proxyOp.isSend;
  } else if (d->type == ncclProfileProxyStep) {
    n.parentObj = d->parentObj;
    n.proxyStep.step = d->proxyStep.step;
  } else if (d->type == ncclProfileP2p) {
    n.p2p.func = d->p2p.func;
    n.p2p.count = d->p2p.count;
    n.p2p.peer = d->p2p.peer;
    n.p2p.datatype = d->p2p.datatype;
    n.p2p.nChannels = d->p2p.nChannels;
  }
  return start_v5(context, eHandle, &n);
}

static ncclResult_t stop_event(void *eHandle) {
  event_t *e = eHandle;
  if (e == NULL) return ncclSuccess;
  ctx_t *c = e->ctx;
  double end = now_us();
  pthread_mutex_lock(&c->lock);
  fprintf(c->fp, ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d,"
          "\"args\":{%s}}",
          e->name, e->cat, e->start_us, end - e->start_us, c->rank, e->tid, e->args);
  pthread_mutex_unlock(&c->lock);
  free(e);
  return ncclSuccess;
}

static ncclResult_t record_v5(void *eHandle, ncclProfilerEventState_v5_t s, ncclProfilerEventStateArgs_v5_t *a) {
  (void)eHandle, (void)s, (void)a;
  return ncclSuccess;
}

static ncclResult_t record_v4(void *eHandle, ncclProfilerEventState_v4_t s, ncclProfilerEventStateArgs_v4_t *a) {
  (void)eHandle, (void)s, (void)a;
  return ncclSuccess;
}

static ncclResult_t finish(void *context) {
  ctx_t *c = context;
  fputs("\n]}\n", c->fp);
  fclose(c->fp);
  pthread_mutex_destroy(&c->lock);
  free(c);
  return ncclSuccess;
}

// WEFT_EXAMPLE_V4_ONLY builds a v4-only variant (weft's tests of its v4 loader).
#ifndef WEFT_EXAMPLE_V4_ONLY
__attribute__((visibility("default"))) const ncclProfiler_v5_t ncclProfiler_v5 = {
    .name = "weft-example-trace", .init = init_v5, .startEvent = start_v5, .stopEvent = stop_event,
    .recordEventState = record_v5, .finalize = finish};
#else
static const ncclProfiler_v5_t unused_v5 __attribute__((unused)) = {.init = init_v5, .recordEventState = record_v5};
#endif

__attribute__((visibility("default"))) const ncclProfiler_v4_t ncclProfiler_v4 = {
    .name = "weft-example-trace", .init = init_v4, .startEvent = start_v4, .stopEvent = stop_event,
    .recordEventState = record_v4, .finalize = finish};
