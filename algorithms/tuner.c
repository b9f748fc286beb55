/*
 * tuner.c — algorithm, slice and protocol choice (see tuner.h).
 *
 * NCCL_ALGO and NCCL_PROTO are read in NCCL's syntax (choice.h).
 *
 * On one host the choice is a preference order with size thresholds; across
 * hosts every allowed algorithm is priced by the cost model (cost.h) and the
 * cheapest wins, ties going to the earlier algorithm in weft_algo_t. Both
 * depend only on what every rank knows alike, so all ranks choose the same.
 *
 * NUMA nodes enter by a rule, not a price (the cost model has no socket
 * link): on one host whose ranks sit on several NUMA nodes, as many on each
 * and at least two, AllReduce past the one-hop limit runs numa (hier's
 * stages over the NUMA nodes) ahead of the ring. Across hosts numa runs
 * only when NCCL_ALGO allows nothing else.
 */
#include "tuner.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "checks.h"
#include "choice.h"
#include "cost.h"
#include "layout.h"

// Bytes per rank from which mapped buffers take the single-copy schedules,
// measured on 2 ranks pinned to cores, in place and out of place (perf/
// compare's -R 2 runs; Broadcast, ReduceScatter and AllReduce by time per
// call, with WEFT_READ_MIN_BYTES set, in interleaved rounds: from these
// sizes single copy took 0.3-0.8x the slots' time out of place and at most
// as long in place, below them as long or longer). Reduce folds faster
// through the ring's slots.
#define MAPPED_ALLREDUCE_MIN 8192
#define MAPPED_REDUCESCATTER_MIN 4096
#define MAPPED_REDUCE_MIN 0
#define MAPPED_BROADCAST_MIN 8192
#define MAPPED_ALLGATHER_MIN 4096
#define MAPPED_ALLTOALL_MIN 32768

// NCCL's algorithms that need hardware weft does not drive (SHARP switches,
// NVLink SHARP) or that it does not implement: ignored where named.
static const char *const nccl_only_algos[] = {"CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT", NULL};

int weft_tuner_parse_algos(const char *spec, unsigned masks[WEFT_NUM_COLLS]) {
  const char *names[WEFT_NUM_ALGOS];
  for (int a = 0; a < WEFT_NUM_ALGOS; a++) names[a] = weft_algo_name((weft_algo_t)a);
  return weft_choice_parse("NCCL_ALGO", spec, names, WEFT_NUM_ALGOS, nccl_only_algos, masks);
}

// NCCL_ALGO and NCCL_PROTO are parsed once per distinct value (the env
// accessor caches its string) under the lock; each thread keeps a copy of
// the masks it last used, so a call looks them up without taking the lock.
// Answers are not kept here: the communicator's decision cache
// (src/core/call_cache.h) remembers them.
static pthread_mutex_t spec_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct {
  const char *spec;
  int valid;
  unsigned masks[WEFT_NUM_COLLS];
} spec_masks_t;

typedef int (*spec_parser_t)(const char *spec, unsigned masks[WEFT_NUM_COLLS]);

static void lookup_masks(spec_masks_t *shared, spec_masks_t *mine, spec_parser_t parse, const char *spec,
                         unsigned masks[WEFT_NUM_COLLS]) {
  if (!mine->valid || mine->spec != spec) {
    pthread_mutex_lock(&spec_lock);
    if (!shared->valid || shared->spec != spec) {
      parse(spec, shared->masks);  // WARNs about the value once per process
      shared->spec = spec;
      shared->valid = 1;
    }
    *mine = *shared;
    pthread_mutex_unlock(&spec_lock);
  }
  memcpy(masks, mine->masks, sizeof(mine->masks));
}

static spec_masks_t algo_masks;
static _Thread_local spec_masks_t algo_masks_here;

static void allowed_masks(const char *spec, unsigned masks[WEFT_NUM_COLLS]) {
  lookup_masks(&algo_masks, &algo_masks_here, weft_tuner_parse_algos, spec, masks);
}

static const char *const proto_names[WEFT_NUM_PROTOS] = {"LL", "LL128", "Simple"};
static spec_masks_t proto_masks;
static _Thread_local spec_masks_t proto_masks_here;

static int parse_protos(const char *spec, unsigned masks[WEFT_NUM_COLLS]) {
  return weft_choice_parse("NCCL_PROTO", spec, proto_names, WEFT_NUM_PROTOS, NULL, masks);
}

// Where NCCL_ALGO or NCCL_PROTO leaves nothing that can run a call, weft
// runs it its own way and says so once per variable value and collective.
typedef struct {
  const char *spec;
  unsigned colls;  // bit c: collective c already noted
} noted_t;

static int first_note(noted_t *n, const char *spec, weft_coll_t coll) {
  pthread_mutex_lock(&spec_lock);
  if (n->spec != spec) n->spec = spec, n->colls = 0;
  int first = !(n->colls & (1u << coll));
  n->colls |= 1u << coll;
  pthread_mutex_unlock(&spec_lock);
  return first;
}

static noted_t algo_noted, proto_noted;

const char *weft_proto_name(weft_proto_t proto) {
  return (unsigned)proto < WEFT_NUM_PROTOS ? proto_names[proto] : "?";
}

weft_proto_t weft_tuner_proto(const weft_tuner_params_t *p, const weft_coll_args_t *args, weft_algo_t algo,
                              size_t esize) {
  int carried = (args->coll == WEFT_COLL_ALLREDUCE && algo == WEFT_ALGO_ONESHOT) ||
                (args->coll == WEFT_COLL_BROADCAST && algo == WEFT_ALGO_CHAIN) ||
                (args->coll == WEFT_COLL_ALLGATHER && algo == WEFT_ALGO_RING) ||
                (args->coll == WEFT_COLL_REDUCESCATTER && algo == WEFT_ALGO_RING) ||
                (args->coll == WEFT_COLL_ALLTOALL && algo == WEFT_ALGO_DIRECT);
  if (!carried || args->count * esize > p->ll_max) return WEFT_PROTO_SIMPLE;
  unsigned masks[WEFT_NUM_COLLS];
  lookup_masks(&proto_masks, &proto_masks_here, parse_protos, p->proto_spec, masks);
  if (masks[args->coll] & (1u << WEFT_PROTO_LL)) return WEFT_PROTO_LL;
  if (!(masks[args->coll] & ((1u << WEFT_PROTO_SIMPLE) | (1u << WEFT_PROTO_LL128))) &&
      first_note(&proto_noted, p->proto_spec, args->coll))
    INFO(WEFT_LOG_ENV | WEFT_LOG_TUNING, "NCCL_PROTO='%s' allows no protocol weft has for %s; using Simple",
         p->proto_spec, weft_coll_name(args->coll));
  return WEFT_PROTO_SIMPLE;
}

// Can `algo` run this call at all (NCCL_ALGO aside)? Says why not in `why`.
static int runnable(const weft_tuner_params_t *p, const weft_coll_args_t *args, weft_algo_t algo, char *why,
                    size_t whylen) {
  if (!weft_algo_supports(algo, args->coll)) return 0;
  if (algo == WEFT_ALGO_READ && !p->can_read) return 0;
  return weft_algo_fits(algo, args, why, whylen);
}

unsigned weft_tuner_candidates(const weft_tuner_params_t *p, const weft_coll_args_t *args) {
  unsigned masks[WEFT_NUM_COLLS], out = 0;
  allowed_masks(p->algo_spec, masks);
  for (int a = 0; a < WEFT_NUM_ALGOS; a++)
    if ((masks[args->coll] & (1u << a)) && runnable(p, args, (weft_algo_t)a, NULL, 0)) out |= 1u << a;
  return out;
}

// Multi-host calls: the cheapest allowed algorithm under the cost model.
static int cheapest(const weft_tuner_params_t *p, const weft_coll_args_t *args, size_t esize, unsigned allowed,
                    char *why, size_t whylen) {
  const weft_links_t *links = p->links ? p->links : weft_links();
  char prices[256];
  size_t at = 0;
  int chosen = -1, candidates = 0, only = -1;
  double best = 0;
  prices[0] = '\0';
  // One hop sends every byte to every rank: not priced above its per-rank
  // limit (count elements are at least count bytes) unless it is the only
  // algorithm allowed; its schedule alone would be nranks x count large.
  if (args->count > p->oneshot_max && (allowed & ~(1u << WEFT_ALGO_ONESHOT)) != 0)
    allowed &= ~(1u << WEFT_ALGO_ONESHOT);
  // The model prices numa's extra stages but not the socket link they spare:
  // across hosts it runs only when nothing else is allowed.
  if ((allowed & ~(1u << WEFT_ALGO_NUMA)) != 0) allowed &= ~(1u << WEFT_ALGO_NUMA);
  for (int a = 0; a < WEFT_NUM_ALGOS; a++)
    if ((allowed & (1u << a)) && runnable(p, args, (weft_algo_t)a, why, whylen)) candidates++, only = a;
  if (candidates <= 1) return only;  // nothing to weigh
  for (int a = 0; a < WEFT_NUM_ALGOS; a++) {
    double t;
    if (!(allowed & (1u << a)) || !runnable(p, args, (weft_algo_t)a, NULL, 0)) continue;
    if (weft_cost_call(args, (weft_algo_t)a, esize, links, &t) != ncclSuccess) continue;
    if (at < sizeof(prices))
      at += (size_t)snprintf(prices + at, sizeof(prices) - at, " %s=%.1fus", weft_algo_name((weft_algo_t)a), t * 1e6);
    if (chosen < 0 || t < best) chosen = a, best = t;
  }
  if (chosen >= 0)
    INFO(WEFT_LOG_TUNING, "%s of %zu x %zu bytes, %d ranks on %d hosts: %s (priced:%s)", weft_coll_name(args->coll),
         args->count, esize, args->nranks, args->nhosts, weft_algo_name((weft_algo_t)chosen), prices);
  return chosen;
}

// The same where the buffers are mapped (symmetric windows on ncclMemAlloc
// memory): a read is a load, with no kernel call per slice, and single copy
// wins from smaller sizes (perf/compare with -R 2).
static size_t weft_tuner_mapped_read_min(weft_coll_t coll) {
  switch (coll) {
    case WEFT_COLL_ALLREDUCE: return MAPPED_ALLREDUCE_MIN;
    case WEFT_COLL_REDUCESCATTER: return MAPPED_REDUCESCATTER_MIN;
    case WEFT_COLL_REDUCE: return MAPPED_REDUCE_MIN;
    case WEFT_COLL_BROADCAST: return MAPPED_BROADCAST_MIN;
    case WEFT_COLL_ALLGATHER: return MAPPED_ALLGATHER_MIN;
    case WEFT_COLL_ALLTOALL: return MAPPED_ALLTOALL_MIN;
    default: return 0;
  }
}

int weft_tuner_mapped_matters(const weft_tuner_params_t *p, weft_coll_t coll, size_t bytes) {
  weft_tuner_params_t m = *p;
  m.mapped = 1;
  size_t min = weft_tuner_read_min(&m, coll);
  return p->can_read && min > 0 && bytes >= min;
}

// Bytes per rank from which single copy beats the slot path unasked, as
// measured on 2 ranks pinned to cores (perf/compare, docs/perf): Broadcast
// from 64 KiB (the root writes a share while the receiver reads the rest),
// AllGather from 16 KiB per rank (each rank writes its block into every
// output), AlltoAll from blocks of 32 KiB (each rank writes its blocks into
// their outputs). AllReduce, ReduceScatter and Reduce fold faster through
// the ring's slots, so they read only when asked.
size_t weft_tuner_read_min(const weft_tuner_params_t *p, weft_coll_t coll) {
  if (p->read_min >= 0) return (size_t)p->read_min;
  if (p->mapped) return weft_tuner_mapped_read_min(coll);
  switch (coll) {
    case WEFT_COLL_BROADCAST: return 65536;
    case WEFT_COLL_ALLGATHER: return 16384;
    case WEFT_COLL_ALLTOALL: return 32768;
    default: return 0;
  }
}

// One host whose ranks sit on several NUMA nodes, as many on each and at
// least two: hier's stages over the NUMA nodes (numa) reduce inside each
// node, cross the socket link once per byte and direction, and move as many
// bytes per rank as the ring in fewer steps (docs/algorithms.md).
static int numa_favoured(const weft_coll_args_t *args) {
  if (args->coll != WEFT_COLL_ALLREDUCE || args->numa_of == NULL || args->nnuma < 2) return 0;
  weft_coll_args_t g = weft_coll_by_numa(args);
  int per_node = 0;
  return weft_layout_even(&g, &per_node) && per_node >= 2;
}

// One host: the first allowed algorithm in a preference order set by size.
static int preferred(const weft_tuner_params_t *p, const weft_coll_args_t *args, size_t esize, unsigned allowed,
                     char *why, size_t whylen) {
  weft_algo_t prefs[2 * WEFT_NUM_ALGOS];
  int np = 0;
  size_t bytes = args->count * esize;
  int small = args->coll == WEFT_COLL_ALLREDUCE && args->nranks > 1 && bytes <= p->oneshot_max;
  size_t read_min = weft_tuner_read_min(p, args->coll);
  int large = p->can_read && read_min > 0 && args->nranks > 1 && bytes >= read_min;
  // Single copy first: where it starts below the one-hop limit (mapped
  // buffers, or WEFT_READ_MIN_BYTES) it was measured or asked to win there.
  if (large) prefs[np++] = WEFT_ALGO_READ;
  if (small) prefs[np++] = WEFT_ALGO_ONESHOT;
  int numa = !small && numa_favoured(args);
  if (numa) prefs[np++] = WEFT_ALGO_NUMA;
  prefs[np++] = WEFT_ALGO_RING;
  prefs[np++] = WEFT_ALGO_CHAIN;
  prefs[np++] = WEFT_ALGO_DIRECT;
  // Forced by NCCL_ALGO even outside their size ranges, or off the hosts they are built for:
  if (!small) prefs[np++] = WEFT_ALGO_ONESHOT;
  if (!large) prefs[np++] = WEFT_ALGO_READ;
  prefs[np++] = WEFT_ALGO_TREE;
  prefs[np++] = WEFT_ALGO_RECURSIVE;
  prefs[np++] = WEFT_ALGO_RABENSEIFNER;
  prefs[np++] = WEFT_ALGO_HIER;
  if (!numa) prefs[np++] = WEFT_ALGO_NUMA;
  for (int i = 0; i < np; i++)
    if ((allowed & (1u << prefs[i])) && runnable(p, args, prefs[i], why, whylen)) return (int)prefs[i];
  return -1;
}

// The algorithm among `allowed` for the call: priced across hosts, by
// preference on one; -1 when none can run it.
static int choose_among(const weft_tuner_params_t *p, const weft_coll_args_t *args, size_t esize, unsigned allowed,
                        char *why, size_t whylen) {
  return weft_coll_hosts(args) > 1 ? cheapest(p, args, esize, allowed, why, whylen)
                                   : preferred(p, args, esize, allowed, why, whylen);
}

ncclResult_t weft_tuner_choose(const weft_tuner_params_t *p, weft_coll_args_t *args, size_t esize,
                               weft_algo_t *algo) {
  unsigned masks[WEFT_NUM_COLLS];
  allowed_masks(p->algo_spec, masks);
  unsigned allowed = masks[args->coll];
  size_t slot_elems = p->slot_bytes / esize;
  size_t half = p->nslots / 2 > 0 ? p->nslots / 2 : 1;
  args->slice = slot_elems * half > 0 ? slot_elems * half : 1;
  char why[160] = "";
  int chosen = choose_among(p, args, esize, allowed, why, sizeof(why));
  unsigned every = (1u << WEFT_NUM_ALGOS) - 1;
  if (chosen < 0 && allowed != every) {  // NCCL_ALGO serves other collectives or other layouts: weft's own choice
    char why_not[160];
    snprintf(why_not, sizeof(why_not), "%s", why);
    chosen = choose_among(p, args, esize, every, why, sizeof(why));
    if (chosen >= 0 && first_note(&algo_noted, p->algo_spec, args->coll))
      INFO(WEFT_LOG_ENV | WEFT_LOG_TUNING, "NCCL_ALGO='%s' allows no algorithm that can run %s%s%s%s; using %s",
           p->algo_spec ? p->algo_spec : "", weft_coll_name(args->coll), why_not[0] ? " (" : "", why_not,
           why_not[0] ? ")" : "", weft_algo_name((weft_algo_t)chosen));
  }
  if (chosen < 0) {
    WARN("no algorithm can run %s of %zu x %zu bytes on %d ranks%s%s", weft_coll_name(args->coll), args->count,
         esize, args->nranks, why[0] ? ": " : "", why);
    return ncclInternalError;
  }
  *algo = (weft_algo_t)chosen;
  return ncclSuccess;
}
