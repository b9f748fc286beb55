/*
 * alltoall_perf.c — ncclAlltoAll benchmark, nccl-tests' alltoall_perf.
 *
 * Each rank sends block q (count/n elements, rounded down to 16 bytes) to
 * rank q; the reported size is one rank's send total. algbw = total / time,
 * busbw = algbw * (n-1)/n (the block a rank keeps moves no link). As in
 * nccl-tests the in-place column is timed but not checked.
 */
#include "common.h"

static void counts(size_t count, size_t eltsize, int nranks, perf_counts_t *c) {
  size_t block = perf_block(count, eltsize, nranks);
  *c = (perf_counts_t){
      .send = block * (size_t)nranks, .recv = block * (size_t)nranks, .param = block};
}

static void bw(size_t param, size_t eltsize, double sec, int nranks, double *alg, double *bus) {
  *alg = (double)(param * eltsize * (size_t)nranks) / 1.0e9 / sec;
  *bus = *alg * ((double)(nranks - 1) / nranks);
}

static ncclResult_t run(const perf_call_t *c) {
  return ncclAlltoAll(c->send, c->recv, c->count, c->type, c->comm, c->stream);
}

// Block q of the result is block `rank` of rank q's input.
static perf_src_t source(int rank, int nranks, int root, size_t param, size_t j, int *src,
                         size_t *idx) {
  (void)nranks, (void)root;
  *src = (int)(j / param);
  *idx = (size_t)rank * param + j % param;
  return PERF_SRC_COPY;
}

int main(int argc, char **argv) {
  static const perf_coll_t coll = {
      .opname = "none", .counts = counts, .bw = bw, .run = run, .source = source};
  return perf_main(&coll, argc, argv);
}
