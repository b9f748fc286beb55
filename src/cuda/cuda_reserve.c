/*
 * cuda_reserve.c — pinned host memory taken per CUDA context when a
 * communicator is created, so that calls on CUDA streams need not pin
 * memory (see cuda_staging.h for why that matters).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_staging.h"
#include "debug.h"
#include "env.h"

#define COUNTER_SLOT 256
#define COUNTER_SLOTS 64

typedef struct reserve {
  weft_CUcontext ctx;
  char *counters;                 // COUNTER_SLOTS slots, pinned and device-mapped
  weft_CUdeviceptr counters_dev;
  uint8_t slot_used[COUNTER_SLOTS];
  staging_t *idle;
  struct reserve *next;
} reserve_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static reserve_t *reserves;

static reserve_t *find_locked(weft_CUcontext ctx) {
  for (reserve_t *r = reserves; r != NULL; r = r->next)
    if (r->ctx == ctx) return r;
  return NULL;
}

void weft_cuda_reserve_init(void) {
  const weft_cuda_driver_t *d = weft_cuda_driver();
  weft_CUcontext ctx = NULL;
  if (!weft_cuda_has_engine(d) || d->cuCtxGetCurrent(&ctx) != WEFT_CUDA_SUCCESS || ctx == NULL) return;
  pthread_mutex_lock(&lock);
  reserve_t *r = find_locked(ctx);
  if (r != NULL || (r = calloc(1, sizeof(*r))) == NULL) {
    pthread_mutex_unlock(&lock);
    return;
  }
  r->ctx = ctx;
  void *p = NULL;
  if (d->cuMemHostAlloc(&p, COUNTER_SLOT * COUNTER_SLOTS,
                        WEFT_CU_MEMHOSTALLOC_PORTABLE | WEFT_CU_MEMHOSTALLOC_DEVICEMAP) == WEFT_CUDA_SUCCESS &&
      d->cuMemHostGetDevicePointer(&r->counters_dev, p, 0) == WEFT_CUDA_SUCCESS) {
    memset(p, 0, COUNTER_SLOT * COUNTER_SLOTS);
    r->counters = p;
  } else if (p != NULL) {
    d->cuMemFreeHost(p);
  }
  size_t bytes = (size_t)weft_env_WEFT_CUDA_STAGING_BYTES();
  int64_t n = weft_env_WEFT_CUDA_STAGING_BLOCKS();
  for (int64_t i = 0; i < n && bytes > 0; i++) {
    staging_t *b = calloc(1, sizeof(*b));
    void *host = NULL;
    if (b == NULL || d->cuMemHostAlloc(&host, bytes, WEFT_CU_MEMHOSTALLOC_PORTABLE) != WEFT_CUDA_SUCCESS) {
      free(b);
      break;
    }
    b->host = host, b->bytes = bytes, b->next = r->idle, r->idle = b;
  }
  r->next = reserves;
  reserves = r;
  pthread_mutex_unlock(&lock);
  INFO(WEFT_LOG_ALLOC, "CUDA context %p: %lld staging blocks of %zu bytes and %d counter slots reserved", (void *)ctx,
       (long long)n, bytes, r->counters != NULL ? COUNTER_SLOTS : 0);
}

staging_t *weft_cuda_reserve_take(weft_CUcontext ctx, size_t bytes) {
  pthread_mutex_lock(&lock);
  reserve_t *r = find_locked(ctx);
  staging_t **best = NULL;
  for (staging_t **p = r != NULL ? &r->idle : NULL; p != NULL && *p != NULL; p = &(*p)->next)
    if ((*p)->bytes >= bytes && (best == NULL || (*p)->bytes < (*best)->bytes)) best = p;
  staging_t *b = best != NULL ? *best : NULL;
  if (b != NULL) *best = b->next, b->next = NULL;
  pthread_mutex_unlock(&lock);
  return b;
}

void weft_cuda_reserve_give(weft_CUcontext ctx, staging_t *blocks) {
  pthread_mutex_lock(&lock);
  reserve_t *r = find_locked(ctx);
  if (r == NULL && (r = calloc(1, sizeof(*r))) != NULL) {  // a context with no communicator made in it
    r->ctx = ctx;
    r->next = reserves;
    reserves = r;
  }
  while (blocks != NULL && r != NULL) {
    staging_t *next = blocks->next;
    blocks->busy = 0, blocks->k = 0;
    blocks->next = r->idle, r->idle = blocks;
    blocks = next;
  }
  pthread_mutex_unlock(&lock);
}

int weft_cuda_reserve_counters(weft_CUcontext ctx, void **host, weft_CUdeviceptr *dev) {
  pthread_mutex_lock(&lock);
  reserve_t *r = find_locked(ctx);
  int got = 0;
  for (int i = 0; r != NULL && r->counters != NULL && i < COUNTER_SLOTS && !got; i++) {
    if (r->slot_used[i]) continue;
    r->slot_used[i] = 1;
    *host = r->counters + (size_t)i * COUNTER_SLOT;
    *dev = r->counters_dev + (weft_CUdeviceptr)i * COUNTER_SLOT;
    memset(*host, 0, COUNTER_SLOT);
    got = 1;
  }
  pthread_mutex_unlock(&lock);
  return got;
}

void weft_cuda_reserve_counters_put(weft_CUcontext ctx, void *host) {
  pthread_mutex_lock(&lock);
  reserve_t *r = find_locked(ctx);
  if (r != NULL && r->counters != NULL && (char *)host >= r->counters &&
      (char *)host < r->counters + COUNTER_SLOT * COUNTER_SLOTS)
    r->slot_used[((char *)host - r->counters) / COUNTER_SLOT] = 0;
  pthread_mutex_unlock(&lock);
}
