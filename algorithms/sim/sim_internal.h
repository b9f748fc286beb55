/*
 * sim_internal.h — what the simulator's source files share.
 *
 * sim.c runs the schedules (interleavings, FIFO movement, remote reads, the
 * rules each element operation obeys, verification, the public entry
 * points); sim_checks.c lays out each rank's buffers and rejects malformed
 * schedules before any run; sim_report.c words every failure. All work on
 * one sim_t, so its types, the step-kind table and the few functions that
 * cross between the files live here. Private to algorithms/sim*.c; the
 * public interface is sim.h.
 */
#ifndef WEFT_SIM_INTERNAL_H
#define WEFT_SIM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "sim.h"

enum { SV_NONE = 0, SV_RAW, SV_PART, SV_TOKEN };

// A symbolic element: user data (origin rank, send index), a partial
// reduction (mask of contributing ranks, element index), or (in a FIFO only)
// a SIGNAL token.
typedef struct {
  uint64_t bits;  // SV_RAW: origin rank; SV_PART: contribution mask
  uint32_t idx;
  uint8_t kind;
  uint8_t final;
} sval_t;

typedef struct {
  sval_t *v;
  size_t size, head, len;    // size: slots allocated (<= capacity, >= all traffic)
  uint64_t total;            // elements the sender lists for this connection
  int32_t wait_rd, wait_wr;  // lane blocked on this FIFO being empty / full, or -1
} fifo_t;

typedef struct {
  weft_schedule_t s;
  size_t base[3], elems[3];  // per weft_buf_t: offset into store, element count
  size_t nstore;
  sval_t *store;
  int32_t *wlane, *rlane;  // lane that wrote / read each element (-1 none, -2 several)
  uint32_t *cur;           // per lane: step index within the lane
  uint64_t *done;          // per lane: elements moved by the current step
  uint32_t lane0;          // global id of lane 0
  uint32_t left;           // lanes not finished; 0 once the rank has returned to its caller
} srank_t;

typedef struct {
  int r;
  uint32_t l;
} lane_ref_t;

typedef struct {
  const weft_sim_config_t *cfg;
  int n, mode, failed;
  uint64_t full, rng;
  srank_t *rk;
  fifo_t *fifo;       // [a * n + b] carries a -> b
  lane_ref_t *lanes;  // every rank's lanes, by global id
  uint32_t nl;
  uint32_t *cur, *next;  // lanes to visit in this sweep / the next one
  uint32_t ncur, nnext;
  uint8_t *queued;  // global id is in `next`
  char *err;
  size_t errlen;
} sim_t;

// Names of the weft_buf_t values, for messages.
extern const char *const weft_sim_buf_names[3];

static inline int is_p2p(weft_coll_t c) { return c == WEFT_COLL_SEND || c == WEFT_COLL_RECV; }

// The builders' view of rank r's call in configuration c.
static inline weft_coll_args_t weft_sim_args(const weft_sim_config_t *c, int r) {
  return (weft_coll_args_t){.coll = c->coll, .nranks = c->nranks, .rank = r, .root = c->root, .count = c->count,
                            .slice = c->slice, .host_of = c->host_of, .nhosts = c->host_of ? c->nhosts : 1,
                            .order = c->order, .pos = c->order ? c->pos : NULL,
                            .numa_of = c->numa_of, .nnuma = c->numa_of ? c->nnuma : 0};
}

// What each step kind does: pops its input FIFO, pushes its output FIFO,
// reads a local operand, writes a local destination, reduces, reads a
// peer's buffer (never blocks), moves a token instead of data (count 1),
// writes a peer's buffer (never blocks).
enum { IO_IN = 1, IO_OUT = 2, IO_SRC = 4, IO_DST = 8, IO_RED = 16, IO_READ = 32, IO_TOKEN = 64, IO_WRITE = 128 };
static const uint8_t kind_io[WEFT_NUM_STEP_KINDS] = {
    [WEFT_STEP_SEND] = IO_OUT | IO_SRC,
    [WEFT_STEP_RECV] = IO_IN | IO_DST,
    [WEFT_STEP_RECV_REDUCE] = IO_IN | IO_SRC | IO_DST | IO_RED,
    [WEFT_STEP_RECV_REDUCE_SEND] = IO_IN | IO_OUT | IO_SRC | IO_RED,
    [WEFT_STEP_RECV_COPY_SEND] = IO_IN | IO_OUT | IO_DST,
    [WEFT_STEP_COPY] = IO_SRC | IO_DST,
    [WEFT_STEP_READ] = IO_READ | IO_DST,
    [WEFT_STEP_READ_REDUCE] = IO_READ | IO_SRC | IO_DST | IO_RED,
    [WEFT_STEP_SIGNAL] = IO_OUT | IO_TOKEN,
    [WEFT_STEP_WAIT] = IO_IN | IO_TOKEN,
    [WEFT_STEP_RECV_REDUCE_COPY_SEND] = IO_IN | IO_OUT | IO_SRC | IO_DST | IO_RED,
    [WEFT_STEP_WRITE] = IO_SRC | IO_WRITE};

static inline int io(int k, int what) {
  return k >= 0 && k < WEFT_NUM_STEP_KINDS && (kind_io[k] & what);
}
static inline int has_send(int k) { return io(k, IO_OUT); }
static inline int has_recv(int k) { return io(k, IO_IN); }
static inline int has_src(int k) { return io(k, IO_SRC); }
static inline int has_dst(int k) { return io(k, IO_DST); }
static inline int reduces(int k) { return io(k, IO_RED); }
static inline int reads_peer(int k) { return io(k, IO_READ); }
static inline int is_token(int k) { return io(k, IO_TOKEN); }
static inline int writes_peer(int k) { return io(k, IO_WRITE); }
static inline int touches_peer(int k) { return io(k, IO_READ | IO_WRITE); }

// Interleaving policies of a run (sim_t.mode; -1 before the first run).
enum { SIM_ROUND_ROBIN = 0, SIM_GREEDY, SIM_RANDOM };

// The step an element operation belongs to; described only on failure.
typedef struct {
  int r;
  uint32_t lane, idx;
  const weft_step_t *st;
  uint64_t e;  // element within the step
} weft_sim_at_t;

// Rules a step can break while it runs (weft_sim_reject).
enum {
  SIM_READ_AFTER_RETURN = 0,  // READ*, WRITE: the peer has returned; its buffers are gone
  SIM_TOKEN_MISMATCH,         // RECV popped a token, or WAIT popped data
  SIM_READ_NOTHING,           // READ*: the peer's element was never written
  SIM_NOT_OWN_INPUT,          // a local operand entering a reduction is not this rank's input
  SIM_NOT_PEER_INPUT,         // an operand read from a peer is not that peer's input
  SIM_NOT_IN_PROGRESS,        // accumulating into something not a partial result in progress
  SIM_BAD_COMBINE,            // not an operand, final, another element, or a rank twice
  SIM_BAD_FINAL               // FINAL missing on completion, or present before it
};

/* ---- sim_report.c ---- */

// Record the first failure: the configuration, the interleaving (once a run
// has started), then the message, into m->err. Later failures are dropped.
void weft_sim_fail(sim_t *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Describe a step into `out`, e.g.
// "rank 3 lane 1 step 7 (RECV_REDUCE from 2, send[12..+5] -> recv[0..+5])".
const char *weft_sim_step_desc(char *out, size_t len, int r, uint32_t lane, uint32_t idx,
                               const weft_step_t *st);

// "rank 2's send[5]", "element 5 reduced over 3 of 4 ranks (mask 0x7), not
// final", "a SIGNAL token", "nothing (never written)".
const char *weft_sim_sval_desc(char *out, size_t len, const sval_t *v, int n);

// Report lane l of rank r touching store[pos] that another lane of r also
// touches, one of them writing. Returns -1.
int weft_sim_race(sim_t *m, int r, uint32_t l, size_t pos, int write);

// Report a broken SIM_* rule at `at`: `v` is the value the step was working
// on (its local operand or what it read), `in` what came in. Returns -1.
int weft_sim_reject(sim_t *m, const weft_sim_at_t *at, int rule, sval_t v, sval_t in);

// Report a deadlock: which lanes are stuck, on what.
void weft_sim_report_deadlock(sim_t *m);

/* ---- sim_checks.c ---- */

// Lay out rank r's buffers and allocate its store and per-lane state.
// Returns 0, or -1 after weft_sim_fail.
int weft_sim_layout_rank(sim_t *m, int r);

// Check rank r's steps and lanes; send_lane / recv_lane are n-entry scratch.
// Returns 0, or -1 after weft_sim_fail.
int weft_sim_check_lanes(sim_t *m, int r, int32_t *send_lane, int32_t *recv_lane);

// Match every connection's sender and receiver pieces and set each FIFO's
// total. Returns 0, or -1 after weft_sim_fail.
int weft_sim_check_connections(sim_t *m);

#endif
