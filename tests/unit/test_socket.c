/*
 * test_socket.c — TCP helpers on loopback only: address parsing/printing,
 * interface selection, listen/connect/accept, exact-length transfers in both
 * directions, and every deadline and peer-failure path returning the code
 * socket.h promises (and returning promptly rather than hanging).
 */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "debug.h"
#include "env.h"
#include "socket.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int have_ipv6_loopback(void) {
  struct ifaddrs *all, *a;
  int found = 0;
  if (getifaddrs(&all) != 0) return 0;
  for (a = all; a && !found; a = a->ifa_next)
    found = a->ifa_addr && a->ifa_addr->sa_family == AF_INET6 &&
            IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)(void *)a->ifa_addr)->sin6_addr);
  freeifaddrs(all);
  return found;
}

// A connected loopback pair: *client from connect, *server from accept.
static void make_pair(const char *listen_at, int *client, int *server) {
  weft_sockaddr_t addr;
  int lfd = -1;
  cr_assert_eq(weft_socket_parse_addr(listen_at, &addr), ncclSuccess);
  cr_assert_eq(weft_socket_listen(&addr, &lfd), ncclSuccess);
  cr_assert_eq(weft_socket_connect(&addr, 2000, client), ncclSuccess);
  weft_sockaddr_t peer;
  cr_assert_eq(weft_socket_accept(lfd, 2000, server, &peer), ncclSuccess);
  cr_assert_eq(peer.sa.sa_family, addr.sa.sa_family);
  weft_socket_close(&lfd);
}

Test(socket, parse_ipv4_and_ipv6, .timeout = 10) {
  weft_sockaddr_t a;
  char buf[WEFT_ADDR_STRLEN];
  cr_assert_eq(weft_socket_parse_addr("127.0.0.1:5000", &a), ncclSuccess);
  cr_assert_eq(a.sa.sa_family, AF_INET);
  cr_assert_eq(ntohs(a.sin.sin_port), 5000);
  cr_assert_eq(ntohl(a.sin.sin_addr.s_addr), INADDR_LOOPBACK);
  cr_assert_str_eq(weft_socket_addr_str(&a, buf, sizeof(buf)), "127.0.0.1:5000");

  cr_assert_eq(weft_socket_parse_addr("[::1]:6000", &a), ncclSuccess);
  cr_assert_eq(a.sa.sa_family, AF_INET6);
  cr_assert_eq(ntohs(a.sin6.sin6_port), 6000);
  cr_assert(IN6_IS_ADDR_LOOPBACK(&a.sin6.sin6_addr));
  cr_assert_str_eq(weft_socket_addr_str(&a, buf, sizeof(buf)), "[::1]:6000");

  cr_assert_eq(weft_socket_parse_addr("0.0.0.0:0", &a), ncclSuccess);
  cr_assert_eq(ntohs(a.sin.sin_port), 0);
  cr_assert_eq(weft_socket_parse_addr("localhost:65535", &a), ncclSuccess);
  cr_assert_eq(ntohs(a.sa.sa_family == AF_INET ? a.sin.sin_port : a.sin6.sin6_port), 65535);
}

Test(socket, parse_rejects_garbage, .timeout = 10) {
  static const char *bad[] = {
      "",          "127.0.0.1",     "127.0.0.1:",  "127.0.0.1:99999", "127.0.0.1:12ab",
      "127.0.0.1:-1", ":5000",      "[::1:5000",   "[::1]5000",       "[]:5000",
      "::1:5000",  "999.1.1.1:80",  "1.2.3:80",    "[1.2.3.4]:80",    "[::1]:123456",
  };
  weft_sockaddr_t a;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    cr_expect_eq(weft_socket_parse_addr(bad[i], &a), ncclInvalidArgument, "'%s' accepted",
                 bad[i]);
    const char *err = weft_debug_last_error();
    if (bad[i][0] != '\0')
      cr_expect_not_null(strstr(err, bad[i]), "warning for '%s' does not name it: %s", bad[i], err);
  }
  cr_expect_eq(weft_socket_parse_addr(NULL, &a), ncclInvalidArgument);
  cr_expect_eq(weft_socket_parse_addr("127.0.0.1:1", NULL), ncclInvalidArgument);
}

typedef struct {
  int fd;
  unsigned char *out, *in;
  size_t len;
  int send_first;
  ncclResult_t send_res, recv_res;
} exchange_t;

static void *exchange(void *arg) {
  exchange_t *x = arg;
  if (x->send_first) {
    x->send_res = weft_socket_send(x->fd, x->out, x->len, 10000);
    x->recv_res = weft_socket_recv(x->fd, x->in, x->len, 10000);
  } else {
    x->recv_res = weft_socket_recv(x->fd, x->in, x->len, 10000);
    x->send_res = weft_socket_send(x->fd, x->out, x->len, 10000);
  }
  return NULL;
}

static void exchange_1mib(const char *listen_at) {
  enum { LEN = 1 << 20 };
  int client = -1, server = -1;
  make_pair(listen_at, &client, &server);
  exchange_t x[2] = {
      {.fd = client, .out = malloc(LEN), .in = malloc(LEN), .len = LEN, .send_first = 1},
      {.fd = server, .out = malloc(LEN), .in = malloc(LEN), .len = LEN, .send_first = 0},
  };
  for (size_t i = 0; i < LEN; i++) {
    x[0].out[i] = (unsigned char)(i * 7 + 1);
    x[1].out[i] = (unsigned char)(i * 13 + 5);
  }
  pthread_t t[2];
  for (int i = 0; i < 2; i++) cr_assert_eq(pthread_create(&t[i], NULL, exchange, &x[i]), 0);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(x[i].send_res, ncclSuccess, "side %d send", i);
    cr_assert_eq(x[i].recv_res, ncclSuccess, "side %d recv", i);
  }
  cr_assert_eq(memcmp(x[0].in, x[1].out, LEN), 0, "client received corrupted data");
  cr_assert_eq(memcmp(x[1].in, x[0].out, LEN), 0, "server received corrupted data");
  for (int i = 0; i < 2; i++) free(x[i].out), free(x[i].in);
  weft_socket_close(&client);
  weft_socket_close(&server);
}

Test(socket, one_mib_both_ways_ipv4, .timeout = 20) { exchange_1mib("127.0.0.1:0"); }

Test(socket, one_mib_both_ways_ipv6, .timeout = 20) {
  if (!have_ipv6_loopback()) cr_skip_test("no ::1 on this host");
  exchange_1mib("[::1]:0");
}

Test(socket, listen_reports_bound_port_and_cloexec, .timeout = 10) {
  weft_sockaddr_t a;
  int lfd = -1, c = -1, s = -1;
  cr_assert_eq(weft_socket_parse_addr("127.0.0.1:0", &a), ncclSuccess);
  cr_assert_eq(weft_socket_listen(&a, &lfd), ncclSuccess);
  cr_assert_neq(ntohs(a.sin.sin_port), 0, "ephemeral port not reported");
  cr_assert(fcntl(lfd, F_GETFD) & FD_CLOEXEC);
  cr_assert_eq(weft_socket_connect(&a, 2000, &c), ncclSuccess);
  cr_assert_eq(weft_socket_accept(lfd, 2000, &s, NULL), ncclSuccess);
  cr_assert(fcntl(c, F_GETFD) & FD_CLOEXEC);
  cr_assert(fcntl(s, F_GETFD) & FD_CLOEXEC);
  cr_assert_eq(fcntl(c, F_GETFL) & O_NONBLOCK, 0, "connected fds are returned blocking");

  weft_sockaddr_t busy = a;  // the same port again: bind fails with a WARN
  int lfd2 = -1;
  cr_assert_eq(weft_socket_listen(&busy, &lfd2), ncclSystemError);
  cr_assert_eq(lfd2, -1);
  cr_assert_not_null(strstr(weft_debug_last_error(), "bind"));

  weft_socket_close(&c);
  cr_assert_eq(c, -1);
  weft_socket_close(&c);  // no-op on -1
  weft_socket_close(&s);
  weft_socket_close(&lfd);
}

Test(socket, recv_deadline_returns_in_progress, .timeout = 10) {
  int c = -1, s = -1;
  make_pair("127.0.0.1:0", &c, &s);
  char buf[4];
  double t0 = now_s();
  cr_assert_eq(weft_socket_recv(s, buf, sizeof(buf), 100), ncclInProgress);
  double dt = now_s() - t0;
  cr_assert(dt >= 0.095 && dt < 1.0, "recv waited %.3f s for a 100 ms deadline", dt);
  cr_assert_str_eq(weft_debug_last_error(), "", "a timeout is not a WARN");
  weft_socket_close(&c);
  weft_socket_close(&s);
}

Test(socket, send_deadline_when_peer_does_not_read, .timeout = 10) {
  int c = -1, s = -1;
  make_pair("127.0.0.1:0", &c, &s);
  size_t len = 256u << 20;  // far more than the socket buffers hold
  char *buf = calloc(len, 1);
  cr_assert_not_null(buf);
  double t0 = now_s();
  cr_assert_eq(weft_socket_send(c, buf, len, 200), ncclInProgress);
  double dt = now_s() - t0;
  cr_assert(dt >= 0.19 && dt < 2.0, "send took %.3f s for a 200 ms deadline", dt);
  free(buf);
  weft_socket_close(&c);
  weft_socket_close(&s);
}

Test(socket, peer_close_is_remote_error, .timeout = 10) {
  int c = -1, s = -1;
  make_pair("127.0.0.1:0", &c, &s);
  cr_assert_eq(weft_socket_send(c, "abc", 3, 1000), ncclSuccess);
  weft_socket_close(&c);
  char buf[8];
  // The 3 bytes sent before the close arrive; the rest never will.
  cr_assert_eq(weft_socket_recv(s, buf, 8, 2000), ncclRemoteError);
  cr_assert_str_eq(weft_debug_last_error(), "", "peer loss is not WARNed here");

  // Sending to the closed peer: the first bytes may be buffered, then
  // RST makes send fail with EPIPE/ECONNRESET (and no SIGPIPE kills us).
  char chunk[65536] = {0};
  ncclResult_t r = ncclSuccess;
  for (int i = 0; i < 100 && r == ncclSuccess; i++) {
    r = weft_socket_send(s, chunk, sizeof(chunk), 1000);
    if (r == ncclSuccess) usleep(1000);
  }
  cr_assert_eq(r, ncclRemoteError);
  weft_socket_close(&s);
}

Test(socket, connect_to_closed_port_times_out, .timeout = 10) {
  weft_sockaddr_t a;
  int lfd = -1, fd = 123;
  cr_assert_eq(weft_socket_parse_addr("127.0.0.1:0", &a), ncclSuccess);
  cr_assert_eq(weft_socket_listen(&a, &lfd), ncclSuccess);
  weft_socket_close(&lfd);  // the port is now closed: connections are refused
  double t0 = now_s();
  cr_assert_eq(weft_socket_connect(&a, 300, &fd), ncclInProgress);
  double dt = now_s() - t0;
  cr_assert_eq(fd, -1);
  cr_assert(dt >= 0.29 && dt < 1.0, "connect gave up after %.3f s for a 300 ms deadline", dt);
}

typedef struct {
  weft_sockaddr_t addr;
  int lfd;
} late_listener_t;

static void *listen_late(void *arg) {
  late_listener_t *l = arg;
  usleep(150 * 1000);
  if (weft_socket_listen(&l->addr, &l->lfd) != ncclSuccess) l->lfd = -2;
  return NULL;
}

Test(socket, connect_retries_until_listener_appears, .timeout = 10) {
  late_listener_t l = {.lfd = -1};
  int probe = -1, fd = -1, s = -1;
  cr_assert_eq(weft_socket_parse_addr("127.0.0.1:0", &l.addr), ncclSuccess);
  cr_assert_eq(weft_socket_listen(&l.addr, &probe), ncclSuccess);  // reserve a port number
  weft_socket_close(&probe);
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, listen_late, &l), 0);
  cr_assert_eq(weft_socket_connect(&l.addr, 3000, &fd), ncclSuccess);
  pthread_join(t, NULL);
  cr_assert(l.lfd >= 0);
  cr_assert_eq(weft_socket_accept(l.lfd, 1000, &s, NULL), ncclSuccess);
  cr_assert_eq(weft_socket_send(fd, "ping", 4, 1000), ncclSuccess);
  char buf[4];
  cr_assert_eq(weft_socket_recv(s, buf, 4, 1000), ncclSuccess);
  cr_assert_eq(memcmp(buf, "ping", 4), 0);
  weft_socket_close(&fd);
  weft_socket_close(&s);
  weft_socket_close(&l.lfd);
}

Test(socket, accept_deadline, .timeout = 10) {
  weft_sockaddr_t a;
  int lfd = -1, fd = 7;
  cr_assert_eq(weft_socket_parse_addr("127.0.0.1:0", &a), ncclSuccess);
  cr_assert_eq(weft_socket_listen(&a, &lfd), ncclSuccess);
  double t0 = now_s();
  cr_assert_eq(weft_socket_accept(lfd, 100, &fd, NULL), ncclInProgress);
  double dt = now_s() - t0;
  cr_assert_eq(fd, -1);
  cr_assert(dt >= 0.095 && dt < 1.0, "accept waited %.3f s for a 100 ms deadline", dt);
  weft_socket_close(&lfd);
}

Test(socket, bad_fd_is_system_error, .timeout = 10) {
  char buf[4] = {0};
  cr_assert_eq(weft_socket_send(-1, buf, 4, 100), ncclSystemError);
  cr_assert_neq(weft_debug_last_error()[0], '\0');
  cr_assert_eq(weft_socket_recv(-1, buf, 4, 100), ncclSystemError);
  cr_assert_eq(weft_socket_send(-1, buf, 0, 100), ncclSuccess, "zero bytes is a no-op");
}

static void use_ifname(const char *ifname, const char *family) {
  if (ifname) setenv("NCCL_SOCKET_IFNAME", ifname, 1);
  else unsetenv("NCCL_SOCKET_IFNAME");
  if (family) setenv("NCCL_SOCKET_FAMILY", family, 1);
  else unsetenv("NCCL_SOCKET_FAMILY");
  weft_env_reset();
}

Test(socket, find_interface_lo_ipv4, .timeout = 10) {
  weft_sockaddr_t a;
  char name[32] = "";
  use_ifname("lo", NULL);
  cr_assert_eq(weft_socket_find_interface(&a, name, sizeof(name)), ncclSuccess);
  char buf[WEFT_ADDR_STRLEN];
  cr_assert_str_eq(weft_socket_addr_str(&a, buf, sizeof(buf)), "127.0.0.1:0");
  cr_assert_str_eq(name, "lo");

  use_ifname("=lo", "AF_INET");
  cr_assert_eq(weft_socket_find_interface(&a, NULL, 0), ncclSuccess);
  cr_assert_str_eq(weft_socket_addr_str(&a, buf, sizeof(buf)), "127.0.0.1:0");
}

Test(socket, find_interface_lo_ipv6, .timeout = 10) {
  if (!have_ipv6_loopback()) cr_skip_test("no ::1 on this host");
  weft_sockaddr_t a;
  char name[32] = "";
  use_ifname("lo", "AF_INET6");
  cr_assert_eq(weft_socket_find_interface(&a, name, sizeof(name)), ncclSuccess);
  char buf[WEFT_ADDR_STRLEN];
  cr_assert_str_eq(weft_socket_addr_str(&a, buf, sizeof(buf)), "[::1]:0");
  cr_assert_str_eq(name, "lo");
}

Test(socket, find_interface_failures_are_clear, .timeout = 10) {
  weft_sockaddr_t a;
  use_ifname("=nonexistent0", NULL);
  cr_assert_eq(weft_socket_find_interface(&a, NULL, 0), ncclSystemError);
  const char *err = weft_debug_last_error();
  cr_assert_not_null(strstr(err, "NCCL_SOCKET_IFNAME='=nonexistent0'"), "%s", err);
  cr_assert_not_null(strstr(err, "lo"), "the error lists the interfaces that exist: %s", err);

  use_ifname("=l", NULL);  // exact: "l" is not "lo"
  cr_assert_eq(weft_socket_find_interface(&a, NULL, 0), ncclSystemError);

  use_ifname(NULL, "AF_UNIX");
  cr_assert_eq(weft_socket_find_interface(&a, NULL, 0), ncclInvalidArgument);
  cr_assert_not_null(strstr(weft_debug_last_error(), "NCCL_SOCKET_FAMILY='AF_UNIX'"));
}

Test(socket, find_interface_exclusion_and_default, .timeout = 10) {
  weft_sockaddr_t a;
  char name[32] = "";
  use_ifname("^lo", NULL);
  ncclResult_t r = weft_socket_find_interface(&a, name, sizeof(name));
  if (r == ncclSuccess) cr_assert_str_neq(name, "lo", "^lo must exclude lo");
  else cr_assert_eq(r, ncclSystemError);  // a host with nothing but loopback

  use_ifname(NULL, NULL);
  cr_assert_eq(weft_socket_find_interface(&a, name, sizeof(name)), ncclSuccess);
  cr_assert(strncmp(name, "docker", 6) != 0 && strncmp(name, "virbr", 5) != 0);
  cr_assert_eq(a.sa.sa_family == AF_INET ? a.sin.sin_port : a.sin6.sin6_port, 0);
  if (a.sa.sa_family == AF_INET6) cr_assert(!IN6_IS_ADDR_LINKLOCAL(&a.sin6.sin6_addr));
}

// The socket transport's devices (NCCL's list): NCCL_SOCKET_IFNAME selects,
// each interface once, loopback only when asked for or alone.
static int list_ifs(weft_socket_iface_t *ifs, int max) {
  int n = -1;
  cr_assert_eq(weft_socket_list_interfaces(ifs, max, &n), ncclSuccess);
  for (int i = 0; i < n; i++) {
    cr_expect_eq(ifs[i].addr.sa.sa_family == AF_INET ? ifs[i].addr.sin.sin_port : ifs[i].addr.sin6.sin6_port, 0);
    for (int j = 0; j < i; j++) cr_expect_str_neq(ifs[i].name, ifs[j].name, "%s listed twice", ifs[i].name);
  }
  return n;
}

Test(socket, list_interfaces_follows_ifname, .timeout = 10) {
  weft_socket_iface_t ifs[WEFT_SOCKET_MAX_IFS];
  char buf[WEFT_ADDR_STRLEN];
  use_ifname("lo", "AF_INET");
  cr_assert_eq(list_ifs(ifs, WEFT_SOCKET_MAX_IFS), 1);
  cr_expect_str_eq(ifs[0].name, "lo");
  cr_expect_str_eq(weft_socket_addr_str(&ifs[0].addr, buf, sizeof(buf)), "127.0.0.1:0");

  use_ifname("=lo:1", NULL);  // a port after the name is ignored, as NCCL does
  cr_assert_eq(list_ifs(ifs, WEFT_SOCKET_MAX_IFS), 1);
  cr_expect_str_eq(ifs[0].name, "lo");

  use_ifname("^lo", NULL);
  int n = list_ifs(ifs, WEFT_SOCKET_MAX_IFS);
  for (int i = 0; i < n; i++) cr_expect_str_neq(ifs[i].name, "lo");

  use_ifname("=nonexistent0", NULL);
  n = 7;
  cr_assert_eq(weft_socket_list_interfaces(ifs, WEFT_SOCKET_MAX_IFS, &n), ncclSystemError);
  cr_expect_eq(n, 0);
  cr_expect_not_null(strstr(weft_debug_last_error(), "NCCL_SOCKET_IFNAME='=nonexistent0'"), "%s",
                     weft_debug_last_error());

  cr_expect_eq(weft_socket_list_interfaces(ifs, 0, &n), ncclInvalidArgument);
  cr_expect_eq(weft_socket_list_interfaces(NULL, 4, &n), ncclInvalidArgument);
}

Test(socket, list_interfaces_default_order, .timeout = 10) {
  weft_socket_iface_t ifs[WEFT_SOCKET_MAX_IFS], again[WEFT_SOCKET_MAX_IFS];
  use_ifname(NULL, NULL);
  int n = list_ifs(ifs, WEFT_SOCKET_MAX_IFS);
  cr_assert_geq(n, 1);
  int has_lo = 0, others = 0;
  for (int i = 0; i < n; i++) {
    has_lo |= strncmp(ifs[i].name, "lo", 2) == 0;
    others |= strncmp(ifs[i].name, "lo", 2) != 0;
    if (ifs[i].addr.sa.sa_family == AF_INET6) cr_expect(!IN6_IS_ADDR_LINKLOCAL(&ifs[i].addr.sin6.sin6_addr));
  }
  cr_expect(!(has_lo && others), "loopback is listed only when nothing else is");
  if (strncmp(ifs[0].name, "ib", 2) != 0)
    for (int i = 0; i < n; i++) cr_expect(strncmp(ifs[i].name, "ib", 2) != 0, "ib* interfaces come alone");
  // One character selects nothing (NCCL ignores it): the default list again.
  use_ifname("x", NULL);
  cr_assert_eq(list_ifs(again, WEFT_SOCKET_MAX_IFS), n);
  for (int i = 0; i < n; i++) cr_expect_str_eq(again[i].name, ifs[i].name);
  // The cap is the caller's.
  use_ifname(NULL, NULL);
  cr_expect_eq(list_ifs(again, 1), 1);
  cr_expect_str_eq(again[0].name, ifs[0].name);
  use_ifname(NULL, NULL);
}
