/*
 * cuda_stream.h — device buffers on CUDA streams (docs/gpu_memory.md).
 *
 * A call whose buffers are device (or managed) memory is queued on the
 * caller's cudaStream_t and returns at once, as in NCCL. weft moves the
 * bytes with its host engine through pinned host staging, and meets the
 * stream with two stream memory operations per batch:
 *
 *   user stream:  copy send→staging, WRITE(reached=k), WAIT(done>=k),
 *                 copy staging→recv, WRITE(freed=k)
 *   host worker:  wait reached>=k, run the batch on the staging buffers
 *                 with the engine, store done=k
 *
 * One bridge per (context, stream) holds the three counters (pinned,
 * device-mapped host memory), the staging pool and the worker (a host
 * stream, src/core/stream.c). Bridges are shared by every communicator that
 * uses the stream and freed when the last of them is.
 */
#ifndef WEFT_CUDA_STREAM_H
#define WEFT_CUDA_STREAM_H

#include <stdint.h>

#include "engine.h"
#include "nccl.h"
#include "placement.h"  // the bridge, its gates and the calls the core makes

// The CUDA context and stream the bridge serves.
void *weft_cuda_bridge_context(const weft_dev_bridge_t *bridge);
void *weft_cuda_bridge_stream(const weft_dev_bridge_t *bridge);

// Releases a staged batch that will not be queued.
void weft_cuda_batch_unstage(weft_dev_gate_t *gate);

// Waits (sleeping, up to limit_ms) until the streams of comm's bridges
// have run out of work; 0 when one has not.
int weft_cuda_comm_streams_drain(struct ncclComm *comm, int64_t limit_ms);

#endif
