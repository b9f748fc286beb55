/*
 * cuda_comm.c — a communicator's device, taken at creation: the seam's
 * weft_cuda_comm_bind (src/core/placement.h), so boot names no CUDA type.
 */
#include "comm.h"
#include "cuda_rt.h"
#include "cuda_staging.h"

void weft_cuda_comm_bind(struct ncclComm *comm) {
  comm->cuda_dev = weft_cuda_current_device();  // as NCCL: the caller's current device (-1: none)
  comm->cuda_ctx = comm->cuda_dev >= 0 ? weft_cuda_current_context() : NULL;
  if (comm->cuda_dev >= 0) weft_cuda_reserve_init();  // pinned staging, before any rank can queue work
}
