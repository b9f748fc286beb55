/*
 * cuda_direct_state.h — what a communicator keeps for the direct path
 * (cuda_direct.h), shared by its set-up (cuda_direct.c) and its calls
 * (cuda_direct_rounds.c).
 *
 * Every rank's scratch is one device allocation: the counters, then two
 * slots of slot_bytes. Round k uses slot k % 2 on every rank, so a rank may
 * fill one slot while its peers still read the other.
 */
#ifndef WEFT_CUDA_DIRECT_STATE_H
#define WEFT_CUDA_DIRECT_STATE_H

#include <stdint.h>

#include "cuda_kernels_dl.h"
#include "cuda_rt.h"

#define WEFT_DIRECT_COUNTERS 256  // bytes before the slots
#define WEFT_DIRECT_READY 0       // this rank's slot of round k is filled: ready = k
#define WEFT_DIRECT_DONE 64       // this rank read what it needed of round k: done = k

typedef struct weft_cuda_direct {
  weft_CUcontext ctx;
  size_t slot_bytes;        // the same on every rank: the smallest WEFT_CUDA_DIRECT_SCRATCH_BYTES
  weft_CUdeviceptr mine;    // this rank's scratch
  weft_CUdeviceptr *peer;   // [nranks]: each rank's scratch as this process addresses it
  uint8_t *opened;          // [nranks]: mapped with cuIpcOpenMemHandle (to close)
  uint32_t rounds;          // rounds queued so far (the k of the last one)
  const weft_cuda_kernels_t *kern;
} weft_cuda_direct_t;

#endif
