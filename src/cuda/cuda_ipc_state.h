/*
 * cuda_ipc_state.h — what a communicator keeps for the IPC path
 * (cuda_ipc.h), shared by its set-up (cuda_ipc.c), its collectives
 * (cuda_ipc_rounds.c) and its Send/Recv (cuda_ipc_p2p.c), and the
 * stream operations all of them are made of (cuda_ipc_ops.c).
 *
 * Every rank's scratch is one device allocation with the same layout on
 * every rank (the ranks agree on the sizes at set-up):
 *
 *   collective counters   ready, done, reduced             256 bytes
 *   Send/Recv counters    ready[nranks], done[nranks]      rounded up to 256
 *   mailboxes             [nranks][2] x box_bytes          this rank's data for each peer
 *   collective slots      [2] x slot_bytes                 round k uses slot k % 2
 */
#ifndef WEFT_CUDA_IPC_STATE_H
#define WEFT_CUDA_IPC_STATE_H

#include <stdint.h>

#include "cuda_kernels_dl.h"
#include "cuda_rt.h"
#include "nccl.h"

#define WEFT_IPC_READY 0   // this rank's slot of round k is filled: ready = k
#define WEFT_IPC_DONE 64   // this rank read what it needed of round k: done = k
#define WEFT_IPC_REDUCED 128  // two-phase all-reduce: this rank's share of round k is in its slot
#define WEFT_IPC_P2P 256   // where the Send/Recv counters start

typedef struct weft_cuda_ipc {
  weft_CUcontext ctx;
  size_t slot_bytes;        // a collective round's slot
  size_t two_phase_min;     // all-reduces of at least this many bytes fold in two phases (0: never)
  size_t box_bytes;         // a Send/Recv mailbox slot
  size_t box_at, slot_at;   // offsets of the mailboxes and of the collective slots
  weft_CUdeviceptr mine;    // this rank's scratch
  weft_CUdeviceptr *peer;   // [nranks]: each rank's scratch as this process addresses it
  uint8_t *opened;          // [nranks]: mapped with cuIpcOpenMemHandle (to close)
  uint32_t rounds;          // collective rounds queued so far (the k of the last one)
  uint32_t *sent, *taken;   // [nranks]: Send/Recv rounds queued to / from each peer
  weft_CUstream side;       // a non-blocking stream of its own, to release waits on abort
  int released;             // ncclCommAbort released this rank's waits...
  int drained;              // ...and this rank's streams then ran out of work
  const weft_cuda_kernels_t *kern;
} weft_cuda_ipc_t;

static inline weft_CUdeviceptr weft_dptr(const void *p) { return (weft_CUdeviceptr)(uintptr_t)p; }

// Offsets in every rank's scratch.
static inline size_t weft_ipc_p2p_ready(int peer) { return WEFT_IPC_P2P + 4 * (size_t)peer; }
static inline size_t weft_ipc_p2p_done(int nranks, int peer) {
  return WEFT_IPC_P2P + 4 * ((size_t)nranks + (size_t)peer);
}
static inline size_t weft_ipc_box(const weft_cuda_ipc_t *d, int peer, uint32_t k) {
  return d->box_at + (2 * (size_t)peer + (k & 1)) * d->box_bytes;
}

// Stream work on `s` (the current context's); a failure WARNs "<api> (CUDA
// IPC path): <call> failed ..." and gives ncclUnhandledCudaError.
ncclResult_t weft_ipc_write(weft_CUstream s, weft_CUdeviceptr at, uint32_t k, const char *api);
ncclResult_t weft_ipc_wait(weft_CUstream s, weft_CUdeviceptr at, uint32_t k, const char *api);  // *at >= k, cyclic
ncclResult_t weft_ipc_copy(weft_CUstream s, weft_CUdeviceptr dst, weft_CUdeviceptr src, size_t bytes,
                           const char *api);
ncclResult_t weft_ipc_kernel_failed(const weft_cuda_ipc_t *d, int err, const char *api);

#endif
