/*
 * cuda_driver.h — the CUDA driver as a test program sees it: the calls a
 * framework makes around NCCL (contexts, streams, device memory, copies),
 * looked up with dlsym in the same library libweft opens, so one test runs
 * against tests/fakes/cuda (WEFT_CUDA_DRIVER_LIB, no GPU needed) or against
 * the real libcuda.so.1 on a GPU machine. Types are written from cuda.h.
 */
#ifndef WEFT_TEST_CUDA_DRIVER_H
#define WEFT_TEST_CUDA_DRIVER_H

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef int tcu_result;
typedef unsigned long long tcu_ptr;
typedef void *tcu_ctx;
typedef void *tcu_stream;
typedef void (*tcu_host_fn)(void *);

typedef struct {
  void *lib;
  tcu_result (*init)(unsigned int);
  tcu_result (*device_count)(int *);
  tcu_result (*primary_retain)(tcu_ctx *, int);
  tcu_result (*ctx_set)(tcu_ctx);
  tcu_result (*stream_create)(tcu_stream *, unsigned int);
  tcu_result (*stream_destroy)(tcu_stream);
  tcu_result (*stream_sync)(tcu_stream);
  tcu_result (*stream_query)(tcu_stream);
  tcu_result (*alloc)(tcu_ptr *, size_t);
  tcu_result (*free)(tcu_ptr);
  tcu_result (*alloc_managed)(tcu_ptr *, size_t, unsigned int);
  tcu_result (*htod)(tcu_ptr, const void *, size_t);
  tcu_result (*dtoh)(void *, tcu_ptr, size_t);
  tcu_result (*htod_async)(tcu_ptr, const void *, size_t, tcu_stream);
  tcu_result (*dtoh_async)(void *, tcu_ptr, size_t, tcu_stream);
  tcu_result (*host_register)(void *, size_t, unsigned int);
  tcu_result (*host_alloc)(void **, size_t, unsigned int);
  tcu_result (*host_free)(void *);
  tcu_result (*launch_host_fn)(tcu_stream, tcu_host_fn, void *);
  tcu_result (*begin_capture)(tcu_stream, int);
  tcu_result (*end_capture)(tcu_stream, void **);
  tcu_result (*graph_destroy)(void *);
} tcu_t;

static char tcu_fake_path[512];

// WEFT_TEST_REAL_CUDA=1: the real libcuda.so.1, on a GPU machine.
static inline int tcu_real(void) {
  const char *real = getenv("WEFT_TEST_REAL_CUDA");
  return real != NULL && real[0] == '1';
}

// Points libweft (WEFT_CUDA_DRIVER_LIB) and tcu_open at the stand-in driver.
static inline void tcu_use_fake_driver(void) {
  const char *b = getenv("WEFT_BUILD_DIR");
  snprintf(tcu_fake_path, sizeof(tcu_fake_path), "%s/tests/lib/libweft-fake-cuda.so", b && b[0] ? b : "build");
  setenv("WEFT_CUDA_DRIVER_LIB", tcu_fake_path, 1);
}

// Opens the driver libweft will open (its handle stays open for the life of
// the process) and initialises it; 0 on success.
static inline int tcu_open(tcu_t *t) {
  memset(t, 0, sizeof(*t));
  const char *lib = getenv("WEFT_CUDA_DRIVER_LIB");
  t->lib = dlopen(lib != NULL && lib[0] ? lib : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (t->lib == NULL) return -1;
  struct {
    void **slot;
    const char *name;
  } syms[] = {
      {(void **)&t->init, "cuInit"},
      {(void **)&t->device_count, "cuDeviceGetCount"},
      {(void **)&t->primary_retain, "cuDevicePrimaryCtxRetain"},
      {(void **)&t->ctx_set, "cuCtxSetCurrent"},
      {(void **)&t->stream_create, "cuStreamCreate"},
      {(void **)&t->stream_destroy, "cuStreamDestroy_v2"},
      {(void **)&t->stream_sync, "cuStreamSynchronize"},
      {(void **)&t->stream_query, "cuStreamQuery"},
      {(void **)&t->alloc, "cuMemAlloc_v2"},
      {(void **)&t->free, "cuMemFree_v2"},
      {(void **)&t->alloc_managed, "cuMemAllocManaged"},
      {(void **)&t->htod, "cuMemcpyHtoD_v2"},
      {(void **)&t->dtoh, "cuMemcpyDtoH_v2"},
      {(void **)&t->htod_async, "cuMemcpyHtoDAsync_v2"},
      {(void **)&t->dtoh_async, "cuMemcpyDtoHAsync_v2"},
      {(void **)&t->host_register, "cuMemHostRegister_v2"},
      {(void **)&t->host_alloc, "cuMemHostAlloc"},
      {(void **)&t->host_free, "cuMemFreeHost"},
      {(void **)&t->launch_host_fn, "cuLaunchHostFunc"},
      {(void **)&t->begin_capture, "cuStreamBeginCapture_v2"},
      {(void **)&t->end_capture, "cuStreamEndCapture"},
      {(void **)&t->graph_destroy, "cuGraphDestroy"},
  };
  for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
    *syms[i].slot = dlsym(t->lib, syms[i].name);
    if (*syms[i].slot == NULL) {
      fprintf(stderr, "cuda_driver.h: the driver lacks %s\n", syms[i].name);
      return -1;
    }
  }
  return t->init(0);
}

// CUDA devices the driver sees, counted in a child process: a process that
// initialised CUDA must not fork, and test processes fork their ranks.
static inline int tcu_device_count(void) {
  pid_t pid = fork();
  if (pid == 0) {
    tcu_t t;
    int n = 0;
    _exit(tcu_open(&t) == 0 && t.device_count(&n) == 0 ? (n > 100 ? 100 : n) : 0);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return 0;
  return WEXITSTATUS(status);
}

// Makes device `dev`'s primary context current on this thread; 0 on success.
static inline int tcu_use_device(const tcu_t *t, int dev) {
  tcu_ctx ctx = NULL;
  if (t->primary_retain(&ctx, dev) != 0) return -1;
  return t->ctx_set(ctx);
}

static inline void *tcu_alloc(const tcu_t *t, size_t bytes) {
  tcu_ptr p = 0;
  return t->alloc(&p, bytes) == 0 ? (void *)(uintptr_t)p : NULL;
}

static inline tcu_ptr tcu_p(const void *p) { return (tcu_ptr)(uintptr_t)p; }

#endif
