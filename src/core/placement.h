/*
 * placement.h — the seam between the core and device memory: what src/core
 * and src/boot ask about CUDA, in plain C types and opaque handles.
 *
 * The core owns this interface and src/cuda implements it (cuda_rt.c,
 * cuda_stream.c, cuda_ipc*.c, cuda_comm.c), so the core and boot include
 * no src/cuda header (scripts/check-includes.py holds them to it). Without a
 * driver every call here is a no-op or a single branch: every pointer is host
 * memory and no communicator has a device. docs/gpu_memory.md tells the
 * design; src/cuda's headers hold what only src/cuda needs.
 */
#ifndef WEFT_PLACEMENT_H
#define WEFT_PLACEMENT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "nccl.h"

struct weft_stream;

// ---- The driver and its devices (cuda_rt.c) ----
enum { WEFT_CUDA_UNKNOWN = 0, WEFT_CUDA_ABSENT = 1, WEFT_CUDA_PRESENT = 2 };
extern _Atomic int weft_cuda_state;

// Loads the driver if nobody has tried yet (thread-safe, once) and returns
// WEFT_CUDA_ABSENT or WEFT_CUDA_PRESENT. Never fails: a missing library, a
// missing symbol, a failing cuInit or zero devices all mean "absent".
int weft_cuda_load(void);
// Number of devices the driver reported (0 when absent).
int weft_cuda_device_count(void);
// The device of the calling thread's current context, or -1 (no CUDA, no context).
int weft_cuda_current_device(void);
// The PCI bus id ("0000:1b:00.0") of device dev into buf; 0, or -1 when the
// driver cannot say.
int weft_cuda_device_busid(int dev, char *buf, int len);
// Makes dev's primary context current in the calling thread, as
// cudaSetDevice does (the context is retained for the life of the
// process); 0 on success, else a CUDA error code (-1: no driver or calls).
int weft_cuda_use_device(int dev);
// The driver's text for an error code ("unknown error" when it has none).
const char *weft_cuda_error_text(int r);

// ---- Pointer classification (cuda_rt.c) ----
typedef enum {
  WEFT_MEM_HOST = 0,     // pageable host memory, or CUDA-registered/pinned host memory
  WEFT_MEM_DEVICE = 1,   // cuMemAlloc / cudaMalloc memory of one device
  WEFT_MEM_MANAGED = 2,  // cuMemAllocManaged / cudaMallocManaged
  WEFT_MEM_MIXED = 3,    // the buffer's first and last bytes differ in kind or device
} weft_mem_kind_t;

typedef struct {
  weft_mem_kind_t kind;
  int device;      // ordinal for DEVICE and MANAGED (-1: unknown or host)
  int registered;  // HOST memory the driver knows (cudaHostAlloc, cuMemHostRegister)
} weft_mem_info_t;

const char *weft_mem_kind_name(weft_mem_kind_t kind);

void weft_mem_classify_slow(const void *ptr, size_t bytes, weft_mem_info_t *out);

// What `bytes` bytes at `ptr` are. NULL or zero bytes: HOST. Without CUDA
// this is one predictable branch on a cached state.
static inline void weft_mem_classify(const void *ptr, size_t bytes, weft_mem_info_t *out) {
  if (__builtin_expect(atomic_load_explicit(&weft_cuda_state, memory_order_acquire) == WEFT_CUDA_ABSENT, 1)) {
    *out = (weft_mem_info_t){WEFT_MEM_HOST, -1, 0};
    return;
  }
  weft_mem_classify_slow(ptr, bytes, out);
}

// ---- A communicator's device (cuda_comm.c) ----
// Creation: comm->cuda_dev and comm->cuda_ctx from the caller's current
// context, as NCCL does, and that context's pinned staging reserved before
// any rank can queue work (cuda_staging.h). Nothing without a device.
void weft_cuda_comm_bind(struct ncclComm *comm);

// ---- Device buffers on CUDA streams (cuda_stream.c) ----
typedef struct weft_cuda_bridge weft_dev_bridge_t;
struct staging;

// A batch's place in its bridge: the worker waits for reached >= k before
// it runs the batch and stores done = k after it. k = 0: staged (its
// staging block reserved), not queued yet.
typedef struct {
  weft_dev_bridge_t *bridge;
  uint32_t k;
  int slot;               // the batch's region of the bridge's staging ring, or -1
  struct staging *block;  // else its dedicated staging block
} weft_dev_gate_t;
// The bridge of `stream` for comm (made on first use; comm then holds a
// reference). Refuses a stream being captured into a graph, a stream of
// another device than the buffers' (`device`), and a thread with no
// current context for the NULL stream.
ncclResult_t weft_cuda_bridge_get(struct ncclComm *comm, cudaStream_t stream, int device, const char *api,
                                  weft_dev_bridge_t **out);
// The host stream whose worker runs the bridge's batches.
struct weft_stream *weft_cuda_bridge_worker(weft_dev_bridge_t *bridge);
// A batch is made in two phases, each run for every bridge of a group
// before the next: pinning host memory synchronises the context, so no
// staging may be allocated once any of the group's stream waits is queued.
// Stage: reserve host staging for the operations (their sendbuff/recvbuff
// now point there; the device pointers stay in op->dev); may allocate.
ncclResult_t weft_cuda_batch_stage(weft_dev_bridge_t *bridge, weft_op_t **ops, int nops, weft_dev_gate_t *gate);
// Queue: the copies and the counters on the user's stream; gate->k is then
// the batch's number. Allocates nothing. On failure with the WAIT already
// queued, gate stays set and the caller must abandon it; otherwise gate is
// cleared. Both run before the operations are launched.
ncclResult_t weft_cuda_batch_queue(weft_dev_gate_t *gate, weft_op_t **ops, int nops);
// Worker side: wait until the stream reached the gate, then read the
// operations' device-resident scalars from staging.
void weft_cuda_gate_wait(const weft_dev_gate_t *gate, weft_op_t **ops, int nops);
// Worker side: release the stream (done = k), whatever the batch's outcome.
void weft_cuda_gate_open(const weft_dev_gate_t *gate);
// A batch that will not run (a later step failed): a staged one gives its
// block back; a queued one goes to the worker empty, so the stream is
// released in order. Clears the gate.
void weft_cuda_gate_abandon(weft_dev_gate_t *gate);

// Whether a PreMulSum scalar given with ncclScalarDevice lies in device or
// managed memory: then it is copied in stream order at each call, never
// read by the host at creation.
int weft_cuda_scalar_on_device(const void *scalar, size_t bytes);
// A communicator is freed: drop its references to bridges (a bridge no
// communicator uses any more is drained and freed).
void weft_cuda_comm_release(struct ncclComm *comm);

// ---- The IPC path (cuda_ipc*.c, WEFT_CUDA_IPC=1) ----
// Communicator creation (every rank, after its transports are connected):
// sets up the IPC path when WEFT_CUDA_IPC=1, the ranks share one host,
// and every rank has the driver, the kernels and a current context; else
// leaves it off on every rank alike. Fails only on a bootstrap failure.
ncclResult_t weft_cuda_ipc_init(struct ncclComm *comm);
// Whether op (device buffers) takes the IPC path.
int weft_cuda_ipc_eligible(const weft_op_t *op);
// Queues a collective on bridge's stream; op stays the caller's.
ncclResult_t weft_cuda_ipc_queue(weft_op_t *op, weft_dev_bridge_t *bridge);
// Queues Send/Recv calls (one, or a group's, in call order) on their
// bridges' streams, interleaved in rounds; the ops stay the caller's.
ncclResult_t weft_cuda_ipc_queue_p2p(weft_op_t **ops, weft_dev_bridge_t **bridges, int n);
// ncclCommAbort: every counter this rank's streams may wait on (in its own
// and its peers' scratch) is set past any call, so those streams run on;
// what the aborted calls leave in their buffers is undefined.
void weft_cuda_ipc_release(struct ncclComm *comm);
// Device memory the IPC path holds for comm (its scratch), 0 without it.
// Peers map the scratch, so it stays for the communicator's life.
size_t weft_cuda_ipc_device_bytes(const struct ncclComm *comm);
// Teardown: waits (bounded) until peers stopped reading this rank's scratch,
// unless it was released.
void weft_cuda_ipc_free(struct ncclComm *comm);

#endif
