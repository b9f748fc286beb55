/*
 * checks.h — error-propagation macros used inside the library.
 *
 * Public entry points validate their arguments and return an ncclResult_t;
 * internal functions trust their callers and propagate failures with these
 * macros, which log "file:line -> code" at INFO level so a failure leaves a
 * trail from the system call up to the API call.
 */
#ifndef WEFT_CHECKS_H
#define WEFT_CHECKS_H

#include <errno.h>
#include <string.h>

#include "debug.h"
#include "nccl.h"

// Propagate a failing ncclResult_t to the caller.
#define WEFTCHECK(call)                                                   \
  do {                                                                    \
    ncclResult_t weft_res_ = (call);                                      \
    if (weft_res_ != ncclSuccess && weft_res_ != ncclInProgress) {        \
      INFO(WEFT_LOG_ALL, "%s:%d -> %d", __FILE__, __LINE__, weft_res_);   \
      return weft_res_;                                                   \
    }                                                                     \
  } while (0)

// Store a failing result in `res` and jump to the single cleanup label.
#define WEFTCHECKGOTO(call, res, label)                                   \
  do {                                                                    \
    (res) = (call);                                                       \
    if ((res) != ncclSuccess && (res) != ncclInProgress) {                \
      INFO(WEFT_LOG_ALL, "%s:%d -> %d", __FILE__, __LINE__, (res));       \
      goto label;                                                         \
    }                                                                     \
  } while (0)

// A system call that returns -1 on failure: WARN with errno, return SystemError.
#define WEFTSYSCHECK(call, name)                                          \
  do {                                                                    \
    if ((call) == -1) {                                                   \
      WARN("%s failed: %s", (name), strerror(errno));                    \
      return ncclSystemError;                                             \
    }                                                                     \
  } while (0)

// Allocation that cannot fail silently.
#define WEFTCALLOC(ptr, n)                                                \
  do {                                                                    \
    (ptr) = calloc((n), sizeof(*(ptr)));                                  \
    if ((ptr) == NULL && (n) != 0) {                                      \
      WARN("out of memory allocating %zu bytes", (size_t)(n) * sizeof(*(ptr))); \
      return ncclSystemError;                                             \
    }                                                                     \
  } while (0)

#endif
