/*
 * test_net_idle.c — a communicator whose traffic crosses the network
 * backend costs no CPU while the program does something else.
 *
 * Forked ranks with shared memory off (NCCL_SHM_DISABLE=1), so the network
 * proxy carries every byte. Each rank all-reduces, then sleeps for a second
 * and measures the CPU time its process used meanwhile (getrusage): the
 * proxy must sleep in epoll, not poll its sockets. It once polled at 100%
 * of a core, because an idle sender's sockets are always writable and kept
 * the poll descriptor ready. After the pause, an all-reduce must still be
 * exact. With the built-in Socket network and with the example net plugin,
 * which has no descriptors to wait on (its proxy naps instead).
 */
#include <criterion/criterion.h>
#include <sys/resource.h>

#include "harness.h"

#define IDLE_MS 1000
#define MAX_CPU_MS 250  // of the second: the proxy wakes every few ms to look for failures

static int64_t cpu_ms(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return ((int64_t)u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1000;
}

static void all_reduce_checked(ncclComm_t comm, int rank, int n, int32_t *buf, size_t count) {
  for (size_t i = 0; i < count; i++) buf[i] = rank + (int32_t)(i % 7);
  WEFT_TEST_CHECK_RES(ncclAllReduce(buf, buf, count, ncclInt32, ncclSum, comm, NULL), ncclSuccess);
  int bad = 0;
  for (size_t i = 0; i < count && !bad; i++) bad = buf[i] != n * (n - 1) / 2 + n * (int32_t)(i % 7);
  WEFT_TEST_CHECK(!bad, "AllReduce of %zu elements", count);
}

static int idle_body(int rank, int n, ncclUniqueId id, void *arg) {
  (void)arg;
  ncclComm_t comm = weft_test_init_rank(n, id, rank);
  if (comm == NULL) return weft_test_failures();
  enum { COUNT = 100000 };
  int32_t *buf = malloc(COUNT * sizeof(int32_t));
  WEFT_TEST_CHECK(buf != NULL, "malloc");
  if (buf == NULL) return weft_test_failures();
  all_reduce_checked(comm, rank, n, buf, COUNT);
  int64_t before = cpu_ms();
  weft_test_sleep_ms(IDLE_MS);
  int64_t used = cpu_ms() - before;
  WEFT_TEST_CHECK(used < MAX_CPU_MS, "rank %d used %lld ms of CPU in %d ms of idleness", rank, (long long)used,
                  IDLE_MS);
  all_reduce_checked(comm, rank, n, buf, COUNT);
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  free(buf);
  return weft_test_failures();
}

static void run_idle(const char *net, const char *plugin) {
  weft_test_env_defaults();
  setenv("WEFT_TIMEOUT", "30", 1);
  setenv("NCCL_SHM_DISABLE", "1", 1);
  setenv("NCCL_NET", net, 1);
  if (plugin != NULL) setenv("NCCL_NET_PLUGIN", plugin, 1);
  else unsetenv("NCCL_NET_PLUGIN");
  WEFT_TEST_EXPECT_FORK_OK(2, 1, weft_test_one_id_main, (&(weft_test_one_id_t){idle_body, NULL}), 60);
}

TestSuite(net_idle, .timeout = 90);

Test(net_idle, socket_proxy_sleeps) { run_idle("Socket", NULL); }
Test(net_idle, plugin_proxy_naps) { run_idle("example", "example"); }
