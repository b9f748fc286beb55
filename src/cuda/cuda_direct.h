/*
 * cuda_direct.h — the direct path for device buffers (WEFT_CUDA_DIRECT=1):
 * collectives and Send/Recv among the ranks of one host that run on the
 * GPU, with no host staging. Each rank keeps a device scratch that its
 * peers map with CUDA IPC (or use as is, for ranks in the same process):
 * counters, a mailbox pair per peer for Send/Recv, two slots for
 * collectives (cuda_direct_state.h). A call is queued on the caller's
 * stream as rounds: a rank copies its next slice into its slot (mailbox)
 * and says ready; its peers read what they need from there (folding slots
 * in rank order with libweft-cuda.so's kernels, or copying) and say done;
 * a slot is refilled once its readers said done for it
 * (cuda_direct_rounds.c, cuda_direct_p2p.c).
 *
 * Set up at communicator creation (collective). In a group, the calls are
 * queued at ncclGroupEnd, collectives first, then Send/Recv, then the
 * group's staged batch. Every rank must then pass device buffers. Not yet
 * run on a GPU.
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
// Whether op (device buffers) takes the direct path.
int weft_cuda_direct_eligible(const weft_op_t *op);
// Queues a collective on chan's stream; op stays the caller's.
ncclResult_t weft_cuda_direct_queue(weft_op_t *op, weft_cuda_chan_t *chan);
// Queues Send/Recv calls (one, or a group's, in call order) on their
// channels' streams, interleaved in rounds; the ops stay the caller's.
ncclResult_t weft_cuda_direct_queue_p2p(weft_op_t **ops, weft_cuda_chan_t **chans, int n);
// ncclCommAbort: every counter this rank's streams may wait on (in its own
// and its peers' scratch) is set past any call, so those streams run on;
// what the aborted calls leave in their buffers is undefined.
void weft_cuda_direct_release(struct ncclComm *comm);
// Device memory the direct path holds for comm (its scratch), 0 without it.
// Peers map the scratch, so it stays for the communicator's life.
size_t weft_cuda_direct_device_bytes(const struct ncclComm *comm);
// Teardown: waits (bounded) until peers stopped reading this rank's scratch,
// unless it was released.
void weft_cuda_direct_free(struct ncclComm *comm);

#endif
