/*
 * fake.h — internals of the stand-in CUDA driver (libweft-fake-cuda.so), a
 * test double of libcuda.so.1 for machines without a GPU. Tests name it with
 * WEFT_CUDA_DRIVER_LIB (or dlopen it themselves). It models the driver calls
 * weft makes and the rules cuda.h documents for them, not a GPU:
 *
 *   core.c    cuInit, devices, primary contexts, the context stack, errors,
 *             FAKE_CUDA_FAIL, fork and unload handling
 *   mem.c     device (cuMemAlloc), managed and pinned/registered host memory,
 *             pointer attributes, synchronous copies, and fk_translate, which
 *             turns any (address, bytes) into something the host can touch
 *   stream.c  streams: one in-order FIFO and one worker thread each; the
 *             asynchronous copies, memsets, stream memory operations, host
 *             functions
 *   event.c   events, cuStreamWaitEvent, graph capture (ops are counted into
 *             a dummy graph, never run)
 *   vmm.c     cuMem* virtual memory management and legacy CUDA IPC
 *
 * "Device memory" is a memfd mapped twice: the address handed out is a
 * PROT_NONE view (a host memcpy on it dies of SIGSEGV, as on a GPU) and a
 * read-write MAP_SHARED alias of the same pages is what the fake's own copies
 * use. Types and values below are written from cuda.h (CUDA 13.0), which the
 * fake does not include, so hosts without CUDA build it.
 *
 * Deliberate simplifications, each also noted where it is implemented:
 * - the NULL/legacy stream does not implicitly synchronise with other
 *   blocking streams; CU_STREAM_PER_THREAD is the legacy stream;
 * - errors of asynchronous work are sticky per stream, not per context;
 * - cuStreamDestroy waits for the stream's queue to drain (the driver returns
 *   at once and frees later), so no worker thread outlives it;
 * - with no current context, cuMemAlloc, cuMemAllocManaged, cuMemAllocHost,
 *   cuMemHostAlloc and cuMemHostRegister use device 0's primary context (the
 *   driver says CUDA_ERROR_INVALID_CONTEXT; FAKE_CUDA_STRICT_CONTEXT=1 does);
 * - releasing a primary context to zero references stops its legacy stream
 *   but frees none of its memory;
 * - capture only counts operations (cuGraphGetNodes): graphs cannot run, and
 *   a stream cannot join a capture through an event;
 * - destroyed handles are rejected (CUDA_ERROR_INVALID_HANDLE) where the
 *   driver's behaviour is undefined (an H200's driver crashes);
 * - the devices are sm_90 parts without GPUDirect RDMA, dma-buf, multicast
 *   or CU_STREAM_WAIT_VALUE_FLUSH; at most 32 contexts per thread's stack.
 * Error codes for edge cases were compared with an H200's driver (CUDA 13).
 *
 * Environment: FAKE_CUDA_DEVICES (default 2, at most 8; 0: cuInit fails with
 * CUDA_ERROR_NO_DEVICE), FAKE_CUDA_BUSIDS (the devices' PCI bus ids, comma-separated;
 * default 0000:1x:00.0 with x the ordinal), FAKE_CUDA_ARENA_MB (device memory per device,
 * default 256), FAKE_CUDA_FAIL=<function> (that function returns
 * CUDA_ERROR_OUT_OF_MEMORY every time), FAKE_CUDA_STRICT_CONTEXT.
 */
#ifndef WEFT_FAKE_CUDA_H
#define WEFT_FAKE_CUDA_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))

// ---- cuda.h types ----
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphNode_st *CUgraphNode;
typedef void (*CUhostFn)(void *user_data);

typedef struct {
  int type;  // CUmemLocationType
  int id;
} CUmemLocation;
typedef struct {
  int type;                  // CUmemAllocationType
  int requestedHandleTypes;  // CUmemAllocationHandleType
  CUmemLocation location;
  void *win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
} CUmemAllocationProp;
typedef struct {
  CUmemLocation location;
  int flags;  // CUmemAccess_flags
} CUmemAccessDesc;
#define CU_IPC_HANDLE_SIZE 64
typedef struct {
  char reserved[CU_IPC_HANDLE_SIZE];
} CUipcMemHandle;

enum {  // CUresult: every code the fake returns
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_DEINITIALIZED = 4,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_MAP_FAILED = 205,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_ILLEGAL_STATE = 401,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
  CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
  CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
  CUDA_ERROR_NOT_PERMITTED = 800,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
  CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
  CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906,
  CUDA_ERROR_CAPTURED_EVENT = 907,
  CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD = 908,
};
enum {  // CUpointer_attribute
  CU_POINTER_ATTRIBUTE_CONTEXT = 1,
  CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
  CU_POINTER_ATTRIBUTE_DEVICE_POINTER = 3,
  CU_POINTER_ATTRIBUTE_HOST_POINTER = 4,
  CU_POINTER_ATTRIBUTE_BUFFER_ID = 7,
  CU_POINTER_ATTRIBUTE_IS_MANAGED = 8,
  CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
  CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE = 10,
  CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,
  CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12,
  CU_POINTER_ATTRIBUTE_MAPPED = 13,
};
enum { CU_MEMORYTYPE_HOST = 1, CU_MEMORYTYPE_DEVICE = 2 };
enum {  // host memory flags
  CU_MEMHOSTALLOC_PORTABLE = 0x1,
  CU_MEMHOSTALLOC_DEVICEMAP = 0x2,
  CU_MEMHOSTALLOC_WRITECOMBINED = 0x4,
  CU_MEMHOSTREGISTER_PORTABLE = 0x1,
  CU_MEMHOSTREGISTER_DEVICEMAP = 0x2,
  CU_MEMHOSTREGISTER_IOMEMORY = 0x4,
  CU_MEMHOSTREGISTER_READ_ONLY = 0x8,
  CU_MEM_ATTACH_GLOBAL = 0x1,
  CU_MEM_ATTACH_HOST = 0x2,
};
enum {  // streams, events, stream memory operations, capture
  CU_STREAM_DEFAULT = 0x0,
  CU_STREAM_NON_BLOCKING = 0x1,
  CU_EVENT_DEFAULT = 0x0,
  CU_EVENT_BLOCKING_SYNC = 0x1,
  CU_EVENT_DISABLE_TIMING = 0x2,
  CU_EVENT_INTERPROCESS = 0x4,
  CU_EVENT_WAIT_EXTERNAL = 0x1,
  CU_STREAM_WAIT_VALUE_GEQ = 0x0,
  CU_STREAM_WAIT_VALUE_EQ = 0x1,
  CU_STREAM_WAIT_VALUE_AND = 0x2,
  CU_STREAM_WAIT_VALUE_NOR = 0x3,
  CU_STREAM_WAIT_VALUE_FLUSH = 1 << 30,
  CU_STREAM_WRITE_VALUE_DEFAULT = 0x0,
  CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER = 0x1,
  CU_STREAM_CAPTURE_STATUS_NONE = 0,
  CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
  CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2,
  CU_STREAM_CAPTURE_MODE_GLOBAL = 0,
  CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
  CU_STREAM_CAPTURE_MODE_RELAXED = 2,
};
#define CU_STREAM_LEGACY ((CUstream)0x1)
#define CU_STREAM_PER_THREAD ((CUstream)0x2)
enum {  // VMM and IPC
  CU_MEM_ALLOCATION_TYPE_PINNED = 0x1,
  CU_MEM_LOCATION_TYPE_DEVICE = 0x1,
  CU_MEM_HANDLE_TYPE_NONE = 0x0,
  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 0x1,
  CU_MEM_ACCESS_FLAGS_PROT_NONE = 0x0,
  CU_MEM_ACCESS_FLAGS_PROT_READ = 0x1,
  CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 0x3,
  CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0x0,
  CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 0x1,
  CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 0x1,
};

// ---- The fake's own limits ----
#define FK_MAX_DEVICES 8
#define FK_CTX_DEPTH 32                   // context stack depth per thread
#define FK_ALIGN 256                      // cuMemAlloc alignment
#define FK_GRANULARITY ((size_t)2 << 20)  // VMM granularity, minimum and recommended
#define FK_PRIO_LEAST 0                   // cuCtxGetStreamPriorityRange
#define FK_PRIO_GREATEST (-5)

typedef struct CUctx_st fk_ctx;
typedef struct CUstream_st fk_stream;
typedef struct CUevent_st fk_event;
typedef struct CUgraph_st fk_graph;

struct CUctx_st {  // one primary context per device; never freed
  int device;
  int refs;                // cuDevicePrimaryCtxRetain minus Release
  fk_stream *legacy;       // the NULL stream, made on first use
  int blocking_captures;   // capturing streams of this context without CU_STREAM_NON_BLOCKING
  unsigned peers;          // cuCtxEnablePeerAccess: one bit per peer device whose memory it may read
};

// ---- Memory regions: every range the driver knows ----
typedef enum {
  FK_DEVICE = 1,   // cuMemAlloc: a piece of a device arena
  FK_MANAGED,      // cuMemAllocManaged: an ordinary read-write mapping
  FK_PINNED,       // cuMemHostAlloc / cuMemAllocHost
  FK_REGISTERED,   // cuMemHostRegister
  FK_VMM,          // one cuMemMap mapping
  FK_IPC,          // one cuIpcOpenMemHandle mapping
} fk_kind;

struct fk_vmm;
struct fk_resv;

typedef struct fk_region {
  struct fk_region *next;
  fk_kind kind;
  uintptr_t start;
  size_t bytes;           // as asked for; copies past it fail
  char *alias;            // host-visible view of `start` (device kinds); NULL: `start` itself
  int device;
  fk_ctx *ctx;
  unsigned flags;         // host alloc / register flags
  uint64_t id;            // CU_POINTER_ATTRIBUTE_BUFFER_ID
  size_t arena_off, arena_len;       // FK_DEVICE: the block in the arena
  struct fk_vmm *handle;             // FK_VMM
  struct fk_resv *resv;              // FK_VMM
  unsigned read_mask, write_mask;    // FK_VMM: cuMemSetAccess, one bit per device
  int refs;                          // FK_IPC: opens in this process
  void *map_dev, *map_alias;         // FK_IPC: the two mmaps
  size_t map_len;
  int ipc_pid, ipc_fd;               // FK_IPC: where it came from
  uint64_t ipc_off;
} fk_region;

typedef struct fk_free {  // a free block of a device arena (sorted by offset)
  struct fk_free *next;
  size_t off, len;
} fk_free;

typedef struct {  // device memory of one device: a memfd mapped twice
  int fd;
  char *base;   // PROT_NONE: what cuMemAlloc hands out
  char *alias;  // read-write view of the same pages
  size_t size;
  fk_free *free;
} fk_arena;

struct fk_vmm {  // a cuMemCreate / cuMemImportFromShareableHandle handle
  struct fk_vmm *next;
  int fd;
  size_t size;
  CUmemAllocationProp prop;
  int refs;  // create/import/retain minus release
  int maps;  // live cuMemMap mappings
};

struct fk_resv {  // a cuMemAddressReserve range and its alias range
  struct fk_resv *next;
  uintptr_t start;
  size_t size;
  char *alias;
};

// ---- Stream operations ----
typedef enum {
  FK_OP_COPY,
  FK_OP_SET,        // memset of 1-, 2- or 4-byte elements
  FK_OP_WRITE,      // cuStreamWriteValue32/64
  FK_OP_WAIT,       // cuStreamWaitValue32/64
  FK_OP_HOSTFN,
  FK_OP_RECORD,     // cuEventRecord
  FK_OP_WAIT_EVENT, // cuStreamWaitEvent
} fk_op_kind;

typedef struct fk_op {
  struct fk_op *next;
  fk_op_kind kind;
  uint64_t seq;
  uintptr_t dst, src;
  unsigned dst_how, src_how;  // fk_translate flags
  size_t bytes;               // COPY, SET (bytes in all)
  unsigned width;             // SET element, WRITE/WAIT value: 1, 2, 4 or 8 bytes
  uint64_t value;
  unsigned flags;
  CUhostFn fn;
  void *arg;
  fk_event *event;
  uint64_t gen;
} fk_op;

struct CUstream_st {
  fk_stream *next;  // registry
  fk_ctx *ctx;
  unsigned flags;
  int priority;
  int legacy;       // a context's NULL stream
  int users;        // callers waiting on it (fk.lock)
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t work_cv, done_cv;
  fk_op *head, *tail;
  uint64_t enqueued, completed;  // ops, in order (mu)
  int stop;
  CUresult error;                // sticky (mu)
  // Capture (fk.lock)
  int capture;                   // CU_STREAM_CAPTURE_STATUS_*
  int capture_mode;
  pthread_t capture_thread;
  fk_graph *graph;
};

struct CUevent_st {
  fk_event *next;
  fk_ctx *ctx;
  unsigned flags;
  int refs;                 // the registry (until destroyed), queued ops, waiters
  uint64_t rec_gen;         // records asked for
  uint64_t done_gen;        // records that ran
  double done_ms;           // when the last one ran (CLOCK_MONOTONIC)
  CUresult error;           // a record skipped after an error
  fk_graph *captured;       // last recorded into a capture
};

struct CUgraph_st {
  fk_graph *next;
  size_t nodes;
};

// ---- Global state (core.c) ----
typedef struct {
  pthread_mutex_t lock;  // every table below
  pthread_cond_t event_cv, users_cv;
  _Atomic int inited;
  int ndev;
  size_t arena_bytes;
  int strict_context;
  long copy_delay_ns;  // FAKE_CUDA_COPY_DELAY_US: each queued copy waits this long first
  fk_ctx ctx[FK_MAX_DEVICES];
  fk_arena arena[FK_MAX_DEVICES];
  fk_region *regions;
  fk_stream *streams;
  fk_event *events;
  fk_graph *graphs;
  struct fk_vmm *handles;
  struct fk_resv *resvs;
  uint64_t next_id;
  _Atomic int shutdown;  // unloading: waits give up, queued work is dropped
  _Atomic int init_calls, query_calls;
} fk_state;
extern fk_state fk;

extern _Thread_local int fk_tls_in_hostfn;
extern _Thread_local int fk_tls_capture_mode;   // cuThreadExchangeStreamCaptureMode

// Every driver entry point starts with one of these: FAKE_CUDA_FAIL, a call
// from a host function (CUDA_ERROR_NOT_PERMITTED), then the cuInit gate.
CUresult fk_enter(const char *fn, int need_init);
#define FK_API()                                        \
  do {                                                  \
    CUresult fk_r_ = fk_enter(__func__, 1);             \
    if (fk_r_ != CUDA_SUCCESS) return fk_r_;            \
  } while (0)
#define FK_API_NOINIT()                                 \
  do {                                                  \
    CUresult fk_r_ = fk_enter(__func__, 0);             \
    if (fk_r_ != CUDA_SUCCESS) return fk_r_;            \
  } while (0)

// core.c
fk_ctx *fk_current(void);                      // top of this thread's stack, or NULL
fk_ctx *fk_ctx_for_alloc(CUresult *err);       // current, or device 0's (see above)
int fk_ctx_valid(const fk_ctx *c);
double fk_now_ms(void);
void fk_backoff(long *ns);                     // sleep, from ~2 us up to 200 us

// mem.c (fk.lock held)
enum {                 // how fk_translate may reach a range
  FK_RD = 1,           // read
  FK_WR = 2,           // written
  FK_DEV = 4,          // a device-pointer argument: pageable host memory is not one
  FK_NOMANAGED = 8,    // stream memory operations refuse managed memory
};
fk_region *fk_region_find(uintptr_t addr);
CUresult fk_translate(uintptr_t addr, size_t bytes, unsigned how, int device, void **host);
void fk_region_add(fk_region *r);
void fk_region_remove(fk_region *r);
int fk_in_device_space(uintptr_t start, size_t bytes);  // an arena, a reservation or an IPC view

// stream.c
CUresult fk_stream_get(CUstream h, fk_stream **s);   // pins a stream (fk.lock held)
void fk_stream_put(fk_stream *s);                    // fk.lock held
CUresult fk_submit(CUstream h, const fk_op *op, uint64_t *seq, fk_stream **pinned);
CUresult fk_stream_wait(fk_stream *s, uint64_t seq);
CUresult fk_sync_op(const fk_op *op);                // the legacy stream, then wait
void fk_stream_stop_all(void);                       // unload
void fk_streams_forget(void);                        // fork child
CUresult fk_ctx_sync(fk_ctx *c);
void fk_ctx_release_streams(fk_ctx *c);

// event.c (fk.lock held)
void fk_event_put(fk_event *e);
void fk_event_done(fk_event *e, uint64_t gen, CUresult err);
CUresult fk_capture_check_unsafe(void);              // an unsafe call during capture
CUresult fk_capture_check_legacy(fk_stream *s);      // the legacy stream during a blocking capture
void fk_capture_invalidate(fk_stream *s);
void fk_capture_end(fk_stream *s);                   // drop a capture (stream destroyed)

#endif
