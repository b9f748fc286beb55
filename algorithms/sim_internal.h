/*
 * sim_internal.h — what the simulator's two source files share.
 *
 * sim.c runs the schedules (interleavings, FIFO movement, symbolic values,
 * verification, the public entry points); sim_checks.c lays out each rank's
 * buffers and rejects malformed schedules before any run. Both work on one
 * sim_t, so its types, the step-kind table and the few functions that cross
 * between the two files live here. Private to algorithms/sim*.c; the public
 * interface is sim.h.
 */
#ifndef WEFT_SIM_INTERNAL_H
#define WEFT_SIM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "sim.h"

enum { SV_NONE = 0, SV_RAW, SV_PART };

// A symbolic element: user data (origin rank, send index) or a partial
// reduction (mask of contributing ranks, element index).
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

// What each step kind does: pops its input FIFO, pushes its output FIFO,
// reads a local operand, writes a local destination, reduces.
enum { IO_IN = 1, IO_OUT = 2, IO_SRC = 4, IO_DST = 8, IO_RED = 16 };
static const uint8_t kind_io[WEFT_NUM_STEP_KINDS] = {
    [WEFT_STEP_SEND] = IO_OUT | IO_SRC,
    [WEFT_STEP_RECV] = IO_IN | IO_DST,
    [WEFT_STEP_RECV_REDUCE] = IO_IN | IO_SRC | IO_DST | IO_RED,
    [WEFT_STEP_RECV_REDUCE_SEND] = IO_IN | IO_OUT | IO_SRC | IO_RED,
    [WEFT_STEP_RECV_COPY_SEND] = IO_IN | IO_OUT | IO_DST,
    [WEFT_STEP_COPY] = IO_SRC | IO_DST};

static inline int io(int k, int what) {
  return k >= 0 && k < WEFT_NUM_STEP_KINDS && (kind_io[k] & what);
}
static inline int has_send(int k) { return io(k, IO_OUT); }
static inline int has_recv(int k) { return io(k, IO_IN); }
static inline int has_src(int k) { return io(k, IO_SRC); }
static inline int has_dst(int k) { return io(k, IO_DST); }
static inline int reduces(int k) { return io(k, IO_RED); }

/* ---- sim.c ---- */

// Record the first failure: the configuration, the interleaving (once a run
// has started), then the message, into m->err. Later failures are dropped.
void weft_sim_fail(sim_t *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Describe a step into `out`, e.g.
// "rank 3 lane 1 step 7 (RECV_REDUCE from 2, send[12..+5] -> recv[0..+5])".
const char *weft_sim_step_desc(char *out, size_t len, int r, uint32_t lane, uint32_t idx,
                               const weft_step_t *st);

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
