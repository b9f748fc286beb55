/*
 * cuda_direct.h — the direct path for device buffers (WEFT_CUDA_DIRECT=1):
 * an all-reduce among the ranks of one host that runs on the GPU, with no
 * host staging. Each rank keeps a device buffer (scratch) that its peers
 * map with CUDA IPC (or use as is, for ranks in the same process), with two
 * counters in front of it. Per call k, on the caller's stream:
 *
 *   WAIT peer.done >= k-1 (each peer)   peers finished reading my scratch
 *   copy sendbuff -> my scratch
 *   WRITE my.ready = k
 *   WAIT peer.ready >= k (each peer)    every rank's operand is in place
 *   recvbuff = scratch[0] OP scratch[1] OP ... (rank order; libweft-cuda.so)
 *   WRITE my.done = k
 *
 * Every rank reduces in the same order, so results are bitwise equal on
 * all ranks. Set up at communicator creation (collective); calls that do not
 * qualify take the staging path. Not yet run on a GPU.
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
// Whether op (device buffers, not in a group) can take the direct path.
int weft_cuda_direct_eligible(const weft_op_t *op);
// Queues op on chan's stream; op stays the caller's.
ncclResult_t weft_cuda_direct_queue(weft_op_t *op, weft_cuda_chan_t *chan);
void weft_cuda_direct_free(struct ncclComm *comm);

#endif
