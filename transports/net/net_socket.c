/*
 * net_socket.c — the built-in TCP network backend (weft_net_t, see net.h).
 *
 * Devices are the interfaces NCCL's socket transport would use
 * (weft_socket_list_interfaces: NCCL_SOCKET_IFNAME, NCCL's default order,
 * at most 16), each with its own address; init logs them in NCCL's
 * "NET/Socket : Using [0]eth0:10.0.0.1<0> ..." line. listen(dev) listens
 * on that device's address; with several devices, connect(dev, ...)
 * leaves from it, so on a host that routes by source the traffic uses
 * that NIC.
 *
 * A communicator is one direction between two ranks, carried by
 * NCCL_NSOCKS_PERTHREAD x NCCL_SOCKET_NTHREADS TCP connections. Message m
 * of S bytes is cut into k = min(sockets, S / 64 KiB) parts (at least one);
 * part j travels on socket (m + j) mod sockets, and the first of them
 * carries a 16-byte header (magic, tag, size) before part 0, so both sides
 * derive the same cut from m and S, and consecutive small messages use
 * different sockets. Each socket moves its parts in message order, so
 * requests complete in order.
 * Everything is non-blocking; test() moves what the kernel accepts now.
 * A receive may be held after its header (hold_large) until the caller
 * says where its payload goes, so large messages are read from the kernel
 * straight into their final buffer; the sockets not carrying it go on.
 * Each communicator has an epoll descriptor over its sockets (edge
 * triggered) that the caller can wait on: receivers watch for bytes,
 * senders for room only while the kernel has none, and passes of progress
 * take the events (see progress()), so the descriptor is readable only when
 * there is something new to do and an idle caller really sleeps. A receive
 * socket is read only after an event since it last ran dry.
 * A receive socket reads through a small staging buffer (STAGE_BYTES): one
 * recv takes a small message's header and payload together, and a recv
 * that comes back short proves the socket dry without a second call that
 * fails with EAGAIN. Payload beyond what was staged goes from the kernel
 * straight into the receive's buffer.
 *
 * An orderly close sends a "bye" header after the last message; an end of
 * stream without it, a reset or keepalive expiry fails the communicator.
 * Connection set-up (connect, accept) happens at communicator creation and
 * is bounded by WEFT_TIMEOUT.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <unistd.h>

#include "busid.h"
#include "checks.h"
#include "env.h"
#include "hello_pool.h"
#include "net.h"
#include "socket.h"
#include "util.h"

#define MSG_MAGIC 0x4d544657u  // "WFTM"
#define BYE_MAGIC 0x42544657u  // "WFTB"
#define HANDLE_MAGIC 0x776566746e657431ull
#define MAX_SOCKS 64
#define MAX_REQS 256
#define PART_MIN 65536
#define HELLO_MAX 256
#define HELLO_ROOM_MS 5000   // with every introduction slot taken, one silent this long makes way
#define MAX_PENDING 64
#define STAGE_BYTES 4096  // per receive socket: what one recv takes for headers and small payloads

typedef struct {
  uint32_t magic, tag;
  uint64_t size;
} wire_hdr_t;

typedef struct {
  uint64_t magic;
  weft_sockaddr_t addr;
} handle_t;

// Sent on every socket of a new connection, before the caller's hello.
typedef struct {
  uint64_t conn_id;  // random, shared by the sockets of one communicator
  uint32_t index, nsocks;
  uint32_t hello_len;
} sock_hello_t;

typedef struct sock_comm sock_comm_t;

typedef struct {
  sock_comm_t *comm;
  int used;
  uint64_t index;     // position in the communicator's request ring
  char *data;
  size_t cap;         // receives: the buffer's size
  size_t size;        // sends: the message; receives: from the header
  uint32_t tag;
  wire_hdr_t hdr;     // the header, as sent or as being received
  size_t hdr_done;
  int hdr_known;
  int held;           // receives: header known, payload waits for release()
  size_t part_done[MAX_SOCKS];
} sock_req_t;

struct sock_comm {
  int is_send, nsocks;
  int fds[MAX_SOCKS];
  int epfd;
  sock_req_t reqs[MAX_REQS];
  uint64_t head, tail;        // oldest unfinished request; next free one
  uint64_t cur[MAX_SOCKS];    // per socket: the request whose part it moves
  int failed, peer_closed;
  uint64_t out_armed;         // send sockets (bits) whose epoll entry asks for EPOLLOUT
  uint64_t readable;          // receive sockets (bits) not drained since their last event
  char *stage;                // receivers: nsocks x STAGE_BYTES, bytes read ahead of the requests
  size_t stage_off[MAX_SOCKS], stage_len[MAX_SOCKS];  // per socket: the staged bytes not taken yet
  uint64_t headers_read;      // receives whose header arrived (their parts may follow on any socket)
  uint64_t moves;             // transfers and request steps so far
  int quiet;                  // the last pass of progress moved nothing
  size_t hold_min;            // receives of at least this many bytes ...
  uint64_t hold_until;        // ... numbered below this are held
  char peer[WEFT_ADDR_STRLEN];
};

typedef struct {  // a connection being assembled on the accepting side
  uint64_t conn_id;
  uint32_t nsocks, got;
  int fds[MAX_SOCKS];
  char hello[HELLO_MAX];
} pending_t;

typedef struct {
  int fd;
  weft_hello_pool_t hellos;  // connections whose introduction is still arriving
  pending_t pending[MAX_PENDING];
  int npending;
} sock_listen_t;

// The devices: every interface NCCL's socket transport would use (socket.h).
static weft_socket_iface_t devs[WEFT_SOCKET_MAX_IFS];
static int ndevs;

static int nsocks_per_comm(void) {
  int64_t n = weft_env_NCCL_SOCKET_NTHREADS() * weft_env_NCCL_NSOCKS_PERTHREAD();
  return n < 1 ? 1 : n > MAX_SOCKS ? MAX_SOCKS : (int)n;
}

// "10.0.0.1<0>": an address as NCCL's device line shows it.
static void addr_nccl_style(const weft_sockaddr_t *a, char *buf, size_t len) {
  char host[INET6_ADDRSTRLEN] = "?";
  const void *raw = a->sa.sa_family == AF_INET ? (const void *)&a->sin.sin_addr : (const void *)&a->sin6.sin6_addr;
  inet_ntop(a->sa.sa_family, raw, host, sizeof(host));
  snprintf(buf, len, "%s<%u>", host, ntohs(a->sa.sa_family == AF_INET ? a->sin.sin_port : a->sin6.sin6_port));
}

static ncclResult_t sock_init(void) {
  WEFTCHECK(weft_socket_list_interfaces(devs, WEFT_SOCKET_MAX_IFS, &ndevs));
  char line[WEFT_SOCKET_MAX_IFS * (64 + WEFT_ADDR_STRLEN + 8)] = "";
  size_t used = 0;
  for (int i = 0; i < ndevs && used < sizeof(line); i++) {
    char a[WEFT_ADDR_STRLEN];
    addr_nccl_style(&devs[i].addr, a, sizeof(a));
    int w = snprintf(line + used, sizeof(line) - used, " [%d]%s:%s", i, devs[i].name, a);
    used += w > 0 ? (size_t)w : 0;
  }
  INFO(WEFT_LOG_INIT | WEFT_LOG_NET, "NET/Socket : Using%s", line);
  return ncclSuccess;
}

static ncclResult_t sock_devices(int *ndev) {
  *ndev = ndevs;
  return ncclSuccess;
}

static ncclResult_t check_dev(int dev, const char *what) {
  if (dev >= 0 && dev < ndevs) return ncclSuccess;
  WARN("net socket: %s on device %d; there are %d", what, dev, ndevs);
  return ncclInvalidArgument;
}

static int read_int_file(const char *path, int dflt) {
  FILE *f = fopen(path, "r");
  int v = dflt;
  if (f != NULL) {
    if (fscanf(f, "%d", &v) != 1) v = dflt;
    fclose(f);
  }
  return v;
}

// The PCI bus id of an interface's device ("0000:3b:00.0"), "" for virtual ones.
static void iface_busid(const char *ifname, char *out, size_t len) {
  char path[128];
  snprintf(path, sizeof(path), "/sys/class/net/%s/device", ifname);
  weft_busid_of_link(path, out, len);
}

static ncclResult_t sock_get_properties(int dev, weft_net_props_t *props) {
  WEFTCHECK(check_dev(dev, "properties asked"));
  memset(props, 0, sizeof(*props));
  snprintf(props->name, sizeof(props->name), "%s", devs[dev].name);
  snprintf(props->device, sizeof(props->device), "%s", devs[dev].name);
  weft_socket_addr_str(&devs[dev].addr, props->addr, sizeof(props->addr));
  char path[128];
  snprintf(path, sizeof(path), "/sys/class/net/%s/speed", devs[dev].name);
  props->speed_mbps = read_int_file(path, 0);
  if (props->speed_mbps < 0) props->speed_mbps = 0;
  iface_busid(devs[dev].name, props->busid, sizeof(props->busid));
  return ncclSuccess;
}

static ncclResult_t sock_listen(int dev, void *handle, void **listen_comm) {
  WEFTCHECK(check_dev(dev, "listen"));
  sock_listen_t *l = calloc(1, sizeof(*l));
  if (l == NULL) return ncclSystemError;
  handle_t h = {.magic = HANDLE_MAGIC, .addr = devs[dev].addr};
  ncclResult_t res = weft_socket_listen(&h.addr, &l->fd);
  if (res == ncclSuccess)
    res = weft_hello_pool_init(&l->hellos, l->fd, MAX_PENDING, sizeof(sock_hello_t), HELLO_ROOM_MS, "net socket");
  if (res != ncclSuccess) {
    weft_socket_close(&l->fd);
    free(l);
    return res;
  }
  _Static_assert(sizeof(handle_t) <= WEFT_NET_HANDLE_BYTES, "handle too large");
  memset(handle, 0, WEFT_NET_HANDLE_BYTES);
  memcpy(handle, &h, sizeof(h));
  *listen_comm = l;
  return ncclSuccess;
}

static int set_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  return flags == -1 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

static void comm_free(sock_comm_t *c, int abortive) {
  for (int i = 0; i < c->nsocks; i++) {
    if (abortive && c->fds[i] >= 0) {  // reset instead of an orderly end of stream
      struct linger lg = {1, 0};
      setsockopt(c->fds[i], SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    weft_socket_close(&c->fds[i]);
  }
  if (c->epfd >= 0) close(c->epfd);
  free(c->stage);
  free(c);
}

// A communicator over connected sockets (taken over from fds).
static ncclResult_t comm_new(int is_send, int nsocks, int *fds, sock_comm_t **out) {
  sock_comm_t *c = calloc(1, sizeof(*c));
  if (c == NULL) return ncclSystemError;
  c->is_send = is_send;
  c->nsocks = nsocks;
  for (int i = 0; i < nsocks; i++) c->fds[i] = fds[i], fds[i] = -1;
  c->epfd = epoll_create1(EPOLL_CLOEXEC);
  c->readable = ~0ull;  // until each has reported EAGAIN once
  if (!is_send && (c->stage = malloc((size_t)nsocks * STAGE_BYTES)) == NULL) {
    for (int i = 0; i < nsocks; i++) weft_socket_close(&c->fds[i]);
    free(c);
    return ncclSystemError;
  }
  struct sockaddr_storage ss;
  socklen_t sl = sizeof(ss);
  weft_sockaddr_t peer = {0};
  if (getpeername(c->fds[0], (struct sockaddr *)&ss, &sl) == 0 && sl <= sizeof(peer)) memcpy(&peer, &ss, sl);
  weft_socket_addr_str(&peer, c->peer, sizeof(c->peer));
  for (int i = 0; i < nsocks && c->epfd >= 0; i++) {
    // Receivers wait for bytes; senders ask for room only while blocked (arm_out).
    struct epoll_event ev = {.events = is_send ? EPOLLET : EPOLLIN | EPOLLRDHUP | EPOLLET, .data.u32 = (uint32_t)i};
    if (set_nonblocking(c->fds[i]) != 0 || epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->fds[i], &ev) != 0) {
      WARN("socket to %s: cannot set up polling: %s", c->peer, strerror(errno));
      comm_free(c, 1);
      return ncclSystemError;
    }
  }
  if (c->epfd < 0) {
    WARN("epoll_create1 failed: %s", strerror(errno));
    comm_free(c, 1);
    return ncclSystemError;
  }
  *out = c;
  return ncclSuccess;
}

// With several devices, connections leave from the device's address, so
// that on hosts that route by source (multi-rail hosts) each rank's traffic
// uses its own NIC. With one device, or from loopback, the kernel chooses
// as before.
static const weft_sockaddr_t *source_of(int dev) {
  const weft_sockaddr_t *a = &devs[dev].addr;
  if (ndevs <= 1) return NULL;
  if (a->sa.sa_family == AF_INET) return ntohl(a->sin.sin_addr.s_addr) >> 24 == 127 ? NULL : a;
  return IN6_IS_ADDR_LOOPBACK(&a->sin6.sin6_addr) ? NULL : a;
}

static ncclResult_t sock_connect(int dev, const void *handle, const void *hello, size_t hello_len, void **send_comm) {
  WEFTCHECK(check_dev(dev, "connect"));
  handle_t h;
  memcpy(&h, handle, sizeof(h));
  if (h.magic != HANDLE_MAGIC || hello_len > HELLO_MAX) {
    WARN("net socket: connect with a %s", h.magic != HANDLE_MAGIC ? "handle this backend did not make" : "hello too long");
    return ncclInvalidArgument;
  }
  int n = nsocks_per_comm(), fds[MAX_SOCKS];
  for (int i = 0; i < n; i++) fds[i] = -1;
  sock_hello_t sh = {.index = 0, .nsocks = (uint32_t)n, .hello_len = (uint32_t)hello_len};
  if (getrandom(&sh.conn_id, sizeof(sh.conn_id), 0) != sizeof(sh.conn_id)) sh.conn_id = (uint64_t)weft_now_ns();
  int tmo = (int)weft_timeout_ms();
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < n && res == ncclSuccess; i++) {
    sh.index = (uint32_t)i;
    res = weft_socket_connect_from(source_of(dev), &h.addr, tmo > 0 ? tmo : -1, &fds[i]);
    if (res == ncclSuccess) res = weft_socket_send(fds[i], &sh, sizeof(sh), tmo > 0 ? tmo : -1);
    if (res == ncclSuccess && hello_len) res = weft_socket_send(fds[i], hello, hello_len, tmo > 0 ? tmo : -1);
  }
  sock_comm_t *c = NULL;
  if (res == ncclSuccess) res = comm_new(1, n, fds, &c);
  for (int i = 0; i < n; i++) weft_socket_close(&fds[i]);
  if (res != ncclSuccess) {
    char a[WEFT_ADDR_STRLEN];
    WARN("net socket: could not connect to %s: %s", weft_socket_addr_str(&h.addr, a, sizeof(a)),
         ncclGetErrorString(res));
    return res == ncclInProgress ? ncclRemoteError : res;
  }
  *send_comm = c;
  return ncclSuccess;
}

// The next socket that introduced itself (its hello read as it arrived,
// beside the others', hello_pool.c), before end_ms (< 0: none). Sockets
// that close first or introduce themselves wrongly are dropped.
static ncclResult_t next_introduced(sock_listen_t *l, size_t hello_len, int64_t end_ms, int *fd, sock_hello_t *sh,
                                    char *hello) {
  for (;;) {
    int64_t left = end_ms < 0 ? 1000 : end_ms - weft_now_ms();
    if (left <= 0) {
      WARN("net socket: no connection arrived within WEFT_TIMEOUT=%lld s", (long long)weft_timeout_ms() / 1000);
      return ncclRemoteError;
    }
    weft_hello_event_t ev;
    int i;
    WEFTCHECK(weft_hello_pool_poll(&l->hellos, (int)WEFT_MIN(left, 1000), &ev, &i));
    if (ev == WEFT_HELLO_IDLE) continue;
    weft_hello_t *h = &l->hellos.slot[i];
    memcpy(sh, h->buf, sizeof(*sh));
    int fits = ev == WEFT_HELLO_READY && sh->hello_len == hello_len && sh->nsocks > 0 && sh->nsocks <= MAX_SOCKS &&
               sh->index < sh->nsocks;
    if (fits && h->want == sizeof(*sh) && hello_len > 0) {  // the header is good: now its hello
      if (!weft_hello_pool_extend(&l->hellos, i, hello_len)) weft_hello_pool_drop(&l->hellos, i);
      continue;
    }
    if (!fits) {
      char a[WEFT_ADDR_STRLEN];
      INFO(WEFT_LOG_NET, "net socket: dropped a connection from %s that did not introduce itself",
           weft_socket_addr_str(&h->from, a, sizeof(a)));
      weft_hello_pool_drop(&l->hellos, i);
      continue;
    }
    memcpy(hello, h->buf + sizeof(*sh), hello_len);
    *fd = weft_hello_pool_take(&l->hellos, i);
    return ncclSuccess;
  }
}

// Accept connections until one communicator has all its sockets; blocking,
// bounded by WEFT_TIMEOUT. Connections from strangers are dropped.
static ncclResult_t sock_accept(void *listen_comm, void *hello, size_t hello_len, void **recv_comm) {
  sock_listen_t *l = listen_comm;
  int tmo = (int)weft_timeout_ms();
  int64_t end = tmo > 0 ? weft_now_ms() + tmo : -1;
  for (;;) {
    int fd = -1;
    sock_hello_t sh;
    char buf[HELLO_MAX];
    WEFTCHECK(next_introduced(l, hello_len, end, &fd, &sh, buf));
    pending_t *p = NULL;
    for (int i = 0; i < l->npending && p == NULL; i++)
      if (l->pending[i].conn_id == sh.conn_id) p = &l->pending[i];
    if (p == NULL) {
      if (l->npending == MAX_PENDING) {
        WARN("net socket: more than %d connections half set up", MAX_PENDING);
        weft_socket_close(&fd);
        return ncclSystemError;
      }
      p = &l->pending[l->npending++];
      memset(p, 0, sizeof(*p));
      p->conn_id = sh.conn_id;
      p->nsocks = sh.nsocks;
      for (int i = 0; i < MAX_SOCKS; i++) p->fds[i] = -1;
      memcpy(p->hello, buf, hello_len);
    }
    if (p->nsocks != sh.nsocks || p->fds[sh.index] >= 0 || memcmp(p->hello, buf, hello_len) != 0) {
      INFO(WEFT_LOG_NET, "net socket: inconsistent socket %u of connection %016" PRIx64 " dropped", sh.index,
           sh.conn_id);
      weft_socket_close(&fd);
      continue;
    }
    p->fds[sh.index] = fd;
    if (++p->got < p->nsocks) continue;
    sock_comm_t *c = NULL;
    ncclResult_t res = comm_new(0, (int)p->nsocks, p->fds, &c);
    memcpy(hello, p->hello, hello_len);
    for (int i = 0; i < (int)p->nsocks; i++) weft_socket_close(&p->fds[i]);
    *p = l->pending[--l->npending];
    if (res != ncclSuccess) return res;
    *recv_comm = c;
    return ncclSuccess;
  }
}

static ncclResult_t sock_close_listen(void *listen_comm) {
  sock_listen_t *l = listen_comm;
  if (l == NULL) return ncclSuccess;
  for (int i = 0; i < l->npending; i++)
    for (int j = 0; j < MAX_SOCKS; j++) weft_socket_close(&l->pending[i].fds[j]);
  weft_hello_pool_free(&l->hellos);
  weft_socket_close(&l->fd);
  free(l);
  return ncclSuccess;
}

/* ---- data ---- */

static int nparts(size_t size, int nsocks) {
  size_t k = size / PART_MIN;
  return k < 1 ? 1 : k > (size_t)nsocks ? nsocks : (int)k;
}

// Part i of a message of `size` bytes cut into k parts: [*off, *off + *len).
static void part_range(size_t size, int k, int i, size_t *off, size_t *len) {
  size_t q = (size + (size_t)k - 1) / (size_t)k;
  *off = q * (size_t)i < size ? q * (size_t)i : size;
  *len = *off + q < size ? q : size - *off;
}

static ncclResult_t comm_fail(sock_comm_t *c, const char *what, int err) {
  if (!c->failed)
    INFO(WEFT_LOG_NET, "net socket %s %s: %s", c->is_send ? "to" : "from", c->peer, err ? strerror(err) : what);
  c->failed = 1;
  return ncclRemoteError;
}

// A send socket asks epoll for EPOLLOUT while the kernel has no room for
// it, and stops when it has nothing left to move: an idle sender's sockets
// are always writable, which would keep the poll descriptor ready forever.
static void arm_out(sock_comm_t *c, int i, int on) {
  uint64_t bit = 1ull << i;
  if (!(c->out_armed & bit) == !on) return;
  struct epoll_event ev = {.events = (on ? EPOLLOUT : 0) | EPOLLET, .data.u32 = (uint32_t)i};
  if (epoll_ctl(c->epfd, EPOLL_CTL_MOD, c->fds[i], &ev) == 0) c->out_armed ^= bit;
}

// Receive up to `want` bytes from socket i into dst: staged bytes first,
// else one recv (into the staging buffer when the request is smaller than
// it, straight into dst otherwise). A recv that returns less than it asked
// for drained the socket, so its readable bit is cleared: the next bytes
// bring a new edge-triggered event. Returns recv's result (-1 with errno
// EAGAIN when the socket is dry).
static ssize_t sock_read(sock_comm_t *c, int i, char *dst, size_t want) {
  char *stage = c->stage + (size_t)i * STAGE_BYTES;
  if (c->stage_len[i] == 0) {
    if (!(c->readable & (1ull << i))) {
      errno = EAGAIN;
      return -1;
    }
    int direct = want >= STAGE_BYTES;
    size_t ask = direct ? want : STAGE_BYTES;
    ssize_t n = recv(c->fds[i], direct ? dst : stage, ask, MSG_DONTWAIT);
    if (n >= 0 && (size_t)n < ask) c->readable &= ~(1ull << i);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) c->readable &= ~(1ull << i);
    if (n <= 0 || direct) return n;
    c->stage_off[i] = 0;
    c->stage_len[i] = (size_t)n;
  }
  size_t n = want < c->stage_len[i] ? want : c->stage_len[i];
  memcpy(dst, stage + c->stage_off[i], n);
  c->stage_off[i] += n;
  c->stage_len[i] -= n;
  return (ssize_t)n;
}

// Move bytes on socket i for the requests in order; stops when the kernel
// would block or the next message's cut is not known yet.
static ncclResult_t progress_socket(sock_comm_t *c, int i) {
  while (c->cur[i] < c->tail) {
    sock_req_t *r = &c->reqs[c->cur[i] % MAX_REQS];
    int first = (int)(r->index % (uint64_t)c->nsocks);  // the socket of part 0 and the header
    if (!c->is_send && !r->hdr_known) {
      if (i != first) return ncclSuccess;  // the size arrives with part 0 first
      while (r->hdr_done < sizeof(r->hdr)) {
        ssize_t n = sock_read(c, i, (char *)&r->hdr + r->hdr_done, sizeof(r->hdr) - r->hdr_done);
        if (n > 0) {
          r->hdr_done += (size_t)n;
          c->moves++;
          continue;
        }
        if (n == 0) return c->peer_closed ? ncclSuccess : comm_fail(c, "connection closed without a goodbye", 0);
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return ncclSuccess;
        return comm_fail(c, NULL, errno);
      }
      if (r->hdr.magic == BYE_MAGIC) {  // orderly end: nothing more will come
        c->peer_closed = 1;
        r->hdr_done = 0;
        return ncclSuccess;
      }
      if (r->hdr.magic != MSG_MAGIC) return comm_fail(c, "garbage on the connection", 0);
      if (r->hdr.size > r->cap) {
        WARN("net socket: a message of %" PRIu64 " bytes from %s does not fit the %zu-byte receive", r->hdr.size,
             c->peer, r->cap);
        return comm_fail(c, "message too long", 0);
      }
      r->size = r->hdr.size;
      r->tag = r->hdr.tag;
      r->hdr_known = 1;
      c->headers_read++;
      r->held = c->hold_min > 0 && r->size >= c->hold_min && r->index < c->hold_until;
    }
    int k = nparts(r->size, c->nsocks), part = (i - first + c->nsocks) % c->nsocks;
    if (part >= k) {
      c->cur[i]++;
      continue;
    }
    if (r->held) return ncclSuccess;  // its payload waits for release()
    size_t off, len;
    part_range(r->size, k, part, &off, &len);
    while (r->part_done[i] < len || (c->is_send && part == 0 && r->hdr_done < sizeof(r->hdr))) {
      ssize_t n;
      if (c->is_send) {
        struct iovec iov[2];
        int niov = 0;
        size_t hdr_left = part == 0 ? sizeof(r->hdr) - r->hdr_done : 0;
        if (hdr_left) iov[niov++] = (struct iovec){(char *)&r->hdr + r->hdr_done, hdr_left};
        if (r->part_done[i] < len) iov[niov++] = (struct iovec){r->data + off + r->part_done[i], len - r->part_done[i]};
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)niov};
        n = sendmsg(c->fds[i], &m, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
          size_t h = (size_t)n < hdr_left ? (size_t)n : hdr_left;
          r->hdr_done += h;
          r->part_done[i] += (size_t)n - h;
          c->moves++;
          continue;
        }
      } else {
        n = sock_read(c, i, r->data + off + r->part_done[i], len - r->part_done[i]);
        if (n > 0) {
          r->part_done[i] += (size_t)n;
          c->moves++;
          continue;
        }
        if (n == 0) return comm_fail(c, "connection closed in the middle of a message", 0);
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (c->is_send) arm_out(c, i, 1);
        return ncclSuccess;
      }
      return comm_fail(c, NULL, errno);
    }
    c->cur[i]++;
    c->moves++;
  }
  if (c->is_send) arm_out(c, i, 0);
  return ncclSuccess;
}

// The poll descriptor is readable while its epoll holds events nobody took
// (edge-triggered entries stay listed until reported). A receiver takes them
// on every pass: a socket is read only when an event came since it last
// ran dry, so an idle socket costs no system call. A sender takes them after
// a pass that moved nothing (the caller may be about to sleep), so the
// descriptor becomes readable again only for what happens after this pass;
// while data flows, that system call is saved. Then every socket moves what
// it can; a header read on one socket lets the others take their parts of
// that message, so the pass is repeated until no new header came.
static ncclResult_t progress(sock_comm_t *c) {
  if (c->failed) return ncclRemoteError;
  uint64_t all = c->nsocks == 64 ? ~0ull : (1ull << c->nsocks) - 1;
  if (c->is_send ? c->quiet : (c->readable & all) != all) {  // a receiver with every socket readable needs no events
    struct epoll_event seen[MAX_SOCKS];
    int k = epoll_wait(c->epfd, seen, MAX_SOCKS, 0);
    for (int j = 0; j < k; j++) c->readable |= 1ull << seen[j].data.u32;
  }
  uint64_t headers, moves = c->moves;
  do {
    headers = c->headers_read;
    for (int i = 0; i < c->nsocks; i++) WEFTCHECK(progress_socket(c, i));
  } while (c->headers_read != headers);
  c->quiet = c->moves == moves;
  return ncclSuccess;
}

static ncclResult_t post(sock_comm_t *c, char *data, size_t size, uint32_t tag, void **request) {
  if (c->tail - c->head >= MAX_REQS) {
    WARN("net socket: more than %d requests outstanding on one connection", MAX_REQS);
    return ncclInternalError;
  }
  sock_req_t *r = &c->reqs[c->tail % MAX_REQS];
  memset(r, 0, sizeof(*r));
  r->comm = c;
  r->index = c->tail;
  r->used = 1;
  r->data = data;
  if (c->is_send) {
    r->size = size;
    r->tag = tag;
    r->hdr = (wire_hdr_t){.magic = MSG_MAGIC, .tag = tag, .size = size};
    r->hdr_known = 1;
  } else {
    r->cap = size;
  }
  c->tail++;
  *request = r;
  return progress(c);
}

static ncclResult_t sock_isend(void *send_comm, const void *data, size_t size, uint32_t tag, void **request) {
  return post(send_comm, (char *)data, size, tag, request);
}

static ncclResult_t sock_irecv(void *recv_comm, void *data, size_t size, void **request) {
  return post(recv_comm, data, size, 0, request);
}

// Every socket has moved past the request (so its header and parts are done).
static int req_done(const sock_comm_t *c, const sock_req_t *r) {
  for (int i = 0; i < c->nsocks; i++)
    if (c->cur[i] <= r->index) return 0;
  return 1;
}

static ncclResult_t sock_test(void *request, int *done, size_t *size, uint32_t *tag) {
  sock_req_t *r = request;
  sock_comm_t *c = r->comm;
  *done = 0;
  if (!r->used) {
    WARN("net socket: test of a request that is not outstanding");
    return ncclInternalError;
  }
  if (!req_done(c, r)) WEFTCHECK(progress(c));  // one pass may have finished several
  if (!req_done(c, r)) return ncclSuccess;
  *done = 1;
  if (size != NULL) *size = r->size;
  if (tag != NULL) *tag = r->tag;
  r->used = 0;
  while (c->head < c->tail && !c->reqs[c->head % MAX_REQS].used) c->head++;
  return ncclSuccess;
}

static void sock_hold_large(void *recv_comm, size_t min, uint64_t until) {
  sock_comm_t *c = recv_comm;
  c->hold_min = min;
  c->hold_until = until;
}

static int sock_held(void *request, size_t *size, uint32_t *tag) {
  const sock_req_t *r = request;
  if (!r->used || !r->held) return 0;
  *size = r->size;
  *tag = r->tag;
  return 1;
}

static ncclResult_t sock_release(void *request, void *data) {
  sock_req_t *r = request;
  if (!r->used || !r->held) {
    WARN("net socket: release of a receive that is not held");
    return ncclInternalError;
  }
  if (data != NULL) r->data = data;
  r->held = 0;
  return progress(r->comm);  // its bytes may be waiting already (epoll is edge triggered)
}

static int sock_poll_fd(void *comm) { return ((sock_comm_t *)comm)->epfd; }

// Every socket has moved every posted message.
static int all_moved(const sock_comm_t *c) {
  for (int i = 0; i < c->nsocks; i++)
    if (c->cur[i] < c->tail) return 0;
  return 1;
}

// Flush what is queued (bounded), then say goodbye.
static ncclResult_t sock_close_send(void *send_comm) {
  sock_comm_t *c = send_comm;
  if (c == NULL) return ncclSuccess;
  int64_t end = weft_now_ms() + 2000;
  while (!c->failed && !all_moved(c) && weft_now_ms() < end) {
    if (progress(c) != ncclSuccess) break;
    struct epoll_event ev;
    epoll_wait(c->epfd, &ev, 1, 10);
  }
  if (!c->failed) {
    wire_hdr_t bye = {.magic = BYE_MAGIC};  // where the next message's header would go
    (void)weft_socket_send(c->fds[c->tail % (uint64_t)c->nsocks], &bye, sizeof(bye), 1000);
  }
  comm_free(c, 0);
  return ncclSuccess;
}

static ncclResult_t sock_close_recv(void *recv_comm) {
  if (recv_comm != NULL) comm_free(recv_comm, 0);
  return ncclSuccess;
}

static void sock_handle_addr(const void *handle, char *buf, size_t len) {
  handle_t h;
  memcpy(&h, handle, sizeof(h));
  weft_socket_addr_str(&h.addr, buf, len);
}

static void sock_abort_comm(void *comm) {
  if (comm != NULL) comm_free(comm, 1);
}

const weft_net_t weft_net_socket = {
    .name = "Socket",
    .init = sock_init,
    .devices = sock_devices,
    .get_properties = sock_get_properties,
    .listen = sock_listen,
    .connect = sock_connect,
    .accept = sock_accept,
    .isend = sock_isend,
    .irecv = sock_irecv,
    .test = sock_test,
    .poll_fd = sock_poll_fd,
    .close_send = sock_close_send,
    .close_recv = sock_close_recv,
    .close_listen = sock_close_listen,
    .abort_comm = sock_abort_comm,
    .hold_large = sock_hold_large,
    .held = sock_held,
    .release = sock_release,
    .handle_addr = sock_handle_addr,
};
