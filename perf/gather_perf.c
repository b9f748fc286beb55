/*
 * gather_perf.c — ncclGather benchmark, nccl-tests' gather_perf.
 *
 * Every rank sends a block of count/n elements (rounded down to 16 bytes)
 * to the root, which stores block q at q*block; other ranks' receive
 * buffers must stay untouched. The reported size is the gathered total;
 * algbw = total / time, busbw = algbw * (n-1)/n.
 */
#include "common.h"

static void counts(size_t count, size_t eltsize, int nranks, perf_counts_t *c) {
  size_t block = perf_block(count, eltsize, nranks);
  *c = (perf_counts_t){
      .send = block, .recv = block * (size_t)nranks, .param = block, .send_inplace = block};
}

static void bw(size_t param, size_t eltsize, double sec, int nranks, double *alg, double *bus) {
  *alg = (double)(param * eltsize * (size_t)nranks) / 1.0e9 / sec;
  *bus = *alg * ((double)(nranks - 1) / nranks);
}

static ncclResult_t run(const perf_call_t *c) {
  return ncclGather(c->send, c->recv, c->count, c->type, c->root, c->comm, c->stream);
}

static perf_src_t source(int rank, int nranks, int root, size_t param, size_t j, int *src,
                         size_t *idx) {
  (void)nranks;
  *src = (int)(j / param);
  *idx = j % param;
  return rank == root ? PERF_SRC_COPY : PERF_SRC_NONE;
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
