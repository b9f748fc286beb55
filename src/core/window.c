/*
 * window.c — ncclCommWindowRegister, ncclCommWindowDeregister and
 * ncclWinGetUserPtr on host memory (see window.h).
 *
 * Registration and deregistration are collective, as in NCCL: every rank
 * calls them in the same order. Registration exchanges the buffers over the
 * bootstrap ring; deregistration ends with a barrier, so no peer can still
 * be writing into a buffer its owner takes back. Device buffers keep a
 * clear error until the GPU path has windows.
 */
#include "window.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "api.h"
#include "checks.h"
#include "comm.h"
#include "placement.h"

#define WINDOW_MAGIC 0x77656674776e6431ull  // "weftwnd1"

static void window_free(ncclWindow_t w) {
  if (w == NULL) return;
  w->magic = 0;
  weft_window_unmap(w, w->nranks);
  free(w->peer_addr);
  free(w->peer_size);
  free(w);
}

int weft_window_of(struct ncclComm *comm, ncclWindow_t win, const char *api) {
  int found = 0;
  pthread_mutex_lock(&comm->lock);
  for (ncclWindow_t w = comm->windows; w != NULL && !found; w = w->next) found = w == win;
  pthread_mutex_unlock(&comm->lock);
  if (!found) WARN("%s: win=%p is not a window of this communicator", api, (void *)win);
  return found;
}

void weft_windows_free(struct ncclComm *comm) {
  for (ncclWindow_t w = comm->windows, next; w != NULL; w = next) {
    next = w->next;
    window_free(w);
  }
  comm->windows = NULL;
}

NCCL_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
         int winFlags);
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags) {
  WEFTCHECK(weft_comm_check(comm, "ncclCommWindowRegister"));
  if (win == NULL || buff == NULL || size == 0) {
    WARN("ncclCommWindowRegister: %s", win == NULL ? "win is NULL" : buff == NULL ? "buff is NULL" : "size=0");
    return ncclInvalidArgument;
  }
  *win = NULL;
  if ((winFlags & ~(NCCL_WIN_COLL_SYMMETRIC | NCCL_WIN_STRICT_ORDERING)) != 0) {
    WARN("ncclCommWindowRegister: winFlags=0x%x has bits NCCL does not define", (unsigned)winFlags);
    return ncclInvalidArgument;
  }
  weft_mem_info_t m;
  weft_mem_classify(buff, size, &m);
  if (m.kind != WEFT_MEM_HOST) {
    WARN("ncclCommWindowRegister: buff=%p is %s memory: windows on device memory need the GPU path, which has none "
         "yet (host memory works)", buff, weft_mem_kind_name(m.kind));
    return ncclInvalidUsage;
  }
  int n = comm->nranks;
  weft_window_card_t *cards = calloc((size_t)n, sizeof(*cards));
  ncclWindow_t w = calloc(1, sizeof(*w));
  if (w != NULL) {
    w->peer_addr = calloc((size_t)n, sizeof(uint64_t));
    w->peer_size = calloc((size_t)n, sizeof(uint64_t));
  }
  if (cards == NULL) {
    window_free(w);
    return ncclSystemError;
  }
  // A rank that could not make its window still takes part in the exchange,
  // so that none is left waiting; its card (size 0) tells the others.
  int ok = w != NULL && w->peer_addr != NULL && w->peer_size != NULL;
  cards[comm->rank] = (weft_window_card_t){.addr = ok ? (uint64_t)(uintptr_t)buff : 0, .size = ok ? size : 0,
                                           .flags = winFlags};
  weft_window_card_fill(buff, size, &cards[comm->rank]);
  ncclResult_t res = weft_bootstrap_allgather(&comm->bs, cards, sizeof(*cards));
  for (int p = 0; res == ncclSuccess && p < n; p++) {
    if (cards[p].size == 0) {
      WARN("ncclCommWindowRegister: rank %d could not register its part", p);
      res = p == comm->rank ? ncclSystemError : ncclRemoteError;
    }
  }
  if (res != ncclSuccess) {
    free(cards);
    window_free(w);
    return res;
  }
  for (int p = 0; p < n; p++) w->peer_addr[p] = cards[p].addr, w->peer_size[p] = cards[p].size;
  w->nranks = n;
  w->user = buff;
  res = weft_window_map(comm, w, cards);
  free(cards);
  if (res != ncclSuccess) {
    window_free(w);
    return res;
  }
  w->magic = WINDOW_MAGIC;
  w->comm = comm;
  w->user = buff;
  w->size = size;
  w->flags = winFlags;
  pthread_mutex_lock(&comm->lock);
  w->next = comm->windows;
  comm->windows = w;
  if (w->mapped) atomic_fetch_add(&comm->nwindows_mapped, 1);
  if (w->mapped && (winFlags & NCCL_WIN_COLL_SYMMETRIC)) atomic_fetch_add(&comm->nsymmetric, 1);
  pthread_mutex_unlock(&comm->lock);
  INFO(WEFT_LOG_REG, "rank %d registered a window of %zu bytes at %p (flags 0x%x)", comm->rank, size, buff,
       (unsigned)winFlags);
  *win = w;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  WEFTCHECK(weft_comm_check(comm, "ncclCommWindowDeregister"));
  if (!weft_window_of(comm, win, "ncclCommWindowDeregister")) return ncclInvalidArgument;
  // No peer may still be writing into it: everyone deregisters together.
  ncclResult_t res = weft_bootstrap_barrier(&comm->bs);
  pthread_mutex_lock(&comm->lock);
  for (ncclWindow_t *p = &comm->windows; *p != NULL; p = &(*p)->next) {
    if (*p == win) {
      *p = win->next;
      if (win->mapped) atomic_fetch_sub(&comm->nwindows_mapped, 1);
      if (win->mapped && (win->flags & NCCL_WIN_COLL_SYMMETRIC)) atomic_fetch_sub(&comm->nsymmetric, 1);
      break;
    }
  }
  pthread_mutex_unlock(&comm->lock);
  window_free(win);
  return res;
}

NCCL_API(ncclResult_t, ncclWinGetUserPtr, ncclComm_t comm, ncclWindow_t win, void **outUserPtr);
ncclResult_t pncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void **outUserPtr) {
  WEFTCHECK(weft_comm_check(comm, "ncclWinGetUserPtr"));
  if (outUserPtr == NULL) {
    WARN("ncclWinGetUserPtr: outUserPtr is NULL");
    return ncclInvalidArgument;
  }
  if (!weft_window_of(comm, win, "ncclWinGetUserPtr")) return ncclInvalidArgument;
  *outUserPtr = win->user;
  return ncclSuccess;
}
