/*
 * test_engine_fake.c — the core's engine over the stand-in FIFO transport
 * (tests/fakes/transport/fake_fifo.c) put in the registry's place
 * (weft_comm_use_transports): two ranks as threads of one communicator
 * (ncclCommInitAll) run AllReduce (out of place and in place), Broadcast,
 * AllGather, ReduceScatter and a Send/Recv exchange for counts from 0 to
 * many slots (4 KiB slots, 4 to a FIFO, so long calls wrap every FIFO
 * many times), and the results are checked exactly here, after the ranks
 * are done. The connections are checked to be the stand-in's and to have
 * carried messages, so shared memory and the network had no part.
 */
#include <criterion/criterion.h>

#include "../fakes/transport/fake_fifo.h"
#include "../multirank/harness.h"
#include "comm.h"

#define NRANKS 2

static const weft_transport_t *const fake_only[] = {&weft_fake_fifo_transport};

enum { AR, AR_IN, BCAST, GATHER, SCATTER, SENDRECV, NCALLS };
static const char *const call_name[NCALLS] = {"AllReduce", "AllReduce in place", "Broadcast", "AllGather",
                                              "ReduceScatter", "Send/Recv"};

typedef struct {
  size_t count;                    // elements per rank
  int32_t *in[NRANKS];             // count * NRANKS each (ReduceScatter's input)
  int32_t *out[NRANKS][NCALLS];    // count * NRANKS each
} job_t;

static int32_t value(int rank, size_t i) { return (int32_t)(rank * 1000003 + (int)(i % 65521) * 7 + 1); }

static int rank_body(int rank, int nranks, ncclComm_t comm, void *arg) {
  job_t *j = arg;
  size_t n = j->count;
  int32_t **out = j->out[rank], *in = j->in[rank];
  int peer = 1 - rank, fails = 0;
  memcpy(out[AR_IN], in, n * sizeof(int32_t));
  memcpy(out[BCAST], in, n * sizeof(int32_t));
  fails += ncclAllReduce(in, out[AR], n, ncclInt32, ncclSum, comm, NULL) != ncclSuccess;
  fails += ncclAllReduce(out[AR_IN], out[AR_IN], n, ncclInt32, ncclSum, comm, NULL) != ncclSuccess;
  fails += ncclBroadcast(out[BCAST], out[BCAST], n, ncclInt32, 1, comm, NULL) != ncclSuccess;
  fails += ncclAllGather(in, out[GATHER], n, ncclInt32, comm, NULL) != ncclSuccess;
  fails += ncclReduceScatter(in, out[SCATTER], n, ncclInt32, ncclSum, comm, NULL) != ncclSuccess;
  fails += ncclGroupStart() != ncclSuccess;
  fails += ncclSend(in, n, ncclInt32, peer, comm, NULL) != ncclSuccess;
  fails += ncclRecv(out[SENDRECV], n, ncclInt32, peer, comm, NULL) != ncclSuccess;
  fails += ncclGroupEnd() != ncclSuccess;
  (void)nranks;
  return fails;
}

// What rank r's output of `call` holds at element i.
static int32_t expected(int call, int r, size_t n, size_t i) {
  switch (call) {
    case AR:
    case AR_IN: return (int32_t)((uint32_t)value(0, i) + (uint32_t)value(1, i));
    case BCAST: return value(1, i);
    case GATHER: return value((int)(i / n), i % n);
    case SCATTER: return (int32_t)((uint32_t)value(0, r * n + i) + (uint32_t)value(1, r * n + i));
    default: return value(1 - r, i);
  }
}

static size_t out_elems(int call, size_t n) { return call == GATHER ? n * NRANKS : n; }

static void run_count(ncclComm_t *comms, size_t n) {
  job_t j = {.count = n};
  size_t bytes = (n * NRANKS + 1) * sizeof(int32_t);
  for (int r = 0; r < NRANKS; r++) {
    j.in[r] = malloc(bytes);
    cr_assert_not_null(j.in[r]);
    for (size_t i = 0; i < n * NRANKS; i++) j.in[r][i] = value(r, i);
    for (int c = 0; c < NCALLS; c++) {
      j.out[r][c] = malloc(bytes);
      cr_assert_not_null(j.out[r][c]);
      memset(j.out[r][c], 0xa5, bytes);
    }
  }
  uint64_t posted = weft_fake_fifo_posted();
  cr_expect_eq(weft_test_thread_ranks(NRANKS, comms, rank_body, &j), 0, "count %zu: a call failed", n);
  if (n > 0) cr_expect_gt(weft_fake_fifo_posted(), posted, "count %zu: nothing went through the stand-in", n);
  for (int r = 0; r < NRANKS; r++)
    for (int c = 0; c < NCALLS; c++) {
      size_t bad = 0, first = 0, m = out_elems(c, n);
      for (size_t i = 0; i < m; i++)
        if (j.out[r][c][i] != expected(c, r, n, i) && bad++ == 0) first = i;
      int32_t want = bad > 0 ? expected(c, r, n, first) : 0;
      cr_expect_eq(bad, 0, "count %zu rank %d %s: %zu wrong elements, the first at %zu (%d, not %d)", n, r,
                   call_name[c], bad, first, j.out[r][c][first], want);
      cr_expect_eq((uint32_t)j.out[r][c][m], 0xa5a5a5a5u, "count %zu rank %d %s: wrote past its end", n, r,
                   call_name[c]);
      free(j.out[r][c]);
    }
  for (int r = 0; r < NRANKS; r++) free(j.in[r]);
}

Test(engine_fake, collectives_over_the_stand_in, .timeout = 120) {
  weft_test_env_defaults();
  setenv("WEFT_SLOT_BYTES", "4096", 1);
  setenv("WEFT_SLOTS", "4", 1);
  cr_assert_eq(weft_comm_use_transports(fake_only, 1), ncclSuccess);
  ncclComm_t comms[NRANKS] = {NULL};
  cr_assert_eq(ncclCommInitAll(comms, NRANKS, NULL), ncclSuccess);
  for (int r = 0; r < NRANKS; r++)
    for (int p = 0; p < NRANKS; p++)
      for (int cls = 0; cls < WEFT_NUM_CLASSES; cls++)
        for (int is_send = 0; is_send < 2; is_send++)
          cr_expect_eq(weft_comm_conn(comms[r], cls, is_send, p)->tp, &weft_fake_fifo_transport,
                       "rank %d's connection to %d (class %d, %s) is not the stand-in's", r, p, cls,
                       is_send ? "send" : "recv");
  const size_t counts[] = {0, 1, 3, 1000, 1024, 100003};
  for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) run_count(comms, counts[k]);
  for (int r = 0; r < NRANKS; r++) cr_expect_eq(ncclCommDestroy(comms[r]), ncclSuccess);
  weft_comm_use_transports(NULL, 0);
}
