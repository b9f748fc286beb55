/*
 * cuda_kernels_dl.h — libweft-cuda.so (src/kernels/), the device reductions,
 * opened with dlopen the first time the IPC path needs it: the file
 * WEFT_CUDA_KERNELS_LIB names, else libweft-cuda.so beside libweft, else
 * the loader's search path. Its ABI version must match cuda_kernels.h.
 */
#ifndef WEFT_CUDA_KERNELS_DL_H
#define WEFT_CUDA_KERNELS_DL_H

#include "cuda_kernels.h"

typedef struct {
  weft_cuda_reduce_fn reduce;
  weft_cuda_reduce_first_fn reduce_first;
  weft_cuda_reduce_first_dscalar_fn reduce_first_dscalar;
  const char *(*error_string)(int err);
} weft_cuda_kernels_t;

// The module's entry points, or NULL when it cannot be used (said once, INFO).
const weft_cuda_kernels_t *weft_cuda_kernels(void);

#endif
