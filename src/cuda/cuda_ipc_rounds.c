/*
 * cuda_ipc_rounds.c — a collective on the IPC path (cuda_ipc.h),
 * queued on the caller's stream as rounds through the ranks' scratch slots.
 *
 * Every collective is one pattern. A rank's operand is one block of `count`
 * elements, or nranks blocks (ReduceScatter, AlltoAll, Scatter: one per
 * destination). Round k moves the next `m` elements of every block:
 *
 *   packers:   WAIT peer.done >= k-2     peers finished reading slot k % 2
 *              copy (prescale) my blocks' slices -> my slot
 *   everyone:  WRITE my.ready = k
 *   receivers: WAIT peer.ready >= k      (the peers read from)
 *              build my recv slice from the slots (fold / copy)
 *   everyone:  WRITE my.done = k
 *
 * Folds run in rank order on every rank, so all ranks get the same bits.
 * A large all-reduce among 3 or more ranks folds in two phases instead
 * (each rank its share, then everyone copies the shares: two_phase).
 */
#include <stdint.h>

#include "checks.h"
#include "cuda_ipc.h"
#include "cuda_ipc_state.h"
#include "cuda_rt.h"
#include "dtype.h"

typedef enum {
  OUT_FOLD,       // reduce every rank's slot
  OUT_FROM_ROOT,  // copy the root's slot
  OUT_GATHER      // copy every rank's slot to its place in recvbuff
} ipc_out_t;

typedef struct {
  int blocks;         // the operand is nranks blocks; a slot holds one slice of each
  int root_packs;     // only the root's sendbuff is read
  int root_receives;  // only the root's recvbuff is written
  ipc_out_t out;
} ipc_shape_t;

static int ipc_shape(weft_coll_t coll, ipc_shape_t *s) {
  switch (coll) {
    case WEFT_COLL_ALLREDUCE: *s = (ipc_shape_t){0, 0, 0, OUT_FOLD}; return 1;
    case WEFT_COLL_REDUCE: *s = (ipc_shape_t){0, 0, 1, OUT_FOLD}; return 1;
    case WEFT_COLL_BROADCAST: *s = (ipc_shape_t){0, 1, 0, OUT_FROM_ROOT}; return 1;
    case WEFT_COLL_ALLGATHER: *s = (ipc_shape_t){0, 0, 0, OUT_GATHER}; return 1;
    case WEFT_COLL_GATHER: *s = (ipc_shape_t){0, 0, 1, OUT_GATHER}; return 1;
    case WEFT_COLL_REDUCESCATTER: *s = (ipc_shape_t){1, 0, 0, OUT_FOLD}; return 1;
    case WEFT_COLL_ALLTOALL: *s = (ipc_shape_t){1, 0, 0, OUT_GATHER}; return 1;
    case WEFT_COLL_SCATTER: *s = (ipc_shape_t){1, 1, 0, OUT_FROM_ROOT}; return 1;
    default: return 0;  // Send/Recv
  }
}

// Elements of one block a round moves: slices start 256-byte aligned in
// the slot; 0 when a slot cannot hold one element of every block.
static size_t round_elems(const weft_cuda_ipc_t *d, const ipc_shape_t *sh, int nranks, size_t esize) {
  size_t slice = (d->slot_bytes / (sh->blocks ? (size_t)nranks : 1)) & ~(size_t)255;
  return slice / esize;
}

int weft_cuda_ipc_eligible(const weft_op_t *op) {
  const weft_cuda_ipc_t *d = op->comm->cuda_ipc;
  if (d == NULL || !op->dev.on || op->args.count == 0) return 0;
  if (op->cls == WEFT_CLASS_P2P) return 1;  // cuda_ipc_p2p.c
  ipc_shape_t sh;
  return ipc_shape(op->args.coll, &sh) && round_elems(d, &sh, op->comm->nranks, op->esize) > 0;
}

typedef struct {
  weft_op_t *op;
  weft_cuda_ipc_t *d;
  weft_CUstream s;
  ipc_shape_t sh;
  int n, me, root;
  int two_phase;  // an all-reduce folded in shares (see two_phase)
  const char *api;
} ipc_call_t;

// The stream waits until rank p's counter at `at` reached k (every peer when p < 0).
static ncclResult_t wait_counter(const ipc_call_t *c, int p, size_t at, uint32_t k) {
  for (int q = p < 0 ? 0 : p; q < (p < 0 ? c->n : p + 1); q++)
    if (q != c->me) WEFTCHECK(weft_ipc_wait(c->s, c->d->peer[q] + at, k, c->api));
  return ncclSuccess;
}

static void *vptr(weft_CUdeviceptr p) { return (void *)(uintptr_t)p; }

// One slice of sendbuff into this rank's slot; a reduction's operand is
// scaled here by this rank's own scalar (PreMulSum, float avg), as on the host path.
static ncclResult_t pack(const ipc_call_t *c, weft_CUdeviceptr dst, const char *src, size_t m) {
  const weft_op_t *op = c->op;
  const weft_cuda_kernels_t *kern = c->d->kern;
  cudaStream_t cs = (cudaStream_t)(void *)c->s;
  int err = 0;
  if (op->has_op && op->dev.scalar != NULL)
    err = kern->reduce_first_dscalar(&op->redop, op->dev.scalar, vptr(dst), src, m, 0, cs);
  else if (op->has_op && op->redop.prescale)
    err = kern->reduce_first(&op->redop, vptr(dst), src, m, 0, cs);
  else
    return weft_ipc_copy(c->s, dst, weft_dptr(src), m * op->esize, c->api);
  return err == 0 ? ncclSuccess : weft_ipc_kernel_failed(c->d, err, c->api);
}

// dst = slot(0)[at] OP slot(1)[at] OP ... in rank order; the operands are
// scaled already, so the fold uses the op's unscaled twin.
static ncclResult_t fold(const ipc_call_t *c, char *dst, size_t at, size_t m) {
  const weft_op_t *op = c->op;
  cudaStream_t cs = (cudaStream_t)(void *)c->s;
  int err = c->d->kern->reduce_first(&op->redop_acc, dst, vptr(c->d->peer[0] + at), m, c->n == 1, cs);
  for (int p = 1; p < c->n && err == 0; p++)
    err = c->d->kern->reduce(&op->redop_acc, dst, dst, vptr(c->d->peer[p] + at), m, p == c->n - 1, cs);
  return err == 0 ? ncclSuccess : weft_ipc_kernel_failed(c->d, err, c->api);
}

// Rank p's share of m elements in a two-phase round: 256-byte aligned parts.
static void share_of(int p, int n, size_t m, size_t es, size_t *lo, size_t *hi) {
  size_t align = es < 256 ? 256 / es : 1, part = (m + (size_t)n - 1) / (size_t)n;
  part = (part + align - 1) / align * align;
  *lo = (size_t)p * part < m ? (size_t)p * part : m;
  *hi = *lo + part < m ? *lo + part : m;
}

// The rest of an all-reduce round once every slot is filled, in two phases:
// each rank folds its share of every slot (in rank order) and puts the
// result back into its own slot, says reduced, and then copies the other
// ranks' results. Each rank reads about twice its bytes instead of nranks
// times, for more stream operations.
static ncclResult_t two_phase(ipc_call_t *c, uint32_t k, size_t slot, size_t off, size_t m) {
  size_t es = c->op->esize, lo, hi;
  char *recv = c->op->dev.recv;
  share_of(c->me, c->n, m, es, &lo, &hi);
  if (hi > lo) {
    WEFTCHECK(fold(c, recv + (off + lo) * es, slot + lo * es, hi - lo));
    WEFTCHECK(weft_ipc_copy(c->s, c->d->mine + slot + lo * es, weft_dptr(recv + (off + lo) * es), (hi - lo) * es,
                            c->api));
  }
  WEFTCHECK(weft_ipc_write(c->s, c->d->mine + WEFT_IPC_REDUCED, k, c->api));
  WEFTCHECK(wait_counter(c, -1, WEFT_IPC_REDUCED, k));
  for (int p = 0; p < c->n; p++) {
    share_of(p, c->n, m, es, &lo, &hi);
    if (p != c->me && hi > lo)
      WEFTCHECK(weft_ipc_copy(c->s, weft_dptr(recv + (off + lo) * es), c->d->peer[p] + slot + lo * es,
                              (hi - lo) * es, c->api));
  }
  return ncclSuccess;
}

// Round k: elements [off, off + m) of every block.
static ncclResult_t ipc_round(ipc_call_t *c, size_t off, size_t m) {
  const weft_op_t *op = c->op;
  size_t es = op->esize, count = op->args.count, nblocks = c->sh.blocks ? (size_t)c->n : 1;
  uint32_t k = ++c->d->rounds;
  size_t slot = c->d->slot_at + (k & 1) * c->d->slot_bytes;  // offset in every rank's scratch
  int packs = !c->sh.root_packs || c->me == c->root;
  int receives = !c->sh.root_receives || c->me == c->root;
  const char *send = op->dev.send;
  char *recv = op->dev.recv;
  if (packs) {
    if (k > 2) WEFTCHECK(wait_counter(c, -1, WEFT_IPC_DONE, k - 2));
    for (size_t b = 0; b < nblocks; b++)
      WEFTCHECK(pack(c, c->d->mine + slot + b * m * es, send + (b * count + off) * es, m));
  }
  WEFTCHECK(weft_ipc_write(c->s, c->d->mine + WEFT_IPC_READY, k, c->api));
  if (receives) {
    int from = c->sh.out == OUT_FROM_ROOT ? c->root : -1;
    WEFTCHECK(wait_counter(c, from, WEFT_IPC_READY, k));
    size_t at = slot + (c->sh.blocks ? (size_t)c->me * m * es : 0);  // this rank's slice of each slot
    if (c->sh.out == OUT_FOLD && c->two_phase) WEFTCHECK(two_phase(c, k, slot, off, m));
    if (c->sh.out == OUT_FOLD && !c->two_phase) WEFTCHECK(fold(c, recv + off * es, at, m));
    if (c->sh.out == OUT_FROM_ROOT)
      WEFTCHECK(weft_ipc_copy(c->s, weft_dptr(recv + off * es), c->d->peer[c->root] + at, m * es, c->api));
    for (int p = 0; p < c->n && c->sh.out == OUT_GATHER; p++)
      WEFTCHECK(weft_ipc_copy(c->s, weft_dptr(recv + ((size_t)p * count + off) * es), c->d->peer[p] + at, m * es,
                              c->api));
  }
  return weft_ipc_write(c->s, c->d->mine + WEFT_IPC_DONE, k, c->api);
}

ncclResult_t weft_cuda_ipc_queue(weft_op_t *op, weft_dev_bridge_t *bridge) {
  struct ncclComm *comm = op->comm;
  const weft_cuda_driver_t *drv = weft_cuda_driver();
  ipc_call_t c = {.op = op, .d = comm->cuda_ipc, .s = weft_cuda_bridge_stream(bridge), .n = comm->nranks,
                     .me = comm->rank, .root = op->args.root, .api = weft_coll_name(op->args.coll)};
  ipc_shape(op->args.coll, &c.sh);
  size_t step = round_elems(c.d, &c.sh, c.n, op->esize), bytes = op->args.count * op->esize;
  c.two_phase = op->args.coll == WEFT_COLL_ALLREDUCE && c.n >= 3 && c.d->two_phase_min > 0 &&
                bytes >= c.d->two_phase_min;
  if (drv->cuCtxPushCurrent(weft_cuda_bridge_context(bridge)) != WEFT_CUDA_SUCCESS) return ncclUnhandledCudaError;
  TRACE(WEFT_LOG_COLL, "%s count=%zu %s root=%d: CUDA IPC path, %zu rounds%s", weft_coll_name(op->args.coll),
        op->args.count, weft_dtype_name(op->dtype), op->args.root, (op->args.count + step - 1) / step,
        c.two_phase ? ", two phases" : "");
  ncclResult_t res = ncclSuccess;
  for (size_t off = 0; off < op->args.count && res == ncclSuccess; off += step)
    res = ipc_round(&c, off, op->args.count - off < step ? op->args.count - off : step);
  weft_CUcontext popped;
  drv->cuCtxPopCurrent(&popped);
  if (res != ncclSuccess) weft_comm_set_error(comm, res);
  return res;
}
