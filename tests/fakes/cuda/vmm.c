/*
 * vmm.c — virtual memory management (what ncclMemAlloc uses) and legacy CUDA
 * IPC for the fake driver (see fake.h).
 *
 * VMM: a cuMemCreate handle is a memfd of the granularity's multiple (2 MiB,
 * minimum and recommended); its name carries the device and the handle types
 * so that an importer, in this process or another, can recover them from the
 * file descriptor alone. cuMemAddressReserve reserves a PROT_NONE range and
 * an alias range of the same size; cuMemMap maps the memfd at the address
 * (PROT_NONE, the "device view") and at the same offset of the alias
 * (read-write, for the fake's copies), so adjacent mappings stay contiguous
 * in both. Memory is freed when released and unmapped. A copy that touches a
 * mapping without cuMemSetAccess rights for the copying device is refused
 * with CUDA_ERROR_INVALID_VALUE, as the driver does. Exported handles are new
 * CLOEXEC descriptors.
 *
 * Legacy IPC: a CUipcMemHandle carries the exporter's pid, its arena memfd's
 * descriptor number and the allocation's offset; cuIpcOpenMemHandle opens
 * /proc/<pid>/fd/<fd> and maps it as above.
 *
 * A CUipcMemHandle may be taken of any address inside a cuMemAlloc block and
 * stands for the whole block; cuIpcOpenMemHandle in the exporting process is
 * CUDA_ERROR_INVALID_CONTEXT, as the driver answers. Only PINNED device
 * allocations with NONE or POSIX_FILE_DESCRIPTOR handles; cuMemMap offset 0
 * (CUDA_ERROR_NOT_SUPPORTED otherwise, as the driver answers).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake.h"

#define MEMFD_PREFIX "weft-fake-cuda-vmm"

static size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

// A handle the caller may use: created or imported, not yet released.
static struct fk_vmm *vmm_find(CUmemGenericAllocationHandle h) {
  for (struct fk_vmm *v = fk.handles; v != NULL; v = v->next)
    if ((CUmemGenericAllocationHandle)(uintptr_t)v == h && v->refs > 0) return v;
  return NULL;
}

static void vmm_maybe_free(struct fk_vmm *v) {
  if (v->refs > 0 || v->maps > 0) return;
  for (struct fk_vmm **p = &fk.handles; *p != NULL; p = &(*p)->next)
    if (*p == v) {
      *p = v->next;
      break;
    }
  close(v->fd);
  free(v);
}

static struct fk_vmm *vmm_new(int fd, size_t size, int device, int types) {
  struct fk_vmm *v = calloc(1, sizeof(*v));
  if (v == NULL) return NULL;
  v->fd = fd, v->size = size, v->refs = 1;
  v->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  v->prop.requestedHandleTypes = types;
  v->prop.location = (CUmemLocation){CU_MEM_LOCATION_TYPE_DEVICE, device};
  v->next = fk.handles, fk.handles = v;
  return v;
}

static CUresult check_prop(const CUmemAllocationProp *prop) {
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
  if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_NOT_SUPPORTED;  // host VMM: not modelled
  if (prop->location.id < 0 || prop->location.id >= fk.ndev) return CUDA_ERROR_INVALID_DEVICE;
  if ((prop->requestedHandleTypes & ~CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0) return CUDA_ERROR_NOT_SUPPORTED;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop, int option) {
  FK_API();
  if (granularity == NULL || prop == NULL ||
      (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
    return CUDA_ERROR_INVALID_VALUE;
  CUresult r = check_prop(prop);
  if (r == CUDA_SUCCESS) *granularity = FK_GRANULARITY;
  return r;
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
                            unsigned long long flags) {
  FK_API();
  if (h == NULL || prop == NULL || flags != 0 || size == 0 || size % FK_GRANULARITY != 0)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult r = check_prop(prop);
  if (r != CUDA_SUCCESS) return r;
  char name[64];
  snprintf(name, sizeof(name), MEMFD_PREFIX " d=%d t=%d", prop->location.id, prop->requestedHandleTypes);
  int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  if (ftruncate(fd, (off_t)size) != 0) {
    close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  pthread_mutex_lock(&fk.lock);
  struct fk_vmm *v = vmm_new(fd, size, prop->location.id, prop->requestedHandleTypes);
  if (v != NULL) v->prop = *prop, v->prop.win32HandleMetaData = NULL;
  pthread_mutex_unlock(&fk.lock);
  if (v == NULL) {
    close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *h = (CUmemGenericAllocationHandle)(uintptr_t)v;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle h) {
  FK_API();
  pthread_mutex_lock(&fk.lock);
  struct fk_vmm *v = vmm_find(h);
  if (v != NULL) v->refs--, vmm_maybe_free(v);
  pthread_mutex_unlock(&fk.lock);
  return v != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *h, void *addr) {
  FK_API();
  if (h == NULL) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fk.lock);
  fk_region *r = fk_region_find((uintptr_t)addr);
  int ok = r != NULL && r->kind == FK_VMM;
  if (ok) r->handle->refs++, *h = (CUmemGenericAllocationHandle)(uintptr_t)r->handle;
  pthread_mutex_unlock(&fk.lock);
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop, CUmemGenericAllocationHandle h) {
  FK_API();
  if (prop == NULL) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fk.lock);
  struct fk_vmm *v = vmm_find(h);
  if (v != NULL) *prop = v->prop;
  pthread_mutex_unlock(&fk.lock);
  return v != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// ---- Address ranges ----

static void *reserve(size_t size, size_t align, uintptr_t hint) {
  int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  if (hint != 0 && hint % align == 0) {
    void *p = mmap((void *)hint, size, PROT_NONE, flags | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == (void *)hint) return p;
    if (p != MAP_FAILED) munmap(p, size);  // an old kernel took it as a plain hint
  }
  size_t span = size + align;
  if (span < size) return MAP_FAILED;
  char *raw = mmap(NULL, span, PROT_NONE, flags, -1, 0);
  if (raw == MAP_FAILED) return MAP_FAILED;
  char *start = (char *)(((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1));
  if (start > raw) munmap(raw, (size_t)(start - raw));
  if (raw + span > start + size) munmap(start + size, (size_t)(raw + span - (start + size)));
  return start;
}

EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                    unsigned long long flags) {
  FK_API();
  size_t page = page_size();
  if (ptr == NULL || size == 0 || flags != 0 || size % page != 0 || addr % page != 0 ||
      (alignment & (alignment - 1)) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (alignment == 0) alignment = FK_GRANULARITY;
  if (alignment < page) alignment = page;
  struct fk_resv *v = calloc(1, sizeof(*v));
  void *start = v != NULL ? reserve(size, alignment, (uintptr_t)addr) : MAP_FAILED;
  void *alias = start != MAP_FAILED ? mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                                    : MAP_FAILED;
  if (alias == MAP_FAILED) {
    if (start != MAP_FAILED) munmap(start, size);
    free(v);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  v->start = (uintptr_t)start, v->size = size, v->alias = alias;
  pthread_mutex_lock(&fk.lock);
  v->next = fk.resvs, fk.resvs = v;
  pthread_mutex_unlock(&fk.lock);
  *ptr = (CUdeviceptr)(uintptr_t)start;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  FK_API();
  pthread_mutex_lock(&fk.lock);
  struct fk_resv **p = &fk.resvs;
  while (*p != NULL && ((*p)->start != ptr || (*p)->size != size)) p = &(*p)->next;
  struct fk_resv *v = *p;
  int mapped = 0;
  for (fk_region *r = fk.regions; r != NULL && v != NULL; r = r->next) mapped |= r->kind == FK_VMM && r->resv == v;
  if (v != NULL && !mapped) {
    *p = v->next;
    munmap((void *)v->start, v->size);
    munmap(v->alias, v->size);
    free(v);
  }
  pthread_mutex_unlock(&fk.lock);
  return v != NULL && !mapped ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static struct fk_resv *resv_holding(uintptr_t start, size_t size) {
  for (struct fk_resv *v = fk.resvs; v != NULL; v = v->next)
    if (start >= v->start && start + size >= start && start + size <= v->start + v->size) return v;
  return NULL;
}

// Back to reserved, inaccessible address space.
static void unreserve_back(void *p, size_t size) {
  mmap(p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
}

EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                         unsigned long long flags) {
  FK_API();
  if (flags != 0 || size == 0 || ptr % FK_GRANULARITY != 0 || size % FK_GRANULARITY != 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (offset != 0) return CUDA_ERROR_NOT_SUPPORTED;  // as the driver answers
  pthread_mutex_lock(&fk.lock);
  struct fk_vmm *v = vmm_find(h);
  struct fk_resv *rv = v != NULL && size <= v->size ? resv_holding((uintptr_t)ptr, size) : NULL;
  int busy = 0;
  for (fk_region *r = fk.regions; r != NULL && rv != NULL; r = r->next)
    busy |= r->kind == FK_VMM && r->start < ptr + size && ptr < r->start + r->bytes;
  fk_region *reg = rv != NULL && !busy ? calloc(1, sizeof(*reg)) : NULL;
  CUresult res = rv == NULL || busy ? CUDA_ERROR_INVALID_VALUE : reg == NULL ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
  if (res == CUDA_SUCCESS) {
    char *dev = (char *)(uintptr_t)ptr, *alias = rv->alias + (ptr - rv->start);
    if (mmap(dev, size, PROT_NONE, MAP_SHARED | MAP_FIXED, v->fd, 0) == MAP_FAILED) res = CUDA_ERROR_OUT_OF_MEMORY;
    else if (mmap(alias, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, v->fd, 0) == MAP_FAILED) {
      unreserve_back(dev, size);
      res = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (res == CUDA_SUCCESS) {
      int d = v->prop.location.id;
      reg->kind = FK_VMM, reg->start = (uintptr_t)ptr, reg->bytes = size, reg->alias = alias, reg->device = d;
      reg->ctx = d < fk.ndev ? &fk.ctx[d] : NULL, reg->handle = v, reg->resv = rv;
      fk_region_add(reg);
      v->maps++;
      reg = NULL;
    }
  }
  pthread_mutex_unlock(&fk.lock);
  free(reg);
  return res;
}

// The mappings that exactly tile [ptr, ptr + size) (fk.lock held), or 0.
static int tiled(uintptr_t ptr, size_t size, int whole_first) {
  uintptr_t end = ptr + size;
  if (size == 0 || end < ptr) return 0;
  for (uintptr_t at = ptr; at < end;) {
    fk_region *m = fk_region_find(at);
    if (m == NULL || m->kind != FK_VMM || (at == ptr && whole_first && m->start != ptr)) return 0;
    if (whole_first && m->start + m->bytes > end) return 0;
    at = m->start + m->bytes;
  }
  return 1;
}

EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  FK_API();
  pthread_mutex_lock(&fk.lock);
  int ok = tiled((uintptr_t)ptr, size, 1);
  for (uintptr_t at = (uintptr_t)ptr; ok && at < ptr + size;) {
    fk_region *m = fk_region_find(at);
    at = m->start + m->bytes;
    unreserve_back((void *)m->start, m->bytes);
    unreserve_back(m->alias, m->bytes);
    fk_region_remove(m);
    m->handle->maps--;
    vmm_maybe_free(m->handle);
    free(m);
  }
  pthread_mutex_unlock(&fk.lock);
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// Rights are kept per mapping and per device; the views never change.
EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
  FK_API();
  if (desc == NULL || count == 0) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; i++) {
    int f = desc[i].flags;
    int known = f == CU_MEM_ACCESS_FLAGS_PROT_NONE || f == CU_MEM_ACCESS_FLAGS_PROT_READ ||
                f == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || !known) return CUDA_ERROR_INVALID_VALUE;
    if (desc[i].location.id < 0 || desc[i].location.id >= fk.ndev) return CUDA_ERROR_INVALID_DEVICE;
  }
  pthread_mutex_lock(&fk.lock);
  int ok = tiled((uintptr_t)ptr, size, 0);
  for (uintptr_t at = (uintptr_t)ptr; ok && at < ptr + size;) {
    fk_region *m = fk_region_find(at);
    at = m->start + m->bytes;
    for (size_t i = 0; i < count; i++) {
      unsigned bit = 1u << desc[i].location.id;
      m->read_mask = (desc[i].flags & CU_MEM_ACCESS_FLAGS_PROT_READ) ? m->read_mask | bit : m->read_mask & ~bit;
      m->write_mask = desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? m->write_mask | bit : m->write_mask & ~bit;
    }
  }
  pthread_mutex_unlock(&fk.lock);
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr) {
  FK_API();
  if (flags == NULL || location == NULL || location->type != CU_MEM_LOCATION_TYPE_DEVICE)
    return CUDA_ERROR_INVALID_VALUE;
  if (location->id < 0 || location->id >= fk.ndev) return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&fk.lock);
  fk_region *m = fk_region_find((uintptr_t)ptr);
  int ok = m != NULL && m->kind == FK_VMM;
  if (ok) {
    unsigned bit = 1u << location->id;
    *flags = (m->write_mask & bit)  ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
             : (m->read_mask & bit) ? CU_MEM_ACCESS_FLAGS_PROT_READ
                                    : CU_MEM_ACCESS_FLAGS_PROT_NONE;
  }
  pthread_mutex_unlock(&fk.lock);
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// ---- Shareable handles: POSIX file descriptors ----

EXPORT CUresult cuMemExportToShareableHandle(void *shareable, CUmemGenericAllocationHandle h, int type,
                                             unsigned long long flags) {
  FK_API();
  if (shareable == NULL || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  pthread_mutex_lock(&fk.lock);
  struct fk_vmm *v = vmm_find(h);
  CUresult r = v == NULL || !(v->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
                   ? CUDA_ERROR_INVALID_VALUE
                   : CUDA_SUCCESS;
  int fd = r == CUDA_SUCCESS ? fcntl(v->fd, F_DUPFD_CLOEXEC, 0) : -1;
  pthread_mutex_unlock(&fk.lock);
  if (r == CUDA_SUCCESS && fd < 0) r = CUDA_ERROR_OUT_OF_MEMORY;
  if (r == CUDA_SUCCESS) memcpy(shareable, &fd, sizeof(fd));
  return r;
}

// The descriptor stays the caller's; the handle holds its own duplicate.
EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *h, void *os_handle, int type) {
  FK_API();
  if (h == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  int fd = (int)(intptr_t)os_handle, device = -1, types = -1;
  char path[64], target[256];
  snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  ssize_t n = fd >= 0 ? readlink(path, target, sizeof(target) - 1) : -1;
  if (n > 0) target[n] = '\0';
  struct stat st;
  if (n <= 0 || sscanf(target, "/memfd:" MEMFD_PREFIX " d=%d t=%d", &device, &types) != 2 || fstat(fd, &st) != 0 ||
      st.st_size <= 0)
    return CUDA_ERROR_INVALID_VALUE;  // not one of this fake's allocations
  int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&fk.lock);
  struct fk_vmm *v = vmm_new(own, (size_t)st.st_size, device, types);
  pthread_mutex_unlock(&fk.lock);
  if (v == NULL) {
    close(own);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *h = (CUmemGenericAllocationHandle)(uintptr_t)v;
  return CUDA_SUCCESS;
}

// ---- Legacy IPC ----

typedef struct {
  char magic[8];
  int32_t pid, fd, device, unused;
  uint64_t off, bytes;
} ipc_wire;
_Static_assert(sizeof(ipc_wire) <= CU_IPC_HANDLE_SIZE, "CUipcMemHandle is 64 bytes");
static const char ipc_magic[8] = "wfkcuipc";

EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr dptr) {
  FK_API();
  if (handle == NULL) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fk.lock);
  fk_region *r = fk_region_find((uintptr_t)dptr);
  int ok = r != NULL && r->kind == FK_DEVICE;
  ipc_wire w = {{0}, 0, 0, 0, 0, 0, 0};
  if (ok) {
    memcpy(w.magic, ipc_magic, sizeof(w.magic));
    w.pid = (int32_t)getpid(), w.fd = fk.arena[r->device].fd, w.device = r->device;
    w.off = r->arena_off, w.bytes = r->bytes;
  }
  pthread_mutex_unlock(&fk.lock);
  if (!ok) return CUDA_ERROR_INVALID_VALUE;
  memset(handle, 0, sizeof(*handle));
  memcpy(handle->reserved, &w, sizeof(w));
  return CUDA_SUCCESS;
}

EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *dptr, CUipcMemHandle handle, unsigned int flags) {
  FK_API();
  ipc_wire w;
  memcpy(&w, handle.reserved, sizeof(w));
  if (dptr == NULL || (flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) != 0 ||
      memcmp(w.magic, ipc_magic, sizeof(w.magic)) != 0 || w.bytes == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (w.pid == (int32_t)getpid()) return CUDA_ERROR_INVALID_CONTEXT;  // this very process
  pthread_mutex_lock(&fk.lock);
  CUresult r = fk_current() == NULL ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
  for (fk_region *x = fk.regions; x != NULL && r == CUDA_SUCCESS; x = x->next)
    if (x->kind == FK_IPC && x->ipc_pid == w.pid && x->ipc_fd == w.fd && x->ipc_off == w.off) {
      x->refs++;  // opened before by this process: the same address
      *dptr = x->start;
      pthread_mutex_unlock(&fk.lock);
      return CUDA_SUCCESS;
    }
  pthread_mutex_unlock(&fk.lock);
  if (r != CUDA_SUCCESS) return r;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)w.pid, (int)w.fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_INVALID_HANDLE;  // the exporter is gone
  size_t page = page_size(), lo = w.off & ~(uint64_t)(page - 1), skip = w.off - lo;
  size_t len = (skip + w.bytes + page - 1) & ~(page - 1);
  char *dview = mmap(NULL, len, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd, (off_t)lo);
  char *aview = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, (off_t)lo);
  close(fd);
  fk_region *reg = calloc(1, sizeof(*reg));
  if (dview == MAP_FAILED || aview == MAP_FAILED || reg == NULL) {
    if (dview != MAP_FAILED) munmap(dview, len);
    if (aview != MAP_FAILED) munmap(aview, len);
    free(reg);
    return CUDA_ERROR_MAP_FAILED;
  }
  reg->kind = FK_IPC, reg->start = (uintptr_t)(dview + skip), reg->bytes = w.bytes, reg->alias = aview + skip;
  reg->device = w.device, reg->refs = 1, reg->map_dev = dview, reg->map_alias = aview, reg->map_len = len;
  reg->ipc_pid = w.pid, reg->ipc_fd = w.fd, reg->ipc_off = w.off;
  pthread_mutex_lock(&fk.lock);
  reg->ctx = w.device >= 0 && w.device < fk.ndev ? &fk.ctx[w.device] : fk_current();
  fk_region_add(reg);
  pthread_mutex_unlock(&fk.lock);
  *dptr = reg->start;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  FK_API();
  pthread_mutex_lock(&fk.lock);
  fk_region *r = fk_region_find((uintptr_t)dptr);
  int ok = r != NULL && r->kind == FK_IPC && r->start == dptr;
  if (ok && --r->refs == 0) {
    fk_region_remove(r);
    munmap(r->map_dev, r->map_len);
    munmap(r->map_alias, r->map_len);
    free(r);
  }
  pthread_mutex_unlock(&fk.lock);
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
