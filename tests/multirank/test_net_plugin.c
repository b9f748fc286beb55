/*
 * test_net_plugin.c — collectives over an NCCL net plugin, and the choice
 * of network (NCCL_NET_PLUGIN, NCCL_NET).
 *
 * Forked ranks with shared memory off (NCCL_SHM_DISABLE=1), so every byte
 * crosses the network backend. With NCCL_NET_PLUGIN=example the example
 * plugin (build/lib/libnccl-net-example.so, found beside libweft) carries
 * AllReduce, AllGather, Broadcast and a SendRecv ring at several sizes
 * (one element to several slots), on 2 to 4 ranks, through each ABI
 * version's adapter from 12 down to 6 (WEFT_NET_PLUGIN_VERSION), and as
 * built to export only v6 or only v7 (a plugin for an older NCCL, named
 * by its path); results are exact. Each
 * rank logs to its own file (NCCL_DEBUG_FILE), and the test reads there
 * which network every rank used and what it warned. A plugin that is not
 * there, or a library that is not a plugin, warns and falls back to the
 * built-in Socket network; NCCL_NET selects by name, and an unknown name
 * fails communicator creation with a message that names it.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "rank_logs.h"

#define TIMEOUT_S 120

typedef struct {
  int expect_fail;  // communicator creation must fail
} cfg_t;

static char logdir[256];

// The environment of one test, before any library call (the ranks inherit it).
static void env(const char *plugin, const char *net, const char *shm_disable) {
  weft_test_env_defaults();
  setenv("WEFT_TIMEOUT", "30", 1);
  setenv("NCCL_SHM_DISABLE", shm_disable, 1);
  if (plugin != NULL) setenv("NCCL_NET_PLUGIN", plugin, 1);
  else unsetenv("NCCL_NET_PLUGIN");
  if (net != NULL) setenv("NCCL_NET", net, 1);
  else unsetenv("NCCL_NET");
  cr_assert_eq(weft_test_log_per_rank(logdir, sizeof(logdir), "weft-netplugin", "INFO", "INIT,NET"), 0);
}

// How many ranks' log files contain `text`; removes them when `clean`.
static int logs_with(const char *text, int clean) {
  int found = weft_test_logs_with(logdir, text, NULL);
  if (clean) weft_test_logs_remove(logdir);
  return found;
}

static int check_all_reduce(ncclComm_t comm, int rank, int n, size_t count, int32_t *a, int32_t *b) {
  for (size_t i = 0; i < count; i++) a[i] = rank * 1000 + (int32_t)(i % 97);
  WEFT_TEST_CHECK_RES(ncclAllReduce(a, b, count, ncclInt32, ncclSum, comm, NULL), ncclSuccess);
  int bad = 0;
  for (size_t i = 0; i < count && !bad; i++) bad = b[i] != 1000 * n * (n - 1) / 2 + n * (int32_t)(i % 97);
  WEFT_TEST_CHECK(!bad, "AllReduce of %zu elements", count);
  return bad;
}

static int check_all_gather(ncclComm_t comm, int rank, int n, size_t count, int32_t *a, int32_t *b) {
  for (size_t i = 0; i < count; i++) a[i] = rank * 7 + (int32_t)(i % 13);
  WEFT_TEST_CHECK_RES(ncclAllGather(a, b, count, ncclInt32, comm, NULL), ncclSuccess);
  int bad = 0;
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < count && !bad; i++) bad = b[(size_t)r * count + i] != r * 7 + (int32_t)(i % 13);
  WEFT_TEST_CHECK(!bad, "AllGather of %zu elements", count);
  return bad;
}

static int check_broadcast(ncclComm_t comm, int rank, int n, size_t count, int32_t *a) {
  int root = n - 1;
  for (size_t i = 0; i < count; i++) a[i] = rank == root ? (int32_t)(i * 3 + 1) : -1;
  WEFT_TEST_CHECK_RES(ncclBroadcast(a, a, count, ncclInt32, root, comm, NULL), ncclSuccess);
  int bad = 0;
  for (size_t i = 0; i < count && !bad; i++) bad = a[i] != (int32_t)(i * 3 + 1);
  WEFT_TEST_CHECK(!bad, "Broadcast of %zu elements", count);
  return bad;
}

static int check_sendrecv(ncclComm_t comm, int rank, int n, size_t count, int32_t *a, int32_t *b) {
  int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  for (size_t i = 0; i < count; i++) a[i] = rank * 100000 + (int32_t)(i % 1000);
  WEFT_TEST_CHECK_RES(ncclGroupStart(), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclSend(a, count, ncclInt32, next, comm, NULL), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclRecv(b, count, ncclInt32, prev, comm, NULL), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclGroupEnd(), ncclSuccess);
  int bad = 0;
  for (size_t i = 0; i < count && !bad; i++) bad = b[i] != prev * 100000 + (int32_t)(i % 1000);
  WEFT_TEST_CHECK(!bad, "SendRecv of %zu elements", count);
  return bad;
}

static int rank_body(int rank, int n, ncclUniqueId id, void *arg) {
  const cfg_t *cfg = arg;
  ncclComm_t comm = NULL;
  ncclResult_t res = ncclCommInitRank(&comm, n, id, rank);
  if (cfg->expect_fail) {
    WEFT_TEST_CHECK(res != ncclSuccess, "communicator creation succeeded");
    WEFT_TEST_CHECK(strstr(ncclGetLastError(NULL), "NCCL_NET=") != NULL, "last error: %s", ncclGetLastError(NULL));
    return weft_test_failures();
  }
  WEFT_TEST_CHECK_RES(res, ncclSuccess);
  if (res != ncclSuccess) return weft_test_failures();
  const size_t counts[] = {1, 1001, 70000, 300000};  // up to several 64 KiB slots per message stream
  size_t max = 300000 * (size_t)n;
  int32_t *a = malloc(max * sizeof(int32_t)), *b = malloc(max * sizeof(int32_t));
  WEFT_TEST_CHECK(a != NULL && b != NULL, "malloc");
  for (size_t k = 0; a != NULL && b != NULL && k < sizeof(counts) / sizeof(counts[0]); k++) {
    check_all_reduce(comm, rank, n, counts[k], a, b);
    check_all_gather(comm, rank, n, counts[k], a, b);
    check_broadcast(comm, rank, n, counts[k], a);
    check_sendrecv(comm, rank, n, counts[k], a, b);
  }
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  free(a);
  free(b);
  return weft_test_failures();
}

static void run(int n, const cfg_t *cfg) {
  cfg_t copy = *cfg;
  WEFT_TEST_EXPECT_FORK_OK(n, 1, weft_test_one_id_main, (&(weft_test_one_id_t){rank_body, &copy}), TIMEOUT_S);
}

// Collectives over `plugin` (an example build) with the ABI capped at
// `cap` (0: none); every rank must log that it bound version `want`.
static void over(int n, const char *plugin, int cap, int want) {
  env(plugin, NULL, "1");
  char text[64];
  snprintf(text, sizeof(text), "%d", cap);
  setenv("WEFT_NET_PLUGIN_VERSION", text, 1);
  run(n, &(cfg_t){0});
  snprintf(text, sizeof(text), "network example, ABI v%d", want);
  cr_expect_eq(logs_with("NET: using network example", 0), n, "not every rank used the plugin");
  cr_expect_eq(logs_with(text, 0), n, "not every rank logged \"%s\"", text);
  cr_expect_eq(logs_with("NCCL WARN", 1), 0, "a rank warned");
}

// The example plugin at ABI `version` (0: the newest, 12).
static void over_plugin(int n, int version) { over(n, "example", version, version != 0 ? version : 12); }

// The example built to export ncclNetPlugin_v<version> alone, by its path.
static void over_only(int n, int version) {
  const char *b = getenv("WEFT_BUILD_DIR");
  char rel[PATH_MAX], path[PATH_MAX];
  snprintf(rel, sizeof(rel), "%s/tests/plugins/libnccl-net-v%donly.so", b != NULL ? b : "build", version);
  cr_assert_not_null(realpath(rel, path), "no %s", rel);
  over(n, path, 0, version);
}

TestSuite(net_plugin, .timeout = 300);

Test(net_plugin, example_2_ranks) { over_plugin(2, 0); }
Test(net_plugin, example_4_ranks) { over_plugin(4, 0); }
Test(net_plugin, example_v6_3_ranks) { over_plugin(3, 6); }
Test(net_plugin, example_v7_2_ranks) { over_plugin(2, 7); }
Test(net_plugin, example_v8_3_ranks) { over_plugin(3, 8); }
Test(net_plugin, example_v9_2_ranks) { over_plugin(2, 9); }
Test(net_plugin, example_v10_2_ranks) { over_plugin(2, 10); }
Test(net_plugin, example_v11_2_ranks) { over_plugin(2, 11); }
Test(net_plugin, v6_only_plugin_3_ranks) { over_only(3, 6); }
Test(net_plugin, v7_only_plugin_2_ranks) { over_only(2, 7); }

Test(net_plugin, missing_plugin_falls_back) {
  env("doesnotexist", NULL, "1");
  run(2, &(cfg_t){0});
  cr_expect_eq(logs_with("NET: using network Socket", 0), 2);
  cr_expect_eq(logs_with("libnccl-net-doesnotexist.so", 0), 2, "no WARN naming the plugin");
  cr_expect_eq(logs_with("falling back to the built-in", 1), 2);
}

Test(net_plugin, library_without_symbol_falls_back) {
  env("libm.so.6", NULL, "1");
  run(2, &(cfg_t){0});
  cr_expect_eq(logs_with("NET: using network Socket", 0), 2);
  cr_expect_eq(logs_with("exports none of ncclNetPlugin_v12", 1), 2);
}

Test(net_plugin, net_selects_socket_over_plugin) {
  env("example", "Socket", "1");
  run(2, &(cfg_t){0});
  cr_expect_eq(logs_with("NET: using network Socket", 1), 2);
}

Test(net_plugin, net_selects_plugin_by_name) {
  env("example", "EXAMPLE", "1");  // names compare without case, as in NCCL
  run(2, &(cfg_t){0});
  cr_expect_eq(logs_with("NET: using network example", 1), 2);
}

Test(net_plugin, unknown_net_fails_init) {
  env("example", "Bogus", "1");
  run(2, &(cfg_t){1});
  cr_expect_eq(logs_with("NCCL_NET=Bogus: no such network; available: Socket, IB, example", 1), 2);
}

// The verbs backend by name: without RDMA devices, a clear failure.
Test(net_plugin, ib_without_devices_fails_init) {
  if (system("ls /sys/class/infiniband 2>/dev/null | grep -q .") == 0) cr_skip_test("this machine has RDMA devices");
  env(NULL, "IB", "1");
  run(2, &(cfg_t){1});
  cr_expect_eq(logs_with("NCCL_NET=IB: the ibverbs network is not available here", 1), 2);
}

Test(net_plugin, unknown_net_fails_init_on_shared_memory_too) {
  env(NULL, "Bogus", "0");
  run(2, &(cfg_t){1});
  cr_expect_eq(logs_with("NCCL_NET=Bogus: no such network", 1), 2);
}
