/*
 * stream.c — host streams (see stream.h and weft.h).
 *
 * A stream is a worker thread and a FIFO of batches. The worker runs each
 * batch with the engine, in submission order, then signals completion.
 * The first failure is kept and returned by the next synchronize or query.
 * Live streams are kept in a registry so that a stray pointer passed as a
 * stream is rejected instead of dereferenced.
 */
#include "stream.h"

#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "checks.h"
#include "weft.h"

#define STREAM_MAGIC 0x77656674737472ull

typedef struct batch {
  weft_op_t **ops;
  int nops;
  struct batch *next;
} batch_t;

struct weft_stream {
  uint64_t magic;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t work;  // the worker waits here for batches (or stop)
  pthread_cond_t idle;  // synchronize waits here for pending == 0
  batch_t *head, *tail;
  int pending;          // batches queued or running
  int stop;
  ncclResult_t error;   // first failure since the last synchronize/query
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

static void *worker(void *arg) {
  weft_stream_t *s = arg;
  pthread_mutex_lock(&s->lock);
  for (;;) {
    while (s->head == NULL && !s->stop) pthread_cond_wait(&s->work, &s->lock);
    if (s->head == NULL && s->stop) break;
    batch_t *b = s->head;
    pthread_mutex_unlock(&s->lock);
    ncclResult_t res = weft_engine_run(b->ops, b->nops);
    for (int i = 0; i < b->nops; i++) weft_op_free(b->ops[i]);
    pthread_mutex_lock(&s->lock);
    if (res != ncclSuccess && s->error == ncclSuccess) s->error = res;
    s->head = b->next;
    if (s->head == NULL) s->tail = NULL;
    s->pending--;
    free(b->ops);
    free(b);
    // Wake synchronizers only when everything is done: a wake per batch
    // would cost a context switch per call on a busy core.
    if (s->pending == 0) pthread_cond_broadcast(&s->idle);
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

ncclResult_t weft_stream_submit(weft_stream_t *s, weft_op_t **ops, int nops) {
  batch_t *b = calloc(1, sizeof(*b));
  if (b == NULL) {
    for (int i = 0; i < nops; i++) weft_op_free(ops[i]);
    free(ops);
    return ncclSystemError;
  }
  b->ops = ops;
  b->nops = nops;
  pthread_mutex_lock(&s->lock);
  if (s->tail != NULL) s->tail->next = b;
  else s->head = b;
  s->tail = b;
  if (s->pending++ == 0) pthread_cond_signal(&s->work);  // the worker only sleeps when idle
  pthread_mutex_unlock(&s->lock);
  return ncclSuccess;
}

WEFT_API(ncclResult_t, weftStreamCreate, cudaStream_t *stream);
ncclResult_t weftStreamCreate(cudaStream_t *stream) {
  if (stream == NULL) {
    WARN("weftStreamCreate: stream is NULL");
    return ncclInvalidArgument;
  }
  weft_stream_t *s = calloc(1, sizeof(*s));
  if (s == NULL) return ncclSystemError;
  s->magic = STREAM_MAGIC;
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->work, NULL);
  pthread_cond_init(&s->idle, NULL);
  int err = pthread_create(&s->thread, NULL, worker, s);
  if (err != 0) {
    WARN("weftStreamCreate: pthread_create failed: %s", strerror(err));
    free(s);
    return ncclSystemError;
  }
  pthread_mutex_lock(&live_lock);
  s->next_live = live;
  live = s;
  pthread_mutex_unlock(&live_lock);
  *stream = (cudaStream_t)(void *)s;
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
  pthread_mutex_unlock(&s->lock);
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
  // Pending work finishes first, as with cudaStreamDestroy.
  pthread_mutex_lock(&s->lock);
  s->stop = 1;
  pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->lock);
  pthread_join(s->thread, NULL);
  pthread_mutex_destroy(&s->lock);
  pthread_cond_destroy(&s->work);
  pthread_cond_destroy(&s->idle);
  s->magic = 0;
  free(s);
  return ncclSuccess;
}
