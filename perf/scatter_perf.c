/*
 * scatter_perf.c — ncclScatter benchmark, nccl-tests' scatter_perf.
 *
 * The root sends block q (count/n elements, rounded down to 16 bytes) of its
 * message to rank q. The reported size is the root's send total; algbw =
 * total / time, busbw = algbw * (n-1)/n.
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
  return ncclScatter(c->send, c->recv, c->count, c->type, c->root, c->comm, c->stream);
}

static perf_src_t source(int rank, int nranks, int root, size_t param, size_t j, int *src,
                         size_t *idx) {
  (void)nranks;
  *src = root;
  *idx = (size_t)rank * param + j;
  return PERF_SRC_COPY;
}

int main(int argc, char **argv) {
  static const perf_coll_t coll = {.opname = "none",
                                   .rooted = 1,
                                   .check_inplace = 1,
                                   .counts = counts,
                                   .bw = bw,
                                   .run = run,
                                   .source = source};
  return perf_main(&coll, argc, argv);
}
