/*
 * tuner.h — picks the algorithm and the slice (elements per step) for a call.
 *
 * On one host: AllReduce uses the one-hop algorithm up to a size threshold;
 * from WEFT_READ_MIN_BYTES (off by default: cross-memory attach measured
 * slower than the ring here), AllReduce, ReduceScatter, AllGather, Broadcast
 * and Reduce read peers' buffers directly where the transport allows it;
 * the rest use the ring, chain or direct lanes. The multi-host AllReduce
 * algorithms (tree, recursive, rabenseifner, hier) run there only when
 * NCCL_ALGO forces them.
 *
 * Across hosts (args->nhosts > 1): every algorithm NCCL_ALGO allows that
 * can run the call (weft_algo_supports, weft_algo_fits: hier needs hosts of
 * equal size) is priced by the alpha-beta cost model of cost.h — every
 * rank's schedule replayed with intra-host and inter-host latency and
 * bandwidth (tune_file.h; defaults 0.4 us / 6 GB/s and 25 us / 1.2 GB/s,
 * WEFT_TUNE_FILE for measured ones), a host's ranks sharing its network
 * link — and the cheapest wins, ties going to the earlier algorithm. The
 * price does not depend on the rank asking, so every rank chooses the same.
 * Choices are remembered per call shape; the choice is logged at INFO under
 * NCCL_DEBUG_SUBSYS=TUNING the first time.
 *
 * NCCL_ALGO (NCCL's syntax) narrows the choice wherever what it allows
 * can run the call; where it allows nothing that can (NCCL_ALGO=ring for a
 * Broadcast, tree across unequal hosts), weft makes its own choice and says
 * so at INFO once per collective, as NCCL leaves its point-to-point
 * collectives alone. NCCL's names that weft lacks (NVLS, CollNet*, PAT)
 * are ignored with an INFO line. The slice is half a
 * connection's buffer, so one round can be in flight while the next is
 * filled.
 *
 * Protocols, as NCCL_PROTO names them: weft has two. LL is the
 * small-message path (src/core/small.c): a one-hop AllReduce, chain
 * Broadcast, ring AllGather or ReduceScatter or direct AlltoAll of at most ll_max bytes per
 * rank straight from the call to the peers' slots, data and flag in one
 * cache line. Simple is the slot path every schedule runs
 * on. LL128 has no counterpart here and means Simple. By default LL is
 * chosen wherever it can carry the call; NCCL_PROTO narrows the choice.
 */
#ifndef WEFT_TUNER_H
#define WEFT_TUNER_H

#include <stddef.h>

#include "nccl.h"
#include "schedule.h"
#include "tune_file.h"

typedef struct {
  size_t slot_bytes;      // bytes per connection slot
  size_t nslots;          // slots per connection
  size_t oneshot_max;     // bytes per rank up to which AllReduce goes in one hop
  int can_read;           // ranks can read each other's memory (single-copy schedules)
  int mapped;             // the buffers lie in symmetric windows every rank maps: reads are plain loads
  int64_t read_min;       // bytes per rank from which single-copy schedules are used; 0 = never unasked,
                          // -1 = each collective's measured threshold (weft_tuner_read_min)
  const char *algo_spec;  // NCCL_ALGO, or NULL
  const char *proto_spec; // NCCL_PROTO, or NULL
  size_t ll_max;          // bytes per rank up to which the LL protocol can carry a one-hop AllReduce
  const weft_links_t *links;  // link constants for pricing multi-host calls; NULL: weft_links()
} weft_tuner_params_t;

// Fills *algo and args->slice. Fails (WARN, ncclInternalError) only when
// no algorithm at all can run the collective.
ncclResult_t weft_tuner_choose(const weft_tuner_params_t *p, weft_coll_args_t *args, size_t esize,
                               weft_algo_t *algo);

// Bytes per rank from which one host's calls of `coll` use single copy
// unasked (when ranks can reach each other's memory); 0 = never.
size_t weft_tuner_read_min(const weft_tuner_params_t *p, weft_coll_t coll);
// Whether mapped buffers (p->mapped) could change the choice for a call of
// `bytes` per rank: lets a caller skip finding out for small calls.
int weft_tuner_mapped_matters(const weft_tuner_params_t *p, weft_coll_t coll, size_t bytes);

typedef enum { WEFT_PROTO_LL = 0, WEFT_PROTO_LL128, WEFT_PROTO_SIMPLE, WEFT_NUM_PROTOS } weft_proto_t;

const char *weft_proto_name(weft_proto_t proto);

// The protocol for a call the tuner gave `algo`: LL for a one-hop AllReduce,
// chain Broadcast, ring AllGather or ReduceScatter or direct AlltoAll of at most ll_max bytes
// per rank when NCCL_PROTO allows LL, else Simple.
weft_proto_t weft_tuner_proto(const weft_tuner_params_t *p, const weft_coll_args_t *args, weft_algo_t algo,
                              size_t esize);

// The algorithms NCCL_ALGO allows that can run this call (bit a = algorithm
// a): what the tuner plugin's cost table offers (plugins/tuner/).
unsigned weft_tuner_candidates(const weft_tuner_params_t *p, const weft_coll_args_t *args);

// Parse an NCCL_ALGO value into, per collective, a mask of allowed algorithms
// (bit a = algorithm a). Unknown names are reported and ignored. Returns 0,
// or -1 for text that does not parse (the masks are then all-allowed).
int weft_tuner_parse_algos(const char *spec, unsigned masks[WEFT_NUM_COLLS]);

#endif
