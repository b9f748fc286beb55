/*
 * stream.c — host streams (see stream.h and weft.h).
 *
 * A stream is a worker thread and a FIFO of batches. The worker runs each
 * batch with the engine, in submission order, then signals completion; out
 * of work it polls for WEFT_SPIN_NS before it sleeps, and a submit signals
 * it only when it sleeps.
 * A batch submitted to an idle stream starts on the submitting thread
 * (eager start): that thread polls it for up to WEFT_STREAM_EAGER_NS, so a
 * small call whose peers are already there completes without waking the
 * worker, and one that must wait is handed to the worker as it stands.
 * Until then the batch stays at the head of the FIFO, held: the worker
 * does not touch it, and calls queued meanwhile wait behind it.
 * The first failure is kept and returned by the next synchronize or query.
 * A callback (weftStreamAddCallback) is a batch without operations: the
 * worker calls it in its turn with the first failure since the previous one.
 * Live streams are kept in a registry so that a stray pointer passed as a
 * stream is rejected instead of dereferenced.
 *
 * The same machinery serves CUDA streams (src/cuda/cuda_stream.c): each CUDA
 * stream's bridge owns a private host stream (not in the registry) whose
 * batches carry a gate: the worker waits until the GPU stream reached the
 * batch, runs it, then releases the GPU stream.
 */
#include "stream.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "checks.h"
#include "placement.h"
#include "env.h"
#include "util.h"
#include "weft.h"

#define STREAM_MAGIC 0x77656674737472ull

typedef struct batch {
  struct batch *next;
  weft_dev_gate_t gate;  // CUDA stream batches: where the GPU stream meets it (bridge NULL: none)
  weftStreamCallback_t callback;  // a callback's batch (no operations); NULL: none
  void *callback_arg;
  int held;  // the submitting thread is running it (eager start): the worker leaves it alone
  int nops;
  weft_op_t *ops[];
} batch_t;

struct weft_stream {
  uint64_t magic;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t work;  // the worker waits here for batches (or stop)
  pthread_cond_t idle;  // synchronize waits here for pending == 0
  batch_t *head, *tail;
  batch_t *done;        // finished batches, freed by the next submitter (the thread that allocated them)
  _Atomic int pending;  // batches queued or running (changed under lock; read without it while spinning)
  int worker_asleep;    // the worker waits on `work`: a submit must signal it
  int stop;
  int64_t eager_ns;     // how long a submitter runs a batch it queued on the idle stream (0: never)
  ncclResult_t error;   // first failure since the last synchronize/query
  ncclResult_t since_callback;  // first failure since the last callback ran
  struct weft_stream *next_live;
};

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static weft_stream_t *live;

static weft_stream_t *lookup_locked(cudaStream_t handle) {
  for (weft_stream_t *s = live; s != NULL; s = s->next_live)
    if ((void *)s == (void *)handle) return s;
  return NULL;
}

ncclResult_t weft_stream_resolve(cudaStream_t stream, const char *api, weft_stream_t **out) {
  *out = NULL;
  if (stream == NULL) return ncclSuccess;
  pthread_mutex_lock(&live_lock);
  *out = lookup_locked(stream);
  pthread_mutex_unlock(&live_lock);
  if (*out == NULL) {
    WARN("%s: stream=%p is not a weft stream (host-memory calls take NULL or a stream from weftStreamCreate)", api,
         (void *)stream);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

// Out of work, the worker polls for a while before it sleeps: a caller that
// issues calls back to back then hands them over without a wake-up.
static void spin_for_work(weft_stream_t *s) {
  int64_t spin_ns = weft_spin_ns(0), start = weft_now_ns();
  for (unsigned i = 1; atomic_load_explicit(&s->pending, memory_order_acquire) == 0; i++) {
    if ((i & 15) == 0 && weft_now_ns() - start >= spin_ns) return;
    if ((i & 127) == 0) sched_yield();
  }
}

// A batch is over: record its failure, take it off the head and wake
// synchronizers when nothing is left. Called with the lock held.
static void retire_head(weft_stream_t *s, ncclResult_t res) {
  batch_t *b = s->head;
  if (res != ncclSuccess && s->error == ncclSuccess) s->error = res;
  s->head = b->next;
  if (s->head == NULL) s->tail = NULL;
  s->pending--;
  b->next = s->done;
  s->done = b;
  // Wake synchronizers only when everything is done: a wake per batch
  // would cost a context switch per call on a busy core.
  if (s->pending == 0) pthread_cond_broadcast(&s->idle);
}

// The first failure since the previous callback, for a callback about to
// run (which starts a new count). Called with the lock held.
static ncclResult_t take_since_callback(weft_stream_t *s) {
  ncclResult_t status = s->since_callback;
  s->since_callback = ncclSuccess;
  return status;
}

static void note_failure(weft_stream_t *s, ncclResult_t res) {
  if (res != ncclSuccess && s->since_callback == ncclSuccess) s->since_callback = res;
}

static void *worker(void *arg) {
  weft_stream_t *s = arg;
  pthread_mutex_lock(&s->lock);
  for (;;) {
    if (s->head == NULL && !s->stop) {
      pthread_mutex_unlock(&s->lock);
      spin_for_work(s);
      pthread_mutex_lock(&s->lock);
    }
    // A held head is its submitter's until released (even when stopping).
    while ((s->head == NULL && !s->stop) || (s->head != NULL && s->head->held)) {
      s->worker_asleep = 1;
      pthread_cond_wait(&s->work, &s->lock);
      s->worker_asleep = 0;
    }
    if (s->head == NULL && s->stop) break;
    batch_t *b = s->head;
    pthread_mutex_unlock(&s->lock);
    if (b->gate.bridge != NULL) weft_cuda_gate_wait(&b->gate, b->ops, b->nops);
    ncclResult_t res = b->nops > 0 ? weft_engine_run(b->ops, b->nops, 1) : ncclSuccess;
    if (b->gate.bridge != NULL) weft_cuda_gate_open(&b->gate);
    for (int i = 0; i < b->nops; i++) weft_op_release_comm(b->ops[i]);
    if (b->callback != NULL) {
      pthread_mutex_lock(&s->lock);
      note_failure(s, res);
      ncclResult_t status = take_since_callback(s);
      pthread_mutex_unlock(&s->lock);
      b->callback((cudaStream_t)(void *)s, status, b->callback_arg);
    }
    pthread_mutex_lock(&s->lock);
    if (b->callback == NULL) note_failure(s, res);
    retire_head(s, res);
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

// Frees a list of finished batches and their operations.
static void free_batches(batch_t *b) {
  while (b != NULL) {
    batch_t *next = b->next;
    for (int i = 0; i < b->nops; i++) weft_op_free(b->ops[i]);
    free(b);
    b = next;
  }
}

static void enqueue(weft_stream_t *s, batch_t *b);

// The submitter's turn with the batch it holds at the head: run it for up
// to eager_ns; then it is over, or the worker's.
static void run_eagerly(weft_stream_t *s, batch_t *b) {
  ncclResult_t res = ncclSuccess;
  int done = weft_engine_try(b->ops, b->nops, s->eager_ns, &res);
  if (done)
    for (int i = 0; i < b->nops; i++) weft_op_release_comm(b->ops[i]);
  pthread_mutex_lock(&s->lock);
  b->held = 0;
  if (done) {
    note_failure(s, res);
    retire_head(s, res);
  }
  if (s->worker_asleep && s->head != NULL) pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->lock);
}

// Takes the finished batches (to free outside the lock).
static batch_t *take_done(weft_stream_t *s) {
  batch_t *d = s->done;
  s->done = NULL;
  return d;
}

ncclResult_t weft_stream_submit_gated(weft_stream_t *s, weft_op_t **ops, int nops, const weft_dev_gate_t *gate) {
  batch_t *b = malloc(sizeof(*b) + sizeof(b->ops[0]) * (size_t)nops);
  if (b == NULL) {
    for (int i = 0; i < nops; i++) weft_op_free(ops[i]);
    // The GPU stream waits for this gate, and gates open in order: once the
    // batches before it are done, open it here.
    if (gate != NULL) {
      pthread_mutex_lock(&s->lock);
      while (s->pending > 0) pthread_cond_wait(&s->idle, &s->lock);
      pthread_mutex_unlock(&s->lock);
      weft_cuda_gate_open(gate);
    }
    return ncclSystemError;
  }
  b->next = NULL;
  b->gate = gate != NULL ? *gate : (weft_dev_gate_t){0};
  b->callback = NULL;
  b->callback_arg = NULL;
  b->nops = nops;
  if (nops > 0) memcpy(b->ops, ops, sizeof(b->ops[0]) * (size_t)nops);
  enqueue(s, b);
  return ncclSuccess;
}

// Appends a batch and wakes the worker if it sleeps; frees finished
// batches. A batch of operations that finds the stream idle starts here
// (eager start, above).
static void enqueue(weft_stream_t *s, batch_t *b) {
  pthread_mutex_lock(&s->lock);
  int held = b->held = s->head == NULL && s->eager_ns > 0 && b->nops > 0 && b->gate.bridge == NULL;
  if (s->tail != NULL) s->tail->next = b;
  else s->head = b;
  s->tail = b;
  s->pending++;
  if (s->worker_asleep && !held) pthread_cond_signal(&s->work);
  batch_t *done = take_done(s);
  pthread_mutex_unlock(&s->lock);
  free_batches(done);
  if (held) run_eagerly(s, b);
}

ncclResult_t weft_stream_submit(weft_stream_t *s, weft_op_t **ops, int nops) {
  return weft_stream_submit_gated(s, ops, nops, NULL);
}

ncclResult_t weft_stream_create_private(weft_stream_t **out) {
  *out = NULL;
  weft_stream_t *s = calloc(1, sizeof(*s));
  if (s == NULL) return ncclSystemError;
  s->magic = STREAM_MAGIC;
  // Adaptive: the caller and the worker hold the lock for a few instructions,
  // so a short spin beats a futex sleep.
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
  pthread_mutex_init(&s->lock, &attr);
  pthread_mutexattr_destroy(&attr);
  pthread_cond_init(&s->work, NULL);
  pthread_cond_init(&s->idle, NULL);
  int err = pthread_create(&s->thread, NULL, worker, s);
  if (err != 0) {
    WARN("creating a stream's worker thread failed: %s", strerror(err));
    free(s);
    return ncclSystemError;
  }
  *out = s;
  return ncclSuccess;
}

WEFT_API(ncclResult_t, weftStreamCreate, cudaStream_t *stream);
ncclResult_t weftStreamCreate(cudaStream_t *stream) {
  if (stream == NULL) {
    WARN("weftStreamCreate: stream is NULL");
    return ncclInvalidArgument;
  }
  weft_stream_t *s;
  WEFTCHECK(weft_stream_create_private(&s));
  s->eager_ns = weft_env_WEFT_STREAM_EAGER_NS();  // not for a CUDA bridge's worker: its batches wait for the GPU
  pthread_mutex_lock(&live_lock);
  s->next_live = live;
  live = s;
  pthread_mutex_unlock(&live_lock);
  *stream = (cudaStream_t)(void *)s;
  return ncclSuccess;
}

WEFT_API(ncclResult_t, weftStreamAddCallback, cudaStream_t stream, weftStreamCallback_t callback, void *arg);
ncclResult_t weftStreamAddCallback(cudaStream_t stream, weftStreamCallback_t callback, void *arg) {
  weft_stream_t *s;
  WEFTCHECK(weft_stream_resolve(stream, "weftStreamAddCallback", &s));
  if (callback == NULL) {
    WARN("weftStreamAddCallback: callback is NULL");
    return ncclInvalidArgument;
  }
  if (s == NULL) {  // the NULL stream: everything before has completed
    callback(NULL, ncclSuccess, arg);
    return ncclSuccess;
  }
  batch_t *b = calloc(1, sizeof(*b));
  if (b == NULL) return ncclSystemError;
  b->callback = callback;
  b->callback_arg = arg;
  enqueue(s, b);
  return ncclSuccess;
}

static ncclResult_t take_error(weft_stream_t *s) {
  ncclResult_t res = s->error;
  s->error = ncclSuccess;
  return res;
}

WEFT_API(ncclResult_t, weftStreamSynchronize, cudaStream_t stream);
ncclResult_t weftStreamSynchronize(cudaStream_t stream) {
  weft_stream_t *s;
  WEFTCHECK(weft_stream_resolve(stream, "weftStreamSynchronize", &s));
  if (s == NULL) return ncclSuccess;  // the NULL stream is always complete
  pthread_mutex_lock(&s->lock);
  while (s->pending > 0) pthread_cond_wait(&s->idle, &s->lock);
  ncclResult_t res = take_error(s);
  batch_t *done = take_done(s);
  pthread_mutex_unlock(&s->lock);
  free_batches(done);
  return res;
}

WEFT_API(ncclResult_t, weftStreamQuery, cudaStream_t stream);
ncclResult_t weftStreamQuery(cudaStream_t stream) {
  weft_stream_t *s;
  WEFTCHECK(weft_stream_resolve(stream, "weftStreamQuery", &s));
  if (s == NULL) return ncclSuccess;
  pthread_mutex_lock(&s->lock);
  ncclResult_t res = s->pending > 0 ? ncclInProgress : take_error(s);
  pthread_mutex_unlock(&s->lock);
  return res;
}

WEFT_API(ncclResult_t, weftStreamDestroy, cudaStream_t stream);
ncclResult_t weftStreamDestroy(cudaStream_t stream) {
  weft_stream_t *s;
  if (stream == NULL) {
    WARN("weftStreamDestroy: stream is NULL");
    return ncclInvalidArgument;
  }
  WEFTCHECK(weft_stream_resolve(stream, "weftStreamDestroy", &s));
  pthread_mutex_lock(&live_lock);
  for (weft_stream_t **p = &live; *p != NULL; p = &(*p)->next_live) {
    if (*p == s) {
      *p = s->next_live;
      break;
    }
  }
  pthread_mutex_unlock(&live_lock);
  weft_stream_destroy_private(s);
  return ncclSuccess;
}

void weft_stream_destroy_private(weft_stream_t *s) {
  // Pending work finishes first, as with cudaStreamDestroy.
  pthread_mutex_lock(&s->lock);
  s->stop = 1;
  pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->lock);
  pthread_join(s->thread, NULL);
  free_batches(take_done(s));
  pthread_mutex_destroy(&s->lock);
  pthread_cond_destroy(&s->work);
  pthread_cond_destroy(&s->idle);
  s->magic = 0;
  free(s);
}
