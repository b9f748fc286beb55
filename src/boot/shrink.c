/*
 * shrink.c — ncclCommShrink: the ranks that remain after excluding a list
 * form a new communicator, renumbered densely in the parent's order.
 *
 * Only the survivors call it; the excluded ranks take no part and may be
 * dead. NCCL_SHRINK_DEFAULT leaves the parent's operations alone (the new
 * communicator shares nothing with it); NCCL_SHRINK_ABORT first makes the
 * parent's operations fail, here and on every peer, and waits for them to
 * stop, so a parent stuck on a dead rank is released (as NCCL, the parent
 * stays allocated until the caller destroys or aborts it). The survivors
 * agree without the parent's ring (shrink_exchange.c), then build the new
 * communicator as ncclCommSplit does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "checks.h"
#include "comm.h"
#include "shrink.h"
#include "util.h"

#define ABORT_DRAIN_MS 5000  // NCCL_SHRINK_ABORT: how long the parent's operations may take to stop

static int int_cmp(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

// Checks the list and returns it sorted in *out (a copy; the caller's list is left as it is).
static ncclResult_t check_excludes(const struct ncclComm *comm, const int *list, int count, int **out) {
  *out = NULL;
  if (count < 1) {
    WARN("ncclCommShrink: excludeRanksCount=%d must be at least 1", count);
    return ncclInvalidArgument;
  }
  if (list == NULL) {
    WARN("ncclCommShrink: excludeRanksList is NULL with excludeRanksCount=%d", count);
    return ncclInvalidArgument;
  }
  if (count >= comm->nranks) {
    WARN("ncclCommShrink: excludeRanksCount=%d leaves no rank of %d", count, comm->nranks);
    return ncclInvalidArgument;
  }
  for (int i = 0; i < count; i++) {
    if (list[i] < 0 || list[i] >= comm->nranks) {
      WARN("ncclCommShrink: excludeRanksList[%d]=%d is out of range for a communicator of %d ranks", i, list[i],
           comm->nranks);
      return ncclInvalidArgument;
    }
    if (list[i] == comm->rank) {
      WARN("ncclCommShrink: rank %d is in its own exclude list (excludeRanksList[%d]); excluded ranks must not call "
           "ncclCommShrink",
           comm->rank, i);
      return ncclInvalidArgument;
    }
  }
  int *sorted = malloc(sizeof(int) * (size_t)count);
  if (sorted == NULL) return ncclSystemError;
  memcpy(sorted, list, sizeof(int) * (size_t)count);
  qsort(sorted, (size_t)count, sizeof(int), int_cmp);
  for (int i = 1; i < count; i++) {
    if (sorted[i] == sorted[i - 1]) {
      WARN("ncclCommShrink: rank %d appears twice in excludeRanksList", sorted[i]);
      free(sorted);
      return ncclInvalidArgument;
    }
  }
  *out = sorted;
  return ncclSuccess;
}

// NCCL_SHRINK_ABORT: fail the parent's operations everywhere and wait for ours to stop.
static void abort_parent(struct ncclComm *comm) {
  if (atomic_load(&comm->revoked)) return;  // already quiet
  atomic_store(&comm->aborted, 1);
  char reason[128];
  snprintf(reason, sizeof(reason), "rank %d aborts the communicator to shrink it", comm->rank);
  weft_comm_fail(comm, ncclRemoteError, reason);
  if (!weft_comm_drain(comm, ABORT_DRAIN_MS))
    WARN("ncclCommShrink: rank %d: operations of the parent did not stop within %d s; shrinking anyway", comm->rank,
         ABORT_DRAIN_MS / 1000);
}

NCCL_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
         ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags);
ncclResult_t pncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount, ncclComm_t *newcomm,
                             ncclConfig_t *config, int shrinkFlags) {
  WEFTCHECK(weft_comm_check_parent(comm, "ncclCommShrink", 1));
  if (newcomm == NULL) {
    WARN("ncclCommShrink: newcomm is NULL");
    return ncclInvalidArgument;
  }
  *newcomm = NULL;
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT) {
    WARN("ncclCommShrink: shrinkFlags=%d is neither NCCL_SHRINK_DEFAULT (0) nor NCCL_SHRINK_ABORT (1)", shrinkFlags);
    return ncclInvalidArgument;
  }
  struct ncclComm settings = {0};
  weft_comm_config_inherit(&settings, comm);  // a NULL config inherits the parent's
  if (config != NULL) WEFTCHECK(weft_comm_read_config(config, "ncclCommShrink", &settings));
  int *excl = NULL;
  WEFTCHECK(check_excludes(comm, excludeRanksList, excludeRanksCount, &excl));
  weft_debug_set_rank(comm->rank);

  ncclResult_t res = ncclSuccess;
  int n = comm->nranks, listen_fd = -1;
  int *surv = malloc(sizeof(int) * (size_t)n);
  weft_peer_info_t *members = calloc((size_t)n, sizeof(*members));
  if (surv == NULL || members == NULL) { res = ncclSystemError; goto out; }
  weft_shrink_plan_t plan = {.parent = comm, .excl = excl, .nexcl = excludeRanksCount, .surv = surv};
  for (int r = 0, e = 0; r < n; r++) {
    if (e < excludeRanksCount && excl[e] == r) { e++; continue; }
    if (r == comm->rank) plan.me = plan.m;
    surv[plan.m++] = r;
  }
  if (shrinkFlags == NCCL_SHRINK_ABORT) abort_parent(comm);
  plan.id_hash = comm->id_hash ^ weft_hash_bytes(excl, sizeof(int) * (size_t)excludeRanksCount) ^
                 ((uint64_t)++comm->shrink_count << 48);
  memset(&plan.mine, 0, sizeof(plan.mine));
  plan.mine.rank = plan.me;
  plan.mine.pid = (int32_t)getpid();
  plan.mine.host_hash = comm->bs.peers[comm->rank].host_hash;
  WEFTCHECKGOTO(weft_bootstrap_listen(&plan.mine, &listen_fd), res, out);
  uint64_t id_hash = 0;
  WEFTCHECKGOTO(weft_shrink_exchange(&plan, members, &id_hash), res, out);
  WEFTCHECKGOTO(weft_comm_create_child(comm, &settings, plan.me, plan.m, members, &listen_fd, id_hash, newcomm), res,
                out);
  INFO(WEFT_LOG_INIT, "comm %p shrunk from %p (%s, %d excluded): rank %d -> %d of %d", (void *)*newcomm,
       (void *)comm, shrinkFlags == NCCL_SHRINK_ABORT ? "abort" : "default", excludeRanksCount, comm->rank, plan.me,
       plan.m);
out:
  weft_socket_close(&listen_fd);
  free(excl);
  free(surv);
  free(members);
  return res;
}
