/*
 * test_anysrc.c — weftRecvAny, the receive from any rank (include/weft.h).
 *
 * Forked ranks on 2, 3 and 4 ranks, over shared memory and over the network
 * transport (NCCL_SHM_DISABLE=1): every rank sends to one receiver, which
 * takes the messages with any-source receives and checks each source
 * against the data; explicit and any-source receives mixed, on a stream and
 * in a group, keep each pair's order; a size that differs fails the
 * receive (and the communicator) with a clear error; the death of a peer
 * and ncclCommAbort end a waiting receive with an error. Every test has a
 * deadline, and the library fails a call that stops moving (WEFT_TIMEOUT).
 */
#include <criterion/criterion.h>

#include "harness.h"

#define BIG (1 << 18)  // elements: a message of many slots (and, over the network, one that lands directly)

// What rank `src` sends as its k-th message: element i of it.
static int32_t value(int src, int k, size_t i) { return src * 1000000 + k * 10000 + (int32_t)(i % 9973); }

static void fill(int32_t *buf, size_t count, int src, int k) {
  for (size_t i = 0; i < count; i++) buf[i] = value(src, k, i);
}

// Which message of which sender buf holds (-1 when it is none exactly).
static int identify(const int32_t *buf, size_t count, int src, int *k) {
  *k = (buf[0] - src * 1000000) / 10000;
  for (size_t i = 0; i < count; i++)
    if (buf[i] != value(src, *k, i)) return -1;
  return 0;
}

// Forks nranks ranks running body(arg), over the network transport when
// net, with WEFT_TIMEOUT at timeout_s (0: the harness's default).
static void fork_ranks(int nranks, weft_test_rank_fn body, void *arg, int net, int timeout_s) {
  if (timeout_s > 0) weft_test_env_timeout(timeout_s);
  else weft_test_env_defaults();
  if (net) setenv("NCCL_SHM_DISABLE", "1", 1);
  WEFT_TEST_EXPECT_FORK_OK(nranks, 1, weft_test_one_id_main, (&(weft_test_one_id_t){body, arg}), 60);
}

/* ---------- every rank sends to one receiver ---------- */

typedef struct {
  size_t count;
  int receiver;
} fan_in_t;

static int fan_in_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  const fan_in_t *f = arg;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return 1;
  int32_t *buf = malloc(f->count * sizeof(int32_t));
  if (rank != f->receiver) {
    fill(buf, f->count, rank, 0);
    WEFT_TEST_CHECK_RES(ncclSend(buf, f->count, ncclInt32, f->receiver, comm, NULL), ncclSuccess);
    fill(buf, f->count, rank, 1);
    WEFT_TEST_CHECK_RES(ncclSend(buf, f->count, ncclInt32, f->receiver, comm, NULL), ncclSuccess);
  } else {
    // First round on the NULL stream, the second on a weft stream. A round
    // may take a sender's two messages: only each sender's order is given.
    int next[WEFT_TEST_MAX_RANKS] = {0};
    for (int round = 0; round < 2; round++) {
      cudaStream_t s = NULL;
      if (round == 1) WEFT_TEST_CHECK_RES(weftStreamCreate(&s), ncclSuccess);
      for (int m = 0; m < nranks - 1; m++) {
        int src = -2, k = -1;
        memset(buf, 0xff, f->count * sizeof(int32_t));
        WEFT_TEST_CHECK_RES(weftRecvAny(buf, f->count, ncclInt32, &src, comm, s), ncclSuccess);
        if (s != NULL) WEFT_TEST_CHECK_RES(weftStreamSynchronize(s), ncclSuccess);
        WEFT_TEST_CHECK(src >= 0 && src < nranks && src != rank, "round %d: source %d", round, src);
        if (src < 0 || src >= nranks) continue;
        WEFT_TEST_CHECK(identify(buf, f->count, src, &k) == 0, "round %d: the data is not a message of rank %d",
                        round, src);
        WEFT_TEST_CHECK(k == next[src], "round %d: rank %d's message %d where %d was next", round, src, k, next[src]);
        next[src] = k + 1;
      }
      if (s != NULL) WEFT_TEST_CHECK_RES(weftStreamDestroy(s), ncclSuccess);
    }
    for (int p = 0; p < nranks; p++)
      WEFT_TEST_CHECK(next[p] == (p != rank ? 2 : 0), "%d message(s) from rank %d", next[p], p);
    // Its own send matches too (in a group, or the send would wait for the receive).
    int src = -2;
    fill(buf, 1, rank, 7);
    int32_t got = 0;
    WEFT_TEST_CHECK_RES(ncclGroupStart(), ncclSuccess);
    WEFT_TEST_CHECK_RES(ncclSend(buf, 1, ncclInt32, rank, comm, NULL), ncclSuccess);
    WEFT_TEST_CHECK_RES(weftRecvAny(&got, 1, ncclInt32, &src, comm, NULL), ncclSuccess);
    WEFT_TEST_CHECK_RES(ncclGroupEnd(), ncclSuccess);
    WEFT_TEST_CHECK(src == rank && got == value(rank, 7, 0), "from itself: source %d, value %d", src, (int)got);
  }
  // Zero elements: a no-op that matches nothing.
  int src = 5;
  WEFT_TEST_CHECK_RES(weftRecvAny(NULL, 0, ncclInt32, &src, comm, NULL), ncclSuccess);
  WEFT_TEST_CHECK(src == -1, "count 0: source %d", src);
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  free(buf);
  return weft_test_failures();
}

static void run_fan_in(int nranks, int receiver, size_t count, int net) {
  fan_in_t f = {count, receiver};
  fork_ranks(nranks, fan_in_body, &f, net, 0);
}

Test(anysrc, fan_in_2_ranks, .timeout = 90) { run_fan_in(2, 0, 1, 0); }
Test(anysrc, fan_in_3_ranks_big, .timeout = 90) { run_fan_in(3, 1, BIG, 0); }
Test(anysrc, fan_in_4_ranks, .timeout = 90) { run_fan_in(4, 3, 33, 0); }
Test(anysrc, fan_in_4_ranks_big, .timeout = 90) { run_fan_in(4, 0, BIG, 0); }
Test(anysrc, fan_in_3_ranks_net, .timeout = 90) { run_fan_in(3, 0, 33, 1); }
Test(anysrc, fan_in_4_ranks_net_big, .timeout = 90) { run_fan_in(4, 2, BIG, 1); }

/* ---------- explicit and any-source receives keep each pair's order ---------- */

// Every other rank sends nranks messages to rank 0. Rank 0 posts, in this
// order: any, Recv(1), any, Recv(2), ..., Recv(n-1), then anys for the
// rest (fewer anys than a sender's messages come before any Recv(p), so
// every Recv(p) has a message of p left). Whatever takes them, the
// messages of each sender must arrive in the order it sent them.
typedef struct {
  size_t count;
  int grouped;  // all receives in one group on the NULL stream (else one by one on a weft stream)
} order_t;

static int order_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  const order_t *o = arg;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return 1;
  int per = nranks, total = per * (nranks - 1);
  int32_t *buf = malloc((size_t)total * o->count * sizeof(int32_t));
  if (rank != 0) {
    for (int k = 0; k < per; k++) {
      fill(buf, o->count, rank, k);
      WEFT_TEST_CHECK_RES(ncclSend(buf, o->count, ncclInt32, 0, comm, NULL), ncclSuccess);
    }
  } else {
    int from[4 * WEFT_TEST_MAX_RANKS], source[4 * WEFT_TEST_MAX_RANKS];  // -1: any
    int nposted = 0;
    for (int p = 1; p < nranks; p++) from[nposted++] = -1, from[nposted++] = p;
    while (nposted < total) from[nposted++] = -1;
    cudaStream_t s = NULL;
    if (o->grouped) WEFT_TEST_CHECK_RES(ncclGroupStart(), ncclSuccess);
    else WEFT_TEST_CHECK_RES(weftStreamCreate(&s), ncclSuccess);
    for (int i = 0; i < total; i++) {
      int32_t *at = buf + (size_t)i * o->count;
      source[i] = from[i];
      if (from[i] < 0) WEFT_TEST_CHECK_RES(weftRecvAny(at, o->count, ncclInt32, &source[i], comm, s), ncclSuccess);
      else WEFT_TEST_CHECK_RES(ncclRecv(at, o->count, ncclInt32, from[i], comm, s), ncclSuccess);
    }
    if (o->grouped) WEFT_TEST_CHECK_RES(ncclGroupEnd(), ncclSuccess);
    else WEFT_TEST_CHECK_RES(weftStreamSynchronize(s), ncclSuccess);
    if (s != NULL) WEFT_TEST_CHECK_RES(weftStreamDestroy(s), ncclSuccess);
    int next[WEFT_TEST_MAX_RANKS] = {0};
    for (int i = 0; i < total; i++) {
      int p = source[i], k = -1;
      WEFT_TEST_CHECK(p >= 1 && p < nranks, "receive %d: source %d", i, p);
      if (p < 1 || p >= nranks) continue;
      WEFT_TEST_CHECK(identify(buf + (size_t)i * o->count, o->count, p, &k) == 0,
                      "receive %d: not a message of rank %d", i, p);
      WEFT_TEST_CHECK(k == next[p], "receive %d (%s): rank %d's message %d where %d was next", i,
                      from[i] < 0 ? "any" : "explicit", p, k, next[p]);
      next[p] = k + 1;
    }
    for (int p = 1; p < nranks; p++) WEFT_TEST_CHECK(next[p] == per, "%d message(s) of rank %d", next[p], p);
  }
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  free(buf);
  return weft_test_failures();
}

static void run_order(int nranks, size_t count, int grouped, int net) {
  order_t o = {count, grouped};
  fork_ranks(nranks, order_body, &o, net, 0);
}

Test(anysrc, pair_order_2_ranks_stream, .timeout = 90) { run_order(2, 5, 0, 0); }
Test(anysrc, pair_order_3_ranks_stream, .timeout = 90) { run_order(3, 5, 0, 0); }
Test(anysrc, pair_order_4_ranks_stream, .timeout = 90) { run_order(4, 1000, 0, 0); }
Test(anysrc, pair_order_4_ranks_group, .timeout = 90) { run_order(4, 5, 1, 0); }
Test(anysrc, pair_order_3_ranks_group_big, .timeout = 90) { run_order(3, BIG / 4, 1, 0); }
Test(anysrc, pair_order_4_ranks_net, .timeout = 90) { run_order(4, 1000, 0, 1); }

// Three ranks. Rank 0 queues Recv(from 2) then Recv(from 1) on a weft
// stream, then calls weftRecvAny on the NULL stream. Rank 1 sends one
// message at once; rank 2 sends two a moment later. Rank 1's message,
// there first, is owed to the queued Recv (stuck behind the Recv from 2):
// the any-source receive must leave it and take rank 2's second message
// (taking rank 1's would leave that Recv waiting for a message that never
// comes, and the library fails it after WEFT_TIMEOUT).
static int owed_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return 1;
  int32_t got[3] = {-1, -1, -1};
  if (rank == 0) {
    int src = -2;
    cudaStream_t s;
    WEFT_TEST_CHECK_RES(weftStreamCreate(&s), ncclSuccess);
    WEFT_TEST_CHECK_RES(ncclRecv(&got[0], 1, ncclInt32, 2, comm, s), ncclSuccess);
    WEFT_TEST_CHECK_RES(ncclRecv(&got[1], 1, ncclInt32, 1, comm, s), ncclSuccess);
    WEFT_TEST_CHECK_RES(weftRecvAny(&got[2], 1, ncclInt32, &src, comm, NULL), ncclSuccess);
    WEFT_TEST_CHECK_RES(weftStreamSynchronize(s), ncclSuccess);
    WEFT_TEST_CHECK_RES(weftStreamDestroy(s), ncclSuccess);
    WEFT_TEST_CHECK(got[0] == value(2, 0, 0) && got[1] == value(1, 0, 0), "the Recvs got %d and %d", (int)got[0],
                    (int)got[1]);
    WEFT_TEST_CHECK(src == 2 && got[2] == value(2, 1, 0), "the any-source receive: source %d, %d", src,
                    (int)got[2]);
  } else {
    if (rank == 2) weft_test_sleep_ms(200);
    for (int k = 0; k < rank; k++) {
      int32_t mine = value(rank, k, 0);
      WEFT_TEST_CHECK_RES(ncclSend(&mine, 1, ncclInt32, 0, comm, NULL), ncclSuccess);
    }
  }
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  return weft_test_failures();
}

Test(anysrc, an_owed_message_is_left_to_its_recv, .timeout = 60) {
  fork_ranks(3, owed_body, NULL, 0, 5);
}

/* ---------- sizes that differ ---------- */

// What the ranks saw, in memory shared with the test process.
typedef struct {
  int res[WEFT_TEST_MAX_RANKS];  // each rank's result
  int source;                    // what rank 0's weftRecvAny wrote
  char why[256];                 // rank 0's last error
  double secs;                   // how long rank 0's receive took
} out_t;

static out_t *out;

// Rank 0's weftRecvAny of count elements: its result, source, time and error in *out.
static void recv_any_noted(ncclComm_t comm, int32_t *buf, size_t count) {
  double t0 = weft_test_now();
  out->source = -2;
  out->res[0] = (int)weftRecvAny(buf, count, ncclInt32, &out->source, comm, NULL);
  out->secs = weft_test_now() - t0;
  snprintf(out->why, sizeof(out->why), "%s", ncclGetLastError(NULL));  // comm may be aborted already
}

// Rank 1 sends 5 elements, rank 0 receives 7 from any rank: rank 0's
// receive fails with ncclInvalidUsage, and every rank learns that the
// communicator failed.
static int mismatch_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return 1;
  int32_t buf[7] = {0};
  if (rank == 1) WEFT_TEST_CHECK_RES(ncclSend(buf, 5, ncclInt32, 0, comm, NULL), ncclSuccess);
  if (rank == 0) {
    recv_any_noted(comm, buf, 7);
  } else {  // the failure reaches the others: their next call fails
    float x = 1;
    out->res[rank] = (int)ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, NULL);
  }
  ncclCommAbort(comm);
  return weft_test_failures();
}

static void run_mismatch(int nranks, int net) {
  out = weft_test_shared_alloc(sizeof(*out));
  cr_assert_not_null(out);
  fork_ranks(nranks, mismatch_body, NULL, net, 60);
  cr_expect_eq(out->res[0], ncclInvalidUsage, "rank 0: weftRecvAny returned %d", out->res[0]);
  cr_expect_eq(out->source, -1, "rank 0: source %d after a failed receive", out->source);
  cr_expect(strstr(out->why, "received 20 bytes from rank 1") != NULL && strstr(out->why, "expected 28") != NULL,
            "rank 0's last error: '%s'", out->why);
  for (int r = 1; r < nranks; r++)
    cr_expect_neq(out->res[r], ncclSuccess, "rank %d: its AllReduce after the failure succeeded", r);
  cr_expect_lt(out->secs, 20.0, "rank 0 took %.1f s", out->secs);
  weft_test_shared_free(out, sizeof(*out));
}

Test(anysrc, size_mismatch_fails_2_ranks, .timeout = 90) { run_mismatch(2, 0); }
Test(anysrc, size_mismatch_fails_3_ranks_net, .timeout = 90) { run_mismatch(3, 1); }

/* ---------- a dead peer, an abort ---------- */

// Rank 0 waits in weftRecvAny; nobody sends. The last rank dies (exits)
// after a moment: the receive fails within the liveness period, well
// before WEFT_TIMEOUT (60 s here).
static int death_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return 1;
  if (rank == nranks - 1) {
    weft_test_sleep_ms(300);
    _exit(0);
  }
  int32_t x;
  if (rank == 0) {
    recv_any_noted(comm, &x, 1);
  } else {
    weft_test_sleep_ms(1500);
  }
  ncclCommAbort(comm);
  return weft_test_failures();
}

static void run_end(int nranks, weft_test_rank_fn body, double within) {
  out = weft_test_shared_alloc(sizeof(*out));
  cr_assert_not_null(out);
  fork_ranks(nranks, body, NULL, 0, 60);
  cr_expect_neq(out->res[0], ncclSuccess, "rank 0: weftRecvAny succeeded with nobody sending");
  cr_expect_eq(out->source, -1, "rank 0: source %d after a failed receive", out->source);
  cr_expect_lt(out->secs, within, "rank 0's receive ended after %.2f s", out->secs);
  weft_test_shared_free(out, sizeof(*out));
}

Test(anysrc, a_dead_peer_ends_the_receive_2_ranks, .timeout = 60) { run_end(2, death_body, 10.0); }
Test(anysrc, a_dead_peer_ends_the_receive_3_ranks, .timeout = 60) { run_end(3, death_body, 10.0); }

static void *abort_soon(void *comm) {
  weft_test_sleep_ms(300);
  ncclCommAbort(comm);
  return NULL;
}

// Rank 0 waits in weftRecvAny; another of its threads aborts the communicator.
static int abort_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return 1;
  if (rank != 0) {
    weft_test_sleep_ms(2000);
    ncclCommAbort(comm);
    return weft_test_failures();
  }
  int32_t x;
  pthread_t th;
  pthread_create(&th, NULL, abort_soon, comm);
  recv_any_noted(comm, &x, 1);
  pthread_join(th, NULL);
  return weft_test_failures();
}

Test(anysrc, abort_ends_the_receive_2_ranks, .timeout = 60) { run_end(2, abort_body, 2.0); }

/* ---------- arguments ---------- */

static int args_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return 1;
  int32_t x;
  int src;
  WEFT_TEST_CHECK_RES(weftRecvAny(NULL, 1, ncclInt32, &src, comm, NULL), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(weftRecvAny(&x, 1, (ncclDataType_t)99, &src, comm, NULL), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(weftRecvAny(&x, 1, ncclInt32, &src, NULL, NULL), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  return weft_test_failures();
}

Test(anysrc, bad_arguments, .timeout = 60) {
  fork_ranks(2, args_body, NULL, 0, 0);
}
