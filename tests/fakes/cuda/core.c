/*
 * core.c — the fake driver's front door (see fake.h): cuInit and its gate,
 * devices and their attributes, one primary context per device and each
 * thread's context stack, the error strings, FAKE_CUDA_FAIL, and what happens
 * around fork() and unloading. The CUcontext handle is a pointer to the
 * device's fk_ctx; contexts are never freed, so a stale handle stays safe.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fake.h"

fk_state fk = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .event_cv = PTHREAD_COND_INITIALIZER,
    .users_cv = PTHREAD_COND_INITIALIZER,
};

_Thread_local int fk_tls_in_hostfn;
_Thread_local int fk_tls_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
static _Thread_local fk_ctx *ctx_stack[FK_CTX_DEPTH];
static _Thread_local int ctx_depth;

// FAKE_CUDA_FAIL names a function as cuda.h spells it or as it is exported
// (cuMemAlloc or cuMemAlloc_v2).
static int fail_matches(const char *want, const char *fn) {
  if (strcmp(want, fn) == 0) return 1;
  size_t n = strlen(fn);
  return n > 3 && fn[n - 3] == '_' && fn[n - 2] == 'v' && strlen(want) == n - 3 && strncmp(want, fn, n - 3) == 0;
}

CUresult fk_enter(const char *fn, int need_init) {
  const char *fail = getenv("FAKE_CUDA_FAIL");
  if (fail != NULL && fail[0] != '\0' && fail_matches(fail, fn)) return CUDA_ERROR_OUT_OF_MEMORY;
  if (atomic_load(&fk.shutdown)) return CUDA_ERROR_DEINITIALIZED;
  if (fk_tls_in_hostfn) return CUDA_ERROR_NOT_PERMITTED;  // host functions must not call CUDA
  if (need_init && !atomic_load(&fk.inited)) return CUDA_ERROR_NOT_INITIALIZED;
  return CUDA_SUCCESS;
}

double fk_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void fk_backoff(long *ns) {
  struct timespec ts = {0, *ns};
  nanosleep(&ts, NULL);
  *ns = *ns >= 100000 ? 200000 : *ns * 2;
}

static long env_long(const char *name, long def) {
  const char *v = getenv(name);
  return v != NULL && v[0] != '\0' ? strtol(v, NULL, 10) : def;
}

// ---- Initialisation and devices ----

EXPORT CUresult cuInit(unsigned int flags) {
  FK_API_NOINIT();
  atomic_fetch_add(&fk.init_calls, 1);
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fk.lock);
  CUresult r = CUDA_SUCCESS;
  if (!atomic_load(&fk.inited)) {
    long n = env_long("FAKE_CUDA_DEVICES", 2), mb = env_long("FAKE_CUDA_ARENA_MB", 256);
    fk.ndev = n < 0 ? 0 : n > FK_MAX_DEVICES ? FK_MAX_DEVICES : (int)n;
    fk.arena_bytes = (size_t)(mb < 1 ? 1 : mb) << 20;
    fk.strict_context = env_long("FAKE_CUDA_STRICT_CONTEXT", 0) != 0;
    fk.copy_delay_ns = env_long("FAKE_CUDA_COPY_DELAY_US", 0) * 1000;
    for (int d = 0; d < FK_MAX_DEVICES; d++) fk.ctx[d].device = d, fk.arena[d].fd = -1;
    if (fk.ndev == 0) r = CUDA_ERROR_NO_DEVICE;
    else atomic_store(&fk.inited, 1);
  }
  pthread_mutex_unlock(&fk.lock);
  return r;
}

EXPORT CUresult cuDriverGetVersion(int *version) {
  FK_API_NOINIT();
  if (version == NULL) return CUDA_ERROR_INVALID_VALUE;
  *version = 13000;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *count) {
  FK_API();
  if (count == NULL) return CUDA_ERROR_INVALID_VALUE;
  *count = fk.ndev;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal) {
  FK_API();
  if (dev == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (ordinal < 0 || ordinal >= fk.ndev) return CUDA_ERROR_INVALID_DEVICE;
  *dev = ordinal;
  return CUDA_SUCCESS;
}

static int dev_ok(CUdevice d) { return d >= 0 && d < fk.ndev; }

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
  FK_API();
  if (name == NULL || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!dev_ok(dev)) return CUDA_ERROR_INVALID_DEVICE;
  snprintf(name, (size_t)len, "weft fake CUDA device %d", dev);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
  FK_API();
  if (bytes == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (!dev_ok(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = fk.arena_bytes;
  return CUDA_SUCCESS;
}

// Device dev's PCI bus: 0x10 + dev, or the dev-th entry of FAKE_CUDA_BUSIDS
// ("0000:1b:00.0,0000:43:00.0,..."), so that tests can seat the fake devices
// on the GPUs of a topology file.
static void fk_busid(CUdevice dev, char *out, size_t len) {
  snprintf(out, len, "0000:%02x:00.0", 0x10 + dev);
  const char *list = getenv("FAKE_CUDA_BUSIDS");
  for (int i = 0; list != NULL && *list != '\0'; i++) {
    const char *end = strchr(list, ',');
    size_t n = end ? (size_t)(end - list) : strlen(list);
    if (i == dev && n > 0 && n < len) {
      memcpy(out, list, n);
      out[n] = '\0';
      return;
    }
    list = end ? end + 1 : list + n;
  }
}

EXPORT CUresult cuDeviceGetPCIBusId(char *bus_id, int len, CUdevice dev) {
  FK_API();
  if (bus_id == NULL || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!dev_ok(dev)) return CUDA_ERROR_INVALID_DEVICE;
  fk_busid(dev, bus_id, (size_t)len);
  return CUDA_SUCCESS;
}

// An sm_90 part (values as an H200 reports them) with the v2 stream memory
// operations but no CU_STREAM_WAIT_VALUE_FLUSH, VMM with POSIX fds, unified
// addressing, mapped and registered host memory. CUdevice_attribute values
// from cuda.h; valid attributes not listed are 0, including features the fake
// does not model (GPUDirect RDMA, dma-buf, multicast, fabric handles).
static int attribute_value(int attr, CUdevice dev) {
  switch (attr) {
    case 1: return 1024;                 // MAX_THREADS_PER_BLOCK
    case 2: case 3: return 1024;         // MAX_BLOCK_DIM_X, _Y
    case 4: return 64;                   // MAX_BLOCK_DIM_Z
    case 5: return 2147483647;           // MAX_GRID_DIM_X
    case 6: case 7: return 65535;        // MAX_GRID_DIM_Y, _Z
    case 8: return 49152;                // MAX_SHARED_MEMORY_PER_BLOCK
    case 10: return 32;                  // WARP_SIZE
    case 13: return 1980000;             // CLOCK_RATE (kHz)
    case 15: return 1;                   // GPU_OVERLAP
    case 16: return 132;                 // MULTIPROCESSOR_COUNT
    case 19: return 1;                   // CAN_MAP_HOST_MEMORY
    case 31: return 1;                   // CONCURRENT_KERNELS
    case 33: {                           // PCI_BUS_ID (cuDeviceGetPCIBusId agrees)
      char id[32];
      unsigned domain = 0, bus = 0;
      fk_busid(dev, id, sizeof(id));
      return sscanf(id, "%x:%x", &domain, &bus) == 2 ? (int)bus : 0x10 + dev;
    }
    case 38: return 50 << 20;            // L2_CACHE_SIZE
    case 39: return 2048;                // MAX_THREADS_PER_MULTIPROCESSOR
    case 40: return 2;                   // ASYNC_ENGINE_COUNT
    case 41: return 1;                   // UNIFIED_ADDRESSING
    case 75: return 9;                   // COMPUTE_CAPABILITY_MAJOR
    case 76: return 0;                   // COMPUTE_CAPABILITY_MINOR
    case 78: return 1;                   // STREAM_PRIORITIES_SUPPORTED
    case 83: return 1;                   // MANAGED_MEMORY
    case 89: return 1;                   // CONCURRENT_MANAGED_ACCESS
    case 91: return 1;                   // CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM
    case 99: return 1;                   // HOST_REGISTER_SUPPORTED
    case 102: return 1;                  // VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
    case 103: return 1;                  // HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
    case 113: return 1;                  // READ_ONLY_HOST_REGISTER_SUPPORTED
    case 122: case 123: return 1;        // CAN_USE_64_BIT_STREAM_MEM_OPS, CAN_USE_STREAM_WAIT_VALUE_NOR
    default: return 0;
  }
}

EXPORT CUresult cuDeviceGetAttribute(int *value, int attr, CUdevice dev) {
  FK_API();
  if (value == NULL || attr < 1 || attr > 144) return CUDA_ERROR_INVALID_VALUE;
  if (!dev_ok(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *value = attribute_value(attr, dev);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer) {
  FK_API();
  if (can == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (!dev_ok(dev) || !dev_ok(peer)) return CUDA_ERROR_INVALID_DEVICE;
  *can = dev != peer;
  return CUDA_SUCCESS;
}

// ---- Contexts ----

int fk_ctx_valid(const fk_ctx *c) {
  for (int d = 0; d < fk.ndev; d++)
    if (c == &fk.ctx[d]) return 1;
  return 0;
}

fk_ctx *fk_current(void) { return ctx_depth > 0 ? ctx_stack[ctx_depth - 1] : NULL; }

fk_ctx *fk_ctx_for_alloc(CUresult *err) {
  fk_ctx *c = fk_current();
  if (c == NULL && fk.strict_context) *err = CUDA_ERROR_INVALID_CONTEXT;
  else if (c == NULL) c = &fk.ctx[0];
  return c;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  FK_API();
  if (pctx == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (!dev_ok(dev)) return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&fk.lock);
  fk.ctx[dev].refs++;
  pthread_mutex_unlock(&fk.lock);
  *pctx = &fk.ctx[dev];
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  FK_API();
  if (!dev_ok(dev)) return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&fk.lock);
  int refs = fk.ctx[dev].refs > 0 ? --fk.ctx[dev].refs : -1;
  pthread_mutex_unlock(&fk.lock);
  if (refs < 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (refs == 0) fk_ctx_release_streams(&fk.ctx[dev]);  // its memory stays (fake.h)
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { return cuDevicePrimaryCtxRelease_v2(dev); }

EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active) {
  FK_API();
  if (flags == NULL || active == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (!dev_ok(dev)) return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&fk.lock);
  *flags = 0;
  *active = fk.ctx[dev].refs > 0;
  pthread_mutex_unlock(&fk.lock);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx) {
  FK_API();
  if (pctx == NULL) return CUDA_ERROR_INVALID_VALUE;
  *pctx = fk_current();
  return CUDA_SUCCESS;
}

// NULL pops (nothing to pop: no-op); otherwise replaces the top, or pushes
// onto an empty stack.
EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  FK_API();
  if (ctx == NULL) {
    if (ctx_depth > 0) ctx_depth--;
    return CUDA_SUCCESS;
  }
  if (!fk_ctx_valid(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx_depth == 0) ctx_depth = 1;
  ctx_stack[ctx_depth - 1] = ctx;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  FK_API();
  if (ctx == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (!fk_ctx_valid(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx_depth == FK_CTX_DEPTH) return CUDA_ERROR_OUT_OF_MEMORY;  // the fake's limit
  ctx_stack[ctx_depth++] = ctx;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx) {
  FK_API();
  if (ctx_depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
  fk_ctx *c = ctx_stack[--ctx_depth];
  if (pctx != NULL) *pctx = c;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *dev) {
  FK_API();
  if (dev == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_ctx *c = fk_current();
  if (c == NULL) return CUDA_ERROR_INVALID_CONTEXT;
  *dev = c->device;
  return CUDA_SUCCESS;
}

// Peer access is recorded, not enforced: the stand-in kernels read any memory.
EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
  FK_API();
  fk_ctx *c = fk_current();
  if (c == NULL || peer == NULL || !fk_ctx_valid(peer)) return CUDA_ERROR_INVALID_CONTEXT;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (peer->device == c->device) return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&fk.lock);
  unsigned bit = 1u << peer->device;
  CUresult r = (c->peers & bit) ? CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED : CUDA_SUCCESS;
  c->peers |= bit;
  pthread_mutex_unlock(&fk.lock);
  return r;
}

EXPORT CUresult cuCtxSynchronize(void) {
  FK_API();
  fk_ctx *c = fk_current();
  return c == NULL ? CUDA_ERROR_INVALID_CONTEXT : fk_ctx_sync(c);
}

EXPORT CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest) {
  FK_API();
  if (least != NULL) *least = FK_PRIO_LEAST;
  if (greatest != NULL) *greatest = FK_PRIO_GREATEST;
  return CUDA_SUCCESS;
}

// ---- Errors ----

static const struct {
  CUresult code;
  const char *name, *text;
} errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_MAP_FAILED, "CUDA_ERROR_MAP_FAILED", "mapping of buffer object failed"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation is not valid in this state"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
     "peer access is already enabled"},
    {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
     "operation would make the legacy stream depend on a capturing blocking stream"},
    {CUDA_ERROR_CAPTURED_EVENT, "CUDA_ERROR_CAPTURED_EVENT",
     "operation not permitted on an event last recorded in a capturing stream"},
    {CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
     "attempt to terminate a thread-local capture sequence from another thread"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static int error_index(CUresult e) {
  for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
    if (errors[i].code == e) return (int)i;
  return -1;
}

EXPORT CUresult cuGetErrorString(CUresult e, const char **text) {
  FK_API_NOINIT();
  if (text == NULL) return CUDA_ERROR_INVALID_VALUE;
  int i = error_index(e);
  *text = i < 0 ? NULL : errors[i].text;
  return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

EXPORT CUresult cuGetErrorName(CUresult e, const char **name) {
  FK_API_NOINIT();
  if (name == NULL) return CUDA_ERROR_INVALID_VALUE;
  int i = error_index(e);
  *name = i < 0 ? NULL : errors[i].name;
  return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

// ---- fork() and unloading ----

// A child has none of the parent's worker threads: its streams are
// forgotten (the legacy ones are made again on use). Memory stays.
static void before_fork(void) { pthread_mutex_lock(&fk.lock); }
static void after_fork_parent(void) { pthread_mutex_unlock(&fk.lock); }
static void after_fork_child(void) {
  pthread_mutex_init(&fk.lock, NULL);
  pthread_cond_init(&fk.event_cv, NULL);
  pthread_cond_init(&fk.users_cv, NULL);
  fk_streams_forget();
}

__attribute__((constructor)) static void fk_loaded(void) {
  pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

// The tables, once the workers are gone. Mappings stay (a thread may still
// be copying), and so does whatever a caller still waits on.
static void free_tables(void) {
  pthread_mutex_lock(&fk.lock);
  for (fk_region *r = fk.regions, *n; r != NULL; r = n) n = r->next, free(r);
  for (int d = 0; d < FK_MAX_DEVICES; d++)
    for (fk_free *b = fk.arena[d].free, *n; b != NULL; b = n) n = b->next, free(b);
  for (struct fk_vmm *v = fk.handles, *n; v != NULL; v = n) n = v->next, close(v->fd), free(v);
  for (struct fk_resv *v = fk.resvs, *n; v != NULL; v = n) n = v->next, free(v);
  for (fk_graph *g = fk.graphs, *n; g != NULL; g = n) n = g->next, free(g);
  for (fk_event *e = fk.events, *n; e != NULL; e = n) n = e->next, fk_event_put(e);
  fk.regions = NULL, fk.handles = NULL, fk.resvs = NULL, fk.graphs = NULL, fk.events = NULL;
  for (int d = 0; d < FK_MAX_DEVICES; d++) fk.arena[d].free = NULL;
  pthread_mutex_unlock(&fk.lock);
}

// dlclose or exit: no worker thread may run on in unmapped code. Waits give
// up, queued work is dropped, later calls get CUDA_ERROR_DEINITIALIZED.
__attribute__((destructor)) static void fk_unloading(void) {
  atomic_store(&fk.shutdown, 1);
  fk_stream_stop_all();
  free_tables();
}

// ---- Test hooks (not driver API) ----
EXPORT int fake_cuda_init_calls(void) { return atomic_load(&fk.init_calls); }
EXPORT int fake_cuda_query_calls(void) { return atomic_load(&fk.query_calls); }
