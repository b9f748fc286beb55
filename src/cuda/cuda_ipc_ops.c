/*
 * cuda_ipc_ops.c — the stream operations the IPC path is made of
 * (cuda_ipc_state.h): counter writes and waits, copies, and their error
 * reports.
 */
#include "checks.h"
#include "cuda_ipc_state.h"

static ncclResult_t failed(const char *api, const char *call, weft_CUresult r) {
  WARN("%s (CUDA IPC path): %s failed: CUDA error %d (%s)", api, call, r, weft_cuda_error_text(r));
  return ncclUnhandledCudaError;
}

ncclResult_t weft_ipc_write(weft_CUstream s, weft_CUdeviceptr at, uint32_t k, const char *api) {
  // The default flags put a memory barrier before the write: a peer that
  // sees k sees everything this stream wrote before it.
  weft_CUresult r = weft_cuda_driver()->cuStreamWriteValue32(s, at, k, WEFT_CU_STREAM_WRITE_VALUE_DEFAULT);
  return r == WEFT_CUDA_SUCCESS ? ncclSuccess : failed(api, "cuStreamWriteValue32", r);
}

ncclResult_t weft_ipc_wait(weft_CUstream s, weft_CUdeviceptr at, uint32_t k, const char *api) {
  weft_CUresult r = weft_cuda_driver()->cuStreamWaitValue32(s, at, k, WEFT_CU_STREAM_WAIT_VALUE_GEQ);
  return r == WEFT_CUDA_SUCCESS ? ncclSuccess : failed(api, "cuStreamWaitValue32", r);
}

ncclResult_t weft_ipc_copy(weft_CUstream s, weft_CUdeviceptr dst, weft_CUdeviceptr src, size_t bytes,
                           const char *api) {
  weft_CUresult r = weft_cuda_driver()->cuMemcpyAsync(dst, src, bytes, s);
  return r == WEFT_CUDA_SUCCESS ? ncclSuccess : failed(api, "cuMemcpyAsync", r);
}

ncclResult_t weft_ipc_kernel_failed(const weft_cuda_ipc_t *d, int err, const char *api) {
  WARN("%s (CUDA IPC path): a kernel of libweft-cuda.so failed to launch: %s", api, d->kern->error_string(err));
  return ncclUnhandledCudaError;
}
