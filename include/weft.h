/*
 * weft.h — weft's own extensions to the NCCL API.
 *
 * Everything in nccl.h works unchanged; this header adds what NCCL has no
 * call for: weft's version, streams for host-memory collectives, a receive
 * from any rank, building a communicator from a launcher's environment,
 * and a printable form of ncclUniqueId. All functions here are exported as
 * weftXxx and, like NCCL's, return an ncclResult_t and reject bad arguments
 * with ncclInvalidArgument.
 */
#ifndef WEFT_H_
#define WEFT_H_

#include <stddef.h>

#include "nccl.h"

#define WEFT_MAJOR 0
#define WEFT_MINOR 1
#define WEFT_PATCH 0
#define WEFT_VERSION(X, Y, Z) ((X) * 10000 + (Y) * 100 + (Z))
#define WEFT_VERSION_CODE WEFT_VERSION(WEFT_MAJOR, WEFT_MINOR, WEFT_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

// Store weft's own version code (WEFT_VERSION_CODE of the library) in
// *version. ncclGetVersion reports the NCCL API level instead.
ncclResult_t weftGetVersion(int *version);

// ---- Host streams.
//
// On host memory a NULL stream means a call has completed when it returns.
// Passing a stream from weftStreamCreate instead makes calls asynchronous:
// they return once queued, and the work on one stream completes in the order
// it was issued. A call that finds its stream idle first runs on the calling
// thread for up to WEFT_STREAM_EAGER_NS (50 µs): when its peers are there it
// is complete before it returns (weftStreamQuery then says so), without a
// hand-over to the stream's thread; otherwise that thread carries it on. On CUDA builds device buffers keep using cudaStream_t from
// CUDA as usual.

// Create a host stream in *stream.
ncclResult_t weftStreamCreate(cudaStream_t *stream);
// Free a stream from weftStreamCreate; work already queued still completes.
ncclResult_t weftStreamDestroy(cudaStream_t stream);
// Block until every call queued on the stream has finished; returns the
// first error among them, if any.
ncclResult_t weftStreamSynchronize(cudaStream_t stream);
// Poll without blocking: ncclSuccess when all queued work has finished,
// ncclInProgress while some is pending, the first error otherwise.
ncclResult_t weftStreamQuery(cudaStream_t stream);
// A function the stream's worker calls once every call queued before it has
// finished, as cudaStreamAddCallback does: status is the first failure among
// the calls since the previous callback on the stream (ncclSuccess if none).
// It may queue more work; it must not synchronize or destroy its own stream.
// Synchronize waits for queued callbacks. On the NULL stream it runs at once.
typedef void (*weftStreamCallback_t)(cudaStream_t stream, ncclResult_t status, void *arg);
ncclResult_t weftStreamAddCallback(cudaStream_t stream, weftStreamCallback_t callback, void *arg);

// ---- Receive from any rank.
//
// Receive count elements of datatype into recvbuff (host memory) from
// whichever rank's ncclSend comes first, and store that rank in *source
// (source may be NULL) when the receive completes: before the call returns
// on the NULL stream, before weftStreamSynchronize returns on a weft
// stream; -1 when it failed. count 0 is a no-op that matches no message
// (*source = -1), as a Send or Recv of 0 elements is.
//
// Each pair of ranks keeps its order. The call takes its place in the
// order of receives from every rank when it is launched (at the call, or
// at ncclGroupEnd in a group, in call order with the group's other calls):
// it never takes a message that an earlier ncclRecv or weftRecvAny from
// that rank is owed, and a later ncclRecv from that rank waits for it as
// for any earlier receive. It takes the next message of the first rank
// whose next message is its to take and has arrived, looking round robin
// from the rank after the last one matched; the rank itself counts (its
// own ncclSend to itself). Tags do not exist: like ncclRecv, it matches
// the message, whatever it is; it must hold count elements of datatype,
// and a size that differs fails the call and the communicator with
// ncclInvalidUsage, as a mismatched ncclSend/ncclRecv pair does.
//
// It ends in an error, never a hang, as ncclRecv does: abort, revoke and a
// failed communicator end it; while it has matched no rank, the death of
// any rank of this host ends it (after matching, that rank's); WEFT_TIMEOUT
// names it as waiting on "any". Device memory is ncclInvalidUsage.
ncclResult_t weftRecvAny(void *recvbuff, size_t count, ncclDataType_t datatype, int *source, ncclComm_t comm,
                         cudaStream_t stream);

// ---- Launcher integration.
//
// Build a communicator for this process from the environment a launcher
// left behind, trying in order:
//   weftrun:  WEFT_UNIQUE_ID (see weftUniqueIdToString), WEFT_RANK, WEFT_NRANKS;
//   torchrun: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT;
//   Slurm:    SLURM_PROCID, SLURM_NTASKS, plus NCCL_COMM_ID (host:port) or
//             MASTER_ADDR/MASTER_PORT for the rendezvous address;
//   MPI:      OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE or PMI_RANK/PMI_SIZE,
//             with the same address rule as Slurm.
// Collective: every rank of the job must call it. When no launcher's
// variables are complete it fails with a WARN naming what is missing.
ncclResult_t weftInitFromEnv(ncclComm_t *comm);

// ---- Unique ids as text: 256 lowercase hex digits (two per byte, in byte
// order), so an id can travel through an environment variable or a file.

// Buffer size that holds the text and its terminating NUL (2 * 128 + 1).
#define WEFT_UNIQUE_ID_STRLEN 257

// Write id as text into buf; len must be at least WEFT_UNIQUE_ID_STRLEN.
ncclResult_t weftUniqueIdToString(const ncclUniqueId *id, char *buf, size_t len);
// Parse text written by weftUniqueIdToString (exactly 256 hex digits) into
// *id; anything else is ncclInvalidArgument.
ncclResult_t weftUniqueIdFromString(const char *text, ncclUniqueId *id);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // WEFT_H_
