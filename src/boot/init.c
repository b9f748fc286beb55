/*
 * init.c — creating communicators: ncclGetUniqueId, ncclCommInitRank,
 * ncclCommInitRankConfig (blocking and non-blocking), ncclCommInitRankScalable
 * and ncclCommInitAll.
 *
 * Initialisation is: listen -> rendezvous (learn every rank's address) ->
 * bootstrap ring -> transports. A non-blocking initialisation runs the same
 * steps in a thread and reports through ncclCommGetAsyncError.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "checks.h"
#include "comm.h"
#include "placement.h"
#include "env.h"
#include "ras.h"
#include "reduce_simd.h"
#include "rendezvous.h"
#include "topo.h"
#include "util.h"
#include "weft.h"

NCCL_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId *uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId *uniqueId) {
  if (uniqueId == NULL) {
    WARN("ncclGetUniqueId: uniqueId is NULL");
    return ncclInvalidArgument;
  }
  return weft_rendezvous_create(uniqueId);
}

typedef struct {
  struct ncclComm *comm;
  weft_id_t *ids;
  int nid;
} init_job_t;

// The topology's part (WEFT_BIND, NCCL_TOPO_DUMP_FILE); ranks that are
// threads of one process share that process's binding.
static ncclResult_t topo_at_init(const struct ncclComm *comm) {
  const weft_peer_info_t *me = &comm->bs.peers[comm->rank];
  int here = 0;
  for (int r = 0; r < comm->nranks; r++)
    here += comm->bs.peers[r].pid == me->pid && comm->bs.peers[r].host_hash == me->host_hash;
  return weft_topo_comm_init(comm->local_rank, comm->local_size, here) ? ncclSystemError : ncclSuccess;
}

// The host reductions' instruction set (WEFT_SIMD), fixed for the process
// by the first communicator.
static void simd_at_init(void) {
  int unknown = 0;
  const char *mode = weft_env_WEFT_SIMD();
  const weft_simd_impl_t *simd = weft_simd_configure(mode, &unknown);
  if (unknown) WARN("WEFT_SIMD=%s is not auto, avx512, avx2 or none; using %s", mode, simd->name);
  INFO(WEFT_LOG_INIT, "host reductions use %s", simd->name);
}

static ncclResult_t comm_init(struct ncclComm *comm, const weft_id_t *ids, int nid) {
  ncclResult_t res = ncclSuccess;
  weft_debug_set_rank(comm->rank);
  simd_at_init();
  weft_peer_info_t me = {.rank = comm->rank, .pid = (int32_t)getpid(), .host_hash = weft_host_hash()};
  weft_peer_info_t *table = calloc((size_t)comm->nranks, sizeof(*table));
  int listen_fd = -1;
  if (table == NULL) return ncclSystemError;
  WEFTCHECKGOTO(weft_bootstrap_listen(&me, &listen_fd), res, out);
  WEFTCHECKGOTO(weft_rendezvous_join(ids, nid, comm->nranks, &me, table), res, out);
  WEFTCHECKGOTO(weft_bootstrap_connect(&comm->bs, comm->rank, comm->nranks, ids[0].secret, table, &listen_fd), res,
                out);
  WEFTCHECKGOTO(weft_comm_map_hosts(comm), res, out);
  WEFTCHECKGOTO(topo_at_init(comm), res, out);  // WEFT_BIND first: the ring follows where ranks are bound
  WEFTCHECKGOTO(weft_comm_order_ranks(comm), res, out);
  WEFTCHECKGOTO(weft_comm_connect(comm), res, out);
  WEFTCHECKGOTO(weft_cuda_ipc_init(comm), res, out);
  comm->id_hash = weft_hash_bytes(ids[0].secret, sizeof(ids[0].secret));
  weft_comm_plugins_init(comm);
  WEFTCHECKGOTO(weft_ras_comm_join(comm), res, out);
  INFO(WEFT_LOG_INIT, "comm %p rank %d nranks %d pid %d - Init COMPLETE", (void *)comm, comm->rank, comm->nranks,
       (int)getpid());
out:
  weft_comm_restore_affinity(comm);
  weft_socket_close(&listen_fd);
  free(table);
  return res;
}

static void *init_thread_main(void *arg) {
  init_job_t *job = arg;
  ncclResult_t res = comm_init(job->comm, job->ids, job->nid);
  atomic_store(&job->comm->async_error, (int)res);
  free(job->ids);
  free(job);
  return NULL;
}

// Shared by every init entry point: validates, allocates, runs or starts init.
static ncclResult_t init_rank(ncclComm_t *out, int nranks, const ncclUniqueId *uids, int nid, int rank,
                              ncclConfig_t *config, const char *api) {
  if (out == NULL) {
    WARN("%s: comm is NULL", api);
    return ncclInvalidArgument;
  }
  *out = NULL;
  if (nranks < 1) {
    WARN("%s: nranks=%d must be at least 1", api, nranks);
    return ncclInvalidArgument;
  }
  if (rank < 0 || rank >= nranks) {
    WARN("%s: rank=%d is out of range for nranks=%d", api, rank, nranks);
    return ncclInvalidArgument;
  }
  if (nid < 1 || nid > nranks || uids == NULL) {
    WARN("%s: nId=%d unique ids for %d ranks (commIds %p)", api, nid, nranks, (const void *)uids);
    return ncclInvalidArgument;
  }
  weft_id_t *ids = calloc((size_t)nid, sizeof(*ids));
  struct ncclComm *comm = calloc(1, sizeof(*comm));
  ncclResult_t res = ncclSuccess;
  if (ids == NULL || comm == NULL) {
    free(ids);
    free(comm);
    return ncclSystemError;
  }
  for (int i = 0; i < nid; i++) WEFTCHECKGOTO(weft_id_decode(&uids[i], &ids[i]), res, fail);
  WEFTCHECKGOTO(weft_comm_read_config(config, api, comm), res, fail);
  comm->magic = WEFT_COMM_MAGIC;
  comm->rank = rank;
  comm->nranks = nranks;
  weft_cuda_comm_bind(comm);  // its device and staging, before any rank can queue work
  weft_bootstrap_reset(&comm->bs);
  pthread_mutex_init(&comm->lock, NULL);

  if (!comm->blocking) {
    init_job_t *job = calloc(1, sizeof(*job));
    if (job == NULL) { res = ncclSystemError; goto fail_comm; }
    *job = (init_job_t){.comm = comm, .ids = ids, .nid = nid};
    atomic_store(&comm->async_error, ncclInProgress);
    weft_registry_add(comm);
    int err = pthread_create(&comm->init_thread, NULL, init_thread_main, job);
    if (err != 0) {
      WARN("%s: pthread_create failed: %s", api, strerror(err));
      weft_registry_remove(comm);
      free(job);
      res = ncclSystemError;
      goto fail_comm;
    }
    comm->init_thread_live = 1;
    *out = comm;
    return ncclInProgress;
  }
  res = comm_init(comm, ids, nid);
  free(ids);
  if (res != ncclSuccess) {
    weft_comm_free(comm);
    return res;
  }
  weft_registry_add(comm);
  *out = comm;
  return ncclSuccess;
fail_comm:
  weft_comm_free(comm);
  free(ids);
  return res;
fail:
  free(ids);
  free(comm);
  return res;
}

NCCL_API(ncclResult_t, ncclCommInitRank, ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank) {
  return init_rank(comm, nranks, &commId, 1, rank, NULL, "ncclCommInitRank");
}

NCCL_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
         ncclConfig_t *config);
ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t *config) {
  return init_rank(comm, nranks, &commId, 1, rank, config, "ncclCommInitRankConfig");
}

NCCL_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t *newcomm, int nranks, int myrank, int nId,
         ncclUniqueId *commIds, ncclConfig_t *config);
ncclResult_t pncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId, ncclUniqueId *commIds,
                                       ncclConfig_t *config) {
  return init_rank(newcomm, nranks, commIds, nId, myrank, config, "ncclCommInitRankScalable");
}

typedef struct {
  ncclComm_t *slot;
  int nranks, rank;
  int device;  // made current in the rank's thread; -1: none
  ncclUniqueId id;
  ncclResult_t res;
} all_job_t;

static void *init_all_main(void *arg) {
  all_job_t *j = arg;
  // As NCCL, each rank's communicator belongs to its device: its context is
  // current while the communicator is made.
  int r = j->device >= 0 ? weft_cuda_use_device(j->device) : 0;
  // Even then the rank joins, so that its peers are not left waiting.
  j->res = pncclCommInitRank(j->slot, j->nranks, j->id, j->rank);
  if (r > 0) {
    WARN("ncclCommInitAll: cannot make device %d current for rank %d: CUDA error %d (%s)", j->device, j->rank, r,
         weft_cuda_error_text(r));
    if (j->res == ncclSuccess) pncclCommDestroy(*j->slot);
    *j->slot = NULL;
    j->res = ncclUnhandledCudaError;
  }
  return NULL;
}

NCCL_API(ncclResult_t, ncclCommInitAll, ncclComm_t *comm, int ndev, const int *devlist);
ncclResult_t pncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist) {
  if (comm == NULL) {
    WARN("ncclCommInitAll: comm is NULL");
    return ncclInvalidArgument;
  }
  if (ndev < 1) {
    WARN("ncclCommInitAll: ndev=%d must be at least 1", ndev);
    return ncclInvalidArgument;
  }
  for (int i = 0; devlist != NULL && i < ndev; i++) {
    if (devlist[i] < 0) {
      WARN("ncclCommInitAll: devlist[%d]=%d is not a device number", i, devlist[i]);
      return ncclInvalidArgument;
    }
  }
  int ndevices = weft_cuda_device_count();  // a rank whose number names no device works on host memory
  ncclUniqueId id;
  WEFTCHECK(pncclGetUniqueId(&id));
  all_job_t *jobs = calloc((size_t)ndev, sizeof(*jobs));
  pthread_t *th = calloc((size_t)ndev, sizeof(*th));
  if (jobs == NULL || th == NULL) {
    free(jobs);
    free(th);
    return ncclSystemError;
  }
  ncclResult_t res = ncclSuccess;
  int started = 0;
  for (int i = 0; i < ndev; i++) {
    int d = devlist != NULL ? devlist[i] : i;
    jobs[i] = (all_job_t){.slot = &comm[i], .nranks = ndev, .rank = i, .id = id, .device = d < ndevices ? d : -1};
    if (pthread_create(&th[i], NULL, init_all_main, &jobs[i]) != 0) {
      WARN("ncclCommInitAll: could not start a thread for rank %d", i);
      res = ncclSystemError;
      break;
    }
    started++;
  }
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < started && res == ncclSuccess; i++) res = jobs[i].res;
  if (started < ndev && res == ncclSuccess) res = ncclSystemError;
  if (res != ncclSuccess) {
    for (int i = 0; i < started; i++) {
      if (jobs[i].res == ncclSuccess) pncclCommDestroy(comm[i]);
      comm[i] = NULL;
    }
  } else {
    for (int i = 0; i < ndev; i++) comm[i]->cuda_dev = devlist != NULL ? devlist[i] : i;
  }
  free(jobs);
  free(th);
  return res;
}
