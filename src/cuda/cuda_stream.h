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
 * stream, src/core/stream.c). Channels are shared by every communicator that
 * uses the stream and freed when the last of them is.
 */
#ifndef WEFT_CUDA_STREAM_H
#define WEFT_CUDA_STREAM_H

#include <stdint.h>

#include "engine.h"
#include "nccl.h"

typedef struct weft_cuda_chan weft_cuda_chan_t;
struct weft_stream;

struct staging;

// A batch's place in its channel: the worker waits for reached >= k before
// it runs the batch and stores done = k after it. k = 0: staged (its
// staging block reserved), not queued yet.
typedef struct {
  weft_cuda_chan_t *chan;
  uint32_t k;
  int slot;               // the batch's region of the channel's staging ring, or -1
  struct staging *block;  // else its dedicated staging block
} weft_cuda_gate_t;

// The channel of `stream` for comm (made on first use; comm then holds a
// reference). Refuses a stream being captured into a graph, a stream of
// another device than the buffers' (`device`), and a thread with no
// current context for the NULL stream.
ncclResult_t weft_cuda_chan_get(struct ncclComm *comm, cudaStream_t stream, int device, const char *api,
                                weft_cuda_chan_t **out);
// The host stream whose worker runs the channel's batches.
struct weft_stream *weft_cuda_chan_worker(weft_cuda_chan_t *chan);
// The CUDA context and stream the channel serves.
void *weft_cuda_chan_context(const weft_cuda_chan_t *chan);
void *weft_cuda_chan_stream(const weft_cuda_chan_t *chan);

// A batch is made in two phases, each run for every channel of a group
// before the next: pinning host memory synchronises the context, so no
// staging may be allocated once any of the group's stream waits is queued.
// Stage: reserve host staging for the operations (their sendbuff/recvbuff
// now point there; the device pointers stay in op->dev); may allocate.
ncclResult_t weft_cuda_batch_stage(weft_cuda_chan_t *chan, weft_op_t **ops, int nops, weft_cuda_gate_t *gate);
// Queue: the copies and the counters on the user's stream; gate->k is then
// the batch's number. Allocates nothing. On failure with the WAIT already
// queued, gate stays set and the caller must abandon it; otherwise gate is
// cleared. Both run before the operations are launched.
ncclResult_t weft_cuda_batch_queue(weft_cuda_gate_t *gate, weft_op_t **ops, int nops);
// Releases a staged batch that will not be queued.
void weft_cuda_batch_unstage(weft_cuda_gate_t *gate);

// Worker side: wait until the stream reached the gate, then read the
// operations' device-resident scalars from staging.
void weft_cuda_gate_wait(const weft_cuda_gate_t *gate, weft_op_t **ops, int nops);
// Worker side: release the stream (done = k), whatever the batch's outcome.
void weft_cuda_gate_open(const weft_cuda_gate_t *gate);
// A batch that will not run (a later step failed): a staged one gives its
// block back; a queued one goes to the worker empty, so the stream is
// released in order. Clears the gate.
void weft_cuda_gate_abandon(weft_cuda_gate_t *gate);

// Whether a PreMulSum scalar given with ncclScalarDevice lies in device or
// managed memory: then it is copied in stream order at each call, never
// read by the host at creation.
int weft_cuda_scalar_on_device(const void *scalar, size_t bytes);

// A communicator is freed: drop its references to channels (a channel no
// communicator uses any more is drained and freed).
void weft_cuda_comm_release(struct ncclComm *comm);
// Waits (sleeping, up to limit_ms) until the streams of comm's channels
// have run out of work; 0 when one has not.
int weft_cuda_comm_streams_drain(struct ncclComm *comm, int64_t limit_ms);

#endif
