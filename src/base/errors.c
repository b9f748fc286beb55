/*
 * errors.c — versions, error strings and the last-error text.
 */
#include "api.h"
#include "checks.h"
#include "env.h"
#include "weft.h"

NCCL_API(ncclResult_t, ncclGetVersion, int *version);
ncclResult_t pncclGetVersion(int *version) {
  if (version == NULL) {
    WARN("ncclGetVersion: version is NULL");
    return ncclInvalidArgument;
  }
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

WEFT_API(ncclResult_t, weftGetVersion, int *version);
ncclResult_t weftGetVersion(int *version) {
  if (version == NULL) {
    WARN("weftGetVersion: version is NULL");
    return ncclInvalidArgument;
  }
  *version = WEFT_VERSION_CODE;
  return ncclSuccess;
}

NCCL_API(const char *, ncclGetErrorString, ncclResult_t result);
const char *pncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the weft developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    case ncclTimeout: return "timeout";
    default: return "unknown result code";
  }
}

NCCL_API(const char *, ncclGetLastError, ncclComm_t comm);
const char *pncclGetLastError(ncclComm_t comm) {
  (void)comm;  // one text per process, as in NCCL
  return weft_debug_last_error();
}

// nccl.h makes both names no-op macros for programs (as NCCL 2.30's header
// does outside NCCL's own build); programs built against older headers still
// call them, so the library defines and exports them.
#undef ncclResetDebugInit
#undef pncclResetDebugInit
NCCL_API(void, ncclResetDebugInit, void);
void pncclResetDebugInit(void) { weft_env_reset(); }  // re-reads every knob, logging ones included
