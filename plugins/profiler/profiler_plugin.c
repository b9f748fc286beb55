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

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checks.h"
#include "env.h"
#include "plugin_dl.h"
#include "profiler_abi.h"

_Atomic int weft_profiler_active;

struct weft_profiler {
  const ncclProfiler_v5_t *v5;  // exactly one of v5, v4
  const ncclProfiler_v4_t *v4;
  void *ctx;
  int mask;  // the plugin's eActivationMask (it may change it later)
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
  atomic_store(&weft_profiler_active, 1);
}

void weft_profiler_comm_init(struct ncclComm *comm) {
  comm->prof = NULL;
  pthread_once(&load_once, load);
  if (!weft_profiler_on()) return;
  struct weft_profiler *p = calloc(1, sizeof(*p));
  if (p == NULL) {
    WARN("profiler plugin: out of memory; no profiler on rank %d", comm->rank);
    return;
  }
  ncclResult_t res;
  const char *name = comm->name[0] ? comm->name : NULL;
  if (lib_v5 != NULL) {
    p->v5 = lib_v5;
    res = lib_v5->init(&p->ctx, comm->id_hash, &p->mask, name, comm->nhosts, comm->nranks, comm->rank,
                       weft_plugin_logger);
  } else {
    p->v4 = lib_v4;
    res = lib_v4->init(&p->ctx, &p->mask, name, comm->id_hash, comm->nhosts, comm->nranks, comm->rank,
                       weft_plugin_logger);
  }
  if (res != ncclSuccess) {
    WARN("profiler plugin '%s': init failed (%d, %s); no profiler on rank %d", p->v5 ? p->v5->name : p->v4->name,
         (int)res, ncclGetErrorString(res), comm->rank);
    free(p);
    return;
  }
  comm->prof = p;
}

void weft_profiler_comm_free(struct ncclComm *comm) {
  struct weft_profiler *p = comm->prof;
  if (p == NULL) return;
  ncclResult_t res = p->v5 ? p->v5->finalize(p->ctx) : p->v4->finalize(p->ctx);
  if (res != ncclSuccess) INFO(WEFT_LOG_PROFILE, "profiler plugin: finalize returned %d", (int)res);
  free(p);
  comm->prof = NULL;
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

static prof_group_t *group_for(struct ncclComm *comm) {
  for (int i = 0; i < nlaunch_groups; i++)
    if (launch_groups[i]->prof == comm->prof) return launch_groups[i];
  if (nlaunch_groups == LAUNCH_GROUPS) return NULL;
  prof_group_t *g = calloc(1, sizeof(*g));
  if (g == NULL) return NULL;
  g->prof = comm->prof;
  atomic_init(&g->refs, 1);  // the launch's own reference, dropped by launch_end
  ncclProfilerEventDescr_v5_t d;
  memset(&d, 0, sizeof(d));
  d.type = ncclProfileGroup;
  d.rank = comm->rank;
  g->handle = start(comm->prof, &d);
  launch_groups[nlaunch_groups++] = g;
  return g;
}

// One ProxyOp per lane (weft's lanes are its channels), parent of the
// lane's ProxyStep events, one per step from its first try to its end.
static void lanes_start(weft_op_t *op, struct weft_profiler *p) {
  uint32_t n = op->sched.nlanes;
  if (n == 0 || (op->prof_lanes = calloc(2 * (size_t)n, sizeof(void *))) == NULL) return;
  for (uint32_t l = 0; l < n && (p->mask & ncclProfileProxyOp); l++) {
    const weft_lane_t *lane = &op->sched.lanes[l];
    if (lane->count == 0) continue;
    const weft_step_t *st = &op->sched.steps[lane->first];
    ncclProfilerEventDescr_v5_t d;
    memset(&d, 0, sizeof(d));
    d.type = ncclProfileProxyOp;
    d.parentObj = op->prof_event;
    d.rank = op->comm->rank;
    d.proxyOp.pid = getpid();
    d.proxyOp.channelId = (uint8_t)(l > 255 ? 255 : l);
    d.proxyOp.isSend = st->send_peer >= 0;
    d.proxyOp.peer = st->send_peer >= 0 ? st->send_peer : st->recv_peer >= 0 ? st->recv_peer : st->read_peer;
    d.proxyOp.nSteps = (int)lane->count;
    d.proxyOp.chunkSize = (int)(op->args.slice * op->esize > INT32_MAX ? INT32_MAX : op->args.slice * op->esize);
    op->prof_lanes[l] = start(p, &d);
  }
}

void weft_profiler_step(weft_op_t *op, uint32_t lane, int done) {
  struct weft_profiler *p = op->comm->prof;
  void **open = &op->prof_lanes[op->sched.nlanes + lane];
  if (done) {
    stop(p, *open);
    *open = NULL;
    return;
  }
  if (*open != NULL || !(p->mask & ncclProfileProxyStep)) return;
  ncclProfilerEventDescr_v5_t d;
  memset(&d, 0, sizeof(d));
  d.type = ncclProfileProxyStep;
  d.parentObj = op->prof_lanes[lane];
  d.rank = op->comm->rank;
  d.proxyStep.step = (int)op->lanes[lane].cursor;
  *open = start(p, &d);
}

static void lanes_stop(weft_op_t *op) {
  struct weft_profiler *p = op->comm->prof;
  for (uint32_t i = 0; i < 2 * op->sched.nlanes; i++) stop(p, op->prof_lanes[2 * op->sched.nlanes - 1 - i]);
  free(op->prof_lanes);
  op->prof_lanes = NULL;
}

void weft_profiler_op_start(weft_op_t *op, int first) {
  if (first) nlaunch_groups = 0;
  struct ncclComm *comm = op->comm;
  struct weft_profiler *p = comm->prof;
  if (p == NULL) return;
  int kind = op->cls == WEFT_CLASS_P2P ? ncclProfileP2p : ncclProfileColl;
  if (!(p->mask & (ncclProfileGroup | ncclProfileColl | ncclProfileP2p | ncclProfileProxyOp | ncclProfileProxyStep)))
    return;
  prof_group_t *g = group_for(comm);
  void *parent = g != NULL ? g->handle : NULL;
  ncclProfilerEventDescr_v5_t d;
  memset(&d, 0, sizeof(d));
  d.type = (uint64_t)kind;
  d.parentObj = parent;
  d.rank = comm->rank;
  uint8_t lanes = (uint8_t)(op->sched.nlanes > 255 ? 255 : op->sched.nlanes);
  if (kind == ncclProfileColl) {
    d.coll.seqNumber = op->seq;
    d.coll.func = weft_coll_name(op->args.coll);
    d.coll.sendBuff = op->sendbuff;
    d.coll.recvBuff = op->recvbuff;
    d.coll.count = op->args.count;
    d.coll.root = op->args.root;
    d.coll.datatype = type_name(op->dtype);
    d.coll.nChannels = lanes;
    d.coll.algo = weft_algo_name(op->algo);
    d.coll.proto = "Simple";
    d.coll.parentGroup = parent;
  } else {
    int is_send = op->args.coll == WEFT_COLL_SEND;
    d.p2p.func = is_send ? "Send" : "Recv";
    d.p2p.buff = is_send ? (void *)op->sendbuff : op->recvbuff;
    d.p2p.datatype = type_name(op->dtype);
    d.p2p.count = op->args.count;
    d.p2p.peer = op->args.root;
    d.p2p.nChannels = lanes;
    d.p2p.parentGroup = parent;
  }
  op->prof_event = (p->mask & kind) ? start(p, &d) : NULL;
  if (p->mask & (ncclProfileProxyOp | ncclProfileProxyStep)) lanes_start(op, p);
  op->prof_group = g;
  if (g != NULL) atomic_fetch_add(&g->refs, 1);
  op->profiled = 1;
  if (op->state != WEFT_OP_PENDING) weft_profiler_op_stop(op);  // nothing to move (one rank): done at launch
}

void weft_profiler_launch_end(void) {
  for (int i = 0; i < nlaunch_groups; i++) group_put(launch_groups[i]);
  nlaunch_groups = 0;
}

void weft_profiler_op_stop(weft_op_t *op) {
  if (!op->profiled) return;
  op->profiled = 0;
  if (op->prof_lanes != NULL) lanes_stop(op);
  stop(op->comm->prof, op->prof_event);
  op->prof_event = NULL;
  group_put(op->prof_group);
  op->prof_group = NULL;
}

/* ---------- API events (v5) ---------- */

void *weft_profiler_api_start(ncclComm_t comm, weft_coll_t coll, size_t count, ncclDataType_t dtype, int root,
                              void *stream) {
  if (!weft_registry_contains(comm)) return NULL;
  struct weft_profiler *p = comm->prof;
  int p2p = coll == WEFT_COLL_SEND || coll == WEFT_COLL_RECV;
  int kind = p2p ? ncclProfileP2pApi : ncclProfileCollApi;
  if (p == NULL || p->v5 == NULL || !(p->mask & kind)) return NULL;
  ncclProfilerEventDescr_v5_t d;
  memset(&d, 0, sizeof(d));
  d.type = (uint64_t)kind;
  d.rank = comm->rank;
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

void weft_profiler_api_stop(ncclComm_t comm, void *event) {
  if (event != NULL && weft_registry_contains(comm) && comm->prof != NULL) stop(comm->prof, event);
}
