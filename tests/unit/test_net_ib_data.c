/*
 * test_net_ib_data.c — the verbs backend's whole path (listen, connect,
 * accept, the side channel, QP set-up, descriptor FIFO, RDMA writes with
 * immediate data, completions, the registration cache, closing) run in one
 * process against fake_ibverbs.c, a stand-in libibverbs that enforces the
 * rules an HCA would (keys, ranges, QP states, PSNs, posted receives) and
 * delivers writes out of order across QPs. It shows the logic holds; it
 * says nothing about real hardware (docs/ib.md).
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "env.h"
#include "net_ib.h"

static char fake_path[512];

static void start_fake(const char *qps, int roce) {
  const char *b = getenv("WEFT_BUILD_DIR");
  snprintf(fake_path, sizeof(fake_path), "%s/tests/lib/libweft-fake-ibverbs.so", b && b[0] ? b : "build");
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("WEFT_TIMEOUT", "20", 1);
  if (qps) setenv("NCCL_IB_QPS_PER_CONNECTION", qps, 1);
  if (roce) setenv("FAKE_IBV_ROCE", "1", 1);
  weft_env_reset();
  weft_net_ib_test_reset(fake_path);
  cr_assert(weft_net_ib_available(), "the fake library %s did not load", fake_path);
}

static int fake_live(void) {
  void *h = dlopen(fake_path, RTLD_NOW | RTLD_NOLOAD);
  cr_assert_not_null(h);
  int (*live)(void) = (int (*)(void))dlsym(h, "fake_ibv_live");
  cr_assert_not_null(live);
  int n = live();
  dlclose(h);
  return n;
}

typedef struct {
  void *listen, *send, *recv;
} pair_t;

static pair_t connect_pair(void) {
  const weft_net_t *n = &weft_net_ib;
  pair_t p = {0};
  char handle[WEFT_NET_HANDLE_BYTES], hello_in[12] = "hello, rank", hello_out[12] = "";
  cr_assert_eq(n->listen(0, handle, &p.listen), ncclSuccess);
  cr_assert_eq(n->connect(0, handle, hello_in, sizeof(hello_in), &p.send), ncclSuccess);
  cr_assert_not_null(p.send, "connect returns before the peer accepts");
  cr_assert_eq(n->accept(p.listen, hello_out, sizeof(hello_out), &p.recv), ncclSuccess);
  cr_assert_not_null(p.recv);
  cr_expect_str_eq(hello_out, hello_in);
  return p;
}

static uint8_t pattern(uint64_t msg, size_t i) { return (uint8_t)(msg * 131 + i * 7 + 1); }
static size_t msg_size(uint64_t m) { return m % 7 == 0 ? 0 : (size_t)((m * 2654435761u) % 70001); }

// Stream `total` messages with up to `window` of each side outstanding; every
// message checked for size, tag, contents and order. Bounded: never spins forever.
static void stream(pair_t *p, uint64_t total, int window) {
  const weft_net_t *n = &weft_net_ib;
  enum { SLOT = 80000, MAXW = 32 };
  cr_assert_leq(window, MAXW);
  char *sbuf = malloc((size_t)MAXW * SLOT), *rbuf = malloc((size_t)MAXW * SLOT);
  void *sreq[MAXW] = {0}, *rreq[MAXW] = {0};
  uint64_t s_posted = 0, s_done = 0, r_posted = 0, r_done = 0;
  long spins = 0;
  while (r_done < total) {
    cr_assert_lt(++spins, 20000000L, "no progress: sent %lu, received %lu", (unsigned long)s_done, (unsigned long)r_done);
    while (r_posted < total && r_posted - r_done < (uint64_t)window) {
      int k = (int)(r_posted % (uint64_t)window);
      memset(rbuf + (size_t)k * SLOT, 0xee, 64);
      cr_assert_eq(n->irecv(p->recv, rbuf + (size_t)k * SLOT, SLOT, &rreq[k]), ncclSuccess);
      r_posted++;
    }
    while (s_posted < total && s_posted - s_done < (uint64_t)window) {
      int k = (int)(s_posted % (uint64_t)window);
      size_t sz = msg_size(s_posted);
      for (size_t i = 0; i < sz; i++) sbuf[(size_t)k * SLOT + i] = (char)pattern(s_posted, i);
      cr_assert_eq(n->isend(p->send, sbuf + (size_t)k * SLOT, sz, (uint32_t)(s_posted * 3 + 1), &sreq[k]), ncclSuccess);
      s_posted++;
    }
    int done = 0;
    size_t size = 0;
    uint32_t tag = 0;
    if (s_done < s_posted) {
      int k = (int)(s_done % (uint64_t)window);
      cr_assert_eq(n->test(sreq[k], &done, &size, &tag), ncclSuccess);
      if (done) s_done++;
    }
    if (r_done < r_posted) {
      int k = (int)(r_done % (uint64_t)window);
      cr_assert_eq(n->test(rreq[k], &done, &size, &tag), ncclSuccess);
      if (done) {
        size_t want = msg_size(r_done);
        cr_assert_eq(size, want, "message %lu: %zu bytes, want %zu", (unsigned long)r_done, size, want);
        cr_assert_eq(tag, (uint32_t)(r_done * 3 + 1), "message %lu: tag %u", (unsigned long)r_done, tag);
        const uint8_t *d = (const uint8_t *)rbuf + (size_t)k * SLOT;
        for (size_t i = 0; i < size; i++)
          if (d[i] != pattern(r_done, i)) cr_assert_fail("message %lu byte %zu differs", (unsigned long)r_done, i);
        r_done++;
      }
    }
  }
  while (s_done < s_posted) {  // the last sends' completions
    int done = 0;
    cr_assert_lt(++spins, 40000000L);
    cr_assert_eq(n->test(sreq[s_done % (uint64_t)window], &done, NULL, NULL), ncclSuccess);
    s_done += done;
  }
  free(sbuf);
  free(rbuf);
}

static void close_pair(pair_t *p) {
  cr_expect_eq(weft_net_ib.close_send(p->send), ncclSuccess);
  cr_expect_eq(weft_net_ib.close_recv(p->recv), ncclSuccess);
  cr_expect_eq(weft_net_ib.close_listen(p->listen), ncclSuccess);
}

Test(net_ib_data, one_qp_stream_in_order, .timeout = 120) {
  start_fake(NULL, 0);
  int ndev = 0;
  weft_net_props_t props;
  cr_assert_eq(weft_net_ib.devices(&ndev), ncclSuccess);
  cr_expect_eq(ndev, 1, "port 2 is down: only fake0:1");
  cr_assert_eq(weft_net_ib.get_properties(0, &props), ncclSuccess);
  cr_expect_str_eq(props.name, "fake0:1");
  // What the network transport matches against a topology's <net name="fake0" port="1">.
  cr_expect_str_eq(props.device, "fake0");
  cr_expect_eq(props.port, 1);
  cr_expect_str_eq(props.busid, "", "the stand-in device has no sysfs entry");
  int base = fake_live();
  pair_t p = connect_pair();
  stream(&p, 3000, 16);
  close_pair(&p);
  cr_expect_eq(fake_live(), base, "every QP and registration was released");
}

Test(net_ib_data, several_qps_deep_window_wraps_fifo, .timeout = 120) {
  start_fake("3", 0);
  pair_t p = connect_pair();
  stream(&p, 2000, 32);  // > WEFT_IB_FIFO_DEPTH messages: the FIFO wraps many times
  close_pair(&p);
}

Test(net_ib_data, roce_picks_ipv4_mapped_gid, .timeout = 60) {
  start_fake("2", 1);  // the fake refuses RTR unless sgid_index is 1 (its IPv4-mapped GID)
  pair_t p = connect_pair();
  stream(&p, 200, 8);
  close_pair(&p);
}

Test(net_ib_data, message_longer_than_receive_fails, .timeout = 60) {
  start_fake(NULL, 0);
  pair_t p = connect_pair();
  const weft_net_t *n = &weft_net_ib;
  static char big[8192], small[100];
  void *rr = NULL, *sr = NULL;
  cr_assert_eq(n->irecv(p.recv, small, sizeof(small), &rr), ncclSuccess);
  cr_assert_eq(n->isend(p.send, big, sizeof(big), 5, &sr), ncclSuccess);
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < 100000 && res == ncclSuccess; i++) {
    int done = 0;
    n->test(rr, &done, NULL, NULL);
    res = n->test(sr, &done, NULL, NULL);
    cr_assert(!done, "an oversized message must not complete");
  }
  cr_expect_eq(res, ncclRemoteError);
  n->abort_comm(p.send);
  n->abort_comm(p.recv);
  n->close_listen(p.listen);
}

Test(net_ib_data, orderly_close_then_vanished_peer, .timeout = 60) {
  start_fake(NULL, 0);
  const weft_net_t *n = &weft_net_ib;
  pair_t p = connect_pair();
  stream(&p, 10, 4);
  // Orderly: a pending receive after the sender said goodbye is no failure.
  cr_assert_eq(n->close_send(p.send), ncclSuccess);
  static char buf[64];
  void *rr = NULL;
  cr_assert_eq(n->irecv(p.recv, buf, sizeof(buf), &rr), ncclSuccess);
  for (int i = 0; i < 1000; i++) {
    int done = 0;
    cr_assert_eq(n->test(rr, &done, NULL, NULL), ncclSuccess);
    cr_assert(!done);
  }
  n->close_recv(p.recv);
  // Abortive: the receiver notices a sender that vanished.
  char handle[WEFT_NET_HANDLE_BYTES];
  void *l2 = NULL, *s2 = NULL, *r2 = NULL;
  cr_assert_eq(n->listen(0, handle, &l2), ncclSuccess);
  cr_assert_eq(n->connect(0, handle, NULL, 0, &s2), ncclSuccess);
  cr_assert_eq(n->accept(l2, NULL, 0, &r2), ncclSuccess);
  cr_assert_eq(n->irecv(r2, buf, sizeof(buf), &rr), ncclSuccess);
  n->abort_comm(s2);
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < 1000000 && res == ncclSuccess; i++) {
    int done = 0;
    res = n->test(rr, &done, NULL, NULL);
  }
  cr_expect_eq(res, ncclRemoteError);
  n->abort_comm(r2);
  n->close_listen(l2);
  n->close_listen(p.listen);
}

Test(net_ib_data, poll_fd_wakes_the_receiver, .timeout = 60) {
  start_fake(NULL, 0);
  const weft_net_t *n = &weft_net_ib;
  pair_t p = connect_pair();
  stream(&p, 2, 2);  // set-up finished on both sides
  int fd = n->poll_fd(p.recv);
  cr_assert_geq(fd, 0);
  static char rb[64], sb[64] = "wake";
  void *rr = NULL, *sr = NULL;
  int done = 0;
  cr_assert_eq(n->irecv(p.recv, rb, sizeof(rb), &rr), ncclSuccess);
  cr_assert_eq(n->test(rr, &done, NULL, NULL), ncclSuccess);  // arms the CQ, nothing yet
  struct epoll_event ev;
  while (epoll_wait(fd, &ev, 1, 0) > 0) cr_assert_eq(n->test(rr, &done, NULL, NULL), ncclSuccess);  // drain
  cr_assert_eq(n->isend(p.send, sb, 5, 9, &sr), ncclSuccess);
  for (int i = 0; i < 100 && !done; i++) n->test(sr, &done, NULL, NULL);
  cr_expect_eq(epoll_wait(fd, &ev, 1, 1000), 1, "the arrival makes the receiver's descriptor readable");
  size_t size = 0;
  uint32_t tag = 0;
  done = 0;
  for (int i = 0; i < 100 && !done; i++) cr_assert_eq(n->test(rr, &done, &size, &tag), ncclSuccess);
  cr_expect(done && size == 5 && tag == 9 && strcmp(rb, "wake") == 0);
  close_pair(&p);
}
