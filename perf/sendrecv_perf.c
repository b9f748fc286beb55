/*
 * sendrecv_perf.c — ncclSend/ncclRecv benchmark, nccl-tests' sendrecv_perf.
 *
 * In one group each rank sends its message to rank+1 and receives one from
 * rank-1 (mod n), so every link carries one message each way: algbw = busbw
 * = size / time. As in nccl-tests, the in-place column (send and receive on
 * one buffer) is timed but not checked.
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
  ncclResult_t res = ncclGroupStart();
  if (res != ncclSuccess) return res;
  ncclResult_t a =
      ncclSend(c->send, c->count, c->type, (c->rank + 1) % c->nranks, c->comm, c->stream);
  ncclResult_t b = ncclRecv(c->recv, c->count, c->type, (c->rank - 1 + c->nranks) % c->nranks,
                            c->comm, c->stream);
  res = ncclGroupEnd();
  return a != ncclSuccess ? a : b != ncclSuccess ? b : res;
}

static perf_src_t source(int rank, int nranks, int root, size_t param, size_t j, int *src,
                         size_t *idx) {
  (void)root, (void)param;
  *src = (rank - 1 + nranks) % nranks;
  *idx = j;
  return PERF_SRC_COPY;
}

int main(int argc, char **argv) {
  static const perf_coll_t coll = {.counts = counts, .bw = bw, .run = run, .source = source};
  return perf_main(&coll, argc, argv);
}
