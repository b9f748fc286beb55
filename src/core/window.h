/*
 * window.h — memory windows on host memory (ncclCommWindowRegister) and
 * what one-sided calls need of them (window.c, rma.c).
 *
 * A window is registered by every rank of a communicator together: each
 * names a buffer of its own, and every rank learns every rank's buffer
 * address and size, so a peer's part can be written with cross-memory
 * attach. The handle is the same kind of object on every rank, and a call
 * names the peer's part by the peer's rank.
 */
#ifndef WEFT_WINDOW_H
#define WEFT_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

struct ncclWindow_vidmem {
  uint64_t magic;
  struct ncclComm *comm;
  void *user;             // this rank's buffer
  size_t size;
  int flags;              // NCCL_WIN_*
  uint64_t *peer_addr;    // [nranks]: each rank's buffer, in its own address space
  uint64_t *peer_size;    // [nranks]
  struct ncclWindow_vidmem *next;  // the communicator's windows
};

// win is a live window of comm (under comm->lock); 0 with a WARN naming api otherwise.
int weft_window_of(struct ncclComm *comm, ncclWindow_t win, const char *api);
// At destroy: frees every window comm still has.
void weft_windows_free(struct ncclComm *comm);

#endif
