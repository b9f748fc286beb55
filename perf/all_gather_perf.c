/*
 * all_gather_perf.c — ncclAllGather benchmark, nccl-tests' all_gather_perf.
 *
 * Each rank contributes a block of count/n elements (rounded down to 16
 * bytes); the reported size is the gathered total. algbw = total / time,
 * busbw = algbw * (n-1)/n: each rank receives all blocks but its own.
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
  return ncclAllGather(c->send, c->recv, c->count, c->type, c->comm, c->stream);
}

// Block q of the result is rank q's input.
static perf_src_t source(int rank, int nranks, int root, size_t param, size_t j, int *src,
                         size_t *idx) {
  (void)rank, (void)nranks, (void)root;
  *src = (int)(j / param);
  *idx = j % param;
  return PERF_SRC_COPY;
}

int main(int argc, char **argv) {
  static const perf_coll_t coll = {.opname = "none",
                                   .check_inplace = 1,
                                   .counts = counts,
                                   .bw = bw,
                                   .run = run,
                                   .source = source};
  return perf_main(&coll, argc, argv);
}
