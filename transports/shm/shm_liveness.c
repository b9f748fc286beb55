/*
 * shm_liveness.c — noticing that a rank on this host has died.
 *
 * A rank killed outright (SIGKILL, a crash) leaves its peers waiting on
 * slots that never fill. Every rank holds a pidfd for the process of each
 * other rank of its host (from the pid in that rank's segment, when both
 * share a pid namespace); a pidfd becomes readable when the process exits,
 * zombie or not, and cannot be fooled by a reused pid. The engine asks
 * between sleeps, at most every WEFT_LIVENESS_MS, so a death fails the
 * communicator within that bound instead of at WEFT_TIMEOUT. A process
 * that exits after tearing its communicator down (the `closed` mark in its
 * segment) has only finished before the others. Ranks on
 * other hosts are watched by their TCP connections (end of stream,
 * keepalive, TCP_USER_TIMEOUT: src/base/socket.c).
 */
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "debug.h"
#include "env.h"
#include "shm.h"

uint64_t weft_shm_pidns(void) {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

void weft_shm_watch_peers(weft_shm_t *shm) {
  shm->pidfd = malloc((size_t)shm->nranks * sizeof(int));
  if (shm->pidfd == NULL) return;  // then nothing is watched: WEFT_TIMEOUT still bounds every wait
  const weft_shm_header_t *me = shm->hdr[shm->rank];
  int watched = 0;
  for (int p = 0; p < shm->nranks; p++) {
    const weft_shm_header_t *h = shm->hdr[p];
    shm->pidfd[p] = -1;
    if (h == NULL || p == shm->rank || h->pid == me->pid || h->pidns != me->pidns || me->pidns == 0) continue;
    shm->pidfd[p] = (int)syscall(SYS_pidfd_open, (pid_t)h->pid, 0);
    if (shm->pidfd[p] < 0) {
      INFO(WEFT_LOG_SHM, "rank %d: cannot watch rank %d (pid %d): its death is noticed by WEFT_TIMEOUT only",
           shm->rank, p, (int)h->pid);
      continue;
    }
    fcntl(shm->pidfd[p], F_SETFD, FD_CLOEXEC);
    watched++;
  }
  INFO(WEFT_LOG_SHM, "rank %d: watching %d processes of this host's ranks", shm->rank, watched);
}

void weft_shm_unwatch_peers(weft_shm_t *shm) {
  if (shm->pidfd == NULL) return;
  for (int p = 0; p < shm->nranks; p++)
    if (shm->pidfd[p] >= 0) close(shm->pidfd[p]);
  free(shm->pidfd);
  shm->pidfd = NULL;
}

int weft_shm_dead_peer(weft_shm_t *shm, int64_t now_ns) {
  if (shm == NULL || shm->pidfd == NULL || now_ns < shm->next_liveness_ns) return -1;
  int64_t every_ms = weft_env_WEFT_LIVENESS_MS();
  if (every_ms <= 0) return -1;
  shm->next_liveness_ns = now_ns + every_ms * 1000000;
  for (int p = 0; p < shm->nranks; p++) {
    if (shm->pidfd[p] < 0) continue;
    struct pollfd pfd = {.fd = shm->pidfd[p], .events = POLLIN};
    if (poll(&pfd, 1, 0) <= 0) continue;
    if (!atomic_load(&shm->hdr[p]->closed)) return p;
    close(shm->pidfd[p]);  // it left after tearing the communicator down: done with it, not dead
    shm->pidfd[p] = -1;
  }
  return -1;
}
