/*
 * fake_cuda.c — a stand-in CUDA driver (libcuda.so.1) for test_cuda_rt.c
 * and tests/multirank/test_cuda_mem.c, built as
 * build/tests/lib/libweft-fake-cuda.so and named by WEFT_CUDA_DRIVER_LIB,
 * so pointer classification runs on machines without a GPU. NOT a model of
 * a GPU, only of the driver calls weft makes and the rules they follow:
 *
 * FAKE_CUDA_DEVICES devices (default 2; 0: cuInit fails with
 * CUDA_ERROR_NO_DEVICE, as the real driver does). Nothing works before
 * cuInit (CUDA_ERROR_NOT_INITIALIZED). "Device memory" is carved from a
 * PROT_NONE mapping per device, so a host memcpy on it crashes, as on real
 * device memory; managed memory is a readable and writable mapping;
 * cuMemHostRegister records host ranges. cuPointerGetAttribute answers
 * CUDA_ERROR_INVALID_VALUE for any other address, cuPointerGetAttributes
 * zeros (both as documented in cuda.h). Types are written from cuda.h.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define EXPORT __attribute__((visibility("default")))

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
enum { SUCCESS = 0, E_INVALID_VALUE = 1, E_OUT_OF_MEMORY = 2, E_NOT_INITIALIZED = 3, E_NO_DEVICE = 100 };
enum { ATTR_MEMORY_TYPE = 2, ATTR_IS_MANAGED = 8, ATTR_DEVICE_ORDINAL = 9 };
enum { MEMTYPE_HOST = 1, MEMTYPE_DEVICE = 2 };

#define MAX_DEVICES 4
#define ARENA_BYTES ((size_t)64 << 20)
#define MAX_HOST 64

typedef struct {
  char *base;
  size_t used;
} arena_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int inited, ndev;
static arena_t device[MAX_DEVICES], managed;
static struct {
  uintptr_t start;
  size_t bytes;
} host[MAX_HOST];
static int init_calls, query_calls;

static void *carve(arena_t *a, int prot, size_t bytes) {
  if (a->base == NULL) {
    void *p = mmap(NULL, ARENA_BYTES, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return NULL;
    a->base = p;
  }
  bytes = (bytes + 255) & ~(size_t)255;
  if (bytes == 0 || bytes > ARENA_BYTES - a->used) return NULL;
  void *p = a->base + a->used;
  a->used += bytes;
  return p;
}

static int in_arena(const arena_t *a, uintptr_t p) {
  return a->base != NULL && p >= (uintptr_t)a->base && p < (uintptr_t)a->base + a->used;
}

EXPORT CUresult cuInit(unsigned int flags) {
  if (flags != 0) return E_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  init_calls++;
  const char *n = getenv("FAKE_CUDA_DEVICES");
  ndev = n != NULL ? atoi(n) : 2;
  if (ndev > MAX_DEVICES) ndev = MAX_DEVICES;
  inited = ndev > 0;
  pthread_mutex_unlock(&lock);
  return inited ? SUCCESS : E_NO_DEVICE;
}

EXPORT CUresult cuDriverGetVersion(int *v) {
  if (v == NULL) return E_INVALID_VALUE;
  *v = 13000;
  return SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *count) {
  if (!inited) return E_NOT_INITIALIZED;
  if (count == NULL) return E_INVALID_VALUE;
  *count = ndev;
  return SUCCESS;
}

EXPORT CUresult cuGetErrorString(CUresult e, const char **text) {
  if (text == NULL) return E_INVALID_VALUE;
  *text = e == SUCCESS ? "no error" : e == E_NO_DEVICE ? "no CUDA-capable device is detected"
          : e == E_NOT_INITIALIZED ? "initialization error" : "invalid argument";
  return SUCCESS;
}

// Type, managed flag and ordinal of an address; 0 when the driver does not know it.
static int lookup(uintptr_t p, unsigned int *type, int *is_managed, int *ordinal) {
  *type = 0, *is_managed = 0, *ordinal = -1;
  for (int d = 0; d < ndev; d++)
    if (in_arena(&device[d], p)) return *type = MEMTYPE_DEVICE, *ordinal = d, 1;
  if (in_arena(&managed, p)) return *type = MEMTYPE_DEVICE, *is_managed = 1, *ordinal = 0, 1;
  for (int i = 0; i < MAX_HOST; i++)
    if (host[i].bytes != 0 && p >= host[i].start && p - host[i].start < host[i].bytes)
      return *type = MEMTYPE_HOST, *ordinal = 0, 1;
  return 0;
}

static CUresult attribute(void *data, int attr, unsigned int type, int is_managed, int ordinal) {
  switch (attr) {
    case ATTR_MEMORY_TYPE: memcpy(data, &type, sizeof(type)); return SUCCESS;
    case ATTR_IS_MANAGED: memcpy(data, &is_managed, sizeof(is_managed)); return SUCCESS;
    case ATTR_DEVICE_ORDINAL: memcpy(data, &ordinal, sizeof(ordinal)); return SUCCESS;
    default: return E_INVALID_VALUE;
  }
}

EXPORT CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr ptr) {
  if (!inited) return E_NOT_INITIALIZED;
  if (data == NULL) return E_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  query_calls++;
  unsigned int type;
  int m, o, known = lookup((uintptr_t)ptr, &type, &m, &o);
  pthread_mutex_unlock(&lock);
  return known ? attribute(data, attr, type, m, o) : E_INVALID_VALUE;
}

EXPORT CUresult cuPointerGetAttributes(unsigned int n, int *attrs, void **data, CUdeviceptr ptr) {
  if (!inited) return E_NOT_INITIALIZED;
  if (n == 0 || attrs == NULL || data == NULL) return E_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  query_calls++;
  unsigned int type;
  int m, o;
  lookup((uintptr_t)ptr, &type, &m, &o);
  pthread_mutex_unlock(&lock);
  for (unsigned int i = 0; i < n; i++)
    if (attribute(data[i], attrs[i], type, m, o) != SUCCESS) return E_INVALID_VALUE;
  return SUCCESS;
}

static CUresult alloc(arena_t *a, int prot, CUdeviceptr *dp, size_t bytes) {
  if (!inited) return E_NOT_INITIALIZED;
  if (dp == NULL || bytes == 0) return E_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  void *p = carve(a, prot, bytes);
  pthread_mutex_unlock(&lock);
  if (p == NULL) return E_OUT_OF_MEMORY;
  *dp = (CUdeviceptr)(uintptr_t)p;
  return SUCCESS;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dp, size_t bytes) { return alloc(&device[0], PROT_NONE, dp, bytes); }
EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dp, size_t bytes, unsigned int flags) {
  (void)flags;
  return alloc(&managed, PROT_READ | PROT_WRITE, dp, bytes);
}
EXPORT CUresult cuMemFree_v2(CUdeviceptr dp) { return inited ? (dp ? SUCCESS : E_INVALID_VALUE) : E_NOT_INITIALIZED; }

EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytes, unsigned int flags) {
  (void)flags;
  if (!inited) return E_NOT_INITIALIZED;
  if (p == NULL || bytes == 0) return E_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  CUresult r = E_OUT_OF_MEMORY;
  for (int i = 0; i < MAX_HOST && r != SUCCESS; i++)
    if (host[i].bytes == 0) host[i].start = (uintptr_t)p, host[i].bytes = bytes, r = SUCCESS;
  pthread_mutex_unlock(&lock);
  return r;
}

EXPORT CUresult cuMemHostUnregister(void *p) {
  if (!inited) return E_NOT_INITIALIZED;
  pthread_mutex_lock(&lock);
  CUresult r = E_INVALID_VALUE;
  for (int i = 0; i < MAX_HOST && r != SUCCESS; i++)
    if (host[i].bytes != 0 && host[i].start == (uintptr_t)p) host[i].bytes = 0, r = SUCCESS;
  pthread_mutex_unlock(&lock);
  return r;
}

// ---- Test hooks (not driver API) ----

// Device memory of a chosen device (cuMemAlloc has no device argument
// without contexts, which this stand-in does not model).
EXPORT void *fake_cuda_alloc_on(int dev, size_t bytes) {
  CUdeviceptr p = 0;
  if (dev < 0 || dev >= MAX_DEVICES || alloc(&device[dev], PROT_NONE, &p, bytes) != SUCCESS) return NULL;
  return (void *)(uintptr_t)p;
}
// One past the last byte handed out on a device: the end of what the driver knows.
EXPORT void *fake_cuda_device_end(int dev) { return device[dev].base + device[dev].used; }
EXPORT int fake_cuda_init_calls(void) { return init_calls; }
EXPORT int fake_cuda_query_calls(void) { return query_calls; }
