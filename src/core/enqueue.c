/*
 * enqueue.c — every collective and point-to-point entry point.
 *
 * Public entry points validate everything (communicator, buffers, datatype,
 * op, root or peer, count overflow, stream) and WARN naming the argument and
 * its value; past this file the library trusts its inputs. Each call goes
 * through four steps, each a function: validate (the arguments, the
 * operation built from them), place (host thread, weft stream, CUDA stream
 * bridge or IPC path; placement.h), choose (tuner plugin, else the
 * communicator's decision cache, call_cache.h) and dispatch (the small
 * path, or the schedule to the caller's group, or outside one the engine).
 */
#include "enqueue.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "call_cache.h"
#include "window.h"
#include "checks.h"
#include "placement.h"
#include "dtype.h"
#include "env.h"
#include "group.h"
#include "stream.h"
#include "hooks.h"
#include "mismatch.h"
#include "small.h"
#include "tuner.h"

// Zeroes a call's record. Inline, a memset of its ~600 bytes is a `rep
// stos`, whose start-up costs more than the C library's vector stores; kept
// out of line (and, for GCC, out of constant propagation) so it stays a call.
#if defined(__clang__)
static void __attribute__((noinline)) clear(void *p, size_t n) { memset(p, 0, n); }
#else
static void __attribute__((noipa)) clear(void *p, size_t n) { memset(p, 0, n); }
#endif

static ncclResult_t check_buffer(const char *api, const char *name, const void *buf, size_t elems) {
  if (buf == NULL && elems > 0) {
    WARN("%s: %s is NULL with %zu elements to move", api, name, elems);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

// Where the buffers live (docs/gpu_memory.md). Without CUDA: one branch.
// Host buffers run on the host path; device (or managed) buffers on the
// caller's CUDA stream (src/cuda/cuda_stream.c). Both buffers must agree.
static void describe(char *text, size_t len, const weft_mem_info_t *m) {
  if (m->kind == WEFT_MEM_DEVICE || m->kind == WEFT_MEM_MANAGED)
    snprintf(text, len, "%s memory of device %d", weft_mem_kind_name(m->kind), m->device);
  else
    snprintf(text, len, "%s memory", m->registered ? "registered host" : "host");
}

static ncclResult_t check_memory(const char *api, const void *sendbuff, size_t send_bytes, const void *recvbuff,
                                 size_t recv_bytes, int *on_device, int *device) {
  *on_device = 0, *device = -1;
  if (__builtin_expect(atomic_load_explicit(&weft_cuda_state, memory_order_acquire) == WEFT_CUDA_ABSENT, 1))
    return ncclSuccess;
  weft_mem_info_t m[2];
  const void *buf[2] = {sendbuff, recvbuff};
  const char *name[2] = {"sendbuff", "recvbuff"};
  size_t bytes[2] = {send_bytes, recv_bytes};
  for (int i = 0; i < 2; i++) {
    weft_mem_classify(buf[i], bytes[i], &m[i]);
    if (m[i].kind == WEFT_MEM_MIXED) {
      WARN("%s: %s=%p (%zu bytes) starts and ends in different kinds of memory (host/device/managed, or two "
           "devices): a buffer must lie in one allocation", api, name[i], buf[i], bytes[i]);
      return ncclInvalidArgument;
    }
  }
  char text[2][64];
  for (int i = 0; i < 2; i++) describe(text[i], sizeof(text[i]), &m[i]);
  int unused = bytes[0] == 0 ? 0 : bytes[1] == 0 ? 1 : -1;  // a buffer with nothing to move has no kind
  int dev0 = m[0].kind != WEFT_MEM_HOST, dev1 = m[1].kind != WEFT_MEM_HOST;
  if (unused < 0 && (dev0 != dev1 || m[0].device != m[1].device)) {
    WARN("%s: sendbuff=%p is %s but recvbuff=%p is %s: both buffers must be host memory, or memory of one device",
         api, sendbuff, text[0], recvbuff, text[1]);
    return ncclInvalidUsage;
  }
  int used = unused == 0 ? 1 : 0;
  *on_device = m[used].kind != WEFT_MEM_HOST;
  *device = m[used].device;
  return ncclSuccess;
}

// Lower ncclAvg / PreMulSum to the reduce backend's sum + transform.
// The built-in ops: filled in one go (a reduction written field by field
// and then copied whole costs a store-forwarding stall per call).
static int builtin_op(ncclComm_t comm, ncclRedOp_t op, ncclDataType_t dt, weft_redop_t *out) {
  weft_redop_t r = {.dtype = dt, .kind = WEFT_RED_SUM, .postdiv = 1};
  switch ((int)op) {
    case ncclSum: break;
    case ncclProd: r.kind = WEFT_RED_PROD; break;
    case ncclMax: r.kind = WEFT_RED_MAX; break;
    case ncclMin: r.kind = WEFT_RED_MIN; break;
    case ncclAvg:
      if (weft_dtype_is_float(dt)) {
        r.prescale = 1;
        r.scale_f = 1.0 / comm->nranks;
      } else {
        r.postdiv = comm->nranks;
      }
      break;
    default: return 0;
  }
  *out = r;
  return 1;
}

static ncclResult_t resolve_op(ncclComm_t comm, const char *api, ncclRedOp_t op, ncclDataType_t dt,
                               weft_redop_t *out, const void **dev_scalar) {
  *dev_scalar = NULL;
  if (builtin_op(comm, op, dt, out)) return ncclSuccess;
  *out = (weft_redop_t){.dtype = dt, .postdiv = 1};
  int idx = (int)op - ncclNumOps;
  pthread_mutex_lock(&comm->lock);
  int ok = idx >= 0 && idx < WEFT_MAX_PREMUL_OPS && comm->premul[idx].in_use;
  weft_premul_t pm = ok ? comm->premul[idx] : (weft_premul_t){0};
  pthread_mutex_unlock(&comm->lock);
  if (!ok) {
    WARN("%s: op=%d is not a valid ncclRedOp_t on this communicator", api, (int)op);
    return ncclInvalidArgument;
  }
  if (pm.dtype != dt) {
    WARN("%s: op=%d was created for %s but the call uses %s", api, (int)op, weft_dtype_name(pm.dtype),
         weft_dtype_name(dt));
    return ncclInvalidArgument;
  }
  out->kind = WEFT_RED_SUM;
  out->prescale = 1;
  out->scale_i = pm.scale_i;
  out->scale_f = pm.scale_f;
  *dev_scalar = pm.dev_scalar;
  return ncclSuccess;
}

static int is_rooted(weft_coll_t c) {
  return c == WEFT_COLL_BROADCAST || c == WEFT_COLL_REDUCE || c == WEFT_COLL_GATHER || c == WEFT_COLL_SCATTER;
}

// Whether every buffer the call touches on this rank (the root's alone
// are read by a Broadcast) lies in a symmetric window every rank maps. NCCL
// asks that all ranks then pass such buffers, so all choose alike; a rank
// that does not is caught by the descriptor check (mismatch.c).
static int symmetric_buffers(ncclComm_t comm, const weft_op_t *o) {
  size_t sb = weft_coll_send_elems(&o->args) * o->esize, rb = weft_coll_recv_elems(&o->args) * o->esize;
  return (sb == 0 || weft_window_symmetric(comm, o->sendbuff, sb)) &&
         (rb == 0 || weft_window_symmetric(comm, o->recvbuff, rb));
}

// A Recv from any rank (weftRecvAny): where its source goes (NULL: nowhere).
typedef struct {
  int *source;
} any_recv_t;

// A call on its way to the engine. The operation starts on this stack: a
// small call that completes here never needs the heap; one that outlives the
// call moves there (weft_op_to_heap) in dispatch.
typedef struct {
  const char *api;
  ncclRedOp_t op;  // as the caller passed it
  weft_op_t local;
  const void *dev_scalar;      // a PreMulSum scalar in device memory, or NULL
  weft_stream_t *ws;           // the host stream that runs it (NULL: the caller)
  weft_dev_bridge_t *bridge;   // device buffers: the CUDA stream's bridge
  int ipc;                     // device buffers on the IPC path: no staging, no tuner
  weft_proto_t proto;
} call_t;

// 1. Validate: the arguments, then the operation built from them (its
// reduction lowered, its sizes checked). any: a Recv from any rank (root
// is ignored), else NULL.
static ncclResult_t validate(call_t *c, weft_coll_t coll, const void *sendbuff, void *recvbuff, size_t count,
                             ncclDataType_t dtype, ncclRedOp_t op, int root, const any_recv_t *any, ncclComm_t comm,
                             void *api_event) {
  const char *api = c->api = any != NULL ? "weftRecvAny" : weft_coll_name(coll);
  c->op = op;
  WEFTCHECK(weft_comm_check_calls(comm, api));
  weft_debug_set_rank(comm->rank);
  WEFTCHECK(weft_mismatch_settle_due(comm));  // earlier calls' owed checks may find the ranks disagreed
  size_t esize = weft_dtype_size(dtype);
  if ((int)dtype < 0 || (int)dtype >= ncclNumTypes || esize == 0) {
    WARN("%s: datatype=%d is not a valid ncclDataType_t", api, (int)dtype);
    return ncclInvalidArgument;
  }
  // Until it matches a peer, a receive from any rank is built as one from itself (anysrc.h).
  if (any != NULL) root = comm->rank;
  if ((is_rooted(coll) || coll == WEFT_COLL_SEND || coll == WEFT_COLL_RECV) && (root < 0 || root >= comm->nranks)) {
    WARN("%s: %s=%d is out of range for a communicator of %d ranks", api, is_rooted(coll) ? "root" : "peer", root,
         comm->nranks);
    return ncclInvalidArgument;
  }
  weft_op_t *o = &c->local;
  o->comm = comm;
  o->prof.api_event = api_event;  // the profiler's parent for the operation's own event
  o->dtype = dtype;
  o->esize = esize;
  o->user_op = (int)op;
  o->sendbuff = sendbuff;
  o->recvbuff = recvbuff;
  o->cls = (coll == WEFT_COLL_SEND || coll == WEFT_COLL_RECV) ? WEFT_CLASS_P2P : WEFT_CLASS_COLL;
  o->any.on = any != NULL;
  o->any.peer = -1;
  o->any.source = any != NULL ? any->source : NULL;
  o->args = (weft_coll_args_t){.coll = coll, .nranks = comm->nranks, .rank = comm->rank, .root = root,
                               .count = count, .host_of = comm->host_of, .nhosts = comm->nhosts,
                               .order = comm->order, .pos = comm->pos, .numa_of = comm->numa_of,
                               .nnuma = comm->nnuma};
  o->has_op = weft_coll_has_op(coll);
  weft_redop_t red = {0};
  if (o->has_op) WEFTCHECK(resolve_op(comm, api, op, dtype, &red, &c->dev_scalar));
  else o->user_op = 0;
  o->redop = red;
  o->redop_acc = red;  // folding partial results: no prescale
  o->redop_acc.prescale = 0;

  // Buffer sizes, with overflow checks: count * nranks * esize must fit.
  size_t total;
  if (__builtin_mul_overflow(count, esize, &total) || __builtin_mul_overflow(total, (size_t)comm->nranks, &total)) {
    WARN("%s: count=%zu of %s overflows the address space with %d ranks", api, count, weft_dtype_name(dtype),
         comm->nranks);
    return ncclInvalidArgument;
  }
  WEFTCHECK(check_buffer(api, "sendbuff", sendbuff, weft_coll_send_elems(&o->args)));
  return check_buffer(api, "recvbuff", recvbuff, weft_coll_recv_elems(&o->args));
}

// 2. Place: where the call runs. Host buffers on the caller's thread or its
// weft stream; device buffers on their CUDA stream's bridge, whose worker
// is the host stream, or on the GPU itself (the IPC path). A call with
// nothing to move goes nowhere.
static ncclResult_t place(call_t *c, cudaStream_t stream) {
  weft_op_t *o = &c->local;
  const char *api = c->api;
  if (o->args.count == 0) {  // nothing to move: a no-op on every rank, as in NCCL (any CUDA stream will do)
    if (o->any.source != NULL) *o->any.source = -1;  // matches no message
    if (weft_cuda_load() != WEFT_CUDA_PRESENT) WEFTCHECK(weft_stream_resolve(stream, api, &c->ws));
    return ncclSuccess;
  }
  size_t send_bytes = weft_coll_send_elems(&o->args) * o->esize;
  size_t recv_bytes = weft_coll_recv_elems(&o->args) * o->esize;
  int on_device, device;
  WEFTCHECK(check_memory(api, o->sendbuff, send_bytes, o->recvbuff, recv_bytes, &on_device, &device));
  if (on_device && o->any.on) {
    WARN("%s: recvbuff=%p is device memory: a receive from any rank needs host memory", api, o->recvbuff);
    return ncclInvalidUsage;
  }
  if (!on_device && c->dev_scalar != NULL) {
    WARN("%s: op=%d has its scalar in device memory but the buffers are host memory: use device buffers, or "
         "create the op with a host scalar", api, (int)c->op);
    return ncclInvalidUsage;
  }
  if (!on_device) return weft_stream_resolve(stream, api, &c->ws);
  WEFTCHECK(weft_cuda_bridge_get(o->comm, stream, device, api, &c->bridge));
  c->ws = weft_cuda_bridge_worker(c->bridge);
  o->dev.on = 1;
  o->dev.device = device;
  o->dev.send = send_bytes > 0 ? o->sendbuff : NULL;
  o->dev.recv = recv_bytes > 0 ? o->recvbuff : NULL;
  o->dev.scalar = c->dev_scalar;
  c->ipc = weft_cuda_ipc_eligible(o);  // on the GPU, no staging
  return ncclSuccess;
}

// 3. Choose: the algorithm, the slice and the protocol, from the
// communicator's decision cache (call_cache.h). A tuner plugin may answer
// differently each time, so it is asked every time, after the cache.
static ncclResult_t choose(call_t *c) {
  weft_op_t *o = &c->local;
  ncclComm_t comm = o->comm;
  int on_device = o->dev.on;
  size_t esize = o->esize;
  weft_tuner_params_t tp = {.slot_bytes = comm->tv.slot_bytes, .nslots = comm->tv.nslots,
                            .oneshot_max = (size_t)weft_env_WEFT_ONESHOT_MAX_BYTES(),
                            .can_read = comm->tv.can_read,
                            // device buffers travel through staging: single copy only when asked
                            .read_min = on_device ? 0 : weft_env_WEFT_READ_MIN_BYTES(),
                            .algo_spec = weft_env_NCCL_ALGO(),
                            .proto_spec = weft_env_NCCL_PROTO(),
                            .ll_max = WEFT_SMALL_MAX_BYTES};
  tp.mapped = !on_device && atomic_load_explicit(&comm->nsymmetric, memory_order_relaxed) > 0 &&
              weft_tuner_mapped_matters(&tp, o->args.coll, o->args.count * esize) && symmetric_buffers(comm, o);
  WEFTCHECK(weft_call_choose(&comm->calls, &tp, &o->args, esize, &o->algo, &c->proto));
  if (__builtin_expect(comm->tuner == NULL, 1)) return ncclSuccess;
  // The plugin adjusts weft's own (cached) answer.
  weft_plugin_hooks.tune(comm->tuner, &tp, &o->args, esize, &o->algo);
  c->proto = weft_tuner_proto(&tp, &o->args, o->algo, esize);
  return ncclSuccess;
}

// 4. Dispatch: an IPC-path call to its CUDA stream; a small call that
// completes on return straight to the FIFOs; any other with its schedule to
// the group, or outside one to the engine.
static ncclResult_t dispatch(call_t *c) {
  weft_op_t *o = &c->local;
  ncclResult_t res = ncclSuccess;
  if (c->ws == NULL && c->bridge == NULL && weft_group_depth() == 0 && c->proto == WEFT_PROTO_LL &&
      weft_small_try(o, &res)) {
    weft_op_release_comm(o);
    return res;
  }
  if ((o = weft_op_to_heap(&c->local)) == NULL) return ncclSystemError;
  if (c->ipc) return weft_group_add_ipc(o, c->bridge);
  res = weft_schedule_build(&o->args, o->algo, &o->sched);
  if (res != ncclSuccess) {
    weft_op_free(o);
    return res;
  }
  TRACE(WEFT_LOG_COLL, "%s count=%zu %s op=%d root=%d algo=%s steps=%u", c->api, o->args.count,
        weft_dtype_name(o->dtype), (int)c->op, o->args.root, weft_algo_name(o->algo), o->sched.nsteps);
  return weft_group_add(o, c->ws, c->bridge);
}

// A call, validated, placed, its algorithm chosen and dispatched.
static ncclResult_t enqueue_checked(weft_coll_t coll, const void *sendbuff, void *recvbuff, size_t count,
                                    ncclDataType_t dtype, ncclRedOp_t op, int root, const any_recv_t *any,
                                    ncclComm_t comm, cudaStream_t stream, void *api_event) {
  call_t c;
  clear(&c, sizeof(c));
  WEFTCHECK(validate(&c, coll, sendbuff, recvbuff, count, dtype, op, root, any, comm, api_event));
  WEFTCHECK(place(&c, stream));
  if (count == 0) return ncclSuccess;
  if (!c.ipc) WEFTCHECK(choose(&c));
  return dispatch(&c);
}

static ncclResult_t enqueue(weft_coll_t coll, const void *sendbuff, void *recvbuff, size_t count,
                            ncclDataType_t dtype, ncclRedOp_t op, int root, const any_recv_t *any,
                            ncclComm_t comm, cudaStream_t stream) {
  // The profiler's API events: comm is not validated yet, so only a live one is asked.
  void *api_event = NULL;
  int profiled = __builtin_expect(weft_plugin_hooks.api_start != NULL, 0) && weft_registry_contains(comm) &&
                 comm->prof != NULL;
  if (profiled)
    api_event = weft_plugin_hooks.api_start(comm->prof, comm->rank, coll, count, dtype, root, (void *)stream,
                                            weft_group_depth());
  ncclResult_t res =
      enqueue_checked(coll, sendbuff, recvbuff, count, dtype, op, root, any, comm, stream, api_event);
  if (profiled) weft_plugin_hooks.api_stop(api_event);
  if (res != ncclSuccess) weft_group_note_error(res);  // a bad call inside a group fails the whole group
  return res;
}

ncclResult_t weft_enqueue(weft_coll_t coll, const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t dtype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return enqueue(coll, sendbuff, recvbuff, count, dtype, op, root, NULL, comm, stream);
}

NCCL_API(ncclResult_t, ncclAllReduce, const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
         ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                            ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return weft_enqueue(WEFT_COLL_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, 0, comm, stream);
}

NCCL_API(ncclResult_t, ncclBroadcast, const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
         int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                            ncclComm_t comm, cudaStream_t stream) {
  return weft_enqueue(WEFT_COLL_BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
}

NCCL_API(ncclResult_t, ncclBcast, void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
         cudaStream_t stream);
ncclResult_t pncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                        cudaStream_t stream) {
  return weft_enqueue(WEFT_COLL_BROADCAST, buff, buff, count, datatype, ncclSum, root, comm, stream);
}

NCCL_API(ncclResult_t, ncclReduce, const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
         ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                         int root, ncclComm_t comm, cudaStream_t stream) {
  return weft_enqueue(WEFT_COLL_REDUCE, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

NCCL_API(ncclResult_t, ncclAllGather, const void *sendbuff, void *recvbuff, size_t sendcount,
         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                            ncclComm_t comm, cudaStream_t stream) {
  return weft_enqueue(WEFT_COLL_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm, stream);
}

NCCL_API(ncclResult_t, ncclReduceScatter, const void *sendbuff, void *recvbuff, size_t recvcount,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
                                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return weft_enqueue(WEFT_COLL_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0, comm, stream);
}

NCCL_API(ncclResult_t, ncclAlltoAll, const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
         ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  return weft_enqueue(WEFT_COLL_ALLTOALL, sendbuff, recvbuff, count, datatype, ncclSum, 0, comm, stream);
}

NCCL_API(ncclResult_t, ncclGather, const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
         int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclGather(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream) {
  return weft_enqueue(WEFT_COLL_GATHER, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
}

NCCL_API(ncclResult_t, ncclScatter, const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
         int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclScatter(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                          ncclComm_t comm, cudaStream_t stream) {
  return weft_enqueue(WEFT_COLL_SCATTER, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
}

NCCL_API(ncclResult_t, ncclSend, const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
         ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream) {
  return weft_enqueue(WEFT_COLL_SEND, sendbuff, NULL, count, datatype, ncclSum, peer, comm, stream);
}

NCCL_API(ncclResult_t, ncclRecv, void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
         cudaStream_t stream);
ncclResult_t pncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream) {
  return weft_enqueue(WEFT_COLL_RECV, NULL, recvbuff, count, datatype, ncclSum, peer, comm, stream);
}

WEFT_API(ncclResult_t, weftRecvAny, void *recvbuff, size_t count, ncclDataType_t datatype, int *source,
         ncclComm_t comm, cudaStream_t stream);
ncclResult_t weftRecvAny(void *recvbuff, size_t count, ncclDataType_t datatype, int *source, ncclComm_t comm,
                         cudaStream_t stream) {
  any_recv_t any = {.source = source};
  return enqueue(WEFT_COLL_RECV, NULL, recvbuff, count, datatype, ncclSum, -1, &any, comm, stream);
}
