/*
 * window_map.c — a window's peers mapped into this process (see window.h).
 *
 * A window whose every part lies in an ncclMemAlloc block of host memory (a
 * memfd) can be reached with plain loads and stores: each rank duplicates
 * every same-host peer's memfd (pidfd_getfd, or /proc/PID/fd/N where the
 * kernel lacks it; both need the permission cross-memory attach needs) and
 * maps the window's pages. Collectives on such buffers then read and write
 * the peers' memory directly instead of copying through the kernel
 * (process_vm_readv) or through shared-memory slots. The ranks agree on the
 * outcome: a window is "mapped" only when every rank mapped every peer.
 * The mappings live as long as the window: deregistration is collective and
 * ends with a barrier, so no rank still touches a peer's pages when they go.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "checks.h"
#include "comm.h"
#include "mem.h"
#include "segment.h"
#include "window.h"

// A copy of descriptor `fd` of process `pid`, or -1 (errno set).
static int borrow_fd(pid_t pid, int fd) {
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_getfd)
  int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (pidfd >= 0) {
    int got = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
    int err = errno;
    close(pidfd);
    if (got >= 0) return got;
    if (err != ENOSYS) {
      errno = err;
      return -1;
    }
  }
#endif
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, fd);
  return open(path, O_RDWR | O_CLOEXEC);
}

void weft_window_card_fill(const void *buff, size_t size, weft_window_card_t *card) {
  weft_mem_block_t b;
  card->fd = -1;
  if (!weft_mem_block_find(buff, &b) || b.kind != WEFT_MEM_HOST || !b.exportable || b.fd < 0) return;
  uint64_t off = (uint64_t)((uintptr_t)buff - (uintptr_t)b.ptr);
  if (size > b.size - off) return;  // runs past the block
  card->fd = b.fd;
  card->blk_off = off;
}

// Maps rank p's part; 1 on success.
static int map_peer(struct ncclComm *comm, ncclWindow_t w, int p, const weft_window_card_t *card) {
  long page = sysconf(_SC_PAGESIZE);
  uint64_t start = card->blk_off & ~(uint64_t)(page - 1), lead = card->blk_off - start;
  size_t len = (size_t)((lead + card->size + (uint64_t)page - 1) & ~(uint64_t)(page - 1));
  int fd = borrow_fd(comm->bs.peers[p].pid, card->fd);
  if (fd < 0) {
    INFO(WEFT_LOG_REG, "rank %d cannot map rank %d's window (descriptor %d of pid %d: %s): no direct access",
         comm->rank, p, card->fd, (int)comm->bs.peers[p].pid, strerror(errno));
    return 0;
  }
  void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)start);
  int err = errno;
  close(fd);
  if (m == MAP_FAILED) {
    INFO(WEFT_LOG_REG, "rank %d cannot map rank %d's window (%zu bytes): %s", comm->rank, p, len, strerror(err));
    return 0;
  }
  w->maps[p].base = m;
  w->maps[p].len = len;
  w->near[p] = (char *)m + lead;
  return 1;
}

void weft_window_unmap(ncclWindow_t w, int nranks) {
  for (int p = 0; w->maps != NULL && p < nranks; p++)
    if (w->maps[p].base != NULL) munmap(w->maps[p].base, w->maps[p].len);
  free(w->maps);
  free(w->near);
  w->maps = NULL;
  w->near = NULL;
  w->mapped = 0;
}

ncclResult_t weft_window_map(struct ncclComm *comm, ncclWindow_t w, const weft_window_card_t *cards) {
  int n = comm->nranks, ok = 1;
  w->near = calloc((size_t)n, sizeof(*w->near));
  w->maps = calloc((size_t)n, sizeof(*w->maps));
  if (w->near == NULL || w->maps == NULL) ok = 0;
  for (int p = 0; ok && p < n; p++) {
    if (p == comm->rank || comm->bs.peers[p].pid == comm->bs.peers[comm->rank].pid) {
      w->near[p] = (char *)(uintptr_t)cards[p].addr;  // this process's own memory
    } else if (comm->seg == NULL || comm->seg->hdr == NULL || comm->seg->hdr[p] == NULL || cards[p].fd < 0) {
      ok = 0;  // another host, shared memory off, or not in a memfd block
    } else {
      ok = map_peer(comm, w, p, &cards[p]);
    }
  }
  // Every rank must agree, or the ranks would choose different schedules.
  int *all = calloc((size_t)n, sizeof(int));
  if (all == NULL) {
    weft_window_unmap(w, n);
    return ncclSystemError;
  }
  all[comm->rank] = ok;
  ncclResult_t res = weft_bootstrap_allgather(&comm->bs, all, sizeof(int));
  for (int p = 0; p < n; p++) ok &= all[p];
  free(all);
  if (res != ncclSuccess || !ok) weft_window_unmap(w, n);
  else w->mapped = 1;
  INFO(WEFT_LOG_REG, "rank %d: window at %p %s", comm->rank, w->user,
       w->mapped ? "mapped by every rank: collectives on it load and store peers' memory directly"
                 : "not mapped by every rank: peers are reached by cross-memory attach");
  return res;
}

char *weft_window_near(struct ncclComm *comm, int peer, uint64_t far, uint64_t bytes) {
  char *near = NULL;
  pthread_mutex_lock(&comm->lock);
  for (ncclWindow_t w = comm->windows; w != NULL && near == NULL; w = w->next) {
    if (!w->mapped) continue;
    uint64_t base = w->peer_addr[peer], size = w->peer_size[peer];
    if (far >= base && far - base <= size && bytes <= size - (far - base)) near = w->near[peer] + (far - base);
  }
  pthread_mutex_unlock(&comm->lock);
  return near;
}

int weft_window_symmetric(struct ncclComm *comm, const void *buff, size_t bytes) {
  if (atomic_load_explicit(&comm->nsymmetric, memory_order_relaxed) == 0 || bytes == 0) return 0;
  uint64_t a = (uint64_t)(uintptr_t)buff;
  int found = 0;
  pthread_mutex_lock(&comm->lock);
  for (ncclWindow_t w = comm->windows; w != NULL && !found; w = w->next) {
    uint64_t base = (uint64_t)(uintptr_t)w->user;
    found = w->mapped && (w->flags & NCCL_WIN_COLL_SYMMETRIC) && a >= base && a - base <= w->size &&
            bytes <= w->size - (a - base);
  }
  pthread_mutex_unlock(&comm->lock);
  return found;
}
