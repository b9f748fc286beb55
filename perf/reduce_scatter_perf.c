/*
 * reduce_scatter_perf.c — ncclReduceScatter benchmark, nccl-tests'
 * reduce_scatter_perf.
 *
 * Each rank sends n blocks of count/n elements (rounded down to 16 bytes)
 * and keeps the reduction of its own block; the reported size is the send
 * total. algbw = total / time, busbw = algbw * (n-1)/n.
 */
#include "common.h"

static void counts(size_t count, size_t eltsize, int nranks, perf_counts_t *c) {
  size_t block = perf_block(count, eltsize, nranks);
  *c = (perf_counts_t){
      .send = block * (size_t)nranks, .recv = block, .param = block, .recv_inplace = block};
}

static void bw(size_t param, size_t eltsize, double sec, int nranks, double *alg, double *bus) {
  *alg = (double)(param * eltsize * (size_t)nranks) / 1.0e9 / sec;
  *bus = *alg * ((double)(nranks - 1) / nranks);
}

static ncclResult_t run(const perf_call_t *c) {
  return ncclReduceScatter(c->send, c->recv, c->count, c->type, c->op, c->comm, c->stream);
}

static perf_src_t source(int rank, int nranks, int root, size_t param, size_t j, int *src,
                         size_t *idx) {
  (void)nranks, (void)root, (void)src;
  *idx = (size_t)rank * param + j;
  return PERF_SRC_REDUCE;
}

int main(int argc, char **argv) {
  static const perf_coll_t coll = {
      .check_inplace = 1, .counts = counts, .bw = bw, .run = run, .source = source};
  return perf_main(&coll, argc, argv);
}
