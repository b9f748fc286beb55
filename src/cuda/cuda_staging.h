/*
 * cuda_staging.h — pinned host staging for the CUDA stream path
 * (cuda_stream.c), and the per-context reserve it is drawn from
 * (cuda_reserve.c).
 *
 * Pinning or unpinning host memory synchronises the whole context (the CUDA
 * guide's implicit synchronization; cudaFreeHost waits for the device to go
 * idle). Done while a stream of that context waits for weft, it deadlocks:
 * in a group whose earlier stream waits are queued, or when ranks that are
 * threads of one process share a context and one rank's stream waits for
 * another's call. So pinned memory is taken at communicator creation (a
 * collective call, before any rank can queue work on it): counters for the
 * context's bridges and WEFT_CUDA_STAGING_BLOCKS blocks of
 * WEFT_CUDA_STAGING_BYTES. Calls are staged from those; only a call larger
 * than any idle block pins more memory at call time. Blocks are kept for the
 * life of the process, moving between the reserve and the bridges.
 */
#ifndef WEFT_CUDA_STAGING_H
#define WEFT_CUDA_STAGING_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_rt.h"

typedef struct staging {
  char *host;
  size_t bytes;
  uint32_t k;   // the batch that last used it (0: reserved, not queued yet)
  int busy;     // until the stream wrote freed >= k
  struct staging *next;
} staging_t;

// Communicator creation: the reserve of the caller's current context (made
// once per context; nothing without a driver or a current context).
void weft_cuda_reserve_init(void);
// An idle reserved block of at least `bytes` of ctx's reserve, or NULL.
staging_t *weft_cuda_reserve_take(weft_CUcontext ctx, size_t bytes);
// Gives idle blocks back to ctx's reserve (a bridge is freed).
void weft_cuda_reserve_give(weft_CUcontext ctx, staging_t *blocks);
// A 256-byte slot of pinned, device-mapped counters from ctx's reserve:
// 1 and *host, *dev set; 0 when the reserve has none left.
int weft_cuda_reserve_counters(weft_CUcontext ctx, void **host, weft_CUdeviceptr *dev);
void weft_cuda_reserve_counters_put(weft_CUcontext ctx, void *host);

#endif
