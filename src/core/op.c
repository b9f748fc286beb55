/*
 * op.c — the life of a weft_op_t in memory: allocation, release of its
 * communicator, and freeing.
 *
 * A call's operation is built on the caller's stack; only one that
 * outlives the call (the engine's, a group's, a stream's) moves to the
 * heap. Each thread keeps its most recently freed operation, schedule arrays
 * included, and hands it out again on the next allocation, so a loop of
 * small calls costs no allocator round trips for the operation and its
 * steps. A thread's kept operation is freed when the thread exits. The
 * process also keeps its largest freed staging buffer (an in-place call's
 * input set aside), so a loop of such calls does not map and fault in
 * fresh pages on every call.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "engine.h"

static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static int cache_ok;

static pthread_mutex_t stage_lock = PTHREAD_MUTEX_INITIALIZER;
static void *stage_kept;
static size_t stage_kept_bytes;

void *weft_op_stage_take(size_t bytes, size_t *got) {
  void *p = NULL;
  pthread_mutex_lock(&stage_lock);
  if (stage_kept != NULL && stage_kept_bytes >= bytes) {
    p = stage_kept;
    *got = stage_kept_bytes;
    stage_kept = NULL;
  }
  pthread_mutex_unlock(&stage_lock);
  if (p == NULL && (p = malloc(bytes)) != NULL) *got = bytes;
  return p;
}

void weft_op_stage_give(void *p, size_t bytes) {
  if (p == NULL) return;
  pthread_mutex_lock(&stage_lock);
  if (stage_kept == NULL || stage_kept_bytes < bytes) {  // keep the larger
    void *old = stage_kept;
    stage_kept = p;
    stage_kept_bytes = bytes;
    p = old;
  }
  pthread_mutex_unlock(&stage_lock);
  free(p);
}

static void free_fully(weft_op_t *op) {
  weft_schedule_free(&op->sched);
  free(op);
}

static void cache_destroy(void *p) { free_fully(p); }

static void cache_init(void) { cache_ok = pthread_key_create(&cache_key, cache_destroy) == 0; }

weft_op_t *weft_op_alloc(void) {
  pthread_once(&cache_once, cache_init);
  weft_op_t *op = cache_ok ? pthread_getspecific(cache_key) : NULL;
  if (op == NULL) return calloc(1, sizeof(*op));
  pthread_setspecific(cache_key, NULL);
  return op;
}

weft_op_t *weft_op_to_heap(const weft_op_t *local) {
  weft_op_t *op = weft_op_alloc();
  if (op == NULL) {
    WARN("out of memory for an operation (%zu bytes)", sizeof(*op));
    return NULL;
  }
  weft_schedule_t sched = op->sched;  // a kept operation's arrays, emptied
  *op = *local;
  op->sched = sched;
  return op;
}

void weft_op_release_comm(weft_op_t *op) {
  if (op == NULL || !op->counted) return;
  if (__builtin_expect(op->prof.on, 0)) weft_plugin_hooks.op_stop(op->comm->prof, &op->prof);  // one that never ran
  op->counted = 0;
  atomic_fetch_sub(&op->comm->inflight, 1);  // the last touch of the communicator
}

void weft_op_free(weft_op_t *op) {
  if (op == NULL) return;
  weft_op_release_comm(op);
  free(op->send_ticket);  // the block that also holds recv_ticket, lanes, expect and verified
  free(op->peer_buf);
  free(op->scratch);
  weft_op_stage_give(op->send_copy, op->send_copy_bytes);
  if (!cache_ok || pthread_getspecific(cache_key) != NULL) {
    free_fully(op);
    return;
  }
  // Keep the schedule's arrays (emptied) and nothing else.
  weft_schedule_t sched = op->sched;
  sched.nsteps = sched.nlanes = 0;
  memset(op, 0, sizeof(*op));
  op->sched = sched;
  if (pthread_setspecific(cache_key, op) != 0) free_fully(op);
}
