/*
 * mem_cuda.c — ncclMemAlloc's device backend, through the CUDA driver's
 * virtual memory management (VMM) calls, as NCCL does: physical memory on
 * the device of the calling thread's current context (cuMemCreate, pinned,
 * asking for a POSIX file descriptor handle so a peer process can import
 * it), a virtual range reserved for it (cuMemAddressReserve), the two mapped
 * together (cuMemMap) and made readable and writable by that device
 * (cuMemSetAccess). The size is rounded up to the driver's recommended
 * granularity. Every failure undoes exactly what was done, in reverse.
 *
 * Applies only where the driver is loaded (src/cuda/cuda_rt.c), has every VMM
 * call, and the calling thread has a current context; otherwise the caller
 * falls back to host memory (mem_host.c), as docs/gpu_memory.md describes.
 */
#include <stdint.h>

#include "checks.h"
#include "cuda_rt.h"
#include "mem.h"

static ncclResult_t cu_fail(const char *call, weft_CUresult r, size_t size) {
  WARN("ncclMemAlloc(size=%zu): %s failed: CUDA error %d (%s)", size, call, r, weft_cuda_error_text(r));
  return ncclUnhandledCudaError;
}

// A cleanup call that failed while unwinding: said, not returned (the
// original failure is what the caller learns).
static void cu_unwind(const char *call, weft_CUresult r, size_t size) {
  if (r != WEFT_CUDA_SUCCESS)
    WARN("ncclMemAlloc(size=%zu): %s while unwinding failed: CUDA error %d (%s)", size, call, r,
         weft_cuda_error_text(r));
}

ncclResult_t weft_mem_cuda_alloc(size_t size, weft_mem_block_t *b, int *made, const char **why) {
  *made = 0;
  *why = NULL;
  if (weft_cuda_load() != WEFT_CUDA_PRESENT) {
    *why = "no CUDA driver";
    return ncclSuccess;
  }
  const weft_cuda_driver_t *d = weft_cuda_driver();
  if (!weft_cuda_has_vmm(d)) {
    *why = "the CUDA driver lacks the VMM calls";
    return ncclSuccess;
  }
  weft_CUcontext ctx = NULL;
  if (d->cuCtxGetCurrent(&ctx) != WEFT_CUDA_SUCCESS || ctx == NULL) {
    *why = "no current CUDA context on this thread";
    return ncclSuccess;
  }

  weft_CUdevice dev = -1;
  weft_CUresult r = d->cuCtxGetDevice(&dev);
  if (r != WEFT_CUDA_SUCCESS) return cu_fail("cuCtxGetDevice", r, size);
  weft_CUmemAllocationProp prop = {0};
  prop.type = WEFT_CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = WEFT_CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  prop.requestedHandleTypes = WEFT_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t gran = 0;
  r = d->cuMemGetAllocationGranularity(&gran, &prop, WEFT_CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  if (r != WEFT_CUDA_SUCCESS) return cu_fail("cuMemGetAllocationGranularity", r, size);
  if (gran == 0) {
    WARN("ncclMemAlloc(size=%zu): cuMemGetAllocationGranularity gave a granularity of 0 on device %d", size, dev);
    return ncclUnhandledCudaError;
  }
  if (size > SIZE_MAX - (gran - 1)) {
    WARN("ncclMemAlloc: size=%zu overflows when rounded up to the granularity %zu", size, gran);
    return ncclInvalidArgument;
  }
  size_t bytes = (size + gran - 1) / gran * gran;

  // Physical memory, shareable by file descriptor where the device allows it.
  weft_CUmemGenericAllocationHandle h = 0;
  int exportable = 1;
  r = d->cuMemCreate(&h, bytes, &prop, 0);
  if (r == WEFT_CUDA_ERROR_NOT_SUPPORTED || r == WEFT_CUDA_ERROR_INVALID_VALUE) {
    INFO(WEFT_LOG_ALLOC, "ncclMemAlloc: cuMemCreate with a POSIX file descriptor handle on device %d failed: %d (%s); "
         "retrying without a shareable handle (the block cannot be exported)", dev, r, weft_cuda_error_text(r));
    prop.requestedHandleTypes = WEFT_CU_MEM_HANDLE_TYPE_NONE;
    exportable = 0;
    r = d->cuMemCreate(&h, bytes, &prop, 0);
  }
  if (r != WEFT_CUDA_SUCCESS) return cu_fail("cuMemCreate", r, size);

  ncclResult_t res;
  weft_CUdeviceptr va = 0;
  const weft_CUmemAccessDesc access = {.location = {WEFT_CU_MEM_LOCATION_TYPE_DEVICE, dev},
                                       .flags = WEFT_CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  r = d->cuMemAddressReserve(&va, bytes, gran, 0, 0);
  if (r != WEFT_CUDA_SUCCESS) {
    res = cu_fail("cuMemAddressReserve", r, size);
    goto release;
  }
  r = d->cuMemMap(va, bytes, 0, h, 0);
  if (r != WEFT_CUDA_SUCCESS) {
    res = cu_fail("cuMemMap", r, size);
    goto free_va;
  }
  r = d->cuMemSetAccess(va, bytes, &access, 1);
  if (r != WEFT_CUDA_SUCCESS) {
    res = cu_fail("cuMemSetAccess", r, size);
    goto unmap;
  }

  *b = (weft_mem_block_t){.ptr = (void *)(uintptr_t)va, .size = bytes, .requested = size, .kind = WEFT_MEM_DEVICE,
                          .device = dev, .fd = -1, .handle = h, .exportable = exportable};
  *made = 1;
  return ncclSuccess;

unmap:
  cu_unwind("cuMemUnmap", d->cuMemUnmap(va, bytes), size);
free_va:
  cu_unwind("cuMemAddressFree", d->cuMemAddressFree(va, bytes), size);
release:
  cu_unwind("cuMemRelease", d->cuMemRelease(h), size);
  return res;
}

// One step of freeing: WARNed, and the first failure kept.
static void free_step(const char *call, weft_CUresult r, const void *ptr, ncclResult_t *res) {
  if (r == WEFT_CUDA_SUCCESS) return;
  WARN("ncclMemFree(ptr=%p): %s failed: CUDA error %d (%s)", ptr, call, r, weft_cuda_error_text(r));
  if (*res == ncclSuccess) *res = ncclUnhandledCudaError;
}

ncclResult_t weft_mem_cuda_free(const weft_mem_block_t *b) {
  const weft_cuda_driver_t *d = weft_cuda_driver();
  if (!weft_cuda_has_vmm(d)) {
    WARN("ncclMemFree(ptr=%p): device block of %zu bytes on device %d, but the CUDA driver is no longer loaded",
         b->ptr, b->size, b->device);
    return ncclUnhandledCudaError;
  }
  weft_CUdeviceptr va = (weft_CUdeviceptr)(uintptr_t)b->ptr;
  ncclResult_t res = ncclSuccess;
  free_step("cuMemUnmap", d->cuMemUnmap(va, b->size), b->ptr, &res);
  free_step("cuMemAddressFree", d->cuMemAddressFree(va, b->size), b->ptr, &res);
  free_step("cuMemRelease", d->cuMemRelease(b->handle), b->ptr, &res);
  return res;
}
