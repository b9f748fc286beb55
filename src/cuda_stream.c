/*
 * cuda_stream.c — device buffers on CUDA streams: channels, staging and the
 * handshake between a GPU stream and weft's host engine (see cuda_stream.h
 * and docs/gpu_memory.md).
 *
 * Per batch k on a channel, queued on the caller's stream at call time:
 *   1. copy each send region (and a device-resident PreMulSum scalar) into
 *      pinned host staging;
 *   2. WRITE reached = k (the default flags put a fence before it, so the
 *      staged bytes are visible when the host sees k);
 *   3. WAIT done >= k (cyclic compare; nothing after the call on the stream
 *      runs until the host stored it);
 *   4. copy each recv region back from staging;
 *   5. WRITE freed = k: the staging of batch k may be reused.
 * The channel's worker waits for reached >= k, runs the batch with the
 * engine on the staging buffers, and stores done = k. The counters only
 * grow and are compared as (int32_t)(x - k) >= 0, so they never reset.
 *
 * Only the caller's thread queues stream work (with the stream's context
 * pushed); the worker touches host memory only, so it needs no context.
 */
#include "cuda_stream.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checks.h"
#include "cuda_rt.h"
#include "dtype.h"
#include "env.h"
#include "stream.h"
#include "util.h"

enum { FLAG_REACHED = 0, FLAG_DONE = 16, FLAG_FREED = 32, FLAGS_BYTES = 192 };  // uint32 indices, 64 B apart
#define STAGE_ALIGN 64
#define STAGE_MIN_BYTES ((size_t)1 << 16)
#define POOL_KEEP 4       // idle staging blocks a channel keeps
#define CU_STREAM_PER_THREAD_HANDLE ((weft_CUstream)(uintptr_t)0x2)

typedef struct staging {
  char *host;
  size_t bytes;
  uint32_t k;   // the last batch that used it
  int busy;     // until the stream wrote freed >= k
  struct staging *next;
} staging_t;

struct weft_cuda_chan {
  weft_CUcontext ctx;
  weft_CUstream stream;
  pthread_t owner;       // CU_STREAM_PER_THREAD: each thread has its own stream
  int device;
  _Atomic uint32_t *flags;  // pinned, device-mapped host memory
  weft_CUdeviceptr flags_dev;
  pthread_mutex_t lock;  // issued, pool
  uint32_t issued;       // the last gate number handed out
  staging_t *pool;
  weft_stream_t *worker;
  int users;             // communicators holding it (registry lock)
  struct weft_cuda_chan *next;
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static weft_cuda_chan_t *registry;

static int cyclic_ge(uint32_t x, uint32_t k) { return (int32_t)(x - k) >= 0; }

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

/* ---------- channels ---------- */

static void chan_free(weft_cuda_chan_t *c, const weft_cuda_driver_t *d);

static ncclResult_t chan_create(const weft_cuda_driver_t *d, weft_CUcontext ctx, weft_CUstream stream, int device,
                                const char *api, weft_cuda_chan_t **out) {
  weft_cuda_chan_t *c = calloc(1, sizeof(*c));
  if (c == NULL) return ncclSystemError;
  c->ctx = ctx;
  c->stream = stream;
  c->owner = pthread_self();
  c->device = device;
  pthread_mutex_init(&c->lock, NULL);
  void *flags = NULL;
  weft_CUresult r = d->cuMemHostAlloc(&flags, FLAGS_BYTES, WEFT_CU_MEMHOSTALLOC_PORTABLE | WEFT_CU_MEMHOSTALLOC_DEVICEMAP);
  if (r == WEFT_CUDA_SUCCESS) {
    memset(flags, 0, FLAGS_BYTES);
    c->flags = flags;
    r = d->cuMemHostGetDevicePointer(&c->flags_dev, flags, 0);
  }
  ncclResult_t res = r == WEFT_CUDA_SUCCESS ? ncclSuccess
                     : cu_fail(api, c->flags == NULL ? "cuMemHostAlloc" : "cuMemHostGetDevicePointer", r);
  if (res == ncclSuccess) res = weft_stream_create_private(&c->worker);
  if (res != ncclSuccess) {
    chan_free(c, d);
    return res;
  }
  INFO(WEFT_LOG_INIT, "CUDA stream %p of device %d: channel ready (counters at %p)", (void *)stream, device, flags);
  *out = c;
  return ncclSuccess;
}

// Waits (bounded) until the stream finished with every staging block, then
// frees them; a context that no longer exists leaves them to the process.
static void chan_free(weft_cuda_chan_t *c, const weft_cuda_driver_t *d) {
  if (c->worker != NULL) weft_stream_destroy_private(c->worker);  // every batch ran and opened its gate
  int64_t limit = weft_timeout_ms() > 0 ? weft_timeout_ms() : 60000;  // never wait forever at teardown
  int64_t end = weft_now_ms() + limit;
  while (c->flags != NULL && c->issued != 0 && !cyclic_ge(atomic_load(&c->flags[FLAG_FREED]), c->issued) &&
         weft_now_ms() < end)
    nap_ns(100000);
  int drained = c->flags == NULL || c->issued == 0 || cyclic_ge(atomic_load(&c->flags[FLAG_FREED]), c->issued);
  if (!drained)
    WARN("CUDA stream %p has not finished weft's copies after %d ms; keeping its staging memory", (void *)c->stream,
         (int)limit);
  if (drained && d->cuCtxPushCurrent(c->ctx) == WEFT_CUDA_SUCCESS) {
    for (staging_t *b = c->pool; b != NULL;) {
      staging_t *next = b->next;
      d->cuMemFreeHost(b->host);
      free(b);
      b = next;
    }
    if (c->flags != NULL) d->cuMemFreeHost((void *)c->flags);
    weft_CUcontext popped;
    d->cuCtxPopCurrent(&popped);
  }
  pthread_mutex_destroy(&c->lock);
  free(c);
}

// Remembers that comm uses c (once).
static ncclResult_t comm_hold(struct ncclComm *comm, weft_cuda_chan_t *c) {
  for (int i = 0; i < comm->ncuda_chans; i++)
    if (comm->cuda_chans[i] == c) return ncclSuccess;
  weft_cuda_chan_t **list = realloc(comm->cuda_chans, sizeof(*list) * (size_t)(comm->ncuda_chans + 1));
  if (list == NULL) return ncclSystemError;
  comm->cuda_chans = list;
  list[comm->ncuda_chans++] = c;
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

ncclResult_t weft_cuda_chan_get(struct ncclComm *comm, cudaStream_t stream, int device, const char *api,
                                weft_cuda_chan_t **out) {
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
  weft_cuda_chan_t *c = NULL;
  if (res == ncclSuccess) {
    for (c = registry; c != NULL; c = c->next)
      if (c->ctx == ctx && c->stream == s && (s != CU_STREAM_PER_THREAD_HANDLE || pthread_equal(c->owner, pthread_self())))
        break;
    if (c == NULL && (res = chan_create(d, ctx, s, device, api, &c)) == ncclSuccess) {
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

weft_stream_t *weft_cuda_chan_worker(weft_cuda_chan_t *chan) { return chan->worker; }

void weft_cuda_comm_release(struct ncclComm *comm) {
  if (comm->ncuda_chans == 0) return;
  const weft_cuda_driver_t *d = weft_cuda_driver();
  for (int i = 0; i < comm->ncuda_chans; i++) {
    weft_cuda_chan_t *c = comm->cuda_chans[i];
    pthread_mutex_lock(&registry_lock);
    int last = --c->users == 0;
    if (last) {
      for (weft_cuda_chan_t **p = &registry; *p != NULL; p = &(*p)->next)
        if (*p == c) {
          *p = c->next;
          break;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    if (last) chan_free(c, d);
  }
  free(comm->cuda_chans);
  comm->cuda_chans = NULL;
  comm->ncuda_chans = 0;
}

/* ---------- staging ---------- */

// A block of at least `bytes` whose last user the stream has finished with
// (chan->lock held, context current).
static staging_t *staging_take(weft_cuda_chan_t *c, const weft_cuda_driver_t *d, size_t bytes, const char *api,
                               ncclResult_t *res) {
  uint32_t freed = atomic_load_explicit(&c->flags[FLAG_FREED], memory_order_acquire);
  staging_t *best = NULL;
  int idle = 0;
  for (staging_t *b = c->pool; b != NULL; b = b->next) {
    if (b->busy && cyclic_ge(freed, b->k)) b->busy = 0;
    if (b->busy) continue;
    idle++;
    if (b->bytes >= bytes && (best == NULL || b->bytes < best->bytes)) best = b;
  }
  if (best != NULL) return best;
  // Too many idle blocks, none big enough: free the smallest idle one first.
  if (idle >= POOL_KEEP) {
    staging_t **victim = NULL;
    for (staging_t **p = &c->pool; *p != NULL; p = &(*p)->next)
      if (!(*p)->busy && (victim == NULL || (*p)->bytes < (*victim)->bytes)) victim = p;
    staging_t *v = *victim;
    *victim = v->next;
    d->cuMemFreeHost(v->host);
    free(v);
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
    *res = cu_fail(api, "cuMemHostAlloc (staging)", r);
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

// Where one operation's buffers go in staging. In-place calls keep their
// aliasing: a send region inside the recv region (or the reverse) is staged
// once, at the same offset.
typedef struct {
  size_t send_bytes, recv_bytes;
  size_t send_at, recv_at, scalar_at, total;
} layout_t;

static void op_layout(const weft_op_t *op, size_t base, layout_t *l) {
  l->send_bytes = op->dev.send != NULL ? weft_coll_send_elems(&op->args) * op->esize : 0;
  l->recv_bytes = op->dev.recv != NULL ? weft_coll_recv_elems(&op->args) * op->esize : 0;
  uintptr_t s = (uintptr_t)op->dev.send, r = (uintptr_t)op->dev.recv;
  size_t at = base;
  if (l->send_bytes && l->recv_bytes && s >= r && s + l->send_bytes <= r + l->recv_bytes) {
    l->recv_at = at, l->send_at = at + (s - r), at += align_up(l->recv_bytes);
  } else if (l->send_bytes && l->recv_bytes && r >= s && r + l->recv_bytes <= s + l->send_bytes) {
    l->send_at = at, l->recv_at = at + (r - s), at += align_up(l->send_bytes);
  } else {
    l->send_at = at, at += align_up(l->send_bytes);
    l->recv_at = at, at += align_up(l->recv_bytes);
  }
  l->scalar_at = at;
  if (op->dev.scalar != NULL) at += STAGE_ALIGN;
  l->total = at - base;
}

/* ---------- batches ---------- */

static weft_CUdeviceptr dptr(const void *p) { return (weft_CUdeviceptr)(uintptr_t)p; }

// Queues the batch's stream work; *waiting says whether the WAIT is queued
// (from then on the worker must see the gate, or the stream never moves on).
static ncclResult_t queue_batch(weft_cuda_chan_t *c, const weft_cuda_driver_t *d, weft_op_t **ops, int nops,
                                const layout_t *lay, char *stage, uint32_t k, int *waiting) {
  const char *api = "CUDA stream";
  weft_CUstream s = c->stream;
  for (int i = 0; i < nops; i++) {
    if (lay[i].send_bytes > 0)
      CUCALL(api, "cuMemcpyAsync (device to staging)",
             d->cuMemcpyAsync(dptr(stage + lay[i].send_at), dptr(ops[i]->dev.send), lay[i].send_bytes, s));
    if (ops[i]->dev.scalar != NULL)
      CUCALL(api, "cuMemcpyAsync (scalar)",
             d->cuMemcpyAsync(dptr(stage + lay[i].scalar_at), dptr(ops[i]->dev.scalar), ops[i]->esize, s));
  }
  CUCALL(api, "cuStreamWriteValue32 (reached)",
         d->cuStreamWriteValue32(s, c->flags_dev + FLAG_REACHED * 4, k, WEFT_CU_STREAM_WRITE_VALUE_DEFAULT));
  CUCALL(api, "cuStreamWaitValue32 (done)",
         d->cuStreamWaitValue32(s, c->flags_dev + FLAG_DONE * 4, k, WEFT_CU_STREAM_WAIT_VALUE_GEQ));
  *waiting = 1;
  for (int i = 0; i < nops; i++)
    if (lay[i].recv_bytes > 0)
      CUCALL(api, "cuMemcpyAsync (staging to device)",
             d->cuMemcpyAsync(dptr(ops[i]->dev.recv), dptr(stage + lay[i].recv_at), lay[i].recv_bytes, s));
  CUCALL(api, "cuStreamWriteValue32 (freed)",
         d->cuStreamWriteValue32(s, c->flags_dev + FLAG_FREED * 4, k, WEFT_CU_STREAM_WRITE_VALUE_DEFAULT));
  return ncclSuccess;
}

ncclResult_t weft_cuda_batch_prepare(weft_cuda_chan_t *c, weft_op_t **ops, int nops, weft_cuda_gate_t *gate) {
  const weft_cuda_driver_t *d = weft_cuda_driver();
  *gate = (weft_cuda_gate_t){0};
  layout_t lay_inline[8];
  layout_t *lay = nops <= 8 ? lay_inline : malloc(sizeof(*lay) * (size_t)nops);
  if (lay == NULL) return ncclSystemError;
  size_t total = 0;
  for (int i = 0; i < nops; i++) {
    op_layout(ops[i], total, &lay[i]);
    total += lay[i].total;
  }
  if (d->cuCtxPushCurrent(c->ctx) != WEFT_CUDA_SUCCESS) {
    if (lay != lay_inline) free(lay);
    WARN("CUDA stream %p: its context can no longer be made current", (void *)c->stream);
    return ncclUnhandledCudaError;
  }
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&c->lock);
  staging_t *b = staging_take(c, d, total > 0 ? total : 1, "CUDA stream", &res);
  int waiting = 0;
  uint32_t k = 0;
  if (b != NULL) {
    k = ++c->issued;
    if (k == 0) k = ++c->issued;  // 0 never names a batch
    b->busy = 1;
    b->k = k;
    res = queue_batch(c, d, ops, nops, lay, b->host, k, &waiting);
  }
  pthread_mutex_unlock(&c->lock);
  if (res == ncclSuccess) {
    for (int i = 0; i < nops; i++) {
      weft_op_t *op = ops[i];
      op->sendbuff = lay[i].send_bytes > 0 ? b->host + lay[i].send_at : NULL;
      op->recvbuff = lay[i].recv_bytes > 0 ? b->host + lay[i].recv_at : NULL;
      op->dev.scalar_stage = op->dev.scalar != NULL ? b->host + lay[i].scalar_at : NULL;
    }
    *gate = (weft_cuda_gate_t){c, k};
  } else if (waiting) {
    *gate = (weft_cuda_gate_t){c, k};  // the caller abandons it: the worker releases the stream in order
  } else if (b != NULL && d->cuStreamSynchronize(c->stream) == WEFT_CUDA_SUCCESS) {
    b->busy = 0;  // the copies already queued into it are done
  }
  weft_CUcontext popped;
  d->cuCtxPopCurrent(&popped);
  if (lay != lay_inline) free(lay);
  if (res == ncclSuccess)
    TRACE(WEFT_LOG_COLL, "CUDA stream %p: batch %u of %d call(s), %zu bytes of staging", (void *)c->stream, k, nops,
          total);
  return res;
}

/* ---------- the worker's side ---------- */

void weft_cuda_gate_wait(const weft_cuda_gate_t *g, weft_op_t **ops, int nops) {
  _Atomic uint32_t *reached = &g->chan->flags[FLAG_REACHED];
  int64_t start = weft_now_ns(), spin_ns = weft_env_WEFT_SPIN_NS(), nap = 1000;
  int64_t warn_at = weft_timeout_ms() > 0 ? start + weft_timeout_ms() * 1000000 : 0;
  for (unsigned i = 0; !cyclic_ge(atomic_load_explicit(reached, memory_order_acquire), g->k); i++) {
    int64_t now = (i & 15) == 0 ? weft_now_ns() : start;
    if (now - start < spin_ns) {
      if ((i & 63) == 0) sched_yield();
      continue;
    }
    if (warn_at != 0 && now > warn_at) {
      WARN("CUDA stream %p has not reached weft's call (batch %u) after %d ms: is earlier work on it stuck?",
           (void *)g->chan->stream, g->k, (int)weft_timeout_ms());
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

void weft_cuda_gate_open(const weft_cuda_gate_t *g) {
  atomic_store_explicit(&g->chan->flags[FLAG_DONE], g->k, memory_order_release);
}

void weft_cuda_gate_abandon(const weft_cuda_gate_t *g) {
  if (g->chan != NULL) weft_stream_submit_gated(g->chan->worker, NULL, 0, g);
}

int weft_cuda_scalar_on_device(const void *scalar, size_t bytes) {
  weft_mem_info_t m;
  weft_mem_classify(scalar, bytes, &m);
  return m.kind == WEFT_MEM_DEVICE || m.kind == WEFT_MEM_MANAGED;
}
