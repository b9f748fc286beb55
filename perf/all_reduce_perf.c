/*
 * all_reduce_perf.c — ncclAllReduce benchmark, nccl-tests' all_reduce_perf.
 *
 * Every rank sends and receives the whole message: algbw = size / time and
 * busbw = algbw * 2(n-1)/n, the bytes each rank's link carries in a ring
 * (n-1 steps of reduce-scatter, n-1 of all-gather, size/n each).
 */
#include "common.h"

static void counts(size_t count, size_t eltsize, int nranks, perf_counts_t *c) {
  (void)eltsize, (void)nranks;
  *c = (perf_counts_t){.send = count, .recv = count, .param = count};
}

static void bw(size_t param, size_t eltsize, double sec, int nranks, double *alg, double *bus) {
  *alg = (double)(param * eltsize) / 1.0e9 / sec;
  *bus = *alg * (2.0 * (nranks - 1) / nranks);
}

static ncclResult_t run(const perf_call_t *c) {
  return ncclAllReduce(c->send, c->recv, c->count, c->type, c->op, c->comm, c->stream);
}

static perf_src_t source(int rank, int nranks, int root, size_t param, size_t j, int *src,
                         size_t *idx) {
  (void)rank, (void)nranks, (void)root, (void)param, (void)src;
  *idx = j;
  return PERF_SRC_REDUCE;
}

int main(int argc, char **argv) {
  static const perf_coll_t coll = {
      .check_inplace = 1, .counts = counts, .bw = bw, .run = run, .source = source};
  return perf_main(&coll, argc, argv);
}
