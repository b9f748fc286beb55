/*
 * test_windows_direct.c — collectives on buffers in symmetric windows
 * between forked processes (window_map.c): with ncclMemAlloc memory every
 * rank maps every peer's part and the single-copy schedules load and store
 * the peers' memory directly; with malloc'd memory the window is not mapped
 * and the same calls go through cross-memory attach. Every collective,
 * four datatypes, small to large counts, in place and out of place, on 2
 * and 3 ranks, exact against the expected values; the registration log
 * line says which way each window went. Also: a rank that passes a plain
 * buffer where its peers pass window buffers gets an error, not a hang;
 * and hundreds of calls that read peers, queued on a stream ahead of a
 * slower peer, all complete (the descriptor board is not overrun).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "weft.h"

#define BIG 300000  // elements per rank: above every collective's direct threshold
static const size_t counts[] = {7, 5000, BIG};
static const ncclDataType_t types[] = {ncclInt32, ncclFloat32, ncclBfloat16, ncclFloat64};
enum { C_ALLREDUCE, C_REDUCESCATTER, C_ALLGATHER, C_BROADCAST, C_REDUCE, C_ALLTOALL, C_NUM };
static const char *const names[C_NUM] = {"AllReduce", "ReduceScatter", "AllGather", "Broadcast", "Reduce",
                                         "AlltoAll"};

// Input element i of rank r: small integers, so every sum is exact in bfloat16.
static int64_t input(int r, size_t i) { return (int64_t)((r + 1) * (int)(i % 7 + 1)); }

static uint64_t bits_of(const weft_test_dtype_t *t, int64_t v) {
  return t->is_float ? weft_test_float_bits(t, (double)v) : weft_test_encode_int(t, v);
}

static void put(const weft_test_dtype_t *t, void *buf, size_t i, int64_t v) {
  weft_test_store((char *)buf + i * t->size, t->size, bits_of(t, v));
}

// Element counts of the send and receive sides of collective c.
static void sides(int c, size_t count, int n, size_t *send, size_t *recv) {
  *send = (c == C_REDUCESCATTER || c == C_ALLTOALL) ? count * (size_t)n : count;
  *recv = (c == C_ALLGATHER || c == C_ALLTOALL) ? count * (size_t)n : count;
}

// What rank r's output element i must be (-1: not defined there).
static int64_t expected(int c, int r, int n, size_t count, size_t i) {
  int64_t sum = 0;
  switch (c) {
    case C_ALLREDUCE:
      for (int q = 0; q < n; q++) sum += input(q, i);
      return sum;
    case C_REDUCE:
      if (r != 1 % n) return -1;
      for (int q = 0; q < n; q++) sum += input(q, i);
      return sum;
    case C_REDUCESCATTER:
      for (int q = 0; q < n; q++) sum += input(q, (size_t)r * count + i);
      return sum;
    case C_ALLGATHER: return input((int)(i / count), i % count);
    case C_BROADCAST: return input(0, i);
    default: return input((int)(i / count), (size_t)r * count + i % count);  // AlltoAll: block r of rank i/count
  }
}

static ncclResult_t call(int c, const void *s, void *r, size_t count, ncclDataType_t dt, int n, ncclComm_t comm,
                         cudaStream_t stream) {
  switch (c) {
    case C_ALLREDUCE: return ncclAllReduce(s, r, count, dt, ncclSum, comm, stream);
    case C_REDUCESCATTER: return ncclReduceScatter(s, r, count, dt, ncclSum, comm, stream);
    case C_ALLGATHER: return ncclAllGather(s, r, count, dt, comm, stream);
    case C_BROADCAST: return ncclBroadcast(s, r, count, dt, 0, comm, stream);
    case C_REDUCE: return ncclReduce(s, r, count, dt, ncclSum, 1 % n, comm, stream);
    default: return ncclAlltoAll(s, r, count, dt, comm, stream);
  }
}

// One call of collective c on `base` (the send side at 0, the receive side
// at `half` bytes; in place both sides share the receive side as NCCL lays
// them out), checked element by element. Returns the failures.
static int run_one(ncclComm_t comm, int rank, int n, int c, const weft_test_dtype_t *t, size_t count, int in_place,
                   char *base, size_t half) {
  size_t ns, nr, es = t->size;
  sides(c, count, n, &ns, &nr);
  char *region = base + half, *send = base, *recv = region;
  if (in_place && c == C_REDUCESCATTER) send = region, recv = region + (size_t)rank * count * es;
  else if (in_place && c == C_ALLGATHER) send = region + (size_t)rank * count * es;
  else if (in_place) send = region;
  memset(region, 0xEE, (nr > ns ? nr : ns) * es);
  for (size_t i = 0; i < ns; i++) put(t, send, i, input(rank, i));
  int before = weft_test_failures();
  WEFT_TEST_CHECK_RES(call(c, send, recv, count, t->dt, n, comm, NULL), ncclSuccess);
  for (size_t i = 0, bad = 0; i < nr && bad < 3; i++) {
    int64_t want = expected(c, rank, n, count, i);
    if (want < 0) break;  // Reduce off the root: nothing defined
    uint64_t got = weft_test_canon(t, weft_test_load(recv + i * es, es)), exp = weft_test_canon(t, bits_of(t, want));
    if (got != exp) bad++;
    WEFT_TEST_CHECK(got == exp, "%s %s count=%zu %s: element %zu is 0x%llx, expected 0x%llx (%lld)", names[c],
                    t->name, count, in_place ? "in place" : "out of place", i, (unsigned long long)got,
                    (unsigned long long)exp, (long long)want);
  }
  return weft_test_failures() - before;
}

typedef struct {
  int mapped;  // 1: ncclMemAlloc memory (the window is mapped); 0: malloc'd
} job_t;

static size_t half_bytes(int n) { return (size_t)BIG * (size_t)n * 8; }

static int every_call_body(int rank, int n, ncclUniqueId id, void *arg) {
  const job_t *job = arg;
  ncclComm_t comm = weft_test_init_rank(n, id, rank);
  if (comm == NULL) return weft_test_failures();
  size_t half = half_bytes(n);
  char *base = NULL;
  if (job->mapped) WEFT_TEST_CHECK_RES(ncclMemAlloc((void **)&base, 2 * half), ncclSuccess);
  else base = malloc(2 * half);
  if (base == NULL) return weft_test_failures() + 1;
  ncclWindow_t win = NULL;
  WEFT_TEST_CHECK_RES(ncclCommWindowRegister(comm, base, 2 * half, &win, NCCL_WIN_COLL_SYMMETRIC), ncclSuccess);
  for (int c = 0; c < C_NUM && win != NULL; c++)
    for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++)
      for (size_t j = 0; j < sizeof(counts) / sizeof(counts[0]); j++)
        for (int in_place = 0; in_place < 2; in_place++)
          if (run_one(comm, rank, n, c, weft_test_dtype(types[k]), counts[j], in_place, base, half) > 8) goto out;
out:
  if (win != NULL) WEFT_TEST_CHECK_RES(ncclCommWindowDeregister(comm, win), ncclSuccess);
  if (job->mapped) WEFT_TEST_CHECK_RES(ncclMemFree(base), ncclSuccess);
  else free(base);
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  return weft_test_failures();
}

// Runs every call on n ranks with INFO logs of registration in a fresh
// folder, and returns how many of the ranks' logs say their window was
// mapped by every rank (-1 when the ranks failed).
static int every_call(int n, int mapped) {
  char dir[] = "/tmp/weft_windows_direct.XXXXXX", pattern[64];
  cr_assert_not_null(mkdtemp(dir));
  snprintf(pattern, sizeof(pattern), "%s/log.%%p", dir);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "REG", 1);
  setenv("NCCL_DEBUG_FILE", pattern, 1);
  job_t job = {.mapped = mapped};
  int failed = weft_test_fork_ranks(n, every_call_body, &job, 240);
  int said = 0;
  DIR *d = opendir(dir);
  for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    char path[400], text[8192];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "r");
    size_t got = f != NULL ? fread(text, 1, sizeof(text) - 1, f) : 0;
    text[got] = '\0';
    if (f != NULL) fclose(f);
    said += strstr(text, "load and store peers' memory directly") != NULL;
    unlink(path);
  }
  if (d != NULL) closedir(d);
  rmdir(dir);
  return failed == 0 ? said : -1;
}

Test(windows_direct, every_collective_on_mapped_windows_2_ranks, .timeout = 240) {
  cr_assert_eq(every_call(2, 1), 2, "both ranks must run every call right and map their window");
}

Test(windows_direct, every_collective_on_mapped_windows_3_ranks, .timeout = 240) {
  cr_assert_eq(every_call(3, 1), 3, "all three ranks must run every call right and map their window");
}

Test(windows_direct, every_collective_on_malloc_windows_stays_exact_and_unmapped, .timeout = 240) {
  cr_assert_eq(every_call(2, 0), 0, "malloc'd windows cannot be mapped, and every call must still be right");
}

// Rank 0 passes buffers of its symmetric window, rank 1 plain ones: the
// ranks choose different schedules, which the descriptor check reports.
static int asymmetric_body(int rank, int n, ncclUniqueId id, void *arg) {
  (void)arg;
  ncclComm_t comm = weft_test_init_rank(n, id, rank);
  if (comm == NULL) return weft_test_failures();
  size_t bytes = (size_t)BIG * 4;
  float *win_buf = NULL, *plain = calloc(BIG, sizeof(float));
  WEFT_TEST_CHECK_RES(ncclMemAlloc((void **)&win_buf, bytes), ncclSuccess);
  ncclWindow_t win = NULL;
  WEFT_TEST_CHECK_RES(ncclCommWindowRegister(comm, win_buf, bytes, &win, NCCL_WIN_COLL_SYMMETRIC), ncclSuccess);
  float *buf = rank == 0 ? win_buf : plain;
  ncclResult_t r = ncclAllReduce(buf, buf, BIG, ncclFloat32, ncclSum, comm, NULL), async = ncclSuccess;
  ncclCommGetAsyncError(comm, &async);
  WEFT_TEST_CHECK(r != ncclSuccess || async != ncclSuccess, "an AllReduce with a window buffer on one rank only "
                  "must fail (returned %d, async %d)", (int)r, (int)async);
  ncclCommAbort(comm);  // the communicator has failed: no collective deregistration
  ncclMemFree(win_buf);
  free(plain);
  return weft_test_failures();
}

Test(windows_direct, a_window_buffer_on_one_rank_only_is_an_error_not_a_hang, .timeout = 60) {
  weft_test_env_timeout(20);
  cr_assert_eq(weft_test_fork_ranks(2, asymmetric_body, NULL, 50), 0);
}

// Rank 1 queues many AllGathers (single copy, reading or writing peers) on
// a stream while rank 0 starts late: more calls than the descriptor board
// has entries are queued ahead, and every one completes right.
#define QUEUED 600
#define QCOUNT 8192
static int queued_body(int rank, int n, ncclUniqueId id, void *arg) {
  (void)arg;
  ncclComm_t comm = weft_test_init_rank(n, id, rank);
  if (comm == NULL) return weft_test_failures();
  int32_t *send = malloc(QCOUNT * sizeof(int32_t)), *recv = malloc((size_t)n * QCOUNT * sizeof(int32_t));
  for (int i = 0; i < QCOUNT; i++) send[i] = rank * 1000003 + i;
  cudaStream_t s = NULL;
  WEFT_TEST_CHECK_RES(weftStreamCreate(&s), ncclSuccess);
  if (rank == 0) weft_test_sleep_ms(300);
  for (int k = 0; k < QUEUED; k++) WEFT_TEST_CHECK_RES(ncclAllGather(send, recv, QCOUNT, ncclInt32, comm, s), ncclSuccess);
  WEFT_TEST_CHECK_RES(weftStreamSynchronize(s), ncclSuccess);
  for (int q = 0; q < n; q++)
    for (int i = 0; i < QCOUNT; i += 997)
      WEFT_TEST_CHECK(recv[q * QCOUNT + i] == q * 1000003 + i, "rank %d's element %d is %d", q, i, recv[q * QCOUNT + i]);
  WEFT_TEST_CHECK_RES(weftStreamDestroy(s), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  free(send);
  free(recv);
  return weft_test_failures();
}

Test(windows_direct, more_queued_reading_calls_than_the_board_holds_complete, .timeout = 120) {
  cr_assert_eq(weft_test_fork_ranks(2, queued_body, NULL, 110), 0);
}
