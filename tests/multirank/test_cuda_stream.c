/*
 * test_cuda_stream.c — device buffers on CUDA streams (src/cuda/cuda_stream.c),
 * through the public API, with ranks as forked processes.
 *
 * The driver is tests/fakes/cuda (named by WEFT_CUDA_DRIVER_LIB): its device
 * memory is a PROT_NONE view (a host memcpy on it would crash) and its
 * streams are in-order queues run by threads, with stream memory operations,
 * host functions and capture, as cuda.h describes them. With
 * WEFT_TEST_REAL_CUDA=1 the same test runs against libcuda.so.1 and
 * libweft-cuda.so's kernels, on device 0; what needs the stand-in (a failure
 * it injects) or two devices is then skipped, saying so.
 *
 * The oracle for every collective is weft's host path: the same call on
 * host copies of the same bytes (NULL stream, completed on return) must give
 * bitwise the bytes the device call leaves in device memory once the stream
 * is synchronised — outputs, and the sentinel bytes around them that no
 * rank may write. Also: calls return before the stream reaches them and see
 * what the stream wrote before them; groups; a PreMulSum scalar in device
 * memory read in stream order; capture refused; bad placements refused.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <unistd.h>

#include "cuda_driver.h"
#include "cuda_sweep.h"
#include "harness.h"

static int sweep_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  sweep_t w;
  if (sweep_open(&w, rank, nranks, id) != 0) return weft_test_failures();

  const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  const size_t counts[] = {1, 1027, 70000};
  for (int t = 0; t < ncclNumTypes; t++)
    for (int o = 0; o < 5; o++)
      for (int ci = 0; ci < 3; ci++)
        for (int ip = 0; ip < 2; ip++)
          if (run_case(&w, AR, (ncclDataType_t)t, ops[o], counts[ci], ip, 0)) goto out;
  const ncclDataType_t some[] = {ncclInt8, ncclFloat16, ncclFloat32, ncclUint64};
  for (int c = BC; c < NCOLL; c++)
    for (int t = 0; t < 4; t++)
      for (int o = 0; o < 2; o++)
        for (int ci = 0; ci < 2; ci++)
          for (int ip = 0; ip < 2; ip++) {
            if (ip && (c == A2A || c == GA || c == SC || c == BC)) continue;
            if (o == 1 && c != RD && c != RS) continue;
            int root = (ci + t) % nranks;
            if (run_case(&w, (coll_t)c, some[t], o ? ncclMax : ncclSum, counts[ci], ip, root)) goto out;
          }
out:
  if (rank == 0) fprintf(stderr, "cuda_stream sweep: %d ranks, %d calls compared\n", nranks, w.cases);
  sweep_close(&w);
  return weft_test_failures();
}

static weft_test_one_id_t sweep_job = {sweep_body, NULL};

Test(cuda_stream, every_collective_matches_the_host_path_2_ranks, .timeout = 240) {
  weft_test_env_timeout(60);
  driver_setup();
  WEFT_TEST_EXPECT_FORK_OK(2, 1, weft_test_one_id_main, &sweep_job, 220);
}

Test(cuda_stream, every_collective_matches_the_host_path_3_ranks, .timeout = 240) {
  weft_test_env_timeout(60);
  driver_setup();
  WEFT_TEST_EXPECT_FORK_OK(3, 1, weft_test_one_id_main, &sweep_job, 220);
}

/* ---------- stream semantics ---------- */

// A host function that holds the stream until the test lets it go.
typedef struct {
  pthread_mutex_t m;
  pthread_cond_t cv;
  int open;
} latch_t;

static void latch_wait(void *p) {
  latch_t *l = p;
  pthread_mutex_lock(&l->m);
  while (!l->open) pthread_cond_wait(&l->cv, &l->m);
  pthread_mutex_unlock(&l->m);
}

static void latch_open(latch_t *l) {
  pthread_mutex_lock(&l->m);
  l->open = 1;
  pthread_cond_broadcast(&l->cv);
  pthread_mutex_unlock(&l->m);
}

enum { M = 4096, CALLS = 40 };

static int order_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  tcu_stream s;
  WEFT_TEST_CHECK(rank_setup(rank, &s) == 0, "driver setup failed");
  if (weft_test_failures()) return weft_test_failures();
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return weft_test_failures();
  int32_t *buf = tcu_alloc(&cu, M * sizeof(int32_t)), *host = NULL;
  WEFT_TEST_CHECK(cu.host_alloc((void **)&host, M * sizeof(int32_t), 0) == 0 && buf != NULL, "allocation failed");
  if (weft_test_failures()) return weft_test_failures();
  for (int i = 0; i < M; i++) host[i] = -1;
  WEFT_TEST_CHECK(cu.htod(tcu_p(buf), host, M * sizeof(int32_t)) == 0, "htod failed");

  // Hold the stream, then queue: the input written by the stream, the
  // all-reduce, and the result read back by the stream.
  latch_t latch = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
  WEFT_TEST_CHECK(cu.launch_host_fn(s, latch_wait, &latch) == 0, "cuLaunchHostFunc failed");
  for (int i = 0; i < M; i++) host[i] = rank + i;
  WEFT_TEST_CHECK(cu.htod_async(tcu_p(buf), host, M * sizeof(int32_t), s) == 0, "htod async failed");
  double t0 = weft_test_now();
  WEFT_TEST_CHECK_RES(ncclAllReduce(buf, buf, M, ncclInt32, ncclSum, comm, (cudaStream_t)s), ncclSuccess);
  double secs = weft_test_now() - t0;
  WEFT_TEST_CHECK(secs < 1.0, "ncclAllReduce took %.3f s with its stream held", secs);
  int32_t *out = malloc(M * sizeof(int32_t));
  WEFT_TEST_CHECK(cu.dtoh_async(out, tcu_p(buf), M * sizeof(int32_t), s) == 0, "dtoh async failed");
  weft_test_sleep_ms(50);
  WEFT_TEST_CHECK(cu.stream_query(s) == 600 /* CUDA_ERROR_NOT_READY */, "the held stream is not busy");
  latch_open(&latch);
  WEFT_TEST_CHECK(cu.stream_sync(s) == 0, "cuStreamSynchronize failed");
  for (int i = 0; i < M; i++) {
    int32_t want = nranks * i + nranks * (nranks - 1) / 2;
    WEFT_TEST_CHECK(out[i] == want, "out[%d] = %d, expected %d", i, out[i], want);
    if (out[i] != want) break;
  }

  // Many calls in flight, one synchronisation: each sees the one before.
  for (int i = 0; i < M; i++) host[i] = 1;
  WEFT_TEST_CHECK(cu.htod(tcu_p(buf), host, M * sizeof(int32_t)) == 0, "htod failed");
  for (int k = 0; k < CALLS; k++) {
    WEFT_TEST_CHECK_RES(ncclAllReduce(buf, buf, k % 2 ? M : 7, ncclInt32, ncclMax, comm, (cudaStream_t)s),
                        ncclSuccess);
    WEFT_TEST_CHECK_RES(ncclAllReduce(buf, buf, M, ncclInt32, ncclSum, comm, (cudaStream_t)s), ncclSuccess);
  }
  WEFT_TEST_CHECK(cu.stream_sync(s) == 0, "cuStreamSynchronize failed");
  WEFT_TEST_CHECK(cu.dtoh(out, tcu_p(buf), M * sizeof(int32_t)) == 0, "dtoh failed");
  uint32_t want = 1;  // int32 sums wrap: compare modulo 2^32
  for (int k = 0; k < CALLS; k++) want *= (uint32_t)nranks;
  WEFT_TEST_CHECK((uint32_t)out[0] == want && (uint32_t)out[M - 1] == want, "after %d sums: %d and %d, expected %u",
                  CALLS, out[0], out[M - 1], want);
  free(out);
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  cu.free(tcu_p(buf));
  cu.host_free(host);
  cu.stream_destroy(s);
  return weft_test_failures();
}

static weft_test_one_id_t order_job = {order_body, NULL};

Test(cuda_stream, calls_are_ordered_on_the_stream_and_return_at_once, .timeout = 60) {
  weft_test_env_timeout(30);
  driver_setup();
  WEFT_TEST_EXPECT_FORK_OK(3, 1, weft_test_one_id_main, &order_job, 50);
}

/* ---------- groups, device scalars, capture, refusals ---------- */

static int misc_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  tcu_stream s, s2;
  WEFT_TEST_CHECK(rank_setup(rank, &s) == 0 && cu.stream_create(&s2, 1) == 0, "driver setup failed");
  if (weft_test_failures()) return weft_test_failures();
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return weft_test_failures();
  float *a = tcu_alloc(&cu, M * sizeof(float)), *b = tcu_alloc(&cu, M * sizeof(float));
  float *c = tcu_alloc(&cu, M * sizeof(float));
  float *scalar = tcu_alloc(&cu, sizeof(float)), *h = malloc(M * sizeof(float)), *h2 = malloc(M * sizeof(float));
  WEFT_TEST_CHECK(a && b && c && scalar && h && h2, "allocation failed");
  if (weft_test_failures()) return weft_test_failures();
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;

  // A group: a ring of send/recv on one stream and an all-reduce on another.
  for (int i = 0; i < M; i++) h[i] = (float)(rank * 1000 + i);
  WEFT_TEST_CHECK(cu.htod(tcu_p(a), h, M * sizeof(float)) == 0, "htod failed");
  WEFT_TEST_CHECK_RES(ncclGroupStart(), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclSend(a, M, ncclFloat32, next, comm, (cudaStream_t)s), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclRecv(b, M, ncclFloat32, prev, comm, (cudaStream_t)s), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclGroupEnd(), ncclSuccess);
  // (Reading `a` here while the send may still read it; writing it would race.)
  WEFT_TEST_CHECK_RES(ncclAllReduce(a, c, M, ncclFloat32, ncclSum, comm, (cudaStream_t)s2), ncclSuccess);
  WEFT_TEST_CHECK(cu.stream_sync(s) == 0 && cu.stream_sync(s2) == 0, "sync failed");
  WEFT_TEST_CHECK(cu.dtoh(h2, tcu_p(b), M * sizeof(float)) == 0, "dtoh failed");
  for (int i = 0; i < M; i++)
    if (h2[i] != (float)(prev * 1000 + i)) {
      WEFT_TEST_CHECK(0, "received[%d] = %g, expected %g", i, h2[i], (float)(prev * 1000 + i));
      break;
    }

  // Groups larger than the staging reserved at init, back to back: staging
  // is pinned at call time, which (as on a GPU, and in the stand-in driver)
  // waits for the context's streams; it must never wait for a stream wait
  // of the same group, or for one the worker has not been handed.
  enum { BIG = 3 << 20 };  // floats: 12 MiB per buffer, more than a reserved block
  float *big_a = tcu_alloc(&cu, BIG * sizeof(float)), *big_b = tcu_alloc(&cu, BIG * sizeof(float));
  WEFT_TEST_CHECK(big_a != NULL && big_b != NULL, "allocation failed");
  for (int rep = 0; rep < 2 && big_a != NULL && big_b != NULL; rep++) {
    WEFT_TEST_CHECK_RES(ncclGroupStart(), ncclSuccess);
    WEFT_TEST_CHECK_RES(ncclSend(big_a, BIG, ncclFloat32, next, comm, (cudaStream_t)s), ncclSuccess);
    WEFT_TEST_CHECK_RES(ncclRecv(big_b, BIG, ncclFloat32, prev, comm, (cudaStream_t)s), ncclSuccess);
    WEFT_TEST_CHECK_RES(ncclAllReduce(big_a, big_a, BIG, ncclFloat32, ncclSum, comm, (cudaStream_t)s2), ncclSuccess);
    WEFT_TEST_CHECK_RES(ncclGroupEnd(), ncclSuccess);
  }
  WEFT_TEST_CHECK(cu.stream_sync(s) == 0 && cu.stream_sync(s2) == 0, "sync failed");
  cu.free(tcu_p(big_a));
  cu.free(tcu_p(big_b));

  // PreMulSum with the scalar in device memory, changed on the stream between calls.
  ncclRedOp_t pm;
  WEFT_TEST_CHECK_RES(ncclRedOpCreatePreMulSum(&pm, scalar, ncclFloat32, ncclScalarDevice, comm), ncclSuccess);
  for (int i = 0; i < M; i++) h[i] = 1.0f;
  float two = 2.0f, three = 3.0f;
  WEFT_TEST_CHECK(cu.htod(tcu_p(a), h, M * sizeof(float)) == 0, "htod failed");
  WEFT_TEST_CHECK(cu.htod_async(tcu_p(scalar), &two, sizeof(float), s) == 0, "scalar htod failed");
  WEFT_TEST_CHECK_RES(ncclAllReduce(a, b, M, ncclFloat32, pm, comm, (cudaStream_t)s), ncclSuccess);
  WEFT_TEST_CHECK(cu.htod_async(tcu_p(scalar), &three, sizeof(float), s) == 0, "scalar htod failed");
  WEFT_TEST_CHECK_RES(ncclAllReduce(b, b, M, ncclFloat32, pm, comm, (cudaStream_t)s), ncclSuccess);
  WEFT_TEST_CHECK(cu.stream_sync(s) == 0, "sync failed");
  WEFT_TEST_CHECK(cu.dtoh(h2, tcu_p(b), M * sizeof(float)) == 0, "dtoh failed");
  float want = 3.0f * nranks * (2.0f * nranks);
  WEFT_TEST_CHECK(h2[0] == want && h2[M - 1] == want, "PreMulSum gave %g, expected %g", h2[0], want);
  // The same op on host buffers cannot read its device scalar.
  WEFT_TEST_CHECK_RES(ncclAllReduce(h, h, M, ncclFloat32, pm, comm, NULL), ncclInvalidUsage);
  WEFT_TEST_CHECK_RES(ncclRedOpDestroy(pm, comm), ncclSuccess);

  // Capture into a graph is refused, and the stream is left as it was.
  WEFT_TEST_CHECK(cu.begin_capture(s, 0) == 0, "begin capture failed");
  WEFT_TEST_CHECK_RES(ncclAllReduce(a, a, M, ncclFloat32, ncclSum, comm, (cudaStream_t)s), ncclInvalidUsage);
  WEFT_TEST_CHECK(strstr(ncclGetLastError(comm), "captured") != NULL, "last error: %s", ncclGetLastError(comm));
  void *graph = NULL;
  WEFT_TEST_CHECK(cu.end_capture(s, &graph) == 0, "end capture failed");
  if (graph != NULL) cu.graph_destroy(graph);

  // Refusals: mixed kinds; a stream that is not one; the same calls inside a group.
  WEFT_TEST_CHECK_RES(ncclAllReduce(h, a, M, ncclFloat32, ncclSum, comm, (cudaStream_t)s), ncclInvalidUsage);
  WEFT_TEST_CHECK(strstr(ncclGetLastError(comm), "memory of one device") != NULL, "last error: %s",
                  ncclGetLastError(comm));
  int junk[64];
  WEFT_TEST_CHECK_RES(ncclAllReduce(a, a, M, ncclFloat32, ncclSum, comm, (cudaStream_t)junk), ncclInvalidArgument);
  WEFT_TEST_CHECK_RES(ncclGroupStart(), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclAllReduce(h, a, M, ncclFloat32, ncclSum, comm, (cudaStream_t)s), ncclInvalidUsage);
  WEFT_TEST_CHECK(ncclGroupEnd() != ncclSuccess, "a group with a refused call succeeded");

  // Still usable afterwards, on the legacy NULL stream of the current context.
  for (int i = 0; i < M; i++) h[i] = 1.0f;
  WEFT_TEST_CHECK(cu.htod(tcu_p(a), h, M * sizeof(float)) == 0, "htod failed");
  WEFT_TEST_CHECK_RES(ncclAllReduce(a, a, M, ncclFloat32, ncclSum, comm, NULL), ncclSuccess);
  WEFT_TEST_CHECK(cu.stream_sync(NULL) == 0, "sync failed");
  WEFT_TEST_CHECK(cu.dtoh(h2, tcu_p(a), M * sizeof(float)) == 0, "dtoh failed");
  WEFT_TEST_CHECK(h2[7] == (float)nranks, "NULL stream all-reduce gave %g", h2[7]);

  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  cu.free(tcu_p(a));
  cu.free(tcu_p(b));
  cu.free(tcu_p(c));
  cu.free(tcu_p(scalar));
  free(h);
  free(h2);
  cu.stream_destroy(s);
  cu.stream_destroy(s2);
  return weft_test_failures();
}

static weft_test_one_id_t misc_job = {misc_body, NULL};

Test(cuda_stream, groups_device_scalars_capture_and_refusals, .timeout = 60) {
  weft_test_env_timeout(30);
  driver_setup();
  WEFT_TEST_EXPECT_FORK_OK(2, 1, weft_test_one_id_main, &misc_job, 50);
}

/* ---------- several devices in one process ---------- */

// ncclCommInitAll over both fake devices; one thread drives both
// communicators in one group, each on a stream of its own device.
static int multi_body(int rank, int nranks, ncclUniqueId *ids, void *arg) {
  (void)rank, (void)nranks, (void)ids, (void)arg;
  if (tcu_open(&cu) != 0) return 1;
  ncclComm_t comms[2];
  int devs[2] = {0, 1};
  WEFT_TEST_CHECK_RES(ncclCommInitAll(comms, 2, devs), ncclSuccess);
  tcu_stream s[2];
  int32_t *buf[2];
  int32_t host[M];
  for (int d = 0; d < 2; d++) {
    WEFT_TEST_CHECK(tcu_use_device(&cu, d) == 0 && cu.stream_create(&s[d], 1) == 0, "device %d setup", d);
    buf[d] = tcu_alloc(&cu, sizeof(host));
    for (int i = 0; i < M; i++) host[i] = d + 1;
    WEFT_TEST_CHECK(buf[d] != NULL && cu.htod(tcu_p(buf[d]), host, sizeof(host)) == 0, "device %d buffer", d);
  }
  if (weft_test_failures()) return weft_test_failures();
  WEFT_TEST_CHECK_RES(ncclGroupStart(), ncclSuccess);
  for (int d = 0; d < 2; d++)
    WEFT_TEST_CHECK_RES(ncclAllReduce(buf[d], buf[d], M, ncclInt32, ncclSum, comms[d], (cudaStream_t)s[d]),
                        ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclGroupEnd(), ncclSuccess);
  for (int d = 0; d < 2; d++) {
    WEFT_TEST_CHECK(tcu_use_device(&cu, d) == 0 && cu.stream_sync(s[d]) == 0, "sync %d", d);
    WEFT_TEST_CHECK(cu.dtoh(host, tcu_p(buf[d]), sizeof(host)) == 0, "dtoh %d", d);
    WEFT_TEST_CHECK(host[0] == 3 && host[M - 1] == 3, "device %d: %d, expected 3", d, host[0]);
    cu.free(tcu_p(buf[d]));
    cu.stream_destroy(s[d]);
  }
  for (int d = 0; d < 2; d++) WEFT_TEST_CHECK_RES(ncclCommDestroy(comms[d]), ncclSuccess);
  return weft_test_failures();
}

Test(cuda_stream, one_thread_drives_two_devices_in_a_group, .timeout = 60) {
  weft_test_env_timeout(30);
  driver_setup();
  need_two_devices();
  WEFT_TEST_EXPECT_FORK_OK(1, 0, multi_body, NULL, 50);
}

// A device that cannot be made current fails ncclCommInitAll at once (the
// other ranks still meet, and are destroyed), not after WEFT_TIMEOUT.
static int initall_fail_body(int rank, int nranks, ncclUniqueId *ids, void *arg) {
  (void)rank, (void)nranks, (void)ids, (void)arg;
  if (tcu_open(&cu) != 0) return 1;
  ncclComm_t comms[2] = {NULL, NULL};
  int devs[2] = {0, 1};
  double t0 = weft_test_now();
  WEFT_TEST_CHECK_RES(ncclCommInitAll(comms, 2, devs), ncclUnhandledCudaError);
  WEFT_TEST_CHECK(weft_test_now() - t0 < 10.0, "ncclCommInitAll took %.1f s to fail", weft_test_now() - t0);
  WEFT_TEST_CHECK(comms[0] == NULL && comms[1] == NULL, "a communicator was left behind");
  return weft_test_failures();
}

Test(cuda_stream, init_all_fails_fast_when_a_device_cannot_be_used, .timeout = 60) {
  if (tcu_real()) cr_skip_test("injects a driver failure, which only the stand-in driver can do");
  weft_test_env_timeout(30);
  driver_setup();
  setenv("FAKE_CUDA_FAIL", "cuDevicePrimaryCtxRetain", 1);
  WEFT_TEST_EXPECT_FORK_OK(1, 0, initall_fail_body, NULL, 50);
}

/* ---------- ranks that are threads of one process, on one device ---------- */

// Two ranks share one context and one device, each with its own stream, as
// nccl-tests' thread mode or a framework with a thread per rank does. One
// rank's stream waits for the other's call; nothing either rank does in a
// call may wait for the context's streams (pinning memory would): the
// staging is reserved when the communicators are made.
typedef struct {
  int rank;
  ncclUniqueId id;
  int failures;
} thread_rank_t;

static void *thread_rank(void *arg) {
  thread_rank_t *t = arg;
  int fails = 0;
#define TCHECK(cond) (fails += !(cond))
  TCHECK(tcu_use_device(&cu, 0) == 0);
  ncclComm_t comm = NULL;
  TCHECK(ncclCommInitRank(&comm, 2, t->id, t->rank) == ncclSuccess);
  tcu_stream s = NULL;
  TCHECK(cu.stream_create(&s, 1) == 0);
  int32_t *buf = tcu_alloc(&cu, M * sizeof(int32_t)), *peer = tcu_alloc(&cu, M * sizeof(int32_t));
  int32_t *host = malloc(M * sizeof(int32_t));
  TCHECK(comm != NULL && s != NULL && buf != NULL && peer != NULL && host != NULL);
  if (fails == 0) {
    for (int i = 0; i < M; i++) host[i] = t->rank + 1;
    TCHECK(cu.htod(tcu_p(buf), host, M * sizeof(int32_t)) == 0);
    for (int k = 0; k < 20; k++) {  // calls in flight on both streams; each depends on the other rank
      TCHECK(ncclAllReduce(buf, buf, M, ncclInt32, ncclMax, comm, (cudaStream_t)s) == ncclSuccess);
      TCHECK(ncclGroupStart() == ncclSuccess);
      TCHECK(ncclSend(buf, M, ncclInt32, 1 - t->rank, comm, (cudaStream_t)s) == ncclSuccess);
      TCHECK(ncclRecv(peer, M, ncclInt32, 1 - t->rank, comm, (cudaStream_t)s) == ncclSuccess);
      TCHECK(ncclGroupEnd() == ncclSuccess);
    }
    TCHECK(cu.stream_sync(s) == 0);
    TCHECK(cu.dtoh(host, tcu_p(peer), M * sizeof(int32_t)) == 0);
    TCHECK(host[0] == 2 && host[M - 1] == 2);
  }
  if (comm != NULL) TCHECK(ncclCommDestroy(comm) == ncclSuccess);
  cu.free(tcu_p(buf));
  cu.free(tcu_p(peer));
  if (s != NULL) cu.stream_destroy(s);
  free(host);
#undef TCHECK
  t->failures = fails;
  return NULL;
}

static int threads_body(int rank, int nranks, ncclUniqueId *ids, void *arg) {
  (void)rank, (void)nranks, (void)arg;
  if (tcu_open(&cu) != 0) return 1;
  thread_rank_t t[2] = {{0, ids[0], 0}, {1, ids[0], 0}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++) WEFT_TEST_CHECK(pthread_create(&th[i], NULL, thread_rank, &t[i]) == 0, "pthread");
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 2; i++) WEFT_TEST_CHECK(t[i].failures == 0, "thread rank %d: %d failed checks", i, t[i].failures);
  return weft_test_failures();
}

Test(cuda_stream, two_ranks_as_threads_share_a_device, .timeout = 60) {
  weft_test_env_timeout(20);
  driver_setup();
  WEFT_TEST_EXPECT_FORK_OK(1, 1, threads_body, NULL, 50);
}

/* ---------- the IPC path (WEFT_CUDA_IPC=1) ---------- */

// Collectives on the GPU among the ranks of a host (src/cuda_ipc*.c),
// with a stand-in libweft-cuda.so whose "kernels" run weft's host
// reductions on the stand-in driver's streams. The slots hold 4 KiB, so
// most calls take many rounds (with blocks, slices of 2 or 1.25 KiB), and
// round counts end on partial slices; with 3 ranks, all-reduces of 4 KiB
// or more fold in two phases. Bitwise against the host path wherever
// the result does not depend on the order of the operands: every type and
// op but float avg for two ranks (a op b and b op a are the same bits for
// finite floats), integers and float max/min for three.
static int ipc_order_matters(ncclDataType_t t, ncclRedOp_t op, int nranks) {
  // The IPC path rounds every scaled operand (avg), and folds in rank
  // order where the host path follows its algorithm's order.
  return is_float(t) && (op == ncclAvg || (nranks > 2 && op != ncclMax && op != ncclMin));
}

static int fake_counter(const char *lib_env, const char *name) {
  void *l = dlopen(getenv(lib_env), RTLD_NOW | RTLD_NOLOAD);
  int (*f)(void) = l != NULL ? (int (*)(void))dlsym(l, name) : NULL;
  return f != NULL ? f() : -1;
}

// Lines of process line_pid saying "CUDA IPC path: on" in the log of
// process file_pid (NCCL_DEBUG_FILE with %p: a rank forked after its parent
// opened the log writes to the parent's file). Lines start "host:pid:tid".
static int ipc_on_lines(int file_pid, int line_pid) {
  const char *pattern = getenv("NCCL_DEBUG_FILE"), *pp = pattern != NULL ? strstr(pattern, "%p") : NULL;
  if (pp == NULL) return 0;
  char path[512], tag[32], line[512];
  snprintf(path, sizeof(path), "%.*s%d%s", (int)(pp - pattern), pattern, file_pid, pp + 2);
  snprintf(tag, sizeof(tag), ":%d:", line_pid);
  FILE *f = fopen(path, "r");
  int n = 0;
  while (f != NULL && fgets(line, sizeof(line), f) != NULL)
    n += strstr(line, tag) != NULL && strstr(line, "CUDA IPC path: on") != NULL;
  if (f != NULL) fclose(f);
  return n;
}

#define EVIDENCE (tcu_real() ? "communicators with the path on" : "waits on peers")

// How far this process took the IPC path: with the stand-in driver, its
// streams' waits on peers' counters in device memory (the staging path
// waits only on pinned host memory); with real CUDA, the communicators that
// set the path up, from the log (ipc_setup turns it on).
static int ipc_evidence(void) {
  if (!tcu_real()) return fake_counter("WEFT_CUDA_DRIVER_LIB", "fake_cuda_device_waits");
  return ipc_on_lines(getpid(), getpid()) + ipc_on_lines(getppid(), getpid());
}

static int ipc_sweep(sweep_t *w) {
  const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  const size_t counts[] = {1, 1027, 9000};
  const coll_t with_op[] = {AR, RD, RS};
  for (int t = 0; t < ncclNumTypes; t++)
    for (int o = 0; o < 5; o++) {
      if (ipc_order_matters((ncclDataType_t)t, ops[o], w->nranks)) continue;
      for (int c = 0; c < 3; c++)
        for (int ci = 0; ci < 3; ci++)
          for (int ip = 0; ip < 2; ip++)
            if (run_case(w, with_op[c], (ncclDataType_t)t, ops[o], counts[ci], ip, (t + ci) % w->nranks))
              return 1;
    }
  const ncclDataType_t some[] = {ncclInt8, ncclFloat16, ncclFloat32, ncclUint64};
  const coll_t moves[] = {BC, AG, GA, A2A, SC};
  for (int c = 0; c < 5; c++)
    for (int t = 0; t < 4; t++)
      for (int ci = 0; ci < 3; ci++)
        for (int ip = 0; ip < 2; ip++) {
          if (ip && moves[c] != AG && moves[c] != BC) continue;
          if (run_case(w, moves[c], some[t], ncclSum, counts[ci], ip, (t + ci) % w->nranks)) return 1;
        }
  return 0;
}

// Calls in flight, each on the last one's result: a rank must not refill a
// slot before every peer has read it (the done counters). Some calls are in
// a group with a send and a receive on the same stream, which take the
// staging path: every rank queues the group's IPC-path work first.
static void ipc_in_flight(sweep_t *w) {
  int32_t *h = (int32_t *)w->h[0], *dv = (int32_t *)w->d[0];
  int32_t *out = (int32_t *)w->d[1], *in = out + M;  // the groups' send and receive buffers
  int next = (w->rank + 1) % w->nranks, prev = (w->rank + w->nranks - 1) % w->nranks;
  for (int i = 0; i < M; i++) h[i] = w->rank * 100000 + i;
  WEFT_TEST_CHECK(cu.htod(tcu_p(out), h, M * sizeof(int32_t)) == 0, "htod failed");
  for (int i = 0; i < M; i++) h[i] = w->rank == 0 ? i : 0;
  WEFT_TEST_CHECK(cu.htod(tcu_p(dv), h, M * sizeof(int32_t)) == 0, "htod failed");
  cudaStream_t st = (cudaStream_t)w->stream;
  for (int k = 0; k < CALLS; k++) {
    int grouped = k % 7 == 3;
    if (grouped) {
      WEFT_TEST_CHECK_RES(ncclGroupStart(), ncclSuccess);
      WEFT_TEST_CHECK_RES(ncclSend(out, M, ncclInt32, next, w->comm, st), ncclSuccess);
      WEFT_TEST_CHECK_RES(ncclRecv(in, M, ncclInt32, prev, w->comm, st), ncclSuccess);
    }
    WEFT_TEST_CHECK_RES(ncclAllReduce(dv, dv, M, ncclInt32, ncclSum, w->comm, st), ncclSuccess);
    if (grouped) WEFT_TEST_CHECK_RES(ncclGroupEnd(), ncclSuccess);
  }
  WEFT_TEST_CHECK(cu.stream_sync(w->stream) == 0, "sync failed");
  WEFT_TEST_CHECK(cu.dtoh(h, tcu_p(dv), M * sizeof(int32_t)) == 0, "dtoh failed");
  uint32_t f = 1;  // each call multiplies by nranks (mod 2^32)
  for (int k = 1; k < CALLS; k++) f *= (uint32_t)w->nranks;
  for (int i = 0; i < M; i++)
    if ((uint32_t)h[i] != (uint32_t)i * f) {
      WEFT_TEST_CHECK(0, "after %d calls in flight: [%d] = %d, expected %u", CALLS, i, h[i], (uint32_t)i * f);
      break;
    }
  WEFT_TEST_CHECK(cu.dtoh(h, tcu_p(in), M * sizeof(int32_t)) == 0, "dtoh failed");
  for (int i = 0; i < M; i++)
    if (h[i] != prev * 100000 + i) {
      WEFT_TEST_CHECK(0, "received [%d] = %d, expected %d", i, h[i], prev * 100000 + i);
      break;
    }
}

static int ipc_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  sweep_t w;
  if (sweep_open(&w, rank, nranks, id) != 0) return weft_test_failures();
  finite_floats = 1;
  int failed = ipc_sweep(&w);
  int waits = ipc_evidence();
  int reductions = fake_counter("WEFT_CUDA_KERNELS_LIB", "fake_kernels_calls");
  // With the stand-in, every call waited on its peers' counters in device
  // memory at least once, and reductions ran as stand-in kernels.
  WEFT_TEST_CHECK(tcu_real() ? waits > 0 : waits >= w.cases * (nranks - 1),
                  "the IPC path was not taken: %d %s for %d calls", waits, EVIDENCE, w.cases);
  WEFT_TEST_CHECK(tcu_real() || reductions > 0, "the IPC path queued no reductions");
  if (!failed && weft_test_failures() == 0) ipc_in_flight(&w);
  if (rank == 0)
    fprintf(stderr, "cuda_stream ipc: %d ranks, %d calls compared, %d %s, %d reductions queued\n",
            nranks, w.cases, waits, EVIDENCE, reductions);
  sweep_close(&w);
  return weft_test_failures();
}

// Send/Recv on the IPC path (4 KiB mailboxes): each rank's bytes to
// peer p are a pattern of (sender, receiver, call, byte), so every receive
// says where its bytes came from. Sizes of 1 byte to 17 rounds; a ring and
// all-to-all exchanges with a self send, in groups; two calls to one peer
// in one group; and one side grouping what the other calls one by one.
static unsigned char p2p_byte(int from, int to, int call, size_t i) {
  return (unsigned char)(from * 37 + to * 11 + call * 5 + i * 7 + (i >> 8));
}

typedef struct {
  int rank, nranks;
  ncclComm_t comm;
  tcu_stream s;
  unsigned char *h, *d_send, *d_recv;  // device buffers: nranks * MAXB each
} p2p_t;

enum { MAXB = 17 * 4096 };

static void p2p_fill(p2p_t *t, int call, size_t bytes) {
  for (int p = 0; p < t->nranks; p++)
    for (size_t i = 0; i < bytes; i++) t->h[(size_t)p * MAXB + i] = p2p_byte(t->rank, p, call, i);
  WEFT_TEST_CHECK(cu.htod(tcu_p(t->d_send), t->h, (size_t)t->nranks * MAXB) == 0, "htod failed");
  memset(t->h, 0, (size_t)t->nranks * MAXB);
  WEFT_TEST_CHECK(cu.htod(tcu_p(t->d_recv), t->h, (size_t)t->nranks * MAXB) == 0, "htod failed");
}

// Checks that recv block p holds what rank p sent here in `call` (or is
// untouched, 0, when from[p] is 0).
static void p2p_check(p2p_t *t, int call, size_t bytes, const int *from, const char *what) {
  WEFT_TEST_CHECK(cu.stream_sync(t->s) == 0, "sync failed");
  WEFT_TEST_CHECK(cu.dtoh(t->h, tcu_p(t->d_recv), (size_t)t->nranks * MAXB) == 0, "dtoh failed");
  for (int p = 0; p < t->nranks; p++)
    for (size_t i = 0; i < bytes; i++) {
      unsigned char want = from[p] ? p2p_byte(p, t->rank, call, i) : 0;
      if (t->h[(size_t)p * MAXB + i] != want) {
        WEFT_TEST_CHECK(0, "%s, %zu bytes: block from rank %d byte %zu is 0x%02x, expected 0x%02x", what, bytes, p,
                        i, t->h[(size_t)p * MAXB + i], want);
        return;
      }
    }
}

static int p2p_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  p2p_t t = {.rank = rank, .nranks = nranks};
  WEFT_TEST_CHECK(rank_setup(rank, &t.s) == 0, "driver setup failed");
  if (weft_test_failures()) return weft_test_failures();
  t.comm = weft_test_init_rank(nranks, id, rank);
  if (t.comm == NULL) return weft_test_failures();
  size_t all = (size_t)nranks * MAXB;
  t.h = malloc(all), t.d_send = tcu_alloc(&cu, all), t.d_recv = tcu_alloc(&cu, all);
  WEFT_TEST_CHECK(t.h && t.d_send && t.d_recv, "allocation failed");
  if (weft_test_failures()) return weft_test_failures();
  cudaStream_t st = (cudaStream_t)t.s;
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks, call = 0;
  int *from = calloc((size_t)nranks, sizeof(int));
  const size_t sizes[] = {1, 4095, 4096, 4097, 3 * 4096 + 5, MAXB};
  for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]) && weft_test_failures() == 0; z++) {
    size_t b = sizes[z];
    // A ring.
    p2p_fill(&t, ++call, b);
    WEFT_TEST_CHECK_RES(ncclGroupStart(), ncclSuccess);
    WEFT_TEST_CHECK_RES(ncclSend(t.d_send + (size_t)next * MAXB, b, ncclUint8, next, t.comm, st), ncclSuccess);
    WEFT_TEST_CHECK_RES(ncclRecv(t.d_recv + (size_t)prev * MAXB, b, ncclUint8, prev, t.comm, st), ncclSuccess);
    WEFT_TEST_CHECK_RES(ncclGroupEnd(), ncclSuccess);
    for (int p = 0; p < nranks; p++) from[p] = p == prev;
    p2p_check(&t, call, b, from, "ring");
    // Everyone to everyone, itself included, receives posted first.
    p2p_fill(&t, ++call, b);
    WEFT_TEST_CHECK_RES(ncclGroupStart(), ncclSuccess);
    for (int p = 0; p < nranks; p++)
      WEFT_TEST_CHECK_RES(ncclRecv(t.d_recv + (size_t)p * MAXB, b, ncclUint8, p, t.comm, st), ncclSuccess);
    for (int p = nranks - 1; p >= 0; p--)
      WEFT_TEST_CHECK_RES(ncclSend(t.d_send + (size_t)p * MAXB, b, ncclUint8, p, t.comm, st), ncclSuccess);
    WEFT_TEST_CHECK_RES(ncclGroupEnd(), ncclSuccess);
    for (int p = 0; p < nranks; p++) from[p] = 1;
    p2p_check(&t, call, b, from, "all to all");
  }
  // Two calls to one peer in one group (halves of a block, matched in
  // order); the receiver of rank 0 takes them in two groups of its own.
  if (weft_test_failures() == 0 && nranks >= 2) {
    size_t b = 5 * 4096 + 3;
    p2p_fill(&t, ++call, 2 * b);
    if (rank == 0) {
      WEFT_TEST_CHECK_RES(ncclGroupStart(), ncclSuccess);
      WEFT_TEST_CHECK_RES(ncclSend(t.d_send + 1 * MAXB, b, ncclUint8, 1, t.comm, st), ncclSuccess);
      WEFT_TEST_CHECK_RES(ncclSend(t.d_send + 1 * MAXB + b, b, ncclUint8, 1, t.comm, st), ncclSuccess);
      WEFT_TEST_CHECK_RES(ncclGroupEnd(), ncclSuccess);
    } else if (rank == 1) {
      WEFT_TEST_CHECK_RES(ncclRecv(t.d_recv, b, ncclUint8, 0, t.comm, st), ncclSuccess);
      WEFT_TEST_CHECK_RES(ncclRecv(t.d_recv + b, b, ncclUint8, 0, t.comm, st), ncclSuccess);
    }
    for (int p = 0; p < nranks; p++) from[p] = rank == 1 && p == 0;
    p2p_check(&t, call, 2 * b, from, "two calls to one peer");
  }
  // Collectives and point-to-point calls in flight together on one stream.
  if (weft_test_failures() == 0) {
    p2p_fill(&t, ++call, MAXB);
    for (int k = 0; k < 5; k++) {
      WEFT_TEST_CHECK_RES(ncclGroupStart(), ncclSuccess);
      WEFT_TEST_CHECK_RES(ncclSend(t.d_send + (size_t)next * MAXB, MAXB, ncclUint8, next, t.comm, st), ncclSuccess);
      WEFT_TEST_CHECK_RES(ncclRecv(t.d_recv + (size_t)prev * MAXB, MAXB, ncclUint8, prev, t.comm, st), ncclSuccess);
      WEFT_TEST_CHECK_RES(ncclAllReduce(t.d_send + (size_t)rank * MAXB, t.d_send + (size_t)rank * MAXB, 64, ncclUint8,
                                        ncclMax, t.comm, st), ncclSuccess);
      WEFT_TEST_CHECK_RES(ncclGroupEnd(), ncclSuccess);
    }
    for (int p = 0; p < nranks; p++) from[p] = p == prev;
    p2p_check(&t, call, MAXB, from, "beside all-reduces");
  }
  int waits = ipc_evidence();
  WEFT_TEST_CHECK(tcu_real() ? waits > 0 : waits >= call * 2, "the IPC path was not taken: %d %s", waits,
                  EVIDENCE);
  if (rank == 0)
    fprintf(stderr, "cuda_stream ipc p2p: %d ranks, %d exchanges, %d %s\n", nranks, call, waits, EVIDENCE);
  free(from);
  WEFT_TEST_CHECK_RES(ncclCommDestroy(t.comm), ncclSuccess);
  cu.free(tcu_p(t.d_send));
  cu.free(tcu_p(t.d_recv));
  free(t.h);
  cu.stream_destroy(t.s);
  return weft_test_failures();
}

static weft_test_one_id_t p2p_job = {p2p_body, NULL};

static weft_test_one_id_t ipc_job = {ipc_body, NULL};

// prefix: WEFT_CUDA_IPC, or its old name WEFT_CUDA_DIRECT (an alias).
static void ipc_setup_named(const char *prefix) {
  driver_setup();
  if (tcu_real()) {  // libweft-cuda.so beside libweft; each rank logs whether the path came up
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", "INIT", 1);
    static char log[64];
    snprintf(log, sizeof(log), "/tmp/weft-cuda-stream-%d-%%p.log", (int)getpid());
    setenv("NCCL_DEBUG_FILE", log, 1);
  } else {
    static char lib[600];
    const char *b = getenv("WEFT_BUILD_DIR");
    snprintf(lib, sizeof(lib), "%s/tests/lib/libweft-fake-cuda-kernels.so", b && b[0] ? b : "build");
    setenv("WEFT_CUDA_KERNELS_LIB", lib, 1);
  }
  static const char *const knob[][2] = {{"", "1"},
                                         {"_SCRATCH_BYTES", "4096"},
                                         {"_P2P_BYTES", "4096"},
                                         {"_TWO_PHASE_MIN_BYTES", "4096"}};  // 3 ranks: larger all-reduces in two phases
  for (size_t i = 0; i < sizeof(knob) / sizeof(knob[0]); i++) {
    char name[64];
    snprintf(name, sizeof(name), "%s%s", prefix, knob[i][0]);
    setenv(name, knob[i][1], 1);
  }
}

static void ipc_setup(void) { ipc_setup_named("WEFT_CUDA_IPC"); }

Test(cuda_stream, ipc_path_matches_the_host_path_2_ranks, .timeout = 240) {
  weft_test_env_timeout(60);
  ipc_setup();
  WEFT_TEST_EXPECT_FORK_OK(2, 1, weft_test_one_id_main, &ipc_job, 220);
}

Test(cuda_stream, ipc_path_matches_the_host_path_1_rank, .timeout = 240) {
  weft_test_env_timeout(60);
  ipc_setup_named("WEFT_CUDA_DIRECT");  // the knobs' old names still turn the path on and size it
  WEFT_TEST_EXPECT_FORK_OK(1, 1, weft_test_one_id_main, &ipc_job, 220);
}

Test(cuda_stream, ipc_path_matches_the_host_path_3_ranks, .timeout = 240) {
  weft_test_env_timeout(60);
  ipc_setup();
  WEFT_TEST_EXPECT_FORK_OK(3, 1, weft_test_one_id_main, &ipc_job, 220);
}

Test(cuda_stream, ipc_path_send_recv, .timeout = 120) {
  weft_test_env_timeout(30);
  ipc_setup();
  WEFT_TEST_EXPECT_FORK_OK(2, 1, weft_test_one_id_main, &p2p_job, 100);
  WEFT_TEST_EXPECT_FORK_OK(3, 1, weft_test_one_id_main, &p2p_job, 100);
}

// Ranks of one process on the IPC path: one thread driving both fake
// devices in a group (their contexts grant each other peer access), and
// two threads sharing a device.
typedef struct {
  int (*body)(int, int, ncclUniqueId *, void *);
} one_process_t;

static int ipc_in_one_process(int rank, int nranks, ncclUniqueId *ids, void *arg) {
  int failed = ((one_process_t *)arg)->body(rank, nranks, ids, NULL);
  int waits = ipc_evidence();
  WEFT_TEST_CHECK(waits > 0, "the IPC path was not taken (%d %s)", waits, EVIDENCE);
  return failed ? failed : weft_test_failures();
}

Test(cuda_stream, ipc_path_ranks_in_one_process, .timeout = 120) {
  weft_test_env_timeout(30);
  ipc_setup();
  one_process_t multi = {multi_body}, threads = {threads_body};
  if (!tcu_real() || tcu_device_count() >= 2) WEFT_TEST_EXPECT_FORK_OK(1, 0, ipc_in_one_process, &multi, 50);
  WEFT_TEST_EXPECT_FORK_OK(1, 1, ipc_in_one_process, &threads, 50);
}

// Communicators made by ncclCommSplit take the IPC path too: 3 ranks
// split by parity, each child all-reduces and its ranks exchange a ring.
static int split_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  tcu_stream s;
  WEFT_TEST_CHECK(rank_setup(rank, &s) == 0, "driver setup failed");
  if (weft_test_failures()) return weft_test_failures();
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank), child = NULL;
  int32_t *buf = tcu_alloc(&cu, M * sizeof(int32_t)), *in = tcu_alloc(&cu, M * sizeof(int32_t));
  int32_t *h = malloc(M * sizeof(int32_t));
  if (comm == NULL || buf == NULL || in == NULL || h == NULL) return weft_test_failures() + 1;
  int before = ipc_evidence();
  WEFT_TEST_CHECK_RES(ncclCommSplit(comm, rank % 2, rank, &child, NULL), ncclSuccess);
  int crank = -1, cn = 0;
  WEFT_TEST_CHECK_RES(ncclCommUserRank(child, &crank), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclCommCount(child, &cn), ncclSuccess);
  for (int i = 0; i < M; i++) h[i] = rank * 1000 + i;
  WEFT_TEST_CHECK(cu.htod(tcu_p(buf), h, M * sizeof(int32_t)) == 0, "htod failed");
  cudaStream_t st = (cudaStream_t)s;
  WEFT_TEST_CHECK_RES(ncclGroupStart(), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclSend(buf, M, ncclInt32, (crank + 1) % cn, child, st), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclRecv(in, M, ncclInt32, (crank + cn - 1) % cn, child, st), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclGroupEnd(), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclAllReduce(buf, buf, M, ncclInt32, ncclSum, child, st), ncclSuccess);
  WEFT_TEST_CHECK(cu.stream_sync(s) == 0, "sync failed");
  int32_t want_sum = 0;  // the child's members: the ranks of this parity
  for (int r = rank % 2; r < nranks; r += 2) want_sum += r * 1000;
  int from = -1;  // the member before this one, in rank order within the child
  for (int r = rank % 2, k = 0; r < nranks; r += 2, k++)
    if (k == (crank + cn - 1) % cn) from = r;
  WEFT_TEST_CHECK(cu.dtoh(h, tcu_p(buf), M * sizeof(int32_t)) == 0, "dtoh failed");
  WEFT_TEST_CHECK(h[5] == want_sum + cn * 5, "child all-reduce: %d, expected %d", h[5], want_sum + cn * 5);
  WEFT_TEST_CHECK(cu.dtoh(h, tcu_p(in), M * sizeof(int32_t)) == 0, "dtoh failed");
  WEFT_TEST_CHECK(h[7] == from * 1000 + 7, "child ring: %d, expected %d", h[7], from * 1000 + 7);
  int waits = ipc_evidence() - before;
  WEFT_TEST_CHECK(cn == 1 || waits > 0, "the child's calls did not take the IPC path");
  WEFT_TEST_CHECK_RES(ncclCommDestroy(child), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  cu.free(tcu_p(buf));
  cu.free(tcu_p(in));
  free(h);
  cu.stream_destroy(s);
  return weft_test_failures();
}

static weft_test_one_id_t split_job = {split_body, NULL};

Test(cuda_stream, ipc_path_in_split_communicators, .timeout = 60) {
  weft_test_env_timeout(20);
  ipc_setup();
  WEFT_TEST_EXPECT_FORK_OK(3, 1, weft_test_one_id_main, &split_job, 50);
}

// A rank that never makes its call leaves its peers' streams waiting on its
// counters; ncclCommAbort on a waiting rank lets its stream run on (the
// results are undefined), and the rank that stayed away aborts too.
static int abort_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  tcu_stream s;
  WEFT_TEST_CHECK(rank_setup(rank, &s) == 0, "driver setup failed");
  if (weft_test_failures()) return weft_test_failures();
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  int32_t *buf = tcu_alloc(&cu, M * sizeof(int32_t));
  if (comm == NULL || buf == NULL) return weft_test_failures() + 1;
  if (rank == 0) {
    WEFT_TEST_CHECK_RES(ncclAllReduce(buf, buf, M, ncclInt32, ncclSum, comm, (cudaStream_t)s), ncclSuccess);
    WEFT_TEST_CHECK_RES(ncclGroupStart(), ncclSuccess);
    WEFT_TEST_CHECK_RES(ncclRecv(buf, M, ncclInt32, 1, comm, (cudaStream_t)s), ncclSuccess);
    WEFT_TEST_CHECK_RES(ncclGroupEnd(), ncclSuccess);
    weft_test_sleep_ms(200);
    WEFT_TEST_CHECK(cu.stream_query(s) == 600 /* CUDA_ERROR_NOT_READY */, "the stream did not wait for rank 1");
    double t0 = weft_test_now();
    WEFT_TEST_CHECK_RES(ncclCommAbort(comm), ncclSuccess);
    WEFT_TEST_CHECK(cu.stream_sync(s) == 0, "cuStreamSynchronize failed");
    double secs = weft_test_now() - t0;
    WEFT_TEST_CHECK(secs < 5.0, "the stream ran on %.1f s after ncclCommAbort", secs);
  } else {
    weft_test_sleep_ms(400);
    WEFT_TEST_CHECK_RES(ncclCommAbort(comm), ncclSuccess);
  }
  cu.free(tcu_p(buf));
  cu.stream_destroy(s);
  return weft_test_failures();
}

static weft_test_one_id_t abort_job = {abort_body, NULL};

Test(cuda_stream, ipc_path_abort_releases_waiting_streams, .timeout = 60) {
  weft_test_env_timeout(20);
  ipc_setup();
  WEFT_TEST_EXPECT_FORK_OK(2, 1, weft_test_one_id_main, &abort_job, 50);
}

// The stream semantics, groups, the device PreMulSum scalar, capture and
// refusals again, with the IPC path on.
Test(cuda_stream, ipc_path_keeps_stream_semantics, .timeout = 120) {
  weft_test_env_timeout(30);
  ipc_setup();
  WEFT_TEST_EXPECT_FORK_OK(3, 1, weft_test_one_id_main, &order_job, 50);
  WEFT_TEST_EXPECT_FORK_OK(2, 1, weft_test_one_id_main, &misc_job, 50);
}
