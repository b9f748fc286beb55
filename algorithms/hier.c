/*
 * hier.c — hierarchical AllReduce for communicators spanning several hosts.
 *
 * Three ring passes (ring.h), one after the other in one lane:
 *   1. inside each host, a ReduceScatter over the host's k ranks: local rank
 *      i ends with shard i of the buffer reduced over its host;
 *   2. across hosts, an AllReduce of shard i among the i-th ranks of every
 *      host (a ring in host order), folding those partial results: shard i
 *      is now complete on each of them;
 *   3. inside each host, an AllGather of the shards.
 * Every byte crosses the network once per direction in pass 2, split over k
 * concurrent rings (one per local index), instead of a flat ring's n-long
 * chain crossing each host boundary with all the data. Each result is
 * computed once, in pass 2, and copied: all ranks hold the same bits.
 *
 * Needs the same number of ranks on every host (weft_algo_fits); with one
 * host it is the ring. Shards and the chunks of pass 2 are 16-element
 * multiples, as ring chunks are. Each pass is a complete collective over its
 * own connections and only starts once the pass before has finished on that
 * rank, so the ring's two slices of room keep all three deadlock-free.
 */
#include "checks.h"
#include "layout.h"
#include "ring.h"
#include "schedule.h"

static ncclResult_t hier_build(const weft_coll_args_t *a, const weft_layout_t *lay, weft_schedule_t *s) {
  int m = lay->nhosts, k = weft_layout_host_size(lay, 0);
  int h = weft_layout_host(lay, a->rank), li = weft_layout_local(lay, a->rank);
  size_t shard = weft_ring_chunk(a->count, k);
  uint64_t mine = (uint64_t)li * shard, len = 0;
  if (mine < a->count) len = a->count - mine < shard ? a->count - mine : shard;
  // Inside the host: members are its k consecutive host-order positions.
  weft_ring_t local = {.lay = lay, .first = h * k, .stride = 1, .n = k, .pos = li, .chunk = shard,
                       .total = a->count, .slice = a->slice, .operand_buf = WEFT_BUF_SEND};
  // Across hosts: the rank of local index li on each host.
  weft_ring_t across = {.lay = lay, .first = li, .stride = k, .n = m, .pos = h, .base = mine,
                        .chunk = weft_ring_chunk(len, m), .total = len, .slice = a->slice,
                        .operand_buf = k > 1 ? WEFT_BUF_RECV : WEFT_BUF_SEND, .final = 1};
  WEFTCHECK(weft_schedule_lane_begin(s));
  if (k > 1) WEFTCHECK(weft_ring_reduce_scatter(s, &local, mine));
  if (len > 0) WEFTCHECK(weft_ring_all_reduce(s, &across));
  if (k > 1) WEFTCHECK(weft_ring_all_gather(s, &local, WEFT_BUF_RECV, mine));
  return ncclSuccess;
}

// a's hosts are the groups: every group must hold the same number of ranks.
static ncclResult_t groups_build(const weft_coll_args_t *a, const char *what, weft_schedule_t *s) {
  if (weft_coll_hosts(a) == 1) return weft_ring_build(a, s);
  weft_layout_t lay;
  ncclResult_t res = weft_layout_init(&lay, a, 1);
  for (int h = 1; res == ncclSuccess && h < lay.nhosts; h++) {
    if (weft_layout_host_size(&lay, h) != weft_layout_host_size(&lay, 0)) {
      WARN("hier needs the same number of ranks on every %s (%s 0 has %d, %s %d has %d)", what, what,
           weft_layout_host_size(&lay, 0), what, h, weft_layout_host_size(&lay, h));
      res = ncclInvalidArgument;
    }
  }
  if (res == ncclSuccess) res = hier_build(a, &lay, s);
  weft_layout_free(&lay);
  return res;
}

static int is_allreduce(const weft_coll_args_t *a, const char *name) {
  if (a->coll == WEFT_COLL_ALLREDUCE) return 1;
  WARN("%s: cannot run %s", name, weft_coll_name(a->coll));
  return 0;
}

ncclResult_t weft_hier_build(const weft_coll_args_t *a, weft_schedule_t *s) {
  if (!is_allreduce(a, "hier")) return ncclInvalidArgument;
  return groups_build(a, "host", s);
}

ncclResult_t weft_hier_numa_build(const weft_coll_args_t *a, weft_schedule_t *s) {
  if (!is_allreduce(a, "numa")) return ncclInvalidArgument;
  weft_coll_args_t g = weft_coll_by_numa(a);
  return groups_build(&g, g.host_of == a->numa_of ? "NUMA node" : "host", s);
}
