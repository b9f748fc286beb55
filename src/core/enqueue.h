/*
 * enqueue.h — from an API call to a launched operation.
 */
#ifndef WEFT_ENQUEUE_H
#define WEFT_ENQUEUE_H

#include "engine.h"
#include "nccl.h"

// Validate a call, build its operation and hand it to the group machinery
// (which runs it now, or at ncclGroupEnd).
ncclResult_t weft_enqueue(weft_coll_t coll, const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t dtype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);

#endif
