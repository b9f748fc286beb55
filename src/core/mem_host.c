/*
 * mem_host.c — ncclMemAlloc's host backend: a memfd of the requested size
 * mapped shared, readable and writable. The descriptor stays open with the
 * block so a peer process can map the same pages (the basis for
 * single-copy transfers on host memory). Used whenever the device backend
 * (mem_cuda.c) does not apply: no CUDA driver, no VMM calls, or no current
 * context on the calling thread.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "checks.h"
#include "mem.h"

ncclResult_t weft_mem_host_alloc(size_t size, weft_mem_block_t *b) {
  int fd = memfd_create("weft-mem", MFD_CLOEXEC);
  if (fd < 0) {
    WARN("ncclMemAlloc(size=%zu): memfd_create failed: %s", size, strerror(errno));
    return ncclSystemError;
  }
  int rc;
  do rc = ftruncate(fd, (off_t)size);
  while (rc != 0 && (errno == EINTR || errno == EAGAIN));
  if (rc != 0) {
    WARN("ncclMemAlloc(size=%zu): ftruncate of the memfd failed: %s", size, strerror(errno));
    close(fd);
    return ncclSystemError;
  }
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    WARN("ncclMemAlloc(size=%zu): mmap of the memfd failed: %s", size, strerror(errno));
    close(fd);
    return ncclSystemError;
  }
  *b = (weft_mem_block_t){.ptr = p, .size = size, .requested = size, .kind = WEFT_MEM_HOST, .device = -1,
                          .fd = fd, .handle = 0, .exportable = 1};
  return ncclSuccess;
}

void weft_mem_host_free(const weft_mem_block_t *b) {
  if (munmap(b->ptr, b->size) != 0) WARN("ncclMemFree(ptr=%p): munmap failed: %s", b->ptr, strerror(errno));
  close(b->fd);
}
