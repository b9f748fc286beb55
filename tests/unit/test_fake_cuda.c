/*
 * test_fake_cuda.c — the stand-in CUDA driver (tests/fakes/cuda/,
 * build/tests/lib/libweft-fake-cuda.so) behaves as cuda.h says, so that the
 * tests of the device engine and ncclMemAlloc can trust it: the cuInit gate
 * and contexts; stream FIFO order; stream memory operations that hold a
 * stream until another thread stores a value (with the cyclic GEQ across the
 * 2^32 wrap, EQ, AND, NOR); events and cuStreamWaitEvent between streams;
 * device memory that a host memcpy cannot touch (a forked child dies of
 * SIGSEGV); cuMemFree and reuse; graph capture that records instead of
 * running; VMM create/reserve/map/access/copy, and export -> fork -> import;
 * legacy IPC across fork; sticky errors; FAKE_CUDA_FAIL; destroyed streams.
 *
 * The fake is opened with dlopen in each test's process; the types and
 * values below are transcribed from cuda.h independently of the fake's own.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemHandle;
typedef void *CUcontext, *CUstream, *CUevent, *CUgraph;
typedef struct {
  int type, id;
} CUmemLocation;
typedef struct {
  int type, requestedHandleTypes;
  CUmemLocation location;
  void *win32HandleMetaData;
  unsigned char compressionType, gpuDirectRDMACapable;
  unsigned short usage;
  unsigned char reserved[4];
} CUmemAllocationProp;
typedef struct {
  CUmemLocation location;
  int flags;
} CUmemAccessDesc;
typedef struct {
  char reserved[64];
} CUipcMemHandle;

enum {
  OK = 0, E_INVALID_VALUE = 1, E_OUT_OF_MEMORY = 2, E_NOT_INITIALIZED = 3, E_INVALID_CONTEXT = 201,
  E_INVALID_HANDLE = 400, E_ILLEGAL_STATE = 401, E_NOT_READY = 600, E_ILLEGAL_ADDRESS = 700,
  E_NOT_PERMITTED = 800, E_CAPTURE_UNSUPPORTED = 900, E_CAPTURE_INVALIDATED = 901,
};
enum { WAIT_GEQ = 0, WAIT_EQ = 1, WAIT_AND = 2, WAIT_NOR = 3 };
enum { CAPTURE_NONE = 0, CAPTURE_ACTIVE = 1, MODE_GLOBAL = 0 };
enum { ATTR_CONTEXT = 1, ATTR_MEMORY_TYPE = 2, ATTR_DEVICE_ORDINAL = 9, MEMTYPE_HOST = 1, MEMTYPE_DEVICE = 2 };
enum { DEV_ATTR_CC_MAJOR = 75, DEV_ATTR_CC_MINOR = 76, DEV_ATTR_WAIT_NOR = 123, DEV_ATTR_UVA = 41 };
enum { HOSTALLOC_DEVICEMAP = 2, POSIX_FD = 1, PINNED = 1, LOC_DEVICE = 1, PROT_RW = 3, GRAN_MIN = 0 };

static struct {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuGetErrorString)(CUresult, const char **);
  CUresult (*cuGetErrorName)(CUresult, const char **);
  CUresult (*cuDeviceGetCount)(int *);
  CUresult (*cuDeviceGetAttribute)(int *, int, int);
  CUresult (*cuDeviceCanAccessPeer)(int *, int, int);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, int);
  CUresult (*cuDevicePrimaryCtxRelease_v2)(int);
  CUresult (*cuCtxGetCurrent)(CUcontext *);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxPushCurrent_v2)(CUcontext);
  CUresult (*cuCtxPopCurrent_v2)(CUcontext *);
  CUresult (*cuCtxGetDevice)(int *);
  CUresult (*cuCtxSynchronize)(void);
  CUresult (*cuMemAlloc_v2)(CUdeviceptr *, size_t);
  CUresult (*cuMemFree_v2)(CUdeviceptr);
  CUresult (*cuMemHostAlloc)(void **, size_t, unsigned);
  CUresult (*cuMemFreeHost)(void *);
  CUresult (*cuMemHostGetDevicePointer_v2)(CUdeviceptr *, void *, unsigned);
  CUresult (*cuPointerGetAttribute)(void *, int, CUdeviceptr);
  CUresult (*cuMemGetAddressRange_v2)(CUdeviceptr *, size_t *, CUdeviceptr);
  CUresult (*cuMemcpyHtoD_v2)(CUdeviceptr, const void *, size_t);
  CUresult (*cuMemcpyDtoH_v2)(void *, CUdeviceptr, size_t);
  CUresult (*cuMemsetD8_v2)(CUdeviceptr, unsigned char, size_t);
  CUresult (*cuStreamCreate)(CUstream *, unsigned);
  CUresult (*cuStreamDestroy_v2)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuStreamQuery)(CUstream);
  CUresult (*cuStreamGetCtx)(CUstream, CUcontext *);
  CUresult (*cuMemcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemcpyHtoDAsync_v2)(CUdeviceptr, const void *, size_t, CUstream);
  CUresult (*cuMemcpyDtoHAsync_v2)(void *, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*cuStreamWriteValue32_v2)(CUstream, CUdeviceptr, uint32_t, unsigned);
  CUresult (*cuStreamWaitValue32_v2)(CUstream, CUdeviceptr, uint32_t, unsigned);
  CUresult (*cuLaunchHostFunc)(CUstream, void (*)(void *), void *);
  CUresult (*cuEventCreate)(CUevent *, unsigned);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventQuery)(CUevent);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
  CUresult (*cuEventDestroy_v2)(CUevent);
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned);
  CUresult (*cuStreamBeginCapture_v2)(CUstream, int);
  CUresult (*cuStreamIsCapturing)(CUstream, int *);
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph *);
  CUresult (*cuGraphGetNodes)(CUgraph, void *, size_t *);
  CUresult (*cuGraphDestroy)(CUgraph);
  CUresult (*cuMemGetAllocationGranularity)(size_t *, const CUmemAllocationProp *, int);
  CUresult (*cuMemCreate)(CUmemHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
  CUresult (*cuMemRelease)(CUmemHandle);
  CUresult (*cuMemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
  CUresult (*cuMemAddressFree)(CUdeviceptr, size_t);
  CUresult (*cuMemMap)(CUdeviceptr, size_t, size_t, CUmemHandle, unsigned long long);
  CUresult (*cuMemUnmap)(CUdeviceptr, size_t);
  CUresult (*cuMemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
  CUresult (*cuMemExportToShareableHandle)(void *, CUmemHandle, int, unsigned long long);
  CUresult (*cuMemImportFromShareableHandle)(CUmemHandle *, void *, int);
  CUresult (*cuMemRetainAllocationHandle)(CUmemHandle *, void *);
  CUresult (*cuMemGetAllocationPropertiesFromHandle)(CUmemAllocationProp *, CUmemHandle);
  CUresult (*cuIpcGetMemHandle)(CUipcMemHandle *, CUdeviceptr);
  CUresult (*cuIpcOpenMemHandle_v2)(CUdeviceptr *, CUipcMemHandle, unsigned);
  CUresult (*cuIpcCloseMemHandle)(CUdeviceptr);
  int (*fake_cuda_worker_threads)(void);
} cu;

static void *lib;

static void *sym(const char *name) {
  void *f = dlsym(lib, name);
  cr_assert_not_null(f, "the fake driver does not export %s", name);
  return f;
}
#define LOAD(f) cu.f = (__typeof__(cu.f))sym(#f)

// Each test runs in its own process: open the fake there, without cuInit.
static void open_fake(void) {
  const char *b = getenv("WEFT_BUILD_DIR");
  char path[512];
  snprintf(path, sizeof(path), "%s/tests/lib/libweft-fake-cuda.so", b && b[0] ? b : "build");
  lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  cr_assert_not_null(lib, "dlopen %s: %s", path, dlerror());
  LOAD(cuInit), LOAD(cuGetErrorString), LOAD(cuGetErrorName), LOAD(cuDeviceGetCount), LOAD(cuDeviceGetAttribute);
  LOAD(cuDeviceCanAccessPeer), LOAD(cuDevicePrimaryCtxRetain), LOAD(cuDevicePrimaryCtxRelease_v2);
  LOAD(cuCtxGetCurrent), LOAD(cuCtxSetCurrent), LOAD(cuCtxPushCurrent_v2), LOAD(cuCtxPopCurrent_v2);
  LOAD(cuCtxGetDevice), LOAD(cuCtxSynchronize), LOAD(cuMemAlloc_v2), LOAD(cuMemFree_v2), LOAD(cuMemHostAlloc);
  LOAD(cuMemFreeHost), LOAD(cuMemHostGetDevicePointer_v2), LOAD(cuPointerGetAttribute), LOAD(cuMemGetAddressRange_v2);
  LOAD(cuMemcpyHtoD_v2), LOAD(cuMemcpyDtoH_v2), LOAD(cuMemsetD8_v2), LOAD(cuStreamCreate), LOAD(cuStreamDestroy_v2);
  LOAD(cuStreamSynchronize), LOAD(cuStreamQuery), LOAD(cuStreamGetCtx), LOAD(cuMemcpyAsync), LOAD(cuMemcpyHtoDAsync_v2);
  LOAD(cuMemcpyDtoHAsync_v2), LOAD(cuMemsetD8Async), LOAD(cuStreamWriteValue32_v2), LOAD(cuStreamWaitValue32_v2);
  LOAD(cuLaunchHostFunc), LOAD(cuEventCreate), LOAD(cuEventRecord), LOAD(cuEventQuery), LOAD(cuEventSynchronize);
  LOAD(cuEventElapsedTime), LOAD(cuEventDestroy_v2), LOAD(cuStreamWaitEvent), LOAD(cuStreamBeginCapture_v2);
  LOAD(cuStreamIsCapturing), LOAD(cuStreamEndCapture), LOAD(cuGraphGetNodes), LOAD(cuGraphDestroy);
  LOAD(cuMemGetAllocationGranularity), LOAD(cuMemCreate), LOAD(cuMemRelease), LOAD(cuMemAddressReserve);
  LOAD(cuMemAddressFree), LOAD(cuMemMap), LOAD(cuMemUnmap), LOAD(cuMemSetAccess), LOAD(cuMemExportToShareableHandle);
  LOAD(cuMemImportFromShareableHandle), LOAD(cuMemRetainAllocationHandle), LOAD(cuMemGetAllocationPropertiesFromHandle);
  LOAD(cuIpcGetMemHandle), LOAD(cuIpcOpenMemHandle_v2), LOAD(cuIpcCloseMemHandle), LOAD(fake_cuda_worker_threads);
}

#define CU_OK(call)                                                                      \
  do {                                                                                   \
    CUresult r_ = (call);                                                                \
    cr_assert_eq(r_, OK, "%s: %d (%s)", #call, r_, error_name(r_));                      \
  } while (0)
#define CU_IS(call, want)                                                                \
  do {                                                                                   \
    CUresult r_ = (call);                                                                \
    cr_assert_eq(r_, (want), "%s: %d (%s), expected %d", #call, r_, error_name(r_), (int)(want)); \
  } while (0)

static const char *error_name(CUresult r) {
  const char *s = NULL;
  return cu.cuGetErrorName != NULL && cu.cuGetErrorName(r, &s) == OK && s != NULL ? s : "?";
}

// cuInit, device 0's primary context made current.
static CUcontext start(void) {
  CUcontext c = NULL;
  CU_OK(cu.cuInit(0));
  CU_OK(cu.cuDevicePrimaryCtxRetain(&c, 0));
  CU_OK(cu.cuCtxPushCurrent_v2(c));
  return c;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static int thread_count(void) {
  DIR *d = opendir("/proc/self/task");
  int n = 0;
  if (d == NULL) return -1;
  while (readdir(d) != NULL) n++;
  closedir(d);
  return n;
}

TestSuite(fake_cuda, .init = open_fake, .timeout = 10);

Test(fake_cuda, init_gate_devices_and_contexts) {
  int n = 0, v = -1;
  CUcontext c = NULL, c1 = NULL, got = NULL;
  CU_IS(cu.cuDeviceGetCount(&n), E_NOT_INITIALIZED);
  CU_IS(cu.cuMemAlloc_v2(&(CUdeviceptr){0}, 64), E_NOT_INITIALIZED);
  CU_OK(cu.cuInit(0));
  CU_OK(cu.cuDeviceGetCount(&n));
  cr_expect_eq(n, 2);
  CU_OK(cu.cuDeviceGetAttribute(&v, DEV_ATTR_CC_MAJOR, 1));
  cr_expect_eq(v, 9);
  CU_OK(cu.cuDeviceGetAttribute(&v, DEV_ATTR_CC_MINOR, 1));
  cr_expect_eq(v, 0);
  CU_OK(cu.cuDeviceGetAttribute(&v, DEV_ATTR_WAIT_NOR, 0));
  cr_expect_eq(v, 1);
  CU_OK(cu.cuDeviceGetAttribute(&v, DEV_ATTR_UVA, 0));
  cr_expect_eq(v, 1);
  CU_OK(cu.cuDeviceCanAccessPeer(&v, 0, 1));
  cr_expect_eq(v, 1);
  CU_IS(cu.cuDeviceCanAccessPeer(&v, 0, 2), 101);  // CUDA_ERROR_INVALID_DEVICE
  CU_OK(cu.cuCtxGetCurrent(&got));
  cr_expect_null(got);
  CU_IS(cu.cuCtxGetDevice(&v), E_INVALID_CONTEXT);
  CU_IS(cu.cuStreamGetCtx(NULL, &got), E_INVALID_CONTEXT);
  CU_IS(cu.cuCtxSynchronize(), E_INVALID_CONTEXT);
  CU_OK(cu.cuDevicePrimaryCtxRetain(&c, 0));
  CU_OK(cu.cuDevicePrimaryCtxRetain(&c1, 1));
  CU_OK(cu.cuDevicePrimaryCtxRetain(&got, 0));
  cr_expect_eq(got, c, "one primary context per device");
  CU_OK(cu.cuCtxPushCurrent_v2(c));
  CU_OK(cu.cuCtxPushCurrent_v2(c1));
  CU_OK(cu.cuCtxGetDevice(&v));
  cr_expect_eq(v, 1);
  CU_OK(cu.cuStreamGetCtx((CUstream)0x1, &got));  // CU_STREAM_LEGACY: the current context
  cr_expect_eq(got, c1);
  CU_OK(cu.cuCtxPopCurrent_v2(&got));
  cr_expect_eq(got, c1);
  CU_OK(cu.cuCtxGetDevice(&v));
  cr_expect_eq(v, 0);
  CU_OK(cu.cuCtxSetCurrent(NULL));  // pops
  CU_IS(cu.cuCtxPopCurrent_v2(&got), E_INVALID_CONTEXT);
  CU_IS(cu.cuCtxSynchronize(), E_INVALID_CONTEXT);
  const char *s = NULL;
  CU_OK(cu.cuGetErrorString(E_ILLEGAL_ADDRESS, &s));
  cr_expect_not_null(s);
  CU_OK(cu.cuGetErrorName(E_CAPTURE_UNSUPPORTED, &s));
  cr_expect_str_eq(s, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED");
  CU_OK(cu.cuDevicePrimaryCtxRelease_v2(0));
  CU_OK(cu.cuDevicePrimaryCtxRelease_v2(0));
  CU_IS(cu.cuDevicePrimaryCtxRelease_v2(0), E_INVALID_CONTEXT);
}

// ---- Streams ----

// Host functions that first wait for a gate the test opens, so that what the
// test sees before opening it does not depend on scheduling.
static void wait_for_gate(int *gate) {
  while (!__atomic_load_n(gate, __ATOMIC_ACQUIRE)) sleep_ms(1);
}

typedef struct {
  int gate;
  unsigned char *buf;
  size_t n;
  unsigned char value;
} fill_arg;

static void sleep_then_fill(void *p) {
  fill_arg *a = p;
  wait_for_gate(&a->gate);
  sleep_ms(20);
  memset(a->buf, a->value, a->n);
}

Test(fake_cuda, a_stream_runs_its_operations_in_order) {
  start();
  enum { N = 4096 };
  CUstream s;
  CUdeviceptr dev;
  unsigned char *src = malloc(N), *dst = malloc(N);
  memset(src, 1, N), memset(dst, 0, N);
  CU_OK(cu.cuStreamCreate(&s, 0));
  CU_OK(cu.cuMemAlloc_v2(&dev, N));
  fill_arg a = {0, src, N, 0x5c};
  CU_OK(cu.cuLaunchHostFunc(s, sleep_then_fill, &a));
  CU_OK(cu.cuMemcpyHtoDAsync_v2(dev, src, N, s));  // must see the host function's bytes
  CU_OK(cu.cuMemcpyDtoHAsync_v2(dst, dev, N, s));
  CU_IS(cu.cuStreamQuery(s), E_NOT_READY);
  __atomic_store_n(&a.gate, 1, __ATOMIC_RELEASE);
  CU_OK(cu.cuStreamSynchronize(s));
  CU_OK(cu.cuStreamQuery(s));
  for (int i = 0; i < N; i++)
    cr_assert_eq(dst[i], 0x5c, "byte %d: %#x: the copy ran before the host function", i, dst[i]);
  CU_OK(cu.cuStreamDestroy_v2(s));
  CU_OK(cu.cuMemFree_v2(dev));
  free(src), free(dst);
}

static void set_flag(void *p) { __atomic_store_n((int *)p, 1, __ATOMIC_RELEASE); }

static void gate_fn(void *p) { wait_for_gate(p); }

typedef struct {
  uint32_t *word;
  uint32_t value;
  int delay_ms;
} store_arg;

static void *store_later(void *p) {
  store_arg *a = p;
  sleep_ms(a->delay_ms);
  __atomic_store_n(a->word, a->value, __ATOMIC_RELEASE);
  return NULL;
}

// Enqueues a wait on *ctr, then a write of 1 to *flag; the stream must hold
// (NOT_READY, no write) until another thread stores `release`.
static void expect_wait(CUstream s, uint32_t *ctr, uint32_t *flag, uint32_t start_value, uint32_t want, unsigned op,
                        uint32_t not_yet, uint32_t release) {
  CUdeviceptr dctr, dflag;
  CU_OK(cu.cuMemHostGetDevicePointer_v2(&dctr, ctr, 0));
  CU_OK(cu.cuMemHostGetDevicePointer_v2(&dflag, flag, 0));
  cr_assert_eq(dctr, (CUdeviceptr)(uintptr_t)ctr, "host-mapped memory's device pointer is its host address");
  *ctr = start_value, *flag = 0;
  CU_OK(cu.cuStreamWaitValue32_v2(s, dctr, want, op));
  CU_OK(cu.cuStreamWriteValue32_v2(s, dflag, 1, 0));
  sleep_ms(15);
  CU_IS(cu.cuStreamQuery(s), E_NOT_READY);
  cr_assert_eq(__atomic_load_n(flag, __ATOMIC_ACQUIRE), 0, "the stream ran past a wait (%#x vs %#x, op %u)",
               start_value, want, op);
  __atomic_store_n(ctr, not_yet, __ATOMIC_RELEASE);
  sleep_ms(10);
  CU_IS(cu.cuStreamQuery(s), E_NOT_READY);
  cr_assert_eq(__atomic_load_n(flag, __ATOMIC_ACQUIRE), 0, "%#x released a wait for %#x (op %u)", not_yet, want, op);
  store_arg a = {ctr, release, 10};
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, store_later, &a), 0);
  CU_OK(cu.cuStreamSynchronize(s));
  pthread_join(t, NULL);
  cr_assert_eq(*flag, 1);
}

Test(fake_cuda, wait_value_holds_a_stream_until_another_thread_stores) {
  start();
  CUstream s;
  uint32_t *words;
  CU_OK(cu.cuStreamCreate(&s, 0));
  CU_OK(cu.cuMemHostAlloc((void **)&words, 64, HOSTALLOC_DEVICEMAP));
  expect_wait(s, &words[0], &words[1], 0, 2, WAIT_GEQ, 1, 3);
  // Cyclic GEQ across the wrap: 0xfffffff0 is "before" 5, 2 is still before it.
  expect_wait(s, &words[0], &words[1], 0xfffffff0u, 5, WAIT_GEQ, 2, 5);
  words[0] = 0x10, words[1] = 0;  // and 0x10 is already "after" 0xfffffff0
  CU_OK(cu.cuStreamWaitValue32_v2(s, (CUdeviceptr)(uintptr_t)&words[0], 0xfffffff0u, WAIT_GEQ));
  CU_OK(cu.cuStreamSynchronize(s));
  expect_wait(s, &words[0], &words[1], 4, 5, WAIT_EQ, 6, 5);
  expect_wait(s, &words[0], &words[1], 0x3, 0x4, WAIT_AND, 0x8, 0xc);
  expect_wait(s, &words[0], &words[1], 0xffffffffu, 0x1, WAIT_NOR, 0xfffffffeu, 0xfffffffcu);
  // Refused when enqueued (as the H200's driver does): unaligned, pageable memory, FLUSH.
  uint32_t *pageable = calloc(4, sizeof(uint32_t));
  CU_IS(cu.cuStreamWaitValue32_v2(s, (CUdeviceptr)(uintptr_t)&words[0] + 1, 1, WAIT_GEQ), E_INVALID_VALUE);
  CU_IS(cu.cuStreamWriteValue32_v2(s, (CUdeviceptr)(uintptr_t)pageable, 1, 0), E_INVALID_VALUE);
  CU_IS(cu.cuStreamWaitValue32_v2(s, (CUdeviceptr)(uintptr_t)&words[0], 1, 1u << 30), 801);  // NOT_SUPPORTED
  // Held behind a wait, a memset whose memory is freed before it runs faults
  // (the driver's cuMemFree would synchronise; the fake's does not, which is
  // how a fault is made here); what follows it is skipped, and it sticks.
  CUdeviceptr doomed;
  int ran = 0;
  CU_OK(cu.cuMemAlloc_v2(&doomed, 256));
  words[0] = 0;
  CU_OK(cu.cuStreamWaitValue32_v2(s, (CUdeviceptr)(uintptr_t)&words[0], 1, WAIT_EQ));
  CU_OK(cu.cuMemsetD8Async(doomed, 1, 256, s));
  CU_OK(cu.cuLaunchHostFunc(s, set_flag, &ran));
  CU_OK(cu.cuMemFree_v2(doomed));
  __atomic_store_n(&words[0], 1, __ATOMIC_RELEASE);
  CU_IS(cu.cuStreamSynchronize(s), E_ILLEGAL_ADDRESS);
  CU_IS(cu.cuStreamQuery(s), E_ILLEGAL_ADDRESS);  // sticky
  CU_IS(cu.cuLaunchHostFunc(s, set_flag, &ran), E_ILLEGAL_ADDRESS);
  cr_expect_eq(ran, 0, "a host function ran after an error on its stream");
  CU_OK(cu.cuStreamDestroy_v2(s));
  CU_OK(cu.cuMemFreeHost(words));
  free(pageable);
}

typedef struct {
  int gate, flag;
} gated_flag;

static void gate_sleep_then_set(void *p) {
  gated_flag *g = p;
  wait_for_gate(&g->gate);
  sleep_ms(20);
  set_flag(&g->flag);
}

static void note_flag(void *p) {
  int **pp = p;
  *pp[1] = __atomic_load_n(pp[0], __ATOMIC_ACQUIRE) + 10;
}

Test(fake_cuda, events_order_two_streams) {
  start();
  CUstream s1, s2;
  CUevent e0, e1, never;
  gated_flag gf = {0, 0};
  int seen = 0, *args[2] = {&gf.flag, &seen};
  CU_OK(cu.cuStreamCreate(&s1, 0));
  CU_OK(cu.cuStreamCreate(&s2, 1));
  CU_OK(cu.cuEventCreate(&e0, 0));
  CU_OK(cu.cuEventCreate(&e1, 0));
  CU_OK(cu.cuEventCreate(&never, 0));
  CU_OK(cu.cuEventQuery(never));  // never recorded: complete
  CU_OK(cu.cuEventRecord(e0, s1));
  CU_OK(cu.cuLaunchHostFunc(s1, gate_sleep_then_set, &gf));
  CU_OK(cu.cuEventRecord(e1, s1));
  CU_IS(cu.cuEventQuery(e1), E_NOT_READY);
  CU_OK(cu.cuStreamWaitEvent(s2, e1, 0));
  CU_OK(cu.cuStreamWaitEvent(s2, never, 0));  // no wait
  CU_IS(cu.cuStreamWaitEvent(s2, never, 1), E_ILLEGAL_STATE);  // CU_EVENT_WAIT_EXTERNAL: only in a capture
  CU_OK(cu.cuLaunchHostFunc(s2, note_flag, args));
  __atomic_store_n(&gf.gate, 1, __ATOMIC_RELEASE);
  CU_OK(cu.cuStreamSynchronize(s2));
  cr_expect_eq(seen, 11, "s2 ran before the event recorded on s1 (saw flag %d)", seen - 10);
  CU_OK(cu.cuEventSynchronize(e1));
  CU_OK(cu.cuEventQuery(e1));
  float ms = -1;
  CU_OK(cu.cuEventElapsedTime(&ms, e0, e1));
  cr_expect_geq(ms, 15.0f, "elapsed %.3f ms across a 20 ms host function", ms);
  CU_IS(cu.cuEventElapsedTime(&ms, e0, never), E_INVALID_HANDLE);
  // A wait names the record current at the call: recording again later (behind
  // a gate this thread opens only after s2 has finished) does not extend it.
  int gate = 0;
  CU_OK(cu.cuStreamWaitEvent(s2, e1, 0));
  CU_OK(cu.cuLaunchHostFunc(s1, gate_fn, &gate));
  CU_OK(cu.cuEventRecord(e1, s1));
  CU_OK(cu.cuStreamSynchronize(s2));
  CU_IS(cu.cuEventQuery(e1), E_NOT_READY);
  __atomic_store_n(&gate, 1, __ATOMIC_RELEASE);
  CU_OK(cu.cuStreamSynchronize(s1));
  CU_OK(cu.cuEventQuery(e1));
  CU_OK(cu.cuEventDestroy_v2(e0));
  CU_OK(cu.cuEventDestroy_v2(e1));
  CU_OK(cu.cuEventDestroy_v2(never));
  CU_IS(cu.cuEventQuery(e0), E_INVALID_HANDLE);
  CU_OK(cu.cuStreamDestroy_v2(s1));
  CU_OK(cu.cuStreamDestroy_v2(s2));
}

static void query_from_host_function(void *p) { *(CUresult *)p = cu.cuStreamQuery(NULL); }

Test(fake_cuda, destroyed_streams_are_rejected_and_leave_no_thread) {
  start();
  CUstream s;
  CUdeviceptr dev;
  CU_OK(cu.cuMemAlloc_v2(&dev, 256));
  CU_OK(cu.cuMemsetD8_v2(dev, 0, 256));  // the legacy stream's worker exists from here on
  int threads = thread_count(), workers = cu.fake_cuda_worker_threads();
  CU_OK(cu.cuStreamCreate(&s, 0));
  cr_expect_eq(cu.fake_cuda_worker_threads(), workers + 1);
  CUresult from_fn = -1;
  CU_OK(cu.cuLaunchHostFunc(s, query_from_host_function, &from_fn));
  CU_OK(cu.cuStreamDestroy_v2(s));  // drains first
  cr_expect_eq(from_fn, E_NOT_PERMITTED, "a host function called CUDA: %d", from_fn);
  cr_expect_eq(cu.fake_cuda_worker_threads(), workers);
  cr_expect_eq(thread_count(), threads, "cuStreamDestroy left a thread");
  CU_IS(cu.cuStreamSynchronize(s), E_INVALID_HANDLE);
  CU_IS(cu.cuStreamQuery(s), E_INVALID_HANDLE);
  CU_IS(cu.cuMemsetD8Async(dev, 1, 16, s), E_INVALID_HANDLE);
  CU_IS(cu.cuStreamGetCtx(s, &(CUcontext){0}), E_INVALID_HANDLE);
  CU_IS(cu.cuStreamDestroy_v2(s), E_INVALID_HANDLE);
  CU_OK(cu.cuMemFree_v2(dev));
}

// ---- Memory ----

Test(fake_cuda, device_memory_faults_on_the_host_and_is_reused) {
  start();
  enum { N = 4096 };
  CUdeviceptr a, b, c;
  unsigned char src[N], dst[N];
  for (int i = 0; i < N; i++) src[i] = (unsigned char)(i * 7 + 1);
  CU_OK(cu.cuMemAlloc_v2(&a, N));
  CU_OK(cu.cuMemcpyHtoD_v2(a, src, N));
  CU_OK(cu.cuMemcpyDtoH_v2(dst, a, N));
  cr_expect(memcmp(src, dst, N) == 0, "a round trip through device memory changed the bytes");
  unsigned type = 0;
  int ordinal = -1;
  CU_OK(cu.cuPointerGetAttribute(&type, ATTR_MEMORY_TYPE, a + 100));
  CU_OK(cu.cuPointerGetAttribute(&ordinal, ATTR_DEVICE_ORDINAL, a));
  cr_expect_eq(type, MEMTYPE_DEVICE);
  cr_expect_eq(ordinal, 0);
  CUdeviceptr base = 0;
  size_t size = 0;
  CU_OK(cu.cuMemGetAddressRange_v2(&base, &size, a + 10));
  cr_expect(base == a && size == N);
  // A copy that runs out of the allocation fails instead of reading on.
  CU_IS(cu.cuMemcpyDtoH_v2(dst, a + N - 16, 32), E_INVALID_VALUE);
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGSEGV, SIG_DFL);
    unsigned char buf[64];
    memcpy(buf, (void *)(uintptr_t)a, sizeof(buf));
    _exit(buf[0] == 1 ? 3 : 4);  // reached only if the host could read device memory
  }
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_expect(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV, "a host memcpy from device memory did not fault "
            "(status %#x)", status);
  CU_OK(cu.cuMemAlloc_v2(&b, 1));
  CU_OK(cu.cuMemAlloc_v2(&c, 1));
  cr_expect_eq((c - b) % 256, 0, "allocations 256-byte aligned");
  CU_OK(cu.cuMemFree_v2(a));
  CU_IS(cu.cuMemFree_v2(a), E_INVALID_VALUE);
  CU_OK(cu.cuMemFree_v2(0));  // as the driver answers
  CU_IS(cu.cuMemFree_v2(b + 8), E_INVALID_VALUE);
  CU_IS(cu.cuPointerGetAttribute(&type, ATTR_MEMORY_TYPE, a), E_INVALID_VALUE);
  CUdeviceptr again;
  CU_OK(cu.cuMemAlloc_v2(&again, N));
  cr_expect_eq(again, a, "freed device memory is handed out again (first fit)");
  CU_OK(cu.cuMemFree_v2(again));
  CU_OK(cu.cuMemFree_v2(b));
  CU_OK(cu.cuMemFree_v2(c));
}

Test(fake_cuda, failure_injection) {
  start();
  CUdeviceptr p;
  setenv("FAKE_CUDA_FAIL", "cuMemAlloc", 1);  // as cuda.h names it: cuMemAlloc_v2 fails
  CU_IS(cu.cuMemAlloc_v2(&p, 64), E_OUT_OF_MEMORY);
  CU_IS(cu.cuMemAlloc_v2(&p, 64), E_OUT_OF_MEMORY);
  void *h;
  CU_OK(cu.cuMemHostAlloc(&h, 64, 0));
  setenv("FAKE_CUDA_FAIL", "cuMemCreate", 1);
  CU_OK(cu.cuMemAlloc_v2(&p, 64));
  CUmemAllocationProp prop = {.type = PINNED, .location = {LOC_DEVICE, 0}};
  CUmemHandle mh;
  CU_IS(cu.cuMemCreate(&mh, 2 << 20, &prop, 0), E_OUT_OF_MEMORY);
  unsetenv("FAKE_CUDA_FAIL");
  CU_OK(cu.cuMemCreate(&mh, 2 << 20, &prop, 0));
  CU_OK(cu.cuMemRelease(mh));
  CU_OK(cu.cuMemFree_v2(p));
  CU_OK(cu.cuMemFreeHost(h));
}

// ---- Capture ----

Test(fake_cuda, captured_operations_are_counted_not_run) {
  start();
  CUstream s;
  CUdeviceptr dev;
  CUgraph g = NULL;
  int status = -1, flag = 0;
  unsigned char out[64];
  CU_OK(cu.cuStreamCreate(&s, 0));
  CU_OK(cu.cuMemAlloc_v2(&dev, 64));
  CU_OK(cu.cuMemsetD8_v2(dev, 0, 64));
  CU_IS(cu.cuStreamBeginCapture_v2(NULL, MODE_GLOBAL), E_CAPTURE_UNSUPPORTED);  // not the legacy stream
  CU_OK(cu.cuStreamBeginCapture_v2(s, MODE_GLOBAL));
  CU_IS(cu.cuStreamBeginCapture_v2(s, MODE_GLOBAL), E_ILLEGAL_STATE);
  CU_OK(cu.cuStreamIsCapturing(s, &status));
  cr_expect_eq(status, CAPTURE_ACTIVE);
  CU_OK(cu.cuMemsetD8Async(dev, 0xab, 64, s));
  CU_OK(cu.cuLaunchHostFunc(s, set_flag, &flag));
  CU_IS(cu.cuMemAlloc_v2(&(CUdeviceptr){0}, 64), E_CAPTURE_UNSUPPORTED);  // unsafe in GLOBAL mode...
  CU_IS(cu.cuStreamEndCapture(s, &g), E_CAPTURE_INVALIDATED);             // ...and it invalidated the capture
  cr_expect_null(g);
  // So do the legacy stream (a blocking stream captures) and asking about a captured event.
  CUevent e;
  CU_OK(cu.cuEventCreate(&e, 0));
  CU_OK(cu.cuStreamBeginCapture_v2(s, MODE_GLOBAL));
  CU_IS(cu.cuMemsetD8_v2(dev, 2, 64), 906);  // CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
  CU_IS(cu.cuStreamEndCapture(s, &g), E_CAPTURE_INVALIDATED);
  CU_OK(cu.cuStreamBeginCapture_v2(s, MODE_GLOBAL));
  CU_OK(cu.cuEventRecord(e, s));
  CU_IS(cu.cuEventQuery(e), 907);  // CUDA_ERROR_CAPTURED_EVENT
  CU_IS(cu.cuStreamEndCapture(s, &g), E_CAPTURE_INVALIDATED);
  CU_OK(cu.cuEventDestroy_v2(e));
  CU_OK(cu.cuStreamBeginCapture_v2(s, MODE_GLOBAL));
  CU_OK(cu.cuMemsetD8Async(dev, 0xab, 64, s));
  CU_OK(cu.cuLaunchHostFunc(s, set_flag, &flag));
  CU_OK(cu.cuStreamEndCapture(s, &g));
  cr_assert_not_null(g);
  size_t nodes = 0;
  CU_OK(cu.cuGraphGetNodes(g, NULL, &nodes));
  cr_expect_eq(nodes, 2);
  CU_OK(cu.cuStreamIsCapturing(s, &status));
  cr_expect_eq(status, CAPTURE_NONE);
  CU_OK(cu.cuStreamSynchronize(s));
  CU_OK(cu.cuMemcpyDtoH_v2(out, dev, 64));
  cr_expect_eq(out[0], 0, "a captured memset ran");
  cr_expect_eq(flag, 0, "a captured host function ran");
  // Waiting for a capturing stream is refused and invalidates the capture.
  CU_OK(cu.cuGraphDestroy(g));
  CU_IS(cu.cuGraphDestroy(g), E_INVALID_VALUE);
  CU_OK(cu.cuStreamBeginCapture_v2(s, MODE_GLOBAL));
  CU_IS(cu.cuStreamSynchronize(s), E_CAPTURE_UNSUPPORTED);
  CU_IS(cu.cuStreamEndCapture(s, &g), E_CAPTURE_INVALIDATED);
  cr_expect_null(g);
  CU_IS(cu.cuStreamEndCapture(s, &g), E_ILLEGAL_STATE);
  CU_OK(cu.cuStreamDestroy_v2(s));
  CU_OK(cu.cuMemFree_v2(dev));
}

// ---- VMM and IPC ----

static CUmemAllocationProp vmm_prop(void) {
  return (CUmemAllocationProp){.type = PINNED, .requestedHandleTypes = POSIX_FD, .location = {LOC_DEVICE, 0}};
}

// Reserves, maps and grants device 0 access to `size` bytes of h.
static CUdeviceptr vmm_map(CUmemHandle h, size_t size) {
  CUdeviceptr va;
  CUmemAccessDesc rw = {{LOC_DEVICE, 0}, PROT_RW};
  CU_OK(cu.cuMemAddressReserve(&va, size, 0, 0, 0));
  CU_OK(cu.cuMemMap(va, size, 0, h, 0));
  CU_OK(cu.cuMemSetAccess(va, size, &rw, 1));
  return va;
}

static void vmm_unmap(CUdeviceptr va, size_t size) {
  CU_OK(cu.cuMemUnmap(va, size));
  CU_OK(cu.cuMemAddressFree(va, size));
}

Test(fake_cuda, vmm_create_reserve_map_access_copy) {
  start();
  CUmemAllocationProp prop = vmm_prop(), got;
  size_t gran = 0;
  CU_OK(cu.cuMemGetAllocationGranularity(&gran, &prop, GRAN_MIN));
  cr_assert_eq(gran, (size_t)2 << 20);
  CUmemHandle h, again;
  CU_IS(cu.cuMemCreate(&h, gran + 4096, &prop, 0), E_INVALID_VALUE);
  CU_OK(cu.cuMemCreate(&h, gran, &prop, 0));
  CU_OK(cu.cuMemGetAllocationPropertiesFromHandle(&got, h));
  cr_expect(got.type == PINNED && got.location.id == 0 && got.requestedHandleTypes == POSIX_FD);
  CUdeviceptr va;
  CU_OK(cu.cuMemAddressReserve(&va, 2 * gran, gran, 0, 0));
  cr_expect_eq(va % gran, 0, "reservation not aligned");
  CU_OK(cu.cuMemMap(va, gran, 0, h, 0));
  CU_IS(cu.cuMemMap(va, gran, 0, h, 0), E_INVALID_VALUE);  // already mapped
  char pattern[256], back[256];
  for (int i = 0; i < 256; i++) pattern[i] = (char)(255 - i);
  // Mapped but no access granted: copies are refused (as the H200's driver does).
  CUstream s0, s1;
  CU_OK(cu.cuStreamCreate(&s0, 0));
  CU_IS(cu.cuMemcpyHtoDAsync_v2(va + 64, pattern, sizeof(pattern), s0), E_INVALID_VALUE);
  CU_IS(cu.cuMemcpyHtoD_v2(va + 64, pattern, sizeof(pattern)), E_INVALID_VALUE);
  CU_OK(cu.cuStreamDestroy_v2(s0));
  CUmemAccessDesc rw = {{LOC_DEVICE, 0}, PROT_RW};
  CU_OK(cu.cuMemSetAccess(va, gran, &rw, 1));
  // Device 0 may now; device 1 may not.
  CUcontext c1;
  CU_OK(cu.cuDevicePrimaryCtxRetain(&c1, 1));
  CU_OK(cu.cuCtxPushCurrent_v2(c1));
  CU_OK(cu.cuStreamCreate(&s1, 0));
  CU_IS(cu.cuMemcpyHtoDAsync_v2(va + 64, pattern, sizeof(pattern), s1), E_INVALID_VALUE);
  CU_OK(cu.cuStreamDestroy_v2(s1));
  CU_OK(cu.cuCtxPopCurrent_v2(NULL));
  CU_OK(cu.cuMemcpyHtoD_v2(va + 64, pattern, sizeof(pattern)));
  CU_OK(cu.cuMemcpyDtoH_v2(back, va + 64, sizeof(back)));
  cr_expect(memcmp(pattern, back, sizeof(back)) == 0, "VMM round trip changed the bytes");
  unsigned type = 0;
  int ordinal = -1;
  CU_OK(cu.cuPointerGetAttribute(&type, ATTR_MEMORY_TYPE, va + 100));
  CU_OK(cu.cuPointerGetAttribute(&ordinal, ATTR_DEVICE_ORDINAL, va + 100));
  cr_expect(type == MEMTYPE_DEVICE && ordinal == 0, "type %u ordinal %d", type, ordinal);
  CU_IS(cu.cuMemcpyDtoH_v2(back, va + gran - 8, 16), E_INVALID_VALUE);  // runs into the unmapped half
  CU_OK(cu.cuMemRetainAllocationHandle(&again, (void *)(uintptr_t)(va + 12345)));
  cr_expect_eq(again, h);
  CU_OK(cu.cuMemRelease(again));
  CU_OK(cu.cuMemRelease(h));  // still mapped: the memory lives on
  CU_OK(cu.cuMemcpyDtoH_v2(back, va + 64, sizeof(back)));
  cr_expect(memcmp(pattern, back, sizeof(back)) == 0);
  CU_IS(cu.cuMemRelease(h), E_INVALID_VALUE);
  CU_IS(cu.cuMemAddressFree(va, 2 * gran), E_INVALID_VALUE);  // still mapped
  CU_OK(cu.cuMemUnmap(va, gran));
  CU_OK(cu.cuMemAddressFree(va, 2 * gran));
}

Test(fake_cuda, vmm_export_fork_import) {
  start();
  CUmemAllocationProp prop = vmm_prop(), plain = prop;
  size_t size = (size_t)2 << 20;
  CUmemHandle h, local;
  CU_OK(cu.cuMemCreate(&h, size, &prop, 0));
  plain.requestedHandleTypes = 0;
  CU_OK(cu.cuMemCreate(&local, size, &plain, 0));
  int fd = -1;
  CU_IS(cu.cuMemExportToShareableHandle(&fd, local, POSIX_FD, 0), E_INVALID_VALUE);
  CU_OK(cu.cuMemRelease(local));
  CUdeviceptr va = vmm_map(h, size);
  char pattern[512], back[512];
  for (int i = 0; i < 512; i++) pattern[i] = (char)(i * 13 + 5);
  CU_OK(cu.cuMemcpyHtoD_v2(va + 1000, pattern, sizeof(pattern)));
  CU_OK(cu.cuMemExportToShareableHandle(&fd, h, POSIX_FD, 0));
  cr_assert_geq(fd, 0);
  pid_t pid = fork();
  if (pid == 0) {  // another process: import the inherited descriptor, read, write back
    CUmemHandle mine;
    char got[512];
    if (cu.cuMemImportFromShareableHandle(&mine, (void *)(uintptr_t)fd, POSIX_FD) != OK) _exit(10);
    close(fd);
    CUdeviceptr cva;
    CUmemAccessDesc rw = {{LOC_DEVICE, 0}, PROT_RW};
    if (cu.cuMemAddressReserve(&cva, size, 0, 0, 0) != OK || cu.cuMemMap(cva, size, 0, mine, 0) != OK ||
        cu.cuMemSetAccess(cva, size, &rw, 1) != OK)
      _exit(11);
    if (cu.cuMemcpyDtoH_v2(got, cva + 1000, sizeof(got)) != OK) _exit(12);
    if (memcmp(got, pattern, sizeof(got)) != 0) _exit(13);
    memset(got, 0x77, sizeof(got));
    if (cu.cuMemcpyHtoD_v2(cva + 1000, got, sizeof(got)) != OK) _exit(14);
    if (cu.cuMemUnmap(cva, size) != OK || cu.cuMemRelease(mine) != OK || cu.cuMemAddressFree(cva, size) != OK)
      _exit(15);
    _exit(0);
  }
  close(fd);
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed: status %#x (10 import, 11 map, 12 copy, "
            "13 bytes differ, 14 write, 15 teardown)", status);
  CU_OK(cu.cuMemcpyDtoH_v2(back, va + 1000, sizeof(back)));
  cr_expect_eq(back[0], 0x77, "the parent does not see the child's bytes");
  cr_expect_eq(back[511], 0x77);
  vmm_unmap(va, size);
  CU_OK(cu.cuMemRelease(h));
}

Test(fake_cuda, legacy_ipc_across_fork) {
  start();
  enum { N = 1000 };
  CUdeviceptr first, dev, opened;
  char pattern[N], back[N];
  for (int i = 0; i < N; i++) pattern[i] = (char)(i ^ 0x5a);
  CU_OK(cu.cuMemAlloc_v2(&first, 64));  // so that the next one is not at offset 0
  CU_OK(cu.cuMemAlloc_v2(&dev, N));
  CU_OK(cu.cuMemcpyHtoD_v2(dev, pattern, N));
  CUipcMemHandle ipc, inner;
  CU_OK(cu.cuIpcGetMemHandle(&ipc, dev));
  CU_OK(cu.cuIpcGetMemHandle(&inner, dev + 256));  // inside the block: the same block
  cr_expect(memcmp(&ipc, &inner, sizeof(ipc)) == 0);
  CU_IS(cu.cuIpcOpenMemHandle_v2(&opened, ipc, 1), E_INVALID_CONTEXT);  // this very process, as the driver answers
  pid_t pid = fork();
  if (pid == 0) {
    char got[N];
    CUdeviceptr o1, o2;
    if (cu.cuIpcOpenMemHandle_v2(&o1, ipc, 1) != OK) _exit(10);
    if (cu.cuIpcOpenMemHandle_v2(&o2, ipc, 1) != OK || o2 != o1) _exit(11);  // counted, same address
    if (cu.cuMemcpyDtoH_v2(got, o1, N) != OK || memcmp(got, pattern, N) != 0) _exit(12);
    if (cu.cuMemcpyDtoH_v2(got, o1 + N - 8, 16) != E_INVALID_VALUE) _exit(13);
    memset(got, 0x33, N);
    if (cu.cuMemcpyHtoD_v2(o1, got, N) != OK) _exit(14);
    if (cu.cuIpcCloseMemHandle(o1) != OK || cu.cuIpcCloseMemHandle(o2) != OK) _exit(15);
    if (cu.cuIpcCloseMemHandle(o1) != E_INVALID_VALUE) _exit(16);
    _exit(0);
  }
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed: status %#x (10 open, 11 reopen, "
            "12 read, 13 overrun, 14 write, 15 close, 16 double close)", status);
  CU_OK(cu.cuMemcpyDtoH_v2(back, dev, N));
  cr_expect_eq(back[0], 0x33, "the exporter does not see the importer's bytes");
  cr_expect_eq(back[N - 1], 0x33);
  CU_OK(cu.cuMemFree_v2(dev));
  CU_OK(cu.cuMemFree_v2(first));
}
