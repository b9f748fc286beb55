/*
 * test_api_errors.c — weft's error behaviour through the public API only:
 * every bad argument gets the right code and a WARN naming it (never a
 * crash), stale communicators and foreign pointers are refused, group
 * errors surface at ncclGroupEnd, ranks that call different collectives
 * fail fast instead of hanging or exchanging wrong data, a rank that never
 * joins is named when the others time out, and NCCL_DEBUG set by a program
 * before its first call takes effect.
 *
 * Multi-process tests fork their ranks through harness.h; the test
 * process then creates the unique id and so hosts the rendezvous. Where a
 * rank must start with logging settings of its own, it re-executes this
 * binary (the role is picked in a constructor, before Criterion starts),
 * because the library reads NCCL_DEBUG when it is loaded.
 */
#include <criterion/criterion.h>
#include <dirent.h>

#include "harness.h"

// Two ranks of one process (ncclCommInitAll): argument checks run before any
// peer is involved, so one thread can drive both.
static void init_pair(ncclComm_t comms[2]) {
  weft_test_env_timeout(10);
  comms[0] = comms[1] = NULL;
  cr_assert_eq(ncclCommInitAll(comms, 2, NULL), ncclSuccess, "ncclCommInitAll(2)");
}

// One AllReduce over both ranks of a pair, from one thread; checks the sum.
static void expect_pair_works(ncclComm_t comms[2]) {
  int32_t a[64], b[64];
  for (int i = 0; i < 64; i++) a[i] = i, b[i] = 1000 + i;
  WEFT_TEST_EXPECT_RES(ncclGroupStart(), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclAllReduce(a, a, 64, ncclInt32, ncclSum, comms[0], NULL), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclAllReduce(b, b, 64, ncclInt32, ncclSum, comms[1], NULL), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclGroupEnd(), ncclSuccess);
  for (int i = 0; i < 64; i++) {
    cr_expect_eq(a[i], 1000 + 2 * i, "rank 0 element %d = %d", i, a[i]);
    cr_expect_eq(b[i], 1000 + 2 * i, "rank 1 element %d = %d", i, b[i]);
  }
}

static void destroy_pair(ncclComm_t comms[2]) {
  for (int r = 0; r < 2; r++) WEFT_TEST_EXPECT_RES(ncclCommDestroy(comms[r]), ncclSuccess);
}

/* ---------- bad arguments ---------- */

Test(api_errors, bad_collective_arguments, .timeout = 30) {
  ncclComm_t comms[2];
  init_pair(comms);
  ncclComm_t c = comms[0];
  const ncclResult_t IA = ncclInvalidArgument;
  float a[16] = {0}, b[32] = {0};
  const ncclDataType_t f32 = ncclFloat32;

  WEFT_TEST_EXPECT_RES(ncclAllReduce(a, b, 8, f32, ncclSum, NULL, NULL), IA);
  WEFT_TEST_EXPECT_RES(ncclAllReduce(NULL, b, 8, f32, ncclSum, c, NULL), IA);
  WEFT_TEST_EXPECT_RES(ncclAllReduce(a, NULL, 8, f32, ncclSum, c, NULL), IA);
  WEFT_TEST_EXPECT_RES(ncclAllGather(a, NULL, 8, f32, c, NULL), IA);
  WEFT_TEST_EXPECT_RES(ncclReduceScatter(NULL, b, 8, f32, ncclSum, c, NULL), IA);
  WEFT_TEST_EXPECT_RES(ncclAlltoAll(a, NULL, 8, f32, c, NULL), IA);
  WEFT_TEST_EXPECT_RES(ncclAllReduce(a, b, 8, (ncclDataType_t)12, ncclSum, c, NULL), IA);
  WEFT_TEST_EXPECT_RES(ncclAllReduce(a, b, 8, (ncclDataType_t)-1, ncclSum, c, NULL), IA);
  WEFT_TEST_EXPECT_RES(ncclBroadcast(a, b, 8, (ncclDataType_t)ncclNumTypes, 0, c, NULL), IA);
  WEFT_TEST_EXPECT_RES(ncclSend(a, 8, (ncclDataType_t)200, 1, c, NULL), IA);
  WEFT_TEST_EXPECT_RES(ncclAllReduce(a, b, 8, f32, (ncclRedOp_t)5, c, NULL), IA);  // no PreMulSum created
  WEFT_TEST_EXPECT_RES(ncclAllReduce(a, b, 8, f32, (ncclRedOp_t)99, c, NULL), IA);
  WEFT_TEST_EXPECT_RES(ncclAllReduce(a, b, 8, f32, (ncclRedOp_t)-1, c, NULL), IA);
  WEFT_TEST_EXPECT_RES(ncclReduce(a, b, 8, f32, (ncclRedOp_t)5, 0, c, NULL), IA);
  WEFT_TEST_EXPECT_RES(ncclReduceScatter(b, a, 8, f32, (ncclRedOp_t)99, c, NULL), IA);

  for (int bad = -1; bad <= 2; bad += 3) {  // -1 and nranks
    WEFT_TEST_EXPECT_RES(ncclBroadcast(a, b, 8, f32, bad, c, NULL), IA);
    WEFT_TEST_EXPECT_RES(ncclBcast(a, 8, f32, bad, c, NULL), IA);
    WEFT_TEST_EXPECT_RES(ncclReduce(a, b, 8, f32, ncclSum, bad, c, NULL), IA);
    WEFT_TEST_EXPECT_RES(ncclGather(a, b, 8, f32, bad, c, NULL), IA);
    WEFT_TEST_EXPECT_RES(ncclScatter(b, a, 8, f32, bad, c, NULL), IA);
    WEFT_TEST_EXPECT_RES(ncclSend(a, 8, f32, bad, c, NULL), IA);
    WEFT_TEST_EXPECT_RES(ncclRecv(b, 8, f32, bad, c, NULL), IA);
  }
  WEFT_TEST_EXPECT_RES(ncclSend(a, 8, f32, 1000000, c, NULL), IA);

  // Sizes that overflow size_t; the buffers are never touched.
  WEFT_TEST_EXPECT_RES(ncclAllReduce(a, b, SIZE_MAX / 2, ncclFloat64, ncclSum, c, NULL), IA);
  WEFT_TEST_EXPECT_RES(ncclAllGather(a, b, SIZE_MAX / 8, ncclFloat64, c, NULL), IA);
  WEFT_TEST_EXPECT_RES(ncclReduceScatter(b, a, SIZE_MAX / 16 + 1, ncclInt64, ncclSum, c, NULL), IA);
  WEFT_TEST_EXPECT_RES(ncclSend(a, SIZE_MAX / 2, ncclFloat64, 1, c, NULL), IA);
  WEFT_TEST_EXPECT_RES(ncclBroadcast(a, b, SIZE_MAX, ncclUint8, 0, c, NULL), IA);

  // Count 0 moves nothing: NULL buffers are fine and no peer is needed.
  WEFT_TEST_EXPECT_RES(ncclAllReduce(NULL, NULL, 0, f32, ncclSum, c, NULL), ncclSuccess);

  // Refused calls leave the communicator healthy.
  ncclResult_t async = ncclInternalError;
  WEFT_TEST_EXPECT_RES(ncclCommGetAsyncError(c, &async), ncclSuccess);
  cr_expect_eq(async, ncclSuccess, "async error %d after argument errors", (int)async);
  expect_pair_works(comms);
  destroy_pair(comms);
}

Test(api_errors, stale_communicator_after_destroy, .timeout = 30) {
  ncclComm_t comms[2];
  init_pair(comms);
  ncclComm_t stale = comms[0];
  cr_assert_eq(ncclCommDestroy(stale), ncclSuccess);
  float a[4] = {0};
  int v = 0;
  ncclResult_t async;
  ncclComm_t child = NULL;
  void *handle = NULL;
  // The pointer value is reused after destroy; each call must refuse it
  // without reading the freed communicator.
  WEFT_TEST_EXPECT_RES(ncclAllReduce(a, a, 4, ncclFloat32, ncclSum, stale, NULL), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclSend(a, 4, ncclFloat32, 1, stale, NULL), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclCommCount(stale, &v), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclCommUserRank(stale, &v), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclCommCuDevice(stale, &v), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclCommGetAsyncError(stale, &async), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclCommSplit(stale, 0, 0, &child, NULL), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclCommRegister(stale, a, sizeof(a), &handle), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclCommFinalize(stale), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclCommDestroy(stale), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclCommAbort(stale), ncclInvalidArgument);
  // A pointer that never was a communicator.
  WEFT_TEST_EXPECT_RES(ncclCommCount((ncclComm_t)(void *)a, &v), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclCommDestroy(comms[1]), ncclSuccess);
}

Test(api_errors, group_errors, .timeout = 30) {
  WEFT_TEST_EXPECT_RES(ncclGroupEnd(), ncclInvalidUsage);
  ncclComm_t comms[2];
  init_pair(comms);
  WEFT_TEST_EXPECT_RES(ncclGroupEnd(), ncclInvalidUsage);
  // A bad call inside a group fails the call and the whole group.
  float a[8] = {0}, b[8] = {0};
  WEFT_TEST_EXPECT_RES(ncclGroupStart(), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclAllReduce(a, a, 8, ncclFloat32, ncclSum, comms[0], NULL), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclAllReduce(b, b, 8, (ncclDataType_t)12, ncclSum, comms[1], NULL), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclAllReduce(b, b, 8, ncclFloat32, ncclSum, comms[1], NULL), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclGroupEnd(), ncclInvalidArgument);
  // Nested groups: only the outermost end launches; a stray end is still wrong.
  WEFT_TEST_EXPECT_RES(ncclGroupStart(), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclGroupStart(), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclSend(a, 8, ncclFloat32, 7, comms[0], NULL), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclGroupEnd(), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclGroupEnd(), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclGroupEnd(), ncclInvalidUsage);
  // The failed groups left nothing behind: a good group runs.
  expect_pair_works(comms);
  destroy_pair(comms);
}

Test(api_errors, init_rejects_bad_arguments_without_hanging, .timeout = 30) {
  weft_test_env_timeout(5);
  ncclUniqueId id, junk;
  cr_assert_eq(ncclGetUniqueId(&id), ncclSuccess);
  memset(&junk, 0x5a, sizeof(junk));
  ncclComm_t comm = (ncclComm_t)(void *)&comm;
  double t0 = weft_test_now();
  WEFT_TEST_EXPECT_RES(ncclCommInitRank(&comm, 2, id, 2), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclCommInitRank(&comm, 2, id, 5), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclCommInitRank(&comm, 2, id, -1), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclCommInitRank(&comm, 0, id, 0), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclCommInitRank(&comm, -4, id, 0), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclCommInitRank(NULL, 2, id, 0), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclGetUniqueId(NULL), ncclInvalidArgument);
  ncclResult_t r = ncclCommInitRank(&comm, 2, junk, 0);
  cr_expect_neq(r, ncclSuccess, "a garbage unique id was accepted");
  cr_log_info("ncclCommInitRank with a 0x5a-filled id returned %d (%s)", (int)r, ncclGetErrorString(r));
  r = ncclCommInitRank(&comm, 1, junk, 0);
  cr_expect_neq(r, ncclSuccess, "a garbage unique id was accepted for a 1-rank job");
  cr_expect_lt(weft_test_now() - t0, 5.0, "refusals must not wait for the rendezvous");
  // A 1-rank job from a good id works after all that.
  ncclComm_t one = NULL;
  ncclUniqueId id1;
  cr_assert_eq(ncclGetUniqueId(&id1), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclCommInitRank(&one, 1, id1, 0), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclCommDestroy(one), ncclSuccess);
}

Test(api_errors, error_strings, .timeout = 10) {
  const char *seen[ncclNumResults];
  for (int r = 0; r < ncclNumResults; r++) {
    seen[r] = ncclGetErrorString((ncclResult_t)r);
    cr_assert_not_null(seen[r], "no string for code %d", r);
    cr_expect_gt(strlen(seen[r]), 0, "empty string for code %d", r);
    for (int q = 0; q < r; q++) cr_expect_str_neq(seen[r], seen[q], "codes %d and %d share a string", q, r);
  }
  cr_expect_not_null(ncclGetErrorString(ncclNumResults));
  cr_expect_not_null(ncclGetErrorString((ncclResult_t)-7));
  cr_expect_not_null(ncclGetErrorString((ncclResult_t)1000));
}

// The call was refused and the last error names the argument (and value).
static void expect_named(ncclResult_t r, ncclComm_t c, const char *arg, const char *value) {
  cr_expect_eq(r, ncclInvalidArgument, "refusal about %s returned %d", arg, (int)r);
  const char *text = ncclGetLastError(c);
  cr_assert_not_null(text, "ncclGetLastError returned NULL");
  cr_expect(strstr(text, arg) != NULL, "last error does not name '%s': '%s'", arg, text);
  if (value != NULL) cr_expect(strstr(text, value) != NULL, "last error lacks the value %s: '%s'", value, text);
}

Test(api_errors, last_error_names_the_argument, .timeout = 30) {
  ncclComm_t comms[2];
  init_pair(comms);
  ncclComm_t c = comms[0];
  float a[8] = {0};
  int not_a_stream;
  expect_named(ncclAllReduce(a, a, 8, (ncclDataType_t)12, ncclSum, c, NULL), c, "datatype", "12");
  expect_named(ncclBroadcast(a, a, 8, ncclFloat32, 9, c, NULL), c, "root", "9");
  expect_named(ncclSend(a, 8, ncclFloat32, -3, c, NULL), c, "peer", "-3");
  expect_named(ncclAllReduce(NULL, a, 8, ncclFloat32, ncclSum, c, NULL), c, "sendbuff", NULL);
  expect_named(ncclAllReduce(a, NULL, 8, ncclFloat32, ncclSum, c, NULL), c, "recvbuff", NULL);
  expect_named(ncclAllReduce(a, a, 8, ncclFloat32, (ncclRedOp_t)99, c, NULL), c, "op", "99");
  expect_named(ncclAllReduce(a, a, 8, ncclFloat32, ncclSum, c, (cudaStream_t)(void *)&not_a_stream), NULL,
               "stream", NULL);
  ncclComm_t fresh = NULL;
  expect_named(ncclCommInitRank(&fresh, 0, (ncclUniqueId){{0}}, 0), NULL, "nranks", "0");
  destroy_pair(comms);
}

Test(api_errors, foreign_pointers_and_unsupported_calls, .timeout = 30) {
  ncclComm_t comms[2];
  init_pair(comms);
  ncclComm_t c = comms[0];
  float a[8] = {0};
  long not_a_stream[8] = {0};
  cudaStream_t fake = (cudaStream_t)(void *)not_a_stream;
  WEFT_TEST_EXPECT_RES(ncclAllReduce(a, a, 8, ncclFloat32, ncclSum, c, fake), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(weftStreamSynchronize(fake), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(weftStreamQuery(fake), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(weftStreamDestroy(fake), ncclInvalidArgument);

  void *heap = malloc(4096);
  cr_assert_not_null(heap);
  WEFT_TEST_EXPECT_RES(ncclMemFree(heap), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclMemFree(a), ncclInvalidArgument);
  void *mem = NULL;
  cr_assert_eq(ncclMemAlloc(&mem, 4096), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclMemFree((char *)mem + 64), ncclInvalidArgument);  // inside a block, not its start
  WEFT_TEST_EXPECT_RES(ncclMemFree(mem), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclMemFree(mem), ncclInvalidArgument);  // twice
  free(heap);

  WEFT_TEST_EXPECT_RES(ncclRedOpDestroy(ncclSum, c), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclRedOpDestroy(ncclAvg, c), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclRedOpDestroy((ncclRedOp_t)77, c), ncclInvalidArgument);
  ncclRedOp_t op;
  float two = 2.0f;
  cr_assert_eq(ncclRedOpCreatePreMulSum(&op, &two, ncclFloat32, ncclScalarHostImmediate, c), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclRedOpDestroy(op, comms[1]), ncclInvalidArgument);  // another communicator's op
  WEFT_TEST_EXPECT_RES(ncclRedOpDestroy(op, c), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclRedOpDestroy(op, c), ncclInvalidArgument);  // twice

  ncclWindow_t win = NULL;
  // Windows are collective (test_rma.c); refused arguments are refused at once, on one rank alone.
  WEFT_TEST_EXPECT_RES(ncclCommWindowRegister(c, a, sizeof(a), &win, 0x100), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclCommWindowRegister(c, a, 0, &win, NCCL_WIN_DEFAULT), ncclInvalidArgument);
  WEFT_TEST_EXPECT_RES(ncclCommWindowDeregister(c, (ncclWindow_t)not_a_stream), ncclInvalidArgument);
  int exclude[1] = {1};
  ncclComm_t shrunk = NULL;
  WEFT_TEST_EXPECT_RES(ncclCommShrink(c, exclude, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT), ncclSuccess);
  WEFT_TEST_EXPECT_RES(ncclCommDestroy(shrunk), ncclSuccess);  // a one-rank communicator of rank 0
  WEFT_TEST_EXPECT_RES(ncclCommRevoke(c, 7), ncclInvalidArgument);  // an unknown flag leaves c as it was
  expect_pair_works(comms);
  destroy_pair(comms);
}

/* ---------- ranks that disagree ---------- */

enum { MM_COUNT, MM_DTYPE, MM_OP, MM_ROOT, MM_NET_COUNT };

typedef struct {
  int res[2], async[2], destroy[2];
  double secs[2];
  char last[2][320];
} mm_out_t;

static mm_out_t *mm_out;  // shared with the ranks

static int mismatch_body(int rank, int nranks, ncclUniqueId *ids, void *arg) {
  const int *kind = arg;
  ncclComm_t comm = NULL;
  char host[32];
  snprintf(host, sizeof(host), "mismatch-host-%d", rank);
  if (*kind == MM_NET_COUNT) setenv("WEFT_HOSTID", host, 1);  // ranks on two "hosts": only slot tags can tell
  WEFT_TEST_CHECK_RES(ncclCommInitRank(&comm, nranks, ids[0], rank), ncclSuccess);
  if (comm == NULL) return weft_test_failures();
  enum { N = 200, BIG = 100000 };  // BIG: a broadcast of many network messages
  float buf[N];
  for (int i = 0; i < N; i++) buf[i] = (float)(rank + 1);
  float *big = calloc(BIG, sizeof(float));
  if (big == NULL) return 1;
  double t0 = weft_test_now();
  ncclResult_t r = ncclInternalError;
  switch (*kind) {
    case MM_COUNT: r = ncclAllReduce(buf, buf, rank == 0 ? 100 : 200, ncclFloat32, ncclSum, comm, NULL); break;
    case MM_DTYPE:
      r = ncclAllReduce(buf, buf, 100, rank == 0 ? ncclFloat32 : ncclInt32, ncclSum, comm, NULL);
      break;
    case MM_OP: r = ncclAllReduce(buf, buf, 100, ncclFloat32, rank == 0 ? ncclSum : ncclMax, comm, NULL); break;
    case MM_ROOT: r = ncclBroadcast(buf, buf, 100, ncclFloat32, rank, comm, NULL); break;
    case MM_NET_COUNT: r = ncclBroadcast(big, big, rank == 0 ? BIG : BIG / 2, ncclFloat32, 0, comm, NULL); break;
    default: break;
  }
  free(big);
  mm_out->secs[rank] = weft_test_now() - t0;
  mm_out->res[rank] = (int)r;
  snprintf(mm_out->last[rank], sizeof(mm_out->last[rank]), "%s", ncclGetLastError(comm));
  // A root that only sends may finish before its peers find the mismatch;
  // its communicator learns of the failure from them soon after.
  ncclResult_t async = ncclSuccess;
  for (int i = 0; i < 500 && async == ncclSuccess; i++) {
    WEFT_TEST_CHECK_RES(ncclCommGetAsyncError(comm, &async), ncclSuccess);
    if (async == ncclSuccess) usleep(10000);
  }
  mm_out->async[rank] = (int)async;
  mm_out->destroy[rank] = (int)ncclCommDestroy(comm);
  return weft_test_failures();
}

static void run_mismatch(int kind, const char *what) {
  weft_test_env_timeout(20);  // long enough that a fast failure cannot be the timeout
  mm_out = weft_test_shared_alloc(sizeof(*mm_out));
  cr_assert_not_null(mm_out);
  for (int r = 0; r < 2; r++) mm_out->res[r] = -1;
  WEFT_TEST_EXPECT_FORK_OK(2, 1, mismatch_body, &kind, 30);
  int usage = 0;
  for (int r = 0; r < 2; r++) {
    cr_log_info("%s: rank %d got %d (%s) after %.3f s, async error %d, destroy %d; last error: %s", what, r,
                mm_out->res[r], ncclGetErrorString((ncclResult_t)mm_out->res[r]), mm_out->secs[r],
                mm_out->async[r], mm_out->destroy[r], mm_out->last[r]);
    // A Broadcast's root only sends: on another host, or on this one with a
    // small message, its call may return before the peer has called, and
    // its communicator reports the mismatch then (ncclCommGetAsyncError).
    int sender_only = (kind == MM_NET_COUNT && r == 0) || kind == MM_ROOT;
    cr_expect(mm_out->res[r] != -1 && (mm_out->res[r] != ncclSuccess || sender_only),
              "%s: rank %d got %d, expected a failure", what, r, mm_out->res[r]);
    cr_expect_lt(mm_out->secs[r], 10.0, "%s: rank %d took %.1f s to fail", what, r, mm_out->secs[r]);
    cr_expect_neq(mm_out->async[r], ncclSuccess, "%s: rank %d's communicator reports no error", what, r);
    cr_expect_eq(mm_out->destroy[r], ncclSuccess, "%s: rank %d could not destroy the failed communicator", what, r);
    usage += mm_out->res[r] == ncclInvalidUsage || (sender_only && mm_out->async[r] == ncclInvalidUsage);
  }
  cr_expect_geq(usage, 1, "%s: no rank reported ncclInvalidUsage", what);
  weft_test_shared_free(mm_out, sizeof(*mm_out));
}

// Two ranks of one host that disagree whether shared memory may carry their
// traffic (NCCL_SHM_DISABLE on one of them only) would each wait for the
// other on a different transport: initialisation refuses, on both ranks.
static int transport_disagreement_body(int rank, int nranks, ncclUniqueId *ids, void *arg) {
  (void)arg;
  if (rank == 1) setenv("NCCL_SHM_DISABLE", "1", 1);
  ncclComm_t comm = NULL;
  double t0 = weft_test_now();
  ncclResult_t r = ncclCommInitRank(&comm, nranks, ids[0], rank);
  WEFT_TEST_CHECK(r == ncclInvalidUsage, "rank %d: ncclCommInitRank returned %d (%s), expected ncclInvalidUsage",
                  rank, (int)r, ncclGetErrorString(r));
  WEFT_TEST_CHECK(weft_test_now() - t0 < 10.0, "rank %d took %.1f s to refuse", rank, weft_test_now() - t0);
  WEFT_TEST_CHECK(strstr(ncclGetLastError(NULL), "NCCL_SHM_DISABLE") != NULL, "rank %d: last error '%s'", rank,
                  ncclGetLastError(NULL));
  if (comm != NULL) ncclCommDestroy(comm);
  return weft_test_failures();
}

Test(api_errors, ranks_disagreeing_on_shared_memory_are_refused, .timeout = 40) {
  weft_test_env_timeout(20);
  WEFT_TEST_EXPECT_FORK_OK(2, 1, transport_disagreement_body, NULL, 30);
}

Test(api_errors, mismatched_counts_fail_fast, .timeout = 40) { run_mismatch(MM_COUNT, "counts 100/200"); }
Test(api_errors, mismatched_datatypes_fail_fast, .timeout = 40) { run_mismatch(MM_DTYPE, "float32/int32"); }
Test(api_errors, mismatched_ops_fail_fast, .timeout = 40) { run_mismatch(MM_OP, "sum/max"); }
Test(api_errors, mismatched_broadcast_roots_fail_fast, .timeout = 40) { run_mismatch(MM_ROOT, "roots 0/1"); }
Test(api_errors, mismatched_counts_over_the_network_fail_fast, .timeout = 40) {
  run_mismatch(MM_NET_COUNT, "broadcast counts 100000/50000 over TCP");
}

// Both ranks call themselves the root of small Broadcasts, again and
// again: each only sends and nobody reads, so no slot tag can tell, and
// each call may return before the other rank's descriptor can be compared.
// The checks are owed, and the calls that follow settle them without
// ncclCommGetAsyncError: one of the first 40 fails with ncclInvalidUsage on
// each rank, saying what differs, and none after that succeeds.
static int owed_check_body(int rank, int nranks, ncclUniqueId *ids, void *arg) {
  (void)arg;
  ncclComm_t comm = NULL;
  WEFT_TEST_CHECK_RES(ncclCommInitRank(&comm, nranks, ids[0], rank), ncclSuccess);
  if (comm == NULL) return weft_test_failures();
  float buf[4] = {1, 2, 3, 4};
  ncclResult_t first = ncclBroadcast(buf, buf, 4, ncclFloat32, rank, comm, NULL);
  int failed_at = first == ncclSuccess ? -1 : 0, later_success = 0;
  ncclResult_t failure = first;
  char why[320] = "";
  if (failed_at == 0) snprintf(why, sizeof(why), "%s", ncclGetLastError(comm));
  for (int i = 1; i <= 40; i++) {
    ncclResult_t r = ncclBroadcast(buf, buf, 4, ncclFloat32, rank, comm, NULL);
    if (r != ncclSuccess && failed_at < 0) {
      failed_at = i, failure = r;
      snprintf(why, sizeof(why), "%s", ncclGetLastError(comm));
    } else if (r == ncclSuccess && failed_at >= 0) {
      later_success = 1;
    }
  }
  WEFT_TEST_CHECK(failed_at >= 0, "rank %d: the mismatched roots were never reported", rank);
  WEFT_TEST_CHECK(failure == ncclInvalidUsage, "rank %d: call %d failed with %d, expected ncclInvalidUsage", rank,
                  failed_at, (int)failure);
  WEFT_TEST_CHECK(!later_success, "rank %d: a call succeeded after call %d had failed", rank, failed_at);
  WEFT_TEST_CHECK(strstr(why, "differs") != NULL || strstr(why, "invalid usage") != NULL,
                  "rank %d: the failing call said '%s'", rank, why);
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  return weft_test_failures();
}

Test(api_errors, mismatched_roots_fail_the_following_calls, .timeout = 40) {
  weft_test_env_timeout(20);
  WEFT_TEST_EXPECT_FORK_OK(2, 1, owed_check_body, NULL, 30);
}

/* ---------- roles run in a fresh image of this binary ---------- */

#define ROLE_VAR "WEFT_API_TEST_ROLE"

// A rank of a job whose last rank never arrives (WEFT_TIMEOUT=2).
static int role_late_join(void) {
  int rank = atoi(getenv("WEFT_API_TEST_RANK")), nranks = atoi(getenv("WEFT_API_TEST_NRANKS"));
  ncclUniqueId id;
  if (weftUniqueIdFromString(getenv("WEFT_API_TEST_ID"), &id) != ncclSuccess) return 3;
  ncclComm_t comm = NULL;
  double t0 = weft_test_now();
  ncclResult_t r = ncclCommInitRank(&comm, nranks, id, rank);
  double secs = weft_test_now() - t0;
  fprintf(stderr, "late-join rank %d: ncclCommInitRank returned %d after %.2f s; last error: %s\n", rank, (int)r,
          secs, ncclGetLastError(NULL));
  if (r == ncclSuccess) return 1;
  return secs < 10.0 ? 0 : 2;
}

// A program that sets NCCL_DEBUG itself before its first NCCL call.
static int role_debug_env(void) {
  char pattern[600], path[600];
  snprintf(pattern, sizeof(pattern), "%s/dbg.%%p", getenv("WEFT_API_TEST_DIR"));
  snprintf(path, sizeof(path), "%s/dbg.%d", getenv("WEFT_API_TEST_DIR"), (int)getpid());
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", pattern, 1);
  if (ncclGetVersion(NULL) != ncclInvalidArgument) return 2;  // WARNs about the NULL
  FILE *f = fopen(path, "r");
  if (f == NULL) return 1;
  char text[4096] = "";
  size_t n = fread(text, 1, sizeof(text) - 1, f);
  text[n] = '\0';
  fclose(f);
  return strstr(text, "version") != NULL ? 0 : 1;
}

__attribute__((constructor)) static void role_dispatch(void) {
  const char *role = getenv(ROLE_VAR);
  if (role == NULL) return;
  int rc = 100;
  if (strcmp(role, "late-join") == 0) rc = role_late_join();
  else if (strcmp(role, "debug-env") == 0) rc = role_debug_env();
  fflush(NULL);
  _exit(rc);
}

typedef struct {
  const char *role;
  const char *dir;
  int nids;    // unique ids of the job: 0 or 1
  int nranks;  // ranks of the job, when more than are forked
} exec_job_t;

// Rank body: run this binary again in the job's role.
static int exec_role(int rank, int nranks, ncclUniqueId *ids, void *arg) {
  exec_job_t *job = arg;
  char rank_s[16], nranks_s[16], log[600], id[WEFT_UNIQUE_ID_STRLEN] = "";
  if (job->nids > 0) WEFT_TEST_CHECK_RES(weftUniqueIdToString(&ids[0], id, sizeof(id)), ncclSuccess);
  snprintf(rank_s, sizeof(rank_s), "%d", rank);
  snprintf(nranks_s, sizeof(nranks_s), "%d", job->nranks > 0 ? job->nranks : nranks);
  snprintf(log, sizeof(log), "%s/log.%%p", job->dir);
  setenv(ROLE_VAR, job->role, 1);
  setenv("WEFT_API_TEST_RANK", rank_s, 1);
  setenv("WEFT_API_TEST_NRANKS", nranks_s, 1);
  setenv("WEFT_API_TEST_ID", id, 1);
  setenv("WEFT_API_TEST_DIR", job->dir, 1);
  if (strcmp(job->role, "late-join") == 0) {
    setenv("NCCL_DEBUG", "WARN", 1);
    setenv("NCCL_DEBUG_FILE", log, 1);
  } else {
    unsetenv("NCCL_DEBUG");
    unsetenv("NCCL_DEBUG_FILE");
  }
  execl("/proc/self/exe", "test_api_errors", (char *)NULL);
  WEFT_TEST_CHECK(0, "exec /proc/self/exe: %s", strerror(errno));
  return weft_test_failures();
}

static void make_dir(char *dir, size_t len) {
  snprintf(dir, len, "/tmp/weft_api_errors.XXXXXX");
  cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
}

// Concatenates every file in dir into text (truncated to len); removes them.
static void slurp_and_remove(const char *dir, char *text, size_t len) {
  size_t used = 0;
  text[0] = '\0';
  DIR *d = opendir(dir);
  cr_assert_not_null(d);
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    char path[800];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "r");
    if (f != NULL) {
      used += fread(text + used, 1, len - 1 - used, f);
      text[used] = '\0';
      fclose(f);
    }
    unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

Test(api_errors, timeout_names_the_missing_rank, .timeout = 40) {
  weft_test_env_timeout(2);
  exec_job_t job = {.role = "late-join", .nids = 1, .nranks = 3};
  char dir[64];
  make_dir(dir, sizeof(dir));
  job.dir = dir;
  int status[2];
  double t0 = weft_test_now();
  // Ranks 0 and 1 of 3; rank 2 never comes.
  int bad = weft_test_fork_ranks_ids(2, job.nids, exec_role, &job, 25, status);
  double secs = weft_test_now() - t0;
  static char text[1 << 16];
  slurp_and_remove(dir, text, sizeof(text));
  cr_expect_geq(bad, 0, "could not start the ranks");
  for (int r = 0; r < 2; r++) {
    cr_expect_neq(status[r], WEFT_TEST_RANK_TIMED_OUT, "rank %d hung", r);
    cr_expect_neq(status[r], 1, "rank %d initialised without rank 2", r);
    cr_expect_eq(status[r], 0, "rank %d: status %d (2 = failed too slowly)", r, status[r]);
  }
  cr_expect_lt(secs, 10.0, "the ranks took %.1f s to give up with WEFT_TIMEOUT=2", secs);
  cr_expect(strstr(text, "rank 2") != NULL || strstr(text, "arrived: 2") != NULL,
            "the logs do not name rank 2:\n%s", text);
}

Test(api_errors, nccl_debug_set_before_first_call_is_honoured, .timeout = 20) {
  exec_job_t job = {.role = "debug-env"};
  char dir[64];
  make_dir(dir, sizeof(dir));
  job.dir = dir;
  int status[1];
  cr_expect_geq(weft_test_fork_ranks_ids(1, job.nids, exec_role, &job, 10, status), 0, "could not start the program");
  static char text[1 << 14];
  slurp_and_remove(dir, text, sizeof(text));
  cr_expect_eq(status[0], 0,
               "setenv(NCCL_DEBUG=WARN, NCCL_DEBUG_FILE) before the first call wrote no log (status %d; 2 = the "
               "call did not fail)",
               status[0]);
}

/* ---------- ranks that join wrongly ---------- */

enum { JOIN_WRONG_COUNT, JOIN_DUPLICATE_RANK };

typedef struct {
  int res[3];
  double secs[3];
  char why[3][400];
} join_out_t;

static join_out_t *join_out;

// Three processes for a 2-rank job: process 2 claims nranks=3, or rank 0
// again. Rank 1 comes late, so the intruder meets the root while it waits.
static int join_body(int proc, int nranks, ncclUniqueId id, void *arg) {
  (void)nranks;
  int how = *(const int *)arg, n = 2, rank = proc;
  if (proc == 2) {
    if (how == JOIN_WRONG_COUNT) n = 3;
    else rank = 0;
  }
  if (proc == 1) weft_test_sleep_ms(300);
  ncclComm_t comm = NULL;
  double t0 = weft_test_now();
  ncclResult_t r = ncclCommInitRank(&comm, n, id, rank);
  join_out->secs[proc] = weft_test_now() - t0;
  join_out->res[proc] = (int)r;
  snprintf(join_out->why[proc], sizeof(join_out->why[proc]), "%s", ncclGetLastError(comm));
  if (comm != NULL) ncclCommDestroy(comm);
  return 0;
}

static void run_join(int how, const char *needle) {
  weft_test_env_timeout(3);
  join_out = weft_test_shared_alloc(sizeof(*join_out));
  cr_assert_not_null(join_out);
  WEFT_TEST_EXPECT_FORK_OK(3, 1, weft_test_one_id_main, (&(weft_test_one_id_t){join_body, &how}), 30);
  int failed = 0;
  for (int p = 0; p < 3; p++) {
    cr_log_info("process %d: %s after %.2f s: %s", p, ncclGetErrorString((ncclResult_t)join_out->res[p]),
                join_out->secs[p], join_out->why[p]);
    cr_expect_lt(join_out->secs[p], 8.0, "process %d took %.1f s", p, join_out->secs[p]);
    if (join_out->res[p] == ncclSuccess) continue;
    failed++;
    cr_expect(strstr(join_out->why[p], needle) != NULL || strstr(join_out->why[p], "never arrived") != NULL,
              "process %d's error does not say why: %s", p, join_out->why[p]);
  }
  cr_expect_geq(failed, 1, "every process initialised although the job was inconsistent");
  weft_test_shared_free(join_out, sizeof(*join_out));
}

Test(api_errors, a_rank_with_the_wrong_count_is_refused_clearly, .timeout = 40) {
  run_join(JOIN_WRONG_COUNT, "nranks=");
}
Test(api_errors, a_duplicate_rank_is_refused_clearly, .timeout = 40) { run_join(JOIN_DUPLICATE_RANK, "already taken"); }
