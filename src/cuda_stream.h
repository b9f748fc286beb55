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
 * One channel per (context, stream) holds the three counters (pinned,
 * device-mapped host memory), the staging pool and the worker (a host
 * stream, src/stream.c). Channels are shared by every communicator that
 * uses the stream and freed when the last of them is.
 */
#ifndef WEFT_CUDA_STREAM_H
#define WEFT_CUDA_STREAM_H

#include <stdint.h>

#include "engine.h"
#include "nccl.h"

typedef struct weft_cuda_chan weft_cuda_chan_t;
struct weft_stream;

// A batch's place in its channel: the worker waits for reached >= k before
// it runs the batch and stores done = k after it (k = 0: no gate).
typedef struct {
  weft_cuda_chan_t *chan;
  uint32_t k;
} weft_cuda_gate_t;

// The channel of `stream` for comm (made on first use; comm then holds a
// reference). Refuses a stream being captured into a graph, a stream of
// another device than the buffers' (`device`), and a thread with no
// current context for the NULL stream.
ncclResult_t weft_cuda_chan_get(struct ncclComm *comm, cudaStream_t stream, int device, const char *api,
                                weft_cuda_chan_t **out);
// The host stream whose worker runs the channel's batches.
struct weft_stream *weft_cuda_chan_worker(weft_cuda_chan_t *chan);

// Stage a batch: give each operation host staging (its sendbuff/recvbuff
// now point there; the device pointers are kept in op->dev) and queue the
// copies and the two counters on the user's stream. Called before the
// operations are launched. On failure nothing is left queued that waits.
ncclResult_t weft_cuda_batch_prepare(weft_cuda_chan_t *chan, weft_op_t **ops, int nops, weft_cuda_gate_t *gate);

// Worker side: wait until the stream reached the gate, then read the
// operations' device-resident scalars from staging.
void weft_cuda_gate_wait(const weft_cuda_gate_t *gate, weft_op_t **ops, int nops);
// Worker side: release the stream (done = k), whatever the batch's outcome.
void weft_cuda_gate_open(const weft_cuda_gate_t *gate);
// A prepared batch that will not run (a later step failed): hand the worker
// an empty batch with its gate, so the stream is released in order.
void weft_cuda_gate_abandon(const weft_cuda_gate_t *gate);

// Whether a PreMulSum scalar given with ncclScalarDevice lies in device or
// managed memory: then it is copied in stream order at each call, never
// read by the host at creation.
int weft_cuda_scalar_on_device(const void *scalar, size_t bytes);

// A communicator is freed: drop its references to channels (a channel no
// communicator uses any more is drained and freed).
void weft_cuda_comm_release(struct ncclComm *comm);

#endif
