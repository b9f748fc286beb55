/*
 * grow.c — ncclCommGetUniqueId and ncclCommGrow (NCCL 2.30): a bigger
 * communicator from an existing one plus ranks that join from outside.
 *
 * One existing rank (the "root") asks its communicator for a unique id,
 * which starts a fresh rendezvous root in its process, and hands the id to
 * the new ranks out of band. Then every rank calls ncclCommGrow: existing
 * ranks with their communicator and rank -1 (only the root passes the id),
 * new ranks with a NULL communicator, the id and the rank they are to have.
 * The existing ranks learn the id from the root over the parent's bootstrap
 * ring, and all of them join the new communicator at that id: existing
 * ranks keep their ranks, new ranks take theirs. The parent stays as it
 * was. An id is consumed by the grow it serves: its communicator gives no
 * second one while one is outstanding.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "bootstrap.h"
#include "checks.h"
#include "comm.h"
#include "rendezvous.h"

NCCL_API(ncclResult_t, ncclCommGetUniqueId, ncclComm_t comm, ncclUniqueId *uniqueId);
ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId *uniqueId) {
  WEFTCHECK(weft_comm_check_parent(comm, "ncclCommGetUniqueId", 0));
  if (uniqueId == NULL) {
    WARN("ncclCommGetUniqueId: uniqueId is NULL");
    return ncclInvalidArgument;
  }
  pthread_mutex_lock(&comm->lock);
  int pending = comm->grow_id_pending;
  pthread_mutex_unlock(&comm->lock);
  if (pending) {
    WARN("ncclCommGetUniqueId: rank %d's communicator already gave a unique id that no ncclCommGrow has used yet",
         comm->rank);
    return ncclInvalidUsage;
  }
  ncclUniqueId id;
  WEFTCHECK(weft_rendezvous_create_root(&id));
  pthread_mutex_lock(&comm->lock);
  comm->grow_id = id;
  comm->grow_id_pending = 1;
  pthread_mutex_unlock(&comm->lock);
  *uniqueId = id;
  return ncclSuccess;
}

// What each existing rank says in the exchange: the id, if it has it.
typedef struct {
  int32_t has;
  int32_t pad;
  ncclUniqueId id;
} offer_t;

// The id every existing rank agrees on (the root's), through the parent's bootstrap.
static ncclResult_t agree_on_id(ncclComm_t comm, const ncclUniqueId *mine, ncclUniqueId *id) {
  offer_t *offers = calloc((size_t)comm->nranks, sizeof(*offers));
  if (offers == NULL) return ncclSystemError;
  if (mine != NULL) offers[comm->rank] = (offer_t){.has = 1, .id = *mine};
  ncclResult_t res = weft_bootstrap_allgather(&comm->bs, offers, sizeof(*offers));
  int from = -1;
  for (int r = 0; res == ncclSuccess && r < comm->nranks; r++) {
    if (!offers[r].has) continue;
    if (from < 0) {
      from = r;
    } else if (memcmp(&offers[r].id, &offers[from].id, sizeof(ncclUniqueId)) != 0) {
      WARN("ncclCommGrow: ranks %d and %d passed different unique ids", from, r);
      res = ncclInvalidUsage;
    }
  }
  if (res == ncclSuccess && from < 0) {
    WARN("ncclCommGrow: no existing rank passed the unique id (the rank that called ncclCommGetUniqueId must)");
    res = ncclInvalidUsage;
  }
  if (res == ncclSuccess) *id = offers[from].id;
  free(offers);
  return res;
}

NCCL_API(ncclResult_t, ncclCommGrow, ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
         ncclComm_t *newcomm, ncclConfig_t *config);
ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank, ncclComm_t *newcomm,
                           ncclConfig_t *config) {
  if (newcomm == NULL) {
    WARN("ncclCommGrow: newcomm is NULL");
    return ncclInvalidArgument;
  }
  *newcomm = NULL;
  if (comm == NULL) {  // a new rank
    if (uniqueId == NULL) {
      WARN("ncclCommGrow: a new rank (comm NULL) must pass the unique id");
      return ncclInvalidArgument;
    }
    if (rank < 0 || rank >= nRanks) {
      WARN("ncclCommGrow: a new rank's rank=%d is out of range for nRanks=%d", rank, nRanks);
      return ncclInvalidArgument;
    }
    return pncclCommInitRankConfig(newcomm, nRanks, *uniqueId, rank, config);
  }
  WEFTCHECK(weft_comm_check_parent(comm, "ncclCommGrow", 0));
  if (rank != -1) {
    WARN("ncclCommGrow: rank %d is an existing rank and must pass rank=-1 (it keeps its rank), not %d", comm->rank,
         rank);
    return ncclInvalidArgument;
  }
  if (nRanks <= comm->nranks) {
    WARN("ncclCommGrow: nRanks=%d must exceed the communicator's %d ranks", nRanks, comm->nranks);
    return ncclInvalidArgument;
  }
  ncclConfig_t inherited;  // a NULL config inherits the parent's
  weft_comm_config_to_struct(comm, &inherited);
  ncclUniqueId id;
  WEFTCHECK(agree_on_id(comm, uniqueId, &id));
  pthread_mutex_lock(&comm->lock);
  if (comm->grow_id_pending && memcmp(&comm->grow_id, &id, sizeof(id)) == 0) comm->grow_id_pending = 0;
  pthread_mutex_unlock(&comm->lock);
  INFO(WEFT_LOG_INIT, "comm %p rank %d grows from %d to %d ranks", (void *)comm, comm->rank, comm->nranks, nRanks);
  return pncclCommInitRankConfig(newcomm, nRanks, id, comm->rank, config != NULL ? config : &inherited);
}
