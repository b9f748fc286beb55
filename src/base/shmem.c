/*
 * shmem.c — named POSIX shared-memory segments (see shmem.h).
 */
#include "shmem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include "debug.h"
#include "util.h"

void weft_shmem_name(char *buf, size_t len, const char *prefix, int rank) {
  uint64_t nonce = 0;
  if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce)) nonce = (uint64_t)weft_now_ns();
  snprintf(buf, len, "/%s-%d-%016llx-r%d", prefix, (int)getpid(), (unsigned long long)nonce, rank);
}

ncclResult_t weft_shmem_map(const char *name, size_t bytes, int create, void **out) {
  int fd = shm_open(name, O_RDWR | (create ? O_CREAT | O_EXCL : 0) | O_CLOEXEC, 0600);
  if (fd < 0) {
    WARN("shm_open(%s) failed: %s", name, strerror(errno));
    return ncclSystemError;
  }
  if (create && ftruncate(fd, (off_t)bytes) != 0) {
    WARN("ftruncate(%s, %zu) failed: %s (is /dev/shm large enough?)", name, bytes, strerror(errno));
    close(fd);
    shm_unlink(name);
    return ncclSystemError;
  }
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    WARN("mmap of %s (%zu bytes) failed: %s", name, bytes, strerror(errno));
    if (create) shm_unlink(name);
    return ncclSystemError;
  }
  *out = p;
  return ncclSuccess;
}
