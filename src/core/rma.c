/*
 * rma.c — one-sided calls on host memory (NCCL 2.30): ncclPutSignal,
 * ncclSignal, ncclWaitSignal.
 *
 * A put writes the caller's bytes straight into the peer's window part with
 * cross-memory attach (memcpy when the peer is a thread of this process),
 * then raises the peer's signal counter for this sender in the peer's
 * control segment (segment.h) with a release store and rings its doorbell:
 * a waiter that sees the count also sees the data. Puts complete before
 * they return, in the order they were made, so NCCL_WIN_STRICT_ORDERING
 * holds for every window. A waiter counts the signals it has consumed per
 * sender and waits, spinning briefly and then sleeping on its doorbell,
 * until each descriptor's count has arrived on top of those; it keeps the
 * engine's promises: aborts at once, a dead sender within WEFT_LIVENESS_MS,
 * a WARN at WEFT_TIMEOUT and each multiple (ncclTimeout only with
 * WEFT_TIMEOUT_FAIL=1). Signals are consumed when a wait ends; two threads
 * waiting on the same sender at once are not ordered.
 *
 * As in NCCL, ctx and sigIdx must be 0 (one context, one signal) and flags
 * 0, and a communicator whose config set numRmaCtx=0 refuses every
 * one-sided call (ncclInvalidArgument); calls complete on return, so the stream must be NULL. Peers reached
 * only over the network are refused with a clear error for now, as are
 * device buffers. Unlike NCCL, the source of a put need not lie in a window.
 */
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "checks.h"
#include "comm.h"
#include "placement.h"
#include "dtype.h"
#include "engine.h"
#include "env.h"
#include "segment.h"
#include "util.h"
#include "waiter.h"
#include "window.h"

// What every one-sided call checks first.
static ncclResult_t check_call(ncclComm_t comm, const char *api, int ctx, int sig_idx, unsigned flags,
                               cudaStream_t stream) {
  WEFTCHECK(weft_comm_check_calls(comm, api));
  if (comm->num_rma_ctx == 0) {  // as in NCCL: no RMA context, no host RMA
    WARN("%s: one-sided calls are off on this communicator (its config set numRmaCtx=0)", api);
    return ncclInvalidArgument;
  }
  if (ctx != 0 || sig_idx != 0 || flags != 0) {
    WARN("%s: %s=%d is invalid (must be 0)", api, ctx != 0 ? "ctx" : sig_idx != 0 ? "sigIdx" : "flags",
         ctx != 0 ? ctx : sig_idx != 0 ? sig_idx : (int)flags);
    return ncclInvalidArgument;
  }
  if (stream != NULL) {
    WARN("%s: one-sided calls on host memory complete on return: pass a NULL stream", api);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

// The signal counter rank `to` keeps for sender `from`, or NULL (WARN) when
// `to` is on another host.
static _Atomic uint64_t *counter(ncclComm_t comm, int to, int from, const char *api) {
  _Atomic uint64_t *c = weft_segment_signal(comm->seg, to, from);
  if (c == NULL)
    WARN("%s: rank %d is on another host: one-sided calls reach only the ranks of this host for now", api,
         to == comm->rank ? from : to);
  return c;
}

static ncclResult_t check_peer(ncclComm_t comm, int peer, const char *api) {
  if (peer < 0 || peer >= comm->nranks) {
    WARN("%s: peer=%d is out of range for a communicator of %d ranks", api, peer, comm->nranks);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

// One more signal from this rank to `peer`, after everything it wrote there.
static void raise_signal(ncclComm_t comm, int peer, _Atomic uint64_t *c) {
  atomic_fetch_add_explicit(c, 1, memory_order_release);
  weft_doorbell_t *bell = weft_segment_doorbell(comm->seg, peer);
  if (bell != NULL) weft_doorbell_ring(bell);
}

NCCL_API(ncclResult_t, ncclPutSignal, const void *localbuff, size_t count, ncclDataType_t datatype, int peer,
         ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
         cudaStream_t stream);
ncclResult_t pncclPutSignal(const void *localbuff, size_t count, ncclDataType_t datatype, int peer,
                            ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
                            ncclComm_t comm, cudaStream_t stream) {
  const char *api = "ncclPutSignal";
  WEFTCHECK(check_call(comm, api, ctx, sigIdx, flags, stream));
  WEFTCHECK(check_peer(comm, peer, api));
  size_t esize = weft_dtype_size(datatype), bytes;
  if ((int)datatype < 0 || (int)datatype >= ncclNumTypes || esize == 0) {
    WARN("%s: datatype=%d is not a valid ncclDataType_t", api, (int)datatype);
    return ncclInvalidArgument;
  }
  if (__builtin_mul_overflow(count, esize, &bytes) || (count > 0 && localbuff == NULL)) {
    WARN("%s: %s", api, localbuff == NULL ? "localbuff is NULL" : "count x datatype size overflows");
    return ncclInvalidArgument;
  }
  if (peerWin == NULL) {
    WARN("%s: peerWin is NULL", api);
    return ncclInvalidArgument;
  }
  if (!weft_window_of(comm, peerWin, api)) return ncclInvalidArgument;
  uint64_t room = peerWin->peer_size[peer];
  if (peerWinOffset > room || bytes > room - peerWinOffset) {
    WARN("%s: %zu bytes at offset %zu do not fit rank %d's part of the window (%" PRIu64 " bytes)", api, bytes,
         peerWinOffset, peer, room);
    return ncclInvalidArgument;
  }
  weft_mem_info_t m;
  weft_mem_classify(localbuff, bytes, &m);
  if (bytes > 0 && m.kind != WEFT_MEM_HOST) {
    WARN("%s: localbuff=%p is %s memory: one-sided calls on device memory need the GPU path (host memory works)", api,
         localbuff, weft_mem_kind_name(m.kind));
    return ncclInvalidUsage;
  }
  _Atomic uint64_t *c = counter(comm, peer, comm->rank, api);
  if (c == NULL) return ncclInvalidUsage;
  uint64_t at = peerWin->peer_addr[peer] + peerWinOffset;
  if (bytes > 0 && peer == comm->rank) {
    memmove((void *)(uintptr_t)at, localbuff, bytes);
  } else if (bytes > 0 && peerWin->mapped) {  // the peer's part is mapped here (window_map.c)
    memmove(peerWin->near[peer] + peerWinOffset, localbuff, bytes);
  } else if (bytes > 0) {
    weft_conn_t *conn = weft_comm_conn(comm, WEFT_CLASS_P2P, 1, peer);
    if (conn->tp == NULL || conn->tp->write == NULL || !comm->tv.can_read) {
      WARN("%s: rank %d cannot write rank %d's memory (cross-memory attach is not permitted here, or shared memory "
           "is off)", api, comm->rank, peer);
      return ncclInvalidUsage;
    }
    ncclResult_t res = conn->tp->write(conn, at, localbuff, bytes);
    if (res != ncclSuccess) return res;
  }
  raise_signal(comm, peer, c);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclSignal, int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
         cudaStream_t stream);
ncclResult_t pncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream) {
  WEFTCHECK(check_call(comm, "ncclSignal", ctx, sigIdx, flags, stream));
  WEFTCHECK(check_peer(comm, peer, "ncclSignal"));
  _Atomic uint64_t *c = counter(comm, peer, comm->rank, "ncclSignal");
  if (c == NULL) return ncclInvalidUsage;
  raise_signal(comm, peer, c);
  return ncclSuccess;
}

// Why a wait must end early (the communicator failed, the sender died),
// or ncclSuccess to go on waiting.
static ncclResult_t wait_broken(ncclComm_t comm, int from, int64_t now) {
  if (atomic_load(&comm->aborted)) {
    WARN("ncclWaitSignal: communicator %p was aborted", (void *)comm);
    return ncclInvalidUsage;
  }
  ncclResult_t code = weft_segment_abort_code(comm->seg);
  if (code != ncclSuccess) {
    WARN("ncclWaitSignal: the communicator failed (%s)", ncclGetErrorString(code));
    return code;
  }
  if (weft_segment_poll_deaths(comm->seg, now) > 0 && weft_segment_peer_dead(comm->seg, from)) {
    char reason[200];
    snprintf(reason, sizeof(reason), "rank %d: ncclWaitSignal: rank %d, whose signals it waits for, died",
             comm->rank, from);
    WARN("%s", reason);
    weft_comm_set_error(comm, ncclRemoteError);
    weft_comm_fail(comm, ncclRemoteError, reason);
    return ncclRemoteError;
  }
  return ncclSuccess;
}

// A wait for a signal counter (waiter.h): the counter, the count it must
// reach, and what the wait has seen of it.
typedef struct {
  ncclComm_t comm;
  _Atomic uint64_t *c;
  uint64_t want, seen;
  int from;
  int64_t warned;      // WEFT_TIMEOUT periods of the current idle spell, each WARNed
  ncclResult_t res;    // why the wait failed
} signal_wait_t;

// Another signal that is not yet the last one starts the idle clock (and
// its WARNs) again.
static weft_wait_t signal_poll(void *ctx) {
  signal_wait_t *s = ctx;
  uint64_t count = atomic_load_explicit(s->c, memory_order_acquire);
  if (count >= s->want) return WEFT_WAIT_READY;
  if (count == s->seen) return WEFT_WAIT_IDLE;
  s->seen = count;
  s->warned = 0;
  return WEFT_WAIT_MOVED;
}

static weft_wait_t signal_check(void *ctx, int64_t now, int64_t since) {
  signal_wait_t *s = ctx;
  ncclComm_t comm = s->comm;
  if (weft_segment_poll_deaths(comm->seg, now) > 0 && weft_segment_peer_dead(comm->seg, s->from)) {
    // What the sender signalled before it died outlives it, and this look
    // comes after its death: take that first (the last poll may have been just before it).
    weft_wait_t again = signal_poll(s);
    if (again != WEFT_WAIT_IDLE) return again;
  }
  s->res = wait_broken(comm, s->from, now);
  if (s->res != ncclSuccess) return WEFT_WAIT_FAILED;
  if (weft_timeout_due(now - since, s->warned)) {
    char reason[300];
    snprintf(reason, sizeof(reason),
             "rank %d: ncclWaitSignal made no progress for %lld s (WEFT_TIMEOUT) waiting for signal %" PRIu64
             " from rank %d (%" PRIu64 " arrived)", comm->rank, (long long)((now - since) / 1000000000), s->want,
             s->from, atomic_load(s->c));
    if (weft_timeout_warn(reason)) {
      weft_comm_set_error(comm, ncclTimeout);
      weft_comm_fail(comm, ncclTimeout, reason);
      s->res = ncclTimeout;
      return WEFT_WAIT_FAILED;
    }
    s->warned++;
  }
  return WEFT_WAIT_IDLE;
}

// Waits until counter c reaches want.
static ncclResult_t wait_count(ncclComm_t comm, _Atomic uint64_t *c, uint64_t want, int from) {
  signal_wait_t s = {.comm = comm, .c = c, .want = want, .from = from, .res = ncclSuccess,
                     .seen = atomic_load_explicit(c, memory_order_acquire)};
  weft_wait(signal_poll, signal_check, &s, weft_segment_doorbell(comm->seg, comm->rank), comm->spin_ns);
  return s.res;
}

NCCL_API(ncclResult_t, ncclWaitSignal, int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm,
         cudaStream_t stream);
ncclResult_t pncclWaitSignal(int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm, cudaStream_t stream) {
  const char *api = "ncclWaitSignal";
  WEFTCHECK(check_call(comm, api, 0, 0, 0, stream));
  if (signalDescs == NULL || nDesc <= 0) {
    WARN("%s: %s", api, signalDescs == NULL ? "signalDescs is NULL" : "nDesc must be at least 1");
    return ncclInvalidArgument;
  }
  int n = comm->nranks;
  uint64_t *want = calloc((size_t)n, sizeof(uint64_t));
  if (want == NULL) return ncclSystemError;
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < nDesc && res == ncclSuccess; i++) {
    const ncclWaitSignalDesc_t *d = &signalDescs[i];
    if (d->opCnt <= 0 || d->sigIdx != 0 || d->ctx != 0) {
      WARN("%s: descriptor %d has invalid %s %d", api, i, d->opCnt <= 0 ? "opCnt" : d->sigIdx != 0 ? "sigIdx" : "ctx",
           d->opCnt <= 0 ? d->opCnt : d->sigIdx != 0 ? d->sigIdx : d->ctx);
      res = ncclInvalidArgument;
    } else if ((res = check_peer(comm, d->peer, api)) == ncclSuccess) {
      want[d->peer] += (uint64_t)d->opCnt;
    }
  }
  // Signals already consumed by earlier waits, per sender (this rank's, guarded by its lock).
  pthread_mutex_lock(&comm->lock);
  if (res == ncclSuccess && comm->signals_taken == NULL &&
      (comm->signals_taken = calloc((size_t)n, sizeof(uint64_t))) == NULL)
    res = ncclSystemError;
  pthread_mutex_unlock(&comm->lock);
  for (int p = 0; p < n && res == ncclSuccess; p++) {
    if (want[p] == 0) continue;
    _Atomic uint64_t *c = counter(comm, comm->rank, p, api);
    if (c == NULL) {
      res = ncclInvalidUsage;
      break;
    }
    pthread_mutex_lock(&comm->lock);
    uint64_t target = comm->signals_taken[p] + want[p];
    pthread_mutex_unlock(&comm->lock);
    res = wait_count(comm, c, target, p);
    if (res != ncclSuccess) break;
    pthread_mutex_lock(&comm->lock);
    comm->signals_taken[p] = target;  // consumed
    pthread_mutex_unlock(&comm->lock);
  }
  free(want);
  return res;
}
