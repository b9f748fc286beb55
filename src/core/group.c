/*
 * group.c — ncclGroupStart / ncclGroupEnd / ncclGroupSimulateEnd.
 *
 * Operations called inside a group are validated and built at call time but
 * launched (sequence numbers and connection tickets assigned, in call order)
 * only at the outermost ncclGroupEnd; then every NULL-stream operation of
 * the group runs to completion in the calling thread, all progressing
 * together, and operations on weft streams are handed to their streams.
 * Operations on device buffers go to their CUDA stream's bridge
 * (src/cuda/cuda_stream.c): each bridge's share of the group is staged as one
 * batch before anything is launched, since launching publishes the
 * (staging) buffer addresses to the peers. Operations on the CUDA IPC
 * path (src/cuda/cuda_ipc.h) are queued on their streams before all that.
 */
#include "group.h"

#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "checks.h"
#include "cost.h"
#include "placement.h"
#include "dtype.h"
#include "hooks.h"

typedef struct {
  weft_op_t *op;
  weft_stream_t *stream;
  weft_dev_bridge_t *bridge;  // device buffers: the CUDA stream's bridge (stream is its worker)
  weft_dev_gate_t gate;       // set when the bridge's batch is staged
  int ipc;                    // the CUDA IPC path queues it on bridge's stream (cuda_ipc.h)
} queued_t;

// Small groups (and single calls) live in a fixed per-thread array, so the
// common path allocates nothing here; bigger groups move to the heap.
#define QUEUE_INLINE 16

static _Thread_local int group_depth;
static _Thread_local queued_t queue_inline[QUEUE_INLINE];
static _Thread_local queued_t *queue;  // NULL: queue_inline
static _Thread_local int queue_len, queue_cap;
static _Thread_local ncclResult_t group_error;

static queued_t *queue_items(void) { return queue != NULL ? queue : queue_inline; }

static void queue_reset(void) {
  free(queue);
  queue = NULL;
  queue_len = 0;
  queue_cap = QUEUE_INLINE;
}

static void queue_clear(void) {
  for (int i = 0; i < queue_len; i++) weft_op_free(queue_items()[i].op);
  queue_reset();
  group_error = ncclSuccess;
}

static ncclResult_t queue_push(weft_op_t *op, weft_stream_t *s, weft_dev_bridge_t *bridge, int ipc) {
  if (queue_cap < QUEUE_INLINE) queue_cap = QUEUE_INLINE;
  if (queue_len == queue_cap) {
    int cap = queue_cap * 2;
    queued_t *q = realloc(queue, sizeof(*q) * (size_t)cap);
    if (q == NULL) {
      weft_op_free(op);
      WARN("out of memory queueing a group operation");
      return ncclSystemError;
    }
    if (queue == NULL) memcpy(q, queue_inline, sizeof(queue_inline));
    queue = q;
    queue_cap = cap;
  }
  queue_items()[queue_len++] = (queued_t){op, s, bridge, {0}, ipc};
  return ncclSuccess;
}

// The operations of q[i]'s bridge from i on (the first cnt fit in ops).
static int bridge_ops(queued_t *q, int n, int i, weft_op_t **ops, int cap) {
  int cnt = 0;
  for (int j = i; j < n; j++)
    if (q[j].bridge == q[i].bridge) {
      if (cnt < cap) ops[cnt] = q[j].op;
      cnt++;
    }
  return cnt;
}

// Each CUDA bridge's share of the group becomes one batch, its gate held by
// the bridge's first item. Two passes: staging for every bridge first
// (it may pin host memory, which waits for the context's streams), then the
// stream work of every bridge. Stops at the first failure; the caller
// abandons whatever gates are set.
static ncclResult_t stage_device_batches(queued_t *q, int n) {
  weft_op_t *local[QUEUE_INLINE], **ops = local;
  int cap = QUEUE_INLINE;
  ncclResult_t res = ncclSuccess;
  for (int pass = 0; pass < 2 && res == ncclSuccess; pass++) {
    for (int i = 0; i < n && res == ncclSuccess; i++) {
      if (q[i].bridge == NULL) continue;
      int lead = 1;
      for (int j = 0; j < i && lead; j++) lead = q[j].bridge != q[i].bridge;
      if (!lead) continue;
      int cnt = bridge_ops(q, n, i, ops, cap);
      if (cnt > cap) {
        if (ops != local) free(ops);
        if ((ops = calloc((size_t)cnt, sizeof(*ops))) == NULL) return ncclSystemError;
        cap = cnt;
        bridge_ops(q, n, i, ops, cap);
      }
      res = pass == 0 ? weft_cuda_batch_stage(q[i].bridge, ops, cnt, &q[i].gate)
                      : weft_cuda_batch_queue(&q[i].gate, ops, cnt);
    }
  }
  if (ops != local) free(ops);
  return res;
}

// The group's operations on the CUDA IPC path go on their streams first:
// its collectives in call order, then its Send/Recv interleaved by rounds
// (the same order on every rank, so no stream waits for a peer that waits
// for it). They are done with on the host once queued.
static ncclResult_t queue_ipc_ops(queued_t *q, int n) {
  ncclResult_t res = ncclSuccess;
  int np2p = 0;
  for (int i = 0; i < n && res == ncclSuccess; i++) {
    if (!q[i].ipc) continue;
    if (q[i].op->cls == WEFT_CLASS_P2P) {
      np2p++;
      continue;
    }
    res = weft_cuda_ipc_queue(q[i].op, q[i].bridge);
    weft_op_free(q[i].op);
    q[i].op = NULL;
  }
  weft_op_t *local_ops[QUEUE_INLINE], **ops = local_ops;
  weft_dev_bridge_t *local_bridges[QUEUE_INLINE], **bridges = local_bridges;
  if (res == ncclSuccess && np2p > QUEUE_INLINE) {
    ops = calloc((size_t)np2p, sizeof(*ops));
    bridges = calloc((size_t)np2p, sizeof(*bridges));
    if (ops == NULL || bridges == NULL) res = ncclSystemError;
  }
  if (res == ncclSuccess && np2p > 0) {
    int k = 0;
    for (int i = 0; i < n; i++)
      if (q[i].ipc && q[i].op != NULL) ops[k] = q[i].op, bridges[k++] = q[i].bridge;
    res = weft_cuda_ipc_queue_p2p(ops, bridges, k);
  }
  for (int i = 0; i < n; i++)
    if (q[i].ipc) {
      weft_op_free(q[i].op);  // queued, or never to be
      q[i].op = NULL;
      q[i].bridge = NULL;
    }
  if (ops != local_ops) free(ops);
  if (bridges != local_bridges) free(bridges);
  return res;
}

// The gates of staged batches that will not be submitted.
static void abandon_gates(queued_t *q, int n) {
  for (int i = 0; i < n; i++)
    if (q[i].gate.bridge != NULL) weft_cuda_gate_abandon(&q[i].gate);
}

// Tell the profiler plugin of a launched operation (hooks.h).
static void profile_launch(weft_op_t *op, int first) {
  weft_prof_launch_t l = {.rank = op->comm->rank, .is_p2p = op->cls == WEFT_CLASS_P2P, .coll = op->args.coll,
                          .algo = op->algo, .sendbuff = op->sendbuff, .recvbuff = op->recvbuff,
                          .count = op->args.count, .root = op->args.root, .dtype = op->dtype,
                          .esize = op->esize, .redop = op->user_op,
                          .chunk_bytes = op->args.slice * op->esize, .sched = &op->sched,
                          .done = op->state != WEFT_OP_PENDING};
  weft_plugin_hooks.op_start(op->comm->prof, &op->prof, &l, first);
}

// Launch and run q's n operations (the caller's array; emptied).
static ncclResult_t launch(queued_t *q, int n) {
  ncclResult_t res = ncclSuccess;
  weft_op_t *local_ops[QUEUE_INLINE];
  weft_op_t **inline_ops = n <= QUEUE_INLINE ? local_ops : calloc((size_t)n, sizeof(*inline_ops));
  if (inline_ops == NULL) res = ncclSystemError;
  if (res == ncclSuccess) res = queue_ipc_ops(q, n);
  if (res == ncclSuccess) res = stage_device_batches(q, n);
  for (int i = 0; i < n && res == ncclSuccess; i++)
    if (q[i].op != NULL) res = weft_op_launch(q[i].op);
  if (__builtin_expect(weft_plugin_hooks.op_start != NULL, 0) && res == ncclSuccess) {
    for (int i = 0, first = 1; i < n; i++)
      if (q[i].op != NULL) profile_launch(q[i].op, first), first = 0;
    weft_plugin_hooks.launch_end();
  }
  int ninline = 0;
  // Hand stream work to the streams (one batch per stream, in call order).
  for (int i = 0; i < n && res == ncclSuccess; i++) {
    if (q[i].op == NULL) continue;
    if (q[i].stream == NULL) {
      inline_ops[ninline++] = q[i].op;
      q[i].op = NULL;
      continue;
    }
    weft_stream_t *s = q[i].stream;
    weft_dev_gate_t gate = q[i].gate;  // a bridge's items share one stream; its first item holds the gate
    int cnt = 0;
    for (int j = i; j < n; j++) cnt += q[j].op != NULL && q[j].stream == s;
    weft_op_t *local_batch[QUEUE_INLINE];
    weft_op_t **batch = cnt <= QUEUE_INLINE ? local_batch : calloc((size_t)cnt, sizeof(*batch));
    if (batch == NULL) { res = ncclSystemError; break; }
    for (int j = i, k = 0; j < n; j++) {
      if (q[j].op != NULL && q[j].stream == s) {
        batch[k++] = q[j].op;
        q[j].op = NULL;
      }
    }
    q[i].gate.bridge = NULL;  // handed over with the batch
    res = weft_stream_submit_gated(s, batch, cnt, gate.bridge != NULL ? &gate : NULL);
    if (batch != local_batch) free(batch);
  }
  abandon_gates(q, n);  // batches staged but not submitted (a failure above)
  if (res == ncclSuccess && ninline > 0) res = weft_engine_run(inline_ops, ninline, 0);
  for (int i = 0; i < ninline; i++) weft_op_free(inline_ops[i]);
  for (int i = 0; i < n; i++) weft_op_free(q[i].op);
  if (inline_ops != local_ops) free(inline_ops);
  return res;
}

// Launch and run everything queued; empties the queue.
static ncclResult_t group_launch(void) {
  int n = queue_len;
  // Take the queue over (a local copy of the inline one) and leave it empty.
  queued_t local_q[QUEUE_INLINE];
  queued_t *q = queue;
  if (q == NULL) q = memcpy(local_q, queue_inline, sizeof(queued_t) * (size_t)n);
  queue = NULL;
  queue_len = 0;
  queue_cap = QUEUE_INLINE;
  ncclResult_t res = launch(q, n);
  if (q != local_q) free(q);
  return res;
}

int weft_group_depth(void) { return group_depth; }

ncclResult_t weft_group_add(weft_op_t *op, weft_stream_t *stream, weft_dev_bridge_t *bridge) {
  if (group_depth > 0) return queue_push(op, stream, bridge, 0);
  queued_t one = {op, stream, bridge, {0}, 0};  // outside a group: straight to the engine
  return launch(&one, 1);
}

ncclResult_t weft_group_add_ipc(weft_op_t *op, weft_dev_bridge_t *bridge) {
  if (group_depth > 0) return queue_push(op, NULL, bridge, 1);
  ncclResult_t res = op->cls == WEFT_CLASS_P2P ? weft_cuda_ipc_queue_p2p(&op, &bridge, 1)
                                               : weft_cuda_ipc_queue(op, bridge);
  weft_op_free(op);
  return res;
}

NCCL_API(ncclResult_t, ncclGroupStart, void);
ncclResult_t pncclGroupStart(void) {
  group_depth++;
  return ncclSuccess;
}

// Leaves the group; *outermost tells whether the group is now complete.
static ncclResult_t group_leave(const char *api, int *outermost) {
  *outermost = 0;
  if (group_depth == 0) {
    WARN("%s called without a matching ncclGroupStart", api);
    return ncclInvalidUsage;
  }
  *outermost = --group_depth == 0;
  return ncclSuccess;
}

// The profiler's GroupApi event ends with the outermost group (hooks.h).
static void profile_group_end(int launched) {
  if (__builtin_expect(weft_plugin_hooks.group_end != NULL, 0)) weft_plugin_hooks.group_end(launched);
}

NCCL_API(ncclResult_t, ncclGroupEnd, void);
ncclResult_t pncclGroupEnd(void) {
  int outermost;
  WEFTCHECK(group_leave("ncclGroupEnd", &outermost));
  if (!outermost) return ncclSuccess;
  profile_group_end(0);
  ncclResult_t res = group_error;
  if (res != ncclSuccess) queue_clear();
  else res = group_launch();
  profile_group_end(1);
  return res;
}

// What one operation would take, priced by the cost model the tuner uses
// (algorithms/cost.h) with the links weft-calibrate measured (WEFT_TUNE_FILE):
// a collective replayed over every rank's schedule, a send or receive as one
// transfer over the link between the two ranks.
static double estimate_seconds(const weft_op_t *op) {
  if (op->cls == WEFT_CLASS_P2P) return weft_cost_transfer(&op->args, op->esize, weft_links());
  double t = 0;
  return weft_cost_call(&op->args, op->algo, op->esize, weft_links(), &t) == ncclSuccess ? t : 0;
}

NCCL_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t *simInfo);
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t *simInfo) {
  ncclSimInfo_t init = NCCL_SIM_INFO_INITIALIZER;
  if (simInfo != NULL && (simInfo->magic != init.magic || simInfo->size < sizeof(ncclSimInfo_t))) {
    WARN("ncclGroupSimulateEnd: simInfo was not initialised with NCCL_SIM_INFO_INITIALIZER (magic 0x%x)",
         simInfo->magic);
    return ncclInvalidArgument;
  }
  int outermost;
  WEFTCHECK(group_leave("ncclGroupSimulateEnd", &outermost));
  if (!outermost) return ncclSuccess;
  profile_group_end(0);
  double total = 0;
  for (int i = 0; i < queue_len; i++) total += estimate_seconds(queue_items()[i].op);
  ncclResult_t res = group_error;
  queue_clear();  // simulated, not run
  profile_group_end(1);
  if (simInfo != NULL) simInfo->estimatedTime = (float)total;
  return res;
}

void weft_group_note_error(ncclResult_t res) {
  if (group_depth > 0 && group_error == ncclSuccess) group_error = res;
}
