/*
 * test_transport_contract.c — the contract of transports/transport.h,
 * written once and held against every transport: shared memory (two
 * forked processes on one host), the network transport with the socket
 * backend over loopback (two forked processes on two hosts), and the
 * stand-in FIFO of tests/fakes/transport/ (two threads). The ranks see a
 * view made by tests/fakes/transport/fake_view.c, not a communicator.
 *
 * What is checked, in contract_rank's order: can_connect is pure and both
 * ranks of a pair agree; teardown is safe before any set-up and after a
 * set-up broken at each of its allgathers; set-up fills every connection
 * of the served peers (both classes, both directions) with tp, peer, cls,
 * is_send and slot_bytes and leaves the others alone; receive slots are
 * empty at first; messages of 0, 1, slot_bytes-1 and slot_bytes bytes
 * arrive in order with their bytes and tags, both ways, on both classes,
 * and to self where the transport serves it; a sender is pushed back
 * (send_slot NULL) after nslots unreleased messages (at once where the
 * slots are the receiver's, once its own buffers fill where sent slots
 * are freed on sending), while the other class still flows, and is woken
 * when the receiver releases; a receiver asleep on its doorbell is woken
 * by a post; where recv_expect exists, a described message lands at its
 * dst and one described for its slot or with another length reports -1
 * and is in its slot; read and write are both NULL (and can_read 0) or
 * both move bytes between the ranks.
 */
#include <criterion/criterion.h>

#include "../fakes/transport/fake_fifo.h"
#include "../fakes/transport/fake_view.h"
#include "../multirank/harness.h"
#include "util.h"

#define NRANKS 2
#define SLOT 65536  // at least WEFT_NET_DIRECT_MIN's default, so the network's direct receives are used
#define NSLOTS 4
#define CAP 4096                 // messages a sender may post unreleased before it counts as never pushed back
#define WAIT_NS 10000000000LL    // the longest any message may take
#define WAKE_NS 5000000000LL     // how long a sleeper waits for a ring ...
#define WOKEN_NS 4000000000LL    // ... and one that slept this long was not woken
#define QUIET_NS 200000000LL     // a sender without a free slot this long is pushed back
#define NAP_NS 10000000LL

typedef struct {
  const weft_transport_t *tp;
  weft_fake_board_t *board;
  int host_of[NRANKS];
  int frees_on_send;  // a sent slot is free before the receiver releases it (the transport buffers)
} suite_t;

typedef struct {
  const suite_t *s;
  weft_transport_view_t v;
  uint8_t serve[NRANKS];
  int rank, fails;
} cx_t;

// Ranks may be threads: each counts its own failed checks.
#define CHECK(cx, cond, ...)                                                                                     \
  do {                                                                                                          \
    if (!(cond)) {                                                                                              \
      (cx)->fails++;                                                                                            \
      fprintf(stderr, "[%s rank %d] %s:%d: check failed: %s: ", (cx)->s->tp->name, (cx)->rank, __FILE__, __LINE__, \
              #cond);                                                                                           \
      fprintf(stderr, __VA_ARGS__);                                                                             \
      fputc('\n', stderr);                                                                                      \
    }                                                                                                           \
  } while (0)

static weft_conn_t *conn(cx_t *cx, int cls, int is_send, int peer) {
  return weft_view_conn(&cx->v, cls, is_send, peer);
}

// Message m's byte i, and the tag it carries.
static uint8_t pattern(uint32_t m, size_t i) { return (uint8_t)(m * 131u + i * 7u + 1u); }
static uint32_t tag_of(uint32_t m) {
  const uint32_t tags[4] = {0, 1, 0x80000000u + m, UINT32_MAX - m};
  return tags[m % 4];
}
static size_t size_of(uint32_t m) {
  const size_t sizes[4] = {0, 1, SLOT - 1, SLOT};
  return sizes[m % 4];
}

static void fill(void *p, uint32_t m, size_t bytes) {
  for (size_t i = 0; i < bytes; i++) ((uint8_t *)p)[i] = pattern(m, i);
}

// The first byte that is not message m's, or -1.
static long differs(const void *p, uint32_t m, size_t bytes) {
  for (size_t i = 0; i < bytes; i++)
    if (((const uint8_t *)p)[i] != pattern(m, i)) return (long)i;
  return -1;
}

/* ---- waiting: on the rank's doorbell, never spinning ---- */

typedef struct {
  weft_conn_t *c;
  void *slot;
  size_t bytes;
  uint32_t tag;
  int landed;
} waiter_t;

static int ready_recv(waiter_t *w) { return (w->slot = (void *)w->c->tp->recv_slot(w->c, &w->bytes, &w->tag)) != NULL; }
static int ready_send(waiter_t *w) { return (w->slot = w->c->tp->send_slot(w->c)) != NULL; }
static int ready_landed(waiter_t *w) { return (w->landed = w->c->tp->recv_landed(w->c, &w->bytes, &w->tag)) != 0; }

// Looks until ready(w), sleeping on this rank's doorbell between looks (at
// most nap_ns each; a ring ends the sleep). 1 once ready, 0 after max_ns.
static int wait_for(cx_t *cx, int (*ready)(waiter_t *), waiter_t *w, int64_t max_ns, int64_t nap_ns) {
  weft_doorbell_t *bell = cx->v.doorbell(&cx->v, cx->rank);
  int64_t end = weft_now_ns() + max_ns;
  for (;;) {
    if (ready(w)) return 1;
    uint32_t seen = weft_doorbell_arm(bell);
    int ok = ready(w);
    int64_t left = end - weft_now_ns();
    if (!ok && left > 0) weft_doorbell_sleep(bell, seen, left < nap_ns ? left : nap_ns);
    weft_doorbell_disarm(bell);
    if (ok) return 1;
    if (left <= 0) return 0;
  }
}

static void send_msg(cx_t *cx, weft_conn_t *c, uint32_t m, size_t bytes, uint32_t tag) {
  waiter_t w = {.c = c};
  if (!wait_for(cx, ready_send, &w, WAIT_NS, NAP_NS)) {
    CHECK(cx, 0, "no free slot to rank %d (class %d) for message %u", c->peer, c->cls, m);
    return;
  }
  fill(w.slot, m, bytes);
  c->tp->send_post(c, bytes, tag);
}

// Receives the next message and checks it is message m: bytes, tag, payload.
static void recv_msg(cx_t *cx, weft_conn_t *c, uint32_t m, size_t bytes, uint32_t tag) {
  waiter_t w = {.c = c};
  if (!wait_for(cx, ready_recv, &w, WAIT_NS, NAP_NS)) {
    CHECK(cx, 0, "message %u from rank %d (class %d) never came", m, c->peer, c->cls);
    return;
  }
  CHECK(cx, w.bytes == bytes, "message %u: %zu bytes, sent %zu", m, w.bytes, bytes);
  CHECK(cx, w.tag == tag, "message %u: tag %#x, sent %#x", m, w.tag, tag);
  long at = differs(w.slot, m, w.bytes < bytes ? w.bytes : bytes);
  CHECK(cx, at < 0, "message %u: byte %ld differs", m, at);
  c->tp->recv_release(c);
}

/* ---- the checks ---- */

static void check_can_connect(cx_t *cx) {
  weft_transport_view_t before = cx->v;
  uint8_t rows[NRANKS][NRANKS] = {{0}};
  for (int p = 0; p < NRANKS; p++) {
    int a = cx->s->tp->can_connect(&cx->v, p) != 0, b = cx->s->tp->can_connect(&cx->v, p) != 0;
    CHECK(cx, a == b, "can_connect(%d) answered %d, then %d", p, a, b);
    rows[cx->rank][p] = cx->serve[p] = (uint8_t)a;
  }
  CHECK(cx, memcmp(&before, &cx->v, sizeof(before)) == 0, "can_connect changed the view");
  CHECK(cx, cx->v.allgather(&cx->v, rows, NRANKS) == ncclSuccess, "allgather");
  for (int p = 0; p < NRANKS; p++)
    CHECK(cx, rows[cx->rank][p] == rows[p][cx->rank], "rank %d says %d about rank %d, which says %d", cx->rank,
          rows[cx->rank][p], p, rows[p][cx->rank]);
}

static void view_fresh(cx_t *cx) {
  if (cx->v.core != NULL) weft_fake_view_fini(&cx->v);
  if (weft_fake_view_init(&cx->v, cx->s->board, cx->rank, cx->s->host_of, SLOT, NSLOTS) != ncclSuccess) {
    fprintf(stderr, "rank %d: no memory for the test's view\n", cx->rank);
    abort();
  }
}

// Teardown before any set-up, then after set-ups broken at their first,
// second ... allgather, until one needs no more allgathers than allowed.
static void check_teardown_after_failure(cx_t *cx) {
  cx->s->tp->teardown(&cx->v, NULL);
  int broken = 0, whole = 0;
  for (int k = 1; k <= 8 && !whole; k++) {
    view_fresh(cx);
    weft_fake_view_fail_allgather_at(&cx->v, k);
    void *state = NULL;
    ncclResult_t res = cx->s->tp->setup(&cx->v, cx->serve, &state);
    cx->s->tp->teardown(&cx->v, state);
    weft_fake_view_barrier(&cx->v);
    broken += res != ncclSuccess;
    whole = res == ncclSuccess;
  }
  CHECK(cx, broken > 0, "no set-up failed when its allgather did");
  CHECK(cx, whole, "set-up still failed with its 8th allgather failing");
  view_fresh(cx);
}

static void check_conns(cx_t *cx) {
  for (int p = 0; p < NRANKS; p++)
    for (int cls = 0; cls < WEFT_NUM_CLASSES; cls++)
      for (int is_send = 0; is_send < 2; is_send++) {
        weft_conn_t *c = conn(cx, cls, is_send, p);
        if (!cx->serve[p]) {
          CHECK(cx, c->tp == NULL, "rank %d is not served, yet its connection was claimed", p);
          continue;
        }
        CHECK(cx, c->tp == cx->s->tp, "peer %d class %d %s: tp %p", p, cls, is_send ? "send" : "recv", (void *)c->tp);
        CHECK(cx, c->peer == p && c->cls == cls && c->is_send == is_send,
              "peer %d class %d %s: says peer %d class %d is_send %d", p, cls, is_send ? "send" : "recv", c->peer,
              c->cls, c->is_send);
        CHECK(cx, c->slot_bytes == SLOT, "slot_bytes %zu", c->slot_bytes);
        if (!is_send) {
          size_t bytes;
          uint32_t tag;
          CHECK(cx, c->tp == NULL || c->tp->recv_slot(c, &bytes, &tag) == NULL, "a message before any was sent");
        }
      }
}

// Every size and tag, three times round the FIFO, from `from` to `to` on each class.
static void check_messages(cx_t *cx, int from, int to) {
  for (int cls = 0; cls < WEFT_NUM_CLASSES; cls++)
    for (uint32_t m = 0; m < 3 * NSLOTS; m++) {
      if (cx->rank == from) send_msg(cx, conn(cx, cls, 1, to), m, size_of(m), tag_of(m));
      if (cx->rank == to) recv_msg(cx, conn(cx, cls, 0, from), m, size_of(m), tag_of(m));
    }
  weft_fake_view_barrier(&cx->v);
}

// To itself, one FIFO's worth at a time (nothing else would empty it).
static void check_self(cx_t *cx) {
  if (!cx->serve[cx->rank]) return;
  for (int cls = 0; cls < WEFT_NUM_CLASSES; cls++) {
    for (uint32_t m = 0; m < NSLOTS; m++) send_msg(cx, conn(cx, cls, 1, cx->rank), m, size_of(m), tag_of(m));
    for (uint32_t m = 0; m < NSLOTS; m++) recv_msg(cx, conn(cx, cls, 0, cx->rank), m, size_of(m), tag_of(m));
  }
}

// Fill the collective class until send_slot stays NULL; the point-to-point
// class still flows; releasing wakes the sender.
static void check_push_back(cx_t *cx, int from, int to) {
  int count = 0;
  weft_conn_t *coll = conn(cx, WEFT_CLASS_COLL, cx->rank == from, cx->rank == from ? to : from);
  weft_conn_t *p2p = conn(cx, WEFT_CLASS_P2P, cx->rank == from, cx->rank == from ? to : from);
  if (cx->rank == from) {
    waiter_t w = {.c = coll};
    while (count < CAP && wait_for(cx, ready_send, &w, QUIET_NS, QUIET_NS)) {
      fill(w.slot, (uint32_t)count, SLOT);
      coll->tp->send_post(coll, SLOT, (uint32_t)count + 1);
      count++;
    }
    CHECK(cx, count >= NSLOTS, "pushed back after %d messages, with %d slots", count, NSLOTS);
    CHECK(cx, cx->s->frees_on_send || count == NSLOTS, "%d messages went into %d slots", count, NSLOTS);
    CHECK(cx, count < CAP, "never pushed back after %d messages", count);
    send_msg(cx, p2p, 7, 1, 0xc1a55);
  }
  int counts[NRANKS] = {0};
  counts[cx->rank] = count;
  CHECK(cx, cx->v.allgather(&cx->v, counts, sizeof(int)) == ncclSuccess, "allgather");
  if (cx->rank == to) recv_msg(cx, p2p, 7, 1, 0xc1a55);  // past the full class
  weft_fake_view_barrier(&cx->v);
  if (cx->rank == from) {
    waiter_t w = {.c = coll};
    int64_t t0 = weft_now_ns();
    int woke = wait_for(cx, ready_send, &w, WAKE_NS, WAKE_NS) && weft_now_ns() - t0 < WOKEN_NS;
    CHECK(cx, woke, "no free slot %.1f s after the receiver began to release", (weft_now_ns() - t0) * 1e-9);
  } else if (cx->rank == to) {
    for (int m = 0; m < counts[from]; m++) recv_msg(cx, coll, (uint32_t)m, SLOT, (uint32_t)m + 1);
    size_t bytes;
    uint32_t tag;
    CHECK(cx, coll->tp->recv_slot(coll, &bytes, &tag) == NULL, "a message after the last one sent");
  }
  weft_fake_view_barrier(&cx->v);
}

// A receiver asleep on its doorbell wakes for a post.
static void check_wake_on_post(cx_t *cx, int from, int to) {
  weft_fake_view_barrier(&cx->v);
  if (cx->rank == from) {
    weft_test_sleep_ms(50);  // the receiver is asleep by now
    send_msg(cx, conn(cx, WEFT_CLASS_COLL, 1, to), 9, 1, 0xbe11);
  } else if (cx->rank == to) {
    waiter_t w = {.c = conn(cx, WEFT_CLASS_COLL, 0, from)};
    int64_t t0 = weft_now_ns();
    int got = wait_for(cx, ready_recv, &w, WAKE_NS, WAKE_NS), woke = got && weft_now_ns() - t0 < WOKEN_NS;
    CHECK(cx, woke, "asleep %.1f s with a message posted", (weft_now_ns() - t0) * 1e-9);
    CHECK(cx, got && w.bytes == 1 && w.tag == 0xbe11 && differs(w.slot, 9, 1) < 0, "the wrong message");
    if (got) w.c->tp->recv_release(w.c);
  }
  weft_fake_view_barrier(&cx->v);
}

// recv_expect: one message lands at its dst; one described for its slot
// and one of another length than described are in their slots (-1).
static void check_expect(cx_t *cx, int from, int to) {
  if (cx->s->tp->recv_expect == NULL) {
    CHECK(cx, cx->s->tp->recv_expect_room == NULL && cx->s->tp->recv_landed == NULL, "half of recv_expect");
    return;
  }
  uint8_t *dst_a = malloc(SLOT), *dst_c = malloc(SLOT);
  if (dst_a == NULL || dst_c == NULL) abort();
  weft_conn_t *c = conn(cx, WEFT_CLASS_COLL, cx->rank == from, cx->rank == from ? to : from);
  size_t room[NRANKS] = {0};
  if (cx->rank == to) {
    room[to] = c->tp->recv_expect_room(c);
    CHECK(cx, room[to] >= 3, "room for %zu descriptions with %d slots free", room[to], NSLOTS);
    memset(dst_c, 0xee, SLOT);
    if (room[to] >= 3) {
      c->tp->recv_expect(c, dst_a, SLOT, 0xa);
      c->tp->recv_expect(c, NULL, SLOT, 0xb);
      c->tp->recv_expect(c, dst_c, SLOT, 0xc);
    }
  }
  CHECK(cx, cx->v.allgather(&cx->v, room, sizeof(size_t)) == ncclSuccess, "allgather");
  if (room[to] >= 3 && cx->rank == from) {
    send_msg(cx, c, 20, SLOT, 0xa);
    send_msg(cx, c, 21, SLOT, 0xb);
    send_msg(cx, c, 22, SLOT - 1, 0xc);
  } else if (room[to] >= 3 && cx->rank == to) {
    waiter_t w = {.c = c};
    CHECK(cx, wait_for(cx, ready_landed, &w, WAIT_NS, NAP_NS) && w.landed == 1, "described message: %d", w.landed);
    CHECK(cx, w.landed != 1 || (w.bytes == SLOT && w.tag == 0xa && differs(dst_a, 20, SLOT) < 0),
          "landed %zu bytes tag %#x, not the message sent", w.bytes, w.tag);
    if (w.landed == -1) recv_msg(cx, c, 20, SLOT, 0xa);
    CHECK(cx, wait_for(cx, ready_landed, &w, WAIT_NS, NAP_NS) && w.landed == -1, "one for its slot: %d", w.landed);
    recv_msg(cx, c, 21, SLOT, 0xb);
    CHECK(cx, wait_for(cx, ready_landed, &w, WAIT_NS, NAP_NS) && w.landed == -1, "another length: %d", w.landed);
    recv_msg(cx, c, 22, SLOT - 1, 0xc);
    CHECK(cx, dst_c[0] == 0xee && dst_c[SLOT - 1] == 0xee, "a message of another length was written at dst");
  }
  weft_fake_view_barrier(&cx->v);
  free(dst_a);
  free(dst_c);
}

// read and write: both NULL with can_read 0, or both move bytes.
static void check_read_write(cx_t *cx) {
  const weft_transport_t *tp = cx->s->tp;
  CHECK(cx, (tp->read == NULL) == (tp->write == NULL), "read and write: one NULL, not both");
  if (tp->read == NULL) {
    CHECK(cx, cx->v.can_read == 0, "can_read without read");
    return;
  }
  if (!cx->v.can_read) {
    fprintf(stderr, "[%s rank %d] can_read is 0 here: read and write not run\n", tp->name, cx->rank);
    return;
  }
  enum { N = 4096 };
  uint8_t *mine = malloc(N), *inbox = calloc(1, N), *got = malloc(N);
  if (mine == NULL || inbox == NULL || got == NULL) abort();
  int peer = 1 - cx->rank;
  uint64_t addr[NRANKS][2] = {{0}};
  fill(mine, 30 + (uint32_t)cx->rank, N);
  addr[cx->rank][0] = (uint64_t)(uintptr_t)mine;
  addr[cx->rank][1] = (uint64_t)(uintptr_t)inbox;
  CHECK(cx, cx->v.allgather(&cx->v, addr, sizeof(addr[0])) == ncclSuccess, "allgather");
  weft_conn_t *c = conn(cx, WEFT_CLASS_COLL, 1, peer);
  CHECK(cx, tp->read(c, got, addr[peer][0], N) == ncclSuccess, "read");
  CHECK(cx, differs(got, 30 + (uint32_t)peer, N) < 0, "read the wrong bytes");
  CHECK(cx, tp->write(c, addr[peer][1], mine, N) == ncclSuccess, "write");
  weft_fake_view_barrier(&cx->v);  // both writes are done
  CHECK(cx, differs(inbox, 30 + (uint32_t)peer, N) < 0, "the peer's write did not land");
  weft_fake_view_barrier(&cx->v);  // nobody reads or writes these any more
  free(mine);
  free(inbox);
  free(got);
}

static int contract_rank(int rank, const suite_t *s) {
  cx_t cx = {.s = s, .rank = rank};
  view_fresh(&cx);
  check_can_connect(&cx);
  check_teardown_after_failure(&cx);
  void *state = NULL;
  ncclResult_t res = s->tp->setup(&cx.v, cx.serve, &state);
  CHECK(&cx, res == ncclSuccess, "setup returned %d", (int)res);
  if (res == ncclSuccess) {
    check_conns(&cx);
    weft_fake_view_barrier(&cx.v);
    check_messages(&cx, 0, 1);
    check_messages(&cx, 1, 0);
    check_self(&cx);
    check_push_back(&cx, 0, 1);
    check_wake_on_post(&cx, 1, 0);
    check_expect(&cx, 0, 1);
    check_read_write(&cx);
    weft_fake_view_barrier(&cx.v);
  }
  s->tp->teardown(&cx.v, state);
  weft_fake_view_fini(&cx.v);
  return cx.fails;
}

/* ---- the transports ---- */

static int forked_rank(int rank, int nranks, ncclUniqueId *ids, void *arg) {
  (void)nranks, (void)ids;
  return contract_rank(rank, arg);
}

static int thread_rank(int rank, int nranks, ncclComm_t comm, void *arg) {
  (void)nranks, (void)comm;
  return contract_rank(rank, arg);
}

static suite_t suite(const weft_transport_t *tp, int host1, int frees_on_send) {
  weft_test_env_defaults();
  suite_t s = {.tp = tp, .board = weft_fake_board_new(NRANKS), .host_of = {0, host1}, .frees_on_send = frees_on_send};
  cr_assert_not_null(s.board, "the test's board");
  return s;
}

Test(transport_contract, shm, .timeout = 120) {
  suite_t s = suite(&weft_shm_transport, 0, 0);
  cr_expect_eq(weft_test_fork_ranks_ids(NRANKS, 0, forked_rank, &s, 100, NULL), 0, "see stderr");
  weft_fake_board_free(s.board);
}

Test(transport_contract, net_socket_loopback, .timeout = 120) {
  suite_t s = suite(&weft_net_transport, 1, 1);
  cr_expect_eq(weft_test_fork_ranks_ids(NRANKS, 0, forked_rank, &s, 100, NULL), 0, "see stderr");
  weft_fake_board_free(s.board);
}

Test(transport_contract, fake_fifo, .timeout = 120) {
  suite_t s = suite(&weft_fake_fifo_transport, 0, 0);
  ncclComm_t none[NRANKS] = {NULL};
  cr_expect_eq(weft_test_thread_ranks(NRANKS, none, thread_rank, &s), 0, "see stderr");
  weft_fake_board_free(s.board);
}
