/*
 * test_net_plugin.c — the NCCL net plugin loader and adapter
 * (plugins/net/) against the example plugin (libnccl-net-example.so).
 *
 * Loading: name, version (newest, or capped, from 12 down to 6), device
 * and properties; plugins exporting only v6 or only v7 (as plugins built
 * for older NCCL do) bind at that version, and the v6 one, which fails a
 * ninth outstanding request, carries many messages at once; a name that
 * is no file, and a library without a plugin symbol, leave a WARN and no
 * plugin. The adapter within one process over loopback: the
 * hello on connect/accept, messages with their tags and sizes (empty,
 * small, larger than a socket buffer), in order, a message too long for
 * its receive failing the communicator, and the goodbye on close that
 * ends a connection without an error, and registrations replaced once
 * the cache is full. Each test is its own process (the
 * loader binds one plugin per process). Every wait is bounded.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "debug.h"
#include "env.h"
#include "net_plugin.h"

#define LIMIT_MS 10000

static const char *example_path(void) {
  static char path[512];
  const char *build = getenv("WEFT_BUILD_DIR");
  snprintf(path, sizeof(path), "%s/lib/libnccl-net-example.so", build != NULL ? build : "build");
  return path;
}

// The example built to export ncclNetPlugin_v<version> alone (6 or 7).
static const char *only_path(int version) {
  static char path[512];
  const char *build = getenv("WEFT_BUILD_DIR");
  snprintf(path, sizeof(path), "%s/tests/plugins/libnccl-net-v%donly.so", build != NULL ? build : "build", version);
  return path;
}

static void setup(void) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("WEFT_TIMEOUT", "20", 1);
  weft_env_reset();
}

static const weft_net_t *load_example(int max_version) {
  const weft_net_t *net = weft_net_plugin_load(example_path(), max_version);
  cr_assert_not_null(net, "could not load %s: %s", example_path(), weft_debug_last_error());
  cr_assert_eq(net->init(), ncclSuccess);
  return net;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void nap(void) {
  struct timespec ts = {0, 100000};
  nanosleep(&ts, NULL);
}

TestSuite(net_plugin, .init = setup, .timeout = 60);

Test(net_plugin, loads_the_newest_version) {
  const weft_net_t *net = load_example(0);
  cr_expect_str_eq(net->name, "example");
  cr_expect_eq(weft_net_plugin_version(), 12);
  int ndev = 0;
  cr_expect_eq(net->devices(&ndev), ncclSuccess);
  cr_expect_eq(ndev, 1);
  weft_net_props_t props;
  cr_expect_eq(net->get_properties(0, &props), ncclSuccess);
  cr_expect_str_eq(props.name, "lo");
  cr_expect_str_eq(props.addr, "example/lo");
  cr_expect_gt(props.speed_mbps, 0);
  cr_expect_eq(net->poll_fd(NULL), -1);
  cr_expect_null(net->hold_large);
}

Test(net_plugin, version_cap_binds_older_abis) {
  for (int v = 6; v <= 11; v++) {
    cr_expect_eq(weft_net_plugin_version(), 0);  // nothing bound in this process yet
    if (fork() == 0) {  // one plugin per process: each version in a child
      const weft_net_t *net = weft_net_plugin_load(example_path(), v);
      _exit(net != NULL && weft_net_plugin_version() == v && net->init() == ncclSuccess ? 0 : 1);
    }
    int status = 0;
    wait(&status);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "binding ncclNetPlugin_v%d failed", v);
  }
}

// A cap above what weft knows binds the newest, as no cap does.
Test(net_plugin, version_cap_above_newest_binds_newest) {
  cr_assert_not_null(weft_net_plugin_load(example_path(), 13));
  cr_expect_eq(weft_net_plugin_version(), 12);
}

// A plugin built for an older NCCL exports that version alone: it binds
// without a cap, and its properties (each version's own layout) read right.
Test(net_plugin, old_plugins_bind_at_their_version) {
  for (int v = 6; v <= 7; v++) {
    if (fork() == 0) {
      const weft_net_t *net = weft_net_plugin_load(only_path(v), 0);
      weft_net_props_t props;
      int ok = net != NULL && weft_net_plugin_version() == v && net->init() == ncclSuccess &&
               net->get_properties(0, &props) == ncclSuccess && strcmp(props.name, "lo") == 0 &&
               props.speed_mbps > 0;
      _exit(ok ? 0 : 1);
    }
    int status = 0;
    wait(&status);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s did not bind at v%d", only_path(v), v);
  }
}

Test(net_plugin, missing_file_warns) {
  setenv("NCCL_DEBUG", "WARN", 1);
  weft_debug_reset();
  cr_expect_null(weft_net_plugin_load("doesnotexist", 0));
  cr_expect(strstr(weft_debug_last_error(), "libnccl-net-doesnotexist.so") != NULL, "WARN was: %s",
            weft_debug_last_error());
  cr_expect(strstr(weft_debug_last_error(), "falling back") != NULL);
  cr_expect_eq(weft_net_plugin_version(), 0);
}

Test(net_plugin, library_without_symbol_warns) {
  cr_expect_null(weft_net_plugin_load("libm.so.6", 0));
  cr_expect(strstr(weft_debug_last_error(), "exports none of ncclNetPlugin_v12") != NULL, "WARN was: %s",
            weft_debug_last_error());
}

Test(net_plugin, logger_routes_to_weft) {
  weft_net_plugin_log(2, 0x10, "plugin.c", 7, "plugin says %d", 42);
  cr_expect(strstr(weft_debug_last_error(), "plugin says 42") != NULL, "WARN was: %s", weft_debug_last_error());
}

// A connected pair over the adapter: send side s, receive side r.
static void pair(const weft_net_t *net, void **s, void **r) {
  char handle[WEFT_NET_HANDLE_BYTES];
  void *lc = NULL;
  cr_assert_eq(net->listen(0, handle, &lc), ncclSuccess);
  const char hello[] = "hello from the sender";
  char got[sizeof(hello)] = {0};
  *s = *r = NULL;
  double end = now_ms() + LIMIT_MS;
  while ((*s == NULL || *r == NULL) && now_ms() < end) {
    if (*s == NULL) cr_assert_eq(net->connect(0, handle, hello, sizeof(hello), s), ncclSuccess);
    if (*r == NULL) cr_assert_eq(net->accept(lc, got, sizeof(got), r), ncclSuccess);
    if (*s == NULL || *r == NULL) nap();
  }
  cr_assert(*s != NULL && *r != NULL, "no connection within %d ms", LIMIT_MS);
  cr_expect_str_eq(got, hello);
  cr_expect_eq(net->close_listen(lc), ncclSuccess);
}

// Test a request until it completes (bounded); returns test()'s result.
static ncclResult_t wait_req(const weft_net_t *net, void *req, size_t *size, uint32_t *tag) {
  double end = now_ms() + LIMIT_MS;
  int done = 0;
  while (now_ms() < end) {
    ncclResult_t res = net->test(req, &done, size, tag);
    if (res != ncclSuccess || done) return res;
    nap();
  }
  cr_assert(0, "request not complete within %d ms", LIMIT_MS);
  return ncclInternalError;
}

Test(net_plugin, messages_keep_order_tags_and_sizes) {
  const weft_net_t *net = load_example(0);
  void *s, *r;
  pair(net, &s, &r);
  enum { N = 6, CAP = 4 << 20 };
  size_t sizes[N] = {0, 1, 1000, 65537, CAP, 3};
  char *out = malloc(CAP), *in[N];
  for (size_t i = 0; i < CAP; i++) out[i] = (char)(i * 7 + 3);
  void *rreq[N], *sreq[N];
  for (int i = 0; i < N; i++) {
    in[i] = calloc(1, CAP);
    cr_assert_eq(net->irecv(r, in[i], CAP, &rreq[i]), ncclSuccess);
  }
  for (int i = 0; i < N; i++) cr_assert_eq(net->isend(s, out, sizes[i], 100 + i, &sreq[i]), ncclSuccess);
  for (int i = 0; i < N; i++) {
    size_t size = 0;
    uint32_t tag = 0;
    cr_assert_eq(wait_req(net, rreq[i], &size, &tag), ncclSuccess);
    cr_expect_eq(size, sizes[i], "message %d: %zu bytes, sent %zu", i, size, sizes[i]);
    cr_expect_eq(tag, 100u + i);
    cr_expect(memcmp(in[i], out, sizes[i]) == 0, "message %d differs", i);
    cr_assert_eq(wait_req(net, sreq[i], NULL, NULL), ncclSuccess);
  }
  // A goodbye, not a failure: a receive still open stays open.
  void *extra = NULL;
  cr_assert_eq(net->irecv(r, in[0], CAP, &extra), ncclSuccess);
  cr_expect_eq(net->close_send(s), ncclSuccess);
  int done = 1;
  for (int i = 0; i < 50; i++, nap()) cr_assert_eq(net->test(extra, &done, NULL, NULL), ncclSuccess);
  cr_expect_eq(done, 0);
  cr_expect_eq(net->close_recv(r), ncclSuccess);
  for (int i = 0; i < N; i++) free(in[i]);
  free(out);
}

Test(net_plugin, too_long_fails_the_receive) {
  const weft_net_t *net = load_example(9);
  void *s, *r, *sreq, *rreq;
  pair(net, &s, &r);
  char big[256] = {0}, small[16];
  cr_assert_eq(net->irecv(r, small, sizeof(small), &rreq), ncclSuccess);
  cr_assert_eq(net->isend(s, big, sizeof(big), 1, &sreq), ncclSuccess);
  cr_expect_neq(wait_req(net, rreq, NULL, NULL), ncclSuccess);
  net->abort_comm(s);
  net->abort_comm(r);
}

// More distinct buffer regions than the registration cache holds: the
// entries no posted message uses are replaced, and every message arrives.
Test(net_plugin, registrations_are_replaced_when_the_cache_is_full) {
  const weft_net_t *net = load_example(0);
  void *s, *r, *sreq, *rreq;
  pair(net, &s, &r);
  enum { ROUNDS = 300 };
  char out[ROUNDS], in[ROUNDS];
  for (int i = 0; i < ROUNDS; i++) out[i] = (char)(i + 1);
  for (int i = 1; i <= ROUNDS; i++) {  // each message a little longer: a region no earlier one covers
    memset(in, 0, sizeof(in));
    size_t size = 0;
    cr_assert_eq(net->irecv(r, in, sizeof(in), &rreq), ncclSuccess);
    cr_assert_eq(net->isend(s, out, (size_t)i, (uint32_t)i, &sreq), ncclSuccess);
    cr_assert_eq(wait_req(net, sreq, NULL, NULL), ncclSuccess, "send %d", i);
    cr_assert_eq(wait_req(net, rreq, &size, NULL), ncclSuccess, "receive %d", i);
    cr_assert_eq(size, (size_t)i);
    cr_assert(memcmp(in, out, (size_t)i) == 0);
  }
  cr_expect_eq(net->close_send(s), ncclSuccess);
  cr_expect_eq(net->close_recv(r), ncclSuccess);
}

// A v6 plugin need accept only 8 outstanding requests per communicator,
// and the v6-only example fails a ninth: 20 messages posted at once on
// each side arrive, in order and whole, only if the adapter holds the
// rest back until earlier ones complete.
Test(net_plugin, v6_plugin_gets_at_most_8_requests) {
  const weft_net_t *net = weft_net_plugin_load(only_path(6), 0);
  cr_assert_not_null(net, "could not load %s: %s", only_path(6), weft_debug_last_error());
  cr_assert_eq(weft_net_plugin_version(), 6);
  cr_assert_eq(net->init(), ncclSuccess);
  void *s, *r;
  pair(net, &s, &r);
  enum { N = 20, CAP = 1 << 16 };
  char *out = malloc(CAP), *in = calloc(N, CAP);
  for (size_t i = 0; i < CAP; i++) out[i] = (char)(i * 5 + 1);
  void *rreq[N], *sreq[N];
  for (int i = 0; i < N; i++) cr_assert_eq(net->irecv(r, in + (size_t)i * CAP, CAP, &rreq[i]), ncclSuccess);
  for (int i = 0; i < N; i++)
    cr_assert_eq(net->isend(s, out, (size_t)(i + 1) * 3000, (uint32_t)i, &sreq[i]), ncclSuccess);
  for (int i = 0; i < N; i++) {  // both sides tested: a send held back is posted when the sender is progressed
    size_t size = 0;
    uint32_t tag = 0;
    int rdone = 0, sdone = 0;
    double end = now_ms() + LIMIT_MS;
    while (!(rdone && sdone) && now_ms() < end) {
      if (!rdone) cr_assert_eq(net->test(rreq[i], &rdone, &size, &tag), ncclSuccess, "receive %d", i);
      if (!sdone) cr_assert_eq(net->test(sreq[i], &sdone, NULL, NULL), ncclSuccess, "send %d", i);
      if (!(rdone && sdone)) nap();
    }
    cr_assert(rdone && sdone, "message %d not through within %d ms", i, LIMIT_MS);
    cr_expect_eq(size, (size_t)(i + 1) * 3000);
    cr_expect_eq(tag, (uint32_t)i);
    cr_expect(memcmp(in + (size_t)i * CAP, out, size) == 0, "message %d differs", i);
  }
  cr_expect_eq(net->close_send(s), ncclSuccess);
  cr_expect_eq(net->close_recv(r), ncclSuccess);
  free(in);
  free(out);
}

// A plugin whose init fails (here: no interface matches) says so.
Test(net_plugin, failing_init_warns) {
  setenv("NCCL_SOCKET_IFNAME", "nosuchif", 1);
  const weft_net_t *net = weft_net_plugin_load(example_path(), 0);
  cr_assert_not_null(net);
  cr_expect_neq(net->init(), ncclSuccess);
  cr_expect(strstr(weft_debug_last_error(), "net plugin example: init failed") != NULL, "WARN was: %s",
            weft_debug_last_error());
}
