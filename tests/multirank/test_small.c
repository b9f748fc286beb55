/*
 * test_small.c — the small-message path (src/core/small.c) against the
 * engine, through the public API.
 *
 * A small AllReduce, Broadcast, AllGather, ReduceScatter or AlltoAll made alone on the NULL
 * stream takes the small path; the same call inside ncclGroupStart/End
 * takes the engine's schedule (one-shot, chain, ring, direct); the ring
 * ReduceScatter's fold order (rank j+1 first for block j) is checked bit for bit.
 * Both must give the same bits (every rank folds in rank order 0..n-1, so a
 * float sum whose value depends on the order tells them apart), and since
 * they put the same slots on the wire, ranks may mix them call by call.
 * Also: in place on every rank, every reduction (Avg prescales floats and
 * divides integers), sizes around the path's limits, a count that differs
 * between ranks (fails on every rank, no hang), a peer that never comes
 * (fails at WEFT_TIMEOUT naming the rank waited on), and that the calls
 * alone do take the small path (their TRACE lines say proto=LL).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <unistd.h>

#include "harness.h"
#include "rank_logs.h"

// One AllReduce, alone (small path) or in a group of one (engine).
static ncclResult_t allreduce(const void *s, void *r, size_t n, ncclDataType_t dt, ncclRedOp_t op, ncclComm_t comm,
                              int grouped) {
  if (!grouped) return ncclAllReduce(s, r, n, dt, op, comm, NULL);
  ncclResult_t a = ncclGroupStart(), b = ncclAllReduce(s, r, n, dt, op, comm, NULL), c = ncclGroupEnd();
  return a != ncclSuccess ? a : b != ncclSuccess ? b : c;
}

// Rank r's k-th float: large values of both signs, so that sums depend on
// the order in which they are added.
static float order_value(int r, int k) { return (float)((r % 2 ? -1 : 1) * (1e7 + 3 * r + k)) + 0.37f * (float)r; }

// The sum in rank order 0..n-1, in float, as every rank must compute it.
static float ordered_sum(int n, int k) {
  float acc = order_value(0, k);
  for (int r = 1; r < n; r++) acc += order_value(r, k);
  return acc;
}

/* ---------- the two paths give the same bits, mixed call by call ---------- */

enum { N_ORDER = 12, CALLS = 300 };

static int same_bits_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return weft_test_failures();
  float in[N_ORDER], out[N_ORDER];
  for (int k = 0; k < N_ORDER; k++) in[k] = order_value(rank, k);
  for (int call = 0; call < CALLS && weft_test_failures() == 0; call++) {
    // Which ranks go through the engine changes from call to call.
    int grouped = ((call >> (rank % 4)) & 1) != 0;
    memset(out, 0, sizeof(out));
    WEFT_TEST_CHECK_RES(allreduce(in, out, N_ORDER, ncclFloat32, ncclSum, comm, grouped), ncclSuccess);
    for (int k = 0; k < N_ORDER; k++) {
      float want = ordered_sum(nranks, k);
      WEFT_TEST_CHECK(memcmp(&out[k], &want, sizeof(float)) == 0,
                      "call %d (%s) element %d: %.9g, expected %.9g (rank-order sum)", call,
                      grouped ? "engine" : "small path", k, out[k], want);
    }
  }
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  return weft_test_failures();
}

Test(small, both_paths_fold_in_rank_order_and_mix, .timeout = 120) {
  weft_test_env_defaults();
  for (int n = 2; n <= 4; n++) cr_expect_eq(weft_test_fork_ranks(n, same_bits_body, NULL, 60), 0, "%d ranks", n);
}

/* ---------- in place, every reduction, sizes around the limits ---------- */

static int64_t int_value(int r, size_t i) { return (int64_t)(r + 1) * 7 + (int64_t)(i % 11) - 40; }

static int64_t fold_int(ncclRedOp_t op, int nranks, size_t i) {
  int64_t acc = int_value(0, i);
  for (int r = 1; r < nranks; r++) {
    int64_t v = int_value(r, i);
    acc = op == ncclProd ? acc * v : op == ncclMax ? (v > acc ? v : acc) : op == ncclMin ? (v < acc ? v : acc) : acc + v;
  }
  return acc;
}

// In place, alone (small path) and in a group (engine), from the same
// inputs: the two results must be the same bits, and the integer ones
// (other than Avg) the exact fold.
static int ops_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return weft_test_failures();
  static const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  static const size_t counts[] = {1, 2, 6, 7, 64, 511, 512, 513};  // 8-byte elements: 8 B .. 4104 B (past 4 KiB)
  static const ncclDataType_t types[] = {ncclInt64, ncclFloat64};
  union {
    int64_t i[600];
    double d[600];
  } small, engine;
  for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
    size_t n = counts[c];
    for (size_t t = 0; t < 2; t++) {
      for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
        for (size_t i = 0; i < n; i++) {
          if (types[t] == ncclInt64) small.i[i] = engine.i[i] = int_value(rank, i);
          else small.d[i] = engine.d[i] = (double)int_value(rank, i) / 3.0;
        }
        WEFT_TEST_CHECK_RES(allreduce(small.i, small.i, n, types[t], ops[o], comm, 0), ncclSuccess);
        WEFT_TEST_CHECK_RES(allreduce(engine.i, engine.i, n, types[t], ops[o], comm, 1), ncclSuccess);
        WEFT_TEST_CHECK(memcmp(small.i, engine.i, n * 8) == 0, "%s op %d count %zu: the paths' results differ",
                        types[t] == ncclInt64 ? "int64" : "float64", (int)ops[o], n);
        for (size_t i = 0; types[t] == ncclInt64 && ops[o] != ncclAvg && i < n; i++)
          WEFT_TEST_CHECK(small.i[i] == fold_int(ops[o], nranks, i), "int64 op %d count %zu element %zu: %lld, expected %lld",
                          (int)ops[o], n, i, (long long)small.i[i], (long long)fold_int(ops[o], nranks, i));
      }
    }
  }
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  return weft_test_failures();
}

Test(small, in_place_every_op_and_sizes_around_the_limit, .timeout = 120) {
  weft_test_env_defaults();
  for (int n = 2; n <= 3; n++) cr_expect_eq(weft_test_fork_ranks(n, ops_body, NULL, 60), 0, "%d ranks", n);
}

/* ---------- Broadcast: every root, both paths mixed ---------- */

static int bcast_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return weft_test_failures();
  static const size_t counts[] = {1, 3, 12, 200, 1024, 1025};  // int32: 4 B .. 4100 B (past 4 KiB)
  int32_t in[1100], out[1100];
  int call = 0;
  for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
    for (int root = 0; root < nranks; root++, call++) {
      size_t n = counts[c];
      int grouped = ((call >> (rank % 3)) & 1) != 0, in_place = (call + rank) % 2;
      for (size_t i = 0; i < n; i++) in[i] = (int32_t)(1000 * rank + (int)i), out[i] = -1;
      if (in_place) {
        memcpy(out, in, n * sizeof(int32_t));
        if (grouped) {
          ncclGroupStart();
          WEFT_TEST_CHECK_RES(ncclBroadcast(out, out, n, ncclInt32, root, comm, NULL), ncclSuccess);
          ncclGroupEnd();
        } else {
          WEFT_TEST_CHECK_RES(ncclBcast(out, n, ncclInt32, root, comm, NULL), ncclSuccess);
        }
      } else {
        if (grouped) ncclGroupStart();
        WEFT_TEST_CHECK_RES(ncclBroadcast(in, out, n, ncclInt32, root, comm, NULL), ncclSuccess);
        if (grouped) ncclGroupEnd();
      }
      for (size_t i = 0; i < n; i++)
        WEFT_TEST_CHECK(out[i] == (int32_t)(1000 * root + (int)i), "count %zu root %d element %zu: %d", n, root, i,
                        out[i]);
    }
  }
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  return weft_test_failures();
}

Test(small, broadcast_from_every_root_on_both_paths, .timeout = 120) {
  weft_test_env_defaults();
  for (int n = 2; n <= 4; n++) cr_expect_eq(weft_test_fork_ranks(n, bcast_body, NULL, 60), 0, "%d ranks", n);
}

/* ---------- AllGather and AlltoAll: both paths mixed, in place too ---------- */

static int32_t block_value(int from, int to, size_t i) { return (int32_t)(100000 * from + 1000 * to + (int)i); }

static int gather_a2a_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return weft_test_failures();
  static const size_t counts[] = {1, 4, 100, 1024, 1025};  // int32 per rank: 4 B .. 4100 B (past 4 KiB)
  int32_t *in = calloc(4 * 1100, sizeof(int32_t)), *out = calloc(4 * 1100, sizeof(int32_t));
  WEFT_TEST_CHECK(in != NULL && out != NULL, "out of memory");
  for (int call = 0; in != NULL && out != NULL && call < 40 && weft_test_failures() == 0; call++) {
    size_t c = counts[call % 5];
    int a2a = (call / 5) % 2, grouped = ((call >> (rank % 3)) & 1) != 0, in_place = (call / 10) % 2;
    for (int p = 0; p < nranks; p++)
      for (size_t i = 0; i < c; i++) {
        in[(size_t)p * c + i] = block_value(rank, p, i);
        out[(size_t)p * c + i] = -1;
      }
    // In place, AllGather's input is this rank's block of the output.
    int32_t *send = in, *recv = in_place ? in : out;
    if (in_place && !a2a) {
      memmove(in + (size_t)rank * c, in, c * sizeof(int32_t));
      send = in + (size_t)rank * c;
    }
    if (grouped) ncclGroupStart();
    ncclResult_t r = a2a ? ncclAlltoAll(send, recv, c, ncclInt32, comm, NULL)
                         : ncclAllGather(send, recv, c, ncclInt32, comm, NULL);
    if (grouped) ncclGroupEnd();
    WEFT_TEST_CHECK_RES(r, ncclSuccess);
    for (int p = 0; p < nranks; p++)
      for (size_t i = 0; i < c; i++) {
        int32_t want = a2a ? block_value(p, rank, i) : block_value(p, 0, i);
        WEFT_TEST_CHECK(recv[(size_t)p * c + i] == want, "%s%s count %zu block %d element %zu: %d, expected %d",
                        a2a ? "AlltoAll" : "AllGather", in_place ? " in place" : "", c, p, i,
                        recv[(size_t)p * c + i], want);
      }
  }
  free(in);
  free(out);
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  return weft_test_failures();
}

Test(small, allgather_and_alltoall_on_both_paths, .timeout = 120) {
  weft_test_env_defaults();
  for (int n = 2; n <= 4; n++) cr_expect_eq(weft_test_fork_ranks(n, gather_a2a_body, NULL, 60), 0, "%d ranks", n);
}

/* ---------- ReduceScatter: the ring's fold order on both paths, in place too ---------- */

// Block j's result as the ring folds it: rank j+1's input first, then
// j+2's, ..., rank j's last, in float.
static float ring_sum(int n, int j, int k) {
  float acc = order_value((j + 1) % n, k);
  for (int m = 2; m <= n; m++) acc += order_value((j + m) % n, k);
  return acc;
}

static int rs_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return weft_test_failures();
  static const size_t counts[] = {1, 8, 100, 1024, 1025};  // per rank: 4 B .. 4100 B (past 4 KiB)
  float *fin = calloc(4 * 1100, sizeof(float)), *fout = calloc(1100, sizeof(float));
  int32_t *iin = calloc(4 * 1100, sizeof(int32_t)), *iout = calloc(1100, sizeof(int32_t));
  WEFT_TEST_CHECK(fin && fout && iin && iout, "out of memory");
  for (int call = 0; fin && fout && iin && iout && call < 60 && weft_test_failures() == 0; call++) {
    size_t c = counts[call % 5];
    int kind = (call / 5) % 3, grouped = ((call >> (rank % 3)) & 1) != 0, in_place = (call / 15) % 2;
    for (int p = 0; p < nranks; p++)
      for (size_t i = 0; i < c; i++) {
        fin[(size_t)p * c + i] = order_value(rank, (int)((size_t)p * c + i) % 1000);
        iin[(size_t)p * c + i] = block_value(rank, p, i);
      }
    // In place, the output is this rank's block of the input.
    float *frecv = in_place ? fin + (size_t)rank * c : fout;
    int32_t *irecv = in_place ? iin + (size_t)rank * c : iout;
    if (grouped) ncclGroupStart();
    ncclResult_t r = kind == 0 ? ncclReduceScatter(fin, frecv, c, ncclFloat32, ncclSum, comm, NULL)
                               : ncclReduceScatter(iin, irecv, c, ncclInt32, kind == 1 ? ncclSum : ncclMax, comm, NULL);
    if (grouped) ncclGroupEnd();
    WEFT_TEST_CHECK_RES(r, ncclSuccess);
    for (size_t i = 0; i < c; i++) {
      if (kind == 0) {
        float want = ring_sum(nranks, rank, (int)((size_t)rank * c + i) % 1000);
        WEFT_TEST_CHECK(memcmp(&frecv[i], &want, sizeof(float)) == 0, "float sum%s count %zu element %zu: %.9g, expected %.9g",
                        in_place ? " in place" : "", c, i, frecv[i], want);
      } else {
        int32_t want = kind == 1 ? 0 : block_value(nranks - 1, rank, i);
        for (int p = 0; kind == 1 && p < nranks; p++) want += block_value(p, rank, i);
        WEFT_TEST_CHECK(irecv[i] == want, "int32 %s%s count %zu element %zu: %d, expected %d", kind == 1 ? "sum" : "max",
                        in_place ? " in place" : "", c, i, irecv[i], want);
      }
    }
  }
  free(fin);
  free(fout);
  free(iin);
  free(iout);
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  return weft_test_failures();
}

Test(small, reducescatter_on_both_paths, .timeout = 120) {
  weft_test_env_defaults();
  for (int n = 2; n <= 4; n++) cr_expect_eq(weft_test_fork_ranks(n, rs_body, NULL, 60), 0, "%d ranks", n);
}

/* ---------- failures: differing counts, a silent peer ---------- */

typedef struct {
  int res[4], async[4];
  int64_t ms[4];
  int bcast;
} outcome_t;

static int mismatch_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  outcome_t *out = arg;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return weft_test_failures();
  int64_t buf[8] = {0};
  double t0 = weft_test_now();
  if (out->bcast) out->res[rank] = (int)ncclBroadcast(buf, buf, rank == 1 ? 5 : 4, ncclInt64, 0, comm, NULL);
  else out->res[rank] = (int)ncclAllReduce(buf, buf, rank == 1 ? 5 : 4, ncclInt64, ncclSum, comm, NULL);
  // A call that succeeded (the Broadcast's root only sends, and may return
  // before the others call) must see its communicator fail soon after.
  ncclResult_t async = out->res[rank] == ncclSuccess ? ncclSuccess : (ncclResult_t)out->res[rank];
  for (int i = 0; i < 500 && async == ncclSuccess; i++) {
    WEFT_TEST_CHECK_RES(ncclCommGetAsyncError(comm, &async), ncclSuccess);
    if (async == ncclSuccess) usleep(10000);
  }
  out->async[rank] = (int)async;
  out->ms[rank] = (int64_t)((weft_test_now() - t0) * 1000);
  ncclCommAbort(comm);
  return 0;
}

Test(small, differing_counts_fail_on_every_rank, .timeout = 60) {
  weft_test_env_timeout(20);
  outcome_t *out = weft_test_shared_alloc(sizeof(*out));
  cr_assert_not_null(out);
  for (out->bcast = 0; out->bcast < 2; out->bcast++) {
    cr_expect_eq(weft_test_fork_ranks(3, mismatch_body, out, 50), 0);
    for (int r = 0; r < 3; r++) {
      // AllReduce: everyone sees the odd length or tag. Broadcast: rank 1
      // does; rank 2 compares descriptors or fails through the abort word
      // rank 1 raises, and the root may return first and then learn it.
      int failed = out->res[r] == ncclInvalidUsage || (out->bcast && out->res[r] == ncclRemoteError);
      int root_learnt = out->bcast && r == 0 && out->res[r] == ncclSuccess && out->async[r] != ncclSuccess;
      cr_expect(failed || root_learnt, "%s: rank %d returned %d, then its communicator reported %d",
                out->bcast ? "Broadcast" : "AllReduce", r, out->res[r], out->async[r]);
      cr_expect(out->ms[r] < 10000, "rank %d took %lld ms to fail", r, (long long)out->ms[r]);
    }
  }
  weft_test_shared_free(out, sizeof(*out));
}

static int silent_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  outcome_t *out = arg;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return weft_test_failures();
  int64_t buf[4] = {1, 2, 3, 4};
  if (rank == 0) {
    double t0 = weft_test_now();
    out->res[0] = (int)ncclAllReduce(buf, buf, 4, ncclInt64, ncclSum, comm, NULL);  // rank 1 never calls
    out->ms[0] = (int64_t)((weft_test_now() - t0) * 1000);
    __atomic_store_n(&out->res[3], 1, __ATOMIC_SEQ_CST);
  } else {
    for (int i = 0; i < 2000 && __atomic_load_n(&out->res[3], __ATOMIC_SEQ_CST) == 0; i++) weft_test_sleep_ms(10);
  }
  ncclCommAbort(comm);
  return 0;
}

Test(small, a_silent_peer_fails_at_the_timeout, .timeout = 60) {
  weft_test_env_timeout(2);
  outcome_t *out = weft_test_shared_alloc(sizeof(*out));
  cr_assert_not_null(out);
  cr_expect_eq(weft_test_fork_ranks(2, silent_body, out, 50), 0);
  cr_expect_eq(out->res[0], ncclTimeout, "rank 0 returned %d", out->res[0]);
  cr_expect(out->ms[0] >= 1900 && out->ms[0] < 8000, "rank 0 failed after %lld ms (WEFT_TIMEOUT=2, WEFT_TIMEOUT_FAIL=1)",
            (long long)out->ms[0]);
  weft_test_shared_free(out, sizeof(*out));
}

/* ---------- which path a call took, from the ranks' TRACE lines ---------- */

static char logdir[64];

static int paths_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return weft_test_failures();
  int32_t in[4 * 8] = {0}, out[4 * 8];
  WEFT_TEST_CHECK_RES(ncclAllReduce(in, out, 5, ncclInt32, ncclSum, comm, NULL), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclBroadcast(in, out, 6, ncclInt32, 1, comm, NULL), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclAllGather(in, out, 7, ncclInt32, comm, NULL), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclReduceScatter(in, out, 3, ncclInt32, ncclSum, comm, NULL), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclAlltoAll(in, out, 2, ncclInt32, comm, NULL), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclGroupStart(), ncclSuccess);  // in a group: the engine
  WEFT_TEST_CHECK_RES(ncclAllReduce(in, out, 9, ncclInt32, ncclSum, comm, NULL), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclGroupEnd(), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  return weft_test_failures();
}

// A small call alone on the NULL stream runs on the small path (its TRACE
// line says proto=LL); the same call in a group goes to the engine. A
// regression that sent every small call to the engine would pass every
// other test here, only slower.
Test(small, small_calls_take_the_small_path, .timeout = 60) {
  weft_test_env_defaults();
  cr_assert_eq(weft_test_log_per_rank(logdir, sizeof(logdir), "weft-small", "TRACE", "COLL"), 0);
  cr_expect_eq(weft_test_fork_ranks(3, paths_body, NULL, 50), 0);
  static const char *small[] = {"AllReduce count=5 ", "Broadcast count=6 ", "AllGather count=7 ",
                                "ReduceScatter count=3 ", "AlltoAll count=2 "};
  for (int i = 0; i < 5; i++)
    cr_expect_eq(weft_test_logs_with(logdir, small[i], "proto=LL"), 3, "%sdid not run on the small path", small[i]);
  cr_expect_eq(weft_test_logs_with(logdir, "AllReduce count=9 ", "proto=LL"), 0,
               "a grouped call ran on the small path");
  cr_expect_eq(weft_test_logs_with(logdir, "AllReduce count=9 ", "steps="), 3, "no rank logged the grouped call");
  weft_test_logs_remove(logdir);
}
