/*
 * shm.h — shared-memory transport: one POSIX shared-memory segment per rank.
 *
 * A rank's segment holds its doorbell, the abort word of its host's ranks
 * (read from the segment of the host's lowest rank), the board of collective descriptors that peers
 * compare to catch mismatched calls, and one FIFO per (source rank, traffic
 * class) that the sources write into. Segments are unlinked as soon as every
 * peer has mapped them, so nothing is left in /dev/shm after any exit.
 */
#ifndef WEFT_SHM_H
#define WEFT_SHM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "doorbell.h"
#include "nccl.h"

#define WEFT_DESC_RING 256
#define WEFT_SHM_MAGIC 0x7765667473686d32ull  // "weftshm2": the header layout below
#define WEFT_SHM_MAX_SLOTS 64

// What a rank says about the collective it launched as number `seq`.
typedef struct {
  _Atomic uint64_t seq;  // written last (release); seq+1 so 0 means "empty"
  uint8_t coll, dtype, algo, op;
  int32_t root;
  uint64_t count;
  uint64_t slice;
  uint64_t sendbuff, recvbuff;  // the caller's buffers, in the caller's address space
} weft_desc_t;

// What the owner is doing, for weft-status (tools/weft_status.c) to read
// from outside: written by the engine at launch, before it sleeps, and at
// the end of each operation; `version` is odd while it is being written.
enum { WEFT_STATUS_IDLE = 0, WEFT_STATUS_RUNNING, WEFT_STATUS_WAITING, WEFT_STATUS_FAILED };
typedef struct {
  _Atomic uint64_t version;
  uint64_t seq;               // collective number (point-to-point: the last collective's)
  uint8_t coll, dtype, algo, state;
  int32_t waiting_on;         // a rank the operation waits on, -1 none
  uint64_t count, bytes_moved, bytes_total;
  int64_t since_ns;           // CLOCK_MONOTONIC when the state began
  uint64_t ops_done;          // operations finished on this communicator
} weft_status_t;

typedef struct {
  _Alignas(64) uint64_t magic;
  uint32_t nranks, rank;
  uint64_t slot_bytes, nslots, fifo_bytes;
  int32_t pid;             // the owning process ...
  uint64_t pidns;          // ... in this pid namespace (inode of /proc/self/ns/pid)
  _Atomic int32_t closed;  // the owner tore the communicator down: its exit is not a death
  _Alignas(64) weft_status_t status;
  uint64_t self_addr;      // where the owner maps this header (probe for cross-memory reads)
  _Alignas(64) weft_doorbell_t doorbell;
  _Alignas(64) _Atomic int32_t abort_code;  // meaningful in rank 0's segment
  int32_t abort_rank;
  char abort_reason[256];
  _Alignas(64) weft_desc_t desc[WEFT_DESC_RING];
} weft_shm_header_t;

typedef struct weft_shm {
  int rank, nranks;
  int leader;                 // lowest rank on this host: its segment holds the host's abort word
  size_t seg_bytes, slot_bytes, nslots, fifo_bytes;
  char name[64];
  int name_live;              // our segment's name still exists in /dev/shm
  weft_shm_header_t **hdr;    // the segment of every rank on this host, mapped here; NULL for other hosts
  int *pidfd;                 // per rank: a pidfd of its process when it is another process here, else -1
  int64_t next_liveness_ns;   // when weft_shm_dead_peer looks again
} weft_shm_t;

// Mark the communicator failed for every rank of this host (first reason
// wins) and wake them; the network transport carries the failure to the
// other hosts.
void weft_shm_abort(weft_shm_t *shm, ncclResult_t code, const char *reason);
// Watch the processes of the other ranks on this host (shm_liveness.c):
// pidfds, which become readable when a process exits, even as a zombie.
void weft_shm_watch_peers(weft_shm_t *shm);
void weft_shm_unwatch_peers(weft_shm_t *shm);
// A rank of this host whose process has exited, or -1. Looks at most every
// WEFT_LIVENESS_MS (cheap to call in a wait loop); `now_ns` is the caller's clock.
int weft_shm_dead_peer(weft_shm_t *shm, int64_t now_ns);
// The inode of this process's pid namespace (0 if unknown).
uint64_t weft_shm_pidns(void);

// The header holding this host's abort word, code, rank and reason.
static inline weft_shm_header_t *weft_shm_abort_header(const weft_shm_t *shm) { return shm->hdr[shm->leader]; }
// The communicator-wide failure code (ncclSuccess while none).
static inline ncclResult_t weft_shm_abort_code(const weft_shm_t *shm) {
  return (ncclResult_t)atomic_load_explicit(&weft_shm_abort_header(shm)->abort_code, memory_order_acquire);
}
static inline weft_doorbell_t *weft_shm_doorbell(weft_shm_t *shm, int rank) { return &shm->hdr[rank]->doorbell; }

#endif
