/*
 * revoke.c — ncclCommRevoke: quiesce a communicator so that it can be
 * destroyed, split or shrunk while its peers may be stuck or dead.
 *
 * As NCCL 2.28: operations in flight stop (they fail), later operations are
 * refused with ncclInvalidUsage, ncclCommFinalize becomes invalid, and the
 * communicator reports ncclInProgress through ncclCommGetAsyncError until
 * its operations have stopped, then ncclSuccess. A blocking communicator
 * returns once quiet; a non-blocking one returns ncclInProgress while
 * operations are still stopping.
 *
 * The revocation is published on the communicator's shared abort word, so
 * the peers' operations fail at once with ncclRemoteError instead of
 * waiting for WEFT_TIMEOUT (over the network, the proxy resets its
 * connections and the other hosts fail the same way).
 */
#include <stdio.h>

#include "api.h"
#include "checks.h"
#include "comm.h"
#include "util.h"

NCCL_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags);
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  if (comm == NULL) return ncclSuccess;  // as NCCL
  if (!weft_registry_contains(comm) || comm->magic != WEFT_COMM_MAGIC) {
    WARN("ncclCommRevoke: comm=%p is not a live communicator (destroyed, or never initialised)", (void *)comm);
    return ncclInvalidArgument;
  }
  if (revokeFlags != NCCL_REVOKE_DEFAULT) {
    WARN("ncclCommRevoke: revokeFlags=%d is not NCCL_REVOKE_DEFAULT (0)", revokeFlags);
    return ncclInvalidArgument;
  }
  if (comm->finalized) {
    WARN("ncclCommRevoke: communicator %p was finalized", (void *)comm);
    return ncclInvalidArgument;
  }
  weft_comm_wait_init(comm);  // a non-blocking initialisation finishes first
  int expected = 0;
  if (!atomic_compare_exchange_strong(&comm->revoked, &expected, 1)) {
    WARN("ncclCommRevoke: communicator %p was already revoked", (void *)comm);
    return ncclInvalidArgument;
  }
  weft_debug_set_rank(comm->rank);
  INFO(WEFT_LOG_INIT, "comm %p rank %d nranks %d - Revoke START", (void *)comm, comm->rank, comm->nranks);
  // Operations in this process stop at their next progress check (the
  // engine looks every couple of milliseconds even while asleep).
  atomic_store(&comm->aborted, 1);
  char reason[128];
  snprintf(reason, sizeof(reason), "rank %d revoked the communicator", comm->rank);
  weft_comm_fail(comm, ncclRemoteError, reason);
  if (!comm->blocking) return atomic_load(&comm->inflight) > 0 ? ncclInProgress : ncclSuccess;
  if (!weft_comm_drain(comm, weft_timeout_ms())) {
    WARN("ncclCommRevoke: operations of rank %d did not stop within %lld s", comm->rank,
         (long long)weft_timeout_ms() / 1000);
    return ncclInternalError;
  }
  INFO(WEFT_LOG_INIT, "comm %p rank %d - Revoke COMPLETE", (void *)comm, comm->rank);
  return ncclSuccess;
}
