/*
 * stream.c — the fake driver's streams (see fake.h). Each stream, including
 * each context's NULL (legacy) stream, made on first use, is an in-order
 * FIFO of operations run by its own worker thread: copies and memsets through
 * fk_translate, stream memory operations on 32- and 64-bit words, host
 * functions, event records and event waits (event.c keeps the events). A
 * worker that waits (a value, an event) polls with nanosleep from ~2 us
 * backing off to 200 us, never spinning a core; host threads in
 * cuStreamSynchronize sleep on a condition variable.
 *
 * Arguments are checked when an operation is enqueued, as the driver does
 * (CUDA_ERROR_INVALID_VALUE for a range out of an allocation, VMM memory
 * without access rights for the stream's device, a stream memory operation
 * on pageable or managed memory). A range that has become invalid by the
 * time the operation runs (freed, unmapped) fails there with
 * CUDA_ERROR_ILLEGAL_ADDRESS, as a device fault would. Such an error is
 * sticky for the stream: the operations after it are skipped (host functions
 * are not called), and cuStreamSynchronize, cuStreamQuery and every later
 * enqueue return it. Pageable host memory is read when the copy runs, not
 * when it is enqueued.
 *
 * Simplifications (fake.h): the legacy stream does not synchronise with
 * other blocking streams; CU_STREAM_PER_THREAD is the legacy stream;
 * cuStreamDestroy waits for the queue to drain.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake.h"

static _Atomic int workers;  // worker threads alive (a test hook reads it)

// ---- Running operations ----

static int wait_met(uint64_t v, uint64_t want, unsigned flags, unsigned width) {
  switch (flags & 3) {
    case CU_STREAM_WAIT_VALUE_GEQ:  // cyclic: (int32_t)(*addr - value) >= 0
      return width == 4 ? (int32_t)((uint32_t)v - (uint32_t)want) >= 0 : (int64_t)(v - want) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ: return v == want;
    case CU_STREAM_WAIT_VALUE_AND: return (v & want) != 0;
    default: return width == 4 ? (uint32_t) ~(v | want) != 0 : ~(v | want) != 0;  // NOR
  }
}

static void fill(char *p, uint64_t value, unsigned width, size_t bytes) {
  if (width == 1) {
    memset(p, (int)value, bytes);
    return;
  }
  for (size_t i = 0; i < bytes; i += width) memcpy(p + i, &value, width);  // little-endian: the low bytes
}

// Any failure here is a fault of the device: CUDA_ERROR_ILLEGAL_ADDRESS.
static CUresult run(fk_stream *s, fk_op *op) {
  int dev = s->ctx->device;
  void *dst = NULL, *src = NULL;
  CUresult r = CUDA_SUCCESS;
  if (op->kind == FK_OP_COPY || op->kind == FK_OP_SET || op->kind == FK_OP_WRITE || op->kind == FK_OP_WAIT) {
    size_t n = op->kind == FK_OP_WRITE || op->kind == FK_OP_WAIT ? op->width : op->bytes;
    pthread_mutex_lock(&fk.lock);
    r = fk_translate(op->dst, n, op->dst_how, dev, &dst);
    if (r == CUDA_SUCCESS && op->kind == FK_OP_COPY) r = fk_translate(op->src, n, op->src_how, dev, &src);
    pthread_mutex_unlock(&fk.lock);
    if (r != CUDA_SUCCESS) return CUDA_ERROR_ILLEGAL_ADDRESS;
  }
  long ns = 2000;
  switch (op->kind) {
    case FK_OP_COPY:
      if (fk.copy_delay_ns > 0) {  // FAKE_CUDA_COPY_DELAY_US: a device that lags behind the host
        struct timespec ts = {fk.copy_delay_ns / 1000000000, fk.copy_delay_ns % 1000000000};
        nanosleep(&ts, NULL);
      }
      memmove(dst, src, op->bytes);
      break;
    case FK_OP_SET: fill(dst, op->value, op->width, op->bytes); break;
    case FK_OP_WRITE:
      if (!(op->flags & CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER)) atomic_thread_fence(memory_order_seq_cst);
      if (op->width == 4) __atomic_store_n((uint32_t *)dst, (uint32_t)op->value, __ATOMIC_RELEASE);
      else __atomic_store_n((uint64_t *)dst, op->value, __ATOMIC_RELEASE);
      break;
    case FK_OP_WAIT:
      while (!atomic_load(&fk.shutdown)) {
        uint64_t v = op->width == 4 ? __atomic_load_n((uint32_t *)dst, __ATOMIC_ACQUIRE)
                                    : __atomic_load_n((uint64_t *)dst, __ATOMIC_ACQUIRE);
        if (wait_met(v, op->value, op->flags, op->width)) break;
        fk_backoff(&ns);
      }
      break;
    case FK_OP_HOSTFN:
      fk_tls_in_hostfn = 1;
      op->fn(op->arg);
      fk_tls_in_hostfn = 0;
      break;
    case FK_OP_RECORD: break;  // the worker marks it done
    case FK_OP_WAIT_EVENT:
      for (;;) {
        pthread_mutex_lock(&fk.lock);
        int done = op->event->done_gen >= op->gen;
        pthread_mutex_unlock(&fk.lock);
        if (done || atomic_load(&fk.shutdown)) break;
        fk_backoff(&ns);
      }
      break;
  }
  return CUDA_SUCCESS;
}

static void *worker(void *arg) {
  fk_stream *s = arg;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (s->head == NULL && !s->stop) pthread_cond_wait(&s->work_cv, &s->mu);
    fk_op *op = s->head;
    if (op == NULL) break;
    CUresult sticky = s->error;
    pthread_mutex_unlock(&s->mu);
    CUresult r = CUDA_SUCCESS;
    if (sticky == CUDA_SUCCESS && !atomic_load(&fk.shutdown)) r = run(s, op);
    if (op->event != NULL) {
      pthread_mutex_lock(&fk.lock);
      if (op->kind == FK_OP_RECORD) fk_event_done(op->event, op->gen, sticky != CUDA_SUCCESS ? sticky : r);
      fk_event_put(op->event);
      pthread_mutex_unlock(&fk.lock);
    }
    pthread_mutex_lock(&s->mu);
    s->head = op->next;
    if (s->head == NULL) s->tail = NULL;
    s->completed = op->seq;
    if (r != CUDA_SUCCESS && s->error == CUDA_SUCCESS) s->error = r;
    pthread_cond_broadcast(&s->done_cv);
    free(op);
  }
  pthread_mutex_unlock(&s->mu);
  atomic_fetch_sub(&workers, 1);
  return NULL;
}

// ---- Streams ----

static fk_stream *stream_new(fk_ctx *c, unsigned flags, int priority, int legacy) {
  fk_stream *s = calloc(1, sizeof(*s));
  if (s == NULL) return NULL;
  s->ctx = c, s->flags = flags, s->priority = priority, s->legacy = legacy;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->work_cv, NULL);
  pthread_cond_init(&s->done_cv, NULL);
  atomic_fetch_add(&workers, 1);
  if (pthread_create(&s->thread, NULL, worker, s) != 0) {
    atomic_fetch_sub(&workers, 1);
    pthread_cond_destroy(&s->done_cv);
    pthread_cond_destroy(&s->work_cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
    return NULL;
  }
  return s;
}

// Lets the worker drain the queue, joins it and frees the stream. `patient`:
// wait for ever (cuStreamDestroy); otherwise give up after a second and keep
// a stream some caller still waits on (unload).
static void stream_stop(fk_stream *s, int patient) {
  pthread_mutex_lock(&s->mu);
  s->stop = 1;
  pthread_cond_signal(&s->work_cv);
  pthread_mutex_unlock(&s->mu);
  if (patient) {
    pthread_join(s->thread, NULL);
  } else {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 1;
    if (pthread_timedjoin_np(s->thread, NULL, &until) != 0) return;  // stuck in a host function: leave it
    pthread_mutex_lock(&fk.lock);
    int pinned = s->users > 0;
    pthread_mutex_unlock(&fk.lock);
    if (pinned) return;
  }
  pthread_cond_destroy(&s->done_cv);
  pthread_cond_destroy(&s->work_cv);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

static int is_special(CUstream h) { return h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD; }

static fk_stream *lookup(CUstream h) {
  for (fk_stream *s = fk.streams; s != NULL; s = s->next)
    if (s == h) return s;
  return NULL;
}

// A handle to a stream (fk.lock held): the registry's, or the current
// context's legacy stream for NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD.
static CUresult resolve(CUstream h, fk_stream **out) {
  if (!is_special(h)) {
    *out = lookup(h);
    return *out != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
  }
  fk_ctx *c = fk_current();
  if (c == NULL) return CUDA_ERROR_INVALID_CONTEXT;
  if (c->legacy == NULL) c->legacy = stream_new(c, CU_STREAM_DEFAULT, 0, 1);
  *out = c->legacy;
  return *out != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult fk_stream_get(CUstream h, fk_stream **s) {
  CUresult r = resolve(h, s);
  if (r == CUDA_SUCCESS) (*s)->users++;
  return r;
}

void fk_stream_put(fk_stream *s) {
  if (--s->users == 0) pthread_cond_broadcast(&fk.users_cv);
}

CUresult fk_stream_wait(fk_stream *s, uint64_t seq) {
  pthread_mutex_lock(&s->mu);
  while (s->completed < seq) pthread_cond_wait(&s->done_cv, &s->mu);
  CUresult r = s->error;
  pthread_mutex_unlock(&s->mu);
  return r;
}

// Checks an operation's ranges when it is enqueued, as the driver does.
static CUresult validate(const fk_op *op, int dev) {
  void *p;
  CUresult r = CUDA_SUCCESS;
  switch (op->kind) {
    case FK_OP_COPY:
      r = fk_translate(op->src, op->bytes, op->src_how, dev, &p);
      if (r == CUDA_SUCCESS) r = fk_translate(op->dst, op->bytes, op->dst_how, dev, &p);
      break;
    case FK_OP_SET: r = fk_translate(op->dst, op->bytes, op->dst_how, dev, &p); break;
    case FK_OP_WRITE:
    case FK_OP_WAIT: r = fk_translate(op->dst, op->width, op->dst_how, dev, &p); break;
    default: break;
  }
  return r;
}

static fk_event *event_lookup(fk_event *e) {
  for (fk_event *x = fk.events; x != NULL; x = x->next)
    if (x == e) return x;
  return NULL;
}

CUresult fk_submit(CUstream h, const fk_op *op, uint64_t *seq, fk_stream **pinned) {
  fk_op *q = malloc(sizeof(*q));
  if (q == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  *q = *op;
  q->next = NULL;
  if (seq != NULL) *seq = 0;
  fk_stream *s = NULL;
  pthread_mutex_lock(&fk.lock);
  CUresult r = resolve(h, &s);
  if (r == CUDA_SUCCESS) r = validate(q, s->ctx->device);
  fk_event *e = NULL;
  if (r == CUDA_SUCCESS && (q->kind == FK_OP_RECORD || q->kind == FK_OP_WAIT_EVENT)) {
    e = event_lookup(q->event);
    if (e == NULL || (q->kind == FK_OP_RECORD && e->ctx != s->ctx)) r = CUDA_ERROR_INVALID_HANDLE;
  }
  if (r == CUDA_SUCCESS && s->legacy) r = fk_capture_check_legacy(s);
  if (r == CUDA_SUCCESS && s->capture == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
    r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  if (r == CUDA_SUCCESS && s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE) {  // recorded, not run
    s->graph->nodes++;
    if (q->kind == FK_OP_RECORD) e->captured = s->graph;
    pthread_mutex_unlock(&fk.lock);
    free(q);
    return CUDA_SUCCESS;
  }
  if (r == CUDA_SUCCESS && q->kind == FK_OP_WAIT_EVENT && (q->flags & CU_EVENT_WAIT_EXTERNAL))
    r = CUDA_ERROR_ILLEGAL_STATE;  // only inside a capture
  if (r == CUDA_SUCCESS && q->kind == FK_OP_WAIT_EVENT && e->captured != NULL)
    r = CUDA_ERROR_NOT_SUPPORTED;  // joining a capture through an event is not modelled
  if (r == CUDA_SUCCESS && q->kind == FK_OP_WAIT_EVENT && e->rec_gen == 0) {  // never recorded: nothing to wait for
    pthread_mutex_unlock(&fk.lock);
    free(q);
    return CUDA_SUCCESS;
  }
  if (r == CUDA_SUCCESS) {
    pthread_mutex_lock(&s->mu);
    r = s->error;
    if (r == CUDA_SUCCESS) {
      if (q->kind == FK_OP_RECORD) e->captured = NULL, q->gen = ++e->rec_gen;
      if (q->kind == FK_OP_WAIT_EVENT) q->gen = e->rec_gen;
      if (e != NULL) e->refs++;
      q->seq = ++s->enqueued;
      if (s->tail != NULL) s->tail->next = q;
      else s->head = q;
      s->tail = q;
      pthread_cond_signal(&s->work_cv);
      if (seq != NULL) *seq = q->seq;
      q = NULL;
    }
    pthread_mutex_unlock(&s->mu);
  }
  if (r == CUDA_SUCCESS && pinned != NULL) s->users++, *pinned = s;
  pthread_mutex_unlock(&fk.lock);
  free(q);
  return r;
}

// A capture of a blocking stream makes the legacy stream unusable
// (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) before the capture mode is asked.
CUresult fk_sync_op(const fk_op *op) {
  pthread_mutex_lock(&fk.lock);
  fk_ctx *c = fk_current();
  CUresult r = c == NULL ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
  if (r == CUDA_SUCCESS && c->blocking_captures == 0) r = fk_capture_check_unsafe();
  pthread_mutex_unlock(&fk.lock);
  fk_stream *s = NULL;
  uint64_t seq = 0;
  if (r == CUDA_SUCCESS) r = fk_submit(CU_STREAM_LEGACY, op, &seq, &s);
  if (r != CUDA_SUCCESS) return r;
  r = fk_stream_wait(s, seq);
  pthread_mutex_lock(&fk.lock);
  fk_stream_put(s);
  pthread_mutex_unlock(&fk.lock);
  return r;
}

// ---- Stream API ----

static CUresult stream_create(CUstream *ph, unsigned int flags, int priority) {
  if (ph == NULL || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (priority < FK_PRIO_GREATEST) priority = FK_PRIO_GREATEST;  // clamped, as cuda.h says
  if (priority > FK_PRIO_LEAST) priority = FK_PRIO_LEAST;
  pthread_mutex_lock(&fk.lock);
  fk_ctx *c = fk_current();
  fk_stream *s = c != NULL ? stream_new(c, flags, priority, 0) : NULL;
  if (s != NULL) s->next = fk.streams, fk.streams = s;
  pthread_mutex_unlock(&fk.lock);
  if (s == NULL) return c == NULL ? CUDA_ERROR_INVALID_CONTEXT : CUDA_ERROR_OUT_OF_MEMORY;
  *ph = s;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamCreateWithPriority(CUstream *ph, unsigned int flags, int priority) {
  FK_API();
  return stream_create(ph, flags, priority);
}

EXPORT CUresult cuStreamCreate(CUstream *ph, unsigned int flags) {
  FK_API();
  return stream_create(ph, flags, FK_PRIO_LEAST);
}

// Waits for the queue to drain (the driver would return at once), then frees.
EXPORT CUresult cuStreamDestroy_v2(CUstream h) {
  FK_API();
  if (is_special(h)) return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&fk.lock);
  fk_stream *s = lookup(h);
  if (s != NULL) {
    for (fk_stream **p = &fk.streams; *p != NULL; p = &(*p)->next)
      if (*p == s) {
        *p = s->next;
        break;
      }
    if (s->capture != CU_STREAM_CAPTURE_STATUS_NONE) fk_capture_end(s);
    while (s->users > 0) pthread_cond_wait(&fk.users_cv, &fk.lock);
  }
  pthread_mutex_unlock(&fk.lock);
  if (s == NULL) return CUDA_ERROR_INVALID_HANDLE;
  stream_stop(s, 1);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuStreamDestroy(CUstream h) { return cuStreamDestroy_v2(h); }

// A capturing stream cannot be waited for: the capture is invalidated.
static CUresult check_waitable(fk_stream *s) {
  CUresult r = s->legacy ? fk_capture_check_legacy(s) : CUDA_SUCCESS;
  if (r == CUDA_SUCCESS && s->capture != CU_STREAM_CAPTURE_STATUS_NONE) {
    fk_capture_invalidate(s);
    r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  return r;
}

EXPORT CUresult cuStreamSynchronize(CUstream h) {
  FK_API();
  fk_stream *s = NULL;
  pthread_mutex_lock(&fk.lock);
  CUresult r = fk_stream_get(h, &s);
  if (r == CUDA_SUCCESS) {
    r = check_waitable(s);
    if (r != CUDA_SUCCESS) fk_stream_put(s);
  }
  pthread_mutex_unlock(&fk.lock);
  if (r != CUDA_SUCCESS) return r;
  pthread_mutex_lock(&s->mu);
  uint64_t seq = s->enqueued;
  pthread_mutex_unlock(&s->mu);
  r = fk_stream_wait(s, seq);
  pthread_mutex_lock(&fk.lock);
  fk_stream_put(s);
  pthread_mutex_unlock(&fk.lock);
  return r;
}

EXPORT CUresult cuStreamQuery(CUstream h) {
  FK_API();
  fk_stream *s = NULL;
  pthread_mutex_lock(&fk.lock);
  CUresult r = resolve(h, &s);
  if (r == CUDA_SUCCESS) r = check_waitable(s);
  if (r == CUDA_SUCCESS) {
    pthread_mutex_lock(&s->mu);
    r = s->error != CUDA_SUCCESS ? s->error : s->completed != s->enqueued ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
    pthread_mutex_unlock(&s->mu);
  }
  pthread_mutex_unlock(&fk.lock);
  return r;
}

EXPORT CUresult cuStreamGetCtx(CUstream h, CUcontext *pctx) {
  FK_API();
  if (pctx == NULL) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fk.lock);
  fk_stream *s = is_special(h) ? NULL : lookup(h);
  fk_ctx *c = is_special(h) ? fk_current() : s != NULL ? s->ctx : NULL;
  pthread_mutex_unlock(&fk.lock);
  if (c == NULL) return is_special(h) ? CUDA_ERROR_INVALID_CONTEXT : CUDA_ERROR_INVALID_HANDLE;
  *pctx = c;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamGetFlags(CUstream h, unsigned int *flags) {
  FK_API();
  if (flags == NULL) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fk.lock);
  fk_stream *s = NULL;
  CUresult r = resolve(h, &s);
  if (r == CUDA_SUCCESS) *flags = s->flags;
  pthread_mutex_unlock(&fk.lock);
  return r;
}

EXPORT CUresult cuStreamGetPriority(CUstream h, int *priority) {
  FK_API();
  if (priority == NULL) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fk.lock);
  fk_stream *s = NULL;
  CUresult r = resolve(h, &s);
  if (r == CUDA_SUCCESS) *priority = s->priority;
  pthread_mutex_unlock(&fk.lock);
  return r;
}

// ---- Asynchronous operations ----

static CUresult copy_async(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h, unsigned dst_how, unsigned src_how) {
  fk_op op = {.kind = FK_OP_COPY, .dst = dst, .src = src, .bytes = n, .dst_how = FK_WR | dst_how,
              .src_how = FK_RD | src_how};
  return fk_submit(h, &op, NULL, NULL);
}

EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
  FK_API();
  return copy_async(dst, src, n, h, 0, 0);
}
EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream h) {
  FK_API();
  return copy_async(dst, (CUdeviceptr)(uintptr_t)src, n, h, FK_DEV, 0);
}
EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream h) {
  FK_API();
  return copy_async((CUdeviceptr)(uintptr_t)dst, src, n, h, 0, FK_DEV);
}
EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
  FK_API();
  return copy_async(dst, src, n, h, FK_DEV, FK_DEV);
}

static CUresult set_async(CUdeviceptr dst, uint64_t value, unsigned width, size_t n, CUstream h) {
  if (n > SIZE_MAX / width || (dst & (width - 1)) != 0) return CUDA_ERROR_INVALID_VALUE;
  fk_op op = {.kind = FK_OP_SET, .dst = dst, .bytes = n * width, .width = width, .value = value,
              .dst_how = FK_WR | FK_DEV};
  return fk_submit(h, &op, NULL, NULL);
}

EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char uc, size_t n, CUstream h) {
  FK_API();
  return set_async(dst, uc, 1, n, h);
}
EXPORT CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int ui, size_t n, CUstream h) {
  FK_API();
  return set_async(dst, ui, 4, n, h);
}

// Stream memory operations: device addresses (host-mapped memory's device
// pointer is its host address), aligned, never managed memory.
static atomic_int device_waits;  // waits on device memory queued (tests tell the IPC path from staging)

static CUresult memop(fk_op_kind kind, CUstream h, CUdeviceptr addr, uint64_t value, unsigned width, unsigned flags) {
  unsigned valid = kind == FK_OP_WRITE ? CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER : 3u | CU_STREAM_WAIT_VALUE_FLUSH;
  if (addr == 0 || (addr & (width - 1)) != 0 || (flags & ~valid) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (flags & CU_STREAM_WAIT_VALUE_FLUSH) return CUDA_ERROR_NOT_SUPPORTED;  // CAN_FLUSH_REMOTE_WRITES is 0
  fk_op op = {.kind = kind, .dst = addr, .width = width, .value = value, .flags = flags,
              .dst_how = (kind == FK_OP_WRITE ? FK_WR : FK_RD) | FK_DEV | FK_NOMANAGED};
  if (kind == FK_OP_WAIT) {
    pthread_mutex_lock(&fk.lock);
    if (fk_in_device_space((uintptr_t)addr, width)) atomic_fetch_add(&device_waits, 1);
    pthread_mutex_unlock(&fk.lock);
  }
  return fk_submit(h, &op, NULL, NULL);
}

EXPORT int fake_cuda_device_waits(void) { return atomic_load(&device_waits); }

EXPORT CUresult cuStreamWriteValue32_v2(CUstream h, CUdeviceptr addr, uint32_t value, unsigned int flags) {
  FK_API();
  return memop(FK_OP_WRITE, h, addr, value, 4, flags);
}
EXPORT CUresult cuStreamWaitValue32_v2(CUstream h, CUdeviceptr addr, uint32_t value, unsigned int flags) {
  FK_API();
  return memop(FK_OP_WAIT, h, addr, value, 4, flags);
}
EXPORT CUresult cuStreamWriteValue64_v2(CUstream h, CUdeviceptr addr, uint64_t value, unsigned int flags) {
  FK_API();
  return memop(FK_OP_WRITE, h, addr, value, 8, flags);
}
EXPORT CUresult cuStreamWaitValue64_v2(CUstream h, CUdeviceptr addr, uint64_t value, unsigned int flags) {
  FK_API();
  return memop(FK_OP_WAIT, h, addr, value, 8, flags);
}

EXPORT CUresult cuLaunchHostFunc(CUstream h, CUhostFn fn, void *user_data) {
  FK_API();
  if (fn == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_op op = {.kind = FK_OP_HOSTFN, .fn = fn, .arg = user_data};
  return fk_submit(h, &op, NULL, NULL);
}

// ---- Contexts, unloading, fork ----

CUresult fk_ctx_sync(fk_ctx *c) {
  pthread_mutex_lock(&fk.lock);
  CUresult r = CUDA_SUCCESS;
  size_t n = c->legacy != NULL;
  for (fk_stream *s = fk.streams; s != NULL; s = s->next)
    if (s->ctx == c) {
      n++;
      if (s->capture != CU_STREAM_CAPTURE_STATUS_NONE)
        fk_capture_invalidate(s), r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
  fk_stream **pin = r == CUDA_SUCCESS && n > 0 ? calloc(n, sizeof(*pin)) : NULL;
  if (r == CUDA_SUCCESS && n > 0 && pin == NULL) r = CUDA_ERROR_OUT_OF_MEMORY;
  size_t k = 0;
  if (pin != NULL) {
    if (c->legacy != NULL) pin[k++] = c->legacy;
    for (fk_stream *s = fk.streams; s != NULL; s = s->next)
      if (s->ctx == c) pin[k++] = s;
    for (size_t i = 0; i < k; i++) pin[i]->users++;
  }
  pthread_mutex_unlock(&fk.lock);
  for (size_t i = 0; i < k; i++) {
    pthread_mutex_lock(&pin[i]->mu);
    uint64_t seq = pin[i]->enqueued;
    pthread_mutex_unlock(&pin[i]->mu);
    CUresult e = fk_stream_wait(pin[i], seq);
    if (r == CUDA_SUCCESS) r = e;
  }
  pthread_mutex_lock(&fk.lock);
  for (size_t i = 0; i < k; i++) fk_stream_put(pin[i]);
  pthread_mutex_unlock(&fk.lock);
  free(pin);
  return r;
}

void fk_ctx_release_streams(fk_ctx *c) {
  pthread_mutex_lock(&fk.lock);
  fk_stream *s = c->legacy;
  c->legacy = NULL;
  while (s != NULL && s->users > 0) pthread_cond_wait(&fk.users_cv, &fk.lock);
  pthread_mutex_unlock(&fk.lock);
  if (s != NULL) stream_stop(s, 1);
}

void fk_stream_stop_all(void) {
  pthread_mutex_lock(&fk.lock);
  fk_stream *all = fk.streams;
  fk.streams = NULL;
  for (int d = 0; d < FK_MAX_DEVICES; d++)
    if (fk.ctx[d].legacy != NULL) fk.ctx[d].legacy->next = all, all = fk.ctx[d].legacy, fk.ctx[d].legacy = NULL;
  for (fk_stream *s = all; s != NULL; s = s->next)
    if (s->capture != CU_STREAM_CAPTURE_STATUS_NONE) fk_capture_end(s);
  pthread_mutex_unlock(&fk.lock);
  while (all != NULL) {
    fk_stream *next = all->next;
    stream_stop(all, 0);
    all = next;
  }
}

// In a fork child (fk.lock fresh): the workers did not come along.
void fk_streams_forget(void) {
  fk_stream *all = fk.streams;
  fk.streams = NULL;
  for (int d = 0; d < FK_MAX_DEVICES; d++)
    if (fk.ctx[d].legacy != NULL) fk.ctx[d].legacy->next = all, all = fk.ctx[d].legacy, fk.ctx[d].legacy = NULL;
  while (all != NULL) {
    fk_stream *next = all->next;
    if (all->capture != CU_STREAM_CAPTURE_STATUS_NONE) fk_capture_end(all);
    for (fk_op *op = all->head, *n; op != NULL; op = n) {
      n = op->next;
      if (op->event != NULL) fk_event_put(op->event);
      free(op);
    }
    free(all);  // its mutex may be held by a thread that is not here
    all = next;
  }
  atomic_store(&workers, 0);
}

// ---- Test hooks (not driver API) ----
EXPORT int fake_cuda_worker_threads(void) { return atomic_load(&workers); }
