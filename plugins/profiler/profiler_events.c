/*
 * profiler_events.c — the events weft reports to a profiler plugin: what
 * the profiler's entries of weft_plugin_hooks (hooks.h) do.
 *
 * Each event is described in version 6's layout and handed to the binding
 * of the version the plugin was loaded at (profiler_bind.h), which leaves
 * out what its version lacks. Which events start follows NCCL: an event
 * starts when its own type or a type below it is active (a Coll for an
 * active ProxyOp, a Group for an active Coll, ...), so a plugin can hang
 * what it asked for under its parents.
 *
 *   GroupApi (v5+)  thread's outermost group: from its first call to the
 *                   end of its ncclGroupEnd; a call outside a group is a
 *                   group of its own (groupDepth 1)
 *   CollApi/P2pApi  the call itself; parent: the GroupApi
 *   Group           per communicator and launched group
 *   Coll/P2p        launch to finish; parent: the call's API event (v5+)
 *                   or the Group (v1-v4); parentGroup: the Group
 *   ProxyOp         per lane (weft's channel) of an operation; parent: Coll/P2p
 *   ProxyStep       a lane's step, first try to last byte; parent: ProxyOp
 *   KernelCh (v3+)  per lane: the lane's run on the host engine, from the
 *                   first try of its first step to the end of its last (a
 *                   lane without steps: an empty run at launch); parent:
 *                   Coll/P2p. weft has no kernel: its pTimer (v4+, start in
 *                   the descriptor, stop with ncclProfilerKernelChStop) is
 *                   CLOCK_MONOTONIC in nanoseconds where NCCL reads the
 *                   GPU's globaltimer (also nanoseconds). Only for
 *                   operations of at most 64 lanes (NCCL's channel limit,
 *                   which plugins size their tables by) that run after launch.
 *
 * Descriptor fields: func is NCCL's name of the call ("AllReduce", "Send",
 * ...), datatype NCCL's name of the type ("ncclFloat32"), count and
 * datatype the call's, algo weft's algorithm name ("ring", "tree", ...),
 * proto "Simple" (weft's one protocol), nChannels the schedule's lanes,
 * nWarps 0, seqNumber as NCCL counts: per communicator and function, from
 * 0 (what the Inspector calls coll_sn).
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "profiler_bind.h"
#include "profiler_plugin.h"
#include "util.h"

// The types whose activity starts each event (NCCL's rule: itself and those below it).
#define NEEDS_LANES (ncclProfileProxyOp | ncclProfileProxyStep)
#define NEEDS_OP (NEEDS_LANES | ncclProfileKernelCh)  // besides the Coll / P2p type itself
#define NEEDS_GROUP (ncclProfileGroup | ncclProfileColl | ncclProfileP2p | NEEDS_OP)
#define NEEDS_COLL_API (ncclProfileCollApi | ncclProfileColl | NEEDS_OP)
#define NEEDS_P2P_API (ncclProfileP2pApi | ncclProfileP2p | NEEDS_OP)
#define NEEDS_GROUP_API \
  (ncclProfileGroupApi | ncclProfileCollApi | ncclProfileP2pApi | ncclProfileKernelLaunch | NEEDS_GROUP)
#define KERNEL_CHANNELS 64  // NCCL's MAXCHANNELS: the most KernelCh channels a plugin expects

// One lane's events: its ProxyOp, the ProxyStep open on it, its KernelCh.
struct weft_prof_lane {
  void *op, *step, *kernel;
  uint32_t nsteps;
  int kernel_due;  // a KernelCh is wanted and has not started
};

// A launched group's event on one communicator: stopped when its last operation stops.
typedef struct weft_prof_group {
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

// A descriptor's common part; the rest is zero.
static void describe(ncclProfilerEventDescr_v6_t *d, uint64_t type, void *parent, int rank) {
  memset(d, 0, sizeof(*d));
  d->type = type;
  d->parentObj = parent;
  d->rank = rank;
}

static const weft_prof_abi_t *abi;  // the loaded plugin's binding (one per process)

static void *start(weft_profiler_t *p, ncclProfilerEventDescr_v6_t *d, const weft_prof_launch_t *l) {
  if (!(abi->types & (int)d->type)) return NULL;  // not in this version
  return abi->start(p, d, l);
}

static void stop(void *h) {
  if (h != NULL) abi->stop(h);
}

static void group_put(prof_group_t *g) {
  if (g == NULL || atomic_fetch_sub(&g->refs, 1) != 1) return;
  stop(g->handle);
  free(g);
}

/* ---------- groups and operations ---------- */

// The groups of the launch in progress on this thread, one per communicator.
#define LAUNCH_GROUPS 16
static _Thread_local struct {
  weft_profiler_t *prof;
  prof_group_t *group;
} launch_groups[LAUNCH_GROUPS];
static _Thread_local int nlaunch_groups;

static prof_group_t *group_for(weft_profiler_t *p, int rank) {
  for (int i = 0; i < nlaunch_groups; i++)
    if (launch_groups[i].prof == p) return launch_groups[i].group;
  if (nlaunch_groups == LAUNCH_GROUPS) return NULL;
  prof_group_t *g = calloc(1, sizeof(*g));
  if (g == NULL) return NULL;
  atomic_init(&g->refs, 1);  // the launch's own reference, dropped by launch_end
  ncclProfilerEventDescr_v6_t d;
  describe(&d, ncclProfileGroup, NULL, rank);
  g->handle = start(p, &d, NULL);
  launch_groups[nlaunch_groups].prof = p;
  launch_groups[nlaunch_groups++].group = g;
  return g;
}

/* ---------- lanes: ProxyOp, ProxyStep, KernelCh ---------- */

// A KernelCh's timer (pTimer): the host's monotonic clock in nanoseconds.
static uint64_t kernel_timer(void) { return (uint64_t)weft_now_ns(); }

static void kernel_start(weft_profiler_t *p, weft_prof_op_t *po, uint32_t lane) {
  ncclProfilerEventDescr_v6_t d;
  describe(&d, ncclProfileKernelCh, po->event, p->rank);
  d.kernelCh.channelId = (uint8_t)lane;
  d.kernelCh.pTimer = kernel_timer();
  po->lanes[lane].kernel_due = 0;
  po->lanes[lane].kernel = start(p, &d, NULL);
}

static void kernel_stop(struct weft_prof_lane *ln) {
  if (ln->kernel == NULL) return;
  if (abi->record != NULL) {  // versions 4 on: the stop time
    ncclProfilerEventStateArgs_v6_t a;
    memset(&a, 0, sizeof(a));
    a.kernelCh.pTimer = kernel_timer();
    abi->record(ln->kernel, ncclProfilerKernelChStop, &a);
  }
  stop(ln->kernel);
  ln->kernel = NULL;
}

// Per lane (weft's lanes are its channels): a ProxyOp, parent of the
// lane's ProxyStep events, if asked for; a KernelCh to come if `kernels`.
static void lanes_start(weft_prof_op_t *po, const weft_prof_launch_t *l, weft_profiler_t *p, int kernels) {
  uint32_t n = l->sched->nlanes;
  if (n == 0 || (po->lanes = calloc(n, sizeof(*po->lanes))) == NULL) return;
  for (uint32_t i = 0; i < n; i++) {
    const weft_lane_t *lane = &l->sched->lanes[i];
    struct weft_prof_lane *ln = &po->lanes[i];
    ln->nsteps = lane->count;
    ln->kernel_due = kernels;
    if (lane->count == 0) {  // nothing to run: an empty run
      if (kernels) {
        kernel_start(p, po, i);
        kernel_stop(ln);
      }
      continue;
    }
    if (!(p->mask & NEEDS_LANES)) continue;
    const weft_step_t *st = &l->sched->steps[lane->first];
    ncclProfilerEventDescr_v6_t d;
    describe(&d, ncclProfileProxyOp, po->event, l->rank);
    d.proxyOp.pid = getpid();
    d.proxyOp.channelId = (uint8_t)(i > 255 ? 255 : i);
    d.proxyOp.isSend = st->send_peer >= 0;
    d.proxyOp.peer = st->send_peer >= 0 ? st->send_peer : st->recv_peer >= 0 ? st->recv_peer : st->rem_peer;
    d.proxyOp.nSteps = (int)lane->count;
    d.proxyOp.chunkSize = (int)(l->chunk_bytes > INT32_MAX ? INT32_MAX : l->chunk_bytes);
    ln->op = start(p, &d, NULL);
  }
}

static void step(void *prof, weft_prof_op_t *po, uint32_t lane, uint32_t cursor, int done) {
  weft_profiler_t *p = prof;
  struct weft_prof_lane *ln = &po->lanes[lane];
  if (done) {
    stop(ln->step);
    ln->step = NULL;
    if (cursor + 1 == ln->nsteps) kernel_stop(ln);  // the lane's last step is over
    return;
  }
  if (ln->kernel_due) kernel_start(p, po, lane);
  if (ln->step != NULL || !(p->mask & ncclProfileProxyStep)) return;
  ncclProfilerEventDescr_v6_t d;
  describe(&d, ncclProfileProxyStep, ln->op, p->rank);
  d.proxyStep.step = (int)cursor;
  ln->step = start(p, &d, NULL);
}

// The operation is over (or failed, or dropped): what is still open is stopped now.
static void lanes_stop(weft_prof_op_t *po) {
  for (uint32_t i = po->nlanes; i-- > 0;) {
    struct weft_prof_lane *ln = &po->lanes[i];
    stop(ln->step);
    kernel_stop(ln);
    stop(ln->op);
  }
  free(po->lanes);
  po->lanes = NULL;
}

static void op_stop(void *prof, weft_prof_op_t *po) {
  (void)prof;
  if (!po->on) return;
  po->on = 0;
  if (po->lanes != NULL) lanes_stop(po);
  stop(po->event);
  po->event = NULL;
  group_put(po->group);
  po->group = NULL;
}

// The operation's Coll or P2p descriptor.
static void describe_op(ncclProfilerEventDescr_v6_t *d, const weft_prof_launch_t *l, uint64_t seq, void *api_event,
                        void *group) {
  describe(d, l->is_p2p ? ncclProfileP2p : ncclProfileColl, api_event, l->rank);
  uint8_t lanes = (uint8_t)(l->sched->nlanes > 255 ? 255 : l->sched->nlanes);
  if (!l->is_p2p) {
    d->coll.seqNumber = seq;
    d->coll.func = weft_coll_name(l->coll);
    d->coll.sendBuff = l->sendbuff;
    d->coll.recvBuff = l->recvbuff;
    d->coll.count = l->count;
    d->coll.root = l->root;
    d->coll.datatype = type_name(l->dtype);
    d->coll.nChannels = lanes;
    d->coll.algo = weft_algo_name(l->algo);
    d->coll.proto = "Simple";
    d->coll.parentGroup = group;
  } else {
    int is_send = l->coll == WEFT_COLL_SEND;
    d->p2p.func = is_send ? "Send" : "Recv";
    d->p2p.buff = is_send ? (void *)l->sendbuff : l->recvbuff;
    d->p2p.datatype = type_name(l->dtype);
    d->p2p.count = l->count;
    d->p2p.peer = l->root;
    d->p2p.nChannels = lanes;
    d->p2p.parentGroup = group;
  }
}

static void op_start(void *prof, weft_prof_op_t *po, const weft_prof_launch_t *l, int first) {
  if (first) nlaunch_groups = 0;
  weft_profiler_t *p = prof;
  if (p == NULL) return;
  int mask = p->mask, kind = l->is_p2p ? ncclProfileP2p : ncclProfileColl;
  uint64_t seq = l->is_p2p ? 0 : p->seq[l->coll]++;  // counted whatever the mask, as NCCL does
  if (!(mask & NEEDS_GROUP)) return;
  prof_group_t *g = group_for(p, l->rank);
  ncclProfilerEventDescr_v6_t d;
  describe_op(&d, l, seq, po->api_event, g != NULL ? g->handle : NULL);
  po->nlanes = l->sched->nlanes;
  po->event = (mask & (kind | NEEDS_OP)) ? start(p, &d, l) : NULL;
  int kernels = (mask & ncclProfileKernelCh) && (abi->types & ncclProfileKernelCh) && !l->done &&
                po->nlanes <= KERNEL_CHANNELS;
  if ((mask & NEEDS_LANES) || kernels) lanes_start(po, l, p, kernels);
  po->group = g;
  if (g != NULL) atomic_fetch_add(&g->refs, 1);
  po->on = 1;
  if (l->done) op_stop(p, po);  // nothing to move (one rank): done at launch
}

static void launch_end(void) {
  for (int i = 0; i < nlaunch_groups; i++) group_put(launch_groups[i].group);
  nlaunch_groups = 0;
}

/* ---------- API events (version 5 on) ---------- */

// This thread's GroupApi event.
static _Thread_local struct {
  int open;
  int alone;  // opened by a call outside any group: it ends with that call
  void *handle;
} group_api;

static void group_api_end_begins(void) {
  if (group_api.handle != NULL) abi->record(group_api.handle, ncclProfilerGroupEndApiStart, NULL);
}

static void group_api_close(void) {
  stop(group_api.handle);
  memset(&group_api, 0, sizeof(group_api));
}

static void *api_start(void *prof, int rank, weft_coll_t coll, size_t count, ncclDataType_t dtype, int root,
                       void *stream, int group_depth) {
  weft_profiler_t *p = prof;
  if (p == NULL || !(abi->types & ncclProfileGroupApi)) return NULL;
  int mask = p->mask;
  ncclProfilerEventDescr_v6_t d;
  if (!group_api.open && (mask & NEEDS_GROUP_API)) {
    describe(&d, ncclProfileGroupApi, NULL, rank);
    d.groupApi.groupDepth = group_depth + 1;  // counting the call's own group, as NCCL does
    group_api.open = 1;
    group_api.alone = group_depth == 0;
    group_api.handle = start(p, &d, NULL);
    if (group_api.handle != NULL) abi->record(group_api.handle, ncclProfilerGroupStartApiStop, NULL);
  }
  int p2p = coll == WEFT_COLL_SEND || coll == WEFT_COLL_RECV;
  if (!(mask & (p2p ? NEEDS_P2P_API : NEEDS_COLL_API))) return NULL;
  describe(&d, p2p ? ncclProfileP2pApi : ncclProfileCollApi, group_api.handle, rank);
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
  return start(p, &d, NULL);
}

static void api_stop(void *event) {
  stop(event);
  if (group_api.open && group_api.alone) {
    group_api_end_begins();
    group_api_close();
  }
}

static void group_end(int launched) {
  if (!group_api.open || group_api.alone) return;
  if (launched) group_api_close();
  else group_api_end_begins();
}

void weft_profiler_events_install(const weft_prof_abi_t *loaded) {
  abi = loaded;
  weft_plugin_hooks.op_start = op_start;
  weft_plugin_hooks.launch_end = launch_end;
  weft_plugin_hooks.step = step;
  weft_plugin_hooks.op_stop = op_stop;
  weft_plugin_hooks.api_start = api_start;
  weft_plugin_hooks.api_stop = api_stop;
  weft_plugin_hooks.group_end = group_end;
}
