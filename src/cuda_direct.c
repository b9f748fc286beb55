/*
 * cuda_direct.c — the direct path for device buffers (see cuda_direct.h):
 * set-up at communicator creation, the per-call stream work, teardown.
 */
#include "cuda_direct.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap.h"
#include "checks.h"
#include "cuda_kernels_dl.h"
#include "cuda_ring.h"
#include "cuda_rt.h"
#include "env.h"
#include "group.h"
#include "util.h"

#define COUNTERS 256     // bytes before the operand: ready at +0, done at +64
#define READY 0
#define DONE 64

typedef struct weft_cuda_direct {
  weft_CUcontext ctx;
  size_t max_bytes;         // the largest operand (WEFT_CUDA_DIRECT_MAX_BYTES)
  weft_CUdeviceptr mine;    // this rank's scratch: counters, then the operand
  weft_CUdeviceptr *peer;   // [nranks]: each rank's scratch as this process addresses it
  uint8_t *opened;          // [nranks]: mapped with cuIpcOpenMemHandle (to close)
  uint32_t calls;           // calls made on the path (the k of the next one, minus 1)
  const weft_cuda_kernels_t *kern;
} weft_cuda_direct_t;

typedef struct {  // what each rank publishes at set-up
  int32_t ok;     // this rank can take part
  int32_t pid;
  weft_CUdeviceptr scratch;
  weft_CUipcMemHandle handle;
} direct_card_t;

static void direct_drop(weft_cuda_direct_t *d, const weft_cuda_driver_t *drv, int nranks) {
  if (d == NULL) return;
  if (d->ctx != NULL && drv != NULL && drv->cuCtxPushCurrent(d->ctx) == WEFT_CUDA_SUCCESS) {
    for (int p = 0; d->opened != NULL && p < nranks; p++)
      if (d->opened[p]) drv->cuIpcCloseMemHandle(d->peer[p]);
    if (d->mine != 0) drv->cuMemFree(d->mine);
    weft_CUcontext popped;
    drv->cuCtxPopCurrent(&popped);
  }
  free(d->peer);
  free(d->opened);
  free(d);
}

// This rank's part of the set-up: its scratch and card (card->ok = 0 when
// it cannot take part, which turns the path off on every rank).
static weft_cuda_direct_t *direct_prepare(struct ncclComm *comm, const weft_cuda_driver_t *drv, direct_card_t *card) {
  memset(card, 0, sizeof(*card));
  card->pid = (int32_t)getpid();
  const weft_cuda_kernels_t *kern = weft_cuda_kernels();
  if (comm->nhosts != 1 || comm->cuda_ctx == NULL || !weft_cuda_has_direct(drv) || kern == NULL) return NULL;
  weft_cuda_direct_t *d = calloc(1, sizeof(*d));
  if (d == NULL) return NULL;
  d->ctx = comm->cuda_ctx;
  d->kern = kern;
  d->max_bytes = (size_t)weft_env_WEFT_CUDA_DIRECT_MAX_BYTES();
  d->peer = calloc((size_t)comm->nranks, sizeof(*d->peer));
  d->opened = calloc((size_t)comm->nranks, 1);
  if (d->peer == NULL || d->opened == NULL || drv->cuCtxPushCurrent(d->ctx) != WEFT_CUDA_SUCCESS) {
    d->ctx = NULL;
    direct_drop(d, drv, comm->nranks);
    return NULL;
  }
  weft_CUresult r = drv->cuMemAlloc(&d->mine, COUNTERS + d->max_bytes);
  if (r == WEFT_CUDA_SUCCESS) r = drv->cuMemsetD8(d->mine, 0, COUNTERS);
  if (r == WEFT_CUDA_SUCCESS) r = drv->cuIpcGetMemHandle(&card->handle, d->mine);
  weft_CUcontext popped;
  drv->cuCtxPopCurrent(&popped);
  if (r != WEFT_CUDA_SUCCESS) {
    INFO(WEFT_LOG_INIT, "CUDA direct path: rank %d cannot set up its scratch (CUDA error %d, %s)", comm->rank, r,
         weft_cuda_error_text(r));
    direct_drop(d, drv, comm->nranks);
    return NULL;
  }
  card->ok = 1;
  card->scratch = d->mine;
  return d;
}

// Maps every peer's scratch; 0 when one cannot be.
static int direct_map(struct ncclComm *comm, const weft_cuda_driver_t *drv, weft_cuda_direct_t *d,
                      const direct_card_t *cards) {
  if (drv->cuCtxPushCurrent(d->ctx) != WEFT_CUDA_SUCCESS) return 0;
  int ok = 1;
  for (int p = 0; p < comm->nranks && ok; p++) {
    if (cards[p].pid == cards[comm->rank].pid) {  // one process: one address space
      d->peer[p] = cards[p].scratch;
      continue;
    }
    weft_CUresult r = drv->cuIpcOpenMemHandle(&d->peer[p], cards[p].handle, WEFT_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    if (r != WEFT_CUDA_SUCCESS) {
      INFO(WEFT_LOG_INIT, "CUDA direct path: rank %d cannot map rank %d's scratch (CUDA error %d, %s)", comm->rank,
           p, r, weft_cuda_error_text(r));
      ok = 0;
    }
    d->opened[p] = r == WEFT_CUDA_SUCCESS;
  }
  weft_CUcontext popped;
  drv->cuCtxPopCurrent(&popped);
  return ok;
}

ncclResult_t weft_cuda_direct_init(struct ncclComm *comm) {
  if (weft_env_WEFT_CUDA_DIRECT() == 0) return ncclSuccess;  // the same on every rank
  const weft_cuda_driver_t *drv = weft_cuda_driver();
  int n = comm->nranks;
  direct_card_t *cards = calloc((size_t)n, sizeof(*cards));
  int32_t *mapped = calloc((size_t)n, sizeof(*mapped));
  if (cards == NULL || mapped == NULL) {
    free(cards);
    free(mapped);
    return ncclSystemError;
  }
  weft_cuda_direct_t *d = direct_prepare(comm, drv, &cards[comm->rank]);
  ncclResult_t res = weft_bootstrap_allgather(&comm->bs, cards, sizeof(*cards));
  int all = res == ncclSuccess;
  for (int p = 0; p < n && all; p++) all = cards[p].ok;
  mapped[comm->rank] = all && d != NULL && direct_map(comm, drv, d, cards);
  if (res == ncclSuccess) res = weft_bootstrap_allgather(&comm->bs, mapped, sizeof(*mapped));
  for (int p = 0; p < n && all; p++) all = res == ncclSuccess && mapped[p];
  if (all) {
    comm->cuda_direct = d;
    INFO(WEFT_LOG_INIT, "CUDA direct path: on for all-reduce up to %zu bytes among %d ranks", d->max_bytes, n);
  } else {
    direct_drop(d, drv, n);
    INFO(WEFT_LOG_INIT, "CUDA direct path: off (WEFT_CUDA_DIRECT=1, but a rank lacks the driver's IPC calls, the "
         "kernels, a current context or one host with the others)");
  }
  free(cards);
  free(mapped);
  // Nobody queues work before everyone has set up: set-up allocates device
  // memory, which synchronises a context that ranks in threads share.
  if (res == ncclSuccess) res = weft_bootstrap_barrier(&comm->bs);
  return res;
}

int weft_cuda_direct_eligible(const weft_op_t *op) {
  const weft_cuda_direct_t *d = op->comm->cuda_direct;
  return d != NULL && op->args.coll == WEFT_COLL_ALLREDUCE && op->dev.on && op->dev.scalar == NULL &&
         op->args.count * op->esize <= d->max_bytes && op->args.count > 0;
}

#define CUCALL(what, expr)                                                                                \
  do {                                                                                                    \
    weft_CUresult r_ = (expr);                                                                            \
    if (r_ != WEFT_CUDA_SUCCESS) {                                                                        \
      WARN("AllReduce (CUDA direct path): %s failed: CUDA error %d (%s)", what, r_, weft_cuda_error_text(r_)); \
      res = ncclUnhandledCudaError;                                                                       \
      goto out;                                                                                           \
    }                                                                                                     \
  } while (0)

static ncclResult_t kernel_failed(const weft_cuda_direct_t *d, int err) {
  WARN("AllReduce (CUDA direct path): a kernel of libweft-cuda.so failed to launch: %s", d->kern->error_string(err));
  return ncclUnhandledCudaError;
}

ncclResult_t weft_cuda_direct_queue(weft_op_t *op, weft_cuda_chan_t *chan) {
  struct ncclComm *comm = op->comm;
  weft_cuda_direct_t *d = comm->cuda_direct;
  const weft_cuda_driver_t *drv = weft_cuda_driver();
  weft_CUstream s = weft_cuda_chan_stream(chan);
  size_t bytes = op->args.count * op->esize;
  int n = comm->nranks, me = comm->rank;
  ncclResult_t res = ncclSuccess;
  if (drv->cuCtxPushCurrent(weft_cuda_chan_context(chan)) != WEFT_CUDA_SUCCESS) return ncclUnhandledCudaError;
  uint32_t k = ++d->calls;
  for (int p = 0; p < n && k > 1; p++)
    if (p != me)
      CUCALL("cuStreamWaitValue32 (peer done)",
             drv->cuStreamWaitValue32(s, d->peer[p] + DONE, k - 1, WEFT_CU_STREAM_WAIT_VALUE_GEQ));
  cudaStream_t cs = (cudaStream_t)(void *)s;
  void *scratch = (void *)(uintptr_t)(d->mine + COUNTERS);
  int err = 0;
  if (op->redop.prescale) {  // PreMulSum/avg: each rank scales its own operand, as on the host path
    if ((err = d->kern->reduce_first(&op->redop, scratch, op->dev.send, op->args.count, 0, cs)) != 0) {
      res = kernel_failed(d, err);
      goto out;
    }
  } else {
    CUCALL("cuMemcpyAsync (operand to scratch)",
           drv->cuMemcpyAsync(d->mine + COUNTERS, (weft_CUdeviceptr)(uintptr_t)op->dev.send, bytes, s));
  }
  CUCALL("cuStreamWriteValue32 (ready)",
         drv->cuStreamWriteValue32(s, d->mine + READY, k, WEFT_CU_STREAM_WRITE_VALUE_DEFAULT));
  for (int p = 0; p < n; p++)
    if (p != me)
      CUCALL("cuStreamWaitValue32 (peer ready)",
             drv->cuStreamWaitValue32(s, d->peer[p] + READY, k, WEFT_CU_STREAM_WAIT_VALUE_GEQ));
  // The operands are scaled already: fold them with the op's unscaled twin.
  void *recv = op->dev.recv;
  err = d->kern->reduce_first(&op->redop_acc, recv, (const void *)(uintptr_t)(d->peer[0] + COUNTERS),
                                op->args.count, n == 1, cs);
  for (int p = 1; p < n && err == 0; p++)
    err = d->kern->reduce(&op->redop_acc, recv, recv, (const void *)(uintptr_t)(d->peer[p] + COUNTERS),
                          op->args.count, p == n - 1, cs);
  if (err != 0) {
    res = kernel_failed(d, err);
    goto out;
  }
  CUCALL("cuStreamWriteValue32 (done)",
         drv->cuStreamWriteValue32(s, d->mine + DONE, k, WEFT_CU_STREAM_WRITE_VALUE_DEFAULT));
out:;
  weft_CUcontext popped;
  drv->cuCtxPopCurrent(&popped);
  if (res != ncclSuccess) weft_comm_set_error(comm, res);
  return res;
}

// Peers may still be reading this rank's scratch: wait (bounded) until each
// has said done for every call, before the scratch goes.
static void direct_quiesce(struct ncclComm *comm, weft_cuda_direct_t *d, const weft_cuda_driver_t *drv) {
  if (d->calls == 0 || drv->cuCtxPushCurrent(d->ctx) != WEFT_CUDA_SUCCESS) return;
  int64_t limit = weft_timeout_ms() > 0 ? weft_timeout_ms() : 60000, end = weft_now_ms() + limit;
  for (int p = 0; p < comm->nranks; p++) {
    uint32_t v = 0;
    while (drv->cuMemcpyAsync((weft_CUdeviceptr)(uintptr_t)&v, d->peer[p] + DONE, sizeof(v), NULL) ==
               WEFT_CUDA_SUCCESS &&
           drv->cuStreamSynchronize(NULL) == WEFT_CUDA_SUCCESS && !weft_cyclic_ge(v, d->calls) && weft_now_ms() < end) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
  }
  weft_CUcontext popped;
  drv->cuCtxPopCurrent(&popped);
}

void weft_cuda_direct_free(struct ncclComm *comm) {
  if (comm->cuda_direct == NULL) return;
  const weft_cuda_driver_t *drv = weft_cuda_driver();
  direct_quiesce(comm, comm->cuda_direct, drv);
  direct_drop(comm->cuda_direct, drv, comm->nranks);
  comm->cuda_direct = NULL;
}
