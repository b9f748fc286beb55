/*
 * abi_link_230.c — a program built only against an nccl.h of NCCL 2.30
 * (NVIDIA's when one is at hand, else weft's own), run on weft's
 * libnccl.so.2 across processes it forks itself.
 *
 * What abi_link.c is for the 2.28 calls, this is for the ones 2.30 added:
 * two processes make a communicator from a 2.30 config (its new fields
 * set), then grow it to three with a process that joins from outside
 * (ncclCommGetUniqueId on rank 0, ncclCommGrow with rank -1 on the
 * existing ranks, only rank 0 passing the id, and a NULL communicator on
 * the new one). On the grown communicator each rank checks ncclCommMemStats
 * around ncclCommSuspend/ncclCommResume (a suspended communicator refuses a
 * collective, a resumed one runs it), then registers a host window and
 * writes into the next rank's part with ncclPutSignal and ncclSignal, waits
 * for its previous rank's with ncclWaitSignal and checks every element.
 * The parent only hands out the first unique id and waits; every step in
 * the children is asserted. Prints "ok ..." and exits 0 on success; prints
 * the failed check and exits 1 otherwise.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nccl.h>

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 30, 0)
#error "abi_link_230.c needs an nccl.h of NCCL 2.30 or later"
#endif

#define NPROC 3        // two ranks, then a third that joins by growing
#define N 1031         // elements per collective: odd, so no whole-vector path hides a tail
#define PUT_INTS 333   // ints per put
#define WIN_INTS 4096  // ints per rank's part of the window
#define LIMIT_S 60     // the whole run; each wait inside is shorter

// What the processes share: the grow id rank 0 publishes for the newcomer.
typedef struct {
  ncclUniqueId grow_id;
  int grow_id_ready;  // set with release order once grow_id is written
} shared_t;

static shared_t *shared;
static int me = -1;  // this process's index, for messages

static int fail(const char *what) {
  fprintf(stderr, "abi_link_230: process %d: FAIL: %s\n", me, what);
  return 1;
}

// Run a call that must succeed; on failure report it with its error text.
#define MUST(call)                                                                                 \
  do {                                                                                             \
    ncclResult_t r_ = (call);                                                                      \
    if (r_ != ncclSuccess) {                                                                       \
      fprintf(stderr, "abi_link_230: process %d: FAIL: %s returned %d (%s)\n", me, #call, (int)r_, \
              ncclGetErrorString(r_));                                                             \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

static void nap_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static int32_t element(int rank, int i) { return rank * 100000 + i; }

// AllReduce(sum) of element(rank, i) over nranks ranks, checked exactly.
static int check_allreduce(ncclComm_t comm, int rank, int nranks) {
  static int32_t in[N], out[N];
  for (int i = 0; i < N; i++) in[i] = element(rank, i), out[i] = -1;
  MUST(ncclAllReduce(in, out, N, ncclInt32, ncclSum, comm, NULL));
  for (int i = 0; i < N; i++) {
    int32_t want = 0;
    for (int r = 0; r < nranks; r++) want += element(r, i);
    if (out[i] != want) return fail("ncclAllReduce gave a wrong sum");
  }
  return 0;
}

// ncclCommMemStats around ncclCommSuspend(NCCL_SUSPEND_MEM) and ncclCommResume.
static int check_suspend(ncclComm_t comm, int rank, int nranks) {
  uint64_t suspended = 9, releasable = 9, persist = 9, total = 9;
  MUST(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &suspended));
  MUST(ncclCommMemStats(comm, ncclStatGpuMemSuspend, &releasable));
  MUST(ncclCommMemStats(comm, ncclStatGpuMemPersist, &persist));
  MUST(ncclCommMemStats(comm, ncclStatGpuMemTotal, &total));
  if (suspended != 0) return fail("an active communicator reports itself suspended");
  if (total != releasable + persist) return fail("ncclStatGpuMemTotal is not Suspend + Persist");
  MUST(ncclCommSuspend(comm, NCCL_SUSPEND_MEM));
  MUST(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &suspended));
  if (suspended != 1) return fail("a communicator suspended with NCCL_SUSPEND_MEM reports itself active");
  int32_t x = 1, y = 0;
  if (ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, NULL) == ncclSuccess)
    return fail("a suspended communicator ran a collective");
  MUST(ncclCommResume(comm));
  MUST(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &suspended));
  if (suspended != 0) return fail("a resumed communicator reports itself suspended");
  return check_allreduce(comm, rank, nranks);  // the refused call launched nothing anywhere
}

// A host window on every rank; each writes into the next rank's part and
// waits for what the previous rank wrote into its own.
static int check_one_sided(ncclComm_t comm, int rank, int nranks) {
  size_t bytes = WIN_INTS * sizeof(int32_t);
  int32_t *part = aligned_alloc(NCCL_WIN_REQUIRED_ALIGNMENT, bytes);
  if (part == NULL) return fail("out of memory");
  memset(part, 0, bytes);
  ncclWindow_t win = NULL;
  MUST(ncclCommWindowRegister(comm, part, bytes, &win, NCCL_WIN_DEFAULT | NCCL_WIN_STRICT_ORDERING));
  void *user = NULL;
  MUST(ncclWinGetUserPtr(comm, win, &user));
  if (user != part) return fail("ncclWinGetUserPtr does not give back the registered buffer");

  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  int32_t src[PUT_INTS];
  for (int i = 0; i < PUT_INTS; i++) src[i] = element(rank, i) ^ 0x5a5a;
  size_t at = 128;  // ints into the peer's part
  MUST(ncclPutSignal(src, PUT_INTS, ncclInt32, next, win, at * sizeof(int32_t), 0, 0, 0, comm, NULL));
  MUST(ncclSignal(next, 0, 0, 0, comm, NULL));
  ncclWaitSignalDesc_t desc = {.opCnt = 2, .peer = prev, .sigIdx = 0, .ctx = 0};
  MUST(ncclWaitSignal(1, &desc, comm, NULL));
  for (int i = 0; i < PUT_INTS; i++)
    if (part[at + i] != (element(prev, i) ^ 0x5a5a)) return fail("ncclPutSignal's data is wrong in the window");
  if (part[at - 1] != 0 || part[at + PUT_INTS] != 0) return fail("ncclPutSignal wrote outside its range");
  // Every rank has read its part before any window goes.
  if (check_allreduce(comm, rank, nranks)) return 1;
  MUST(ncclCommWindowDeregister(comm, win));
  free(part);
  return 0;
}

// Everything a rank of the grown communicator checks.
static int on_grown(ncclComm_t grown, int rank) {
  int count = -1, got = -1;
  MUST(ncclCommCount(grown, &count));
  MUST(ncclCommUserRank(grown, &got));
  if (count != NPROC) return fail("the grown communicator does not have 3 ranks");
  if (got != rank) return fail("a rank of the grown communicator does not have the rank it should");
  if (check_allreduce(grown, rank, NPROC)) return 1;
  if (check_suspend(grown, rank, NPROC)) return 1;
  if (check_one_sided(grown, rank, NPROC)) return 1;
  MUST(ncclCommDestroy(grown));
  return 0;
}

// Processes 0 and 1: a 2-rank communicator from a 2.30 config, then grown.
static int existing_rank(int rank, ncclUniqueId id) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  if (cfg.size != sizeof(ncclConfig_t) || cfg.magic != NCCL_API_MAGIC || cfg.version != NCCL_VERSION_CODE)
    return fail("NCCL_CONFIG_INITIALIZER does not fill size, magic and version");
  if (cfg.graphUsageMode != NCCL_CONFIG_UNDEF_INT || cfg.graphStreamOrdering != NCCL_CONFIG_UNDEF_INT)
    return fail("NCCL_CONFIG_INITIALIZER leaves a 2.30 field set");
  cfg.commName = "abi_link_230";
  cfg.numRmaCtx = 1;
  cfg.maxP2pPeers = 2;
  cfg.graphUsageMode = 1;
  cfg.graphStreamOrdering = 1;
  ncclComm_t comm = NULL;
  MUST(ncclCommInitRankConfig(&comm, 2, id, rank, &cfg));
  if (check_allreduce(comm, rank, 2)) return 1;

  ncclComm_t grown = NULL;
  if (rank == 0) {
    ncclUniqueId gid;
    MUST(ncclCommGetUniqueId(comm, &gid));
    shared->grow_id = gid;
    __atomic_store_n(&shared->grow_id_ready, 1, __ATOMIC_RELEASE);
    MUST(ncclCommGrow(comm, NPROC, &gid, -1, &grown, NULL));
  } else {
    MUST(ncclCommGrow(comm, NPROC, NULL, -1, &grown, NULL));
  }
  if (grown == NULL) return fail("ncclCommGrow gave no communicator");
  if (on_grown(grown, rank)) return 1;
  if (check_allreduce(comm, rank, 2)) return 1;  // the parent is as it was
  MUST(ncclCommDestroy(comm));
  return 0;
}

// Process 2: joins with the id rank 0 published.
static int new_rank(void) {
  for (int i = 0; i < 30000 && !__atomic_load_n(&shared->grow_id_ready, __ATOMIC_ACQUIRE); i++) nap_ms(1);
  if (!__atomic_load_n(&shared->grow_id_ready, __ATOMIC_ACQUIRE)) return fail("rank 0 never published the grow id");
  ncclUniqueId gid = shared->grow_id;
  ncclComm_t grown = NULL;
  MUST(ncclCommGrow(NULL, NPROC, &gid, 2, &grown, NULL));
  if (grown == NULL) return fail("ncclCommGrow gave the new rank no communicator");
  return on_grown(grown, 2);
}

// The library must be weft: its extension symbol is visible process-wide.
static int check_is_weft(void) {
  if (dlsym(RTLD_DEFAULT, "weftGetVersion") == NULL)
    return fail("weftGetVersion not found: this is not weft's libnccl.so.2");
  Dl_info info;
  memset(&info, 0, sizeof(info));
  if (dladdr((void *)ncclGetVersion, &info) && info.dli_fname)
    printf("abi_link_230: ncclGetVersion comes from %s\n", info.dli_fname);
  int version = 0;
  MUST(ncclGetVersion(&version));
  printf("abi_link_230: ncclGetVersion %d (header %d)\n", version, NCCL_VERSION_CODE);
  if (version < NCCL_VERSION_CODE) return fail("the library is older than the header this program was built with");
  return 0;
}

// A child: reads the id (process 2 only waits for the parent to be ready), runs.
static int child_main(int index, int fd) {
  ncclUniqueId id;
  size_t got = 0;
  while (got < sizeof(id)) {
    ssize_t k = read(fd, (char *)&id + got, sizeof(id) - got);
    if (k <= 0 && !(k < 0 && errno == EINTR)) return fail("the parent gave no unique id");
    if (k > 0) got += (size_t)k;
  }
  close(fd);
  return index < 2 ? existing_rank(index, id) : new_rank();
}

int main(void) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 0);  // the ranks meet on loopback
  if (check_is_weft()) return 1;
  shared = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) return fail("mmap of the shared page");
  memset(shared, 0, sizeof(*shared));

  pid_t parent = getpid(), pids[NPROC];
  int pipes[NPROC];
  fflush(NULL);
  for (int i = 0; i < NPROC; i++) {
    int fds[2];
    if (pipe(fds) != 0) return fail("pipe");
    pids[i] = fork();
    if (pids[i] < 0) return fail("fork");
    if (pids[i] == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the run
      if (getppid() != parent) _exit(1);
      me = i;
      close(fds[1]);
      for (int j = 0; j < i; j++) close(pipes[j]);
      int bad = child_main(i, fds[0]);
      fflush(NULL);
      _exit(bad ? 1 : 0);
    }
    close(fds[0]);
    pipes[i] = fds[1];
  }
  // Every child exists: now make the id (this process hosts its rendezvous).
  ncclUniqueId id;
  MUST(ncclGetUniqueId(&id));
  for (int i = 0; i < NPROC; i++) {
    if (write(pipes[i], &id, sizeof(id)) != (ssize_t)sizeof(id)) fprintf(stderr, "abi_link_230: write to %d\n", i);
    close(pipes[i]);
  }
  int bad = 0, left = NPROC, done[NPROC] = {0};
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  while (left > 0) {
    for (int i = 0; i < NPROC; i++) {
      int st;
      if (done[i] || waitpid(pids[i], &st, WNOHANG) != pids[i]) continue;
      done[i] = 1;
      left--;
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "abi_link_230: process %d failed (status 0x%x)\n", i, st);
        bad++;
      }
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (left > 0 && now.tv_sec - start.tv_sec > LIMIT_S) {
      for (int i = 0; i < NPROC; i++)
        if (!done[i]) {
          kill(pids[i], SIGKILL);
          waitpid(pids[i], NULL, 0);
          fprintf(stderr, "abi_link_230: process %d still running after %d s: killed\n", i, LIMIT_S);
          done[i] = 1;
          bad++;
        }
      left = 0;
    }
    if (left > 0) nap_ms(5);
  }
  if (bad) return fail("a process failed (see above)");
  printf("ok abi_link_230: weft runs the 2.30 calls of a program built against nccl.h %d: grow 2->3, "
         "suspend/resume, memory statistics, one-sided puts between processes\n",
         NCCL_VERSION_CODE);
  return 0;
}
