/*
 * cuda_ring.h — the staging ring of a CUDA stream bridge: regions of one
 * pinned block handed to batches in order and taken back, also in order,
 * when the stream has copied their results out (its `freed` counter).
 * Pure bookkeeping (no CUDA), so it is unit-tested on its own.
 *
 * A full ring is back-pressure: the caller waits for the stream when every
 * region in use belongs to a queued batch (it will be freed), and takes a
 * dedicated block instead when waiting cannot help (the request is larger
 * than the ring, or a region of its own unqueued group is in the way).
 */
#ifndef WEFT_CUDA_RING_H
#define WEFT_CUDA_RING_H

#include <stddef.h>
#include <stdint.h>

#define WEFT_RING_USES 64
#define WEFT_RING_ALIGN 64

typedef struct {
  size_t size;  // bytes of the block
  size_t head;  // where the next region starts
  struct {
    uint32_t k;  // its batch (0: staged, not queued yet)
    int dead;    // given back unqueued: reclaimed in turn
    size_t start, end;
  } use[WEFT_RING_USES];  // FIFO of regions in use, oldest first
  int first, count;
} weft_ring_t;

enum { WEFT_RING_OK = 0, WEFT_RING_WAIT = 1, WEFT_RING_NEVER = 2 };

// Whether counter x has reached k. The CUDA path's counters (batch numbers,
// reached/done/freed) only grow and wrap around 2^32, as cuStreamWaitValue32's
// GEQ compares them.
static inline int weft_cyclic_ge(uint32_t x, uint32_t k) { return (int32_t)(x - k) >= 0; }

void weft_ring_init(weft_ring_t *r, size_t size);
// Takes back the oldest regions whose batches the stream freed (cyclic >= k).
void weft_ring_reclaim(weft_ring_t *r, uint32_t freed);
// `need` bytes (rounded up to WEFT_RING_ALIGN): WEFT_RING_OK with *off and
// *slot, WEFT_RING_WAIT (no room until the oldest queued batch is freed),
// or WEFT_RING_NEVER (waiting cannot make room).
int weft_ring_take(weft_ring_t *r, size_t need, size_t *off, int *slot);
// The region's batch number, once its stream work is queued.
void weft_ring_set_k(weft_ring_t *r, int slot, uint32_t k);
// A region that will never be queued.
void weft_ring_drop(weft_ring_t *r, int slot);
// Regions in use.
static inline int weft_ring_busy(const weft_ring_t *r) { return r->count; }

#endif
