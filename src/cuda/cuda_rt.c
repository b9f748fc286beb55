/*
 * cuda_rt.c — the CUDA driver loaded at run time, and pointer classification
 * (see cuda_rt.h).
 *
 * The first classification (or weft_cuda_load) opens libcuda.so.1 — or the
 * library WEFT_CUDA_DRIVER_LIB names — with dlopen, fills the function table,
 * calls cuInit(0) and counts devices, once, under a mutex; the outcome is
 * published in weft_cuda_state, which the inline fast path reads. Any failure
 * is "no CUDA": one INFO line, never an error, so a host-only machine (or a
 * machine with a driver and no GPU) behaves exactly as before.
 *
 * Classification asks the driver for the memory type, "is managed" and the
 * device ordinal of the first and the last byte of a buffer (with
 * cuPointerGetAttributes, which answers "not a CUDA pointer" with type 0
 * instead of an error; cuPointerGetAttribute where that is missing).
 */
#include "cuda_rt.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "debug.h"
#include "env.h"

_Atomic int weft_cuda_state = WEFT_CUDA_UNKNOWN;

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static weft_cuda_driver_t drv;
static void *handle;
static int ndevices;
static char test_lib[512];
static int test_lib_set, test_singular;

typedef struct {
  const char *name;
  size_t offset;
  int optional;
} sym_t;

#define SYM(field, name, optional) {name, offsetof(weft_cuda_driver_t, field), optional}
static const sym_t syms[] = {
    SYM(cuInit, "cuInit", 0),
    SYM(cuDriverGetVersion, "cuDriverGetVersion", 0),
    SYM(cuDeviceGetCount, "cuDeviceGetCount", 0),
    SYM(cuPointerGetAttribute, "cuPointerGetAttribute", 0),
    SYM(cuPointerGetAttributes, "cuPointerGetAttributes", 1),
    SYM(cuGetErrorString, "cuGetErrorString", 1),
    SYM(cuCtxGetCurrent, "cuCtxGetCurrent", 1),
    SYM(cuStreamQuery, "cuStreamQuery", 1),
    SYM(cuStreamWriteValue32, "cuStreamWriteValue32_v2", 1),
    SYM(cuStreamWaitValue32, "cuStreamWaitValue32_v2", 1),
    SYM(cuMemHostRegister, "cuMemHostRegister_v2", 1),
    SYM(cuMemHostUnregister, "cuMemHostUnregister", 1),
    SYM(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2", 1),
    SYM(cuCtxPushCurrent, "cuCtxPushCurrent_v2", 1),
    SYM(cuCtxPopCurrent, "cuCtxPopCurrent_v2", 1),
    SYM(cuCtxGetDevice, "cuCtxGetDevice", 1),
    SYM(cuStreamGetCtx, "cuStreamGetCtx", 1),
    SYM(cuStreamIsCapturing, "cuStreamIsCapturing", 1),
    SYM(cuStreamSynchronize, "cuStreamSynchronize", 1),
    SYM(cuMemcpyAsync, "cuMemcpyAsync", 1),
    SYM(cuMemHostAlloc, "cuMemHostAlloc", 1),
    SYM(cuMemFreeHost, "cuMemFreeHost", 1),
    SYM(cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity", 1),
    SYM(cuMemCreate, "cuMemCreate", 1),
    SYM(cuMemRelease, "cuMemRelease", 1),
    SYM(cuMemAddressReserve, "cuMemAddressReserve", 1),
    SYM(cuMemAddressFree, "cuMemAddressFree", 1),
    SYM(cuMemMap, "cuMemMap", 1),
    SYM(cuMemUnmap, "cuMemUnmap", 1),
    SYM(cuMemSetAccess, "cuMemSetAccess", 1),
    SYM(cuMemExportToShareableHandle, "cuMemExportToShareableHandle", 1),
    SYM(cuMemImportFromShareableHandle, "cuMemImportFromShareableHandle", 1),
    SYM(cuMemAlloc, "cuMemAlloc_v2", 1),
    SYM(cuMemFree, "cuMemFree_v2", 1),
    SYM(cuMemsetD8, "cuMemsetD8_v2", 1),
    SYM(cuIpcGetMemHandle, "cuIpcGetMemHandle", 1),
    SYM(cuIpcOpenMemHandle, "cuIpcOpenMemHandle_v2", 1),
    SYM(cuIpcCloseMemHandle, "cuIpcCloseMemHandle", 1),
    SYM(cuStreamCreate, "cuStreamCreate", 1),
    SYM(cuStreamDestroy, "cuStreamDestroy_v2", 1),
    SYM(cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer", 1),
    SYM(cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess", 1),
    SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 1),
    SYM(cuCtxSetCurrent, "cuCtxSetCurrent", 1),
    SYM(cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId", 1),
};
#undef SYM

static const char *driver_name(void) {
  if (test_lib_set) return test_lib;
  const char *name = weft_env_WEFT_CUDA_DRIVER_LIB();
  return name != NULL ? name : "libcuda.so.1";
}

int weft_cuda_has_engine(const weft_cuda_driver_t *d) {
  return d != NULL && d->cuCtxGetCurrent && d->cuCtxPushCurrent && d->cuCtxPopCurrent && d->cuCtxGetDevice &&
         d->cuStreamGetCtx && d->cuStreamIsCapturing && d->cuStreamSynchronize && d->cuMemcpyAsync &&
         d->cuMemHostAlloc && d->cuMemFreeHost && d->cuMemHostGetDevicePointer && d->cuStreamWriteValue32 &&
         d->cuStreamWaitValue32;
}

int weft_cuda_has_vmm(const weft_cuda_driver_t *d) {
  return d != NULL && d->cuCtxGetCurrent && d->cuCtxGetDevice && d->cuMemGetAllocationGranularity &&
         d->cuMemCreate && d->cuMemRelease && d->cuMemAddressReserve && d->cuMemAddressFree && d->cuMemMap &&
         d->cuMemUnmap && d->cuMemSetAccess && d->cuMemExportToShareableHandle &&
         d->cuMemImportFromShareableHandle;
}

int weft_cuda_has_ipc(const weft_cuda_driver_t *d) {
  return weft_cuda_has_engine(d) && d->cuMemAlloc && d->cuMemFree && d->cuMemsetD8 && d->cuIpcGetMemHandle &&
         d->cuIpcOpenMemHandle && d->cuIpcCloseMemHandle && d->cuStreamCreate && d->cuStreamDestroy;
}

const char *weft_cuda_error_text(weft_CUresult r) {
  const char *text = NULL;
  if (drv.cuGetErrorString == NULL || drv.cuGetErrorString(r, &text) != WEFT_CUDA_SUCCESS || text == NULL)
    return "unknown error";
  return text;
}

// "No CUDA": the one INFO line. The library stays open once cuInit has run
// (unloading a driver that started is asking for trouble); the table is cleared.
static int absent(const char *why) {
  INFO(WEFT_LOG_INIT, "CUDA: no driver in use (%s); every buffer is host memory", why);
  memset(&drv, 0, sizeof(drv));
  ndevices = 0;
  return WEFT_CUDA_ABSENT;
}

static int load_locked(void) {
  const char *lib = driver_name();
  char why[1024];
  if (strcmp(lib, "none") == 0) return absent("WEFT_CUDA_DRIVER_LIB=none");
  handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    const char *e = dlerror();  // names the library
    snprintf(why, sizeof(why), "%s", e != NULL ? e : lib);
    return absent(why);
  }
  for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
    void *f = dlsym(handle, syms[i].name);
    if (f == NULL && !syms[i].optional) {
      snprintf(why, sizeof(why), "%s lacks %s", lib, syms[i].name);
      dlclose(handle);
      handle = NULL;
      return absent(why);
    }
    memcpy((char *)&drv + syms[i].offset, &f, sizeof(f));  // object pointer to function pointer, as dlsym intends
  }
  if (test_singular) drv.cuPointerGetAttributes = NULL;
  weft_CUresult r = drv.cuInit(0);
  if (r != WEFT_CUDA_SUCCESS) {
    snprintf(why, sizeof(why), "%s: cuInit: %d (%s)", lib, r, weft_cuda_error_text(r));
    return absent(why);
  }
  int n = 0;
  r = drv.cuDeviceGetCount(&n);
  if (r != WEFT_CUDA_SUCCESS || n <= 0) {
    snprintf(why, sizeof(why), "%s: no device (cuDeviceGetCount: %d, %d devices)", lib, r, n);
    return absent(why);
  }
  int version = 0;
  if (drv.cuDriverGetVersion(&version) != WEFT_CUDA_SUCCESS) version = 0;
  ndevices = n;
  INFO(WEFT_LOG_INIT, "CUDA: driver %d.%d from %s, %d device(s); calls on device buffers go on their CUDA streams",
       version / 1000, (version % 1000) / 10, lib, n);
  return WEFT_CUDA_PRESENT;
}

int weft_cuda_load(void) {
  int s = atomic_load_explicit(&weft_cuda_state, memory_order_acquire);
  if (s != WEFT_CUDA_UNKNOWN) return s;
  pthread_mutex_lock(&load_lock);
  s = atomic_load_explicit(&weft_cuda_state, memory_order_relaxed);
  if (s == WEFT_CUDA_UNKNOWN) {
    s = load_locked();
    atomic_store_explicit(&weft_cuda_state, s, memory_order_release);
  }
  pthread_mutex_unlock(&load_lock);
  return s;
}

const weft_cuda_driver_t *weft_cuda_driver(void) { return weft_cuda_load() == WEFT_CUDA_PRESENT ? &drv : NULL; }

int weft_cuda_device_count(void) { return weft_cuda_load() == WEFT_CUDA_PRESENT ? ndevices : 0; }

weft_CUcontext weft_cuda_current_context(void) {
  weft_CUcontext ctx = NULL;
  if (weft_cuda_load() != WEFT_CUDA_PRESENT || drv.cuCtxGetCurrent == NULL || drv.cuCtxGetCurrent(&ctx) != 0)
    return NULL;
  return ctx;
}

int weft_cuda_use_device(int dev) {
  if (weft_cuda_load() != WEFT_CUDA_PRESENT || drv.cuDevicePrimaryCtxRetain == NULL || drv.cuCtxSetCurrent == NULL)
    return -1;
  weft_CUcontext ctx = NULL;
  weft_CUresult r = drv.cuDevicePrimaryCtxRetain(&ctx, (weft_CUdevice)dev);
  return r != WEFT_CUDA_SUCCESS ? r : drv.cuCtxSetCurrent(ctx);
}

int weft_cuda_device_busid(int dev, char *buf, int len) {
  if (dev < 0 || weft_cuda_load() != WEFT_CUDA_PRESENT || drv.cuDeviceGetPCIBusId == NULL) return -1;
  return drv.cuDeviceGetPCIBusId(buf, len, (weft_CUdevice)dev) == WEFT_CUDA_SUCCESS ? 0 : -1;
}

int weft_cuda_current_device(void) {
  if (weft_cuda_load() != WEFT_CUDA_PRESENT || drv.cuCtxGetCurrent == NULL || drv.cuCtxGetDevice == NULL) return -1;
  weft_CUcontext ctx = NULL;
  weft_CUdevice dev = -1;
  if (drv.cuCtxGetCurrent(&ctx) != WEFT_CUDA_SUCCESS || ctx == NULL || drv.cuCtxGetDevice(&dev) != WEFT_CUDA_SUCCESS)
    return -1;
  return (int)dev;
}

const char *weft_mem_kind_name(weft_mem_kind_t kind) {
  switch (kind) {
    case WEFT_MEM_HOST: return "host";
    case WEFT_MEM_DEVICE: return "device";
    case WEFT_MEM_MANAGED: return "managed";
    case WEFT_MEM_MIXED: return "mixed";
  }
  return "unknown";
}

// One address. Booleans and enums land in zeroed 8-byte words, whatever
// width the driver writes; an address the driver does not know is host memory.
static void classify_one(uintptr_t addr, weft_mem_info_t *out) {
  uint64_t type = 0, managed = 0;
  int ordinal = -1;
  weft_CUdeviceptr p = (weft_CUdeviceptr)addr;
  if (drv.cuPointerGetAttributes != NULL) {
    int attrs[3] = {WEFT_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, WEFT_CU_POINTER_ATTRIBUTE_IS_MANAGED,
                    WEFT_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    void *data[3] = {&type, &managed, &ordinal};
    if (drv.cuPointerGetAttributes(3, attrs, data, p) != WEFT_CUDA_SUCCESS) type = managed = 0;
  } else if (drv.cuPointerGetAttribute(&type, WEFT_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) != WEFT_CUDA_SUCCESS) {
    type = 0;  // CUDA_ERROR_INVALID_VALUE: not a CUDA pointer
  } else {
    if (drv.cuPointerGetAttribute(&managed, WEFT_CU_POINTER_ATTRIBUTE_IS_MANAGED, p) != WEFT_CUDA_SUCCESS) managed = 0;
    if (drv.cuPointerGetAttribute(&ordinal, WEFT_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p) != WEFT_CUDA_SUCCESS)
      ordinal = -1;
  }
  if (managed != 0) *out = (weft_mem_info_t){WEFT_MEM_MANAGED, ordinal, 0};
  else if (type == WEFT_CU_MEMORYTYPE_DEVICE) *out = (weft_mem_info_t){WEFT_MEM_DEVICE, ordinal, 0};
  else if (type == WEFT_CU_MEMORYTYPE_HOST) *out = (weft_mem_info_t){WEFT_MEM_HOST, -1, 1};
  else *out = (weft_mem_info_t){WEFT_MEM_HOST, -1, 0};
}

void weft_mem_classify_slow(const void *ptr, size_t bytes, weft_mem_info_t *out) {
  *out = (weft_mem_info_t){WEFT_MEM_HOST, -1, 0};
  if (weft_cuda_load() != WEFT_CUDA_PRESENT || ptr == NULL || bytes == 0) return;
  uintptr_t first = (uintptr_t)ptr, last = first + (bytes - 1);
  classify_one(first, out);
  if (bytes == 1 || last < first) return;
  weft_mem_info_t end;
  classify_one(last, &end);
  if (end.kind != out->kind || end.device != out->device) *out = (weft_mem_info_t){WEFT_MEM_MIXED, -1, 0};
  else out->registered &= end.registered;
}

void weft_cuda_test_reset(const char *lib, int singular_only) {
  pthread_mutex_lock(&load_lock);
  if (handle != NULL) dlclose(handle);
  handle = NULL;
  memset(&drv, 0, sizeof(drv));
  ndevices = 0;
  test_lib_set = lib != NULL;
  snprintf(test_lib, sizeof(test_lib), "%s", lib != NULL ? lib : "");
  test_singular = singular_only;
  atomic_store_explicit(&weft_cuda_state, WEFT_CUDA_UNKNOWN, memory_order_release);
  pthread_mutex_unlock(&load_lock);
}
