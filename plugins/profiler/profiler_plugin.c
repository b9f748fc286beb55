/*
 * profiler_plugin.c — loads NCCL profiler plugins and reports weft's
 * groups, collectives, point-to-point calls and their steps to them (see
 * profiler_plugin.h).
 *
 * Descriptor fields: func is NCCL's name of the call ("AllReduce", "Send",
 * ...), datatype NCCL's name of the type ("ncclFloat32"), algo weft's
 * algorithm name ("ring", "tree", "recursive", ...), proto "Simple" (weft's
 * one protocol), nChannels the schedule's lanes (weft's nearest thing),
 * nWarps 0, seqNumber the communicator's collective sequence number. A v4
 * plugin gets the same events in its descriptor layout (no API events).
 */
#include "profiler_plugin.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checks.h"
#include "env.h"
#include "plugin_dl.h"
#include "profiler_abi.h"

struct weft_profiler {
  const ncclProfiler_v5_t *v5;  // exactly one of v5, v4
  const ncclProfiler_v4_t *v4;
  void *ctx;
  int mask;  // the plugin's eActivationMask (it may change it later)
  int rank;  // the communicator's rank, for event descriptors
};

// A launched group's event on one communicator: stopped when its last operation stops.
typedef struct weft_prof_group {
  struct weft_profiler *prof;
  void *handle;
  _Atomic int refs;
} prof_group_t;

static const char *const type_names[ncclNumTypes] = {
    "ncclInt8",    "ncclUint8",   "ncclInt32",    "ncclUint32",     "ncclInt64",     "ncclUint64",
    "ncclFloat16", "ncclFloat32", "ncclFloat64",  "ncclBfloat16",   "ncclFloat8e4m3", "ncclFloat8e5m2"};

static const char *type_name(ncclDataType_t dt) {
  return (int)dt >= 0 && (int)dt < ncclNumTypes ? type_names[dt] : "?";
}

/* ---------- calling the plugin ---------- */

// Starts an event described in v5 terms; a v4 plugin gets the v4 layout.
static void *start(struct weft_profiler *p, ncclProfilerEventDescr_v5_t *d) {
  void *h = NULL;
  if (p->v5 != NULL) {
    if (p->v5->startEvent(p->ctx, &h, d) != ncclSuccess) return NULL;
    return h;
  }
  ncclProfilerEventDescr_v4_t o;
  memset(&o, 0, sizeof(o));
  o.type = (uint8_t)d->type;
  o.parentObj = d->parentObj;
  o.rank = d->rank;
  if (d->type == ncclProfileColl) {
    o.coll.seqNumber = d->coll.seqNumber;
    o.coll.func = d->coll.func;
    o.coll.sendBuff = d->coll.sendBuff;
    o.coll.recvBuff = d->coll.recvBuff;
    o.coll.count = d->coll.count;
    o.coll.root = d->coll.root;
    o.coll.datatype = d->coll.datatype;
    o.coll.nChannels = d->coll.nChannels;
    o.coll.algo = d->coll.algo;
    o.coll.proto = d->coll.proto;
  } else if (d->type == ncclProfileP2p) {
    o.p2p.func = d->p2p.func;
    o.p2p.buff = d->p2p.buff;
    o.p2p.datatype = d->p2p.datatype;
    o.p2p.count = d->p2p.count;
    o.p2p.peer = d->p2p.peer;
    o.p2p.nChannels = d->p2p.nChannels;
  } else if (d->type == ncclProfileProxyOp) {
    o.proxyOp.pid = d->proxyOp.pid;
    o.proxyOp.channelId = d->proxyOp.channelId;
    o.proxyOp.peer = d->proxyOp.peer;
    o.proxyOp.nSteps = d->proxyOp.nSteps;
    o.proxyOp.chunkSize = d->proxyOp.chunkSize;
    o.proxyOp.isSend = d->proxyOp.isSend;
  } else if (d->type == ncclProfileProxyStep) {
    o.proxyStep.step = d->proxyStep.step;
  } else if (d->type != ncclProfileGroup) {
    return NULL;  // API events are v5's
  }
  if (p->v4->startEvent(p->ctx, &h, &o) != ncclSuccess) return NULL;
  return h;
}

static void stop(struct weft_profiler *p, void *h) {
  if (h == NULL) return;
  if (p->v5 != NULL) p->v5->stopEvent(h);
  else p->v4->stopEvent(h);
}

static void group_put(prof_group_t *g) {
  if (g == NULL || atomic_fetch_sub(&g->refs, 1) != 1) return;
  stop(g->prof, g->handle);
  free(g);
}

/* ---------- groups and operations ---------- */

// The groups of the launch in progress on this thread, one per communicator.
#define LAUNCH_GROUPS 16
static _Thread_local prof_group_t *launch_groups[LAUNCH_GROUPS];
static _Thread_local int nlaunch_groups;

static prof_group_t *group_for(struct weft_profiler *p, int rank) {
  for (int i = 0; i < nlaunch_groups; i++)
    if (launch_groups[i]->prof == p) return launch_groups[i];
  if (nlaunch_groups == LAUNCH_GROUPS) return NULL;
  prof_group_t *g = calloc(1, sizeof(*g));
  if (g == NULL) return NULL;
  g->prof = p;
  atomic_init(&g->refs, 1);  // the launch's own reference, dropped by launch_end
  ncclProfilerEventDescr_v5_t d;
  memset(&d, 0, sizeof(d));
  d.type = ncclProfileGroup;
  d.rank = rank;
  g->handle = start(p, &d);
  launch_groups[nlaunch_groups++] = g;
  return g;
}

// One ProxyOp per lane (weft's lanes are its channels), parent of the
// lane's ProxyStep events, one per step from its first try to its end.
static void lanes_start(weft_prof_op_t *po, const weft_prof_launch_t *l, struct weft_profiler *p) {
  uint32_t n = l->sched->nlanes;
  if (n == 0 || (po->lanes = calloc(2 * (size_t)n, sizeof(void *))) == NULL) return;
  for (uint32_t i = 0; i < n && (p->mask & ncclProfileProxyOp); i++) {
    const weft_lane_t *lane = &l->sched->lanes[i];
    if (lane->count == 0) continue;
    const weft_step_t *st = &l->sched->steps[lane->first];
    ncclProfilerEventDescr_v5_t d;
    memset(&d, 0, sizeof(d));
    d.type = ncclProfileProxyOp;
    d.parentObj = po->event;
    d.rank = l->rank;
    d.proxyOp.pid = getpid();
    d.proxyOp.channelId = (uint8_t)(i > 255 ? 255 : i);
    d.proxyOp.isSend = st->send_peer >= 0;
    d.proxyOp.peer = st->send_peer >= 0 ? st->send_peer : st->recv_peer >= 0 ? st->recv_peer : st->rem_peer;
    d.proxyOp.nSteps = (int)lane->count;
    d.proxyOp.chunkSize = (int)(l->chunk_bytes > INT32_MAX ? INT32_MAX : l->chunk_bytes);
    po->lanes[i] = start(p, &d);
  }
}

static void step(void *prof, weft_prof_op_t *po, uint32_t lane, uint32_t cursor, int done) {
  struct weft_profiler *p = prof;
  void **open = &po->lanes[po->nlanes + lane];
  if (done) {
    stop(p, *open);
    *open = NULL;
    return;
  }
  if (*open != NULL || !(p->mask & ncclProfileProxyStep)) return;
  ncclProfilerEventDescr_v5_t d;
  memset(&d, 0, sizeof(d));
  d.type = ncclProfileProxyStep;
  d.parentObj = po->lanes[lane];
  d.rank = p->rank;
  d.proxyStep.step = (int)cursor;
  *open = start(p, &d);
}

static void lanes_stop(struct weft_profiler *p, weft_prof_op_t *po) {
  for (uint32_t i = 0; i < 2 * po->nlanes; i++) stop(p, po->lanes[2 * po->nlanes - 1 - i]);
  free(po->lanes);
  po->lanes = NULL;
}

static void op_stop(void *prof, weft_prof_op_t *po) {
  if (!po->on) return;
  po->on = 0;
  if (po->lanes != NULL) lanes_stop(prof, po);
  stop(prof, po->event);
  po->event = NULL;
  group_put(po->group);
  po->group = NULL;
}

static void op_start(void *prof, weft_prof_op_t *po, const weft_prof_launch_t *l, int first) {
  if (first) nlaunch_groups = 0;
  struct weft_profiler *p = prof;
  if (p == NULL) return;
  int kind = l->is_p2p ? ncclProfileP2p : ncclProfileColl;
  if (!(p->mask & (ncclProfileGroup | ncclProfileColl | ncclProfileP2p | ncclProfileProxyOp | ncclProfileProxyStep)))
    return;
  prof_group_t *g = group_for(p, l->rank);
  void *parent = g != NULL ? g->handle : NULL;
  ncclProfilerEventDescr_v5_t d;
  memset(&d, 0, sizeof(d));
  d.type = (uint64_t)kind;
  d.parentObj = parent;
  d.rank = l->rank;
  uint8_t lanes = (uint8_t)(l->sched->nlanes > 255 ? 255 : l->sched->nlanes);
  if (kind == ncclProfileColl) {
    d.coll.seqNumber = l->seq;
    d.coll.func = weft_coll_name(l->coll);
    d.coll.sendBuff = l->sendbuff;
    d.coll.recvBuff = l->recvbuff;
    d.coll.count = l->count;
    d.coll.root = l->root;
    d.coll.datatype = type_name(l->dtype);
    d.coll.nChannels = lanes;
    d.coll.algo = weft_algo_name(l->algo);
    d.coll.proto = "Simple";
    d.coll.parentGroup = parent;
  } else {
    int is_send = l->coll == WEFT_COLL_SEND;
    d.p2p.func = is_send ? "Send" : "Recv";
    d.p2p.buff = is_send ? (void *)l->sendbuff : l->recvbuff;
    d.p2p.datatype = type_name(l->dtype);
    d.p2p.count = l->count;
    d.p2p.peer = l->root;
    d.p2p.nChannels = lanes;
    d.p2p.parentGroup = parent;
  }
  po->nlanes = l->sched->nlanes;
  po->event = (p->mask & kind) ? start(p, &d) : NULL;
  if (p->mask & (ncclProfileProxyOp | ncclProfileProxyStep)) lanes_start(po, l, p);
  po->group = g;
  if (g != NULL) atomic_fetch_add(&g->refs, 1);
  po->on = 1;
  if (l->done) op_stop(p, po);  // nothing to move (one rank): done at launch
}

static void launch_end(void) {
  for (int i = 0; i < nlaunch_groups; i++) group_put(launch_groups[i]);
  nlaunch_groups = 0;
}

/* ---------- API events (v5) ---------- */

static void *api_start(void *prof, int rank, weft_coll_t coll, size_t count, ncclDataType_t dtype, int root,
                       void *stream) {
  struct weft_profiler *p = prof;
  int p2p = coll == WEFT_COLL_SEND || coll == WEFT_COLL_RECV;
  int kind = p2p ? ncclProfileP2pApi : ncclProfileCollApi;
  if (p == NULL || p->v5 == NULL || !(p->mask & kind)) return NULL;
  ncclProfilerEventDescr_v5_t d;
  memset(&d, 0, sizeof(d));
  d.type = (uint64_t)kind;
  d.rank = rank;
  if (p2p) {
    d.p2pApi.func = coll == WEFT_COLL_SEND ? "Send" : "Recv";
    d.p2pApi.count = count;
    d.p2pApi.datatype = type_name(dtype);
    d.p2pApi.stream = stream;
  } else {
    d.collApi.func = weft_coll_name(coll);
    d.collApi.count = count;
    d.collApi.datatype = type_name(dtype);
    d.collApi.root = root;
    d.collApi.stream = stream;
  }
  return start(p, &d);
}

static void api_stop(void *prof, void *event) { stop(prof, event); }

/* ---------- the library, once per process ---------- */

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const ncclProfiler_v5_t *lib_v5;
static const ncclProfiler_v4_t *lib_v4;

static void load(void) {
  int named = 0;
  void *lib = weft_plugin_open("profiler", weft_env_NCCL_PROFILER_PLUGIN(), &named, NULL, 0);
  if (lib == NULL) return;
  static const char *const symbols[] = {NCCL_PROFILER_PLUGIN_SYMBOL_V5, NCCL_PROFILER_PLUGIN_SYMBOL_V4, NULL};
  int which = -1;
  void *sym = weft_plugin_symbol(lib, symbols, &which);
  if (sym == NULL) {
    WARN("profiler plugin '%s' exports neither %s nor %s; no profiler",
         named ? weft_env_NCCL_PROFILER_PLUGIN() : "libnccl-profiler.so", symbols[0], symbols[1]);
    return;
  }
  if (which == 0) lib_v5 = sym;
  else lib_v4 = sym;
  const char *name = which == 0 ? lib_v5->name : lib_v4->name;
  INFO(WEFT_LOG_INIT | WEFT_LOG_PROFILE, "profiler plugin '%s' loaded (%s)", name ? name : "?", symbols[which]);
  weft_plugin_hooks.op_start = op_start;
  weft_plugin_hooks.launch_end = launch_end;
  weft_plugin_hooks.step = step;
  weft_plugin_hooks.op_stop = op_stop;
  weft_plugin_hooks.api_start = api_start;
  weft_plugin_hooks.api_stop = api_stop;
}

void *weft_profiler_comm_init(const weft_plugin_comm_t *c) {
  pthread_once(&load_once, load);
  if (lib_v5 == NULL && lib_v4 == NULL) return NULL;
  struct weft_profiler *p = calloc(1, sizeof(*p));
  if (p == NULL) {
    WARN("profiler plugin: out of memory; no profiler on rank %d", c->rank);
    return NULL;
  }
  ncclResult_t res;
  const char *name = c->name;
  p->rank = c->rank;
  if (lib_v5 != NULL) {
    p->v5 = lib_v5;
    res = lib_v5->init(&p->ctx, c->id_hash, &p->mask, name, c->nhosts, c->nranks, c->rank,
                       weft_plugin_logger);
  } else {
    p->v4 = lib_v4;
    res = lib_v4->init(&p->ctx, &p->mask, name, c->id_hash, c->nhosts, c->nranks, c->rank,
                       weft_plugin_logger);
  }
  if (res != ncclSuccess) {
    WARN("profiler plugin '%s': init failed (%d, %s); no profiler on rank %d", p->v5 ? p->v5->name : p->v4->name,
         (int)res, ncclGetErrorString(res), c->rank);
    free(p);
    return NULL;
  }
  return p;
}

void weft_profiler_comm_free(void *prof) {
  struct weft_profiler *p = prof;
  if (p == NULL) return;
  ncclResult_t res = p->v5 ? p->v5->finalize(p->ctx) : p->v4->finalize(p->ctx);
  if (res != ncclSuccess) INFO(WEFT_LOG_PROFILE, "profiler plugin: finalize returned %d", (int)res);
  free(p);
}
