/*
 * cuda_ipc.h — the IPC path for device buffers (WEFT_CUDA_IPC=1):
 * collectives and Send/Recv among the ranks of one host that run on the
 * GPU, with no host staging. Each rank keeps a device scratch that its
 * peers map with CUDA IPC (or use as is, for ranks in the same process):
 * counters, a mailbox pair per peer for Send/Recv, two slots for
 * collectives (cuda_ipc_state.h). A call is queued on the caller's
 * stream as rounds: a rank copies its next slice into its slot (mailbox)
 * and says ready; its peers read what they need from there (folding slots
 * in rank order with libweft-cuda.so's kernels, or copying) and say done;
 * a slot is refilled once its readers said done for it
 * (cuda_ipc_rounds.c, cuda_ipc_p2p.c).
 *
 * Set up at communicator creation (collective). In a group, the calls are
 * queued at ncclGroupEnd, collectives first, then Send/Recv, then the
 * group's staged batch. Every rank must then pass device buffers. Not yet
 * run on a GPU.
 */
#ifndef WEFT_CUDA_IPC_H
#define WEFT_CUDA_IPC_H

// Its entry points are the seam's (src/core/placement.h): creation, the
// choice, queueing, abort, the memory it holds and teardown.
#include "cuda_stream.h"
#include "engine.h"

#endif
