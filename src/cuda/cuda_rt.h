/*
 * cuda_rt.h — the CUDA driver as seen from libweft: loaded with dlopen on
 * first need (libcuda.so.1, or WEFT_CUDA_DRIVER_LIB), never linked, so one
 * libweft serves machines with and without CUDA. It classifies pointers
 * (host, device, managed) and exposes the few driver calls the later stream
 * design needs. Kernels and the device engine live in libweft-cuda.so
 * (src/kernels/), not here; docs/gpu_memory.md explains the split.
 *
 * The declarations below are written from NVIDIA's public cuda.h (same
 * values, same signatures) so that machines without CUDA headers build.
 * Without a driver, or with no device, weft has "no CUDA": one INFO line,
 * and every pointer is host memory at the cost of one branch.
 */
#ifndef WEFT_CUDA_RT_H
#define WEFT_CUDA_RT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "placement.h"  // the loader state, devices and pointer classification the core asks for

// ---- Minimal driver API types (cuda.h, CUDA 13.0) ----
typedef int weft_CUresult;  // CUresult
typedef int weft_CUdevice;  // CUdevice
typedef unsigned long long weft_CUdeviceptr;  // CUdeviceptr (64-bit hosts only)
typedef struct CUctx_st *weft_CUcontext;
typedef struct CUstream_st *weft_CUstream;
typedef unsigned long long weft_CUmemGenericAllocationHandle;
typedef struct {
  char reserved[64];
} weft_CUipcMemHandle;  // CUipcMemHandle
enum { WEFT_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 0x1 };
enum { WEFT_CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704 };

// cuda.h's CUmemLocation, CUmemAllocationProp and CUmemAccessDesc (VMM).
typedef struct {
  int type;  // CUmemLocationType: WEFT_CU_MEM_LOCATION_TYPE_DEVICE
  int id;    // device ordinal
} weft_CUmemLocation;
typedef struct {
  int type;                   // CUmemAllocationType: WEFT_CU_MEM_ALLOCATION_TYPE_PINNED
  int requestedHandleTypes;   // CUmemAllocationHandleType bits
  weft_CUmemLocation location;
  void *win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
} weft_CUmemAllocationProp;
typedef struct {
  weft_CUmemLocation location;
  int flags;  // CUmemAccess_flags: WEFT_CU_MEM_ACCESS_FLAGS_PROT_READWRITE
} weft_CUmemAccessDesc;

enum {
  WEFT_CUDA_SUCCESS = 0,
  WEFT_CUDA_ERROR_INVALID_VALUE = 1,
  WEFT_CUDA_ERROR_OUT_OF_MEMORY = 2,
  WEFT_CUDA_ERROR_NOT_INITIALIZED = 3,
  WEFT_CUDA_ERROR_INVALID_CONTEXT = 201,
  WEFT_CUDA_ERROR_INVALID_HANDLE = 400,
  WEFT_CUDA_ERROR_NOT_SUPPORTED = 801,
  WEFT_CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
  WEFT_CUDA_ERROR_STUB_LIBRARY = 34,
  WEFT_CUDA_ERROR_NO_DEVICE = 100,
  WEFT_CUDA_ERROR_NOT_READY = 600,
};
enum {  // CUpointer_attribute
  WEFT_CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
  WEFT_CU_POINTER_ATTRIBUTE_IS_MANAGED = 8,
  WEFT_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
};
enum {  // CUmemorytype
  WEFT_CU_MEMORYTYPE_HOST = 1,
  WEFT_CU_MEMORYTYPE_DEVICE = 2,
  WEFT_CU_MEMORYTYPE_ARRAY = 3,
  WEFT_CU_MEMORYTYPE_UNIFIED = 4,
};
enum {  // CUstreamWaitValue_flags, CUstreamWriteValue_flags, cuMemHostRegister flags
  WEFT_CU_STREAM_WAIT_VALUE_GEQ = 0x0,
  WEFT_CU_STREAM_WAIT_VALUE_EQ = 0x1,
  WEFT_CU_STREAM_WRITE_VALUE_DEFAULT = 0x0,
  WEFT_CU_MEMHOSTREGISTER_PORTABLE = 0x01,
  WEFT_CU_MEMHOSTREGISTER_DEVICEMAP = 0x02,
  WEFT_CU_MEMHOSTALLOC_PORTABLE = 0x01,
  WEFT_CU_MEMHOSTALLOC_DEVICEMAP = 0x02,
  WEFT_CU_STREAM_NON_BLOCKING = 0x1,
};
enum {  // CUstreamCaptureStatus
  WEFT_CU_STREAM_CAPTURE_STATUS_NONE = 0,
  WEFT_CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
  WEFT_CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2,
};
enum {  // VMM: CUmemAllocationType, CUmemLocationType, CUmemAllocationHandleType,
        // CUmemAccess_flags, CUmemAllocationGranularity_flags
  WEFT_CU_MEM_ALLOCATION_TYPE_PINNED = 0x1,
  WEFT_CU_MEM_LOCATION_TYPE_DEVICE = 0x1,
  WEFT_CU_MEM_HANDLE_TYPE_NONE = 0x0,
  WEFT_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 0x1,
  WEFT_CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 0x3,
  WEFT_CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0x0,
  WEFT_CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 0x1,
};

// The driver's functions weft uses (exported names: the _v2 ones where cuda.h
// maps the plain name to them). Optional ones may be NULL.
typedef struct {
  weft_CUresult (*cuInit)(unsigned int flags);
  weft_CUresult (*cuDriverGetVersion)(int *version);
  weft_CUresult (*cuDeviceGetCount)(int *count);
  weft_CUresult (*cuPointerGetAttribute)(void *data, int attribute, weft_CUdeviceptr ptr);
  weft_CUresult (*cuPointerGetAttributes)(unsigned int n, int *attributes, void **data,
                                          weft_CUdeviceptr ptr);  // optional
  weft_CUresult (*cuGetErrorString)(weft_CUresult error, const char **text);  // optional
  weft_CUresult (*cuCtxGetCurrent)(weft_CUcontext *ctx);  // optional
  weft_CUresult (*cuStreamQuery)(weft_CUstream stream);  // optional
  weft_CUresult (*cuStreamWriteValue32)(weft_CUstream s, weft_CUdeviceptr addr, uint32_t value,
                                        unsigned int flags);  // optional (_v2)
  weft_CUresult (*cuStreamWaitValue32)(weft_CUstream s, weft_CUdeviceptr addr, uint32_t value,
                                       unsigned int flags);  // optional (_v2)
  weft_CUresult (*cuMemHostRegister)(void *p, size_t bytes, unsigned int flags);  // optional (_v2)
  weft_CUresult (*cuMemHostUnregister)(void *p);  // optional
  weft_CUresult (*cuMemHostGetDevicePointer)(weft_CUdeviceptr *dptr, void *p, unsigned int flags);  // optional (_v2)
  // The device engine (src/cuda/cuda_stream.c): every one of these, or no engine.
  weft_CUresult (*cuCtxPushCurrent)(weft_CUcontext ctx);   // _v2
  weft_CUresult (*cuCtxPopCurrent)(weft_CUcontext *ctx);   // _v2
  weft_CUresult (*cuCtxGetDevice)(weft_CUdevice *dev);
  weft_CUresult (*cuStreamGetCtx)(weft_CUstream s, weft_CUcontext *ctx);
  weft_CUresult (*cuStreamIsCapturing)(weft_CUstream s, int *status);  // CUstreamCaptureStatus
  weft_CUresult (*cuStreamSynchronize)(weft_CUstream s);
  weft_CUresult (*cuMemcpyAsync)(weft_CUdeviceptr dst, weft_CUdeviceptr src, size_t bytes, weft_CUstream s);
  weft_CUresult (*cuMemHostAlloc)(void **p, size_t bytes, unsigned int flags);
  weft_CUresult (*cuMemFreeHost)(void *p);
  // Virtual memory management (ncclMemAlloc): every one of these, or none.
  weft_CUresult (*cuMemGetAllocationGranularity)(size_t *granularity, const weft_CUmemAllocationProp *prop,
                                                 int option);
  weft_CUresult (*cuMemCreate)(weft_CUmemGenericAllocationHandle *h, size_t bytes,
                               const weft_CUmemAllocationProp *prop, unsigned long long flags);
  weft_CUresult (*cuMemRelease)(weft_CUmemGenericAllocationHandle h);
  weft_CUresult (*cuMemAddressReserve)(weft_CUdeviceptr *p, size_t bytes, size_t alignment, weft_CUdeviceptr addr,
                                       unsigned long long flags);
  weft_CUresult (*cuMemAddressFree)(weft_CUdeviceptr p, size_t bytes);
  weft_CUresult (*cuMemMap)(weft_CUdeviceptr p, size_t bytes, size_t offset, weft_CUmemGenericAllocationHandle h,
                            unsigned long long flags);
  weft_CUresult (*cuMemUnmap)(weft_CUdeviceptr p, size_t bytes);
  weft_CUresult (*cuMemSetAccess)(weft_CUdeviceptr p, size_t bytes, const weft_CUmemAccessDesc *desc, size_t count);
  weft_CUresult (*cuMemExportToShareableHandle)(void *shareable, weft_CUmemGenericAllocationHandle h, int type,
                                                unsigned long long flags);
  weft_CUresult (*cuMemImportFromShareableHandle)(weft_CUmemGenericAllocationHandle *h, void *os_handle, int type);
  // The IPC path (src/cuda/cuda_ipc.c): every one of these, or no IPC path.
  weft_CUresult (*cuMemAlloc)(weft_CUdeviceptr *p, size_t bytes);      // _v2
  weft_CUresult (*cuMemFree)(weft_CUdeviceptr p);                       // _v2
  weft_CUresult (*cuMemsetD8)(weft_CUdeviceptr p, unsigned char v, size_t n);  // _v2
  weft_CUresult (*cuIpcGetMemHandle)(weft_CUipcMemHandle *h, weft_CUdeviceptr p);
  weft_CUresult (*cuIpcOpenMemHandle)(weft_CUdeviceptr *p, weft_CUipcMemHandle h, unsigned int flags);  // _v2
  weft_CUresult (*cuIpcCloseMemHandle)(weft_CUdeviceptr p);
  weft_CUresult (*cuStreamCreate)(weft_CUstream *s, unsigned int flags);
  weft_CUresult (*cuStreamDestroy)(weft_CUstream s);  // _v2
  // Optional even there: ranks in one process on two devices need them.
  weft_CUresult (*cuDeviceCanAccessPeer)(int *can, weft_CUdevice dev, weft_CUdevice peer);
  weft_CUresult (*cuCtxEnablePeerAccess)(weft_CUcontext peer, unsigned int flags);
  // Optional: ncclCommInitAll makes each device's primary context current.
  weft_CUresult (*cuDevicePrimaryCtxRetain)(weft_CUcontext *ctx, weft_CUdevice dev);
  weft_CUresult (*cuCtxSetCurrent)(weft_CUcontext ctx);
  weft_CUresult (*cuDeviceGetPCIBusId)(char *bus_id, int len, weft_CUdevice dev);  // optional
} weft_cuda_driver_t;

// The groups of optional calls above, each present only if all its members are.
int weft_cuda_has_engine(const weft_cuda_driver_t *d);
int weft_cuda_has_vmm(const weft_cuda_driver_t *d);
int weft_cuda_has_ipc(const weft_cuda_driver_t *d);

// ---- Loader state ----
// The driver's function table, or NULL when CUDA is absent (loads first).
const weft_cuda_driver_t *weft_cuda_driver(void);
// The calling thread's current context, or NULL.
weft_CUcontext weft_cuda_current_context(void);

// Tests: forget the loaded driver (dlclose it) and load `lib` next time
// instead of WEFT_CUDA_DRIVER_LIB / libcuda.so.1 (NULL: back to those).
// `singular_only` ignores cuPointerGetAttributes, to cover the fallback.
// Not thread-safe against concurrent classification.
void weft_cuda_test_reset(const char *lib, int singular_only);

#endif
