/*
 * test_cuda_mem.c — device buffers the library must refuse, on machines
 * without a GPU: ranks load tests/fakes/cuda/ (a stand-in CUDA driver whose
 * "device memory" is a PROT_NONE mapping, so touching it would crash) by
 * WEFT_CUDA_DRIVER_LIB, and pass its pointers to collectives and p2p calls
 * from a thread with no current CUDA context (test_cuda_stream.c covers
 * the calls that work).
 *
 * A device or managed buffer on the NULL stream without a current context
 * is refused with ncclInvalidUsage and a WARN that says so; buffers of
 * different kinds too; a buffer that runs out of its allocation is
 * ncclInvalidArgument; the communicator stays usable, and registered host
 * memory still works.
 * A refused call never reaches the peers, so ranks must agree (as every
 * real program does: its buffers are all device or all host). A rank that
 * alone is refused leaves its peers waiting for a call it will not make:
 * they fail after WEFT_TIMEOUT instead of hanging, as for any skipped call.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>

#include "harness.h"

enum { N = 1024 };

typedef int (*alloc_fn)(unsigned long long *, size_t);
typedef int (*managed_fn)(unsigned long long *, size_t, unsigned int);
typedef int (*reg_fn)(void *, size_t, unsigned int);
typedef int (*init_fn)(unsigned int);

static char fake_path[512];

static void use_fake_driver(void) {
  const char *b = getenv("WEFT_BUILD_DIR");
  snprintf(fake_path, sizeof(fake_path), "%s/tests/lib/libweft-fake-cuda.so", b && b[0] ? b : "build");
  setenv("WEFT_CUDA_DRIVER_LIB", fake_path, 1);
}

// The program's side: the same library the communicator opens (one handle).
static void *driver_sym(const char *name) {
  void *h = dlopen(fake_path, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) return NULL;
  return dlsym(h, name);  // the handle stays open for the life of the rank
}

static void *fake_device_alloc(size_t bytes, int is_managed) {
  unsigned long long p = 0;
  init_fn init = (init_fn)driver_sym("cuInit");
  if (init == NULL || init(0) != 0) return NULL;
  int r = is_managed ? ((managed_fn)driver_sym("cuMemAllocManaged"))(&p, bytes, 1)
                     : ((alloc_fn)driver_sym("cuMemAlloc_v2"))(&p, bytes);
  return r == 0 ? (void *)(uintptr_t)p : NULL;
}

#define CHECK_LAST_ERROR(comm, needle)                                                                             \
  WEFT_TEST_CHECK(strstr(ncclGetLastError(comm), (needle)) != NULL, "last error '%s' lacks '%s'",                  \
                  ncclGetLastError(comm), (needle))

static int consistent_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return weft_test_failures();
  float *dev = fake_device_alloc(N * sizeof(float), 0), *man = fake_device_alloc(N * sizeof(float), 1);
  float *host = calloc(N, sizeof(float)), *pinned = calloc(N, sizeof(float));
  WEFT_TEST_CHECK(dev != NULL && man != NULL && host != NULL && pinned != NULL, "allocation failed");
  if (dev == NULL || man == NULL || host == NULL || pinned == NULL) return weft_test_failures();
  int peer = (rank + 1) % nranks;

  WEFT_TEST_CHECK_RES(ncclAllReduce(dev, dev, N, ncclFloat32, ncclSum, comm, NULL), ncclInvalidUsage);
  CHECK_LAST_ERROR(comm, "no current CUDA context");
  WEFT_TEST_CHECK_RES(ncclAllReduce(man, man, N, ncclFloat32, ncclSum, comm, NULL), ncclInvalidUsage);
  CHECK_LAST_ERROR(comm, "no current CUDA context");
  WEFT_TEST_CHECK_RES(ncclAllReduce(host, dev, N, ncclFloat32, ncclSum, comm, NULL), ncclInvalidUsage);
  CHECK_LAST_ERROR(comm, "device memory of device 0");
  CHECK_LAST_ERROR(comm, "memory of one device");
  WEFT_TEST_CHECK_RES(ncclAllGather(dev, host, N / nranks, ncclFloat32, comm, NULL), ncclInvalidUsage);
  CHECK_LAST_ERROR(comm, "memory of one device");
  WEFT_TEST_CHECK_RES(ncclAllReduce(man, host, N, ncclFloat32, ncclSum, comm, NULL), ncclInvalidUsage);
  CHECK_LAST_ERROR(comm, "managed memory");
  WEFT_TEST_CHECK_RES(ncclBroadcast(dev, dev, N, ncclFloat32, 0, comm, NULL), ncclInvalidUsage);
  WEFT_TEST_CHECK_RES(ncclSend(dev, N, ncclFloat32, peer, comm, NULL), ncclInvalidUsage);
  CHECK_LAST_ERROR(comm, "Send: stream");
  WEFT_TEST_CHECK_RES(ncclRecv(dev, N, ncclFloat32, peer, comm, NULL), ncclInvalidUsage);
  // A buffer that runs past the end of its device allocation.
  WEFT_TEST_CHECK_RES(ncclAllReduce(dev + N - 4, dev + N - 4, 64, ncclFloat32, ncclSum, comm, NULL),
                      ncclInvalidArgument);
  CHECK_LAST_ERROR(comm, "different kinds of memory");
  // Nothing to move: a no-op whatever the pointers are.
  WEFT_TEST_CHECK_RES(ncclAllReduce(dev, dev, 0, ncclFloat32, ncclSum, comm, NULL), ncclSuccess);
  // Inside a group the bad call fails, and so does the group.
  WEFT_TEST_CHECK_RES(ncclGroupStart(), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclAllReduce(dev, dev, N, ncclFloat32, ncclSum, comm, NULL), ncclInvalidUsage);
  WEFT_TEST_CHECK(ncclGroupEnd() != ncclSuccess, "a group with a refused call succeeded");

  // The communicator still works: host memory, and host memory registered with the driver.
  reg_fn reg = (reg_fn)driver_sym("cuMemHostRegister_v2");
  WEFT_TEST_CHECK(reg != NULL && reg(pinned, N * sizeof(float), 0) == 0, "cuMemHostRegister failed");
  for (int i = 0; i < N; i++) host[i] = (float)(rank + 1), pinned[i] = (float)(i + rank);
  WEFT_TEST_CHECK_RES(ncclAllReduce(host, host, N, ncclFloat32, ncclSum, comm, NULL), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclAllReduce(pinned, pinned, N, ncclFloat32, ncclSum, comm, NULL), ncclSuccess);
  float want = (float)(nranks * (nranks + 1) / 2);
  for (int i = 0; i < N; i++) {
    WEFT_TEST_CHECK(host[i] == want, "host[%d] = %g, expected %g", i, host[i], want);
    float want_p = (float)(nranks * i + nranks * (nranks - 1) / 2);
    WEFT_TEST_CHECK(pinned[i] == want_p, "pinned[%d] = %g, expected %g", i, pinned[i], want_p);
    if (host[i] != want || pinned[i] != want_p) break;
  }
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  free(host);
  free(pinned);
  return weft_test_failures();
}

Test(cuda_mem, device_buffers_without_a_context_are_refused_on_every_rank, .timeout = 60) {
  weft_test_env_timeout(20);
  use_fake_driver();
  cr_expect_eq(weft_test_fork_ranks(3, consistent_body, NULL, 45), 0);
}

typedef struct {
  int res[2];
  double secs[2];
  int done;
} lone_out_t;

static lone_out_t *lone;

static int lone_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return weft_test_failures();
  float *host = calloc(N, sizeof(float)), *buf = rank == 0 ? fake_device_alloc(N * sizeof(float), 0) : host;
  WEFT_TEST_CHECK(host != NULL && buf != NULL, "allocation failed");
  if (host == NULL || buf == NULL) return weft_test_failures();
  double t0 = weft_test_now();
  lone->res[rank] = (int)ncclAllReduce(buf, buf, N, ncclFloat32, ncclSum, comm, NULL);
  lone->secs[rank] = weft_test_now() - t0;
  if (rank == 1) __atomic_store_n(&lone->done, 1, __ATOMIC_RELEASE);
  // Rank 0 stays alive (and in the communicator) until rank 1 has its answer,
  // so rank 1 cannot learn of the failure from rank 0's exit.
  for (int i = 0; i < 3000 && rank == 0 && !__atomic_load_n(&lone->done, __ATOMIC_ACQUIRE); i++)
    weft_test_sleep_ms(10);
  ncclCommAbort(comm);
  free(host);
  return weft_test_failures();
}

Test(cuda_mem, a_lone_refused_rank_leaves_its_peer_failing_at_the_timeout, .timeout = 60) {
  weft_test_env_timeout(3);
  use_fake_driver();
  lone = weft_test_shared_alloc(sizeof(*lone));
  cr_assert_not_null(lone);
  lone->res[0] = lone->res[1] = -1;
  cr_expect_eq(weft_test_fork_ranks(2, lone_body, NULL, 45), 0);
  cr_log_info("rank 0: %d after %.3f s; rank 1: %d after %.3f s", lone->res[0], lone->secs[0], lone->res[1],
              lone->secs[1]);
  cr_expect_eq(lone->res[0], ncclInvalidUsage, "rank 0 (device buffer) got %d", lone->res[0]);
  cr_expect_lt(lone->secs[0], 1.0, "the refusal took %.1f s", lone->secs[0]);
  cr_expect(lone->res[1] != ncclSuccess && lone->res[1] != -1, "rank 1 got %d, expected a failure", lone->res[1]);
  cr_expect_lt(lone->secs[1], 20.0, "rank 1 took %.1f s to give up with WEFT_TIMEOUT=3", lone->secs[1]);
  weft_test_shared_free(lone, sizeof(*lone));
}
