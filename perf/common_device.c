/*
 * common_device.c — the benchmarks' --device 1: every rank's buffers in GPU
 * memory (ncclMemAlloc with the rank's device current, which gives device
 * memory) and its calls on a CUDA stream, as nccl-tests runs them. The CUDA
 * driver is opened at run time (WEFT_CUDA_DRIVER_LIB or libcuda.so.1), so
 * the benchmarks build and run on machines without CUDA. Rank r uses device
 * r % (devices visible). Checks stage the data through host copies.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common_internal.h"

typedef int cu_result;
static struct {
  int ndev;
  cu_result (*init)(unsigned int);
  cu_result (*count)(int *);
  cu_result (*retain)(void **, int);
  cu_result (*set)(void *);
  cu_result (*stream_create)(void **, unsigned int);
  cu_result (*stream_destroy)(void *);
  cu_result (*stream_sync)(void *);
  cu_result (*htod)(unsigned long long, const void *, size_t);
  cu_result (*dtoh)(void *, unsigned long long, size_t);
} cu;

static void fail(const char *what, int r) {
  fprintf(stderr, "%s: --device 1: %s failed (CUDA error %d)\n", perf_prog, what, r);
  fflush(NULL);
  _exit(3);
}

void perf_dev_open(void) {
  const char *lib = getenv("WEFT_CUDA_DRIVER_LIB");
  void *h = dlopen(lib != NULL && lib[0] ? lib : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) fail(dlerror(), -1);
  struct {
    void **slot;
    const char *name;
  } syms[] = {{(void **)&cu.init, "cuInit"},
              {(void **)&cu.count, "cuDeviceGetCount"},
              {(void **)&cu.retain, "cuDevicePrimaryCtxRetain"},
              {(void **)&cu.set, "cuCtxSetCurrent"},
              {(void **)&cu.stream_create, "cuStreamCreate"},
              {(void **)&cu.stream_destroy, "cuStreamDestroy_v2"},
              {(void **)&cu.stream_sync, "cuStreamSynchronize"},
              {(void **)&cu.htod, "cuMemcpyHtoD_v2"},
              {(void **)&cu.dtoh, "cuMemcpyDtoH_v2"}};
  for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++)
    if ((*syms[i].slot = dlsym(h, syms[i].name)) == NULL) fail(syms[i].name, -1);
  int r = cu.init(0);
  if (r != 0) fail("cuInit", r);
  if ((r = cu.count(&cu.ndev)) != 0 || cu.ndev < 1) fail("cuDeviceGetCount", r);
}

void perf_dev_bind(int rank) {
  void *ctx = NULL;
  int r = cu.retain(&ctx, rank % cu.ndev);
  if (r != 0) fail("cuDevicePrimaryCtxRetain", r);
  if ((r = cu.set(ctx)) != 0) fail("cuCtxSetCurrent", r);
}

int perf_dev_of(int rank) { return rank % cu.ndev; }

cudaStream_t perf_dev_stream(void) {
  void *s = NULL;
  int r = cu.stream_create(&s, 1 /* CU_STREAM_NON_BLOCKING */);
  if (r != 0) fail("cuStreamCreate", r);
  return (cudaStream_t)s;
}

void perf_dev_stream_destroy(cudaStream_t s) { cu.stream_destroy((void *)s); }

void perf_dev_sync(cudaStream_t s) {
  int r = cu.stream_sync((void *)s);
  if (r != 0) fail("cuStreamSynchronize", r);
}

// A copy from pageable memory may return before its DMA has landed (up to
// 64 KiB, says the CUDA documentation), and the calls run on non-blocking
// streams that do not wait for it: wait for the legacy stream it went on.
// (Not the whole context: ranks that are threads share it, and another
// rank's stream may be waiting for this rank's next call.)
void perf_dev_put(int rank, void *dev, const void *host, size_t bytes) {
  perf_dev_bind(rank);  // the memory is only accessible from its own device
  int r = bytes ? cu.htod((unsigned long long)(uintptr_t)dev, host, bytes) : 0;
  if (r != 0) fail("cuMemcpyHtoD", r);
  if ((r = cu.stream_sync(NULL)) != 0) fail("cuStreamSynchronize(legacy stream)", r);
}

void perf_dev_get(int rank, void *host, const void *dev, size_t bytes) {
  perf_dev_bind(rank);
  int r = bytes ? cu.dtoh(host, (unsigned long long)(uintptr_t)dev, bytes) : 0;
  if (r != 0) fail("cuMemcpyDtoH", r);
}
