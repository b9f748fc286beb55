/*
 * profiler_example.h — the parts of the example profiler plugin
 * (profiler_example.c) that its older versions' entry points
 * (profiler_example_old.c) share: every version's events are recorded in
 * version 6's terms, with what an old descriptor adds written as extra
 * JSON arguments.
 */
#ifndef WEFT_PROFILER_EXAMPLE_H
#define WEFT_PROFILER_EXAMPLE_H

#include "profiler_abi.h"

// Opens a trace for one communicator; hash and rank are -1 where the
// version's init is not told them (versions 1 to 3: the file is named by
// the process and a count). log may be NULL.
ncclResult_t example_setup(void **context, int version, uint64_t hash, int has_hash, int rank, int nranks,
                           const char *comm_name, int *mask, ncclDebugLogger_t log);
// Starts an event described in version 6's layout; extra ("" or
// ",\"key\":value...") is appended to its JSON arguments.
ncclResult_t example_start(void *context, void **handle, const ncclProfilerEventDescr_v6_t *d, const char *extra);
ncclResult_t example_stop(void *handle);
// Records a state; timer: the arguments' kernelCh.pTimer (0 without).
ncclResult_t example_record(void *handle, ncclProfilerEventState_t state, uint64_t timer);
ncclResult_t example_finish(void *context);

#endif
