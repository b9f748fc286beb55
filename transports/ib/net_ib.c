/*
 * net_ib.c — the ibverbs network backend (weft_net_t "IB", see net.h).
 * UNTESTED ON RDMA HARDWARE: written and unit-tested on machines without
 * RDMA devices (docs/ib.md says what was and was not checked).
 *
 * Set-up. listen() opens a TCP socket on the bootstrap interface; its
 * address is the handle. connect() dials it, makes its queue pairs
 * (NCCL_IB_QPS_PER_CONNECTION, all on one completion queue) and sends its
 * connection info (net_ib_conn.c: QPNs, PSN, LID, GID, MTU, and where its
 * FIFO of receive descriptors lives) and the caller's hello; it returns at
 * once, so a rank can connect to all its peers before accepting any.
 * accept() reads that, moves its QPs to RTS and answers with its own info.
 * The sender finishes in the background (its first isend/test): it reads
 * the answer, moves its QPs to RTS and sends one READY byte; only then does
 * the receiver write descriptors into the sender's FIFO. The TCP socket
 * stays open as a liveness signal: an orderly close sends BYE first, so an
 * end of stream without it fails the receiver at once.
 *
 * Data (NCCL's design). irecv registers the buffer (net_ib_mr.c), posts a
 * zero-length receive for the incoming write-with-immediate, and RDMA-writes
 * a descriptor {addr, rkey, size, seq} into the sender's FIFO slot
 * seq % depth (net_ib_fifo.c: credits, order). isend waits for descriptor
 * seq, then RDMA-writes the message straight into that buffer with the
 * 32-bit tag as immediate data; the receiver's completion gives size
 * (byte_len) and tag. Message seq uses QP seq % nqps; descriptors travel
 * on QP 0 as writes with immediate too, so the sender gets a completion
 * (a wake-up) for each. Requests are matched by sequence number, so order
 * per communicator holds whatever the QPs' relative timing.
 *
 * Waiting: poll_fd is an epoll descriptor over the completion channel and
 * the TCP socket. hold_large/held/release are not offered (NULL): messages
 * always land in the buffer given to irecv.
 * GPUDirect RDMA (registering device memory) is not done.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <unistd.h>

#include "checks.h"
#include "env.h"
#include "net_ib.h"
#include "socket.h"
#include "util.h"

#define HANDLE_MAGIC 0x776566746962686eull
#define MAX_REQS WEFT_IB_FIFO_DEPTH
#define HELLO_MAX 256
#define HELLO_WAIT_MS 10000
#define MR_CACHE_MAX 64
#define READY_BYTE 'R'
#define BYE_BYTE 'B'

// wr_id: sequence number << 2 | kind
enum { WR_SEND_DATA = 0, WR_RECV_DATA = 1, WR_FIFO_WRITE = 2, WR_FIFO_RECV = 3 };

typedef struct {
  uint64_t magic;
  weft_sockaddr_t addr;
  int32_t dev;
} handle_t;

typedef struct ib_comm ib_comm_t;

typedef struct {
  ib_comm_t *comm;
  int used, done;
  uint64_t seq;
  char *data;
  size_t size;  // send: the message; receive: the buffer, then what arrived
  uint32_t tag;
  const weft_ib_mr_t *mr;
} ib_req_t;

enum { ST_SETUP, ST_READY };

struct ib_comm {
  int is_send, state, failed, peer_closed, armed;
  const weft_ib_dev_t *dev;
  int nqps;
  struct ibv_qp *qp[WEFT_IB_MAX_QPS];
  struct ibv_cq *cq;
  struct ibv_comp_channel *ch;
  int fd, epfd;
  uint32_t psn;
  uint8_t in[WEFT_IB_CONN_BYTES];  // sender: the receiver's answer, as it arrives
  size_t in_got;
  weft_ib_fifo_entry_t *fifo;      // sender: written by the receiver; receiver: staging for its writes
  struct ibv_mr *fifo_mr;
  uint64_t rfifo_addr;             // receiver: the sender's FIFO
  uint32_t rfifo_rkey;
  weft_ib_fifo_rx_t rx;
  weft_ib_fifo_tx_t tx;
  ib_req_t reqs[MAX_REQS];
  uint64_t head, tail, issued;     // oldest unfinished request, next one, first not handed to the HCA
  int sends_out;                   // signalled writes not completed yet
  weft_ib_mr_cache_t mrs;
  char peer[WEFT_ADDR_STRLEN];
};

typedef struct {
  int fd, dev;
} ib_listen_t;

/* ---- the process-wide state: library and devices ---- */

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static int init_done, init_ok;
static const char *lib_override;
static weft_ibv_ops_t ibv;
static void *lib_handle;
static weft_ib_dev_t devs[WEFT_IB_MAX_DEVS];
static int ndevs;
static weft_sockaddr_t side_addr;  // where side channels listen

static ncclResult_t ib_init(void) {
  pthread_mutex_lock(&init_lock);
  if (!init_done) {
    init_done = 1;
    char why[256] = "";
    if (weft_env_NCCL_IB_DISABLE() != 0) {
      INFO(WEFT_LOG_NET, "NET/IB : not available (NCCL_IB_DISABLE=1)");
    } else if (weft_ibv_load(lib_override, &ibv, &lib_handle, why, sizeof(why)) != 0) {
      INFO(WEFT_LOG_NET, "NET/IB : not available (libibverbs: %s)", why);
    } else {
      int n = weft_ib_devs_open(&ibv, weft_env_NCCL_IB_HCA(), (int)weft_env_NCCL_IB_GID_INDEX(), devs,
                                WEFT_IB_MAX_DEVS, why, sizeof(why));
      if (n < 0) WARN("NET/IB : %s; the verbs backend is off", why);
      else if (n == 0) INFO(WEFT_LOG_NET, "NET/IB : not available (%s)", why);
      else if (weft_socket_find_interface(&side_addr, NULL, 0) != ncclSuccess)
        INFO(WEFT_LOG_NET, "NET/IB : not available (no interface for the set-up channel)");
      else {
        ndevs = n;
        init_ok = 1;
        for (int i = 0; i < n; i++)
          INFO(WEFT_LOG_NET, "NET/IB : [%d] %s:%d/%s%s", i, devs[i].name, devs[i].port,
               devs[i].link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "IB",
               devs[i].gid_index >= 0 ? "" : " (LID)");
      }
      // Ports stay open for the process (as in NCCL); a library without
      // usable ports is let go.
      if (!init_ok && n <= 0 && lib_handle) dlclose(lib_handle), lib_handle = NULL;
    }
  }
  int ok = init_ok;
  pthread_mutex_unlock(&init_lock);
  return ok ? ncclSuccess : ncclSystemError;
}

int weft_net_ib_available(void) { return ib_init() == ncclSuccess; }

void weft_net_ib_test_reset(const char *libname) {
  pthread_mutex_lock(&init_lock);
  if (init_done && init_ok) {  // tests only reset what found no device
    pthread_mutex_unlock(&init_lock);
    return;
  }
  init_done = init_ok = 0;
  ndevs = 0;
  lib_override = libname;
  pthread_mutex_unlock(&init_lock);
}

static ncclResult_t ib_devices(int *ndev) {
  *ndev = init_ok ? ndevs : 0;
  return ncclSuccess;
}

static ncclResult_t ib_get_properties(int dev, weft_net_props_t *props) {
  if (dev < 0 || dev >= ndevs) return ncclInvalidArgument;
  memset(props, 0, sizeof(*props));
  snprintf(props->name, sizeof(props->name), "%s:%d", devs[dev].name, devs[dev].port);
  snprintf(props->device, sizeof(props->device), "%s", devs[dev].name);
  props->port = devs[dev].port;
  snprintf(props->busid, sizeof(props->busid), "%s", devs[dev].busid);
  weft_socket_addr_str(&side_addr, props->addr, sizeof(props->addr));
  props->speed_mbps = devs[dev].speed_mbps;
  return ncclSuccess;
}

/* ---- communicators: making and freeing ---- */

static void *mr_reg(void *ctx, void *addr, size_t len, uint32_t *lkey, uint32_t *rkey) {
  const weft_ib_dev_t *d = ctx;
  struct ibv_mr *mr = ibv.reg_mr(d->pd, addr, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (mr == NULL) {
    WARN("NET/IB %s: ibv_reg_mr of %zu bytes at %p failed: %s", d->name, len, addr, strerror(errno));
    return NULL;
  }
  *lkey = mr->lkey, *rkey = mr->rkey;
  return mr;
}

static int mr_dereg(void *ctx, void *handle) {
  (void)ctx;
  return ibv.dereg_mr(handle);
}

static void comm_free(ib_comm_t *c, int abortive) {
  if (c == NULL) return;
  for (int i = 0; i < c->nqps; i++)
    if (c->qp[i]) ibv.destroy_qp(c->qp[i]);
  if (c->cq) ibv.destroy_cq(c->cq);  // every event was acknowledged as it came
  if (c->ch) ibv.destroy_comp_channel(c->ch);
  int busy = weft_ib_mr_cache_free(&c->mrs);
  if (busy && !abortive) INFO(WEFT_LOG_NET, "NET/IB : closed with %d registrations in use", busy);
  if (c->fifo_mr) ibv.dereg_mr(c->fifo_mr);
  free(c->fifo);
  if (abortive && c->fd >= 0) {
    struct linger lg = {1, 0};
    setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
  }
  weft_socket_close(&c->fd);
  if (c->epfd >= 0) close(c->epfd);
  free(c);
}

// A communicator on device dev over the connected socket fd (taken over):
// QPs in INIT, the completion channel, the FIFO memory registered.
static ncclResult_t comm_new(int is_send, int dev, int fd, ib_comm_t **out) {
  ib_comm_t *c = calloc(1, sizeof(*c));
  if (c == NULL) return ncclSystemError;
  c->is_send = is_send;
  c->dev = &devs[dev];
  c->fd = fd;
  c->epfd = -1;
  weft_socket_peer_str(fd, c->peer, sizeof(c->peer));
  int64_t q = weft_env_NCCL_IB_QPS_PER_CONNECTION();
  c->nqps = q < 1 ? 1 : q > WEFT_IB_MAX_QPS ? WEFT_IB_MAX_QPS : (int)q;
  weft_ib_mr_ops_t mops = {.ctx = (void *)c->dev, .reg = mr_reg, .dereg = mr_dereg};
  weft_ib_mr_cache_init(&c->mrs, &mops, MR_CACHE_MAX, (size_t)sysconf(_SC_PAGESIZE));
  weft_ib_fifo_rx_init(&c->rx, WEFT_IB_FIFO_DEPTH, 0);
  weft_ib_fifo_tx_init(&c->tx, WEFT_IB_FIFO_DEPTH, 0);
  if (getrandom(&c->psn, sizeof(c->psn), 0) != sizeof(c->psn)) c->psn = (uint32_t)weft_now_ns();
  c->psn &= 0xffffff;
  int max_wr = 2 * WEFT_IB_FIFO_DEPTH + 8;
  size_t fifo_bytes = WEFT_IB_FIFO_DEPTH * sizeof(weft_ib_fifo_entry_t);
  ncclResult_t res = ncclSystemError;
  if ((c->ch = ibv.create_comp_channel(c->dev->ctx)) == NULL) goto fail;
  if ((c->cq = ibv.create_cq(c->dev->ctx, c->nqps * 2 * max_wr, c, c->ch, 0)) == NULL) goto fail;
  for (int i = 0; i < c->nqps; i++)
    if ((c->qp[i] = weft_ib_qp_create(&ibv, c->dev, c->cq, max_wr)) == NULL) goto fail;
  if (posix_memalign((void **)&c->fifo, 4096, fifo_bytes) != 0) {
    c->fifo = NULL;
    goto fail;
  }
  memset(c->fifo, 0, fifo_bytes);
  c->fifo_mr = ibv.reg_mr(c->dev->pd, c->fifo, fifo_bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (c->fifo_mr == NULL) goto fail;
  int flags = fcntl(c->ch->fd, F_GETFL);
  if (flags < 0 || fcntl(c->ch->fd, F_SETFL, flags | O_NONBLOCK) != 0) goto fail;
  flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) goto fail;
  if ((c->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0) goto fail;
  struct epoll_event ev = {.events = EPOLLIN};
  if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->ch->fd, &ev) != 0) goto fail;
  ev.events = EPOLLIN | EPOLLRDHUP;
  if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) goto fail;
  *out = c;
  return ncclSuccess;
fail:
  WARN("NET/IB %s:%d: cannot set up a connection %s %s: %s", c->dev->name, c->dev->port, is_send ? "to" : "from",
       c->peer, strerror(errno));
  comm_free(c, 1);
  return res;
}

static void local_info(const ib_comm_t *c, weft_ib_conn_info_t *info) {
  memset(info, 0, sizeof(*info));
  info->nqps = (uint32_t)c->nqps;
  for (int i = 0; i < c->nqps; i++) info->qpn[i] = c->qp[i]->qp_num;
  info->psn = c->psn;
  info->lid = c->dev->lid;
  info->link_layer = (uint8_t)c->dev->link_layer;
  info->mtu = (uint8_t)c->dev->mtu;
  memcpy(info->gid, c->dev->gid.raw, 16);
  if (c->is_send) {
    info->fifo_addr = (uint64_t)(uintptr_t)c->fifo;
    info->fifo_rkey = c->fifo_mr->rkey;
  }
}

// Both ends must agree on the QP count and speak the same link layer.
static int connect_qps(ib_comm_t *c, const weft_ib_conn_info_t *remote) {
  if ((int)remote->nqps != c->nqps || remote->link_layer != c->dev->link_layer) {
    WARN("NET/IB : peer %s has %u QPs over %s, this rank %d over %s (NCCL_IB_QPS_PER_CONNECTION and the fabric "
         "must match)", c->peer, remote->nqps, remote->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "IB",
         c->nqps, c->dev->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "IB");
    return -1;
  }
  for (int i = 0; i < c->nqps; i++)
    if (weft_ib_qp_connect(&ibv, c->dev, c->qp[i], remote, remote->qpn[i], c->psn) != 0) return -1;
  return 0;
}

/* ---- listen, connect, accept ---- */

static ncclResult_t ib_listen(int dev, void *handle, void **listen_comm) {
  if (!init_ok || dev < 0 || dev >= ndevs) return ncclInvalidArgument;
  ib_listen_t *l = calloc(1, sizeof(*l));
  if (l == NULL) return ncclSystemError;
  handle_t h = {.magic = HANDLE_MAGIC, .addr = side_addr, .dev = dev};
  ncclResult_t res = weft_socket_listen(&h.addr, &l->fd);
  if (res != ncclSuccess) {
    free(l);
    return res;
  }
  l->dev = dev;
  _Static_assert(sizeof(handle_t) <= WEFT_NET_HANDLE_BYTES, "handle too large");
  memset(handle, 0, WEFT_NET_HANDLE_BYTES);
  memcpy(handle, &h, sizeof(h));
  *listen_comm = l;
  return ncclSuccess;
}

static ncclResult_t ib_connect(int dev, const void *handle, const void *hello, size_t hello_len, void **send_comm) {
  handle_t h;
  memcpy(&h, handle, sizeof(h));
  if (h.magic != HANDLE_MAGIC || hello_len > HELLO_MAX || dev < 0 || dev >= ndevs) {
    WARN("NET/IB : connect with a %s", h.magic != HANDLE_MAGIC ? "handle this backend did not make" : "bad argument");
    return ncclInvalidArgument;
  }
  int tmo = (int)weft_timeout_ms(), fd = -1;
  ncclResult_t res = weft_socket_connect(&h.addr, tmo > 0 ? tmo : -1, &fd);
  if (res != ncclSuccess) {
    char a[WEFT_ADDR_STRLEN];
    WARN("NET/IB : could not reach %s: %s", weft_socket_addr_str(&h.addr, a, sizeof(a)), ncclGetErrorString(res));
    return res == ncclInProgress ? ncclRemoteError : res;
  }
  ib_comm_t *c = NULL;
  WEFTCHECK(comm_new(1, dev, fd, &c));
  weft_ib_conn_info_t info;
  local_info(c, &info);
  uint8_t buf[WEFT_IB_CONN_BYTES + 4 + HELLO_MAX];
  size_t n = weft_ib_conn_pack(&info, buf);
  uint32_t hl = (uint32_t)hello_len;
  memcpy(buf + n, &hl, 4);
  if (hello_len) memcpy(buf + n + 4, hello, hello_len);
  // Small: the kernel takes it without the peer's help.
  res = weft_socket_send(c->fd, buf, n + 4 + hello_len, tmo > 0 ? tmo : -1);
  if (res != ncclSuccess) {
    WARN("NET/IB : could not introduce this rank to %s", c->peer);
    comm_free(c, 1);
    return ncclRemoteError;
  }
  *send_comm = c;
  return ncclSuccess;
}

// Blocking, bounded by WEFT_TIMEOUT, as the socket backend's; connections
// that do not introduce themselves are dropped.
static ncclResult_t ib_accept(void *listen_comm, void *hello, size_t hello_len, void **recv_comm) {
  ib_listen_t *l = listen_comm;
  int tmo = (int)weft_timeout_ms();
  int64_t end = tmo > 0 ? weft_now_ms() + tmo : -1;
  for (;;) {
    int fd = -1;
    weft_sockaddr_t from;
    ncclResult_t res = weft_socket_accept_by(l->fd, end, "NET/IB", &fd, &from);
    if (res != ncclSuccess) return res;
    uint8_t buf[WEFT_IB_CONN_BYTES];
    uint32_t hl = 0;
    char hbuf[HELLO_MAX], err[128] = "";
    weft_ib_conn_info_t remote;
    int ok = weft_socket_recv(fd, buf, sizeof(buf), HELLO_WAIT_MS) == ncclSuccess &&
             weft_ib_conn_unpack(buf, sizeof(buf), &remote, err, sizeof(err)) == 0 &&
             weft_socket_recv(fd, &hl, 4, HELLO_WAIT_MS) == ncclSuccess && hl == hello_len &&
             (hl == 0 || weft_socket_recv(fd, hbuf, hl, HELLO_WAIT_MS) == ncclSuccess);
    if (!ok) {
      char a[WEFT_ADDR_STRLEN];
      INFO(WEFT_LOG_NET, "NET/IB : dropped a connection from %s that did not introduce itself%s%s",
           weft_socket_addr_str(&from, a, sizeof(a)), err[0] ? ": " : "", err);
      weft_socket_close(&fd);
      continue;
    }
    ib_comm_t *c = NULL;
    WEFTCHECK(comm_new(0, l->dev, fd, &c));
    c->rfifo_addr = remote.fifo_addr;
    c->rfifo_rkey = remote.fifo_rkey;
    weft_ib_conn_info_t info;
    local_info(c, &info);
    size_t n = weft_ib_conn_pack(&info, buf);
    if (connect_qps(c, &remote) != 0 || weft_socket_send(c->fd, buf, n, HELLO_WAIT_MS) != ncclSuccess) {
      comm_free(c, 1);
      return ncclRemoteError;
    }
    if (hello_len) memcpy(hello, hbuf, hello_len);
    *recv_comm = c;  // the sender's READY byte arrives later (progress)
    return ncclSuccess;
  }
}

static ncclResult_t ib_close_listen(void *listen_comm) {
  ib_listen_t *l = listen_comm;
  if (l == NULL) return ncclSuccess;
  weft_socket_close(&l->fd);
  free(l);
  return ncclSuccess;
}

/* ---- progress ---- */

static ncclResult_t comm_fail(ib_comm_t *c, const char *what) {
  if (!c->failed) INFO(WEFT_LOG_NET, "NET/IB %s %s: %s", c->is_send ? "to" : "from", c->peer, what);
  c->failed = 1;
  return ncclRemoteError;
}

static int post_zero_recv(ib_comm_t *c, int qp, uint64_t wr_id) {
  struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = NULL, .num_sge = 0}, *bad = NULL;
  return ibv_post_recv(c->qp[qp], &wr, &bad);
}

static int post_write(ib_comm_t *c, int qp, uint64_t wr_id, void *src, size_t len, uint32_t lkey, uint64_t raddr,
                      uint32_t rkey, uint32_t imm) {
  struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)src, .length = (uint32_t)len, .lkey = lkey};
  struct ibv_send_wr wr, *bad = NULL;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = wr_id;
  wr.sg_list = len ? &sge : NULL;
  wr.num_sge = len ? 1 : 0;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  int err = ibv_post_send(c->qp[qp], &wr, &bad);
  if (err == 0) c->sends_out++;
  return err;
}

// The side channel: the set-up's last steps, then only a goodbye or an end.
static ncclResult_t side_progress(ib_comm_t *c) {
  if (c->is_send && c->state == ST_SETUP) {
    while (c->in_got < sizeof(c->in)) {
      ssize_t n = recv(c->fd, c->in + c->in_got, sizeof(c->in) - c->in_got, MSG_DONTWAIT);
      if (n > 0) {
        c->in_got += (size_t)n;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return ncclSuccess;
      return comm_fail(c, n == 0 ? "closed during set-up" : strerror(errno));
    }
    weft_ib_conn_info_t remote;
    char err[128];
    if (weft_ib_conn_unpack(c->in, sizeof(c->in), &remote, err, sizeof(err)) != 0) return comm_fail(c, err);
    if (connect_qps(c, &remote) != 0) return comm_fail(c, "queue pairs did not connect");
    for (int i = 0; i < 2 * WEFT_IB_FIFO_DEPTH; i++)  // one per descriptor the receiver writes, with room
      if (post_zero_recv(c, 0, (uint64_t)i << 2 | WR_FIFO_RECV) != 0) return comm_fail(c, "cannot post receives");
    char ready = READY_BYTE;
    if (weft_socket_send(c->fd, &ready, 1, HELLO_WAIT_MS) != ncclSuccess) return comm_fail(c, "cannot say ready");
    c->state = ST_READY;
    return ncclSuccess;
  }
  char b[16];
  for (;;) {
    ssize_t n = recv(c->fd, b, sizeof(b), MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return ncclSuccess;
    if (n <= 0) {
      epoll_ctl(c->epfd, EPOLL_CTL_DEL, c->fd, NULL);  // an ended stream stays readable
      if (c->is_send || c->peer_closed) {  // a receiver closing is no failure until a write fails
        c->peer_closed = 1;
        return ncclSuccess;
      }
      return comm_fail(c, n == 0 ? "peer went away without a goodbye" : strerror(errno));
    }
    for (ssize_t i = 0; i < n; i++) {
      if (b[i] == READY_BYTE && !c->is_send && c->state == ST_SETUP) c->state = ST_READY;
      else if (b[i] == BYE_BYTE) c->peer_closed = 1;
      else return comm_fail(c, "garbage on the set-up channel");
    }
  }
}

static ncclResult_t poll_cq(ib_comm_t *c) {
  struct ibv_cq *ev_cq;
  void *ev_ctx;
  while (ibv.get_cq_event(c->ch, &ev_cq, &ev_ctx) == 0) {  // non-blocking channel
    ibv.ack_cq_events(ev_cq, 1);
    c->armed = 0;
  }
  for (int pass = 0; pass < 2; pass++) {
    struct ibv_wc wc[16];
    int n;
    while ((n = ibv_poll_cq(c->cq, 16, wc)) > 0) {
      for (int i = 0; i < n; i++) {
        if (wc[i].status != IBV_WC_SUCCESS) {
          // After the sender's goodbye its QPs are gone: descriptor writes
          // still in flight fail, and flush this QP's receives. No loss.
          if (!c->is_send && c->peer_closed) continue;
          char what[160];
          snprintf(what, sizeof(what), "completion error %s (%d), vendor error 0x%x",
                   ibv.wc_status_str ? ibv.wc_status_str(wc[i].status) : "", (int)wc[i].status, wc[i].vendor_err);
          return comm_fail(c, what);
        }
        uint64_t seq = wc[i].wr_id >> 2;
        ib_req_t *r = &c->reqs[seq % MAX_REQS];
        switch (wc[i].wr_id & 3) {
          case WR_SEND_DATA:
            c->sends_out--;
            if (r->used && r->seq == seq) r->done = 1;
            break;
          case WR_FIFO_WRITE:
            c->sends_out--;
            break;
          case WR_RECV_DATA:
            if (!r->used || r->seq != seq) return comm_fail(c, "a message for no posted receive");
            if (wc[i].byte_len > r->size) return comm_fail(c, "a message longer than its receive");
            r->size = wc[i].byte_len;
            r->tag = (wc[i].wc_flags & IBV_WC_WITH_IMM) ? ntohl(wc[i].imm_data) : 0;
            r->done = 1;
            break;
          case WR_FIFO_RECV:  // a descriptor arrived (read from memory below); keep the receive posted
            if (post_zero_recv(c, 0, wc[i].wr_id) != 0) return comm_fail(c, "cannot post receives");
            break;
        }
      }
    }
    if (n < 0) return comm_fail(c, "ibv_poll_cq failed");
    if (pass == 0 && !c->armed) {  // arm, then look again for what came in between
      if (ibv_req_notify_cq(c->cq, 0) != 0) return comm_fail(c, "ibv_req_notify_cq failed");
      c->armed = 1;
    } else {
      break;
    }
  }
  return ncclSuccess;
}

// Hand requests to the HCA in order as far as descriptors (send) or
// credits (receive) allow.
static ncclResult_t issue(ib_comm_t *c) {
  if (c->state != ST_READY || (!c->is_send && c->peer_closed)) return ncclSuccess;  // nothing more will come
  while (c->issued < c->tail) {
    ib_req_t *r = &c->reqs[c->issued % MAX_REQS];
    if (c->is_send) {
      weft_ib_fifo_entry_t e;
      int got = weft_ib_fifo_tx_take(&c->tx, c->fifo, &e);
      if (got < 0) return comm_fail(c, "garbage in the descriptor FIFO");
      if (got == 0) return ncclSuccess;
      if (e.size < r->size) {
        WARN("NET/IB : a message of %zu bytes to %s does not fit the peer's %" PRIu64 "-byte receive", r->size,
             c->peer, e.size);
        return comm_fail(c, "message too long");
      }
      if (post_write(c, (int)(r->seq % (uint64_t)c->nqps), r->seq << 2 | WR_SEND_DATA, r->data, r->size,
                     r->mr ? r->mr->lkey : 0, e.addr, e.rkey, r->tag) != 0)
        return comm_fail(c, "ibv_post_send failed");
    } else {
      weft_ib_fifo_entry_t e;
      uint32_t slot;
      if (weft_ib_fifo_rx_post(&c->rx, (uint64_t)(uintptr_t)r->data, r->mr ? r->mr->rkey : 0, r->size, &e, &slot) != 0)
        return ncclSuccess;  // no credit: wait for a receive to finish
      c->fifo[slot] = e;     // staging copy the HCA reads
      if (post_write(c, 0, r->seq << 2 | WR_FIFO_WRITE, &c->fifo[slot], sizeof(e), c->fifo_mr->lkey,
                     c->rfifo_addr + slot * sizeof(e), c->rfifo_rkey, slot) != 0)
        return comm_fail(c, "ibv_post_send failed");
    }
    c->issued++;
  }
  return ncclSuccess;
}

static ncclResult_t progress(ib_comm_t *c) {
  if (c->failed) return ncclRemoteError;
  WEFTCHECK(side_progress(c));
  WEFTCHECK(poll_cq(c));
  return issue(c);
}

/* ---- requests ---- */

static ncclResult_t post(ib_comm_t *c, char *data, size_t size, uint32_t tag, void **request) {
  if (c->failed) return ncclRemoteError;
  if (c->tail - c->head >= MAX_REQS) {
    WARN("NET/IB : more than %d requests outstanding on one connection", MAX_REQS);
    return ncclInternalError;
  }
  ib_req_t *r = &c->reqs[c->tail % MAX_REQS];
  memset(r, 0, sizeof(*r));
  r->comm = c;
  r->seq = c->tail;
  r->data = data;
  r->size = size;
  r->tag = tag;
  if (size > 0 && (r->mr = weft_ib_mr_get(&c->mrs, data, size)) == NULL) return ncclSystemError;
  if (!c->is_send && post_zero_recv(c, (int)(r->seq % (uint64_t)c->nqps), r->seq << 2 | WR_RECV_DATA) != 0) {
    weft_ib_mr_put(&c->mrs, r->mr);
    return comm_fail(c, "cannot post a receive");
  }
  r->used = 1;
  c->tail++;
  *request = r;
  return progress(c);
}

static ncclResult_t ib_isend(void *send_comm, const void *data, size_t size, uint32_t tag, void **request) {
  return post(send_comm, (char *)data, size, tag, request);
}

static ncclResult_t ib_irecv(void *recv_comm, void *data, size_t size, void **request) {
  return post(recv_comm, data, size, 0, request);
}

static ncclResult_t ib_test(void *request, int *done, size_t *size, uint32_t *tag) {
  ib_req_t *r = request;
  ib_comm_t *c = r->comm;
  *done = 0;
  if (!r->used) {
    WARN("NET/IB : test of a request that is not outstanding");
    return ncclInternalError;
  }
  WEFTCHECK(progress(c));
  if (!r->done) return ncclSuccess;
  *done = 1;
  if (size != NULL) *size = r->size;
  if (tag != NULL) *tag = r->tag;
  weft_ib_mr_put(&c->mrs, r->mr);
  r->used = 0;
  while (c->head < c->tail && !c->reqs[c->head % MAX_REQS].used) {
    c->head++;
    if (!c->is_send) weft_ib_fifo_rx_complete(&c->rx);  // a credit back
  }
  return issue(c);
}

static int ib_poll_fd(void *comm) { return comm ? ((ib_comm_t *)comm)->epfd : -1; }

/* ---- closing ---- */

static ncclResult_t ib_close_send(void *send_comm) {
  ib_comm_t *c = send_comm;
  if (c == NULL) return ncclSuccess;
  int64_t end = weft_now_ms() + 2000;  // flush what is queued, bounded
  while (!c->failed && (c->issued < c->tail || c->sends_out > 0) && weft_now_ms() < end) {
    if (progress(c) != ncclSuccess) break;
    struct epoll_event ev;
    epoll_wait(c->epfd, &ev, 1, 10);
  }
  if (!c->failed && c->state == ST_READY) {
    char bye = BYE_BYTE;
    (void)weft_socket_send(c->fd, &bye, 1, 1000);
  }
  comm_free(c, c->failed);
  return ncclSuccess;
}

static ncclResult_t ib_close_recv(void *recv_comm) {
  comm_free(recv_comm, 0);
  return ncclSuccess;
}

static void ib_abort_comm(void *comm) { comm_free(comm, 1); }

const weft_net_t weft_net_ib = {
    .name = "IB",
    .init = ib_init,
    .devices = ib_devices,
    .get_properties = ib_get_properties,
    .listen = ib_listen,
    .connect = ib_connect,
    .accept = ib_accept,
    .isend = ib_isend,
    .irecv = ib_irecv,
    .test = ib_test,
    .poll_fd = ib_poll_fd,
    .close_send = ib_close_send,
    .close_recv = ib_close_recv,
    .close_listen = ib_close_listen,
    .abort_comm = ib_abort_comm,
    .hold_large = NULL,
    .held = NULL,
    .release = NULL,
};
