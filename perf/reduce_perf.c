/*
 * reduce_perf.c — ncclReduce benchmark, nccl-tests' reduce_perf.
 *
 * Every rank's message is reduced into the root's receive buffer; other
 * ranks' receive buffers must stay untouched. algbw = size / time and busbw
 * = algbw: in a chain every link carries the message once.
 */
#include "common.h"

static void counts(size_t count, size_t eltsize, int nranks, perf_counts_t *c) {
  (void)eltsize, (void)nranks;
  *c = (perf_counts_t){.send = count, .recv = count, .param = count};
}

static void bw(size_t param, size_t eltsize, double sec, int nranks, double *alg, double *bus) {
  (void)nranks;
  *alg = (double)(param * eltsize) / 1.0e9 / sec;
  *bus = *alg;
}

static ncclResult_t run(const perf_call_t *c) {
  return ncclReduce(c->send, c->recv, c->count, c->type, c->op, c->root, c->comm, c->stream);
}

static perf_src_t source(int rank, int nranks, int root, size_t param, size_t j, int *src,
                         size_t *idx) {
  (void)nranks, (void)param, (void)src;
  *idx = j;
  return rank == root ? PERF_SRC_REDUCE : PERF_SRC_NONE;
}

int main(int argc, char **argv) {
  static const perf_coll_t coll = {
      .rooted = 1, .check_inplace = 1, .counts = counts, .bw = bw, .run = run, .source = source};
  return perf_main(&coll, argc, argv);
}
