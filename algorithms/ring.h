/*
 * ring.h — ring passes over any set of ranks, for the builders in algorithms/.
 *
 * ring.c builds the ring collectives from three passes — ReduceScatter,
 * AllGather and the fused AllReduce — over a ring described by this struct;
 * hier.c runs the same passes over a host's ranks and over the ranks that
 * share a local index across hosts. Members are read from the host order
 * (layout.h): member i is the rank at host-order position first + i*stride.
 * Chunk j of the region is [base + j*chunk, base + min((j+1)*chunk, total)),
 * possibly empty. Private to algorithms/.
 */
#ifndef WEFT_RING_H
#define WEFT_RING_H

#include "layout.h"
#include "schedule.h"

typedef struct {
  const weft_layout_t *lay;
  int first, stride;    // member i is the rank at host-order position first + i*stride
  int n, pos;           // members, and this rank's member index
  int chunk_by_rank;    // chunk of member i is its rank's (ReduceScatter/AllGather layouts), else i
  uint64_t base;        // element offset of chunk 0 in the buffers
  size_t chunk, total;  // elements per chunk, and in all chunks together
  size_t slice;         // most elements per step
  uint8_t operand_buf;  // WEFT_BUF_SEND: operands are raw inputs; WEFT_BUF_RECV: partial
                        // results already in recv at the chunk offsets (accumulated)
  int final;            // the pass completes the reduction (FINAL on the completing steps)
} weft_ring_t;

static inline int weft_ring_member(const weft_ring_t *g, int i) {
  return weft_layout_rank_at(g->lay, g->first + i * g->stride);
}

// ReduceScatter: this rank's chunk, reduced over the members, lands at
// recv[dst_off ..] (with the chunk's offsets relative to its start).
ncclResult_t weft_ring_reduce_scatter(weft_schedule_t *s, const weft_ring_t *g, uint64_t dst_off);

// AllGather: this rank's chunk is read from (own_buf, own_off ..), every
// other member's chunk lands at its offset in recv.
ncclResult_t weft_ring_all_gather(weft_schedule_t *s, const weft_ring_t *g, weft_buf_t own_buf,
                                  uint64_t own_off);

// AllReduce of the region: a ReduceScatter round whose completing step
// sends the result on, then an AllGather round, per slice of a chunk.
ncclResult_t weft_ring_all_reduce(weft_schedule_t *s, const weft_ring_t *g);

// 16-element multiple of ceil(total / parts): chunk boundaries stay aligned
// for vector reductions.
size_t weft_ring_chunk(size_t total, int parts);

#endif
