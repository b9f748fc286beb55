/*
 * engine_status.c — what an operation is doing, told to the outside.
 *
 * Each rank keeps the state of its latest operation in its control
 * segment's status (segment.h): launched, waiting (before the engine
 * sleeps: on which rank, how many bytes moved of how many), finished or
 * failed. weft-status (tools/weft_status.c) and weftrun on SIGUSR1 read it
 * from outside the process, so a hung job shows which rank waits on whom.
 * The same accounting names the ranks a timed-out operation waits on.
 */
#include <sched.h>
#include <stdio.h>

#include "anysrc.h"
#include "engine.h"
#include "segment.h"
#include "util.h"

// The peers an operation waits on (each lane's current step), the bytes
// its steps have moved, and the bytes they move in all.
void weft_engine_stuck_state(const weft_op_t *op, char *peers, size_t len, uint64_t *moved, uint64_t *total,
                             int *first_peer) {
  size_t used = 0;
  int listed = 0;
  peers[0] = '\0';
  *first_peer = -1;
  *moved = *total = 0;
  for (uint32_t l = 0; l < op->sched.nlanes; l++) {
    const weft_lane_t *lane = &op->sched.lanes[l];
    for (uint32_t k = 0; k < lane->count; k++) {
      uint64_t bytes = op->sched.steps[lane->first + k].count * op->esize;
      *total += bytes;
      if (k < op->lanes[l].cursor) *moved += bytes;
      else if (k == op->lanes[l].cursor) *moved += op->lanes[l].done * op->esize;
    }
    // An unmatched receive from any rank: its placeholder step names itself, not whom it waits on.
    if (op->lanes[l].cursor >= lane->count || weft_anysrc_waiting(op)) continue;
    const weft_step_t *st = &op->sched.steps[lane->first + op->lanes[l].cursor];
    int peer = st->recv_peer >= 0 ? st->recv_peer : st->send_peer >= 0 ? st->send_peer : st->rem_peer;
    if (*first_peer < 0) *first_peer = peer;
    if (peer < 0 || used + 16 >= len) continue;
    used += (size_t)snprintf(peers + used, len - used, "%s%d", listed++ ? ", " : "", peer);
  }
  if (weft_anysrc_waiting(op)) snprintf(peers, len, "any (a receive from any rank)");
  else if (!listed) snprintf(peers, len, "none (every lane is done; waiting for peers' descriptors)");
}

// What this rank is doing, in its segment's status (weft-status reads it).
void weft_engine_publish(const weft_op_t *op, int state, int waiting_on, uint64_t moved, uint64_t total,
                         int64_t now_ns) {
  weft_status_t *s = &op->comm->seg->hdr[op->comm->rank]->status;
  // Several threads may publish (the caller's, a stream's worker): an odd
  // version is also the writers' lock, taken by compare-and-swap.
  uint64_t v = atomic_load_explicit(&s->version, memory_order_relaxed);
  while ((v & 1) || !atomic_compare_exchange_weak_explicit(&s->version, &v, v + 1, memory_order_acquire,
                                                           memory_order_relaxed)) {
    if (v & 1) sched_yield();  // another writer, for a few stores
    v = atomic_load_explicit(&s->version, memory_order_relaxed);
  }
  atomic_thread_fence(memory_order_release);  // readers that see these stores see the odd version first
  // The clock is the caller's: launch and release (the hot path) pass 0, "since when unknown".
  if (state != s->state || waiting_on != s->waiting_on || op->seq != s->seq) s->since_ns = now_ns;
  s->seq = op->seq;
  s->coll = (uint8_t)op->args.coll;
  s->dtype = (uint8_t)op->dtype;
  s->algo = (uint8_t)op->algo;
  s->state = (uint8_t)state;
  s->waiting_on = waiting_on;
  s->count = op->args.count;
  s->bytes_moved = moved;
  s->bytes_total = total;
  if (state == WEFT_STATUS_IDLE || state == WEFT_STATUS_FAILED) s->ops_done++;
  atomic_store_explicit(&s->version, v + 2, memory_order_release);
}

// Before the engine sleeps on an operation: how far it got, whom it waits on.
void weft_engine_publish_waiting(const weft_op_t *op, int64_t now_ns) {
  char peers[160];
  uint64_t moved, total;
  int first;
  weft_engine_stuck_state(op, peers, sizeof(peers), &moved, &total, &first);
  weft_engine_publish(op, WEFT_STATUS_WAITING, first, moved, total, now_ns);
}

