/*
 * test_hello_pool.c — the pool that reads set-up hellos from several
 * connections at once, on loopback: a hello split by a pause, a header then
 * the body it announces, a silent connection that must not hold up a
 * speaking one, a full pool that makes room only for a connection silent
 * long enough, and a connection that closes half-way.
 */
#include <criterion/criterion.h>
#include <string.h>
#include <unistd.h>

#include "debug.h"
#include "hello_pool.h"
#include "socket.h"
#include "util.h"

static int listen_fd = -1;
static weft_sockaddr_t addr;

static void setup(void) {
  cr_assert_eq(weft_socket_parse_addr("127.0.0.1:0", &addr), ncclSuccess);
  cr_assert_eq(weft_socket_listen(&addr, &listen_fd), ncclSuccess);
}

static void teardown(void) { weft_socket_close(&listen_fd); }

TestSuite(hello_pool, .init = setup, .fini = teardown, .timeout = 30);

static int dial(void) {
  int fd = -1;
  cr_assert_eq(weft_socket_connect(&addr, 2000, &fd), ncclSuccess);
  return fd;
}

static void say(int fd, const char *text) { cr_assert_eq(weft_socket_send(fd, text, strlen(text), 1000), ncclSuccess); }

// Poll until something other than IDLE happens, or ms pass.
static weft_hello_event_t next_event(weft_hello_pool_t *p, int ms, int *idx) {
  int64_t end = weft_now_ms() + ms;
  weft_hello_event_t ev = WEFT_HELLO_IDLE;
  while (ev == WEFT_HELLO_IDLE && weft_now_ms() < end)
    cr_assert_eq(weft_hello_pool_poll(p, 50, &ev, idx), ncclSuccess);
  return ev;
}

Test(hello_pool, a_hello_split_by_a_pause_is_reported_once_whole) {
  weft_hello_pool_t p;
  cr_assert_eq(weft_hello_pool_init(&p, listen_fd, 4, 8, 5000, "test"), ncclSuccess);
  int fd = dial();
  say(fd, "abc");
  int idx;
  cr_expect_eq(next_event(&p, 300, &idx), WEFT_HELLO_IDLE, "reported before the hello was whole");
  say(fd, "defgh");
  cr_assert_eq(next_event(&p, 2000, &idx), WEFT_HELLO_READY);
  cr_expect_eq(memcmp(p.slot[idx].buf, "abcdefgh", 8), 0);
  int mine = weft_hello_pool_take(&p, idx);
  cr_expect_geq(mine, 0);
  cr_expect_eq(p.n, 0);
  close(mine);
  close(fd);
  weft_hello_pool_free(&p);
}

Test(hello_pool, a_header_then_the_body_it_announces) {
  weft_hello_pool_t p;
  cr_assert_eq(weft_hello_pool_init(&p, listen_fd, 4, 2, 5000, "test"), ncclSuccess);
  int fd = dial();
  say(fd, "05hello!");  // a 2-byte length, 5 bytes of body, and one byte the pool must leave unread
  int idx;
  cr_assert_eq(next_event(&p, 2000, &idx), WEFT_HELLO_READY);
  cr_assert_eq(p.slot[idx].got, 2);
  cr_assert(weft_hello_pool_extend(&p, idx, 5));
  cr_assert_eq(next_event(&p, 2000, &idx), WEFT_HELLO_READY);
  cr_expect_eq(p.slot[idx].got, 7);
  cr_expect_eq(memcmp(p.slot[idx].buf, "05hello", 7), 0);
  int mine = weft_hello_pool_take(&p, idx);
  char rest = 0;
  cr_expect_eq(weft_socket_recv(mine, &rest, 1, 1000), ncclSuccess);
  cr_expect_eq(rest, '!');
  close(mine);
  close(fd);
  weft_hello_pool_free(&p);
}

Test(hello_pool, a_silent_connection_does_not_hold_up_a_speaking_one) {
  weft_hello_pool_t p;
  cr_assert_eq(weft_hello_pool_init(&p, listen_fd, 4, 4, 5000, "test"), ncclSuccess);
  int silent = dial();
  int idx;
  cr_expect_eq(next_event(&p, 200, &idx), WEFT_HELLO_IDLE);
  cr_expect_eq(p.n, 1, "the silent connection is pending");
  int speaker = dial();
  say(speaker, "ping");
  int64_t t0 = weft_now_ms();
  cr_assert_eq(next_event(&p, 2000, &idx), WEFT_HELLO_READY);
  cr_expect_lt(weft_now_ms() - t0, 1000);
  cr_expect_eq(memcmp(p.slot[idx].buf, "ping", 4), 0);
  weft_hello_pool_drop(&p, idx);
  cr_expect_eq(p.n, 1, "the silent connection is still pending");
  close(speaker);
  close(silent);
  weft_hello_pool_free(&p);
}

Test(hello_pool, a_full_pool_makes_room_only_after_the_silence_limit) {
  weft_hello_pool_t p;
  cr_assert_eq(weft_hello_pool_init(&p, listen_fd, 2, 4, 700, "test"), ncclSuccess);
  int quiet[2] = {dial(), dial()};
  int idx;
  for (int64_t end = weft_now_ms() + 2000; p.n < 2 && weft_now_ms() < end;) next_event(&p, 50, &idx);
  cr_assert_eq(p.n, 2);
  int64_t t0 = weft_now_ms();
  int late = dial();  // waits in the backlog
  say(late, "late");
  cr_assert_eq(next_event(&p, 3000, &idx), WEFT_HELLO_READY, "the newcomer was never served");
  int64_t waited = weft_now_ms() - t0;
  cr_expect_eq(memcmp(p.slot[idx].buf, "late", 4), 0);
  cr_expect_geq(waited, 400, "room was made after %lld ms, before the 700 ms silence limit", (long long)waited);
  cr_expect_eq(p.n, 2, "one silent connection made way");
  cr_expect(strstr(weft_debug_last_error(), "to make room") != NULL, "no WARN: '%s'", weft_debug_last_error());
  close(late);
  close(quiet[0]);
  close(quiet[1]);
  weft_hello_pool_free(&p);
}

Test(hello_pool, a_connection_closed_half_way_is_lost) {
  weft_hello_pool_t p;
  cr_assert_eq(weft_hello_pool_init(&p, listen_fd, 4, 8, 5000, "test"), ncclSuccess);
  int fd = dial();
  say(fd, "abc");
  close(fd);
  int idx;
  cr_assert_eq(next_event(&p, 2000, &idx), WEFT_HELLO_LOST);
  cr_expect_eq(p.slot[idx].got, 3);
  weft_hello_pool_drop(&p, idx);
  cr_expect_eq(p.n, 0);
  weft_hello_pool_free(&p);
}
