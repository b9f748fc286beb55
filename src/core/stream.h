/*
 * stream.h — host streams: a worker thread per stream runs its batches of
 * operations in order, so calls on a weft stream return at once and
 * complete asynchronously (weftStreamSynchronize / weftStreamQuery).
 */
#ifndef WEFT_STREAM_H
#define WEFT_STREAM_H

#include "engine.h"
#include "nccl.h"
#include "placement.h"

typedef struct weft_stream weft_stream_t;

// NULL stream -> *out = NULL (run in the caller). A live weft stream -> it.
// Anything else is ncclInvalidArgument with a WARN naming `api`.
ncclResult_t weft_stream_resolve(cudaStream_t stream, const char *api, weft_stream_t **out);
// Queue a batch of operations (the stream owns them from now on, even on
// failure; the array stays the caller's); runs after earlier batches.
ncclResult_t weft_stream_submit(weft_stream_t *s, weft_op_t **ops, int nops);
// The same with a CUDA stream's gate (placement.h); nops may be 0.
// Even on failure the gate is opened, so the GPU stream is never left waiting.
ncclResult_t weft_stream_submit_gated(weft_stream_t *s, weft_op_t **ops, int nops, const weft_dev_gate_t *gate);

// A host stream outside the registry of weftStreamCreate's handles (the
// workers of CUDA stream bridges); destroy drains it first.
ncclResult_t weft_stream_create_private(weft_stream_t **out);
void weft_stream_destroy_private(weft_stream_t *s);

#endif
