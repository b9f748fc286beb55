/*
 * harness.h — shared helpers for the multi-rank tests.
 *
 * Runs ranks two ways: as forked processes that meet through unique ids
 * from the parent (weft_test_fork_ranks, weft_test_fork_ranks_ids, with a
 * deadline after which every child is killed), and as threads of one
 * process over communicators from ncclCommInitAll (weft_test_thread_ranks).
 * Checks inside a forked rank (WEFT_TEST_CHECK) and in the Criterion test
 * process (WEFT_TEST_EXPECT_*), and memory shared with forked ranks. Also:
 * the test environment (bootstrap on loopback), a table of the 12
 * datatypes with an exact encoder/decoder for every format written here
 * from the formats' field layouts (independent of the library's
 * converters), and 64-bit hashing for comparing buffers across ranks.
 * Header-only: every function is static inline, so a test includes it and
 * links nothing more. The WEFT_TEST_EXPECT_* macros expand to Criterion's
 * cr_expect: a test that uses them includes <criterion/criterion.h>.
 */
#ifndef WEFT_TEST_HARNESS_H
#define WEFT_TEST_HARNESS_H

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"
#include "weft.h"

#define WEFT_TEST_MAX_RANKS 64

// ---- Environment and time ----

// Call before any communicator or unique id exists: bootstrap sockets stay
// on loopback, and a collective that stops making progress fails inside the
// library (WEFT_TIMEOUT with WEFT_TIMEOUT_FAIL=1; by default the library
// only warns and waits on) long before a test's own deadline, unless the
// caller's environment already says otherwise.
static inline void weft_test_env_defaults(void) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("WEFT_TIMEOUT", "90", 0);
  setenv("WEFT_TIMEOUT_FAIL", "1", 0);
}

static inline double weft_test_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// weft_test_env_defaults, with WEFT_TIMEOUT set to `seconds` whatever the
// caller's environment says: for a test whose checks depend on how soon
// the library gives up on a peer.
static inline void weft_test_env_timeout(int seconds) {
  char text[16];
  snprintf(text, sizeof(text), "%d", seconds);
  weft_test_env_defaults();
  setenv("WEFT_TIMEOUT", text, 1);
}

// A TCP port free on 127.0.0.1 a moment ago (-1 if none), below the
// kernel's ephemeral range (32768 up by default), so no outgoing
// connection takes it in the meantime; the start is spread by pid and time
// so tests running side by side pick different ones.
static inline int weft_test_free_port(void) {
  int span = 12000, start = (int)(((unsigned)getpid() * 7919u + (unsigned)time(NULL)) % (unsigned)span);
  for (int i = 0; i < span; i++) {
    int port = 20000 + (start + i) % span;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    if (ok) return port;
  }
  return -1;
}

static inline void weft_test_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// ---- Checks inside a forked rank ----

// This process's rank and its failed checks so far: weft_test_fork_ranks_ids
// sets both in each child before the rank's body runs. One counter per
// process, so for forked ranks only, not for ranks that are threads.
static struct {
  int rank;
  int fails;
} weft_test_check_state __attribute__((unused)) = {-1, 0};

// Counts a failed condition and prints it with the rank, the place and a
// printf-style explanation; the rank carries on.
#define WEFT_TEST_CHECK(cond, ...)                                                                           \
  do {                                                                                                       \
    if (!(cond)) {                                                                                           \
      weft_test_check_state.fails++;                                                                         \
      fprintf(stderr, "[rank %d] %s:%d: check failed: %s: ", weft_test_check_state.rank, __FILE__, __LINE__, \
              #cond);                                                                                        \
      fprintf(stderr, __VA_ARGS__);                                                                          \
      fputc('\n', stderr);                                                                                   \
    }                                                                                                        \
  } while (0)

// A call must return `want`.
#define WEFT_TEST_CHECK_RES(call, want)                                                                           \
  do {                                                                                                            \
    ncclResult_t r_ = (call);                                                                                     \
    WEFT_TEST_CHECK(r_ == (want), "returned %d (%s), expected %d", (int)r_, ncclGetErrorString(r_), (int)(want)); \
  } while (0)

// The failed checks of this rank: what its body returns.
static inline int weft_test_failures(void) { return weft_test_check_state.fails; }

// ncclCommInitRank as a check: the communicator, or NULL after a failed check.
static inline ncclComm_t weft_test_init_rank(int nranks, ncclUniqueId id, int rank) {
  ncclComm_t comm = NULL;
  WEFT_TEST_CHECK_RES(ncclCommInitRank(&comm, nranks, id, rank), ncclSuccess);
  return comm;
}

// ---- Ranks as forked processes ----

// One rank's body: returns its number of failures (0 = all good).
typedef int (*weft_test_rank_fn)(int rank, int nranks, ncclUniqueId id, void *arg);

// One rank's body with every unique id of its job (ids[0..nids-1]).
typedef int (*weft_test_rank_ids_fn)(int rank, int nranks, ncclUniqueId *ids, void *arg);

#define WEFT_TEST_MAX_IDS 8

// One forked rank's outcome (weft_test_fork_ranks_ids): its exit code
// (0..255), WEFT_TEST_KILLED_BY(signal), WEFT_TEST_RANK_TIMED_OUT when the
// harness killed it (at the deadline, or because not every rank could
// start), or WEFT_TEST_RANK_NOT_STARTED.
#define WEFT_TEST_RANK_TIMED_OUT (-1)
#define WEFT_TEST_RANK_NOT_STARTED (-2)
#define WEFT_TEST_KILLED_BY(sig) (256 + (sig))

// Forks n children, then gets nids unique ids here (0..WEFT_TEST_MAX_IDS;
// this process hosts each rendezvous; with 0 it makes no library call) and
// hands them to every child, which runs fn(rank, n, ids, arg) with its
// check state (WEFT_TEST_CHECK) set to that rank and no failures, and exits
// with fn's result clipped to 0..255. Waits at most timeout_s for all of
// them; on the deadline every child still running is killed with SIGKILL.
// Prints each rank that failed, exited by signal or timed out. Returns the
// number of ranks that did not exit 0 (0 = success), or -1 when setup
// failed; when status is not NULL, status[0..n-1] receives each rank's
// outcome. The ids reach the children through pipes once all of them
// exist, so no fork happens while the library's rendezvous thread runs (a
// sanitizer's allocator could deadlock in such a child).
static inline int weft_test_fork_ranks_ids(int n, int nids, weft_test_rank_ids_fn fn, void *arg, int timeout_s,
                                           int *status) {
  if (n < 1 || n > WEFT_TEST_MAX_RANKS || fn == NULL) {
    fprintf(stderr, "weft_test_fork_ranks: bad arguments (n=%d)\n", n);
    return -1;
  }
  if (nids < 0 || nids > WEFT_TEST_MAX_IDS) {
    fprintf(stderr, "weft_test_fork_ranks: bad number of unique ids (%d)\n", nids);
    return -1;
  }
  pid_t parent = getpid();
  pid_t pids[WEFT_TEST_MAX_RANKS];
  int pipes[WEFT_TEST_MAX_RANKS];
  int wstatus[WEFT_TEST_MAX_RANKS];
  int done[WEFT_TEST_MAX_RANKS] = {0};
  ncclUniqueId ids[WEFT_TEST_MAX_IDS];
  size_t id_bytes = (size_t)nids * sizeof(ncclUniqueId);
  int started = 0;
  fflush(NULL);
  for (; started < n; started++) {
    int fds[2];
    if (pipe(fds) != 0) {
      fprintf(stderr, "weft_test_fork_ranks: pipe: %s\n", strerror(errno));
      break;
    }
    pid_t pid = fork();
    if (pid < 0) {
      fprintf(stderr, "weft_test_fork_ranks: fork of rank %d: %s\n", started, strerror(errno));
      close(fds[0]);
      close(fds[1]);
      break;
    }
    if (pid == 0) {
      // A child must not outlive the test that started it.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(255);
      close(fds[1]);
      for (int r = 0; r < started; r++) close(pipes[r]);
      size_t got = 0;
      while (got < id_bytes) {
        ssize_t k = read(fds[0], (char *)ids + got, id_bytes - got);
        if (k <= 0 && !(k < 0 && errno == EINTR)) _exit(255);  // the parent gave up
        if (k > 0) got += (size_t)k;
      }
      close(fds[0]);
      weft_test_check_state.rank = started;
      weft_test_check_state.fails = 0;
      int fails = fn(started, n, ids, arg);
      fflush(NULL);
      _exit(fails < 0 ? 255 : fails > 255 ? 255 : fails);  // skip the test framework's atexit
    }
    close(fds[0]);
    pipes[started] = fds[1];
    pids[started] = pid;
  }
  // Every child exists now: create the ids (this process hosts the rendezvous) and hand them out.
  ncclResult_t res = started == n ? ncclSuccess : ncclInternalError;
  for (int i = 0; i < nids && res == ncclSuccess; i++) {
    res = ncclGetUniqueId(&ids[i]);
    if (res != ncclSuccess) fprintf(stderr, "weft_test_fork_ranks: ncclGetUniqueId: %s\n", ncclGetErrorString(res));
  }
  for (int r = 0; r < started; r++) {
    if (res == ncclSuccess && id_bytes > 0 && write(pipes[r], ids, id_bytes) != (ssize_t)id_bytes)
      fprintf(stderr, "weft_test_fork_ranks: could not hand the id to rank %d\n", r);
    close(pipes[r]);
  }
  int bad = 0, remaining = started, timed_out[WEFT_TEST_MAX_RANKS] = {0};
  double deadline = weft_test_now() + timeout_s;
  if (started < n || res != ncclSuccess) deadline = 0;  // the started ranks cannot finish
  while (remaining > 0) {
    int progressed = 0;
    for (int r = 0; r < started; r++) {
      if (done[r] || waitpid(pids[r], &wstatus[r], WNOHANG) != pids[r]) continue;
      done[r] = 1;
      remaining--;
      progressed = 1;
    }
    if (remaining > 0 && weft_test_now() > deadline) {
      for (int r = 0; r < started; r++) {
        if (done[r]) continue;
        kill(pids[r], SIGKILL);
        while (waitpid(pids[r], &wstatus[r], 0) < 0 && errno == EINTR) {
        }
        done[r] = timed_out[r] = 1;
      }
      remaining = 0;
    }
    if (remaining > 0 && !progressed) usleep(10000);
  }
  for (int r = 0; status != NULL && r < n; r++) {
    int st = wstatus[r];
    status[r] = r >= started ? WEFT_TEST_RANK_NOT_STARTED
                : timed_out[r] ? WEFT_TEST_RANK_TIMED_OUT
                : WIFSIGNALED(st) ? WEFT_TEST_KILLED_BY(WTERMSIG(st))
                : WEXITSTATUS(st);
  }
  for (int r = 0; r < started; r++) {
    int st = wstatus[r];
    if (timed_out[r] && started < n) {
      fprintf(stderr, "rank %d/%d: killed (not every rank could start)\n", r, n);
    } else if (timed_out[r]) {
      fprintf(stderr, "rank %d/%d: still running after %d s: killed\n", r, n, timeout_s);
    } else if (WIFEXITED(st) && WEXITSTATUS(st) != 0) {
      fprintf(stderr, "rank %d/%d: exited with %d failure(s)%s\n", r, n, WEXITSTATUS(st),
              WEXITSTATUS(st) == 255 ? " or more" : "");
    } else if (WIFSIGNALED(st)) {
      fprintf(stderr, "rank %d/%d: killed by signal %d (%s)\n", r, n, WTERMSIG(st), strsignal(WTERMSIG(st)));
    } else {
      continue;
    }
    bad++;
  }
  if (started < n || res != ncclSuccess) return -1;
  return bad;
}

typedef struct {
  weft_test_rank_fn fn;
  void *arg;
} weft_test_one_id_t;

static inline int weft_test_one_id_main(int rank, int nranks, ncclUniqueId *ids, void *p) {
  const weft_test_one_id_t *one = p;
  return one->fn(rank, nranks, ids[0], one->arg);
}

// weft_test_fork_ranks_ids with one unique id, handed to fn by value, and
// no per-rank status.
static inline int weft_test_fork_ranks(int n, weft_test_rank_fn fn, void *arg, int timeout_s) {
  if (fn == NULL) {
    fprintf(stderr, "weft_test_fork_ranks: bad arguments (n=%d)\n", n);
    return -1;
  }
  weft_test_one_id_t one = {fn, arg};
  return weft_test_fork_ranks_ids(n, 1, weft_test_one_id_main, &one, timeout_s, NULL);
}

// Zeroed memory shared with the ranks this process forks afterwards (they
// leave results there for the test to check), or NULL.
static inline void *weft_test_shared_alloc(size_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static inline void weft_test_shared_free(void *p, size_t bytes) {
  if (p != NULL) munmap(p, bytes);
}

// ---- Expectations in a Criterion test process ----

// A call must return `want` (cr_expect: the test carries on).
#define WEFT_TEST_EXPECT_RES(call, want)                                                                \
  do {                                                                                                  \
    ncclResult_t r_ = (call);                                                                           \
    cr_expect(r_ == (want), "%s returned %d (%s), expected %d", #call, (int)r_, ncclGetErrorString(r_), \
              (int)(want));                                                                             \
  } while (0)

// Forks n ranks with nids unique ids (weft_test_fork_ranks_ids) and expects
// every one to exit 0; why one did not is on stderr.
#define WEFT_TEST_EXPECT_FORK_OK(n, nids, fn, arg, timeout_s)                                                  \
  do {                                                                                                         \
    int bad_ = weft_test_fork_ranks_ids((n), (nids), (fn), (arg), (timeout_s), NULL);                          \
    cr_expect_eq(bad_, 0, "%d of %d ranks failed (-1: they could not all start; see stderr)", bad_, (int)(n)); \
  } while (0)

// ---- Ranks as threads of this process ----

// One rank's body on its own communicator: returns its failures.
typedef int (*weft_test_thread_fn)(int rank, int nranks, ncclComm_t comm, void *arg);

typedef struct {
  weft_test_thread_fn fn;
  void *arg;
  int rank, nranks;
  ncclComm_t comm;
  int fails;
} weft_test_thread_job_t;

static inline void *weft_test_thread_main(void *p) {
  weft_test_thread_job_t *j = p;
  j->fails = j->fn(j->rank, j->nranks, j->comm, j->arg);
  return NULL;
}

// Runs fn on comms[0..n-1] (rank i on comms[i]), one thread each, and
// returns the total failures; -1 when a thread could not start (the
// others are still joined, and may then wait on the missing rank until the
// library's own timeout).
static inline int weft_test_thread_ranks(int n, ncclComm_t *comms, weft_test_thread_fn fn,
                                         void *arg) {
  if (n < 1 || n > WEFT_TEST_MAX_RANKS || comms == NULL || fn == NULL) return -1;
  weft_test_thread_job_t jobs[WEFT_TEST_MAX_RANKS];
  pthread_t th[WEFT_TEST_MAX_RANKS];
  int started = 0, total = 0;
  for (; started < n; started++) {
    jobs[started] = (weft_test_thread_job_t){fn, arg, started, n, comms[started], 0};
    if (pthread_create(&th[started], NULL, weft_test_thread_main, &jobs[started]) != 0) {
      fprintf(stderr, "weft_test_thread_ranks: cannot start rank %d\n", started);
      break;
    }
  }
  for (int r = 0; r < started; r++) {
    pthread_join(th[r], NULL);
    if (jobs[r].fails != 0) fprintf(stderr, "rank %d/%d (thread): %d failure(s)\n", r, n, jobs[r].fails);
    total += jobs[r].fails;
  }
  return started < n ? -1 : total;
}

// ---- Datatypes ----

typedef struct {
  ncclDataType_t dt;
  const char *name;
  size_t size;
  int is_float;
  int is_signed;  // integers only
  int ebits, mbits;  // floating formats: exponent and stored mantissa bits
  int ieee;          // 1: all-ones exponent is inf/NaN; 0 (e4m3): only S.1111.111 is NaN
} weft_test_dtype_t;

// The datatype's description, or NULL for a value outside ncclDataType_t.
static inline const weft_test_dtype_t *weft_test_dtype(ncclDataType_t dt) {
  static const weft_test_dtype_t table[ncclNumTypes] = {
      {ncclInt8, "int8", 1, 0, 1, 0, 0, 0},
      {ncclUint8, "uint8", 1, 0, 0, 0, 0, 0},
      {ncclInt32, "int32", 4, 0, 1, 0, 0, 0},
      {ncclUint32, "uint32", 4, 0, 0, 0, 0, 0},
      {ncclInt64, "int64", 8, 0, 1, 0, 0, 0},
      {ncclUint64, "uint64", 8, 0, 0, 0, 0, 0},
      {ncclFloat16, "float16", 2, 1, 1, 5, 10, 1},
      {ncclFloat32, "float32", 4, 1, 1, 8, 23, 1},
      {ncclFloat64, "float64", 8, 1, 1, 11, 52, 1},
      {ncclBfloat16, "bfloat16", 2, 1, 1, 8, 7, 1},
      {ncclFloat8e4m3, "float8e4m3", 1, 1, 1, 4, 3, 0},
      {ncclFloat8e5m2, "float8e5m2", 1, 1, 1, 5, 2, 1},
  };
  return ((int)dt >= 0 && (int)dt < ncclNumTypes) ? &table[dt] : NULL;
}

// Element bits (little-endian host) as an integer; size is 1, 2, 4 or 8.
static inline uint64_t weft_test_load(const void *p, size_t size) {
  switch (size) {
    case 1: return *(const uint8_t *)p;
    case 2: { uint16_t v; memcpy(&v, p, 2); return v; }
    case 4: { uint32_t v; memcpy(&v, p, 4); return v; }
    default: { uint64_t v; memcpy(&v, p, 8); return v; }
  }
}

static inline void weft_test_store(void *p, size_t size, uint64_t v) {
  switch (size) {
    case 1: *(uint8_t *)p = (uint8_t)v; break;
    case 2: { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); break; }
    case 4: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
    default: memcpy(p, &v, 8); break;
  }
}

// Rounds a finite or infinite double to a floating format with
// round-to-nearest-even (subnormals included). Overflow gives infinity, or
// NaN in e4m3, which has no infinity; NaN gives a quiet NaN.
static inline uint64_t weft_test_float_bits(const weft_test_dtype_t *t, double x) {
  if (t->size == 8) {
    uint64_t b;
    memcpy(&b, &x, 8);
    return b;
  }
  if (t->size == 4) {
    float f = (float)x;
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
  }
  int eb = t->ebits, mb = t->mbits;
  int bias = (1 << (eb - 1)) - 1;
  uint64_t sign = signbit(x) ? (uint64_t)1 << (eb + mb) : 0;
  uint64_t emax_field = ((uint64_t)1 << eb) - 1;
  uint64_t mmask = ((uint64_t)1 << mb) - 1;
  uint64_t nan = t->ieee ? (emax_field << mb) | ((uint64_t)1 << (mb - 1)) : (emax_field << mb) | mmask;
  if (isnan(x)) return sign | nan;
  double a = fabs(x);
  // Largest finite magnitude's bit pattern (without sign).
  uint64_t maxfin = t->ieee ? ((emax_field - 1) << mb) | mmask : (emax_field << mb) | (mmask - 1);
  if (a == 0) return sign;
  int e2;
  frexp(a, &e2);      // a = f * 2^e2, f in [0.5, 1)
  int e = e2 - 1;     // a = 1.m * 2^e
  uint64_t bits;
  if (e + bias >= 1) {
    double q = rint(ldexp(a, mb - e) - ldexp(1.0, mb));  // mantissa, ties to even
    bits = ((uint64_t)(e + bias) << mb) + (uint64_t)q;   // a carry moves into the exponent
  } else {
    double q = rint(ldexp(a, bias - 1 + mb));            // subnormal quantum 2^(1-bias-mb)
    bits = (uint64_t)q;
  }
  if (isinf(a) || bits > maxfin) return sign | (t->ieee ? emax_field << mb : nan);
  return sign | bits;
}

// Decodes a floating element's bits to double (exact for every format).
static inline double weft_test_float_value(const weft_test_dtype_t *t, uint64_t bits) {
  if (t->size == 8) {
    double d;
    memcpy(&d, &bits, 8);
    return d;
  }
  if (t->size == 4) {
    uint32_t b = (uint32_t)bits;
    float f;
    memcpy(&f, &b, 4);
    return f;
  }
  int eb = t->ebits, mb = t->mbits;
  int bias = (1 << (eb - 1)) - 1;
  uint64_t emax_field = ((uint64_t)1 << eb) - 1, mmask = ((uint64_t)1 << mb) - 1;
  uint64_t e = (bits >> mb) & emax_field, m = bits & mmask;
  double s = (bits >> (eb + mb)) & 1 ? -1.0 : 1.0;
  if (t->ieee && e == emax_field) return m ? NAN : s * INFINITY;
  if (!t->ieee && e == emax_field && m == mmask) return NAN;
  if (e == 0) return s * ldexp((double)m, 1 - bias - mb);
  return s * ldexp((double)(m | ((uint64_t)1 << mb)), (int)e - bias - mb);
}

// Bits of integer v in the datatype: integers wrap to their width (two's
// complement), floating formats round to nearest even.
static inline uint64_t weft_test_encode_int(const weft_test_dtype_t *t, int64_t v) {
  if (t->is_float) return weft_test_float_bits(t, (double)v);
  uint64_t mask = t->size == 8 ? ~(uint64_t)0 : (((uint64_t)1 << (8 * t->size)) - 1);
  return (uint64_t)v & mask;
}

// Value of an element as double (integers by their signedness).
static inline double weft_test_value(const weft_test_dtype_t *t, uint64_t bits) {
  if (t->is_float) return weft_test_float_value(t, bits);
  int w = 8 * (int)t->size;
  if (t->is_signed && w < 64 && (bits >> (w - 1)) & 1) return (double)(int64_t)(bits | (~(uint64_t)0 << w));
  return t->is_signed ? (double)(int64_t)bits : (double)bits;
}

// Floating bits with -0 mapped to +0 (every other pattern unchanged).
static inline uint64_t weft_test_canon(const weft_test_dtype_t *t, uint64_t bits) {
  if (t->is_float && bits == (uint64_t)1 << (8 * t->size - 1)) return 0;
  return bits;
}

// ---- Hashing ----

// A 64-bit mix of x (splitmix64's finaliser): a cheap deterministic source
// of arbitrary bit patterns.
static inline uint64_t weft_test_mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A 64-bit hash of bytes: 8 bytes at a time through a multiply-xorshift,
// the tail byte by byte, the length folded in, finished with mix64.
static inline uint64_t weft_test_hash(const void *p, size_t bytes) {
  const unsigned char *c = p;
  uint64_t h = 0xcbf29ce484222325ull;
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    memcpy(&w, c + i, 8);
    h = (h ^ w) * 0x9fb21c651e98df25ull;
    h ^= h >> 29;
  }
  for (; i < bytes; i++) h = (h ^ c[i]) * 0x100000001b3ull;
  return weft_test_mix64(h ^ bytes);
}

#endif  // WEFT_TEST_HARNESS_H
