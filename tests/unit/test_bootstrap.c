/*
 * test_bootstrap.c — the rendezvous and bootstrap ring under hostile and
 * unusual conditions: strangers on the root's port, NCCL_COMM_ID (rank 0
 * hosts the root), ranks that never arrive, a rank whose hello crawls in
 * over a slow, lossy link, and the ring's allgather.
 * Internal test: it reads the root's address out of the unique id.
 */
#include <criterion/criterion.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "comm.h"
#include "debug.h"
#include "env.h"
#include "nccl.h"
#include "rendezvous.h"
#include "socket.h"
#include "util.h"

typedef struct {
  ncclUniqueId id;
  int nranks, rank;
  ncclComm_t comm;
  ncclResult_t res;
  int sum;  // AllReduce of (rank + 1) over the communicator
} rank_job_t;

static void *rank_main(void *arg) {
  rank_job_t *j = arg;
  j->res = pncclCommInitRank(&j->comm, j->nranks, j->id, j->rank);
  if (j->res != ncclSuccess) return NULL;
  int v = j->rank + 1;
  j->res = pncclAllReduce(&v, &j->sum, 1, ncclInt32, ncclSum, j->comm, NULL);
  return NULL;
}

// Runs n ranks as threads on one id; returns how many succeeded with the right sum.
static int run_ranks(const ncclUniqueId *id, int n, rank_job_t *jobs) {
  pthread_t *th = calloc((size_t)n, sizeof(*th));
  cr_assert_not_null(th);
  for (int r = 0; r < n; r++) {
    jobs[r] = (rank_job_t){.id = *id, .nranks = n, .rank = r};
    cr_assert_eq(pthread_create(&th[r], NULL, rank_main, &jobs[r]), 0);
  }
  int good = 0;
  for (int r = 0; r < n; r++) {
    pthread_join(th[r], NULL);
    good += jobs[r].res == ncclSuccess && jobs[r].sum == n * (n + 1) / 2;
  }
  free(th);
  return good;
}

static void destroy_all(rank_job_t *jobs, int n) {
  for (int r = 0; r < n; r++)
    if (jobs[r].comm != NULL) pncclCommDestroy(jobs[r].comm);
}

static void setup(void) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("WEFT_TIMEOUT", "20", 1);
  unsetenv("NCCL_COMM_ID");
  weft_env_reset();
}

TestSuite(bootstrap, .init = setup, .timeout = 60);

Test(bootstrap, strangers_are_rejected_and_the_job_goes_on) {
  ncclUniqueId uid;
  cr_assert_eq(pncclGetUniqueId(&uid), ncclSuccess);
  weft_id_t id;
  cr_assert_eq(weft_id_decode(&uid, &id), ncclSuccess);

  // Three strangers: garbage, a well-formed hello with the wrong secret, and silence.
  int fds[3];
  for (int i = 0; i < 3; i++) cr_assert_eq(weft_socket_connect(&id.root, 2000, &fds[i]), ncclSuccess);
  char garbage[256];
  memset(garbage, 0x5a, sizeof(garbage));
  cr_assert_eq(weft_socket_send(fds[0], garbage, sizeof(garbage), 1000), ncclSuccess);
  uint32_t fake[64] = {WEFT_ID_MAGIC, 1};
  cr_assert_eq(weft_socket_send(fds[1], fake, sizeof(fake), 1000), ncclSuccess);

  rank_job_t jobs[3];
  cr_assert_eq(run_ranks(&uid, 3, jobs), 3, "ranks failed although only strangers misbehaved");
  destroy_all(jobs, 3);
  cr_expect(strstr(weft_debug_last_error(), "rejected") != NULL, "no rejection logged: '%s'",
            weft_debug_last_error());
  for (int i = 0; i < 3; i++) weft_socket_close(&fds[i]);
}

Test(bootstrap, nccl_comm_id_makes_rank0_host_the_root) {
  // Find a free loopback port, then let rank 0 host the rendezvous there.
  weft_sockaddr_t a;
  int fd = -1;
  cr_assert_eq(weft_socket_parse_addr("127.0.0.1:0", &a), ncclSuccess);
  cr_assert_eq(weft_socket_listen(&a, &fd), ncclSuccess);
  char text[WEFT_ADDR_STRLEN];
  weft_socket_addr_str(&a, text, sizeof(text));
  weft_socket_close(&fd);
  setenv("NCCL_COMM_ID", text, 1);
  weft_env_reset();

  ncclUniqueId uid;
  cr_assert_eq(pncclGetUniqueId(&uid), ncclSuccess);
  weft_id_t id;
  cr_assert_eq(weft_id_decode(&uid, &id), ncclSuccess);
  cr_assert(id.flags & WEFT_ID_HOSTED_BY_RANK0, "NCCL_COMM_ID ids are hosted by rank 0");

  rank_job_t jobs[4];
  cr_assert_eq(run_ranks(&uid, 4, jobs), 4);
  destroy_all(jobs, 4);
}

Test(bootstrap, a_missing_rank_is_named_after_the_timeout) {
  setenv("WEFT_TIMEOUT", "1", 1);
  weft_env_reset();
  ncclUniqueId uid;
  cr_assert_eq(pncclGetUniqueId(&uid), ncclSuccess);
  // Only ranks 0 and 1 of 3 show up.
  rank_job_t jobs[2];
  pthread_t th[2];
  for (int r = 0; r < 2; r++) {
    jobs[r] = (rank_job_t){.id = uid, .nranks = 3, .rank = r};
    cr_assert_eq(pthread_create(&th[r], NULL, rank_main, &jobs[r]), 0);
  }
  for (int r = 0; r < 2; r++) {
    pthread_join(th[r], NULL);
    cr_expect_neq(jobs[r].res, ncclSuccess, "rank %d initialised without rank 2", r);
    cr_expect_null(jobs[r].comm);
  }
  cr_expect(strstr(weft_debug_last_error(), "never arrived: 2") != NULL, "the missing rank is not named: '%s'",
            weft_debug_last_error());
}

// A link that holds a rank's hello the way TCP retransmissions over a lossy
// link can: the root sees the connection silent for silence_ms, then gets
// the first bytes of the header, and the rest split_ms later. Afterwards the
// link relays the root's answer.
typedef struct {
  int listen_fd;
  weft_sockaddr_t root;
  int silence_ms, split_ms;
} slow_link_t;

static void pause_ms(int ms) { poll(NULL, 0, ms); }

static void *slow_link_main(void *arg) {
  slow_link_t *l = arg;
  int rank_fd = -1, root_fd = -1;
  if (weft_socket_accept(l->listen_fd, 10000, &rank_fd, NULL) != ncclSuccess ||
      weft_socket_connect(&l->root, 2000, &root_fd) != ncclSuccess)
    goto out;
  pause_ms(l->silence_ms);
  // The hello: all the rank sends before it waits for the answer.
  char buf[4096];
  size_t got = 0;
  for (;;) {
    struct pollfd p = {.fd = rank_fd, .events = POLLIN};
    size_t before = got;
    if (poll(&p, 1, got == 0 ? 10000 : 100) <= 0 ||
        weft_socket_recv_some(rank_fd, buf, sizeof(buf), &got) != ncclSuccess || got == before)
      break;
  }
  if (got < 8) goto out;
  if (weft_socket_send(root_fd, buf, 5, 1000) != ncclSuccess) goto out;
  pause_ms(l->split_ms);
  if (weft_socket_send(root_fd, buf + 5, got - 5, 1000) != ncclSuccess) goto out;
  for (;;) {  // the root's answer, until it closes
    struct pollfd p = {.fd = root_fd, .events = POLLIN};
    if (poll(&p, 1, 30000) <= 0) break;
    ssize_t n = recv(root_fd, buf, sizeof(buf), 0);
    if (n <= 0 || weft_socket_send(rank_fd, buf, (size_t)n, 1000) != ncclSuccess) break;
  }
out:
  weft_socket_close(&root_fd);
  weft_socket_close(&rank_fd);
  return NULL;
}

// Two ranks, rank 0 behind a slow link; both must initialise and reduce.
static void run_behind_slow_link(int silence_ms, int split_ms) {
  ncclUniqueId uid;
  cr_assert_eq(pncclGetUniqueId(&uid), ncclSuccess);
  weft_id_t id;
  cr_assert_eq(weft_id_decode(&uid, &id), ncclSuccess);
  slow_link_t link = {.listen_fd = -1, .root = id.root, .silence_ms = silence_ms, .split_ms = split_ms};
  weft_sockaddr_t via;
  cr_assert_eq(weft_socket_parse_addr("127.0.0.1:0", &via), ncclSuccess);
  cr_assert_eq(weft_socket_listen(&via, &link.listen_fd), ncclSuccess);
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, slow_link_main, &link), 0);

  // Rank 1 reaches the root directly; rank 0 through the slow link.
  weft_id_t slow = id;
  slow.root = via;
  rank_job_t jobs[2];
  pthread_t rt[2];
  for (int r = 0; r < 2; r++) {
    jobs[r] = (rank_job_t){.id = uid, .nranks = 2, .rank = r};
    if (r == 0) weft_id_encode(&slow, &jobs[r].id);
    cr_assert_eq(pthread_create(&rt[r], NULL, rank_main, &jobs[r]), 0);
  }
  for (int r = 0; r < 2; r++) pthread_join(rt[r], NULL);
  pthread_join(th, NULL);
  weft_socket_close(&link.listen_fd);
  for (int r = 0; r < 2; r++)
    cr_expect(jobs[r].res == ncclSuccess && jobs[r].sum == 3, "rank %d: %s (sum %d): %s", r,
              pncclGetErrorString(jobs[r].res), jobs[r].sum, weft_debug_last_error());
  destroy_all(jobs, 2);
}

// The root once gave a connection that spoke 200 ms to finish its header...
Test(bootstrap, a_hello_split_by_a_retransmission_is_accepted) { run_behind_slow_link(0, 300); }

// ... and dropped one that stayed silent for 5 s.
Test(bootstrap, a_hello_that_comes_after_long_silence_is_accepted, .timeout = 40) { run_behind_slow_link(5500, 0); }

// The root registers up to 64 connections at once; a job has no such limit
// (every rank used to need its own slot until the table went out).
Test(bootstrap, a_job_larger_than_the_roots_pending_slots_starts, .timeout = 120) {
  enum { N = 80 };
  ncclUniqueId uid;
  cr_assert_eq(pncclGetUniqueId(&uid), ncclSuccess);
  rank_job_t *jobs = calloc(N, sizeof(*jobs));
  cr_assert_not_null(jobs);
  int good = run_ranks(&uid, N, jobs);
  destroy_all(jobs, N);
  cr_expect_eq(good, N, "%d of %d ranks initialised and all-reduced: %s", good, N, weft_debug_last_error());
  free(jobs);
}

typedef struct {
  ncclComm_t parent, child;
  ncclResult_t res;
  int64_t ms;
} shrink_job_t;

static void *shrink_main(void *arg) {
  shrink_job_t *j = arg;
  int exclude[1] = {2};
  int64_t t0 = weft_now_ms();
  j->res = pncclCommShrink(j->parent, exclude, 1, &j->child, NULL, NCCL_SHRINK_DEFAULT);
  j->ms = weft_now_ms() - t0;
  return NULL;
}

// The lowest survivor of ncclCommShrink reads the survivors' hellos beside a
// stranger that connected first and says nothing; it once waited 5 s on it.
Test(bootstrap, a_silent_stranger_does_not_hold_up_a_shrink) {
  ncclUniqueId uid;
  cr_assert_eq(pncclGetUniqueId(&uid), ncclSuccess);
  rank_job_t jobs[3];
  cr_assert_eq(run_ranks(&uid, 3, jobs), 3);
  int stranger = -1;
  cr_assert_eq(weft_socket_connect(&jobs[0].comm->bs.peers[0].listen, 2000, &stranger), ncclSuccess);
  pause_ms(200);  // the stranger is first in rank 0's backlog
  shrink_job_t sj[2];
  pthread_t th[2];
  for (int r = 0; r < 2; r++) {
    sj[r] = (shrink_job_t){.parent = jobs[r].comm};
    cr_assert_eq(pthread_create(&th[r], NULL, shrink_main, &sj[r]), 0);
  }
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < 2; r++) {
    cr_expect_eq(sj[r].res, ncclSuccess, "rank %d: %s", r, weft_debug_last_error());
    cr_expect_lt(sj[r].ms, 3000, "rank %d took %lld ms to shrink", r, (long long)sj[r].ms);
    if (sj[r].child != NULL) pncclCommDestroy(sj[r].child);
  }
  weft_socket_close(&stranger);
  destroy_all(jobs, 3);
}

// The root raises the open-file limit to the hard one, as NCCL's does: a
// job of a few hundred ranks must not die of EMFILE at a soft limit of 1024.
Test(bootstrap, the_root_raises_the_open_file_limit) {
  struct rlimit lim;
  cr_assert_eq(getrlimit(RLIMIT_NOFILE, &lim), 0);
  if (lim.rlim_max <= 64) cr_skip_test("the hard open-file limit is %llu", (unsigned long long)lim.rlim_max);
  lim.rlim_cur = 64;
  cr_assert_eq(setrlimit(RLIMIT_NOFILE, &lim), 0);
  ncclUniqueId uid;
  cr_assert_eq(pncclGetUniqueId(&uid), ncclSuccess);
  struct rlimit now = {0};
  for (int i = 0; i < 100 && now.rlim_cur != lim.rlim_max; i++) {  // the root's thread does it
    pause_ms(10);
    getrlimit(RLIMIT_NOFILE, &now);
  }
  cr_expect_eq(now.rlim_cur, lim.rlim_max, "soft limit %llu, hard %llu", (unsigned long long)now.rlim_cur,
               (unsigned long long)lim.rlim_max);
  rank_job_t jobs[2];
  cr_expect_eq(run_ranks(&uid, 2, jobs), 2);
  destroy_all(jobs, 2);
}

Test(bootstrap, a_garbage_unique_id_is_refused) {
  ncclUniqueId uid;
  memset(&uid, 0x5a, sizeof(uid));
  ncclComm_t c = NULL;
  cr_expect_eq(pncclCommInitRank(&c, 2, uid, 0), ncclInvalidArgument);
  cr_expect_null(c);
}
