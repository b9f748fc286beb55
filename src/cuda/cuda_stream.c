/*
 * cuda_stream.c — device buffers on CUDA streams: bridges, staging and the
 * handshake between a GPU stream and weft's host engine (see cuda_stream.h
 * and docs/gpu_memory.md).
 *
 * Per batch k on a bridge, queued on the caller's stream at call time:
 *   1. copy each send region (and a device-resident PreMulSum scalar) into
 *      pinned host staging;
 *   2. WRITE reached = k (the default flags put a fence before it, so the
 *      staged bytes are visible when the host sees k);
 *   3. WAIT done >= k (cyclic compare; nothing after the call on the stream
 *      runs until the host stored it);
 *   4. copy each recv region back from staging;
 *   5. WRITE freed = k: the staging of batch k may be reused.
 * The bridge's worker waits for reached >= k, runs the batch with the
 * engine on the staging buffers, and stores done = k. The counters only
 * grow and are compared as (int32_t)(x - k) >= 0, so they never reset.
 *
 * Only the caller's thread queues stream work (with the stream's context
 * pushed); the worker touches host memory only, so it needs no context.
 */
#include "cuda_stream.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checks.h"
#include "cuda_rt.h"
#include "cuda_ring.h"
#include "cuda_staging.h"
#include "dtype.h"
#include "env.h"
#include "stream.h"
#include "util.h"

enum { FLAG_REACHED = 0, FLAG_DONE = 16, FLAG_FREED = 32, FLAGS_BYTES = 192 };  // uint32 indices, 64 B apart
#define STAGE_ALIGN 64
#define STAGE_MIN_BYTES ((size_t)1 << 20)
#define DEDICATED_MAX 4  // dedicated blocks of one size a bridge may have in flight before calls wait
#define CU_STREAM_PER_THREAD_HANDLE ((weft_CUstream)(uintptr_t)0x2)

struct weft_cuda_bridge {
  weft_CUcontext ctx;
  weft_CUstream stream;
  pthread_t owner;       // CU_STREAM_PER_THREAD: each thread has its own stream
  int device;
  _Atomic uint32_t *flags;  // pinned, device-mapped host memory
  int flags_reserved;       // a slot of the context's reserve (else our own allocation)
  weft_CUdeviceptr flags_dev;
  pthread_mutex_t lock;  // issued, ring, pool
  uint32_t issued;       // the last gate number handed out
  staging_t *ring_block; // the staging ring's memory (NULL: none, every batch takes a block)
  weft_ring_t ring;
  staging_t *pool;       // dedicated blocks, for batches the ring cannot hold
  weft_stream_t *worker;
  int users;             // communicators holding it (registry lock)
  struct weft_cuda_bridge *next;
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static weft_dev_bridge_t *registry;

static void nap_ns(int64_t ns) {
  struct timespec ts = {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};
  nanosleep(&ts, NULL);
}

static ncclResult_t cu_fail(const char *api, const char *call, weft_CUresult r) {
  WARN("%s: %s failed: CUDA error %d (%s)", api, call, r, weft_cuda_error_text(r));
  return ncclUnhandledCudaError;
}
#define CUCALL(api, call, expr)                                  \
  do {                                                           \
    weft_CUresult r_ = (expr);                                   \
    if (r_ != WEFT_CUDA_SUCCESS) return cu_fail(api, call, r_);  \
  } while (0)

/* ---------- bridges ---------- */

static void bridge_free(weft_dev_bridge_t *c, const weft_cuda_driver_t *d);

static ncclResult_t bridge_create(const weft_cuda_driver_t *d, weft_CUcontext ctx, weft_CUstream stream, int device,
                                  const char *api, weft_dev_bridge_t **out) {
  weft_dev_bridge_t *c = calloc(1, sizeof(*c));
  if (c == NULL) return ncclSystemError;
  c->ctx = ctx;
  c->stream = stream;
  c->owner = pthread_self();
  c->device = device;
  pthread_mutex_init(&c->lock, NULL);
  void *flags = NULL;
  weft_CUresult r = WEFT_CUDA_SUCCESS;
  if (weft_cuda_reserve_counters(ctx, &flags, &c->flags_dev)) {
    c->flags = flags;
    c->flags_reserved = 1;
  } else {
    r = d->cuMemHostAlloc(&flags, FLAGS_BYTES, WEFT_CU_MEMHOSTALLOC_PORTABLE | WEFT_CU_MEMHOSTALLOC_DEVICEMAP);
    if (r == WEFT_CUDA_SUCCESS) {
      memset(flags, 0, FLAGS_BYTES);
      c->flags = flags;
      r = d->cuMemHostGetDevicePointer(&c->flags_dev, flags, 0);
    }
  }
  ncclResult_t res = r == WEFT_CUDA_SUCCESS ? ncclSuccess
                     : cu_fail(api, c->flags == NULL ? "cuMemHostAlloc" : "cuMemHostGetDevicePointer", r);
  if (res == ncclSuccess && (c->ring_block = weft_cuda_reserve_take(ctx, 1)) != NULL)
    weft_ring_init(&c->ring, c->ring_block->bytes);
  if (res == ncclSuccess) res = weft_stream_create_private(&c->worker);
  if (res != ncclSuccess) {
    bridge_free(c, d);
    return res;
  }
  INFO(WEFT_LOG_INIT, "CUDA stream %p of device %d: bridge ready (counters at %p)", (void *)stream, device, flags);
  *out = c;
  return ncclSuccess;
}

// Waits (bounded) until the stream finished with every staging block, then
// frees them; a context that no longer exists leaves them to the process.
static void bridge_free(weft_dev_bridge_t *c, const weft_cuda_driver_t *d) {
  if (c->worker != NULL) weft_stream_destroy_private(c->worker);  // every batch ran and opened its gate
  int64_t limit = weft_timeout_ms() > 0 ? weft_timeout_ms() : 60000;  // never wait forever at teardown
  int64_t end = weft_now_ms() + limit;
  while (c->flags != NULL && c->issued != 0 && !weft_cyclic_ge(atomic_load(&c->flags[FLAG_FREED]), c->issued) &&
         weft_now_ms() < end)
    nap_ns(100000);
  int drained = c->flags == NULL || c->issued == 0 || weft_cyclic_ge(atomic_load(&c->flags[FLAG_FREED]), c->issued);
  if (!drained)
    WARN("CUDA stream %p has not finished weft's copies after %d ms; keeping its staging memory", (void *)c->stream,
         (int)limit);
  if (drained) {  // the staging goes back to the context's reserve; counters too, or are freed
    if (c->ring_block != NULL) c->ring_block->next = c->pool, c->pool = c->ring_block;
    weft_cuda_reserve_give(c->ctx, c->pool);
    if (c->flags_reserved) {
      weft_cuda_reserve_counters_put(c->ctx, (void *)c->flags);
    } else if (c->flags != NULL && d->cuCtxPushCurrent(c->ctx) == WEFT_CUDA_SUCCESS) {
      d->cuMemFreeHost((void *)c->flags);
      weft_CUcontext popped;
      d->cuCtxPopCurrent(&popped);
    }
  }
  pthread_mutex_destroy(&c->lock);
  free(c);
}

// Remembers that comm uses c (once).
static ncclResult_t comm_hold(struct ncclComm *comm, weft_dev_bridge_t *c) {
  for (int i = 0; i < comm->ncuda_bridges; i++)
    if (comm->cuda_bridges[i] == c) return ncclSuccess;
  weft_dev_bridge_t **list = realloc(comm->cuda_bridges, sizeof(*list) * (size_t)(comm->ncuda_bridges + 1));
  if (list == NULL) return ncclSystemError;
  comm->cuda_bridges = list;
  list[comm->ncuda_bridges++] = c;
  c->users++;
  return ncclSuccess;
}

// The context a stream belongs to; the NULL stream's is the caller's current one.
static ncclResult_t stream_context(const weft_cuda_driver_t *d, weft_CUstream s, const char *api,
                                   weft_CUcontext *ctx) {
  weft_CUresult r = d->cuStreamGetCtx(s, ctx);
  if (r == WEFT_CUDA_SUCCESS && *ctx != NULL) return ncclSuccess;
  if (r == WEFT_CUDA_SUCCESS || r == WEFT_CUDA_ERROR_INVALID_CONTEXT) {
    WARN("%s: stream=%p: this thread has no current CUDA context (call cudaSetDevice first)", api, (void *)s);
    return ncclInvalidUsage;
  }
  WARN("%s: stream=%p is not a CUDA stream (cuStreamGetCtx: CUDA error %d, %s)", api, (void *)s, r,
       weft_cuda_error_text(r));
  return ncclInvalidArgument;
}

ncclResult_t weft_cuda_bridge_get(struct ncclComm *comm, cudaStream_t stream, int device, const char *api,
                                  weft_dev_bridge_t **out) {
  const weft_cuda_driver_t *d = weft_cuda_driver();
  if (!weft_cuda_has_engine(d)) {
    WARN("%s: device buffers need the CUDA driver's stream memory operations and pinned host memory, which this "
         "driver does not export", api);
    return ncclInvalidUsage;
  }
  weft_CUstream s = (weft_CUstream)(void *)stream;
  int capture = WEFT_CU_STREAM_CAPTURE_STATUS_NONE;
  weft_CUresult r = d->cuStreamIsCapturing(s, &capture);
  if (r == WEFT_CUDA_SUCCESS && capture != WEFT_CU_STREAM_CAPTURE_STATUS_NONE) {
    WARN("%s: stream=%p is being captured into a CUDA graph; weft cannot be captured (its calls meet the host "
         "engine through counters that a replayed graph would reuse): call it outside the capture", api,
         (void *)stream);
    return ncclInvalidUsage;
  }
  weft_CUcontext ctx;
  WEFTCHECK(stream_context(d, s, api, &ctx));
  WEFTCHECK(d->cuCtxPushCurrent(ctx) == WEFT_CUDA_SUCCESS ? ncclSuccess : cu_fail(api, "cuCtxPushCurrent", 1));
  weft_CUdevice ctx_dev = -1;
  r = d->cuCtxGetDevice(&ctx_dev);
  ncclResult_t res = r == WEFT_CUDA_SUCCESS ? ncclSuccess : cu_fail(api, "cuCtxGetDevice", r);
  if (res == ncclSuccess && ctx_dev != device) {
    WARN("%s: the buffers are memory of device %d but stream=%p belongs to device %d", api, device,
         (void *)stream, (int)ctx_dev);
    res = ncclInvalidUsage;
  }
  pthread_mutex_lock(&registry_lock);
  weft_dev_bridge_t *c = NULL;
  if (res == ncclSuccess) {
    for (c = registry; c != NULL; c = c->next)
      if (c->ctx == ctx && c->stream == s && (s != CU_STREAM_PER_THREAD_HANDLE || pthread_equal(c->owner, pthread_self())))
        break;
    if (c == NULL && (res = bridge_create(d, ctx, s, device, api, &c)) == ncclSuccess) {
      c->next = registry;
      registry = c;
    }
  }
  if (res == ncclSuccess) res = comm_hold(comm, c);
  pthread_mutex_unlock(&registry_lock);
  weft_CUcontext popped;
  d->cuCtxPopCurrent(&popped);
  *out = res == ncclSuccess ? c : NULL;
  return res;
}

weft_stream_t *weft_cuda_bridge_worker(weft_dev_bridge_t *bridge) { return bridge->worker; }
void *weft_cuda_bridge_context(const weft_dev_bridge_t *bridge) { return bridge->ctx; }
void *weft_cuda_bridge_stream(const weft_dev_bridge_t *bridge) { return bridge->stream; }

void weft_cuda_comm_release(struct ncclComm *comm) {
  if (comm->ncuda_bridges == 0) return;
  const weft_cuda_driver_t *d = weft_cuda_driver();
  for (int i = 0; i < comm->ncuda_bridges; i++) {
    weft_dev_bridge_t *c = comm->cuda_bridges[i];
    pthread_mutex_lock(&registry_lock);
    int last = --c->users == 0;
    if (last) {
      for (weft_dev_bridge_t **p = &registry; *p != NULL; p = &(*p)->next)
        if (*p == c) {
          *p = c->next;
          break;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    if (last) bridge_free(c, d);
  }
  free(comm->cuda_bridges);
  comm->cuda_bridges = NULL;
  comm->ncuda_bridges = 0;
}

int weft_cuda_comm_streams_drain(struct ncclComm *comm, int64_t limit_ms) {
  const weft_cuda_driver_t *d = weft_cuda_driver();
  if (comm->ncuda_bridges == 0) return 1;
  if (d == NULL || d->cuStreamQuery == NULL) return 0;
  int64_t end = weft_now_ms() + limit_ms;
  int idle = 1;
  for (int i = 0; i < comm->ncuda_bridges && idle; i++) {
    weft_dev_bridge_t *c = comm->cuda_bridges[i];
    if (d->cuCtxPushCurrent(c->ctx) != WEFT_CUDA_SUCCESS) return 0;
    while (d->cuStreamQuery(c->stream) == WEFT_CUDA_ERROR_NOT_READY && (idle = weft_now_ms() < end))
      nap_ns(1000000);
    weft_CUcontext popped;
    d->cuCtxPopCurrent(&popped);
  }
  return idle;
}

/* ---------- staging ---------- */

// A block of at least `bytes` whose last user the stream has finished with
// (bridge->lock held, context current): the bridge's own, else one from the
// context's reserve, else newly pinned (cuda_staging.h says why that is the
// last resort). Blocks are never freed while the bridge lives.
static staging_t *staging_take(weft_dev_bridge_t *c, const weft_cuda_driver_t *d, size_t bytes, ncclResult_t *res,
                               int *must_wait) {
  uint32_t freed = atomic_load_explicit(&c->flags[FLAG_FREED], memory_order_acquire);
  staging_t *best = NULL;
  int in_flight = 0;  // big enough, busy with queued batches: they will come back
  *must_wait = 0;
  for (staging_t *b = c->pool; b != NULL; b = b->next) {
    if (b->busy && b->k != 0 && weft_cyclic_ge(freed, b->k)) b->busy = 0;
    if (b->bytes < bytes) continue;
    if (!b->busy && (best == NULL || b->bytes < best->bytes)) best = b;
    in_flight += b->busy && b->k != 0;
  }
  if (best != NULL) return best;
  if ((best = weft_cuda_reserve_take(c->ctx, bytes)) != NULL) {  // reserved at communicator creation
    best->next = c->pool;
    c->pool = best;
    return best;
  }
  if (in_flight >= DEDICATED_MAX) {  // back-pressure: no more pinned memory for calls in flight
    *must_wait = 1;
    return NULL;
  }
  size_t want = STAGE_MIN_BYTES;
  while (want < bytes && want < ((size_t)1 << 62)) want <<= 1;
  staging_t *b = calloc(1, sizeof(*b));
  if (b == NULL) {
    *res = ncclSystemError;
    return NULL;
  }
  void *host = NULL;
  weft_CUresult r = d->cuMemHostAlloc(&host, want, WEFT_CU_MEMHOSTALLOC_PORTABLE);
  if (r != WEFT_CUDA_SUCCESS) {
    free(b);
    *res = cu_fail("CUDA stream", "cuMemHostAlloc (staging)", r);
    return NULL;
  }
  INFO(WEFT_LOG_ALLOC, "CUDA stream %p: %zu bytes of pinned staging", (void *)c->stream, want);
  b->host = host;
  b->bytes = want;
  b->next = c->pool;
  c->pool = b;
  return b;
}

static size_t align_up(size_t x) { return (x + STAGE_ALIGN - 1) & ~(size_t)(STAGE_ALIGN - 1); }

static size_t send_bytes(const weft_op_t *op) {
  return op->dev.send != NULL ? weft_coll_send_elems(&op->args) * op->esize : 0;
}
static size_t recv_bytes(const weft_op_t *op) {
  return op->dev.recv != NULL ? weft_coll_recv_elems(&op->args) * op->esize : 0;
}

// Places one operation's buffers in staging at `at` (returns the bytes
// used). In-place calls keep their aliasing: a send region inside the recv
// region (or the reverse) is staged once, at the same offset.
static size_t op_place(weft_op_t *op, char *base, size_t at) {
  size_t sb = send_bytes(op), rb = recv_bytes(op), start = at;
  uintptr_t s = (uintptr_t)op->dev.send, r = (uintptr_t)op->dev.recv;
  char *send_at, *recv_at;
  if (sb && rb && s >= r && s + sb <= r + rb) {
    recv_at = base + at, send_at = recv_at + (s - r), at += align_up(rb);
  } else if (sb && rb && r >= s && r + rb <= s + sb) {
    send_at = base + at, recv_at = send_at + (r - s), at += align_up(sb);
  } else {
    send_at = base + at, at += align_up(sb);
    recv_at = base + at, at += align_up(rb);
  }
  if (base != NULL) {
    op->sendbuff = sb > 0 ? send_at : NULL;
    op->recvbuff = rb > 0 ? recv_at : NULL;
    op->dev.scalar_stage = op->dev.scalar != NULL ? base + at : NULL;
  }
  if (op->dev.scalar != NULL) at += STAGE_ALIGN;
  return at - start;
}

/* ---------- batches ---------- */

// Room for `total` bytes: a region of the ring when it has or will have
// one (waiting for the stream, which frees regions in order), else a
// dedicated block. bridge->lock held; it is let go while waiting.
static ncclResult_t stage_room(weft_dev_bridge_t *c, const weft_cuda_driver_t *d, size_t total, weft_dev_gate_t *g,
                               char **host) {
  int64_t start = weft_now_ns(), nap = 2000, warned = 0;
  for (;;) {
    int wait = 0;
    if (c->ring_block != NULL) {
      weft_ring_reclaim(&c->ring, atomic_load_explicit(&c->flags[FLAG_FREED], memory_order_acquire));
      size_t off;
      int rc = weft_ring_take(&c->ring, total, &off, &g->slot);
      if (rc == WEFT_RING_OK) {
        *host = c->ring_block->host + off;
        return ncclSuccess;
      }
      wait = rc == WEFT_RING_WAIT;
    }
    g->slot = -1;
    if (!wait) {
      ncclResult_t res = ncclSuccess;
      staging_t *b = staging_take(c, d, total, &res, &wait);
      if (b != NULL) {
        b->busy = 1, b->k = 0;  // reserved; its batch number comes when it is queued
        g->block = b;
        *host = b->host;
        return ncclSuccess;
      }
      if (!wait) return res;
    }
    int64_t idle = weft_now_ns() - start;
    if (weft_timeout_due(idle, warned)) {  // the stream does not move
      char reason[160];
      snprintf(reason, sizeof(reason), "CUDA stream %p: no staging freed for %lld ms (is earlier work on it stuck?)",
               (void *)c->stream, (long long)(idle / 1000000));
      if (weft_timeout_warn(reason)) return ncclTimeout;
      warned++;
    }
    pthread_mutex_unlock(&c->lock);
    nap_ns(nap);
    if (nap < 100000) nap *= 2;
    pthread_mutex_lock(&c->lock);
  }
}

ncclResult_t weft_cuda_batch_stage(weft_dev_bridge_t *c, weft_op_t **ops, int nops, weft_dev_gate_t *gate) {
  const weft_cuda_driver_t *d = weft_cuda_driver();
  *gate = (weft_dev_gate_t){.slot = -1};
  size_t total = 0;
  for (int i = 0; i < nops; i++) total += op_place(ops[i], NULL, total);
  if (d->cuCtxPushCurrent(c->ctx) != WEFT_CUDA_SUCCESS) {
    WARN("CUDA stream %p: its context can no longer be made current", (void *)c->stream);
    return ncclUnhandledCudaError;
  }
  weft_dev_gate_t g = {.bridge = c, .slot = -1};
  char *host = NULL;
  pthread_mutex_lock(&c->lock);
  ncclResult_t res = stage_room(c, d, total > 0 ? total : 1, &g, &host);
  pthread_mutex_unlock(&c->lock);
  weft_CUcontext popped;
  d->cuCtxPopCurrent(&popped);
  if (res != ncclSuccess) return res;
  for (size_t i = 0, at = 0; i < (size_t)nops; i++) at += op_place(ops[i], host, at);
  *gate = g;
  return ncclSuccess;
}

// The batch's staging is not in use any more (it was never queued, or its
// stream work was synchronised). bridge->lock held.
static void release_room(weft_dev_gate_t *g) {
  if (g->slot >= 0) weft_ring_drop(&g->bridge->ring, g->slot);
  else if (g->block != NULL) g->block->busy = 0;
}

void weft_cuda_batch_unstage(weft_dev_gate_t *gate) {
  if (gate->bridge == NULL || gate->k != 0) return;
  pthread_mutex_lock(&gate->bridge->lock);
  release_room(gate);
  pthread_mutex_unlock(&gate->bridge->lock);
  *gate = (weft_dev_gate_t){.slot = -1};
}

static weft_CUdeviceptr dptr(const void *p) { return (weft_CUdeviceptr)(uintptr_t)p; }

// The stream work of batch k; *waiting says whether its WAIT is queued
// (from then on the worker must see the gate, or the stream never moves on).
static ncclResult_t queue_ops(weft_dev_bridge_t *c, const weft_cuda_driver_t *d, weft_op_t **ops, int nops,
                              uint32_t k, int *waiting) {
  const char *api = "CUDA stream";
  weft_CUstream s = c->stream;
  for (int i = 0; i < nops; i++) {
    size_t sb = send_bytes(ops[i]);
    if (sb > 0)
      CUCALL(api, "cuMemcpyAsync (device to staging)",
             d->cuMemcpyAsync(dptr(ops[i]->sendbuff), dptr(ops[i]->dev.send), sb, s));
    if (ops[i]->dev.scalar != NULL)
      CUCALL(api, "cuMemcpyAsync (scalar)",
             d->cuMemcpyAsync(dptr(ops[i]->dev.scalar_stage), dptr(ops[i]->dev.scalar), ops[i]->esize, s));
  }
  CUCALL(api, "cuStreamWriteValue32 (reached)",
         d->cuStreamWriteValue32(s, c->flags_dev + FLAG_REACHED * 4, k, WEFT_CU_STREAM_WRITE_VALUE_DEFAULT));
  CUCALL(api, "cuStreamWaitValue32 (done)",
         d->cuStreamWaitValue32(s, c->flags_dev + FLAG_DONE * 4, k, WEFT_CU_STREAM_WAIT_VALUE_GEQ));
  *waiting = 1;
  for (int i = 0; i < nops; i++) {
    size_t rb = recv_bytes(ops[i]);
    if (rb > 0)
      CUCALL(api, "cuMemcpyAsync (staging to device)",
             d->cuMemcpyAsync(dptr(ops[i]->dev.recv), dptr(ops[i]->recvbuff), rb, s));
  }
  CUCALL(api, "cuStreamWriteValue32 (freed)",
         d->cuStreamWriteValue32(s, c->flags_dev + FLAG_FREED * 4, k, WEFT_CU_STREAM_WRITE_VALUE_DEFAULT));
  return ncclSuccess;
}

ncclResult_t weft_cuda_batch_queue(weft_dev_gate_t *gate, weft_op_t **ops, int nops) {
  const weft_cuda_driver_t *d = weft_cuda_driver();
  weft_dev_bridge_t *c = gate->bridge;
  if (d->cuCtxPushCurrent(c->ctx) != WEFT_CUDA_SUCCESS) {
    weft_cuda_batch_unstage(gate);
    WARN("CUDA stream %p: its context can no longer be made current", (void *)c->stream);
    return ncclUnhandledCudaError;
  }
  int waiting = 0;
  pthread_mutex_lock(&c->lock);
  uint32_t k = ++c->issued;
  if (k == 0) k = ++c->issued;  // 0 never names a batch
  gate->k = k;
  if (gate->slot >= 0) weft_ring_set_k(&c->ring, gate->slot, k);
  else gate->block->k = k;
  ncclResult_t res = queue_ops(c, d, ops, nops, k, &waiting);
  pthread_mutex_unlock(&c->lock);
  if (res != ncclSuccess && !waiting) {
    // Nothing waits on the worker: let the copies already queued finish, then
    // the staging is free again (if the sync fails, it stays taken).
    if (d->cuStreamSynchronize(c->stream) == WEFT_CUDA_SUCCESS) {
      pthread_mutex_lock(&c->lock);
      release_room(gate);
      pthread_mutex_unlock(&c->lock);
    }
    *gate = (weft_dev_gate_t){.slot = -1};
  }  // with the WAIT queued the caller abandons the gate: the worker releases the stream in order
  weft_CUcontext popped;
  d->cuCtxPopCurrent(&popped);
  if (res == ncclSuccess)
    TRACE(WEFT_LOG_COLL, "CUDA stream %p: batch %u of %d call(s) queued", (void *)c->stream, k, nops);
  return res;
}

/* ---------- the worker's side ---------- */

void weft_cuda_gate_wait(const weft_dev_gate_t *g, weft_op_t **ops, int nops) {
  _Atomic uint32_t *reached = &g->bridge->flags[FLAG_REACHED];
  int64_t start = weft_now_ns(), spin_ns = weft_spin_ns(0), nap = 1000;
  int64_t warn_at = weft_timeout_ms() > 0 ? start + weft_timeout_ms() * 1000000 : 0;
  int spinning = 1;  // for WEFT_SPIN_NS, then naps of 1 µs doubling up to 200 µs
  for (unsigned i = 0; !weft_cyclic_ge(atomic_load_explicit(reached, memory_order_acquire), g->k); i++) {
    if (spinning) {
      if ((i & 15) == 0 && weft_now_ns() - start >= spin_ns) spinning = 0;
      else if ((i & 63) == 0) sched_yield();
      continue;
    }
    int64_t now = weft_now_ns();
    if (warn_at != 0 && now > warn_at) {
      WARN("CUDA stream %p has not reached weft's call (batch %u) after %d ms: is earlier work on it stuck?",
           (void *)g->bridge->stream, g->k, (int)weft_timeout_ms());
      warn_at = 0;
    }
    nap_ns(nap);
    if (nap < 200000) nap *= 2;
  }
  for (int i = 0; i < nops; i++) {
    weft_op_t *op = ops[i];
    if (op->dev.scalar_stage == NULL) continue;
    weft_premul_t pm = {.dtype = op->dtype};
    weft_premul_read_scalar(op->dev.scalar_stage, op->dtype, &pm);
    op->redop.scale_i = op->redop_acc.scale_i = pm.scale_i;
    op->redop.scale_f = op->redop_acc.scale_f = pm.scale_f;
  }
}

void weft_cuda_gate_open(const weft_dev_gate_t *g) {
  atomic_store_explicit(&g->bridge->flags[FLAG_DONE], g->k, memory_order_release);
}

void weft_cuda_gate_abandon(weft_dev_gate_t *g) {
  if (g->bridge == NULL) return;
  if (g->k == 0) weft_cuda_batch_unstage(g);  // staged, never queued
  else weft_stream_submit_gated(g->bridge->worker, NULL, 0, g);
  *g = (weft_dev_gate_t){.slot = -1};
}

int weft_cuda_scalar_on_device(const void *scalar, size_t bytes) {
  weft_mem_info_t m;
  weft_mem_classify(scalar, bytes, &m);
  return m.kind == WEFT_MEM_DEVICE || m.kind == WEFT_MEM_MANAGED;
}
