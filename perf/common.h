/*
 * common.h — what each *_perf benchmark tells the shared driver.
 *
 * Each benchmark (all_reduce_perf.c, ...) describes one collective in a
 * perf_coll_t: how a message size maps to element counts, how bandwidth is
 * computed, how to issue the call, and where each received element must come
 * from, so that the driver (common.c and its parts) can time it, check it
 * and print nccl-tests' report.
 * The benchmarks are clients of the public API only (nccl.h, weft.h).
 */
#ifndef WEFT_PERF_COMMON_H
#define WEFT_PERF_COMMON_H

#include <stddef.h>

#include "nccl.h"
#include "weft.h"

// Element counts of one call, for a message of `count` elements of the
// test's type. In-place calls use sendbuff = recvbase + send_inplace*rank
// and recvbuff = recvbase + recv_inplace*rank (elements).
typedef struct {
  size_t send, recv;  // elements in each rank's send / receive buffer
  size_t param;       // the count argument of the call
  size_t send_inplace, recv_inplace;
} perf_counts_t;

// One call of the collective on one rank.
typedef struct {
  const void *send;
  void *recv;
  size_t count;  // perf_counts_t.param
  ncclDataType_t type;
  ncclRedOp_t op;
  int root, rank, nranks;
  int step;  // 0..perf_coll_t.steps-1
  ncclComm_t comm;
  cudaStream_t stream;
} perf_call_t;

// Where element j of a rank's receive buffer comes from (perf_coll_t.source).
typedef enum {
  PERF_SRC_NONE,    // not written by the call: keeps its previous content
  PERF_SRC_REDUCE,  // the reduction over every rank of send element *idx
  PERF_SRC_COPY     // send element *idx of rank *src
} perf_src_t;

typedef struct {
  const char *opname;  // NULL: the test runs every -o op; else printed as is
  int rooted;          // runs every -r root (else prints root -1)
  int check_inplace;   // 0: in-place results are not checked (printed N/A)
  int pow2_only;       // needs a power-of-two rank count (skipped otherwise)
  // Calls made of dependent steps (NULL: one). Each step is issued for all
  // of a thread's ranks in one group before the next step starts.
  int (*steps)(int nranks);
  void (*counts)(size_t count, size_t eltsize, int nranks, perf_counts_t *c);
  // Algorithm and bus bandwidth (GB/s) for `param` elements moved in sec.
  void (*bw)(size_t param, size_t eltsize, double sec, int nranks, double *alg, double *bus);
  ncclResult_t (*run)(const perf_call_t *call);
  perf_src_t (*source)(int rank, int nranks, int root, size_t param, size_t j, int *src,
                       size_t *idx);
} perf_coll_t;

// Runs the benchmark described by `coll` with nccl-tests' flags; returns the
// process exit status (0 only when every check passed).
int perf_main(const perf_coll_t *coll, int argc, char **argv);

// nccl-tests' "count/nranks rounded down to 16 bytes" block size.
static inline size_t perf_block(size_t count, size_t eltsize, int nranks) {
  return (count / (size_t)nranks) & ~(16 / eltsize - 1);
}

#endif
