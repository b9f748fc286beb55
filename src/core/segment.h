/*
 * segment.h — the host control block: one small POSIX shared-memory
 * segment per rank, mapped by every rank of its host.
 *
 * A rank's segment holds its doorbell (peers ring it, it sleeps on it), the
 * abort word of its host's ranks (read from the segment of the host's
 * lowest rank), the board of collective descriptors that peers compare to
 * catch mismatched calls, and the status weft-status reads from outside.
 * It belongs to the core, not to a transport: every communicator has one,
 * whichever transports carry its data (the shared-memory transport keeps
 * its FIFOs in segments of its own, transports/shm/). Segments are unlinked
 * as soon as every rank of the host has mapped them, so nothing is left in
 * /dev/shm after any exit.
 */
#ifndef WEFT_SEGMENT_H
#define WEFT_SEGMENT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "bootstrap.h"
#include "doorbell.h"
#include "nccl.h"

#define WEFT_DESC_RING 256
#define WEFT_SEGMENT_MAGIC 0x7765667473656734ull  // "weftseg4": the header layout below, then the signals

// What a rank says about the collective it launched as number `seq`: one
// cache line each, so a peer reading one call's entry does not take the
// line the owner is writing the next call's into.
typedef struct {
  _Alignas(64) _Atomic uint64_t seq;  // written last (release); seq+1 so 0 means "empty"
  uint8_t coll, dtype, algo, op;
  int32_t root;
  uint64_t count;
  uint64_t slice;
  uint64_t sendbuff, recvbuff;  // the caller's buffers, in the caller's address space
} weft_desc_t;

// What the owner is doing, for weft-status (tools/weft_status.c) to read
// from outside: written by the engine at launch, before it sleeps, and at
// the end of each operation; `version` is odd while it is being written.
#define WEFT_STATUS_NCOLLS 8  // weft_coll_t's collectives (AllReduce .. Scatter); Send/Recv are not counted
enum { WEFT_STATUS_IDLE = 0, WEFT_STATUS_RUNNING, WEFT_STATUS_WAITING, WEFT_STATUS_FAILED };
typedef struct {
  _Atomic uint64_t version;
  uint64_t seq;               // collective number (point-to-point: the last collective's)
  uint8_t coll, dtype, algo, state;
  int32_t waiting_on;         // a rank the operation waits on, -1 none
  uint64_t count, bytes_moved, bytes_total;
  int64_t since_ns;           // CLOCK_MONOTONIC when the state began
  uint64_t ops_done;          // operations finished on this communicator
  // Collectives launched, per weft_coll_t (AllReduce .. Scatter), for RAS:
  // written by the owner under its communicator's lock, read by anyone.
  _Atomic uint64_t launched[WEFT_STATUS_NCOLLS];
} weft_status_t;

typedef struct {
  _Alignas(64) uint64_t magic;
  uint32_t nranks, rank;
  int32_t pid;             // the owning process ...
  uint64_t pidns;          // ... in this pid namespace (inode of /proc/self/ns/pid)
  _Atomic int32_t closed;  // the owner tore the communicator down: its exit is not a death
  _Alignas(64) weft_status_t status;
  _Alignas(64) weft_doorbell_t doorbell;
  _Alignas(64) _Atomic int32_t abort_code;  // meaningful in the host's lowest rank's segment
  int32_t abort_rank;
  char abort_reason[256];
  _Alignas(64) weft_desc_t desc[WEFT_DESC_RING];
} weft_segment_header_t;

typedef struct weft_segment {
  int rank, nranks;
  int leader;                     // lowest rank on this host: its segment holds the host's abort word
  size_t bytes;
  char name[64];
  int name_live;                  // our segment's name still exists in /dev/shm
  weft_segment_header_t **hdr;    // the segment of every rank on this host, mapped here; NULL for other hosts
  int *pidfd;                     // per rank: a pidfd of its process when it is another process here, else -1
  uint8_t *dead;                  // per rank: its process was seen to exit without closing its segment
  int ndead;
  int64_t next_liveness_ns;       // when weft_segment_poll_deaths looks again
} weft_segment_t;

// Collective over the communicator: create this rank's segment and map
// those of the ranks of its host (host_of[r] == host_of[rank]). Every rank
// also states its FIFO geometry (slot_bytes, nslots), which must be the
// same everywhere. *out is set even on failure, for weft_segment_close.
ncclResult_t weft_segment_open(weft_bootstrap_t *bs, const int *host_of, size_t slot_bytes, size_t nslots,
                               weft_segment_t **out);
// Remove this rank's segment name from /dev/shm; call once every rank has
// returned from weft_segment_open (a later bootstrap collective tells).
void weft_segment_unlink(weft_segment_t *seg);
// Marks the segment closed (the owner's exit is then not a death) and unmaps; NULL is fine.
void weft_segment_close(weft_segment_t *seg);

// Mark the communicator failed for every rank of this host (first reason
// wins) and wake them; the network transport carries the failure to the
// other hosts.
void weft_segment_abort(weft_segment_t *seg, ncclResult_t code, const char *reason);

// The header holding this host's abort word, code, rank and reason (NULL
// while the segment is not fully open).
static inline weft_segment_header_t *weft_segment_abort_header(const weft_segment_t *seg) {
  return seg != NULL && seg->hdr != NULL ? seg->hdr[seg->leader] : NULL;
}
// The communicator-wide failure code (ncclSuccess while none).
static inline ncclResult_t weft_segment_abort_code(const weft_segment_t *seg) {
  const weft_segment_header_t *h = weft_segment_abort_header(seg);
  return h != NULL ? (ncclResult_t)atomic_load_explicit(&h->abort_code, memory_order_acquire) : ncclSuccess;
}
// After the header: the counters of one-sided signals (ncclSignal,
// ncclPutSignal) this rank received, one per sender, each written only by
// its sender (release, after the data). NULL for another host's rank.
static inline _Atomic uint64_t *weft_segment_signal(const weft_segment_t *seg, int rank, int from) {
  if (seg->hdr == NULL || seg->hdr[rank] == NULL) return NULL;
  return (_Atomic uint64_t *)((char *)seg->hdr[rank] + sizeof(weft_segment_header_t)) + from;
}
// A rank's doorbell: this host's ranks only (NULL for another host's).
static inline weft_doorbell_t *weft_segment_doorbell(const weft_segment_t *seg, int rank) {
  return seg->hdr != NULL && seg->hdr[rank] != NULL ? &seg->hdr[rank]->doorbell : NULL;
}

// A collective of type `coll` (weft_coll_t) launched on this rank: counted
// for RAS. The caller holds its communicator's lock (one writer).
static inline void weft_segment_count_launch(const weft_segment_t *seg, int rank, int coll) {
  if (seg == NULL || seg->hdr == NULL || seg->hdr[rank] == NULL || coll < 0 || coll >= WEFT_STATUS_NCOLLS) return;
  _Atomic uint64_t *c = &seg->hdr[rank]->status.launched[coll];
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
}

// segment_liveness.c: watch the processes of the other ranks on this host
// through pidfds, which become readable when a process exits, even as a zombie.
void weft_segment_watch_peers(weft_segment_t *seg);
void weft_segment_unwatch_peers(weft_segment_t *seg);
// How many ranks of this host are known to have died (exited without
// closing their segment). Looks at the processes at most every
// WEFT_LIVENESS_MS (cheap to call in a wait loop); `now_ns` is the caller's clock.
int weft_segment_poll_deaths(weft_segment_t *seg, int64_t now_ns);
// Whether rank p (of this communicator) is known dead; the lowest such rank.
static inline int weft_segment_peer_dead(const weft_segment_t *seg, int p) {
  return seg != NULL && seg->dead != NULL && p >= 0 && p < seg->nranks && seg->dead[p];
}
int weft_segment_first_dead(const weft_segment_t *seg);
// A rank of this host whose process has exited without closing its
// segment, looked at now with fresh pidfds (any thread may call it: it
// changes nothing the engine's watch keeps); -1 when none. *pid: its pid.
int weft_segment_find_dead_now(const weft_segment_t *seg, int *pid);
// The inode of this process's pid namespace (0 if unknown).
uint64_t weft_segment_pidns(void);

#endif
