/*
 * window.h — memory windows on host memory (ncclCommWindowRegister) and
 * what one-sided calls need of them (window.c, rma.c).
 *
 * A window is registered by every rank of a communicator together: each
 * names a buffer of its own, and every rank learns every rank's buffer
 * address and size, so a peer's part can be written with cross-memory
 * attach. The handle is the same kind of object on every rank, and a call
 * names the peer's part by the peer's rank. Where every part lies in an
 * ncclMemAlloc block, every rank also maps the peers' parts (window_map.c),
 * and collectives on the window load and store peers' memory directly.
 */
#ifndef WEFT_WINDOW_H
#define WEFT_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

// What each rank tells the others of its part at registration.
typedef struct {
  uint64_t addr, size;  // the part, in its owner's address space
  uint64_t blk_off;     // its offset in the owner's ncclMemAlloc block
  int32_t flags;        // NCCL_WIN_*
  int32_t fd;           // the block's memfd in the owner's process; -1: not in one
} weft_window_card_t;

typedef struct {
  void *base;
  size_t len;
} weft_window_mapping_t;

struct ncclWindow_vidmem {
  uint64_t magic;
  struct ncclComm *comm;
  void *user;             // this rank's buffer
  size_t size;
  int flags;              // NCCL_WIN_*
  uint64_t *peer_addr;    // [nranks]: each rank's buffer, in its own address space
  uint64_t *peer_size;    // [nranks]
  int nranks;
  int mapped;             // every rank maps every peer's part (the ranks agree)
  char **near;            // [nranks] when mapped: each rank's part in this process
  weft_window_mapping_t *maps;  // [nranks]: this process's mappings of peers' parts, to unmap
  struct ncclWindow_vidmem *next;  // the communicator's windows
};

// win is a live window of comm (under comm->lock); 0 with a WARN naming api otherwise.
int weft_window_of(struct ncclComm *comm, ncclWindow_t win, const char *api);
// At destroy: frees every window comm still has.
void weft_windows_free(struct ncclComm *comm);

// Fills card's fd and blk_off for a part [buff, buff + size) (fd -1 when
// it is not inside an exportable host block).
void weft_window_card_fill(const void *buff, size_t size, weft_window_card_t *card);
// Collective: maps every peer's part where it can, then agrees with the
// other ranks; w->mapped is 1 only when every rank mapped every peer.
ncclResult_t weft_window_map(struct ncclComm *comm, ncclWindow_t w, const weft_window_card_t *cards);
void weft_window_unmap(ncclWindow_t w, int nranks);
// [far, far + bytes) of rank peer's memory as this process can address it,
// when it lies in a mapped window; NULL otherwise.
char *weft_window_near(struct ncclComm *comm, int peer, uint64_t far, uint64_t bytes);
// Whether [buff, buff + bytes) lies in a mapped window registered with
// NCCL_WIN_COLL_SYMMETRIC: NCCL's promise that every rank passes buffers of
// its own such window, so the ranks can all choose the direct schedules.
int weft_window_symmetric(struct ncclComm *comm, const void *buff, size_t bytes);

#endif
