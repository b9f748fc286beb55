/*
 * cuda_direct.h — the direct path for device buffers (WEFT_CUDA_DIRECT=1):
 * collectives among the ranks of one host that run on the GPU, with no host
 * staging. Each rank keeps a device scratch (two slots) that its peers map
 * with CUDA IPC (or use as is, for ranks in the same process), with two
 * counters in front of it, ready and done. A call is queued on the
 * caller's stream as rounds: each rank copies its next slice into its slot
 * and says ready; each rank reads what it needs from the slots (folding
 * them in rank order with libweft-cuda.so's kernels, or copying them) and
 * says done; a slot is refilled once every peer said done for it
 * (cuda_direct_rounds.c).
 *
 * Set up at communicator creation (collective). Send/Recv take the
 * staging path on the same stream; collectives in a group are queued at
 * ncclGroupEnd, before the group's staged batch. Not yet run on a GPU.
 */
#ifndef WEFT_CUDA_DIRECT_H
#define WEFT_CUDA_DIRECT_H

#include "cuda_stream.h"
#include "engine.h"

// Communicator creation (every rank, after its transports are connected):
// sets up the direct path when WEFT_CUDA_DIRECT=1, the ranks share one host,
// and every rank has the driver, the kernels and a current context; else
// leaves it off on every rank alike. Fails only on a bootstrap failure.
ncclResult_t weft_cuda_direct_init(struct ncclComm *comm);
// Whether op (device buffers, a collective) takes the direct path.
int weft_cuda_direct_eligible(const weft_op_t *op);
// Queues op on chan's stream; op stays the caller's.
ncclResult_t weft_cuda_direct_queue(weft_op_t *op, weft_cuda_chan_t *chan);
void weft_cuda_direct_free(struct ncclComm *comm);

#endif
