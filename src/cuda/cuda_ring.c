/*
 * cuda_ring.c — the staging ring's bookkeeping (see cuda_ring.h).
 */
#include "cuda_ring.h"

#include <string.h>

void weft_ring_init(weft_ring_t *r, size_t size) {
  memset(r, 0, sizeof(*r));
  r->size = size;
}

void weft_ring_reclaim(weft_ring_t *r, uint32_t freed) {
  while (r->count > 0) {
    int i = r->first;
    if (!r->use[i].dead && (r->use[i].k == 0 || !weft_cyclic_ge(freed, r->use[i].k))) break;
    r->first = (r->first + 1) % WEFT_RING_USES;
    r->count--;
  }
  if (r->count == 0) r->head = 0;
}

// Whether waiting for the stream can free the oldest region.
static int oldest_will_free(const weft_ring_t *r) {
  return r->count > 0 && (r->use[r->first].k != 0 || r->use[r->first].dead);
}

int weft_ring_take(weft_ring_t *r, size_t need, size_t *off, int *slot) {
  need = (need + WEFT_RING_ALIGN - 1) & ~(size_t)(WEFT_RING_ALIGN - 1);
  if (need == 0) need = WEFT_RING_ALIGN;
  if (need > r->size) return WEFT_RING_NEVER;
  size_t at = SIZE_MAX;
  if (r->count == WEFT_RING_USES) {
    at = SIZE_MAX;
  } else if (r->count == 0) {
    at = 0;
  } else {
    size_t tail = r->use[r->first].start;
    if (r->head > tail) {  // in use: [tail, head); free: [head, size) and [0, tail)
      if (r->size - r->head >= need) at = r->head;
      else if (tail >= need) at = 0;
    } else if (r->head < tail && tail - r->head >= need) {  // wrapped: free [head, tail)
      at = r->head;
    }
  }
  if (at == SIZE_MAX) return oldest_will_free(r) ? WEFT_RING_WAIT : WEFT_RING_NEVER;
  int i = (r->first + r->count) % WEFT_RING_USES;
  r->use[i].k = 0, r->use[i].dead = 0, r->use[i].start = at, r->use[i].end = at + need;
  r->count++;
  r->head = at + need;
  *off = at;
  *slot = i;
  return WEFT_RING_OK;
}

void weft_ring_set_k(weft_ring_t *r, int slot, uint32_t k) { r->use[slot].k = k; }

void weft_ring_drop(weft_ring_t *r, int slot) {
  int newest = (r->first + r->count - 1) % WEFT_RING_USES;
  if (r->count > 0 && slot == newest) {  // the newest: as if never taken
    r->count--;
    r->head = r->count > 0 ? r->use[(r->first + r->count - 1) % WEFT_RING_USES].end : 0;
    return;
  }
  r->use[slot].dead = 1;
}
