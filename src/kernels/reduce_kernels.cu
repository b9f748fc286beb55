/*
 * reduce_kernels.cu — the device memory backend's kernels and their C entry
 * points (cuda_kernels.h), built into libweft-cuda.so by nvcc.
 *
 * The arithmetic and the buffer walk are the shared functors of
 * reduce_ops.cuh; this file only instantiates them as grid-stride kernels,
 * one per (datatype, op) for reductions and one per datatype for the first
 * operand, plus a byte copy. The host plans each launch (plan_span): 16-byte
 * vector loads and stores when every pointer has the same offset modulo 16,
 * a scalar head and tail around them, all-scalar otherwise. A device-resident
 * PreMulSum scalar (ncclScalarDevice) is a pointer argument each thread reads
 * once when the kernel runs, so the value at launch-execution time counts,
 * as in NCCL.
 */
#include <cuda_runtime.h>

#include "cuda_kernels.h"
#include "reduce_ops.cuh"

#define WEFT_CUDA_API extern "C" __attribute__((visibility("default")))

namespace {

using namespace weft_cuda;

constexpr unsigned kThreads = 256;
constexpr size_t kMaxBlocks = 4096;  // grid-stride beyond this

template <class Fn>
__global__ void __launch_bounds__(kThreads)
    reduce_kernel(Fn fn, void *dst, const void *in, const void *local, Span s, const void *dscale) {
  if (dscale != nullptr) fn.scale_from(dscale);
  size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  reduce_span(fn, dst, in, local, s, tid, (size_t)gridDim.x * blockDim.x);
}

template <class Fn>
__global__ void __launch_bounds__(kThreads)
    first_kernel(Fn fn, void *dst, const void *src, Span s, const void *dscale) {
  if (dscale != nullptr) fn.scale_from(dscale);
  size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  map_span(FirstOf<Fn>{fn}, dst, src, s, tid, (size_t)gridDim.x * blockDim.x);
}

__global__ void __launch_bounds__(kThreads) copy_kernel(void *dst, const void *src, Span s) {
  size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  map_span(Identity<unsigned char>{}, dst, src, s, tid, (size_t)gridDim.x * blockDim.x);
}

unsigned blocks_for(const Span &s, size_t size) {
  size_t items = span_scalar_items(s, size);
  if (s.nvec > items) items = s.nvec;
  size_t b = (items + kThreads - 1) / kThreads;
  if (b > kMaxBlocks) b = kMaxBlocks;
  return b == 0 ? 1u : (unsigned)b;
}

template <class Fn>
struct LaunchReduce {
  static int run(const weft_redop_t *op, void *dst, const void *in, const void *local,
                 size_t count, int final, const void *dscale, cudaStream_t stream) {
    typedef typename Fn::T T;
    Fn fn = Fn::make(op, final);
    const void *ptrs[3] = {dst, in, local};
    Span s = plan_span(sizeof(T), count, ptrs, 3);
    reduce_kernel<Fn><<<blocks_for(s, sizeof(T)), kThreads, 0, stream>>>(fn, dst, in, local, s,
                                                                           dscale);
    return (int)cudaGetLastError();
  }
};

template <class Ty>
struct LaunchFirst {
  static int run(const weft_redop_t *op, void *dst, const void *src, size_t count, int final,
                 const void *dscale, cudaStream_t stream) {
    typedef ReduceFn<Ty, WEFT_RED_SUM> Fn;  // the op kind plays no part
    typedef typename Fn::T T;
    Fn fn = Fn::make(op, final);
    const void *ptrs[2] = {dst, src};
    Span s = plan_span(sizeof(T), count, ptrs, 2);
    first_kernel<Fn><<<blocks_for(s, sizeof(T)), kThreads, 0, stream>>>(fn, dst, src, s, dscale);
    return (int)cudaGetLastError();
  }
};

int copy_bytes(void *dst, const void *src, size_t bytes, cudaStream_t stream) {
  if (bytes == 0 || dst == src) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return cudaErrorInvalidValue;
  const void *ptrs[2] = {dst, src};
  Span s = plan_span(1, bytes, ptrs, 2);
  copy_kernel<<<blocks_for(s, 1), kThreads, 0, stream>>>(dst, src, s);
  return (int)cudaGetLastError();
}


int do_reduce(const weft_redop_t *op, void *dst, const void *in, const void *local, size_t count,
           int final, const void *dscale, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (!op_ok(op, count) || dst == nullptr || in == nullptr || local == nullptr)
    return cudaErrorInvalidValue;
  return with_fn<LaunchReduce>(raw_enum(&op->dtype), raw_enum(&op->kind),
                               (int)cudaErrorInvalidValue, op, dst, in, local, count, final, dscale,
                               stream);
}

int do_first(const weft_redop_t *op, void *dst, const void *src, size_t count, int final,
                 const void *dscale, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (op == nullptr && dscale == nullptr) return copy_bytes(dst, src, count, stream);
  if (!op_ok(op, count) || dst == nullptr || src == nullptr) return cudaErrorInvalidValue;
  size_t bytes = count * dtype_size(raw_enum(&op->dtype));
  if (dscale == nullptr && !op->prescale && !(final && op->postdiv > 1))
    return copy_bytes(dst, src, bytes, stream);
  return with_type<LaunchFirst>(raw_enum(&op->dtype), (int)cudaErrorInvalidValue, op, dst, src,
                                count, final, dscale, stream);
}

}  // namespace

WEFT_CUDA_API int weft_cuda_kernels_abi(void) { return WEFT_CUDA_KERNELS_ABI; }

WEFT_CUDA_API int weft_cuda_reduce(const weft_redop_t *op, void *dst, const void *in,
                                   const void *local, size_t count, int final,
                                   cudaStream_t stream) {
  return do_reduce(op, dst, in, local, count, final, nullptr, stream);
}

WEFT_CUDA_API int weft_cuda_reduce_first(const weft_redop_t *op, void *dst, const void *src,
                                         size_t count, int final, cudaStream_t stream) {
  return do_first(op, dst, src, count, final, nullptr, stream);
}

WEFT_CUDA_API int weft_cuda_reduce_dscalar(const weft_redop_t *op, const void *scalar, void *dst,
                                           const void *in, const void *local, size_t count,
                                           int final, cudaStream_t stream) {
  if (scalar == nullptr && count > 0) return cudaErrorInvalidValue;
  return do_reduce(op, dst, in, local, count, final, scalar, stream);
}

WEFT_CUDA_API int weft_cuda_reduce_first_dscalar(const weft_redop_t *op, const void *scalar,
                                                 void *dst, const void *src, size_t count,
                                                 int final, cudaStream_t stream) {
  if (count > 0 && (scalar == nullptr || op == nullptr)) return cudaErrorInvalidValue;
  return do_first(op, dst, src, count, final, scalar, stream);
}

WEFT_CUDA_API int weft_cuda_copy(void *dst, const void *src, size_t bytes, cudaStream_t stream) {
  return copy_bytes(dst, src, bytes, stream);
}

WEFT_CUDA_API const char *weft_cuda_error_string(int err) {
  return cudaGetErrorString((cudaError_t)err);
}
