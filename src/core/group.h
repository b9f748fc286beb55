/*
 * group.h — ncclGroupStart/End: per-thread queues of operations that are
 * launched together, so any mix of sends and receives (and operations on
 * several communicators of one process) progresses concurrently.
 */
#ifndef WEFT_GROUP_H
#define WEFT_GROUP_H

#include "engine.h"
#include "stream.h"

// Queue an operation in the current group, or outside a group launch and run
// it now (no queue).
// Takes ownership of op. stream: NULL (run in the caller) or the host stream
// that runs it; bridge: the CUDA stream bridge for device buffers, else NULL.
ncclResult_t weft_group_add(weft_op_t *op, weft_stream_t *stream, weft_dev_bridge_t *bridge);
// The same for an operation on the CUDA IPC path (cuda_ipc.h): queued
// on bridge's stream now, or at the outermost ncclGroupEnd before the group's
// other operations.
ncclResult_t weft_group_add_ipc(weft_op_t *op, weft_dev_bridge_t *bridge);
// How deep in ncclGroupStart the calling thread is (0: outside a group).
int weft_group_depth(void);
// A call inside the current group failed: ncclGroupEnd will return res.
void weft_group_note_error(ncclResult_t res);

#endif
