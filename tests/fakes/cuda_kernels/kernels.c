/*
 * kernels.c — a stand-in libweft-cuda.so for the stand-in CUDA driver
 * (tests/fakes/cuda): the same C entry points (src/kernels/cuda_kernels.h),
 * queued on the fake stream as host functions that run weft's host
 * reductions on the fake's host views of device memory. It lets the IPC
 * path (src/cuda/cuda_ipc.c) run in tests without a GPU; the real kernels'
 * arithmetic is checked bit for bit against the same host reductions by
 * tests/unit/test_cuda_ops.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "cuda_kernels.h"
#include "dtype.h"

#define EXPORT __attribute__((visibility("default")))

typedef int (*launch_fn)(void *stream, void (*fn)(void *), void *arg);
typedef void *(*view_fn)(unsigned long long p, size_t bytes);

static launch_fn launch;
static view_fn view;
static atomic_int calls;

typedef struct {
  weft_redop_t op;
  void *dst;
  const void *in, *local;  // in == NULL: reduce_first of local
  size_t count;
  int final;
  const void *scalar;  // ncclScalarDevice: the prescale factor in device memory, read when the job runs
} job_t;

static void run(void *arg) {
  job_t *j = arg;
  size_t bytes = j->count * weft_dtype_size(j->op.dtype);
  void *dst = view((unsigned long long)(uintptr_t)j->dst, bytes);
  const void *local = view((unsigned long long)(uintptr_t)j->local, bytes);
  const void *in = j->in != NULL ? view((unsigned long long)(uintptr_t)j->in, bytes) : NULL;
  const void *scalar = j->scalar != NULL ? view((unsigned long long)(uintptr_t)j->scalar, weft_dtype_size(j->op.dtype)) : NULL;
  if (scalar != NULL) {
    weft_dtype_read_scalar(scalar, j->op.dtype, &j->op.scale_i, &j->op.scale_f);
    j->op.prescale = 1;
  }
  if (dst != NULL && local != NULL && (j->in == NULL || in != NULL) && (j->scalar == NULL || scalar != NULL)) {
    if (in == NULL) weft_reduce_first(&j->op, dst, local, j->count, j->final);
    else weft_reduce(&j->op, dst, in, local, j->count, j->final);
  }
  free(j);
}

static int bind(void) {
  if (launch != NULL) return 0;
  const char *lib = getenv("WEFT_CUDA_DRIVER_LIB");
  void *h = lib != NULL ? dlopen(lib, RTLD_NOW | RTLD_NOLOAD) : NULL;
  if (h == NULL) return 1;
  view = (view_fn)dlsym(h, "fake_cuda_host_view");
  launch = (launch_fn)dlsym(h, "cuLaunchHostFunc");
  return launch == NULL || view == NULL;
}

static int queue(const weft_redop_t *op, const void *scalar, void *dst, const void *in, const void *local,
                 size_t count, int final, cudaStream_t stream) {
  if (op == NULL || bind() != 0) return 1;  // cudaErrorInvalidValue
  if (count == 0) return 0;
  job_t *j = malloc(sizeof(*j));
  if (j == NULL) return 2;  // cudaErrorMemoryAllocation
  *j = (job_t){*op, dst, in, local, count, final, scalar};
  atomic_fetch_add(&calls, 1);
  int r = launch((void *)stream, run, j);
  if (r != 0) free(j);
  return r;
}

EXPORT int weft_cuda_kernels_abi(void) { return WEFT_CUDA_KERNELS_ABI; }

EXPORT int weft_cuda_reduce(const weft_redop_t *op, void *dst, const void *in, const void *local, size_t count,
                            int final, cudaStream_t stream) {
  return queue(op, NULL, dst, in, local, count, final, stream);
}

EXPORT int weft_cuda_reduce_first(const weft_redop_t *op, void *dst, const void *src, size_t count, int final,
                                  cudaStream_t stream) {
  return queue(op, NULL, dst, NULL, src, count, final, stream);
}

EXPORT int weft_cuda_reduce_first_dscalar(const weft_redop_t *op, const void *scalar, void *dst, const void *src,
                                          size_t count, int final, cudaStream_t stream) {
  return queue(op, scalar, dst, NULL, src, count, final, stream);
}

EXPORT const char *weft_cuda_error_string(int err) { return err == 0 ? "no error" : "stand-in kernel error"; }

// Tests: how many reductions were queued in this process.
EXPORT int fake_kernels_calls(void) { return atomic_load(&calls); }
