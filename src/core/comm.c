/*
 * comm.c — communicator lifetime after initialisation: the live registry,
 * the plugins' set-up, finalize/destroy/abort, freeing, and the simple
 * queries. Connections are made in connect.c; revoke and shrink live in
 * src/boot/revoke.c and src/boot/shrink.c.
 */
#include "comm.h"

#include "placement.h"

#include "hooks.h"
#include "window.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api.h"
#include "checks.h"
#include "env.h"
#include "mismatch.h"
#include "ras.h"
#include "segment.h"
#include "small.h"
#include "util.h"

/* ---------- registry of live communicators ---------- */

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static ncclComm_t *registry;
static size_t registry_len, registry_cap;
// Bumped by every removal. A thread remembers the communicator it last
// found and the generation then: while no communicator has left since, the
// next call on it needs neither the lock nor the scan.
static _Atomic uint64_t registry_gen;
static _Thread_local ncclComm_t found_here;
static _Thread_local uint64_t found_gen;

void weft_registry_add(ncclComm_t comm) {
  pthread_mutex_lock(&registry_lock);
  if (registry_len == registry_cap) {
    size_t cap = registry_cap ? registry_cap * 2 : 16;
    ncclComm_t *r = realloc(registry, cap * sizeof(*r));
    if (r != NULL) {
      registry = r;
      registry_cap = cap;
    }
  }
  if (registry_len < registry_cap) registry[registry_len++] = comm;
  pthread_mutex_unlock(&registry_lock);
}

void weft_registry_remove(ncclComm_t comm) {
  pthread_mutex_lock(&registry_lock);
  for (size_t i = 0; i < registry_len; i++) {
    if (registry[i] == comm) {
      registry[i] = registry[--registry_len];
      atomic_fetch_add_explicit(&registry_gen, 1, memory_order_release);
      break;
    }
  }
  if (registry_len == 0) {
    free(registry);
    registry = NULL;
    registry_cap = 0;
  }
  pthread_mutex_unlock(&registry_lock);
}

int weft_registry_contains(ncclComm_t comm) {
  if (comm != NULL && comm == found_here && atomic_load_explicit(&registry_gen, memory_order_acquire) == found_gen)
    return 1;
  pthread_mutex_lock(&registry_lock);
  int found = 0;
  for (size_t i = 0; i < registry_len && !found; i++) found = registry[i] == comm;
  if (found) {
    found_here = comm;
    found_gen = atomic_load_explicit(&registry_gen, memory_order_relaxed);
  }
  pthread_mutex_unlock(&registry_lock);
  return found;
}

static ncclResult_t check_live(ncclComm_t comm, const char *api) {
  if (comm == NULL) {
    WARN("%s: comm is NULL", api);
    return ncclInvalidArgument;
  }
  if (!weft_registry_contains(comm) || comm->magic != WEFT_COMM_MAGIC) {
    WARN("%s: comm=%p is not a live communicator (destroyed, or never initialised)", api, (void *)comm);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

ncclResult_t weft_comm_wait_init(ncclComm_t comm) {
  while (atomic_load(&comm->async_error) == ncclInProgress) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  return (ncclResult_t)atomic_load(&comm->async_error);
}

ncclResult_t weft_comm_check(ncclComm_t comm, const char *api) {
  WEFTCHECK(check_live(comm, api));
  if (atomic_load(&comm->revoked)) {
    WARN("%s: communicator %p was revoked (ncclCommRevoke): only destroy, abort, split and shrink remain", api,
         (void *)comm);
    return ncclInvalidUsage;
  }
  ncclResult_t res = weft_comm_wait_init(comm);
  if (res != ncclSuccess) {
    WARN("%s: communicator %p is in error (%s)", api, (void *)comm, ncclGetErrorString(res));
    return res;
  }
  if (atomic_load(&comm->aborted)) {
    WARN("%s: communicator %p was aborted", api, (void *)comm);
    return ncclInvalidUsage;
  }
  if (comm->finalized) {
    WARN("%s: communicator %p was finalized", api, (void *)comm);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

ncclResult_t weft_comm_check_calls(ncclComm_t comm, const char *api) {
  WEFTCHECK(weft_comm_check(comm, api));
  if (__builtin_expect(atomic_load_explicit(&comm->suspended, memory_order_relaxed) != 0, 0)) {
    WARN("%s: communicator %p is suspended (ncclCommSuspend): ncclCommResume it first", api, (void *)comm);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

ncclResult_t weft_comm_check_parent(ncclComm_t comm, const char *api, int allow_failed) {
  WEFTCHECK(check_live(comm, api));
  ncclResult_t res = weft_comm_wait_init(comm);
  if (comm->bs.peers == NULL || comm->bs.listen_fd < 0) {  // its bootstrap never came up
    WARN("%s: communicator %p did not initialise (%s)", api, (void *)comm, ncclGetErrorString(res));
    return res != ncclSuccess ? res : ncclInvalidUsage;
  }
  if (comm->finalized) {
    WARN("%s: communicator %p was finalized", api, (void *)comm);
    return ncclInvalidUsage;
  }
  if (atomic_load(&comm->revoked)) {
    if (!weft_comm_drain(comm, weft_timeout_ms())) {
      WARN("%s: operations of revoked communicator %p are still running", api, (void *)comm);
      return ncclInternalError;
    }
    return ncclSuccess;
  }
  if ((res != ncclSuccess || atomic_load(&comm->aborted)) && !allow_failed) {
    WARN("%s: communicator %p is in error (%s)", api, (void *)comm,
         res != ncclSuccess ? ncclGetErrorString(res) : "its operations were aborted");
    return res != ncclSuccess ? res : ncclInvalidUsage;
  }
  return ncclSuccess;
}

void weft_comm_set_error(struct ncclComm *comm, ncclResult_t res) {
  int expected = ncclSuccess;
  atomic_compare_exchange_strong(&comm->async_error, &expected, (int)res);
}

/* ---------- hosts ---------- */

ncclResult_t weft_comm_map_hosts(struct ncclComm *comm) {
  int n = comm->nranks;
  comm->host_of = malloc(sizeof(int) * (size_t)n);
  if (comm->host_of == NULL) return ncclSystemError;
  comm->nhosts = 0;
  for (int r = 0; r < n; r++) {
    int h = -1;
    for (int q = 0; q < r && h < 0; q++)
      if (comm->bs.peers[q].host_hash == comm->bs.peers[r].host_hash) h = comm->host_of[q];
    comm->host_of[r] = h >= 0 ? h : comm->nhosts++;
  }
  comm->local_rank = comm->local_size = 0;
  for (int r = 0; r < n; r++) {
    if (comm->host_of[r] != comm->host_of[comm->rank]) continue;
    if (r < comm->rank) comm->local_rank++;
    comm->local_size++;
  }
  comm->spin_ns = weft_spin_ns(comm->local_size);
  comm->spin_ns_queued = weft_spin_ns(2 * comm->local_size);
  INFO(WEFT_LOG_INIT, "rank %d: host %d of %d, local rank %d of %d", comm->rank, comm->host_of[comm->rank],
       comm->nhosts, comm->local_rank, comm->local_size);
  return ncclSuccess;
}

void weft_comm_plugins_init(struct ncclComm *comm) {
  weft_plugin_comm_t c = {.id_hash = comm->id_hash, .name = comm->name[0] ? comm->name : NULL, .rank = comm->rank,
                          .nranks = comm->nranks, .nhosts = comm->nhosts, .host_of = comm->host_of};
  weft_plugins_comm_init(&c, &comm->tuner, &comm->prof);
}

void weft_comm_free(struct ncclComm *comm) {
  if (comm == NULL) return;
  weft_ras_comm_leave(comm);  // first: the RAS thread reads the communicator's state until then
  weft_cuda_comm_release(comm);  // CUDA stream bridges first: their workers may still run this comm's calls
  weft_cuda_ipc_free(comm);
  weft_plugins_comm_free(comm->tuner, comm->prof);
  comm->tuner = comm->prof = NULL;
  weft_comm_disconnect(comm);
  free(comm->host_of);
  free(comm->order);  // pos shares its allocation
  free(comm->numa_of);
  weft_small_free(comm);
  free(comm->init_affinity);
  weft_bootstrap_close(&comm->bs);
  weft_windows_free(comm);
  free(comm->signals_taken);
  free(comm->voids);
  for (weft_registration_t *r = comm->registrations; r != NULL;) {
    weft_registration_t *next = r->next;
    free(r);
    r = next;
  }
  pthread_mutex_destroy(&comm->lock);
  comm->magic = 0;
  free(comm);
}

/* ---------- end of life ---------- */

int weft_comm_drain(ncclComm_t comm, int64_t limit_ms) {
  int64_t end = weft_now_ms() + limit_ms;
  while (atomic_load(&comm->inflight) > 0) {
    if (limit_ms >= 0 && weft_now_ms() > end) return 0;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  return 1;
}

static void join_init(ncclComm_t comm) {
  if (comm->init_thread_live) {
    pthread_join(comm->init_thread, NULL);
    comm->init_thread_live = 0;
  }
}

NCCL_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm);
ncclResult_t pncclCommFinalize(ncclComm_t comm) {
  WEFTCHECK(check_live(comm, "ncclCommFinalize"));
  if (atomic_load(&comm->revoked)) {
    WARN("ncclCommFinalize: communicator %p was revoked; destroy it instead", (void *)comm);
    return ncclInvalidUsage;
  }
  weft_comm_wait_init(comm);
  if (!weft_comm_drain(comm, weft_timeout_ms())) {
    WARN("ncclCommFinalize: operations of rank %d still running after %lld s", comm->rank,
         (long long)weft_timeout_ms() / 1000);
    return ncclRemoteError;
  }
  comm->finalized = 1;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm) {
  if (comm == NULL) return ncclSuccess;  // as NCCL: destroying NULL is a no-op
  WEFTCHECK(check_live(comm, "ncclCommDestroy"));
  join_init(comm);
  if (!weft_comm_drain(comm, weft_timeout_ms())) {
    WARN("ncclCommDestroy: operations of rank %d still running; aborting them", comm->rank);
    return pncclCommAbort(comm);
  }
  INFO(WEFT_LOG_INIT, "comm %p rank %d nranks %d - Destroy COMPLETE", (void *)comm, comm->rank, comm->nranks);
  weft_registry_remove(comm);
  weft_comm_free(comm);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm) {
  if (comm == NULL) return ncclSuccess;
  WEFTCHECK(check_live(comm, "ncclCommAbort"));
  atomic_store(&comm->aborted, 1);
  join_init(comm);
  // Peers blocked on this rank fail fast instead of waiting for a timeout.
  char reason[128];
  snprintf(reason, sizeof(reason), "rank %d called ncclCommAbort", comm->rank);
  weft_comm_fail(comm, ncclRemoteError, reason);
  weft_cuda_ipc_release(comm);  // streams waiting on the IPC path's counters run on
  weft_registry_remove(comm);
  if (!weft_comm_drain(comm, 5000)) {
    // An operation in another thread is still inside this communicator: leak
    // it rather than free memory that thread is using.
    WARN("ncclCommAbort: rank %d operations did not stop; leaving the communicator allocated", comm->rank);
    return ncclSuccess;
  }
  weft_comm_free(comm);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t *asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
  WEFTCHECK(check_live(comm, "ncclCommGetAsyncError"));
  if (asyncError == NULL) {
    WARN("ncclCommGetAsyncError: asyncError is NULL");
    return ncclInvalidArgument;
  }
  weft_mismatch_settle(comm);  // a check owed by a call that only sent may fail the communicator now
  ncclResult_t res = (ncclResult_t)atomic_load(&comm->async_error);
  if (res == ncclSuccess) res = weft_segment_abort_code(comm->seg);
  // As NCCL: a revoked communicator reports ncclInProgress until its operations have stopped, then success.
  if (atomic_load(&comm->revoked)) res = atomic_load(&comm->inflight) > 0 ? ncclInProgress : ncclSuccess;
  *asyncError = res;
  return ncclSuccess;
}

static ncclResult_t query(ncclComm_t comm, int *out, const char *api, const char *outname) {
  WEFTCHECK(check_live(comm, api));
  if (out == NULL) {
    WARN("%s: %s is NULL", api, outname);
    return ncclInvalidArgument;
  }
  weft_comm_wait_init(comm);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int *count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int *count) {
  WEFTCHECK(query(comm, count, "ncclCommCount", "count"));
  *count = comm->nranks;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int *rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int *rank) {
  WEFTCHECK(query(comm, rank, "ncclCommUserRank", "rank"));
  *rank = comm->rank;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int *device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int *device) {
  WEFTCHECK(query(comm, device, "ncclCommCuDevice", "device"));
  *device = comm->cuda_dev;
  return ncclSuccess;
}
