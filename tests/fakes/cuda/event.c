/*
 * event.c — events and graph capture for the fake driver (see fake.h).
 *
 * An event counts the records asked for (rec_gen) and the records its
 * streams have run (done_gen): it is complete when they agree, and a
 * cuStreamWaitEvent waits for the record most recent at the time of the call
 * (an event never recorded: no wait). Events are reference-counted, so one
 * destroyed while operations still name it stays until they have run.
 *
 * Capture: between cuStreamBeginCapture and cuStreamEndCapture, operations
 * enqueued on the stream are counted into a dummy CUgraph (cuGraphGetNodes
 * gives the count) and never run; graphs cannot be instantiated. Waiting for
 * a capturing stream (cuStreamSynchronize, cuStreamQuery, cuCtxSynchronize)
 * fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the
 * capture, as do an allocation, a free or a synchronous copy that the
 * thread's capture mode forbids (cuThreadExchangeStreamCaptureMode); asking
 * about an event recorded in a capture gives CUDA_ERROR_CAPTURED_EVENT and
 * invalidates it too; using the legacy stream while a blocking stream of its
 * context captures gives CUDA_ERROR_STREAM_CAPTURE_IMPLICIT. The H200's
 * driver answers all of these alike. Not modelled: a stream joining a
 * capture by waiting on a captured event (CUDA_ERROR_NOT_SUPPORTED here).
 */
#include <stdlib.h>

#include "fake.h"

// ---- Events (fk.lock held for the helpers) ----

void fk_event_put(fk_event *e) {
  if (--e->refs == 0) free(e);
}

void fk_event_done(fk_event *e, uint64_t gen, CUresult err) {
  if (gen < e->done_gen) return;
  e->done_gen = gen;
  e->done_ms = fk_now_ms();
  e->error = err;
  pthread_cond_broadcast(&fk.event_cv);
}

static fk_event *event_find(CUevent h) {
  for (fk_event *e = fk.events; e != NULL; e = e->next)
    if (e == h) return e;
  return NULL;
}

// Asking about an event recorded in a capture fails and ends that capture.
static CUresult captured(fk_event *e) {
  if (e->captured == NULL) return CUDA_SUCCESS;
  for (fk_stream *s = fk.streams; s != NULL; s = s->next)
    if (s->graph == e->captured) fk_capture_invalidate(s);
  return CUDA_ERROR_CAPTURED_EVENT;
}

EXPORT CUresult cuEventCreate(CUevent *ph, unsigned int flags) {
  FK_API();
  if (ph == NULL || (flags & ~7u) != 0) return CUDA_ERROR_INVALID_VALUE;
  if ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING)) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fk.lock);
  fk_ctx *c = fk_current();
  fk_event *e = c != NULL ? calloc(1, sizeof(*e)) : NULL;
  if (e != NULL) {
    e->ctx = c, e->flags = flags, e->refs = 1;
    e->next = fk.events, fk.events = e;
  }
  pthread_mutex_unlock(&fk.lock);
  if (e == NULL) return c == NULL ? CUDA_ERROR_INVALID_CONTEXT : CUDA_ERROR_OUT_OF_MEMORY;
  *ph = e;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuEventDestroy_v2(CUevent h) {
  FK_API();
  pthread_mutex_lock(&fk.lock);
  fk_event *e = event_find(h);
  if (e != NULL) {
    for (fk_event **p = &fk.events; *p != NULL; p = &(*p)->next)
      if (*p == e) {
        *p = e->next;
        break;
      }
    fk_event_put(e);
  }
  pthread_mutex_unlock(&fk.lock);
  return e != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
EXPORT CUresult cuEventDestroy(CUevent h) { return cuEventDestroy_v2(h); }

static CUresult record(CUevent h, CUstream s, unsigned flags) {
  if (flags > 1) return CUDA_ERROR_INVALID_VALUE;  // CU_EVENT_RECORD_DEFAULT or _EXTERNAL
  fk_op op = {.kind = FK_OP_RECORD, .event = h, .flags = flags};
  return fk_submit(s, &op, NULL, NULL);
}

EXPORT CUresult cuEventRecord(CUevent h, CUstream s) {
  FK_API();
  return record(h, s, 0);
}
EXPORT CUresult cuEventRecordWithFlags(CUevent h, CUstream s, unsigned int flags) {
  FK_API();
  return record(h, s, flags);
}

EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent h, unsigned int flags) {
  FK_API();
  if ((flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (h == NULL) return CUDA_ERROR_INVALID_HANDLE;
  fk_op op = {.kind = FK_OP_WAIT_EVENT, .event = h, .flags = flags};
  return fk_submit(s, &op, NULL, NULL);
}

EXPORT CUresult cuEventQuery(CUevent h) {
  FK_API();
  pthread_mutex_lock(&fk.lock);
  fk_event *e = event_find(h);
  CUresult r = e == NULL ? CUDA_ERROR_INVALID_HANDLE : captured(e);
  if (r == CUDA_SUCCESS) r = e->done_gen < e->rec_gen ? CUDA_ERROR_NOT_READY : e->error;
  pthread_mutex_unlock(&fk.lock);
  return r;
}

EXPORT CUresult cuEventSynchronize(CUevent h) {
  FK_API();
  pthread_mutex_lock(&fk.lock);
  fk_event *e = event_find(h);
  CUresult r = e == NULL ? CUDA_ERROR_INVALID_HANDLE : captured(e);
  if (r == CUDA_SUCCESS) {
    uint64_t want = e->rec_gen;
    e->refs++;
    while (e->done_gen < want && !atomic_load(&fk.shutdown)) pthread_cond_wait(&fk.event_cv, &fk.lock);
    r = e->error;
    fk_event_put(e);
  }
  pthread_mutex_unlock(&fk.lock);
  return r;
}

EXPORT CUresult cuEventElapsedTime(float *ms, CUevent start, CUevent end) {
  FK_API();
  if (ms == NULL) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fk.lock);
  fk_event *a = event_find(start), *b = event_find(end);
  CUresult r = CUDA_SUCCESS;
  if (a == NULL || b == NULL || ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) || a->rec_gen == 0 || b->rec_gen == 0)
    r = CUDA_ERROR_INVALID_HANDLE;
  if (r == CUDA_SUCCESS) r = captured(a);
  if (r == CUDA_SUCCESS) r = captured(b);
  if (r == CUDA_SUCCESS && (a->done_gen < a->rec_gen || b->done_gen < b->rec_gen)) r = CUDA_ERROR_NOT_READY;
  if (r == CUDA_SUCCESS) *ms = (float)(b->done_ms - a->done_ms);
  pthread_mutex_unlock(&fk.lock);
  return r;
}
EXPORT CUresult cuEventElapsedTime_v2(float *ms, CUevent start, CUevent end) {
  return cuEventElapsedTime(ms, start, end);
}

// ---- Capture (fk.lock held for the helpers) ----

static int is_special(CUstream h) { return h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD; }

static fk_stream *stream_find(CUstream h) {
  for (fk_stream *s = fk.streams; s != NULL; s = s->next)
    if (s == h) return s;
  return NULL;
}

void fk_capture_invalidate(fk_stream *s) {
  if (s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE) s->capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
}

// The stream leaves capture mode; returns its graph.
static fk_graph *capture_stop(fk_stream *s) {
  fk_graph *g = s->graph;
  if (!(s->flags & CU_STREAM_NON_BLOCKING)) s->ctx->blocking_captures--;
  s->capture = CU_STREAM_CAPTURE_STATUS_NONE;
  s->graph = NULL;
  return g;
}

void fk_capture_end(fk_stream *s) { free(capture_stop(s)); }

CUresult fk_capture_check_unsafe(void) {
  if (fk_tls_capture_mode == CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_SUCCESS;
  CUresult r = CUDA_SUCCESS;
  for (fk_stream *s = fk.streams; s != NULL; s = s->next) {
    if (s->capture == CU_STREAM_CAPTURE_STATUS_NONE) continue;
    int own = pthread_equal(s->capture_thread, pthread_self()) && s->capture_mode != CU_STREAM_CAPTURE_MODE_RELAXED;
    int global =
        fk_tls_capture_mode == CU_STREAM_CAPTURE_MODE_GLOBAL && s->capture_mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
    if (own || global) fk_capture_invalidate(s), r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  return r;
}

CUresult fk_capture_check_legacy(fk_stream *legacy) {
  if (legacy->ctx->blocking_captures == 0) return CUDA_SUCCESS;
  for (fk_stream *s = fk.streams; s != NULL; s = s->next)
    if (s->ctx == legacy->ctx && !(s->flags & CU_STREAM_NON_BLOCKING)) fk_capture_invalidate(s);
  return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
}

EXPORT CUresult cuStreamBeginCapture_v2(CUstream h, int mode) {
  FK_API();
  if (mode < CU_STREAM_CAPTURE_MODE_GLOBAL || mode > CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
  if (is_special(h)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // the legacy stream cannot capture
  pthread_mutex_lock(&fk.lock);
  fk_stream *s = stream_find(h);
  CUresult r = s == NULL ? CUDA_ERROR_INVALID_HANDLE
               : s->capture != CU_STREAM_CAPTURE_STATUS_NONE ? CUDA_ERROR_ILLEGAL_STATE
                                                             : CUDA_SUCCESS;
  fk_graph *g = r == CUDA_SUCCESS ? calloc(1, sizeof(*g)) : NULL;
  if (r == CUDA_SUCCESS && g == NULL) r = CUDA_ERROR_OUT_OF_MEMORY;
  if (r == CUDA_SUCCESS) {
    s->capture = CU_STREAM_CAPTURE_STATUS_ACTIVE, s->capture_mode = mode, s->capture_thread = pthread_self();
    s->graph = g;
    if (!(s->flags & CU_STREAM_NON_BLOCKING)) s->ctx->blocking_captures++;
  }
  pthread_mutex_unlock(&fk.lock);
  return r;
}

EXPORT CUresult cuStreamEndCapture(CUstream h, CUgraph *graph) {
  FK_API();
  if (graph == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (is_special(h)) return CUDA_ERROR_ILLEGAL_STATE;
  pthread_mutex_lock(&fk.lock);
  fk_stream *s = stream_find(h);
  CUresult r = s == NULL                                      ? CUDA_ERROR_INVALID_HANDLE
               : s->capture == CU_STREAM_CAPTURE_STATUS_NONE ? CUDA_ERROR_ILLEGAL_STATE
               : s->capture_mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(s->capture_thread, pthread_self())
                   ? CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD
                   : CUDA_SUCCESS;
  if (r == CUDA_SUCCESS) {
    int invalid = s->capture == CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    fk_graph *g = capture_stop(s);
    if (invalid) {
      free(g);
      *graph = NULL;
      r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else {
      g->next = fk.graphs, fk.graphs = g;
      *graph = g;
    }
  }
  pthread_mutex_unlock(&fk.lock);
  return r;
}

EXPORT CUresult cuStreamIsCapturing(CUstream h, int *status) {
  FK_API();
  if (status == NULL) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fk.lock);
  CUresult r = CUDA_SUCCESS;
  if (is_special(h)) {
    fk_ctx *c = fk_current();
    r = c == NULL ? CUDA_ERROR_INVALID_CONTEXT : c->blocking_captures > 0 ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : r;
    if (r == CUDA_SUCCESS) *status = CU_STREAM_CAPTURE_STATUS_NONE;
  } else {
    fk_stream *s = stream_find(h);
    if (s == NULL) r = CUDA_ERROR_INVALID_HANDLE;
    else *status = s->capture;
  }
  pthread_mutex_unlock(&fk.lock);
  return r;
}

EXPORT CUresult cuThreadExchangeStreamCaptureMode(int *mode) {
  FK_API();
  if (mode == NULL || *mode < CU_STREAM_CAPTURE_MODE_GLOBAL || *mode > CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  int old = fk_tls_capture_mode;
  fk_tls_capture_mode = *mode;
  *mode = old;
  return CUDA_SUCCESS;
}

// ---- Graphs: only counted ----

static fk_graph **graph_slot(CUgraph g) {
  for (fk_graph **p = &fk.graphs; *p != NULL; p = &(*p)->next)
    if (*p == g) return p;
  return NULL;
}

EXPORT CUresult cuGraphDestroy(CUgraph g) {
  FK_API();
  pthread_mutex_lock(&fk.lock);
  fk_graph **p = graph_slot(g);
  if (p != NULL) *p = g->next, free(g);
  pthread_mutex_unlock(&fk.lock);
  return p != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// The number of nodes (operations captured); the nodes themselves are not
// modelled (CUDA_ERROR_NOT_SUPPORTED when asked for).
EXPORT CUresult cuGraphGetNodes(CUgraph g, CUgraphNode *nodes, size_t *count) {
  FK_API();
  if (count == NULL) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fk.lock);
  fk_graph **p = graph_slot(g);
  CUresult r = p == NULL ? CUDA_ERROR_INVALID_VALUE : nodes != NULL ? CUDA_ERROR_NOT_SUPPORTED : CUDA_SUCCESS;
  if (r == CUDA_SUCCESS) *count = g->nodes;
  pthread_mutex_unlock(&fk.lock);
  return r;
}
