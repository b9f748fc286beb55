/*
 * mem.c — ncclMemAlloc/ncclMemFree and buffer registration on host memory.
 *
 * ncclMemAlloc returns memory backed by a memfd and mapped shared, so a peer
 * process can map the same pages (the basis for single-copy transfers);
 * the allocation table remembers each block's descriptor. Registration
 * records a buffer with its communicator; windows (symmetric GPU memory)
 * have no host-memory meaning and are refused.
 */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "api.h"
#include "checks.h"
#include "comm.h"

typedef struct block {
  void *ptr;
  size_t size;
  int fd;
  struct block *next;
} block_t;

static pthread_mutex_t blocks_lock = PTHREAD_MUTEX_INITIALIZER;
static block_t *blocks;

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
  block_t *b = calloc(1, sizeof(*b));
  if (b == NULL) return ncclSystemError;
  b->fd = memfd_create("weft-mem", MFD_CLOEXEC);
  if (b->fd < 0 || ftruncate(b->fd, (off_t)size) != 0) {
    WARN("ncclMemAlloc(%zu): %s", size, strerror(errno));
    if (b->fd >= 0) close(b->fd);
    free(b);
    return ncclSystemError;
  }
  b->ptr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, b->fd, 0);
  if (b->ptr == MAP_FAILED) {
    WARN("ncclMemAlloc(%zu): mmap failed: %s", size, strerror(errno));
    close(b->fd);
    free(b);
    return ncclSystemError;
  }
  b->size = size;
  pthread_mutex_lock(&blocks_lock);
  b->next = blocks;
  blocks = b;
  pthread_mutex_unlock(&blocks_lock);
  INFO(WEFT_LOG_ALLOC, "ncclMemAlloc %zu bytes at %p", size, b->ptr);
  *ptr = b->ptr;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclMemFree, void *ptr);
ncclResult_t pncclMemFree(void *ptr) {
  if (ptr == NULL) return ncclSuccess;
  pthread_mutex_lock(&blocks_lock);
  block_t *found = NULL;
  for (block_t **p = &blocks; *p != NULL; p = &(*p)->next) {
    if ((*p)->ptr == ptr) {
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
  munmap(found->ptr, found->size);
  close(found->fd);
  free(found);
  return ncclSuccess;
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
  INFO(WEFT_LOG_REG, "rank %d registered %zu bytes at %p", comm->rank, size, buff);
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
  free(found);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
         int winFlags);
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags) {
  (void)buff;
  (void)win;
  WEFTCHECK(weft_comm_check(comm, "ncclCommWindowRegister"));
  WARN("ncclCommWindowRegister(size=%zu, flags=%d): symmetric windows are GPU memory; not supported on host "
       "memory",
       size, winFlags);
  return ncclInvalidUsage;
}

NCCL_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  WEFTCHECK(weft_comm_check(comm, "ncclCommWindowDeregister"));
  WARN("ncclCommWindowDeregister(win=%p): no window can exist on host memory", (void *)win);
  return ncclInvalidUsage;
}
