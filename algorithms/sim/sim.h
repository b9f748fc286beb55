/*
 * sim.h — symbolic execution of schedules.
 *
 * The simulator builds every rank's schedule for one collective call and
 * runs them together the way the engine does: lanes advance concurrently,
 * data moves element by element through bounded FIFO connections, and a step
 * may move a prefix of its elements whenever input and room are available.
 * Buffers hold symbolic values instead of numbers — an element of user data
 * is (origin rank, index), a partial reduction is (set of ranks, index) — so
 * at the end it can say exactly what went wrong: a deadlock and who is stuck,
 * a receive without a send, an element reduced twice or in the wrong place, a
 * missing FINAL or REDUCE_INPUT flag, in-place data overwritten before use.
 * Single-copy steps are modelled too: a READ takes the peer's buffer as it
 * is at that moment, a read of a rank that has already returned (finished
 * its schedule) is an error, and SIGNAL/WAIT tokens travel through the
 * connections like data.
 *
 * A configuration may place the ranks on several hosts (host_of) and
 * NUMA nodes (numa_of), which the builders see in weft_coll_args_t; the
 * checks do not depend on them.
 *
 * Checked before running: step fields and bounds, at most `slice` elements
 * per step, one lane per connection end, sender and receiver listing the same
 * piece sizes in the same order on every connection, send buffers never
 * written. Checked while running: every interleaving tried (round-robin,
 * greedy, seeded random) completes, lanes of one rank touch disjoint data
 * (an element one lane writes is not touched by another), no FIFO is left
 * holding data. Checked after: every receive buffer holds exactly what NCCL
 * defines, reductions complete (all n ranks, once each) and marked FINAL.
 */
#ifndef WEFT_SIM_H
#define WEFT_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "schedule.h"

// Most ranks the simulator handles (a contribution set is a 64-bit mask).
#define WEFT_SIM_MAX_RANKS 64

// Builds one rank's schedule. The simulator calls it once per rank, and for
// Send/Recv twice per rank (a Send and a Recv, see `root` below).
typedef ncclResult_t (*weft_sim_build_fn)(const weft_coll_args_t *a, weft_algo_t algo,
                                          weft_schedule_t *s, void *ctx);

typedef struct {
  weft_coll_t coll;
  weft_algo_t algo;
  int nranks;               // 1 .. WEFT_SIM_MAX_RANKS
  int root;                 // root; for Send/Recv a shift: every rank r sends to (r+root)%n
                            // and receives from (r-root)%n in one group
  size_t count;             // NCCL's count argument
  size_t slice;             // most elements per step
  size_t capacity;          // elements each connection holds
  int in_place;             // NCCL's in-place layout (ignored for Send/Recv)
  int random_runs;          // random interleavings after round-robin and greedy ones
  uint64_t seed;            // seed of the random interleavings; 0 derives one from the rest
  weft_sim_build_fn build;  // NULL: weft_schedule_build
  void *build_ctx;
  const int *host_of;       // [nranks] host of each rank (0 .. nhosts-1, numbered by first rank), or
  int nhosts;               // NULL: one host. Passed to the builders in weft_coll_args_t.
  const int *order;         // [nranks] a ring order as a communicator chooses it from the topology
  const int *pos;           // (each host's ranks side by side, hosts in increasing order) and its
                            // inverse, or both NULL: host order. Passed to the builders.
  const int *numa_of;       // [nranks] NUMA group of each rank (weft_coll_args_t's numa_of), or
  int nnuma;                // NULL: each host one group. Passed to the builders.
} weft_sim_config_t;

// Simulate one configuration. Returns ncclSuccess, ncclInvalidArgument for a
// configuration it cannot simulate, the builder's error if a build fails, or
// ncclInternalError when a schedule is wrong; `err` (may be NULL) then says
// what and where.
ncclResult_t weft_sim_run(const weft_sim_config_t *cfg, char *err, size_t errlen);

// weft_sim_run with the built-in builders and one random interleaving.
ncclResult_t weft_sim_check(weft_coll_t coll, weft_algo_t algo, int nranks, int root, size_t count,
                            size_t slice, size_t capacity, int in_place, char *err, size_t errlen);

// Host layouts for sweeps: one host, hosts of k ranks, uneven hosts
// (3, 1, 2, 3, ... ranks), alternating (ranks of two hosts interleaved).
typedef enum { WEFT_SIM_ONE_HOST, WEFT_SIM_HOSTS_OF_K, WEFT_SIM_UNEVEN, WEFT_SIM_ALTERNATING } weft_sim_layout_kind_t;
typedef struct {
  weft_sim_layout_kind_t kind;
  int k;  // WEFT_SIM_HOSTS_OF_K: ranks per host
} weft_sim_layout_t;

// The standard set: one host, hosts of 1, 2, 4, 8, uneven, alternating.
extern const weft_sim_layout_t weft_sim_layouts[];
extern const int weft_sim_nlayouts;
// Fill host_of for n ranks; returns the number of hosts, 0 for one host (host_of unused).
int weft_sim_layout_fill(const weft_sim_layout_t *l, int n, int *host_of);
// NUMA nodes as a layout of the same kinds, cut inside the hosts: rank r sits
// on node fill(l)[r] of its host (host_of NULL: one host), so groups of K
// ranks, uneven and alternating nodes, each host's share of a group its own
// group. Fills numa_of (weft_layout_numa_groups) and returns the number of
// groups, 0 when no host spans two nodes (numa_of unused).
int weft_sim_numa_fill(const weft_sim_layout_t *l, const int *host_of, int nhosts, int n, int *numa_of);

#endif
