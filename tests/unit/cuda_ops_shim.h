/*
 * cuda_ops_shim.h — the device backend's functors (src/kernels/reduce_ops.cuh)
 * run on the host, for test_cuda_ops.c.
 *
 * cuda_ops_shim.cpp compiles the header as plain C++17 with the host
 * compiler and walks buffers with the very loops the kernels run
 * (reduce_span/map_span), one simulated thread after another, so the
 * arithmetic, the vector/head/tail split and the grid-stride indexing are
 * all checked on machines without a GPU. Same contracts as cuda_kernels.h;
 * `nthreads` is the simulated grid size (>= 1). Return 0, or -1 for an
 * invalid argument.
 */
#ifndef WEFT_TEST_CUDA_OPS_SHIM_H
#define WEFT_TEST_CUDA_OPS_SHIM_H

#include <stddef.h>
#include <stdint.h>

#include "reduce.h"

#ifdef __cplusplus
extern "C" {
#endif

// scalar != NULL: the ncclScalarDevice variant (scalar read from memory).
int weft_cuda_host_reduce(const weft_redop_t *op, const void *scalar, void *dst, const void *in,
                          const void *local, size_t count, int final, size_t nthreads);
int weft_cuda_host_reduce_first(const weft_redop_t *op, const void *scalar, void *dst,
                                const void *src, size_t count, int final, size_t nthreads);
int weft_cuda_host_copy(void *dst, const void *src, size_t bytes, size_t nthreads);

// The span plan for a launch over pointers a, b (and c unless NULL) of
// elements of `size` bytes: the scalar head and the 16-byte vector count;
// returns whether every pointer is element-aligned.
int weft_cuda_host_plan(size_t size, size_t count, const void *a, const void *b, const void *c,
                        size_t *head, size_t *nvec);

// The functors' converters: narrow-format bits to float, float to bits.
float weft_cuda_host_widen(ncclDataType_t dt, uint32_t bits);
uint32_t weft_cuda_host_narrow(ncclDataType_t dt, float f);

#ifdef __cplusplus
}
#endif

#endif
