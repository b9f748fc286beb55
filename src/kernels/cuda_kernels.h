/*
 * cuda_kernels.h — the C entry points of libweft-cuda.so, the device memory
 * backend's kernels (src/kernels/reduce_kernels.cu).
 *
 * libweft loads the module with dlopen and looks these names up with dlsym,
 * so a build without CUDA never links against it; the function-pointer
 * typedefs below are for that loader. The semantics are those of
 * weft_reduce / weft_reduce_first (src/arith/reduce.h) on device pointers, queued
 * on `stream` (asynchronous with respect to the host; the stream must belong
 * to the current device). dst may equal an operand but must not partly
 * overlap it. Every call returns 0 (cudaSuccess) or a cudaError_t value:
 * cudaErrorInvalidValue (1) for an unknown datatype or op, a NULL pointer
 * with count > 0, or a byte count that overflows; otherwise the launch's
 * error. count == 0 launches nothing and returns 0.
 */
#ifndef WEFT_CUDA_KERNELS_H
#define WEFT_CUDA_KERNELS_H

#include <stddef.h>

#include "nccl.h"    // cudaStream_t: CUDA's, or nccl.h's ABI-identical stand-in
#include "reduce.h"  // weft_redop_t

#ifdef __cplusplus
extern "C" {
#endif

// Bumped whenever a signature or a semantic below changes.
#define WEFT_CUDA_KERNELS_ABI 1
int weft_cuda_kernels_abi(void);

// dst[i] = in[i] OP pre(local[i]), then post(dst[i]) when `final`.
int weft_cuda_reduce(const weft_redop_t *op, void *dst, const void *in, const void *local,
                     size_t count, int final, cudaStream_t stream);

// dst[i] = pre(src[i]), then post when `final`. op == NULL: a copy of count
// bytes. Without prescale or division it is a copy of the bytes.
int weft_cuda_reduce_first(const weft_redop_t *op, void *dst, const void *src, size_t count,
                           int final, cudaStream_t stream);

// The same two with ncclScalarDevice's scalar: one element of op->dtype at
// `scalar` (device memory), read when the kernel runs. The local operand is
// always prescaled by it; op->prescale and op->scale_* are ignored.
int weft_cuda_reduce_dscalar(const weft_redop_t *op, const void *scalar, void *dst,
                             const void *in, const void *local, size_t count, int final,
                             cudaStream_t stream);
int weft_cuda_reduce_first_dscalar(const weft_redop_t *op, const void *scalar, void *dst,
                                   const void *src, size_t count, int final, cudaStream_t stream);

// Device-to-device copy of `bytes` (no overlap unless dst == src).
int weft_cuda_copy(void *dst, const void *src, size_t bytes, cudaStream_t stream);

// cudaGetErrorString for a value returned above.
const char *weft_cuda_error_string(int err);

typedef int (*weft_cuda_reduce_fn)(const weft_redop_t *, void *, const void *, const void *,
                                   size_t, int, cudaStream_t);
typedef int (*weft_cuda_reduce_first_fn)(const weft_redop_t *, void *, const void *, size_t, int,
                                         cudaStream_t);
typedef int (*weft_cuda_reduce_dscalar_fn)(const weft_redop_t *, const void *, void *,
                                           const void *, const void *, size_t, int, cudaStream_t);
typedef int (*weft_cuda_reduce_first_dscalar_fn)(const weft_redop_t *, const void *, void *,
                                                 const void *, size_t, int, cudaStream_t);
typedef int (*weft_cuda_copy_fn)(void *, const void *, size_t, cudaStream_t);

#ifdef __cplusplus
}
#endif

#endif
