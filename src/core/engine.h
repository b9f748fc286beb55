/*
 * engine.h — runs schedules on real buffers.
 *
 * An operation (weft_op_t) is one collective or point-to-point call on one
 * communicator: its arguments, its schedule, and where each lane got to.
 * weft_engine_run advances any set of operations — of one or many
 * communicators — with a non-blocking progress pass over every lane; a step
 * that cannot move now is simply resumed on the next pass. When nothing
 * moves the caller spins briefly, then sleeps on its rank's doorbell.
 */
#ifndef WEFT_ENGINE_H
#define WEFT_ENGINE_H

#include <stdint.h>

#include "comm.h"
#include "hooks.h"
#include "reduce.h"
#include "schedule.h"

typedef struct {
  uint32_t cursor;  // step index within the lane
  uint64_t done;    // elements of the current step already moved
} weft_lane_state_t;

// How far the messages from one peer have been described to its
// connection (transports that land messages in the user's buffer).
typedef struct {
  uint32_t step;    // absolute step index; UINT32_MAX until the first description
  uint64_t elems;   // elements of that step described
} weft_expect_cursor_t;

enum { WEFT_OP_PENDING = 0, WEFT_OP_DONE, WEFT_OP_FAILED };

typedef struct weft_op {
  struct ncclComm *comm;
  weft_coll_args_t args;
  weft_algo_t algo;
  weft_schedule_t sched;
  ncclDataType_t dtype;
  size_t esize;
  int user_op;             // the ncclRedOp_t the caller passed (for descriptors and logs)
  int has_op;
  weft_redop_t redop;
  weft_redop_t redop_acc;  // redop without prescale, for WEFT_STEP_ACCUMULATE
  const char *sendbuff;
  char *recvbuff;
  int cls;                 // WEFT_CLASS_COLL or WEFT_CLASS_P2P
  uint64_t seq;            // collectives: sequence number on the communicator
  int64_t *send_ticket;    // per peer, -1 when unused (set at launch)
  int64_t *recv_ticket;
  uint8_t *verified;       // per peer: its descriptor for `seq` matched ours
  weft_expect_cursor_t *expect;  // per peer: messages described to its connection
  int check;               // compare descriptors and slot tags (WEFT_CHECK_MISMATCH)
  uint32_t tag;            // collectives: a hash of seq and the call, sent with every slot
  int nt;                  // write the output with non-temporal stores (WEFT_NT_MIN_BYTES)
  int reads;               // the schedule reads or writes peer memory (READ*, WRITE steps)
  int published;           // its descriptor is on the board (mismatch.h): from its first progress
  uint64_t *peer_buf;      // reads: [2n] each peer's sendbuff and recvbuff, then [2n] where this process
                           // maps them (a window, window_map.c), 0 where it does not
  char *scratch;           // reads: a peer's operand on its way into a reduction
  size_t scratch_bytes;
  char *send_copy;         // in place, where weft_algo_stages_send: the send buffer set aside (sendbuff points here)
  size_t send_copy_bytes;  // its size (weft_op_stage_take)
  int set_aside;           // in place where weft_algo_stages_send: set the input aside when the call starts
  weft_lane_state_t *lanes;
  uint32_t lanes_left;
  int state;
  int released;            // tickets given back
  int counted;             // included in comm->inflight (launched, not yet freed)
  ncclResult_t result;
  int64_t last_progress_ns;
  int64_t timeouts_warned; // WEFT_TIMEOUT periods passed without progress (each one WARNed)
  weft_prof_op_t prof;     // the profiler plugin's events for it (plugins/hooks.h)
  struct {                 // weftRecvAny (anysrc.h)
    int on;                // a receive from any peer: a ticket on every peer's connection until it matches
    int peer;              // the peer it matched, -1 until then
    int *source;           // the caller's: the peer, written when it completes (-1 if it failed)
  } any;
  struct {                 // device buffers (src/cuda/cuda_stream.c); sendbuff/recvbuff then point at host staging
    int on;                // the call's buffers are device or managed memory
    int device;            // their device ordinal
    const void *send;      // the caller's pointers
    void *recv;
    const void *scalar;    // ncclScalarDevice PreMulSum scalar in device memory, else NULL
    const char *scalar_stage;  // its copy in staging, read once the stream reached the call
  } dev;
  struct weft_op *next;    // group / stream lists
} weft_op_t;

// engine_status.c: the peers an operation waits on (a list in `peers`, the
// first in *first_peer), the bytes its steps moved and move in all; and the
// status published in the rank's segment (state: WEFT_STATUS_*).
void weft_engine_stuck_state(const weft_op_t *op, char *peers, size_t len, uint64_t *moved, uint64_t *total,
                             int *first_peer);
void weft_engine_publish(const weft_op_t *op, int state, int waiting_on, uint64_t moved, uint64_t total,
                         int64_t now_ns);
void weft_engine_publish_waiting(const weft_op_t *op, int64_t now_ns);

// Fail the operation (its first failure sticks) and, with a reason, the
// communicator for every rank (weft_comm_fail).
void weft_op_fail(weft_op_t *op, ncclResult_t res, const char *reason);
// The communicator failed (its abort word) or was aborted: fail the
// operation, saying why, and return 1; else 0.
int weft_op_fail_if_aborted(weft_op_t *op);
// A message from `peer` carries this call's tag and `bytes` bytes; otherwise
// the operation fails, saying what differs. Returns 1 when it is fine.
int weft_op_incoming_ok(weft_op_t *op, int peer, uint32_t tag, size_t got, size_t bytes);
// Rank `peer` of this host died while the operation waited on it: fail it.
void weft_op_fail_dead_peer(weft_op_t *op, int peer);

// What a step does with one slot's worth of its elements [first, first+n):
// `in` the slot received (NULL when the step receives nothing), `out` the
// slot to send (NULL when it sends nothing); COPY moves them locally. The
// engine and the small-message path (small.c) move data only through here.
void weft_engine_move(const weft_op_t *op, const weft_step_t *st, char *out, const char *in, size_t first,
                      size_t n);

// A sleeping rank re-checks aborts, deaths and timeouts this often.
#define WEFT_ENGINE_SLEEP_MAX_NS 2000000
// Assign sequence number and connection tickets; publish the descriptor.
// Operations must be launched in the same order on every rank.
ncclResult_t weft_op_launch(weft_op_t *op);
// turn.c: the operation's place in line, taken under the communicator's
// lock: its sequence number (a collective) and the next ticket of every
// connection op->send_ticket/recv_ticket marks (0; -1 marks none), written
// there. With only_if_free it takes nothing and answers 0 unless each of
// those connections has served every ticket it issued. Answers 1 when taken.
int weft_op_take_turn(weft_op_t *op, int only_if_free);
// Gives its tickets back (a failed receive quiesced first) and rings the
// rank's doorbell for the threads waiting on them.
void weft_op_give_turn(weft_op_t *op);
// A staging buffer of at least `bytes` (its size in *got), the process's
// kept one when it is large enough. NULL when out of memory.
void *weft_op_stage_take(size_t bytes, size_t *got);
// Gives a staging buffer back (the process keeps the largest); NULL is fine.
void weft_op_stage_give(void *p, size_t bytes);
// Run operations to completion (or failure); returns the first error.
// `queued`: a stream's worker runs them (the waits poll for spin_ns_queued).
ncclResult_t weft_engine_run(weft_op_t **ops, int nops, int queued);
// Progress passes over the operations on the calling thread for at most
// budget_ns, never sleeping: 1 when every one is done (*res the first
// failure, or ncclSuccess), 0 when some still wait; weft_engine_run (which
// also looks for deaths, mismatches and timeouts) then carries them on.
int weft_engine_try(weft_op_t **ops, int nops, int64_t budget_ns, ncclResult_t *res);
// A zeroed operation (possibly one this thread freed before, with its
// schedule's arrays kept, empty); NULL when out of memory.
weft_op_t *weft_op_alloc(void);
// A heap copy of an operation built on the caller's stack (which holds no
// heap memory yet), for one that outlives the call; NULL (WARN) when out of memory.
weft_op_t *weft_op_to_heap(const weft_op_t *local);
// A finished operation stops counting as in flight on its communicator (which
// may then be destroyed); the operation itself stays valid until freed.
void weft_op_release_comm(weft_op_t *op);
// Frees the operation (releasing the communicator first if still counted).
void weft_op_free(weft_op_t *op);

#endif
