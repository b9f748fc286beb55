/*
 * broadcast_perf.c — ncclBroadcast benchmark, nccl-tests' broadcast_perf.
 *
 * The root's message lands on every rank. algbw = size / time and busbw =
 * algbw: in a pipelined chain every link carries the message once.
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
  return ncclBroadcast(c->send, c->recv, c->count, c->type, c->root, c->comm, c->stream);
}

static perf_src_t source(int rank, int nranks, int root, size_t param, size_t j, int *src,
                         size_t *idx) {
  (void)rank, (void)nranks, (void)param;
  *src = root;
  *idx = j;
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
