/*
 * comm_suspend.c — ncclCommSuspend, ncclCommResume and ncclCommMemStats
 * (NCCL 2.30).
 *
 * A suspended communicator refuses collectives and point-to-point calls
 * (ncclInvalidUsage, saying so) until it is resumed; it is suspended only
 * once nothing of it is in flight. What NCCL_SUSPEND_MEM can release is the
 * device memory a communicator holds that its peers do not map: weft's only
 * device memory is the CUDA IPC path's scratch, which every peer maps,
 * so it counts as persistent and nothing is released (a host-memory
 * communicator holds no device memory at all). The statistics say exactly
 * that, so a caller that suspends to free GPU memory learns it gains none.
 */
#include "api.h"
#include "checks.h"
#include "comm.h"
#include "placement.h"
#include "util.h"

enum { SUSPENDED = 1, FLAGS_SHIFT = 1 };

NCCL_API(ncclResult_t, ncclCommSuspend, ncclComm_t comm, int flags);
ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags) {
  WEFTCHECK(weft_comm_check(comm, "ncclCommSuspend"));
  if ((flags & ~NCCL_SUSPEND_MEM) != 0) {
    WARN("ncclCommSuspend: flags=0x%x: only NCCL_SUSPEND_MEM (0x%x) is defined", (unsigned)flags, NCCL_SUSPEND_MEM);
    return ncclInvalidArgument;
  }
  if (atomic_load(&comm->suspended) != 0) {
    WARN("ncclCommSuspend: communicator %p is already suspended", (void *)comm);
    return ncclInvalidUsage;
  }
  // Calls still running (a stream's queue, another thread's) end first.
  if (!weft_comm_drain(comm, weft_timeout_ms())) {
    WARN("ncclCommSuspend: communicator %p still has calls in flight after %lld s (WEFT_TIMEOUT)", (void *)comm,
         (long long)weft_timeout_ms() / 1000);
    return ncclInvalidUsage;
  }
  int want = SUSPENDED | flags << FLAGS_SHIFT, none = 0;
  if (!atomic_compare_exchange_strong(&comm->suspended, &none, want)) {
    WARN("ncclCommSuspend: communicator %p is already suspended", (void *)comm);
    return ncclInvalidUsage;
  }
  INFO(WEFT_LOG_INIT, "comm %p rank %d suspended (flags 0x%x; %zu bytes of device memory held, none releasable)",
       (void *)comm, comm->rank, (unsigned)flags, weft_cuda_ipc_device_bytes(comm));
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommResume, ncclComm_t comm);
ncclResult_t pncclCommResume(ncclComm_t comm) {
  WEFTCHECK(weft_comm_check(comm, "ncclCommResume"));
  if (atomic_exchange(&comm->suspended, 0) == 0) {
    WARN("ncclCommResume: communicator %p is not suspended", (void *)comm);
    return ncclInvalidUsage;
  }
  INFO(WEFT_LOG_INIT, "comm %p rank %d resumed", (void *)comm, comm->rank);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommMemStats, ncclComm_t comm, ncclCommMemStat_t stat, uint64_t *value);
ncclResult_t pncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t *value) {
  WEFTCHECK(weft_comm_check(comm, "ncclCommMemStats"));
  if (value == NULL) {
    WARN("ncclCommMemStats: value is NULL");
    return ncclInvalidArgument;
  }
  uint64_t persistent = weft_cuda_ipc_device_bytes(comm);
  int s = atomic_load(&comm->suspended);
  switch (stat) {
    case ncclStatGpuMemSuspend: *value = 0; return ncclSuccess;
    case ncclStatGpuMemSuspended: *value = (s & SUSPENDED) && ((s >> FLAGS_SHIFT) & NCCL_SUSPEND_MEM); return ncclSuccess;
    case ncclStatGpuMemPersist:
    case ncclStatGpuMemTotal: *value = persistent; return ncclSuccess;
    default:
      WARN("ncclCommMemStats: stat=%d is not a ncclCommMemStat_t", (int)stat);
      return ncclInvalidArgument;
  }
}
