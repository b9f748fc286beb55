/*
 * schedule.h — collectives as data.
 *
 * An algorithm is a pure function from (collective, nranks, rank, count,
 * element size, root, slice, host of every rank) to a per-rank schedule: a
 * list of steps in a small vocabulary, grouped into lanes. Steps within a
 * lane run in order; lanes run concurrently. The engine (src/core/engine.c)
 * executes schedules on real buffers, the simulator (algorithms/sim/sim.c)
 * executes them symbolically, and the tuner prices them (algorithms/cost.c).
 * Nothing here touches memory or the network.
 *
 * Buffer regions are element offsets into the user's send or receive
 * buffer. A step names the peer it sends to and/or receives from; data
 * between two ranks flows through an ordered connection, so the sender's and
 * receiver's steps on one connection must list the same counts in the same
 * order. Within one schedule a connection is used by at most one lane.
 *
 * Deadlock freedom rests on one rule the algorithms keep: a SEND that is not
 * preceded in its lane by the matching peer's progress carries at most
 * `slice` elements, and a connection's buffer holds
 * weft_schedule_min_capacity() elements (one slice; two for rings, whose
 * steps receive and send at once).
 *
 * Multi-host layouts: host_of gives each rank's host. Rings and chains visit
 * the ranks in host order (sorted by host, then rank), trees and the
 * hierarchical schedule are built over hosts, recursive doubling pairs
 * ranks in host order (algorithms/layout.h). numa_of refines hosts into
 * NUMA groups (a host and one of its NUMA nodes); only the NUMA-hierarchical
 * schedule (WEFT_ALGO_NUMA) reads it.
 */
#ifndef WEFT_SCHEDULE_H
#define WEFT_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

typedef enum {
  WEFT_COLL_ALLREDUCE = 0,
  WEFT_COLL_BROADCAST,
  WEFT_COLL_REDUCE,
  WEFT_COLL_ALLGATHER,
  WEFT_COLL_REDUCESCATTER,
  WEFT_COLL_ALLTOALL,
  WEFT_COLL_GATHER,
  WEFT_COLL_SCATTER,
  WEFT_COLL_SEND,
  WEFT_COLL_RECV,
  WEFT_NUM_COLLS
} weft_coll_t;

typedef enum {
  WEFT_ALGO_RING = 0,   // AllReduce (= ReduceScatter + AllGather), AllGather, ReduceScatter
  WEFT_ALGO_CHAIN,      // Broadcast, Reduce: a pipelined chain in ring order from/to the root
  WEFT_ALGO_DIRECT,     // AlltoAll, Gather, Scatter, Send, Recv: one lane per peer
  WEFT_ALGO_ONESHOT,    // AllReduce for small counts: everyone sends to everyone, reduces locally
  WEFT_ALGO_READ,       // single copy: ranks read each other's buffers (needs peer memory access)
  WEFT_ALGO_TREE,       // AllReduce: two pipelined binary trees (reduce up, broadcast down), half the data each
  WEFT_ALGO_RECURSIVE,  // AllReduce for small counts: recursive doubling, log2(n) exchanges
  WEFT_ALGO_RABENSEIFNER,  // AllReduce: recursive-halving ReduceScatter + recursive-doubling AllGather
  WEFT_ALGO_HIER,       // AllReduce: ReduceScatter in each host, AllReduce across hosts, AllGather in each host
  WEFT_ALGO_NUMA,       // AllReduce: hier's schedule over NUMA nodes (numa_of) instead of hosts
  WEFT_NUM_ALGOS
} weft_algo_t;

typedef enum {
  WEFT_STEP_SEND = 0,          // out(send_peer) <- src
  WEFT_STEP_RECV,              // dst <- in(recv_peer)
  WEFT_STEP_RECV_REDUCE,       // dst <- in(recv_peer) OP src
  WEFT_STEP_RECV_REDUCE_SEND,  // out(send_peer) <- in(recv_peer) OP src
  WEFT_STEP_RECV_COPY_SEND,    // dst <- in(recv_peer); out(send_peer) <- same data
  WEFT_STEP_COPY,              // dst <- src (local)
  WEFT_STEP_READ,              // dst <- rem_peer's buffer (rem_buf, rem_off): a single copy
  WEFT_STEP_READ_REDUCE,       // dst <- src OP rem_peer's operand (src: a partial, or own operand)
  WEFT_STEP_SIGNAL,            // one token (no data) to send_peer; count is 1
  WEFT_STEP_WAIT,              // one token from recv_peer; count is 1
  WEFT_STEP_RECV_REDUCE_COPY_SEND,  // dst <- in(recv_peer) OP src; out(send_peer) <- same data
  WEFT_STEP_WRITE,             // rem_peer's buffer (rem_buf, rem_off) <- src: a single copy, pushed
  WEFT_NUM_STEP_KINDS
} weft_step_kind_t;

typedef enum { WEFT_BUF_NONE = 0, WEFT_BUF_SEND, WEFT_BUF_RECV } weft_buf_t;

// Step flags.
enum {
  WEFT_STEP_REDUCE_INPUT = 0x1,  // src of a SEND/COPY is a local operand entering a reduction (prescale applies)
  WEFT_STEP_FINAL = 0x2,         // the output is a final reduction result (integer Avg's division applies)
  WEFT_STEP_ACCUMULATE = 0x4     // on RECV_REDUCE(_SEND): src is a running partial result, not this
                                 // rank's own operand (no prescale applies to it)
};

// Reading or writing a peer's buffers (READ, READ_REDUCE, WRITE) needs the peer to be inside
// the same call: a peer's buffers are live from its launch until it
// returns, so a schedule that reads must keep each peer from returning until
// its readers are done (SIGNAL/WAIT tokens), and must order a read of data a
// peer computes after the peer's writes (again with tokens). A READ carrying
// REDUCE_INPUT reads the peer's own operand (prescale applies); READ_REDUCE's
// remote operand always is one, and its src is a running partial result —
// or, with REDUCE_INPUT, this rank's own operand (so the first fold step
// reads two inputs at once). A rank may read itself (rem_peer == rank).
// A WRITE puts data into a peer's receive buffer; the peer may use it only
// after a token from the writer says it is there, and must not return
// before then (its buffer would be written after the call ended).
typedef struct {
  uint8_t kind;     // weft_step_kind_t
  uint8_t src_buf;  // weft_buf_t of the local operand (SEND, *_REDUCE*, COPY)
  uint8_t dst_buf;  // weft_buf_t of the output (RECV, RECV_REDUCE, RECV_COPY_SEND, COPY, READ*)
  uint8_t flags;
  uint8_t rem_buf;    // weft_buf_t of the peer's buffer a READ* step reads or a WRITE writes
  int32_t send_peer;  // -1 when the step sends nothing
  int32_t recv_peer;  // -1 when the step receives nothing
  int32_t rem_peer;   // READ*, WRITE: the rank whose buffer is read or written; -1 otherwise
  uint64_t src_off;   // elements
  uint64_t dst_off;   // elements
  uint64_t rem_off;   // READ*, WRITE: elements into the peer's buffer
  uint64_t count;     // elements; never 0 in a built schedule
} weft_step_t;

// Does the step read or write a peer's buffer (READ, READ_REDUCE, WRITE)?
static inline int weft_step_touches_peer(const weft_step_t *st) {
  return st->kind == WEFT_STEP_READ || st->kind == WEFT_STEP_READ_REDUCE || st->kind == WEFT_STEP_WRITE;
}

typedef struct {
  uint32_t first;  // index of the lane's first step
  uint32_t count;  // number of steps
} weft_lane_t;

typedef struct {
  weft_step_t *steps;
  uint32_t nsteps, steps_cap;
  weft_lane_t *lanes;
  uint32_t nlanes, lanes_cap;
} weft_schedule_t;

// What an algorithm needs to know. Counts are NCCL's `count` argument: the
// per-rank count for AllGather, ReduceScatter, AlltoAll, Gather and Scatter.
typedef struct {
  weft_coll_t coll;
  int nranks, rank;
  union {
    int root;           // Broadcast, Reduce, Gather, Scatter
    int peer;           // Send, Recv: the other rank
  };
  size_t count;
  size_t slice;         // most elements one step may carry (>= 1)
  const int *host_of;   // [nranks] host index of each rank (0 .. nhosts-1), or NULL: one host
  int nhosts;           // hosts spanned by the communicator (1 when host_of is NULL)
  const int *order;     // [nranks] the communicator's ring order: the rank at each position, each host's
  const int *pos;       // ranks side by side, hosts in increasing order; pos[] is its inverse. Both
                        // NULL: host order (layout.h). Set from the topology at init (comm_order.c).
  const int *numa_of;   // [nranks] NUMA group of each rank: (host, NUMA node) pairs numbered host by host,
  int nnuma;            // 0 .. nnuma-1 (weft_layout_numa_groups), or NULL: a host is one group
} weft_coll_args_t;

// Element counts of the user's buffers for a collective on this rank
// (what the engine and simulator must have mapped).
size_t weft_coll_send_elems(const weft_coll_args_t *a);
size_t weft_coll_recv_elems(const weft_coll_args_t *a);
// For in-place calls: element offset of sendbuff inside recvbuff (AllGather,
// Gather root) or of recvbuff inside sendbuff (ReduceScatter, Scatter root),
// as NCCL defines in-place; 0 otherwise.
size_t weft_coll_inplace_offset(const weft_coll_args_t *a, int *send_inside_recv);

const char *weft_coll_name(weft_coll_t c);   // "AllReduce", ...
const char *weft_algo_name(weft_algo_t a);   // "ring", "chain", "direct", ..., "hier", "numa"
int weft_coll_has_op(weft_coll_t c);         // does it reduce?

// Which algorithms can run a collective.
int weft_algo_supports(weft_algo_t algo, weft_coll_t coll);

// Does the algorithm's schedule write peers' outputs before they have read
// their inputs? Then a rank running it in place (send and receive buffers
// overlapping) sets its input aside first, before any peer can see the call
// (src/core/engine.c), and the simulator runs it with separate storage.
int weft_algo_stages_send(weft_algo_t algo, weft_coll_t coll);

// Can the algorithm run this call's host layout? Only hier and numa have a
// condition: every host (numa: every NUMA group) must hold the same number
// of ranks. When it cannot, `why` (may be NULL) says so in words.
// weft_schedule_build refuses such calls.
int weft_algo_fits(weft_algo_t algo, const weft_coll_args_t *a, char *why, size_t whylen);

// Build this rank's schedule (appends to an empty, zeroed schedule).
ncclResult_t weft_schedule_build(const weft_coll_args_t *a, weft_algo_t algo, weft_schedule_t *s);
void weft_schedule_free(weft_schedule_t *s);

// Builders used by the algorithm files.
ncclResult_t weft_schedule_lane_begin(weft_schedule_t *s);
ncclResult_t weft_schedule_add(weft_schedule_t *s, const weft_step_t *step);  // drops count==0 steps

// Append `step` as consecutive steps of at most `slice` elements each,
// advancing src_off and dst_off (a count of 0 appends nothing).
ncclResult_t weft_schedule_add_split(weft_schedule_t *s, const weft_step_t *step, size_t slice);

// Smallest connection capacity (elements) an algorithm's schedules need to be
// deadlock-free at this slice. A ring step receives and sends at once while
// its own previous piece still sits in the next connection, so rings (and
// hier and numa, made of rings) need room for more than one slice; 2*slice is what is
// returned (enough for any move granularity up to a slice). Chains, trees,
// recursive doubling/halving and direct lanes need one slice: every rank
// takes its steps in one global order of pieces, each piece's connections
// are drained before the next piece needs them, and no step sends more
// than a slice.
size_t weft_schedule_min_capacity(weft_algo_t algo, size_t slice);

const char *weft_step_kind_name(int kind);  // "SEND", "RECV_REDUCE", ...; "?" when unknown

ncclResult_t weft_ring_build(const weft_coll_args_t *a, weft_schedule_t *s);
ncclResult_t weft_chain_build(const weft_coll_args_t *a, weft_schedule_t *s);
// The chain's order around this rank (chain.c): the rank it receives from
// and the one it sends to, and its distance after the root (0: the root).
ncclResult_t weft_chain_neighbours(const weft_coll_args_t *a, int *prev, int *next, int *pos);
ncclResult_t weft_direct_build(const weft_coll_args_t *a, weft_schedule_t *s);
ncclResult_t weft_oneshot_build(const weft_coll_args_t *a, weft_schedule_t *s);
ncclResult_t weft_read_build(const weft_coll_args_t *a, weft_schedule_t *s);
ncclResult_t weft_tree_build(const weft_coll_args_t *a, weft_schedule_t *s);
// This rank's links in the two trees weft_tree_build runs: up[t] its parent
// in tree t (-1 at the root), down[t] its children (-1 where none). For the
// communicator's "Trees" log line.
ncclResult_t weft_tree_links(const weft_coll_args_t *a, int up[2], int down[2][2]);
ncclResult_t weft_recursive_build(const weft_coll_args_t *a, weft_schedule_t *s);
ncclResult_t weft_rabenseifner_build(const weft_coll_args_t *a, weft_schedule_t *s);
ncclResult_t weft_hier_build(const weft_coll_args_t *a, weft_schedule_t *s);
ncclResult_t weft_hier_numa_build(const weft_coll_args_t *a, weft_schedule_t *s);

#endif
