/*
 * segment_liveness.c — noticing that a rank on this host has died.
 *
 * A rank killed outright (SIGKILL, a crash) leaves its peers waiting on
 * slots that never fill. Every rank holds a pidfd for the process of each
 * other rank of its host (from the pid in that rank's segment, when both
 * share a pid namespace); a pidfd becomes readable when the process exits,
 * zombie or not, and cannot be fooled by a reused pid. The engine asks
 * between sleeps, at most every WEFT_LIVENESS_MS, and fails an operation
 * that waits on a dead rank within that bound instead of at WEFT_TIMEOUT
 * (and through the abort word, the communicator). A rank that dies after
 * its last send of an operation has nothing more to give: what it wrote
 * outlives it in its peers' mappings, so they finish that operation and
 * fail at the first one that needs it. A process that exits after tearing
 * its communicator down (the `closed` mark in its segment) has only
 * finished before the others. Ranks on
 * other hosts are watched by their TCP connections (end of stream,
 * keepalive, TCP_USER_TIMEOUT: src/base/socket.c).
 *
 * weft_segment_find_dead_now answers the same question for another thread
 * (the network proxy, deciding whom to blame for a lost connection) without
 * touching the engine's watch: it opens its own pidfds and closes them.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "debug.h"
#include "env.h"
#include "segment.h"

uint64_t weft_segment_pidns(void) {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

// Whether rank p runs in another process of this pid namespace, so that a
// pidfd can tell when it exits.
static int another_process(const weft_segment_t *seg, int p) {
  const weft_segment_header_t *me = seg->hdr[seg->rank], *h = seg->hdr[p];
  return h != NULL && p != seg->rank && h->pid != me->pid && h->pidns == me->pidns && me->pidns != 0;
}

// A pidfd is readable once its process has exited.
static int pidfd_exited(int fd) {
  struct pollfd pfd = {.fd = fd, .events = POLLIN};
  return poll(&pfd, 1, 0) > 0;
}

void weft_segment_watch_peers(weft_segment_t *seg) {
  seg->pidfd = malloc((size_t)seg->nranks * sizeof(int));
  seg->dead = calloc((size_t)seg->nranks, 1);
  if (seg->pidfd == NULL || seg->dead == NULL) {  // then nothing is watched: WEFT_TIMEOUT still bounds every wait
    free(seg->pidfd);
    free(seg->dead);
    seg->pidfd = NULL;
    seg->dead = NULL;
    return;
  }
  int watched = 0;
  for (int p = 0; p < seg->nranks; p++) {
    const weft_segment_header_t *h = seg->hdr[p];
    seg->pidfd[p] = -1;
    if (!another_process(seg, p)) continue;
    seg->pidfd[p] = (int)syscall(SYS_pidfd_open, (pid_t)h->pid, 0);
    if (seg->pidfd[p] < 0) {
      INFO(WEFT_LOG_SHM, "rank %d: cannot watch rank %d (pid %d): its death is noticed by WEFT_TIMEOUT only",
           seg->rank, p, (int)h->pid);
      continue;
    }
    fcntl(seg->pidfd[p], F_SETFD, FD_CLOEXEC);
    watched++;
  }
  INFO(WEFT_LOG_SHM, "rank %d: watching %d processes of this host's ranks", seg->rank, watched);
}

void weft_segment_unwatch_peers(weft_segment_t *seg) {
  if (seg->pidfd == NULL) return;
  for (int p = 0; p < seg->nranks; p++)
    if (seg->pidfd[p] >= 0) close(seg->pidfd[p]);
  free(seg->pidfd);
  free(seg->dead);
  seg->pidfd = NULL;
  seg->dead = NULL;
}

int weft_segment_poll_deaths(weft_segment_t *seg, int64_t now_ns) {
  if (seg == NULL || seg->pidfd == NULL || now_ns < seg->next_liveness_ns) return seg != NULL ? seg->ndead : 0;
  int64_t every_ms = weft_env_WEFT_LIVENESS_MS();
  if (every_ms <= 0) return seg->ndead;
  seg->next_liveness_ns = now_ns + every_ms * 1000000;
  for (int p = 0; p < seg->nranks; p++) {
    if (seg->pidfd[p] < 0 || !pidfd_exited(seg->pidfd[p])) continue;
    // Either way it is gone; only an exit without tearing down is a death.
    if (!atomic_load(&seg->hdr[p]->closed)) {
      seg->dead[p] = 1;
      seg->ndead++;
    }
    close(seg->pidfd[p]);
    seg->pidfd[p] = -1;
  }
  return seg->ndead;
}

int weft_segment_first_dead(const weft_segment_t *seg) {
  for (int p = 0; seg != NULL && seg->dead != NULL && p < seg->nranks; p++)
    if (seg->dead[p]) return p;
  return -1;
}

// Whether the process of this host's rank p has exited without closing its
// segment: a pidfd that cannot be opened (gone and reaped) or is readable
// (exited, perhaps a zombie).
static int exited_now(const weft_segment_t *seg, int p) {
  const weft_segment_header_t *h = seg->hdr[p];
  if (!another_process(seg, p) || atomic_load(&h->closed)) return 0;
  int fd = (int)syscall(SYS_pidfd_open, (pid_t)h->pid, 0);
  if (fd < 0) return errno == ESRCH;
  int gone = pidfd_exited(fd);
  close(fd);
  return gone && !atomic_load(&h->closed);
}

int weft_segment_find_dead_now(const weft_segment_t *seg, int *pid) {
  for (int p = 0; seg != NULL && seg->hdr != NULL && p < seg->nranks; p++)
    if (exited_now(seg, p)) {
      if (pid != NULL) *pid = (int)seg->hdr[p]->pid;
      return p;
    }
  return -1;
}
