/*
 * cuda_ipc.c — the IPC path for device buffers (see cuda_ipc.h):
 * set-up at communicator creation and teardown. The calls themselves are
 * in cuda_ipc_rounds.c (collectives) and cuda_ipc_p2p.c (Send/Recv).
 */
#include "cuda_ipc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap.h"
#include "checks.h"
#include "cuda_kernels_dl.h"
#include "cuda_ipc_state.h"
#include "cuda_ring.h"
#include "cuda_rt.h"
#include "env.h"
#include "util.h"

typedef struct {  // what each rank publishes at set-up
  int32_t ok;     // this rank can take part
  int32_t pid;
  int32_t device;
  int32_t pad;
  uint64_t ctx;   // its context (meaningful to ranks of the same process)
  uint64_t slot_bytes, box_bytes, two_phase_min;
  weft_CUdeviceptr scratch;
  weft_CUipcMemHandle handle;
} ipc_card_t;

// The scratch layout (cuda_ipc_state.h); its size.
static size_t ipc_layout(weft_cuda_ipc_t *d, int nranks) {
  size_t counters = WEFT_IPC_P2P + ((8 * (size_t)nranks + 255) & ~(size_t)255);
  d->box_at = counters;
  d->slot_at = d->box_at + 2 * (size_t)nranks * d->box_bytes;
  return d->slot_at + 2 * d->slot_bytes;
}

// A size knob's value, or 0 (with a WARN) outside [4 KiB, 4 GiB].
static size_t ipc_knob(const char *name, int64_t v) {
  if (v >= 4096 && v <= ((int64_t)1 << 32)) return (size_t)v;
  WARN("%s=%lld is outside [4096, 4 GiB]: the CUDA IPC path is off", name, (long long)v);
  return 0;
}

size_t weft_cuda_ipc_device_bytes(const struct ncclComm *comm) {
  weft_cuda_ipc_t *d = comm->cuda_ipc;
  return d != NULL && d->mine != 0 ? ipc_layout(d, comm->nranks) : 0;
}

static void ipc_drop(weft_cuda_ipc_t *d, const weft_cuda_driver_t *drv, int nranks) {
  if (d == NULL) return;
  if (d->ctx != NULL && drv != NULL && drv->cuCtxPushCurrent(d->ctx) == WEFT_CUDA_SUCCESS) {
    for (int p = 0; d->opened != NULL && p < nranks; p++)
      if (d->opened[p]) drv->cuIpcCloseMemHandle(d->peer[p]);
    if (d->mine != 0) drv->cuMemFree(d->mine);
    if (d->side != NULL) drv->cuStreamDestroy(d->side);
    weft_CUcontext popped;
    drv->cuCtxPopCurrent(&popped);
  }
  free(d->peer);
  free(d->opened);
  free(d->sent);
  free(d->taken);
  free(d);
}

// This rank's part of the set-up: its scratch and card (card->ok = 0 when
// it cannot take part, which turns the path off on every rank).
static weft_cuda_ipc_t *ipc_prepare(struct ncclComm *comm, const weft_cuda_driver_t *drv, ipc_card_t *card) {
  memset(card, 0, sizeof(*card));
  card->pid = (int32_t)getpid();
  card->device = comm->cuda_dev;
  card->ctx = (uint64_t)(uintptr_t)comm->cuda_ctx;
  const weft_cuda_kernels_t *kern = weft_cuda_kernels();
  size_t slot = ipc_knob("WEFT_CUDA_IPC_SCRATCH_BYTES", weft_env_WEFT_CUDA_IPC_SCRATCH_BYTES());
  size_t box = ipc_knob("WEFT_CUDA_IPC_P2P_BYTES", weft_env_WEFT_CUDA_IPC_P2P_BYTES());
  if (slot == 0 || box == 0) return NULL;
  if (comm->nhosts != 1 || comm->cuda_ctx == NULL || !weft_cuda_has_ipc(drv) || kern == NULL) return NULL;
  weft_cuda_ipc_t *d = calloc(1, sizeof(*d));
  if (d == NULL) return NULL;
  d->ctx = comm->cuda_ctx;
  d->kern = kern;
  d->slot_bytes = slot;
  d->box_bytes = box;
  int64_t tp = weft_env_WEFT_CUDA_IPC_TWO_PHASE_MIN_BYTES();
  d->two_phase_min = tp > 0 ? (size_t)tp : 0;
  size_t bytes = ipc_layout(d, comm->nranks);
  d->peer = calloc((size_t)comm->nranks, sizeof(*d->peer));
  d->opened = calloc((size_t)comm->nranks, 1);
  d->sent = calloc((size_t)comm->nranks, sizeof(*d->sent));
  d->taken = calloc((size_t)comm->nranks, sizeof(*d->taken));
  if (d->peer == NULL || d->opened == NULL || d->sent == NULL || d->taken == NULL ||
      drv->cuCtxPushCurrent(d->ctx) != WEFT_CUDA_SUCCESS) {
    d->ctx = NULL;
    ipc_drop(d, drv, comm->nranks);
    return NULL;
  }
  weft_CUresult r = drv->cuMemAlloc(&d->mine, bytes);
  if (r == WEFT_CUDA_SUCCESS) r = drv->cuMemsetD8(d->mine, 0, d->box_at);  // the counters
  if (r == WEFT_CUDA_SUCCESS) r = drv->cuIpcGetMemHandle(&card->handle, d->mine);
  if (r == WEFT_CUDA_SUCCESS) r = drv->cuStreamCreate(&d->side, 1 /* CU_STREAM_NON_BLOCKING */);
  weft_CUcontext popped;
  drv->cuCtxPopCurrent(&popped);
  if (r != WEFT_CUDA_SUCCESS) {
    INFO(WEFT_LOG_INIT, "CUDA IPC path: rank %d cannot set up its scratch (CUDA error %d, %s)", comm->rank, r,
         weft_cuda_error_text(r));
    ipc_drop(d, drv, comm->nranks);
    return NULL;
  }
  card->ok = 1;
  card->slot_bytes = slot;
  card->box_bytes = box;
  card->two_phase_min = d->two_phase_min;
  card->scratch = d->mine;
  return d;
}

// Ranks of one process on two devices: kernels may read the other device's
// memory only once its context granted peer access (the current context is
// this rank's). 0 when it cannot.
static int enable_peer_access(const struct ncclComm *comm, const weft_cuda_driver_t *drv, const ipc_card_t *me,
                              const ipc_card_t *peer, int p) {
  int can = 0;
  weft_CUresult r = WEFT_CUDA_SUCCESS;
  if (drv->cuDeviceCanAccessPeer == NULL || drv->cuCtxEnablePeerAccess == NULL ||
      drv->cuDeviceCanAccessPeer(&can, me->device, peer->device) != WEFT_CUDA_SUCCESS || !can ||
      ((r = drv->cuCtxEnablePeerAccess((weft_CUcontext)(uintptr_t)peer->ctx, 0)) != WEFT_CUDA_SUCCESS &&
       r != WEFT_CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)) {
    INFO(WEFT_LOG_INIT, "CUDA IPC path: rank %d (device %d) cannot read rank %d's device %d: %s", comm->rank,
         me->device, p, peer->device, can ? weft_cuda_error_text(r) : "no peer access between them");
    return 0;
  }
  return 1;
}

// Maps every peer's scratch; 0 when one cannot be.
static int ipc_map(struct ncclComm *comm, const weft_cuda_driver_t *drv, weft_cuda_ipc_t *d,
                   const ipc_card_t *cards) {
  if (drv->cuCtxPushCurrent(d->ctx) != WEFT_CUDA_SUCCESS) return 0;
  int ok = 1;
  for (int p = 0; p < comm->nranks && ok; p++) {
    if (cards[p].pid == cards[comm->rank].pid) {  // one process: one address space
      const ipc_card_t *me = &cards[comm->rank];
      ok = cards[p].device == me->device || enable_peer_access(comm, drv, me, &cards[p], p);
      d->peer[p] = cards[p].scratch;
      continue;
    }
    weft_CUresult r = drv->cuIpcOpenMemHandle(&d->peer[p], cards[p].handle, WEFT_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    if (r != WEFT_CUDA_SUCCESS) {
      INFO(WEFT_LOG_INIT, "CUDA IPC path: rank %d cannot map rank %d's scratch (CUDA error %d, %s)", comm->rank,
           p, r, weft_cuda_error_text(r));
      ok = 0;
    }
    d->opened[p] = r == WEFT_CUDA_SUCCESS;
  }
  weft_CUcontext popped;
  drv->cuCtxPopCurrent(&popped);
  return ok;
}

ncclResult_t weft_cuda_ipc_init(struct ncclComm *comm) {
  if (weft_env_WEFT_CUDA_IPC() == 0) return ncclSuccess;  // the same on every rank
  const weft_cuda_driver_t *drv = weft_cuda_driver();
  int n = comm->nranks;
  ipc_card_t *cards = calloc((size_t)n, sizeof(*cards));
  int32_t *mapped = calloc((size_t)n, sizeof(*mapped));
  if (cards == NULL || mapped == NULL) {
    free(cards);
    free(mapped);
    return ncclSystemError;
  }
  weft_cuda_ipc_t *d = ipc_prepare(comm, drv, &cards[comm->rank]);
  ncclResult_t res = weft_bootstrap_allgather(&comm->bs, cards, sizeof(*cards));
  int all = res == ncclSuccess;
  for (int p = 0; p < n && all; p++) all = cards[p].ok;
  for (int p = 0; p < n && all; p++)
    if (cards[p].slot_bytes != cards[0].slot_bytes || cards[p].box_bytes != cards[0].box_bytes ||
        cards[p].two_phase_min != cards[0].two_phase_min) {
      if (comm->rank == 0)
        WARN("CUDA IPC path: off, since WEFT_CUDA_IPC_SCRATCH_BYTES, WEFT_CUDA_IPC_P2P_BYTES or "
             "WEFT_CUDA_IPC_TWO_PHASE_MIN_BYTES differs between rank 0 and rank %d", p);
      all = 0;
    }
  mapped[comm->rank] = all && d != NULL && ipc_map(comm, drv, d, cards);
  if (res == ncclSuccess) res = weft_bootstrap_allgather(&comm->bs, mapped, sizeof(*mapped));
  for (int p = 0; p < n && all; p++) all = res == ncclSuccess && mapped[p];
  if (all) {
    comm->cuda_ipc = d;
    INFO(WEFT_LOG_INIT, "CUDA IPC path: on among %d ranks, collectives in rounds of up to %zu bytes, Send/Recv "
         "of up to %zu", n, d->slot_bytes, d->box_bytes);
  } else {
    ipc_drop(d, drv, n);
    INFO(WEFT_LOG_INIT, "CUDA IPC path: off (WEFT_CUDA_IPC=1, but a rank lacks the driver's IPC calls, the "
         "kernels, a current context, one host with the others, or a mapping of a peer's scratch)");
  }
  free(cards);
  free(mapped);
  // Nobody queues work before everyone has set up: set-up allocates device
  // memory, which synchronises a context that ranks in threads share.
  if (res == ncclSuccess) res = weft_bootstrap_barrier(&comm->bs);
  return res;
}

// Reads the 32-bit counter at `at` (device memory) into *v, on the side
// stream: the legacy stream would also wait for the user's blocked streams.
static int read_counter(const weft_cuda_ipc_t *d, const weft_cuda_driver_t *drv, weft_CUdeviceptr at,
                        uint32_t *v) {
  return drv->cuMemcpyAsync((weft_CUdeviceptr)(uintptr_t)v, at, sizeof(*v), d->side) == WEFT_CUDA_SUCCESS &&
         drv->cuStreamSynchronize(d->side) == WEFT_CUDA_SUCCESS;
}

// Waits (sleeping, bounded by `end`) until the counter reached k.
static void await_counter(const weft_cuda_ipc_t *d, const weft_cuda_driver_t *drv, weft_CUdeviceptr at,
                          uint32_t k, int64_t end) {
  uint32_t v = 0;
  while (read_counter(d, drv, at, &v) && !weft_cyclic_ge(v, k) && weft_now_ms() < end) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
}

void weft_cuda_ipc_release(struct ncclComm *comm) {
  weft_cuda_ipc_t *d = comm->cuda_ipc;
  const weft_cuda_driver_t *drv = weft_cuda_driver();
  if (d == NULL || drv->cuCtxPushCurrent(d->ctx) != WEFT_CUDA_SUCCESS) return;
  // Counters compare cyclically: half a window past the last round satisfies
  // every wait of every rank, whichever rank's release lands last.
  const uint32_t past = 1u << 30;
  int n = comm->nranks, me = comm->rank, ok = 1;
  for (int p = 0; p < n && ok; p++) {
    const struct { size_t at; uint32_t v; } w[] = {
        {WEFT_IPC_READY, d->rounds + past},
        {WEFT_IPC_DONE, d->rounds + past},
        {WEFT_IPC_REDUCED, d->rounds + past},
        {weft_ipc_p2p_ready(me), d->taken[p] + past},
        {weft_ipc_p2p_done(n, me), d->sent[p] + past},
    };
    for (size_t i = 0; i < sizeof(w) / sizeof(w[0]) && ok; i++)
      ok = drv->cuStreamWriteValue32(d->side, d->peer[p] + w[i].at, w[i].v, WEFT_CU_STREAM_WRITE_VALUE_DEFAULT) ==
           WEFT_CUDA_SUCCESS;
  }
  if (ok) ok = drv->cuStreamSynchronize(d->side) == WEFT_CUDA_SUCCESS;
  weft_CUcontext popped;
  drv->cuCtxPopCurrent(&popped);
  d->released = 1;
  if (!ok) WARN("ncclCommAbort: rank %d could not release the CUDA streams waiting on its IPC path", me);
  // The released streams still read the scratch buffers: they stay until
  // those streams have run out of work.
  d->drained = ok && weft_cuda_comm_streams_drain(comm, 10000);
}

// Peers may still be reading this rank's scratch: wait (bounded) until each
// has said done for every collective round and taken every Send round.
static void ipc_quiesce(struct ncclComm *comm, weft_cuda_ipc_t *d, const weft_cuda_driver_t *drv) {
  if (drv->cuCtxPushCurrent(d->ctx) != WEFT_CUDA_SUCCESS) return;
  int64_t limit = weft_timeout_ms() > 0 ? weft_timeout_ms() : 60000, end = weft_now_ms() + limit;
  for (int p = 0; p < comm->nranks; p++) {
    if (d->rounds != 0) await_counter(d, drv, d->peer[p] + WEFT_IPC_DONE, d->rounds, end);
    if (d->sent[p] != 0)
      await_counter(d, drv, d->peer[p] + weft_ipc_p2p_done(comm->nranks, comm->rank), d->sent[p], end);
  }
  weft_CUcontext popped;
  drv->cuCtxPopCurrent(&popped);
}

void weft_cuda_ipc_free(struct ncclComm *comm) {
  if (comm->cuda_ipc == NULL) return;
  const weft_cuda_driver_t *drv = weft_cuda_driver();
  weft_cuda_ipc_t *d = comm->cuda_ipc;
  comm->cuda_ipc = NULL;
  if (d->released && !d->drained) {
    // A stream of this rank may still read the scratch: leaking it is safe.
    WARN("ncclCommAbort: rank %d keeps its IPC path's device buffers, which a CUDA stream still using this "
         "communicator may read", comm->rank);
    return;
  }
  if (!d->released) ipc_quiesce(comm, d, drv);
  ipc_drop(d, drv, comm->nranks);
}
