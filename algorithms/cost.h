/*
 * cost.h — alpha-beta prices of schedules, for the tuner.
 *
 * A piece of b bytes sent over a link arrives alpha + b / bandwidth after
 * its step starts, with the link's constants (tune_file.h: shared memory
 * inside a host, the network between hosts; weft-calibrate measures them),
 * and keeps the sender busy for b / bandwidth plus a per-message overhead
 * (the receiver too, for the overhead). Every rank's schedule is
 * replayed on that clock: a lane takes its steps in order, a step starts
 * when its lane is free and its input has arrived, a step that only
 * receives ends when the data is there, a local copy takes b / (intra-host
 * bandwidth). The call's price is the time its last lane finishes, over all
 * ranks — so pipelining, tree depth and the ring's 2(n-1) hops all show,
 * and every rank computes the same price for the same call. The ranks of a
 * host share its network link: the price is at least the busiest host's
 * network bytes (sent or received) at the inter-host bandwidth. Connections
 * are taken as unbounded (flow control is not modelled): the model ranks
 * algorithms, it does not predict times to the microsecond.
 */
#ifndef WEFT_COST_H
#define WEFT_COST_H

#include <stddef.h>

#include "schedule.h"
#include "tune_file.h"

// Most steps (over all ranks) one replay runs; a call with more is priced
// at a fraction of its count and scaled up, its time being linear in the
// count by then.
#define WEFT_COST_MAX_STEPS (1u << 18)

// Share of a link's alpha that is software work per message, on the sender
// and on the receiver (the rest is time in flight): sending to many peers
// costs more than sending to one.
#define WEFT_COST_OVERHEAD 0.2

// Seconds the call `a` (any a->rank) takes with `algo`. Fails as
// weft_schedule_build does when the algorithm cannot run the call;
// ncclSystemError when memory runs out.
ncclResult_t weft_cost_call(const weft_coll_args_t *a, weft_algo_t algo, size_t esize,
                            const weft_links_t *links, double *seconds);

// Seconds one point-to-point call `a` (a Send or Recv between a->rank and
// a->peer) takes: a message over the link between the two ranks.
double weft_cost_transfer(const weft_coll_args_t *a, size_t esize, const weft_links_t *links);

#endif
