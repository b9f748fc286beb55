/*
 * cuda_direct.c — the direct path for device buffers (see cuda_direct.h):
 * set-up at communicator creation and teardown. The calls themselves are
 * in cuda_direct_rounds.c.
 */
#include "cuda_direct.h"

#include <stdint.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap.h"
#include "checks.h"
#include "cuda_kernels_dl.h"
#include "cuda_direct_state.h"
#include "cuda_ring.h"
#include "cuda_rt.h"
#include "env.h"
#include "util.h"

typedef struct {  // what each rank publishes at set-up
  int32_t ok;     // this rank can take part
  int32_t pid;
  int32_t device;
  int32_t pad;
  uint64_t slot_bytes;
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
  card->device = comm->cuda_dev;
  const weft_cuda_kernels_t *kern = weft_cuda_kernels();
  int64_t slot_env = weft_env_WEFT_CUDA_DIRECT_SCRATCH_BYTES();
  if (slot_env < 4096 || slot_env > ((int64_t)1 << 32)) {
    WARN("WEFT_CUDA_DIRECT_SCRATCH_BYTES=%lld is outside [4096, 4 GiB]: the direct path is off", (long long)slot_env);
    return NULL;
  }
  if (comm->nhosts != 1 || comm->cuda_ctx == NULL || !weft_cuda_has_direct(drv) || kern == NULL) return NULL;
  weft_cuda_direct_t *d = calloc(1, sizeof(*d));
  if (d == NULL) return NULL;
  d->ctx = comm->cuda_ctx;
  d->kern = kern;
  size_t slot = (size_t)slot_env;
  d->peer = calloc((size_t)comm->nranks, sizeof(*d->peer));
  d->opened = calloc((size_t)comm->nranks, 1);
  if (d->peer == NULL || d->opened == NULL || drv->cuCtxPushCurrent(d->ctx) != WEFT_CUDA_SUCCESS) {
    d->ctx = NULL;
    direct_drop(d, drv, comm->nranks);
    return NULL;
  }
  weft_CUresult r = drv->cuMemAlloc(&d->mine, WEFT_DIRECT_COUNTERS + 2 * slot);
  if (r == WEFT_CUDA_SUCCESS) r = drv->cuMemsetD8(d->mine, 0, WEFT_DIRECT_COUNTERS);
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
  card->slot_bytes = slot;
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
      // Kernels may read another device's memory only with peer access,
      // which one process's contexts do not grant each other here.
      if (cards[p].device != cards[comm->rank].device) {
        INFO(WEFT_LOG_INIT, "CUDA direct path: ranks %d and %d are threads of one process on devices %d and %d",
             comm->rank, p, cards[comm->rank].device, cards[p].device);
        ok = 0;
      }
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
    d->slot_bytes = cards[0].slot_bytes;
    for (int p = 1; p < n; p++)
      if (cards[p].slot_bytes < d->slot_bytes) d->slot_bytes = cards[p].slot_bytes;
    comm->cuda_direct = d;
    INFO(WEFT_LOG_INIT, "CUDA direct path: on for collectives among %d ranks, rounds of up to %zu bytes", n,
         d->slot_bytes);
  } else {
    direct_drop(d, drv, n);
    INFO(WEFT_LOG_INIT, "CUDA direct path: off (WEFT_CUDA_DIRECT=1, but a rank lacks the driver's IPC calls, the "
         "kernels, a current context, one host with the others, or a mapping of a peer's scratch)");
  }
  free(cards);
  free(mapped);
  // Nobody queues work before everyone has set up: set-up allocates device
  // memory, which synchronises a context that ranks in threads share.
  if (res == ncclSuccess) res = weft_bootstrap_barrier(&comm->bs);
  return res;
}

// Peers may still be reading this rank's scratch: wait (bounded) until each
// has said done for every call, before the scratch goes.
static void direct_quiesce(struct ncclComm *comm, weft_cuda_direct_t *d, const weft_cuda_driver_t *drv) {
  if (d->rounds == 0 || drv->cuCtxPushCurrent(d->ctx) != WEFT_CUDA_SUCCESS) return;
  int64_t limit = weft_timeout_ms() > 0 ? weft_timeout_ms() : 60000, end = weft_now_ms() + limit;
  for (int p = 0; p < comm->nranks; p++) {
    uint32_t v = 0;
    while (drv->cuMemcpyAsync((weft_CUdeviceptr)(uintptr_t)&v, d->peer[p] + WEFT_DIRECT_DONE, sizeof(v), NULL) ==
               WEFT_CUDA_SUCCESS &&
           drv->cuStreamSynchronize(NULL) == WEFT_CUDA_SUCCESS && !weft_cyclic_ge(v, d->rounds) && weft_now_ms() < end) {
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
