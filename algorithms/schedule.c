/*
 * schedule.c — the schedule container, buffer geometry of each collective,
 * and the dispatcher from (collective, algorithm) to a builder.
 *
 * A schedule is two growable arrays: steps, and lanes that name contiguous
 * runs of steps. Builders open a lane, append steps (zero-sized ones vanish,
 * so every rank drops exactly the steps its peers drop) and move on. The
 * geometry helpers say how many elements each user buffer holds and where
 * the send buffer sits inside the receive buffer for NCCL's in-place calls;
 * the engine, the simulator and the argument checks all read them from here.
 */
#include "schedule.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "layout.h"

static const char *const coll_names[WEFT_NUM_COLLS] = {
    "AllReduce", "Broadcast", "Reduce",  "AllGather", "ReduceScatter",
    "AlltoAll",  "Gather",    "Scatter", "Send",      "Recv"};

static const char *const algo_names[WEFT_NUM_ALGOS] = {
    "ring", "chain", "direct", "oneshot", "read", "tree", "recursive", "rabenseifner", "hier", "numa"};

static const char *const kind_names[WEFT_NUM_STEP_KINDS] = {
    "SEND", "RECV", "RECV_REDUCE", "RECV_REDUCE_SEND", "RECV_COPY_SEND", "COPY",
    "READ", "READ_REDUCE", "SIGNAL", "WAIT", "RECV_REDUCE_COPY_SEND", "WRITE"};

const char *weft_coll_name(weft_coll_t c) {
  return ((unsigned)c < WEFT_NUM_COLLS) ? coll_names[c] : "?";
}

const char *weft_algo_name(weft_algo_t a) {
  return ((unsigned)a < WEFT_NUM_ALGOS) ? algo_names[a] : "?";
}

const char *weft_step_kind_name(int kind) {
  return (kind >= 0 && kind < WEFT_NUM_STEP_KINDS) ? kind_names[kind] : "?";
}

int weft_coll_has_op(weft_coll_t c) {
  return c == WEFT_COLL_ALLREDUCE || c == WEFT_COLL_REDUCE || c == WEFT_COLL_REDUCESCATTER;
}

int weft_algo_supports(weft_algo_t algo, weft_coll_t coll) {
  switch (algo) {
    case WEFT_ALGO_RING:
      return coll == WEFT_COLL_ALLREDUCE || coll == WEFT_COLL_ALLGATHER ||
             coll == WEFT_COLL_REDUCESCATTER;
    case WEFT_ALGO_CHAIN: return coll == WEFT_COLL_BROADCAST || coll == WEFT_COLL_REDUCE;
    case WEFT_ALGO_DIRECT:
      return coll == WEFT_COLL_ALLTOALL || coll == WEFT_COLL_GATHER || coll == WEFT_COLL_SCATTER ||
             coll == WEFT_COLL_SEND || coll == WEFT_COLL_RECV;
    case WEFT_ALGO_ONESHOT: return coll == WEFT_COLL_ALLREDUCE;
    case WEFT_ALGO_READ:
      return coll == WEFT_COLL_ALLREDUCE || coll == WEFT_COLL_REDUCESCATTER || coll == WEFT_COLL_ALLGATHER ||
             coll == WEFT_COLL_BROADCAST || coll == WEFT_COLL_REDUCE || coll == WEFT_COLL_ALLTOALL;
    case WEFT_ALGO_TREE:
    case WEFT_ALGO_RECURSIVE:
    case WEFT_ALGO_RABENSEIFNER:
    case WEFT_ALGO_HIER:
    case WEFT_ALGO_NUMA: return coll == WEFT_COLL_ALLREDUCE;
    default: return 0;
  }
}

int weft_algo_stages_send(weft_algo_t algo, weft_coll_t coll) {
  return algo == WEFT_ALGO_READ && coll == WEFT_COLL_ALLTOALL;
}

int weft_algo_fits(weft_algo_t algo, const weft_coll_args_t *a, char *why, size_t whylen) {
  if (why && whylen) why[0] = '\0';
  if (algo != WEFT_ALGO_HIER && algo != WEFT_ALGO_NUMA) return 1;
  // numa groups by NUMA node where the call knows them, else by host, as hier does.
  weft_coll_args_t g = algo == WEFT_ALGO_NUMA ? weft_coll_by_numa(a) : *a;
  if (weft_coll_hosts(&g) == 1 || weft_layout_even(&g, NULL)) return 1;
  if (why && whylen) {
    // Name the first group whose size differs from group 0's.
    const char *what = g.host_of == a->numa_of ? "NUMA node" : "host";
    int m = g.nhosts, *size = calloc((size_t)m, sizeof(int)), h = 1;
    for (int r = 0; size && r < g.nranks; r++)
      if (g.host_of[r] >= 0 && g.host_of[r] < m) size[g.host_of[r]]++;
    while (size && h < m - 1 && size[h] == size[0]) h++;
    if (size)
      snprintf(why, whylen, "%s needs the same number of ranks on every %s (%s 0 has %d, %s %d has %d)",
               weft_algo_name(algo), what, what, size[0], what, h, size[h]);
    else
      snprintf(why, whylen, "%s needs the same number of ranks on every %s", weft_algo_name(algo), what);
    free(size);
  }
  return 0;
}

size_t weft_schedule_min_capacity(weft_algo_t algo, size_t slice) {
  return algo == WEFT_ALGO_RING || algo == WEFT_ALGO_HIER || algo == WEFT_ALGO_NUMA ? 2 * slice : slice;
}

// count * nranks, the size of the "all ranks" buffer of per-rank collectives.
static size_t all_elems(const weft_coll_args_t *a) { return a->count * (size_t)a->nranks; }

size_t weft_coll_send_elems(const weft_coll_args_t *a) {
  int root = a->rank == a->root;
  switch (a->coll) {
    case WEFT_COLL_ALLREDUCE:
    case WEFT_COLL_REDUCE:
    case WEFT_COLL_ALLGATHER:
    case WEFT_COLL_GATHER:
    case WEFT_COLL_SEND: return a->count;
    case WEFT_COLL_BROADCAST: return root ? a->count : 0;  // sendbuff is read on the root only
    case WEFT_COLL_REDUCESCATTER:
    case WEFT_COLL_ALLTOALL: return all_elems(a);
    case WEFT_COLL_SCATTER: return root ? all_elems(a) : 0;
    default: return 0;  // Recv
  }
}

size_t weft_coll_recv_elems(const weft_coll_args_t *a) {
  int root = a->rank == a->root;
  switch (a->coll) {
    case WEFT_COLL_ALLREDUCE:
    case WEFT_COLL_BROADCAST:
    case WEFT_COLL_REDUCESCATTER:
    case WEFT_COLL_SCATTER:
    case WEFT_COLL_RECV: return a->count;
    case WEFT_COLL_REDUCE: return root ? a->count : 0;  // recvbuff of other ranks is never touched
    case WEFT_COLL_ALLGATHER:
    case WEFT_COLL_ALLTOALL: return all_elems(a);
    case WEFT_COLL_GATHER: return root ? all_elems(a) : 0;
    default: return 0;  // Send
  }
}

size_t weft_coll_inplace_offset(const weft_coll_args_t *a, int *send_inside_recv) {
  int inside = 1;
  size_t off = 0;
  switch (a->coll) {
    case WEFT_COLL_ALLGATHER: off = (size_t)a->rank * a->count; break;
    case WEFT_COLL_GATHER: off = a->rank == a->root ? (size_t)a->root * a->count : 0; break;
    case WEFT_COLL_REDUCESCATTER:
      inside = 0;
      off = (size_t)a->rank * a->count;
      break;
    case WEFT_COLL_SCATTER:
      inside = 0;
      off = a->rank == a->root ? (size_t)a->root * a->count : 0;
      break;
    default: break;  // the two buffers are the same memory
  }
  if (send_inside_recv) *send_inside_recv = inside;
  return off;
}

void weft_schedule_free(weft_schedule_t *s) {
  if (!s) return;
  free(s->steps);
  free(s->lanes);
  memset(s, 0, sizeof(*s));
}

// Grow an array of `elem`-sized items to hold at least `need` of them.
static ncclResult_t grow(void **arr, uint32_t *cap, uint32_t need, size_t elem) {
  if (need <= *cap) return ncclSuccess;
  if (need == UINT32_MAX) {
    WARN("schedule: more than %u entries", UINT32_MAX - 1);
    return ncclInvalidArgument;
  }
  // Start small: a first request under 1 KiB stays in malloc's fast caches.
  uint64_t ncap = *cap ? (uint64_t)*cap * 2 : 8;
  if (ncap > UINT32_MAX - 1) ncap = UINT32_MAX - 1;
  void *p = realloc(*arr, (size_t)ncap * elem);
  if (!p) {
    WARN("schedule: out of memory growing to %llu entries", (unsigned long long)ncap);
    return ncclSystemError;
  }
  *arr = p;
  *cap = (uint32_t)ncap;
  return ncclSuccess;
}

ncclResult_t weft_schedule_lane_begin(weft_schedule_t *s) {
  // An empty last lane is reused, so lanes whose steps all vanished leave no trace.
  if (s->nlanes > 0 && s->lanes[s->nlanes - 1].count == 0) {
    s->lanes[s->nlanes - 1].first = s->nsteps;
    return ncclSuccess;
  }
  WEFTCHECK(grow((void **)&s->lanes, &s->lanes_cap, s->nlanes + 1, sizeof(*s->lanes)));
  s->lanes[s->nlanes].first = s->nsteps;
  s->lanes[s->nlanes].count = 0;
  s->nlanes++;
  return ncclSuccess;
}

ncclResult_t weft_schedule_add(weft_schedule_t *s, const weft_step_t *step) {
  if (step->count == 0) return ncclSuccess;
  if (s->nlanes == 0) WEFTCHECK(weft_schedule_lane_begin(s));
  WEFTCHECK(grow((void **)&s->steps, &s->steps_cap, s->nsteps + 1, sizeof(*s->steps)));
  s->steps[s->nsteps++] = *step;
  s->lanes[s->nlanes - 1].count++;
  return ncclSuccess;
}

ncclResult_t weft_schedule_add_split(weft_schedule_t *s, const weft_step_t *step, size_t slice) {
  weft_step_t piece = *step;
  if (slice == 0) {
    WARN("schedule: slice of 0 elements");
    return ncclInvalidArgument;
  }
  for (uint64_t off = 0; off < step->count; off += piece.count) {
    uint64_t left = step->count - off;
    piece.count = left < slice ? left : slice;
    piece.src_off = step->src_off + off;
    piece.dst_off = step->dst_off + off;
    piece.rem_off = step->rem_off + off;
    WEFTCHECK(weft_schedule_add(s, &piece));
  }
  return ncclSuccess;
}

static int has_root(weft_coll_t c) {
  return c == WEFT_COLL_BROADCAST || c == WEFT_COLL_REDUCE || c == WEFT_COLL_GATHER ||
         c == WEFT_COLL_SCATTER || c == WEFT_COLL_SEND || c == WEFT_COLL_RECV;
}

static ncclResult_t check_args(const weft_coll_args_t *a, weft_algo_t algo) {
  if ((unsigned)a->coll >= WEFT_NUM_COLLS) {
    WARN("schedule: unknown collective %d", (int)a->coll);
    return ncclInvalidArgument;
  }
  if ((unsigned)algo >= WEFT_NUM_ALGOS) {
    WARN("schedule: unknown algorithm %d", (int)algo);
    return ncclInvalidArgument;
  }
  if (!weft_algo_supports(algo, a->coll)) {
    WARN("schedule: algorithm %s cannot run %s", weft_algo_name(algo), weft_coll_name(a->coll));
    return ncclInvalidArgument;
  }
  if (a->nranks < 1 || a->rank < 0 || a->rank >= a->nranks) {
    WARN("schedule: %s rank %d of %d ranks", weft_coll_name(a->coll), a->rank, a->nranks);
    return ncclInvalidArgument;
  }
  if (has_root(a->coll) && (a->root < 0 || a->root >= a->nranks)) {
    WARN("schedule: %s %s %d out of range [0, %d)", weft_coll_name(a->coll),
         a->coll == WEFT_COLL_SEND || a->coll == WEFT_COLL_RECV ? "peer" : "root", a->root,
         a->nranks);
    return ncclInvalidArgument;
  }
  if (a->slice == 0) {
    WARN("schedule: %s slice of 0 elements", weft_coll_name(a->coll));
    return ncclInvalidArgument;
  }
  // Every offset the builders compute stays below count * nranks + slice.
  if (a->count > (SIZE_MAX - a->slice) / (size_t)a->nranks / 2) {
    WARN("schedule: %s count %zu too large for %d ranks", weft_coll_name(a->coll), a->count,
         a->nranks);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

ncclResult_t weft_schedule_build(const weft_coll_args_t *a, weft_algo_t algo, weft_schedule_t *s) {
  if (!a || !s) {
    WARN("schedule: NULL %s", a ? "schedule" : "arguments");
    return ncclInvalidArgument;
  }
  ncclResult_t res;
  WEFTCHECKGOTO(check_args(a, algo), res, fail);
  switch (algo) {
    case WEFT_ALGO_RING: WEFTCHECKGOTO(weft_ring_build(a, s), res, fail); break;
    case WEFT_ALGO_CHAIN: WEFTCHECKGOTO(weft_chain_build(a, s), res, fail); break;
    case WEFT_ALGO_ONESHOT: WEFTCHECKGOTO(weft_oneshot_build(a, s), res, fail); break;
    case WEFT_ALGO_READ: WEFTCHECKGOTO(weft_read_build(a, s), res, fail); break;
    case WEFT_ALGO_TREE: WEFTCHECKGOTO(weft_tree_build(a, s), res, fail); break;
    case WEFT_ALGO_RECURSIVE: WEFTCHECKGOTO(weft_recursive_build(a, s), res, fail); break;
    case WEFT_ALGO_RABENSEIFNER: WEFTCHECKGOTO(weft_rabenseifner_build(a, s), res, fail); break;
    case WEFT_ALGO_HIER: WEFTCHECKGOTO(weft_hier_build(a, s), res, fail); break;
    case WEFT_ALGO_NUMA: WEFTCHECKGOTO(weft_hier_numa_build(a, s), res, fail); break;
    default: WEFTCHECKGOTO(weft_direct_build(a, s), res, fail); break;
  }
  if (s->nlanes > 0 && s->lanes[s->nlanes - 1].count == 0) s->nlanes--;
  return ncclSuccess;
fail:
  weft_schedule_free(s);
  return res;
}
