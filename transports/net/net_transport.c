/*
 * net_transport.c — the network transport: connections between ranks that
 * shared memory does not serve (other hosts, or NCCL_SHM_DISABLE=1), over a
 * network backend (net.h): the built-in TCP one (net_socket.c) or an NCCL
 * net plugin (plugins/net/), chosen once per process (NCCL_NET,
 * NCCL_NET_PLUGIN) by the core and lent through the view's net_backend.
 * Each rank listens and connects on one of the backend's devices, the one
 * its place on the host calls for (net_device.c: the NIC nearest its GPU
 * or NUMA node, several NICs used as rails); its peers connect to the
 * address on their own chosen device that the handle carries.
 *
 * The engine sees the same slot FIFOs as with shared memory, here in
 * process memory. A proxy thread per communicator moves them: posted send
 * slots become isend requests and are given back when sent; free receive
 * slots are kept posted as irecv requests and handed to the engine as
 * messages land, with their length and tag. The proxy polls while there is
 * traffic and otherwise sleeps in epoll on the backend's descriptors and an
 * eventfd the engine writes only when the proxy sleeps (over a backend
 * without descriptors, such as an NCCL net plugin, it naps from 50 us up to
 * 1 ms and looks again).
 *
 * Messages of at most WEFT_NET_INLINE bytes (by default every message)
 * are moved by the engine itself while it waits in a call, as an MPI
 * library's blocking call does: posting one, or polling a connection whose
 * last message was such, runs one pass of progress in the engine's thread,
 * so a step costs no hand-over between threads. The pass is taken under
 * the lock the proxy holds for its own passes, and only when it is free.
 * While the engine has polled within PROXY_DEFER_NS the proxy sleeps on the
 * engine's eventfd, which the engine writes when a connection turns to
 * larger messages (the proxy takes them over) or a call leaves a send
 * unfinished; waking it on a timer instead would cost the engine a context
 * switch each time. Larger messages stay with the proxy, which then moves
 * bytes while the engine copies and reduces. A pass moves the connections
 * whose descriptors have events and those the engine gave new work.
 *
 * Large messages the engine only copies into the user's buffer (RECV,
 * RECV_COPY_SEND) skip the slot: the engine describes the messages it will
 * receive, as far ahead as there are slots (an expectation each: address or
 * NULL for the slot, length, tag); the backend holds each described message
 * of at least WEFT_NET_DIRECT_MIN bytes after its header, and the proxy lets
 * it land at the described address when the header matches, in its slot
 * otherwise (the engine then reports the mismatch). Messages not described
 * yet land in slots, so the sockets are drained as before.
 *
 * Failure: a connection that breaks fails the communicator on this host
 * (the view's fail(), naming the peer rank and its address), and a proxy that
 * sees its host's communicator failed resets all its connections, so the
 * ranks on the other hosts fail too instead of waiting for a timeout.
 */
#include "transport.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "checks.h"
#include "env.h"
#include "net.h"
#include "net_device.h"
#include "net_notice.h"
#include "util.h"

#define HELLO_MAGIC 0x776566742d6e6574ull
#define HELLO_SECRET_BYTES 32  // the most of the communicator's secret a hello carries
#define PROXY_SLEEP_MS 10  // a sleeping proxy still checks for failures this often
#define PROXY_NAP_NS 50000 // over a backend without descriptors (plugins), naps grow from this ...
#define PROXY_POLL_MS 1    // ... to this as the quiet lasts
#define PROXY_DEFER_NS 200000  // the engine polled this recently: it is in a call and moves the connections
#define EV_ENGINE UINT32_MAX   // epoll data of the engine's eventfd (others: the connection's index)

typedef struct weft_net_state net_state_t;

// One direction of one (peer, class) pair: a FIFO of slots the engine and
// the proxy share, and the backend communicator that carries it.
typedef struct {
  net_state_t *st;
  int peer, cls, is_send;
  size_t nslots, slot_bytes;
  char *data;                   // nslots * slot_bytes
  uint32_t *len, *tag;          // per slot
  void **reqs;                  // per slot: the backend request in flight
  void *net_comm;
  // Engine side.
  uint64_t pos;                 // slots posted (send) or consumed (receive) by the engine
  _Atomic uint64_t posted;      // send: what the engine published (== pos)
  _Atomic uint64_t consumed;    // receive: what the engine released (== pos)
  // Proxy side.
  uint64_t issued;              // requests handed to the backend
  _Atomic uint64_t completed;   // send: slots sent (free again); receive: slots landed
  // Receiving into the engine's buffers (sequence numbers are message index + 1).
  void **exp_dst;               // per slot: where that message goes (NULL: its slot) ...
  uint32_t *exp_len, *exp_tag;  // ... if it has this length and tag (0: any)
  _Atomic uint64_t expect_seq;  // engine: messages [0, expect_seq) are described
  uint64_t hold_until;          // proxy: what the backend was told of expect_seq
  uint8_t *direct;              // per slot: the proxy let it land at exp_dst
  uint64_t released;            // proxy: the last held message it let land
  uint64_t ndirect;             // engine: messages received straight into its buffers
  int small;                    // engine: the last message was small enough to move itself
  int told;                     // proxy: the peer's failure notice arrived here
} net_conn_t;

struct weft_net_state {
  const weft_net_t *net;
  int dev;                      // the backend's device this rank listens and connects on (net_device.c)
  weft_transport_view_t *v;
  net_conn_t **conns;
  int nconns;
  pthread_t thread;
  int thread_live;
  _Atomic int stop;             // set by teardown: flush, say goodbye, exit
  _Atomic int asleep;           // the proxy sleeps in epoll: the engine must write evfd
  _Atomic int exited;           // the proxy thread has returned
  pthread_mutex_t lock;         // one pass of progress at a time (proxy_pass)
  int lock_live;
  int broken;                   // under lock: the connections were reset
  size_t inline_max;            // WEFT_NET_INLINE: messages the waiting engine moves itself
  _Atomic int napping;          // the proxy naps on defer_epfd while the engine moves small messages
  int defer_epfd;               // the engine's eventfd alone
  _Atomic int64_t engine_polled;  // weft_now_ns() of the engine's last pass
  uint8_t *ready;               // [nconns], under lock: the pass's connections with events
  uint64_t engine_passes;       // under lock: passes the engine ran itself
  size_t direct_min;            // WEFT_NET_DIRECT_MIN, 0 when the backend cannot hold
  int epfd, evfd;
  int no_fds;                   // the backend has no descriptors to wait on: the idle proxy naps
  char (*addr)[64];             // every rank's backend address, for messages
  uint8_t *serve;               // [nranks]: the peers this rank reaches over the network
  char notice[WEFT_NET_NOTICE_BYTES];  // the failure notice this rank sends its peers
};

typedef struct {
  uint64_t magic;
  uint8_t secret[HELLO_SECRET_BYTES];
  int32_t rank, cls;
} hello_t;

typedef struct {
  char handle[WEFT_NET_HANDLE_BYTES];
  char addr[64];
} net_card_t;

// Wakes the proxy if it waits in `*flag` (asleep or napping): the caller
// published its news before this fence.
static void wake_proxy_if(net_state_t *st, _Atomic int *flag) {
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(flag, memory_order_relaxed)) {
    uint64_t one = 1;
    ssize_t w = write(st->evfd, &one, sizeof(one));
    (void)w;  // a full counter already wakes the proxy
  }
}

static void wake_proxy(net_state_t *st) { wake_proxy_if(st, &st->asleep); }

static int proxy_pass(net_state_t *st);

// The engine found nothing to do on a connection of small messages, or
// posted one: move the connections now, unless the proxy is moving them.
// Returns 1 if a pass ran.
static int engine_progress(net_conn_t *nc) {
  net_state_t *st = nc->st;
  if (!nc->small) return 0;
  atomic_store_explicit(&st->engine_polled, weft_now_ns(), memory_order_relaxed);
  if (pthread_mutex_trylock(&st->lock) != 0) return 0;
  if (!st->broken) proxy_pass(st);
  st->engine_passes++;
  pthread_mutex_unlock(&st->lock);
  return 1;
}

// The connection's last message was `bytes` long: a large one gives the
// moving back to the proxy, waking it from its nap.
static void note_size(net_conn_t *nc, size_t bytes) {
  net_state_t *st = nc->st;
  int was = nc->small;
  nc->small = st->inline_max > 0 && bytes <= st->inline_max;
  if (!was || nc->small) return;
  atomic_store_explicit(&st->engine_polled, 0, memory_order_relaxed);
  wake_proxy_if(st, &st->napping);
}

/* ---- the engine's side (weft_transport_t) ---- */

static int send_slot_busy(const net_conn_t *nc) {
  return nc->pos - atomic_load_explicit(&nc->completed, memory_order_acquire) >= nc->nslots;
}

static void *net_send_slot(weft_conn_t *c) {
  net_conn_t *nc = c->priv;
  if (send_slot_busy(nc) && (!engine_progress(nc) || send_slot_busy(nc))) return NULL;
  return nc->data + (nc->pos % nc->nslots) * nc->slot_bytes;
}

static void net_send_post(weft_conn_t *c, size_t bytes, uint32_t tag) {
  net_conn_t *nc = c->priv;
  nc->len[nc->pos % nc->nslots] = (uint32_t)bytes;
  nc->tag[nc->pos % nc->nslots] = tag;
  nc->pos++;
  atomic_store_explicit(&nc->posted, nc->pos, memory_order_release);
  note_size(nc, bytes);
  // A small one is sent at once where the kernel takes it; the proxy finishes the rest.
  if (!engine_progress(nc) || atomic_load_explicit(&nc->completed, memory_order_acquire) != nc->pos) {
    wake_proxy(nc->st);
    wake_proxy_if(nc->st, &nc->st->napping);
  }
}

static int nothing_landed(const net_conn_t *nc) {
  return atomic_load_explicit(&nc->completed, memory_order_acquire) == nc->pos;
}

static const void *net_recv_slot(weft_conn_t *c, size_t *bytes, uint32_t *tag) {
  net_conn_t *nc = c->priv;
  if (nothing_landed(nc) && (!engine_progress(nc) || nothing_landed(nc))) return NULL;
  *bytes = nc->len[nc->pos % nc->nslots];
  *tag = nc->tag[nc->pos % nc->nslots];
  note_size(nc, *bytes);
  return nc->data + (nc->pos % nc->nslots) * nc->slot_bytes;
}

static void net_recv_release(weft_conn_t *c) {
  net_conn_t *nc = c->priv;
  nc->pos++;
  atomic_store_explicit(&nc->consumed, nc->pos, memory_order_release);
  wake_proxy(nc->st);
}

static size_t net_recv_expect_room(weft_conn_t *c) {
  net_conn_t *nc = c->priv;
  if (nc->st->direct_min == 0) return 0;
  uint64_t seq = atomic_load_explicit(&nc->expect_seq, memory_order_relaxed);
  return seq < nc->pos ? nc->nslots : nc->pos + nc->nslots - seq;
}

static void net_recv_expect(weft_conn_t *c, void *dst, size_t bytes, uint32_t tag) {
  net_conn_t *nc = c->priv;
  uint64_t seq = atomic_load_explicit(&nc->expect_seq, memory_order_relaxed);
  if (seq < nc->pos) seq = nc->pos;
  size_t k = seq % nc->nslots;
  nc->exp_dst[k] = dst;
  nc->exp_len[k] = (uint32_t)bytes;
  nc->exp_tag[k] = tag;
  atomic_store_explicit(&nc->expect_seq, seq + 1, memory_order_release);
}

static int net_recv_landed(weft_conn_t *c, size_t *got, uint32_t *tag) {
  net_conn_t *nc = c->priv;
  if (nothing_landed(nc) && (!engine_progress(nc) || nothing_landed(nc))) return 0;
  size_t k = nc->pos % nc->nslots;
  if (!nc->direct[k]) return -1;  // in its slot: not held, or not what was described
  *got = nc->len[k];
  note_size(nc, *got);
  *tag = nc->tag[k];
  nc->ndirect++;
  net_recv_release(c);
  return 1;
}

// After a failed operation: a message may still be landing in the user's
// buffer. Every failure aborts the communicator, which stops the proxy;
// wait for that so nothing writes into the buffer after the call returned.
static void net_quiesce(weft_conn_t *c) {
  net_conn_t *nc = c->priv;
  if (nc == NULL || nc->is_send || atomic_load(&nc->expect_seq) <= nc->pos) return;
  for (int i = 0; i < 5000 && !atomic_load(&nc->st->exited); i++) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  if (!atomic_load(&nc->st->exited)) WARN("net transport: the proxy did not stop after a failure");
}

/* ---- the proxy ---- */

static void ring_engine(net_state_t *st) { weft_doorbell_ring(st->v->doorbell(st->v, st->v->rank)); }

// The oldest receive (message `next`, index + 1) may wait after its header
// (only described messages are held): let it land where it was described
// if it is what was described, else in its slot. Returns 1 when it was let
// go, 0 if it is not held, -1 on failure.
static int serve_held(net_conn_t *nc, uint64_t next, size_t k) {
  const weft_net_t *net = nc->st->net;
  size_t size = 0;
  uint32_t tag = 0;
  if (nc->released == next || !net->held(nc->reqs[k], &size, &tag)) return 0;
  void *dst = nc->exp_dst[k];
  int fits = dst != NULL && size == nc->exp_len[k] && (nc->exp_tag[k] == 0 || tag == nc->exp_tag[k]);
  if (net->release(nc->reqs[k], fits ? dst : NULL) != ncclSuccess) return -1;
  nc->direct[k] = (uint8_t)fits;
  nc->released = next;
  return 1;
}

// Hand new work to the backend and collect what finished. Returns 1 if
// anything moved, 0 if not, -1 when the connection failed.
// The peer's failure notice arrived (net_notice.h): this host records the
// failure where it began, and the connection counts as failed (-1).
static int take_notice(net_conn_t *nc, const char *payload, size_t size) {
  weft_transport_view_t *v = nc->st->v;
  char origin[WEFT_NET_NOTICE_BYTES], reason[WEFT_NET_NOTICE_BYTES + 64];
  weft_net_notice_read(payload, size, nc->peer, v->host_of[nc->peer], origin, reason, sizeof(origin));
  WARN("rank %d: rank %d (host %d) reports that the communicator failed: %s", v->rank, nc->peer,
       v->host_of[nc->peer], origin);
  v->fail(v, ncclRemoteError, reason);
  nc->told = 1;
  return -1;
}

static int conn_progress(net_conn_t *nc) {
  const weft_net_t *net = nc->st->net;
  int moved = 0;
  uint64_t done = atomic_load_explicit(&nc->completed, memory_order_relaxed);
  if (nc->is_send) {
    uint64_t posted = atomic_load_explicit(&nc->posted, memory_order_acquire);
    for (; nc->issued < posted; nc->issued++, moved = 1) {
      size_t k = nc->issued % nc->nslots;
      if (net->isend(nc->net_comm, nc->data + k * nc->slot_bytes, nc->len[k], nc->tag[k], &nc->reqs[k]) != ncclSuccess)
        return -1;
    }
  } else {
    uint64_t described = atomic_load_explicit(&nc->expect_seq, memory_order_acquire);
    if (described != nc->hold_until) {
      net->hold_large(nc->net_comm, nc->st->direct_min, described);
      nc->hold_until = described;
    }
    uint64_t consumed = atomic_load_explicit(&nc->consumed, memory_order_acquire);
    for (; nc->issued < consumed + nc->nslots; nc->issued++, moved = 1) {
      size_t k = nc->issued % nc->nslots;
      nc->direct[k] = 0;
      if (net->irecv(nc->net_comm, nc->data + k * nc->slot_bytes, nc->slot_bytes, &nc->reqs[k]) != ncclSuccess)
        return -1;
    }
  }
  while (done < nc->issued) {
    size_t k = done % nc->nslots, size = 0;
    uint32_t tag = 0;
    int fin = 0;
    if (net->test(nc->reqs[k], &fin, &size, &tag) != ncclSuccess) return -1;
    if (!fin && !nc->is_send && nc->st->direct_min > 0) {
      int h = serve_held(nc, done + 1, k);
      if (h < 0) return -1;
      if (h > 0) {
        moved = 1;
        continue;  // let go: it may have landed already
      }
    }
    if (!fin) break;
    if (!nc->is_send && tag == WEFT_TAG_FAILURE) return take_notice(nc, nc->data + k * nc->slot_bytes, size);
    if (!nc->is_send) {
      nc->len[k] = (uint32_t)size;
      nc->tag[k] = tag;
    }
    atomic_store_explicit(&nc->completed, ++done, memory_order_release);
    moved = 1;
  }
  return moved;
}

// Tell every network peer where the failure began (net_notice.h), then
// reset the connections.
static void notify_peers(net_state_t *st) {
  weft_transport_view_t *v = st->v;
  char origin[WEFT_NET_NOTICE_BYTES];
  void *comms[st->nconns > 0 ? st->nconns : 1];
  if (v->failure == NULL) return;
  v->failure(v, origin, sizeof(origin));
  if (origin[0] == '\0') return;  // aborted by its owner: nothing to tell
  for (int i = 0; i < st->nconns; i++) comms[i] = st->conns[i]->is_send ? st->conns[i]->net_comm : NULL;
  weft_net_notice_send(st->net, comms, st->nconns, origin, st->notice);
}

static void fail_all(net_state_t *st, const net_conn_t *culprit) {
  weft_transport_view_t *v = st->v;
  if (culprit != NULL && !culprit->told) {
    char reason[256];
    snprintf(reason, sizeof(reason), "rank %d lost its connection %s rank %d (%s, host %d)", v->rank,
             culprit->is_send ? "to" : "from", culprit->peer, st->addr[culprit->peer], v->host_of[culprit->peer]);
    WARN("%s", reason);
    v->fail(v, ncclRemoteError, reason);
  }
  notify_peers(st);
  // Reset every connection: the peers' proxies see it and fail their hosts.
  INFO(WEFT_LOG_NET, "rank %d: the communicator failed; resetting its %d network connections", v->rank, st->nconns);
  for (int i = 0; i < st->nconns; i++) {
    if (st->conns[i]->net_comm != NULL) st->net->abort_comm(st->conns[i]->net_comm);
    st->conns[i]->net_comm = NULL;
  }
  st->broken = 1;
}

// Work the engine handed over that no descriptor announces: sends to
// issue or finish, receives to post, descriptions to pass on.
static int conn_has_work(net_conn_t *nc) {
  if (nc->is_send)
    return atomic_load_explicit(&nc->posted, memory_order_acquire) != nc->issued ||
           atomic_load_explicit(&nc->completed, memory_order_relaxed) != nc->issued;
  return atomic_load_explicit(&nc->consumed, memory_order_acquire) + nc->nslots != nc->issued ||
         atomic_load_explicit(&nc->expect_seq, memory_order_acquire) != nc->hold_until;
}

// Marks the connections whose descriptors have events (all of them over a
// backend without descriptors). Events stay listed until the backend's own
// progress takes them, so nothing is lost between passes.
static void mark_ready(net_state_t *st) {
  memset(st->ready, st->no_fds, (size_t)st->nconns);
  if (st->no_fds) return;
  struct epoll_event ev[64];
  int k;
  do {
    k = epoll_wait(st->epfd, ev, 64, 0);
    for (int i = 0; i < k; i++)
      if (ev[i].data.u32 != EV_ENGINE) st->ready[ev[i].data.u32] = 1;
  } while (k == 64);
}

// One pass over the connections with events or new work (the caller holds
// st->lock and the connections are not broken): 1 if anything moved, 0 if
// not, -1 when one failed (every connection is reset then).
static int proxy_pass(net_state_t *st) {
  int moved = 0;
  mark_ready(st);
  for (int i = 0; i < st->nconns; i++) {
    if (!st->ready[i] && !conn_has_work(st->conns[i])) continue;
    int m = conn_progress(st->conns[i]);
    if (m < 0) {
      fail_all(st, st->conns[i]);
      return -1;
    }
    moved |= m;
  }
  return moved;
}

static int sends_flushed(const net_state_t *st) {
  for (int i = 0; i < st->nconns; i++) {
    const net_conn_t *nc = st->conns[i];
    if (nc->is_send && atomic_load(&nc->completed) != atomic_load(&nc->posted)) return 0;
  }
  return 1;
}

// Sleep until the engine or a socket has news: at most PROXY_SLEEP_MS, or
// over a backend without descriptors a nap that doubles from PROXY_NAP_NS
// to PROXY_POLL_MS as the quiet lasts (the engine's eventfd still wakes it).
static void proxy_sleep(const net_state_t *st, int naps) {
  struct epoll_event ev[16];
  if (!st->no_fds) {
    epoll_wait(st->epfd, ev, 16, PROXY_SLEEP_MS);
    return;
  }
  long ns = (long)PROXY_NAP_NS << (naps < 6 ? naps : 6);
  if (ns > PROXY_POLL_MS * 1000000L) ns = PROXY_POLL_MS * 1000000L;
  struct timespec ts = {0, ns};
  if (epoll_pwait2(st->epfd, ev, 16, &ts, NULL) < 0 && errno == ENOSYS) epoll_wait(st->epfd, ev, 16, PROXY_POLL_MS);
}

// The engine has moved small messages within PROXY_DEFER_NS (and nothing
// asks the proxy to stop or fail): it is in a call and moves them itself.
static int engine_moves(net_state_t *st) {
  int64_t polled = atomic_load_explicit(&st->engine_polled, memory_order_relaxed);
  return polled != 0 && weft_now_ns() - polled < PROXY_DEFER_NS && !atomic_load(&st->stop) && !st->v->failed(st->v);
}

// Nap while the engine moves small messages: until the engine hands the
// work back (note_size) or leaves a send unfinished (net_send_post), both
// of which write evfd, or PROXY_SLEEP_MS passes. A shorter nap would cost
// the engine a context switch each time the proxy looks.
static void proxy_nap(net_state_t *st) {
  struct epoll_event ev;
  atomic_store(&st->napping, 1);
  atomic_thread_fence(memory_order_seq_cst);
  if (engine_moves(st)) epoll_wait(st->defer_epfd, &ev, 1, PROXY_SLEEP_MS);
  atomic_store(&st->napping, 0);
  uint64_t drained;
  while (read(st->evfd, &drained, sizeof(drained)) > 0) {
  }
}

static void *proxy_main(void *arg) {
  net_state_t *st = arg;
  weft_transport_view_t *v = st->v;
  weft_debug_set_rank(v->rank);
  int64_t spin_ns = weft_env_WEFT_NET_SPIN_NS(), last_moved = 0;  // weft_now_ns() when data last moved
  int naps = 0;  // sleeps since anything moved
  for (;;) {
    if (engine_moves(st)) {
      proxy_nap(st);
      continue;
    }
    pthread_mutex_lock(&st->lock);
    if (v->failed(v) && !st->broken) fail_all(st, NULL);
    int moved = st->broken ? -1 : proxy_pass(st);
    pthread_mutex_unlock(&st->lock);
    if (moved < 0) {
      atomic_store(&st->exited, 1);
      return NULL;
    }
    if (moved) ring_engine(st);
    if (atomic_load(&st->stop) && sends_flushed(st)) {
      if (v->failed(v)) continue;  // it failed just now: reset, not an orderly goodbye
      break;
    }
    if (moved) {
      last_moved = weft_now_ns();
      naps = 0;
      continue;
    }
    if (weft_now_ns() - last_moved < spin_ns) {  // the next step usually comes soon
      sched_yield();
      continue;
    }
    // Sleep until a socket or the engine has news (or a while passes).
    atomic_store(&st->asleep, 1);
    atomic_thread_fence(memory_order_seq_cst);
    int news = 0;
    pthread_mutex_lock(&st->lock);  // the engine's passes move `issued` too
    for (int i = 0; i < st->nconns && !news; i++) {
      net_conn_t *nc = st->conns[i];
      news = nc->is_send ? atomic_load(&nc->posted) != nc->issued
                         : atomic_load(&nc->consumed) + nc->nslots != nc->issued;
    }
    pthread_mutex_unlock(&st->lock);
    if (!news && !atomic_load(&st->stop)) proxy_sleep(st, naps++);
    atomic_store(&st->asleep, 0);
    uint64_t drained;
    while (read(st->evfd, &drained, sizeof(drained)) > 0) {
    }
  }
  for (int i = 0; i < st->nconns; i++) {
    net_conn_t *nc = st->conns[i];
    if (nc->is_send) st->net->close_send(nc->net_comm);
    else st->net->close_recv(nc->net_comm);
    nc->net_comm = NULL;
  }
  atomic_store(&st->exited, 1);
  return NULL;
}

/* ---- set-up and teardown ---- */

static ncclResult_t conn_new(net_state_t *st, int peer, int cls, int is_send, net_conn_t **out) {
  weft_transport_view_t *v = st->v;
  net_conn_t *nc = calloc(1, sizeof(*nc));
  if (nc == NULL) return ncclSystemError;
  nc->st = st;
  nc->peer = peer;
  nc->cls = cls;
  nc->is_send = is_send;
  nc->nslots = v->nslots;
  nc->slot_bytes = v->slot_bytes;
  nc->small = st->inline_max > 0;  // until a large message comes
  nc->data = malloc(nc->nslots * nc->slot_bytes);
  nc->len = calloc(nc->nslots, sizeof(*nc->len));
  nc->tag = calloc(nc->nslots, sizeof(*nc->tag));
  nc->reqs = calloc(nc->nslots, sizeof(*nc->reqs));
  nc->exp_dst = calloc(nc->nslots, sizeof(*nc->exp_dst));
  nc->exp_len = calloc(nc->nslots, sizeof(*nc->exp_len));
  nc->exp_tag = calloc(nc->nslots, sizeof(*nc->exp_tag));
  nc->direct = calloc(nc->nslots, sizeof(*nc->direct));
  *out = nc;
  if (nc->data == NULL || nc->len == NULL || nc->tag == NULL || nc->reqs == NULL || nc->exp_dst == NULL ||
      nc->exp_len == NULL || nc->exp_tag == NULL || nc->direct == NULL)
    return ncclSystemError;
  weft_view_claim(v, &weft_net_transport, cls, is_send, peer, nc);
  return ncclSuccess;
}

static void conn_free(net_conn_t *nc) {
  if (nc == NULL) return;
  free(nc->data);
  free(nc->len);
  free(nc->tag);
  free(nc->reqs);
  free(nc->exp_dst);
  free(nc->exp_len);
  free(nc->exp_tag);
  free(nc->direct);
  free(nc);
}

// A connection that came in: keep it if it is one of this communicator's.
static ncclResult_t take_accepted(net_state_t *st, void *rc, const hello_t *got, int *taken) {
  weft_transport_view_t *v = st->v;
  int ok = got->magic == HELLO_MAGIC && memcmp(got->secret, v->secret, v->secret_bytes) == 0 && got->rank >= 0 &&
           got->rank < v->nranks && got->cls >= 0 && got->cls < WEFT_NUM_CLASSES && st->serve[got->rank] &&
           weft_view_conn(v, got->cls, 0, got->rank)->tp == NULL;
  *taken = ok;
  if (!ok) {
    INFO(WEFT_LOG_NET, "rank %d: dropped a connection that is not one of this communicator's", v->rank);
    st->net->abort_comm(rc);
    return ncclSuccess;
  }
  net_conn_t *nc = NULL;
  ncclResult_t res = conn_new(st, got->rank, got->cls, 0, &nc);
  st->conns[st->nconns++] = nc;
  nc->net_comm = rc;
  return res;
}

static ncclResult_t connect_all(net_state_t *st, const net_card_t *cards, void *listen_comm) {
  weft_transport_view_t *v = st->v;
  int me = v->rank, expected = 0, accepted = 0, connecting = 0;
  hello_t h = {.magic = HELLO_MAGIC, .rank = me};
  memcpy(h.secret, v->secret, v->secret_bytes);
  for (int p = 0; p < v->nranks; p++) {
    if (!st->serve[p]) continue;
    for (int cls = 0; cls < WEFT_NUM_CLASSES; cls++, expected++, connecting++) {
      net_conn_t *nc = NULL;
      ncclResult_t res = conn_new(st, p, cls, 1, &nc);
      st->conns[st->nconns++] = nc;
      WEFTCHECK(res);
    }
  }
  // Connect and accept until every connection is up: backends may finish
  // either step on a later call (the socket backend finishes connects at
  // once and blocks in accept; plugins never block).
  int64_t tmo = weft_timeout_ms(), end = tmo > 0 ? weft_now_ms() + tmo : -1;
  while (connecting > 0 || accepted < expected) {
    int moved = 0;
    for (int i = 0; i < st->nconns && connecting > 0; i++) {
      net_conn_t *nc = st->conns[i];
      if (!nc->is_send || nc->net_comm != NULL) continue;
      h.cls = nc->cls;
      ncclResult_t res = st->net->connect(st->dev, cards[nc->peer].handle, &h, sizeof(h), &nc->net_comm);
      if (res != ncclSuccess) {
        WARN("rank %d: could not connect to rank %d at %s", me, nc->peer, cards[nc->peer].addr);
        return res;
      }
      if (nc->net_comm != NULL) connecting--, moved = 1;
    }
    if (accepted < expected) {
      void *rc = NULL;
      hello_t got;
      WEFTCHECK(st->net->accept(listen_comm, &got, sizeof(got), &rc));
      if (rc != NULL) {
        int taken = 0;
        WEFTCHECK(take_accepted(st, rc, &got, &taken));
        accepted += taken;
        moved = 1;
      }
    }
    if (moved) continue;
    if (end >= 0 && weft_now_ms() > end) {
      WARN("rank %d: %d network connections still not up after WEFT_TIMEOUT=%" PRId64 " s", me,
           connecting + expected - accepted, tmo / 1000);
      return ncclRemoteError;
    }
    struct timespec ts = {0, 200000};  // a plugin's connection is on its way
    nanosleep(&ts, NULL);
  }
  return ncclSuccess;
}

static ncclResult_t start_proxy(net_state_t *st) {
  st->epfd = epoll_create1(EPOLL_CLOEXEC);
  st->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  st->defer_epfd = epoll_create1(EPOLL_CLOEXEC);
  if (st->epfd < 0 || st->evfd < 0 || st->defer_epfd < 0) {
    WARN("net transport: epoll/eventfd: %s", strerror(errno));
    return ncclSystemError;
  }
  st->ready = calloc((size_t)st->nconns + 1, 1);
  if (st->ready == NULL) return ncclSystemError;
  struct epoll_event ev = {.events = EPOLLIN, .data.u32 = EV_ENGINE};
  if (epoll_ctl(st->epfd, EPOLL_CTL_ADD, st->evfd, &ev) != 0 ||
      epoll_ctl(st->defer_epfd, EPOLL_CTL_ADD, st->evfd, &ev) != 0)
    return ncclSystemError;
  for (int i = 0; i < st->nconns; i++) {
    ev.data.u32 = (uint32_t)i;
    int fd = st->net->poll_fd(st->conns[i]->net_comm);
    if (fd < 0) st->no_fds = 1;  // nothing to wait on: look again soon
    if (fd >= 0 && epoll_ctl(st->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
      WARN("net transport: epoll_ctl: %s", strerror(errno));
      return ncclSystemError;
    }
  }
  int err = pthread_create(&st->thread, NULL, proxy_main, st);
  if (err != 0) {
    WARN("net transport: cannot start the proxy thread: %s", strerror(err));
    return ncclSystemError;
  }
  st->thread_live = 1;
  return ncclSuccess;
}

// Round 1: which pairs each rank reaches over the network. Both ranks of a
// pair must agree (they do unless settings such as NCCL_SHM_DISABLE differ
// between the ranks of a host); any pair at all means every rank listens.
static ncclResult_t agree_pairs(weft_transport_view_t *v, const uint8_t *serve, int *any) {
  int n = v->nranks, me = v->rank;
  uint8_t *rows = calloc((size_t)n * (size_t)n, 1);
  if (rows == NULL) return ncclSystemError;
  for (int p = 0; p < n; p++) rows[(size_t)me * n + p] = p != me && serve[p];
  ncclResult_t res = v->allgather(v, rows, (size_t)n);
  *any = 0;
  for (size_t i = 0; res == ncclSuccess && i < (size_t)n * n; i++) *any |= rows[i];
  for (int p = 0; res == ncclSuccess && p < n; p++) {
    if (rows[(size_t)me * n + p] == rows[(size_t)p * n + me]) continue;
    WARN("rank %d reaches rank %d %s the network but rank %d reaches rank %d %s; the ranks of a host need the same "
         "transport settings (NCCL_SHM_DISABLE)", me, p, rows[(size_t)me * n + p] ? "over" : "without", p, me,
         rows[(size_t)p * n + me] ? "over it" : "without it");
    res = ncclInvalidUsage;
  }
  free(rows);
  return res;
}

static ncclResult_t net_setup(weft_transport_view_t *v, const uint8_t *serve, void **state) {
  int n = v->nranks, me = v->rank, any = 0;
  *state = NULL;
  if (v->secret_bytes > HELLO_SECRET_BYTES) {
    WARN("net transport: a %zu-byte secret does not fit its hello", v->secret_bytes);
    return ncclInternalError;
  }
  net_card_t *cards = calloc((size_t)n, sizeof(*cards));
  if (cards == NULL) return ncclSystemError;
  ncclResult_t res = ncclSuccess;
  void *listen_comm = NULL;
  net_state_t *st = NULL;
  const weft_net_t *net = NULL;
  WEFTCHECKGOTO(agree_pairs(v, serve, &any), res, out);
  // NCCL_NET names a network: check it even where shared memory serves every pair.
  if (weft_env_NCCL_NET() != NULL && v->net_backend(&res) == NULL) goto out;
  if (!any) goto out;  // no pair needs the network

  // Round 2: every rank listens and publishes its handle.
  net = v->net_backend(&res);
  if (net == NULL) {
    WARN("rank %d: ranks on other hosts need the network, and no network backend could start", me);
    goto out;
  }
  int dev = 0;
  weft_net_props_t props;
  WEFTCHECKGOTO(weft_net_choose_device(v, net, &dev, &props), res, out);
  WEFTCHECKGOTO(net->listen(dev, cards[me].handle, &listen_comm), res, out);
  if (net->handle_addr != NULL) net->handle_addr(cards[me].handle, cards[me].addr, sizeof(cards[me].addr));
  else snprintf(cards[me].addr, sizeof(cards[me].addr), "%s", props.addr);
  WEFTCHECKGOTO(v->allgather(v, cards, sizeof(*cards)), res, out);

  st = calloc(1, sizeof(*st));
  if (st == NULL) { res = ncclSystemError; goto out; }
  *state = st;
  st->net = net;
  st->v = v;
  st->epfd = st->evfd = st->defer_epfd = -1;
  if (pthread_mutex_init(&st->lock, NULL) != 0) { res = ncclSystemError; goto out; }
  st->lock_live = 1;
  int64_t inline_max = weft_env_WEFT_NET_INLINE();
  st->inline_max = inline_max < 0 ? SIZE_MAX : (size_t)inline_max;
  if (net->hold_large != NULL && net->held != NULL && net->release != NULL && weft_env_WEFT_NET_DIRECT_MIN() > 0)
    st->direct_min = (size_t)weft_env_WEFT_NET_DIRECT_MIN();
  st->conns = calloc((size_t)n * 2 * WEFT_NUM_CLASSES, sizeof(*st->conns));
  st->addr = calloc((size_t)n, sizeof(*st->addr));
  st->serve = calloc((size_t)n, 1);
  if (st->conns == NULL || st->addr == NULL || st->serve == NULL) { res = ncclSystemError; goto out; }
  for (int p = 0; p < n; p++) {
    snprintf(st->addr[p], sizeof(st->addr[p]), "%s", cards[p].addr);
    st->serve[p] = p != me && serve[p];
  }
  st->dev = dev;
  WEFTCHECKGOTO(connect_all(st, cards, listen_comm), res, out);
  INFO(WEFT_LOG_NET, "rank %d: %d network connections over %s (%s, %s)", me, st->nconns, net->name, props.name,
       props.addr);
  WEFTCHECKGOTO(start_proxy(st), res, out);
out:
  if (listen_comm != NULL) net->close_listen(listen_comm);
  free(cards);
  return res;
}

// Flushes what was sent, says goodbye to the peers, stops the proxy, frees.
static void net_teardown(weft_transport_view_t *v, void *state) {
  net_state_t *st = state;
  if (st == NULL) return;
  if (st->thread_live) {
    atomic_store(&st->stop, 1);
    uint64_t one = 1;
    ssize_t w = write(st->evfd, &one, sizeof(one));
    (void)w;
    pthread_join(st->thread, NULL);
  }
  uint64_t received = 0, direct = 0;
  for (int i = 0; i < st->nconns; i++) {
    net_conn_t *nc = st->conns[i];
    if (nc != NULL && !nc->is_send) received += nc->pos, direct += nc->ndirect;
    if (nc != NULL && nc->net_comm != NULL) st->net->abort_comm(nc->net_comm);  // never started
    weft_conn_t *c = nc != NULL ? weft_view_conn(v, nc->cls, nc->is_send, nc->peer) : NULL;
    if (c != NULL && c->tp == &weft_net_transport) c->tp = NULL, c->priv = NULL;
    conn_free(nc);
  }
  INFO(WEFT_LOG_NET,
       "rank %d: %" PRIu64 " of %" PRIu64 " network messages received straight into user buffers; %" PRIu64
       " passes of progress run by the waiting rank",
       v->rank, direct, received, st->engine_passes);
  if (st->epfd >= 0) close(st->epfd);
  if (st->evfd >= 0) close(st->evfd);
  if (st->defer_epfd >= 0) close(st->defer_epfd);
  free(st->conns);
  free(st->addr);
  free(st->serve);
  free(st->ready);
  if (st->lock_live) pthread_mutex_destroy(&st->lock);
  free(st);
}

// Every pair can be reached over the network: the registry's last resort.
static int net_can_connect(const weft_transport_view_t *v, int peer) { return peer != v->rank; }

const weft_transport_t weft_net_transport = {
    .name = "net",
    .can_connect = net_can_connect,
    .setup = net_setup,
    .teardown = net_teardown,
    .send_slot = net_send_slot,
    .send_post = net_send_post,
    .recv_slot = net_recv_slot,
    .recv_release = net_recv_release,
    .recv_expect_room = net_recv_expect_room,
    .recv_expect = net_recv_expect,
    .recv_landed = net_recv_landed,
    .quiesce = net_quiesce,
    .read = NULL,
    .write = NULL,
};
