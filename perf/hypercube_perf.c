/*
 * hypercube_perf.c — an all-gather by hypercube exchange built from
 * ncclSend/ncclRecv, nccl-tests' hypercube_perf.
 *
 * Each rank starts with its block (count/n elements, rounded down to 16
 * bytes) at rank*block of the result; in step k = 0..log2(n)-1 it swaps
 * everything gathered so far (2^k blocks) with rank ^ 2^k. Needs a power-of-
 * two rank count (others are skipped, as in nccl-tests). The size reported
 * is the gathered total; algbw = busbw = block*(n-1) / time, the bytes each
 * rank receives.
 */
#include "common.h"

static void counts(size_t count, size_t eltsize, int nranks, perf_counts_t *c) {
  size_t block = perf_block(count, eltsize, nranks);
  *c = (perf_counts_t){
      .send = block, .recv = block * (size_t)nranks, .param = block, .send_inplace = block};
}

static void bw(size_t param, size_t eltsize, double sec, int nranks, double *alg, double *bus) {
  *alg = (double)(param * eltsize * (size_t)(nranks - 1)) / 1.0e9 / sec;
  *bus = *alg;
}

static size_t type_size(ncclDataType_t t) {
  static const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return (int)t >= 0 && (int)t < 12 ? sizes[t] : 0;
}

// Step 0 places the own block (a send to self, ordered on the stream like
// the rest); step k >= 1 swaps the 2^(k-1) blocks gathered so far with
// rank ^ 2^(k-1). Each step is one group.
static int steps(int nranks) {
  int k = 1;
  while ((1 << (k - 1)) < nranks) k++;
  return k;
}

static ncclResult_t run(const perf_call_t *c) {
  size_t bytes = c->count * type_size(c->type);
  char *out = c->recv;
  int peer = c->rank;
  size_t have = (size_t)c->rank, get = (size_t)c->rank, n = c->count;  // block indices
  const void *from = c->send;
  if (c->step == 0) {
    if (out + have * bytes == (const char *)c->send) return ncclSuccess;  // in place
  } else {
    size_t mask = (size_t)1 << (c->step - 1);
    peer = c->rank ^ (int)mask;
    have = (size_t)c->rank & ~(mask - 1), get = have ^ mask, n = c->count * mask;
    from = out + have * bytes;
  }
  ncclResult_t res = ncclGroupStart();
  if (res != ncclSuccess) return res;
  ncclResult_t a = ncclSend(from, n, c->type, peer, c->comm, c->stream);
  ncclResult_t b = ncclRecv(out + get * bytes, n, c->type, peer, c->comm, c->stream);
  res = ncclGroupEnd();
  return a != ncclSuccess ? a : b != ncclSuccess ? b : res;
}

static perf_src_t source(int rank, int nranks, int root, size_t param, size_t j, int *src,
                         size_t *idx) {
  (void)rank, (void)nranks, (void)root;
  *src = (int)(j / param);
  *idx = j % param;
  return PERF_SRC_COPY;
}

int main(int argc, char **argv) {
  static const perf_coll_t coll = {.opname = "",
                                   .check_inplace = 1,
                                   .pow2_only = 1,
                                   .steps = steps,
                                   .counts = counts,
                                   .bw = bw,
                                   .run = run,
                                   .source = source};
  return perf_main(&coll, argc, argv);
}
