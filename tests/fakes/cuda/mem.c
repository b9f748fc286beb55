/*
 * mem.c — the memory the fake driver knows (see fake.h): device memory
 * (cuMemAlloc, first fit in a per-device arena), managed memory, pinned and
 * registered host memory; what cuPointerGetAttribute(s) and
 * cuMemGetAddressRange say about an address; the synchronous copies; and
 * fk_translate, the one place that decides whether a copy may touch a range
 * and where the host can reach it.
 *
 * A device arena is a memfd (FAKE_CUDA_ARENA_MB, sparse) mapped PROT_NONE
 * where cuMemAlloc hands out addresses, so that a host memcpy crashes as it
 * would on a GPU, and mapped read-write elsewhere (the alias) for the fake's
 * own copies. Allocations are 256-byte aligned; a copy that runs past the
 * size asked for fails with CUDA_ERROR_INVALID_VALUE instead of silently
 * reading the neighbour. Managed memory is an ordinary read-write mapping.
 *
 * Simplifications: boolean pointer attributes are written as int; the
 * synchronous copies complete fully before returning, whatever the memory
 * (the driver may return early for small pageable copies).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake.h"

// ---- Regions ----

fk_region *fk_region_find(uintptr_t addr) {
  for (fk_region *r = fk.regions; r != NULL; r = r->next)
    if (addr >= r->start && addr - r->start < r->bytes) return r;
  return NULL;
}

void fk_region_add(fk_region *r) {
  r->id = ++fk.next_id;
  r->next = fk.regions;
  fk.regions = r;
}

void fk_region_remove(fk_region *r) {
  for (fk_region **p = &fk.regions; *p != NULL; p = &(*p)->next)
    if (*p == r) {
      *p = r->next;
      return;
    }
}

static int overlaps(uintptr_t a, size_t an, uintptr_t b, size_t bn) { return a < b + bn && b < a + an; }

int fk_in_device_space(uintptr_t start, size_t bytes) {
  for (int d = 0; d < FK_MAX_DEVICES; d++)
    if (fk.arena[d].base != NULL && overlaps(start, bytes, (uintptr_t)fk.arena[d].base, fk.arena[d].size)) return 1;
  for (struct fk_resv *v = fk.resvs; v != NULL; v = v->next)
    if (overlaps(start, bytes, v->start, v->size)) return 1;
  for (fk_region *r = fk.regions; r != NULL; r = r->next)
    if (r->kind == FK_IPC && overlaps(start, bytes, (uintptr_t)r->map_dev, r->map_len)) return 1;
  return 0;
}

static fk_region *first_overlap(uintptr_t start, size_t bytes) {
  for (fk_region *r = fk.regions; r != NULL; r = r->next)
    if (overlaps(start, bytes, r->start, r->bytes)) return r;
  return NULL;
}

CUresult fk_translate(uintptr_t addr, size_t bytes, unsigned how, int device, void **host) {
  *host = (void *)addr;
  if (bytes == 0) return CUDA_SUCCESS;
  uintptr_t end = addr + bytes;
  if (addr == 0 || end < addr) return CUDA_ERROR_INVALID_VALUE;
  fk_region *r = fk_region_find(addr);
  if (r == NULL)  // pageable host memory: never part of device address space
    return (how & FK_DEV) || fk_in_device_space(addr, bytes) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
  switch (r->kind) {
    case FK_DEVICE:
    case FK_IPC:
      if (end > r->start + r->bytes) return CUDA_ERROR_INVALID_VALUE;
      *host = r->alias + (addr - r->start);
      return CUDA_SUCCESS;
    case FK_VMM: {
      // Adjacent mappings of one reservation are contiguous, in both views.
      unsigned bit = device >= 0 ? 1u << device : ~0u;
      for (uintptr_t at = addr; at < end;) {
        fk_region *m = at == addr ? r : fk_region_find(at);
        if (m == NULL || m->kind != FK_VMM || m->resv != r->resv) return CUDA_ERROR_INVALID_VALUE;
        if (((how & FK_RD) && !(m->read_mask & bit)) || ((how & FK_WR) && !(m->write_mask & bit)))
          return CUDA_ERROR_INVALID_VALUE;  // mapped, but cuMemSetAccess did not allow it
        at = m->start + m->bytes;
      }
      *host = r->resv->alias + (addr - r->resv->start);
      return CUDA_SUCCESS;
    }
    case FK_MANAGED:
      if (how & FK_NOMANAGED) return CUDA_ERROR_INVALID_VALUE;
      return end > r->start + r->bytes ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    case FK_PINNED:
    case FK_REGISTERED:
      if ((how & FK_WR) && r->kind == FK_REGISTERED && (r->flags & CU_MEMHOSTREGISTER_READ_ONLY))
        return CUDA_ERROR_INVALID_VALUE;
      if (end > r->start + r->bytes && ((how & FK_DEV) || fk_in_device_space(addr, bytes)))
        return CUDA_ERROR_INVALID_VALUE;  // a host range may run on into pageable memory, no further
      return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;
}

// ---- Device arenas: first fit ----

static CUresult arena_open(int d) {
  fk_arena *a = &fk.arena[d];
  if (a->base != NULL) return CUDA_SUCCESS;
  char name[48];
  snprintf(name, sizeof(name), "weft-fake-cuda-arena-%d", d);
  int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  void *base = MAP_FAILED, *alias = MAP_FAILED;
  fk_free *block = calloc(1, sizeof(*block));
  if (block != NULL && ftruncate(fd, (off_t)fk.arena_bytes) == 0) {
    base = mmap(NULL, fk.arena_bytes, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    alias = mmap(NULL, fk.arena_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  }
  if (block == NULL || base == MAP_FAILED || alias == MAP_FAILED) {
    if (base != MAP_FAILED) munmap(base, fk.arena_bytes);
    if (alias != MAP_FAILED) munmap(alias, fk.arena_bytes);
    free(block);
    close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *block = (fk_free){NULL, 0, fk.arena_bytes};
  *a = (fk_arena){fd, base, alias, fk.arena_bytes, block};
  return CUDA_SUCCESS;
}

static CUresult arena_alloc(int d, size_t bytes, size_t *off, size_t *len) {
  CUresult r = arena_open(d);
  if (r != CUDA_SUCCESS) return r;
  size_t need = (bytes + FK_ALIGN - 1) & ~(size_t)(FK_ALIGN - 1);
  if (need < bytes) return CUDA_ERROR_OUT_OF_MEMORY;
  for (fk_free **p = &fk.arena[d].free; *p != NULL; p = &(*p)->next) {
    fk_free *b = *p;
    if (b->len < need) continue;
    *off = b->off, *len = need;
    b->off += need, b->len -= need;
    if (b->len == 0) *p = b->next, free(b);
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_OUT_OF_MEMORY;
}

static void arena_free(int d, size_t off, size_t len) {
  fk_free **p = &fk.arena[d].free, *prev = NULL;
  while (*p != NULL && (*p)->off < off) prev = *p, p = &(*p)->next;
  fk_free *next = *p;
  if (prev != NULL && prev->off + prev->len == off) {  // merge with the block before
    prev->len += len;
    if (next != NULL && prev->off + prev->len == next->off) prev->len += next->len, prev->next = next->next, free(next);
  } else if (next != NULL && off + len == next->off) {  // or the one after
    next->off = off, next->len += len;
  } else {
    fk_free *b = malloc(sizeof(*b));
    if (b == NULL) return;  // the block is lost to the arena, nothing worse
    *b = (fk_free){next, off, len};
    *p = b;
  }
}

static CUresult device_alloc(int d, fk_ctx *c, size_t bytes, uintptr_t *out) {
  fk_region *r = calloc(1, sizeof(*r));
  if (r == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult res = arena_alloc(d, bytes, &r->arena_off, &r->arena_len);
  if (res != CUDA_SUCCESS) {
    free(r);
    return res;
  }
  r->kind = FK_DEVICE, r->device = d, r->ctx = c, r->bytes = bytes;
  r->start = (uintptr_t)fk.arena[d].base + r->arena_off;
  r->alias = fk.arena[d].alias + r->arena_off;
  fk_region_add(r);
  *out = r->start;
  return CUDA_SUCCESS;
}

// ---- Device and managed memory ----

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes) {
  FK_API();
  if (dptr == NULL || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fk.lock);
  CUresult r = CUDA_SUCCESS;
  fk_ctx *c = fk_ctx_for_alloc(&r);
  if (r == CUDA_SUCCESS) r = fk_capture_check_unsafe();
  uintptr_t p = 0;
  if (r == CUDA_SUCCESS) r = device_alloc(c->device, c, bytes, &p);
  pthread_mutex_unlock(&fk.lock);
  if (r == CUDA_SUCCESS) *dptr = p;
  return r;
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes, unsigned int flags) {
  FK_API();
  if (dptr == NULL || bytes == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fk.lock);
  CUresult r = CUDA_SUCCESS;
  fk_ctx *c = fk_ctx_for_alloc(&r);
  if (r == CUDA_SUCCESS) r = fk_capture_check_unsafe();
  fk_region *reg = r == CUDA_SUCCESS ? calloc(1, sizeof(*reg)) : NULL;
  void *p = reg != NULL ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;
  if (r == CUDA_SUCCESS && p == MAP_FAILED) {
    free(reg);
    r = CUDA_ERROR_OUT_OF_MEMORY;
  } else if (r == CUDA_SUCCESS) {
    reg->kind = FK_MANAGED, reg->start = (uintptr_t)p, reg->bytes = bytes, reg->device = c->device, reg->ctx = c;
    reg->flags = flags;
    fk_region_add(reg);
    *dptr = (CUdeviceptr)(uintptr_t)p;
  }
  pthread_mutex_unlock(&fk.lock);
  return r;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  FK_API();
  if (dptr == 0) return CUDA_SUCCESS;  // as the driver does
  pthread_mutex_lock(&fk.lock);
  CUresult res = fk_capture_check_unsafe();
  fk_region *r = res == CUDA_SUCCESS ? fk_region_find((uintptr_t)dptr) : NULL;
  if (res == CUDA_SUCCESS && (r == NULL || r->start != dptr || (r->kind != FK_DEVICE && r->kind != FK_MANAGED)))
    res = CUDA_ERROR_INVALID_VALUE;
  if (res == CUDA_SUCCESS) {
    fk_region_remove(r);
    if (r->kind == FK_DEVICE) arena_free(r->device, r->arena_off, r->arena_len);
    else munmap((void *)r->start, r->bytes);
    free(r);
  }
  pthread_mutex_unlock(&fk.lock);
  return res;
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
  FK_API();
  if (free_bytes == NULL || total == NULL) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fk.lock);
  fk_ctx *c = fk_current();
  if (c != NULL) {
    fk_arena *a = &fk.arena[c->device];
    size_t avail = a->base == NULL ? fk.arena_bytes : 0;
    for (fk_free *b = a->free; b != NULL; b = b->next) avail += b->len;
    *free_bytes = avail, *total = fk.arena_bytes;
  }
  pthread_mutex_unlock(&fk.lock);
  return c == NULL ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}

// ---- Host memory ----

static CUresult host_alloc(void **pp, size_t bytes, unsigned flags) {
  if (pp == NULL || (flags & ~7u) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (bytes == 0) {  // the driver succeeds; here with NULL, which cuMemFreeHost accepts
    *pp = NULL;
    return CUDA_SUCCESS;
  }
  pthread_mutex_lock(&fk.lock);
  CUresult r = CUDA_SUCCESS;
  fk_ctx *c = fk_ctx_for_alloc(&r);
  if (r == CUDA_SUCCESS) r = fk_capture_check_unsafe();
  fk_region *reg = r == CUDA_SUCCESS ? calloc(1, sizeof(*reg)) : NULL;
  void *p = reg != NULL ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;
  if (r == CUDA_SUCCESS && p == MAP_FAILED) {
    free(reg);
    r = CUDA_ERROR_OUT_OF_MEMORY;
  } else if (r == CUDA_SUCCESS) {
    reg->kind = FK_PINNED, reg->start = (uintptr_t)p, reg->bytes = bytes, reg->device = c->device, reg->ctx = c;
    reg->flags = flags;
    fk_region_add(reg);
    *pp = p;
  }
  pthread_mutex_unlock(&fk.lock);
  return r;
}

// Pinning and unpinning host memory synchronise the context (the CUDA
// guide's "implicit synchronization"; cudaFreeHost blocks until the device
// is idle): the caller waits here for every stream of its context to drain.
// Code that queues a stream wait and only then allocates deadlocks here as
// it does on a GPU.
static void implicit_sync(fk_ctx *c) {
  if (c != NULL) fk_ctx_sync(c);
}

EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytes, unsigned int flags) {
  FK_API();
  implicit_sync(fk_current());
  return host_alloc(pp, bytes, flags);
}

EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytes) {
  FK_API();
  implicit_sync(fk_current());
  return host_alloc(pp, bytes, 0);
}

EXPORT CUresult cuMemFreeHost(void *p) {
  FK_API();
  if (p == NULL) return CUDA_SUCCESS;
  implicit_sync(fk_current());
  pthread_mutex_lock(&fk.lock);
  CUresult res = fk_capture_check_unsafe();
  fk_region *r = res == CUDA_SUCCESS ? fk_region_find((uintptr_t)p) : NULL;
  if (res == CUDA_SUCCESS && (r == NULL || r->kind != FK_PINNED || r->start != (uintptr_t)p))
    res = CUDA_ERROR_INVALID_VALUE;
  if (res == CUDA_SUCCESS) {
    fk_region_remove(r);
    munmap(p, r->bytes);
    free(r);
  }
  pthread_mutex_unlock(&fk.lock);
  return res;
}

EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytes, unsigned int flags) {
  FK_API();
  if (p == NULL || bytes == 0 || (flags & ~0xfu) != 0 || (uintptr_t)p + bytes < (uintptr_t)p)
    return CUDA_ERROR_INVALID_VALUE;
  if (flags & CU_MEMHOSTREGISTER_IOMEMORY) return CUDA_ERROR_NOT_SUPPORTED;
  pthread_mutex_lock(&fk.lock);
  CUresult r = CUDA_SUCCESS;
  fk_ctx *c = fk_ctx_for_alloc(&r);
  if (r == CUDA_SUCCESS) r = fk_capture_check_unsafe();
  fk_region *old = r == CUDA_SUCCESS ? first_overlap((uintptr_t)p, bytes) : NULL;
  if (r == CUDA_SUCCESS && old != NULL)
    r = old->kind == FK_PINNED || old->kind == FK_REGISTERED ? CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
                                                             : CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS && fk_in_device_space((uintptr_t)p, bytes)) r = CUDA_ERROR_INVALID_VALUE;
  fk_region *reg = r == CUDA_SUCCESS ? calloc(1, sizeof(*reg)) : NULL;
  if (r == CUDA_SUCCESS && reg == NULL) r = CUDA_ERROR_OUT_OF_MEMORY;
  if (r == CUDA_SUCCESS) {
    reg->kind = FK_REGISTERED, reg->start = (uintptr_t)p, reg->bytes = bytes, reg->device = c->device, reg->ctx = c;
    reg->flags = flags;
    fk_region_add(reg);
  }
  pthread_mutex_unlock(&fk.lock);
  return r;
}

EXPORT CUresult cuMemHostUnregister(void *p) {
  FK_API();
  if (p == NULL) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fk.lock);
  fk_region *r = fk_region_find((uintptr_t)p);
  CUresult res = r == NULL || r->kind != FK_REGISTERED ? CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED
                 : r->start != (uintptr_t)p           ? CUDA_ERROR_INVALID_VALUE  // inside a registration
                                                      : CUDA_SUCCESS;
  if (res == CUDA_SUCCESS) fk_region_remove(r), free(r);
  pthread_mutex_unlock(&fk.lock);
  return res;
}

// Pinned and registered memory is mapped for every device at its host address.
EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *dptr, void *p, unsigned int flags) {
  FK_API();
  if (dptr == NULL || p == NULL || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fk.lock);
  fk_region *r = fk_region_find((uintptr_t)p);
  int ok = r != NULL && (r->kind == FK_PINNED || r->kind == FK_REGISTERED);
  pthread_mutex_unlock(&fk.lock);
  if (!ok) return CUDA_ERROR_INVALID_VALUE;
  *dptr = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemHostGetFlags(unsigned int *flags, void *p) {
  FK_API();
  if (flags == NULL || p == NULL) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fk.lock);
  fk_region *r = fk_region_find((uintptr_t)p);
  int ok = r != NULL && r->kind == FK_PINNED;
  if (ok) *flags = r->flags;
  pthread_mutex_unlock(&fk.lock);
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// ---- Pointer attributes ----

typedef struct {
  int known, has_dptr, has_hptr, managed, ordinal, ipc_capable;
  unsigned type;
  fk_ctx *ctx;
  uintptr_t dptr, hptr, range_start;
  size_t range_size;
  uint64_t id;
} ptr_info;

static void describe(uintptr_t p, ptr_info *pi) {
  *pi = (ptr_info){.ordinal = -2};  // CU_DEVICE_INVALID, as the driver answers
  fk_region *r = fk_region_find(p);
  if (r == NULL) return;
  pi->known = 1, pi->id = r->id, pi->ordinal = r->device, pi->ctx = r->ctx;
  pi->has_dptr = 1, pi->dptr = p, pi->range_start = r->start, pi->range_size = r->bytes;
  switch (r->kind) {
    case FK_DEVICE: pi->type = CU_MEMORYTYPE_DEVICE, pi->ipc_capable = 1; break;
    case FK_IPC: pi->type = CU_MEMORYTYPE_DEVICE; break;
    case FK_VMM:  // the range is the reservation's (cuda.h)
      pi->type = CU_MEMORYTYPE_DEVICE, pi->range_start = r->resv->start, pi->range_size = r->resv->size;
      pi->ctx = r->device < fk.ndev ? &fk.ctx[r->device] : NULL;
      break;
    case FK_MANAGED: pi->type = CU_MEMORYTYPE_DEVICE, pi->managed = 1, pi->has_hptr = 1, pi->hptr = p; break;
    case FK_PINNED:
    case FK_REGISTERED: pi->type = CU_MEMORYTYPE_HOST, pi->has_hptr = 1, pi->hptr = p; break;
  }
}

// Writes one attribute. `strict` (cuPointerGetAttribute): an attribute the
// address lacks is CUDA_ERROR_INVALID_VALUE; otherwise its zero is written.
static CUresult put_attr(void *data, int attr, const ptr_info *pi, int strict) {
  int i;
  unsigned long long u;
  void *v;
  switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      if (strict && pi->ctx == NULL) return CUDA_ERROR_INVALID_VALUE;
      v = pi->ctx, memcpy(data, &v, sizeof(v));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: memcpy(data, &pi->type, sizeof(pi->type)); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_HOST_POINTER: {
      int has = attr == CU_POINTER_ATTRIBUTE_HOST_POINTER ? pi->has_hptr : pi->has_dptr;
      if (strict && !has) return CUDA_ERROR_INVALID_VALUE;
      u = !has ? 0 : attr == CU_POINTER_ATTRIBUTE_HOST_POINTER ? pi->hptr : pi->dptr;
      if (attr == CU_POINTER_ATTRIBUTE_HOST_POINTER) v = (void *)(uintptr_t)u, memcpy(data, &v, sizeof(v));
      else memcpy(data, &u, sizeof(u));
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: u = pi->id, memcpy(data, &u, sizeof(u)); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: i = pi->managed, memcpy(data, &i, sizeof(i)); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: i = pi->ordinal, memcpy(data, &i, sizeof(i)); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
      i = pi->ipc_capable, memcpy(data, &i, sizeof(i));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: u = pi->range_start, memcpy(data, &u, sizeof(u)); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: memcpy(data, &pi->range_size, sizeof(size_t)); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED: i = pi->known, memcpy(data, &i, sizeof(i)); return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

EXPORT CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr ptr) {
  FK_API();
  if (data == NULL) return CUDA_ERROR_INVALID_VALUE;
  atomic_fetch_add(&fk.query_calls, 1);
  ptr_info pi;
  pthread_mutex_lock(&fk.lock);
  describe((uintptr_t)ptr, &pi);
  pthread_mutex_unlock(&fk.lock);
  return pi.known ? put_attr(data, attr, &pi, 1) : CUDA_ERROR_INVALID_VALUE;
}

// An address the driver does not know is no error here: zeros (ordinal -2).
EXPORT CUresult cuPointerGetAttributes(unsigned int n, int *attrs, void **data, CUdeviceptr ptr) {
  FK_API();
  if (n == 0 || attrs == NULL || data == NULL) return CUDA_ERROR_INVALID_VALUE;
  atomic_fetch_add(&fk.query_calls, 1);
  ptr_info pi;
  pthread_mutex_lock(&fk.lock);
  describe((uintptr_t)ptr, &pi);
  pthread_mutex_unlock(&fk.lock);
  for (unsigned int i = 0; i < n; i++)
    if (data[i] == NULL || put_attr(data[i], attrs[i], &pi, 0) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr dptr) {
  FK_API();
  pthread_mutex_lock(&fk.lock);
  fk_region *r = fk_region_find((uintptr_t)dptr);
  int ok = r != NULL && r->kind != FK_VMM;  // the driver does not say for VMM mappings
  if (ok && base != NULL) *base = r->start;
  if (ok && size != NULL) *size = r->bytes;
  pthread_mutex_unlock(&fk.lock);
  return ok ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

// ---- Synchronous copies: in order on the current context's legacy stream ----

static CUresult copy_sync(CUdeviceptr dst, CUdeviceptr src, size_t n, unsigned dst_how, unsigned src_how) {
  fk_op op = {.kind = FK_OP_COPY, .dst = dst, .src = src, .bytes = n, .dst_how = FK_WR | dst_how,
              .src_how = FK_RD | src_how};
  return fk_sync_op(&op);
}

EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  FK_API();
  return copy_sync(dst, src, n, 0, 0);
}
// The host side of HtoD/DtoH may be any memory (with unified addressing the
// driver copies from or to device memory too); the device side may not be
// pageable.
EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
  FK_API();
  return copy_sync(dst, (CUdeviceptr)(uintptr_t)src, n, FK_DEV, 0);
}
EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
  FK_API();
  return copy_sync((CUdeviceptr)(uintptr_t)dst, src, n, 0, FK_DEV);
}
EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  FK_API();
  return copy_sync(dst, src, n, FK_DEV, FK_DEV);
}

static CUresult set_sync(CUdeviceptr dst, uint64_t value, unsigned width, size_t n) {
  if (n > SIZE_MAX / width || (dst & (width - 1)) != 0) return CUDA_ERROR_INVALID_VALUE;
  fk_op op = {.kind = FK_OP_SET, .dst = dst, .bytes = n * width, .width = width, .value = value,
              .dst_how = FK_WR | FK_DEV};
  return fk_sync_op(&op);
}

EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char uc, size_t n) {
  FK_API();
  return set_sync(dst, uc, 1, n);
}
EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int ui, size_t n) {
  FK_API();
  return set_sync(dst, ui, 4, n);
}

// ---- Test hooks (not driver API) ----

// Device memory of a chosen device, whatever the current context.
EXPORT void *fake_cuda_alloc_on(int dev, size_t bytes) {
  if (!atomic_load(&fk.inited) || dev < 0 || dev >= fk.ndev || bytes == 0) return NULL;
  uintptr_t p = 0;
  pthread_mutex_lock(&fk.lock);
  CUresult r = device_alloc(dev, &fk.ctx[dev], bytes, &p);
  pthread_mutex_unlock(&fk.lock);
  return r == CUDA_SUCCESS ? (void *)p : NULL;
}

// One past the last byte of the highest live cuMemAlloc block of a device:
// the end of what the driver knows there.
EXPORT void *fake_cuda_device_end(int dev) {
  uintptr_t end = 0;
  pthread_mutex_lock(&fk.lock);
  for (fk_region *r = fk.regions; r != NULL; r = r->next)
    if (r->kind == FK_DEVICE && r->device == dev && r->start + r->bytes > end) end = r->start + r->bytes;
  if (end == 0 && dev >= 0 && dev < FK_MAX_DEVICES) end = (uintptr_t)fk.arena[dev].base;
  pthread_mutex_unlock(&fk.lock);
  return (void *)end;
}

// Where the host can read and write `bytes` at a device (or any) address,
// bypassing streams and access rights; NULL if the fake would refuse the range.
EXPORT void *fake_cuda_host_view(CUdeviceptr p, size_t bytes) {
  void *host = NULL;
  pthread_mutex_lock(&fk.lock);
  CUresult r = fk_translate((uintptr_t)p, bytes, 0, -1, &host);
  pthread_mutex_unlock(&fk.lock);
  return r == CUDA_SUCCESS ? host : NULL;
}
