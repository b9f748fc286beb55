/*
 * mem.c — ncclMemAlloc/ncclMemFree, the table of live blocks, and buffer
 * registration.
 *
 * ncclMemAlloc returns device memory (mem_cuda.c, the CUDA VMM calls) when
 * the CUDA driver is loaded and the calling thread has a current context,
 * and host memory backed by a memfd (mem_host.c) otherwise;
 * docs/gpu_memory.md says when and how. The table here remembers each
 * block (kind, device, descriptor or VMM handle) for ncclMemFree and for
 * weft_mem_block_find. Registration records a buffer with its communicator
 * (windows are window.c's).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "api.h"
#include "checks.h"
#include "comm.h"
#include "mem.h"

typedef struct node {
  weft_mem_block_t b;
  struct node *next;
} node_t;

static pthread_mutex_t blocks_lock = PTHREAD_MUTEX_INITIALIZER;
static node_t *blocks;

int weft_mem_block_find(const void *ptr, weft_mem_block_t *out) {
  uintptr_t a = (uintptr_t)ptr;
  int found = 0;
  pthread_mutex_lock(&blocks_lock);
  for (node_t *n = blocks; n != NULL; n = n->next) {
    uintptr_t base = (uintptr_t)n->b.ptr;
    if (a >= base && a - base < n->b.size) {
      if (out != NULL) *out = n->b;
      found = 1;
      break;
    }
  }
  pthread_mutex_unlock(&blocks_lock);
  return found;
}

NCCL_API(ncclResult_t, ncclMemAlloc, void **ptr, size_t size);
ncclResult_t pncclMemAlloc(void **ptr, size_t size) {
  if (ptr == NULL) {
    WARN("ncclMemAlloc: ptr is NULL");
    return ncclInvalidArgument;
  }
  *ptr = NULL;
  if (size == 0) {
    WARN("ncclMemAlloc: size=0");
    return ncclInvalidArgument;
  }
  node_t *n = calloc(1, sizeof(*n));
  if (n == NULL) {
    WARN("ncclMemAlloc(size=%zu): out of memory for the block record", size);
    return ncclSystemError;
  }
  int made = 0;
  const char *why = NULL;
  ncclResult_t res;
  WEFTCHECKGOTO(weft_mem_cuda_alloc(size, &n->b, &made, &why), res, fail);
  if (made) {
    INFO(WEFT_LOG_ALLOC, "ncclMemAlloc %zu bytes: device memory on device %d at %p (%zu bytes mapped, %s)", size,
         n->b.device, n->b.ptr, n->b.size, n->b.exportable ? "shareable by file descriptor" : "not shareable");
  } else {
    WEFTCHECKGOTO(weft_mem_host_alloc(size, &n->b), res, fail);
    INFO(WEFT_LOG_ALLOC, "ncclMemAlloc %zu bytes: host memory (memfd) at %p (%s)", size, n->b.ptr, why);
  }
  pthread_mutex_lock(&blocks_lock);
  n->next = blocks;
  blocks = n;
  pthread_mutex_unlock(&blocks_lock);
  *ptr = n->b.ptr;
  return ncclSuccess;
fail:
  free(n);
  return res;
}

NCCL_API(ncclResult_t, ncclMemFree, void *ptr);
ncclResult_t pncclMemFree(void *ptr) {
  if (ptr == NULL) return ncclSuccess;
  pthread_mutex_lock(&blocks_lock);
  node_t *found = NULL;
  for (node_t **p = &blocks; *p != NULL; p = &(*p)->next) {
    if ((*p)->b.ptr == ptr) {
      found = *p;
      *p = found->next;
      break;
    }
  }
  pthread_mutex_unlock(&blocks_lock);
  if (found == NULL) {
    WARN("ncclMemFree: ptr=%p was not allocated by ncclMemAlloc", ptr);
    return ncclInvalidArgument;
  }
  ncclResult_t res = ncclSuccess;
  if (found->b.kind == WEFT_MEM_DEVICE) {
    res = weft_mem_cuda_free(&found->b);
    INFO(WEFT_LOG_ALLOC, "ncclMemFree %p: device memory on device %d, %zu bytes mapped", ptr, found->b.device,
         found->b.size);
  } else {
    weft_mem_host_free(&found->b);
    INFO(WEFT_LOG_ALLOC, "ncclMemFree %p: host memory, %zu bytes", ptr, found->b.size);
  }
  free(found);
  return res;
}

// "host memory", "registered host memory", "device memory (device 1)", ... for a log line.
static const char *describe(const void *buff, size_t size, char *text, size_t len) {
  weft_mem_info_t m;
  weft_mem_classify(buff, size, &m);
  if (m.kind == WEFT_MEM_HOST) snprintf(text, len, "%s", m.registered ? "registered host memory" : "host memory");
  else if (m.device >= 0) snprintf(text, len, "%s memory (device %d)", weft_mem_kind_name(m.kind), m.device);
  else snprintf(text, len, "%s memory", weft_mem_kind_name(m.kind));
  return text;
}

NCCL_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void *buff, size_t size, void **handle);
ncclResult_t pncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle) {
  WEFTCHECK(weft_comm_check(comm, "ncclCommRegister"));
  if (buff == NULL || handle == NULL || size == 0) {
    WARN("ncclCommRegister: %s", buff == NULL ? "buff is NULL" : handle == NULL ? "handle is NULL" : "size=0");
    return ncclInvalidArgument;
  }
  weft_registration_t *r = calloc(1, sizeof(*r));
  if (r == NULL) return ncclSystemError;
  r->buff = buff;
  r->size = size;
  pthread_mutex_lock(&comm->lock);
  r->next = comm->registrations;
  comm->registrations = r;
  pthread_mutex_unlock(&comm->lock);
  if (WEFT_LOG_ENABLED(WEFT_LEVEL_INFO, WEFT_LOG_REG)) {
    char kind[64];
    INFO(WEFT_LOG_REG, "rank %d registered %zu bytes at %p: %s", comm->rank, size, buff,
         describe(buff, size, kind, sizeof(kind)));
  }
  *handle = r;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void *handle);
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void *handle) {
  WEFTCHECK(weft_comm_check(comm, "ncclCommDeregister"));
  pthread_mutex_lock(&comm->lock);
  weft_registration_t *found = NULL;
  for (weft_registration_t **p = &comm->registrations; *p != NULL; p = &(*p)->next) {
    if (*p == handle) {
      found = *p;
      *p = found->next;
      break;
    }
  }
  pthread_mutex_unlock(&comm->lock);
  if (found == NULL) {
    WARN("ncclCommDeregister: handle=%p is not a registration of this communicator", handle);
    return ncclInvalidArgument;
  }
  if (WEFT_LOG_ENABLED(WEFT_LEVEL_INFO, WEFT_LOG_REG)) {
    char kind[64];
    INFO(WEFT_LOG_REG, "rank %d deregistered %zu bytes at %p: %s", comm->rank, found->size, found->buff,
         describe(found->buff, found->size, kind, sizeof(kind)));
  }
  free(found);
  return ncclSuccess;
}
