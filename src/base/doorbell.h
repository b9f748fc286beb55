/*
 * doorbell.h — how a rank sleeps until a peer has done something for it.
 *
 * Each rank owns one doorbell in shared memory. A peer that posts data to the
 * rank, or frees a slot the rank waits to fill, rings it: a fence and a load
 * while the rank is awake, a count bump and a futex wake only if it sleeps. A waiting rank arms the doorbell,
 * re-checks its work, and sleeps on the futex until the count moves (or a
 * bounded time passes, so aborts and timeouts are noticed). No core burns
 * while a rank waits, which is what lets 8 ranks share 2 cores.
 */
#ifndef WEFT_DOORBELL_H
#define WEFT_DOORBELL_H

#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  _Atomic uint32_t seq;       // bumped by every ring
  _Atomic uint32_t sleepers;  // threads of the owning rank inside weft_doorbell_sleep
} weft_doorbell_t;

// Call after publishing the work. The fence orders that publication before
// the load of `sleepers`; a sleeper increments `sleepers` before it
// re-checks for work, so either it sees the work or we see it and wake it.
// A ring that finds nobody asleep touches no shared line for writing.
static inline void weft_doorbell_ring(weft_doorbell_t *d) {
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&d->sleepers, memory_order_relaxed) == 0) return;
  atomic_fetch_add(&d->seq, 1);
  syscall(SYS_futex, &d->seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

// Returns the count to pass to weft_doorbell_sleep; re-check work after arming.
static inline uint32_t weft_doorbell_arm(weft_doorbell_t *d) {
  atomic_fetch_add(&d->sleepers, 1);
  return atomic_load(&d->seq);
}

static inline void weft_doorbell_sleep(weft_doorbell_t *d, uint32_t seen, int64_t max_ns) {
  struct timespec ts = {.tv_sec = max_ns / 1000000000, .tv_nsec = max_ns % 1000000000};
  syscall(SYS_futex, &d->seq, FUTEX_WAIT, seen, &ts, NULL, 0);
}

static inline void weft_doorbell_disarm(weft_doorbell_t *d) { atomic_fetch_sub(&d->sleepers, 1); }

#endif
