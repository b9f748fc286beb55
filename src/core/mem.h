/*
 * mem.h — ncclMemAlloc's blocks and the two backends that make them.
 *
 * src/core/mem.c owns the public entry points and the table of live blocks;
 * src/core/mem_host.c makes host blocks (a memfd mapped shared, so a peer process
 * can map the same pages); src/cuda/mem_cuda.c makes device blocks through the
 * CUDA driver's virtual memory management calls (cuMemCreate, reserve, map,
 * set access), as NCCL does. weft_mem_block_find lets later code (a CUDA IPC
 * transport) ask whether an address lies inside such a block.
 */
#ifndef WEFT_MEM_H
#define WEFT_MEM_H

#include <stddef.h>

#include "nccl.h"
#include "placement.h"

typedef struct {
  void *ptr;                               // base address, what ncclMemAlloc returned
  size_t size;                             // bytes mapped (device: rounded up to the granularity)
  size_t requested;                        // bytes the caller asked for
  weft_mem_kind_t kind;                    // WEFT_MEM_HOST or WEFT_MEM_DEVICE
  int device;                              // device ordinal; -1 for host blocks
  int fd;                                  // host: the memfd; device: -1
  unsigned long long handle;               // device: the VMM allocation handle (CUmemGenericAllocationHandle)
  int exportable;                          // a peer can map it (host: memfd; device: POSIX fd handle type)
} weft_mem_block_t;

// Host backend (mem_host.c). Fills *b with a block of `size` bytes; on
// failure WARNs and leaves nothing behind.
ncclResult_t weft_mem_host_alloc(size_t size, weft_mem_block_t *b);
void weft_mem_host_free(const weft_mem_block_t *b);

// Device backend (mem_cuda.c). When the driver is loaded, has the VMM calls
// and the calling thread has a current context, makes a device block on that
// context's device and sets *made = 1; otherwise sets *made = 0 and returns
// ncclSuccess (the caller falls back to host memory), `why` then saying why
// in a few words. A driver failure unwinds what was done, WARNs and returns
// ncclUnhandledCudaError with *made = 0.
ncclResult_t weft_mem_cuda_alloc(size_t size, weft_mem_block_t *b, int *made, const char **why);
// Unmaps, frees the address range and releases the handle; every step is
// tried, the first failure WARNed and returned (ncclUnhandledCudaError).
ncclResult_t weft_mem_cuda_free(const weft_mem_block_t *b);

// Whether `ptr` lies inside a live ncclMemAlloc block ([ptr, ptr + size) of
// the block as mapped). Returns 1 and copies the block to *out (out may be
// NULL), or 0. The copy stays meaningful only while the block is not freed:
// the caller must not race ncclMemFree of the same block.
int weft_mem_block_find(const void *ptr, weft_mem_block_t *out);

#endif
