/*
 * waiter.h — the one way a rank waits in the core: the engine for its
 * operations (engine.c), the small-message path for its call (small.c) and
 * ncclWaitSignal for a counter (rma.c) all wait here.
 *
 * A wait polls, spins a while (reading the clock every 16th pass, yielding
 * now and then for ranks that share a core), and once the spin budget is
 * spent asks its owner to look for trouble (deaths, mismatches, timeouts,
 * status for weft-status) and sleeps on the rank's doorbell, re-polling
 * after arming it so a ring is never missed. The sleep is bounded
 * (WEFT_ENGINE_SLEEP_MAX_NS), so aborts and timeouts are noticed.
 *
 * Every poll and check answers with the same words (weft_wait_t). The
 * function is inline, so a caller's poll, a constant function pointer at
 * each call site, becomes a direct call in the caller's loop.
 */
#ifndef WEFT_WAITER_H
#define WEFT_WAITER_H

#include <sched.h>
#include <stdint.h>
#include <time.h>

#include "doorbell.h"
#include "engine.h"
#include "util.h"

// What a poll or a check says.
typedef enum {
  WEFT_WAIT_FAILED = -1,  // the wait is over: it failed (the owner recorded why)
  WEFT_WAIT_IDLE = 0,     // nothing yet
  WEFT_WAIT_READY = 1,    // the wait is over: what it waited for is there
  WEFT_WAIT_MOVED = 2,    // progress, not done: the idle clock starts again
} weft_wait_t;

// Polls `poll(ctx)` until it says READY or FAILED and returns that. After
// spin_ns of idle polling, `check(ctx, now, since)` runs (since: when the
// idle spell began); IDLE from it sends the rank to sleep on `bell`, any
// other answer is taken as a poll's. With bell NULL (operations of several
// communicators, no one doorbell) the rank naps 20 µs instead.
static inline weft_wait_t weft_wait(weft_wait_t (*poll)(void *ctx),
                                    weft_wait_t (*check)(void *ctx, int64_t now, int64_t since), void *ctx,
                                    weft_doorbell_t *bell, int64_t spin_ns) {
  int64_t since = 0;
  for (unsigned spins = 0;; spins++) {
    weft_wait_t r = poll(ctx);
    if (r == WEFT_WAIT_MOVED) {
      since = 0;
      spins = 0;
      continue;
    }
    if (r != WEFT_WAIT_IDLE) return r;
    if ((spins & 15) != 15) {
      weft_cpu_relax();
      continue;
    }
    int64_t now = weft_now_ns();
    if (since == 0) since = now;
    if (now - since < spin_ns) {
      if ((spins & 127) == 127) sched_yield();  // now and then, for ranks sharing a core
      continue;
    }
    r = check(ctx, now, since);
    if (r == WEFT_WAIT_IDLE && bell != NULL) {
      uint32_t seen = weft_doorbell_arm(bell);
      r = poll(ctx);
      if (r == WEFT_WAIT_IDLE) weft_doorbell_sleep(bell, seen, WEFT_ENGINE_SLEEP_MAX_NS);
      weft_doorbell_disarm(bell);
    } else if (r == WEFT_WAIT_IDLE) {
      struct timespec nap = {0, 20000};
      nanosleep(&nap, NULL);
    }
    if (r == WEFT_WAIT_MOVED) {
      since = 0;
      spins = 0;
    } else if (r != WEFT_WAIT_IDLE) {
      return r;
    }
  }
}

#endif
