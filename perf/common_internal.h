/*
 * common_internal.h — what the parts of the benchmark driver share: the
 * options, the type and op tables, a thread's state, and each part's entry
 * points. common.c runs the benchmarks, common_args.c reads the flags,
 * common_check.c makes inputs and checks results, common_out.c writes the
 * report. The benchmarks themselves include only common.h.
 */
#ifndef WEFT_PERF_COMMON_INTERNAL_H
#define WEFT_PERF_COMMON_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "common.h"

#define PERF_NTYPES 12
#define PERF_NOPS 6  // sum prod max min avg mulsum, in ncclRedOp_t order
#define PERF_OP_PROD 1
#define PERF_OP_MAX 2
#define PERF_OP_MIN 3
#define PERF_OP_AVG 4
#define PERF_OP_PREMUL 5  // ncclRedOpCreatePreMulSum, one scalar per rank
#define PERF_MAX_NOTES 16

// Indexed by ncclDataType_t; mbits == 0 marks integers.
typedef struct {
  const char *name;  // nccl-tests' name
  int size, ebits, mbits;
} perf_type_t;
extern const perf_type_t perf_types[PERF_NTYPES];
extern const char *const perf_opnames[PERF_NOPS];

typedef struct {
  int nthreads, ngpus, iters, warmup, agg, check, blocking, stream_null, average, cycles;
  int cputime, unalign, reg;
  int device;  // --device 1: buffers in GPU memory, calls on CUDA streams (common_device.c)
  int type, op, root;  // -1: all
  size_t minbytes, maxbytes, stepbytes, stepfactor;
  const char *json;
} perf_opts_t;
extern perf_opts_t perf_opts;

// Lines the header prints for flags accepted but not applied.
extern const char *perf_notes[PERF_MAX_NOTES];
extern int perf_nnotes;

// The run: the benchmark, the program name, the ranks, this process.
extern const perf_coll_t *perf_coll;
extern const char *perf_prog;
extern int perf_nranks, perf_proc;

typedef struct {      // one thread and the ranks it drives
  int thread, first;  // first: global rank of its first rank
  ncclComm_t *comms;  // perf_opts.ngpus of each
  cudaStream_t *streams;
  char **send, **recv, **snap;  // snap: the checked region before the call
  char **hsend, **hrecv;        // host views for the checks (--device 1: copies; else send, recv)
  double *dtmp;
  int64_t *itmp;
  perf_counts_t c;  // counts at the current size
  double bw_sum;
  int bw_count, errors, rep;
  pthread_t tid;
} perf_thread_t;

typedef struct {  // who runs a rank, gathered for the "# Using devices" block
  int32_t pid;
  char host[60];
} perf_rank_info_t;

// Buffers as the calls see them: past the -u offset.
static inline char *perf_recv_base(const perf_thread_t *th, int l, int t) {
  return th->recv[l] + (size_t)perf_opts.unalign * (size_t)perf_types[t].size;
}
static inline char *perf_send_base(const perf_thread_t *th, int l, int t) {
  return th->send[l] + (size_t)perf_opts.unalign * (size_t)perf_types[t].size;
}

// Host views of the same (what the checks read and write).
static inline char *perf_hrecv_base(const perf_thread_t *th, int l, int t) {
  return th->hrecv[l] + (size_t)perf_opts.unalign * (size_t)perf_types[t].size;
}
static inline char *perf_hsend_base(const perf_thread_t *th, int l, int t) {
  return th->hsend[l] + (size_t)perf_opts.unalign * (size_t)perf_types[t].size;
}

// common_device.c (--device 1): the CUDA driver, opened at run time.
void perf_dev_open(void);
void perf_dev_bind(int rank);  // make rank's device current on this thread
int perf_dev_of(int rank);
cudaStream_t perf_dev_stream(void);
void perf_dev_stream_destroy(cudaStream_t s);
void perf_dev_sync(cudaStream_t s);
void perf_dev_put(int rank, void *dev, const void *host, size_t bytes);  // binds rank's device
void perf_dev_get(int rank, void *host, const void *dev, size_t bytes);

// common_args.c: reads argv into perf_opts; -1 to go on, else the exit
// status (0 after -h, 2 after a usage error, explained on stderr).
int perf_args_parse(int argc, char **argv);

// common_check.c
void perf_check_put(int t, void *p, size_t i, double v);  // element i of type t := v
double perf_check_scalar(int rank);                       // the rank's PreMulSum scalar
// Fresh inputs of every rank of th (seeded), receive buffers zeroed, and
// the checked region saved in snap.
void perf_check_fill(perf_thread_t *th, int t, int op, uint64_t seed, int inplace);
// Wrong elements in th's checked regions after the call.
int64_t perf_check_count(perf_thread_t *th, int t, int op, int root, uint64_t seed, int inplace);

// common_out.c (process 0 only)
void perf_out_json_open(int argc, char **argv);
void perf_out_header(const perf_rank_info_t *info, int reduced);
void perf_out_row_start(size_t bytes, size_t count, int t, const char *op, int root);
void perf_out_half(double us, double alg, double bus, int report, int64_t wrong, int inplace);
void perf_out_row_end(void);
void perf_out_footer(int64_t errors, double bw, int minbw_set, int slow);

#endif
