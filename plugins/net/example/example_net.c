/*
 * example_net.c — a complete NCCL net plugin over TCP, small enough to
 * read: the example plugins/net/ builds as libnccl-net-example.so and the
 * tests load (NCCL_NET_PLUGIN=example). Needs nothing but net_abi.h.
 *
 * One device: the first IPv4 interface NCCL_SOCKET_IFNAME allows (a prefix
 * list; default: the first one up that is not loopback, else loopback). A
 * communicator is one non-blocking TCP socket. A message is an 8-byte
 * length and the payload. Requests complete in the order posted; a
 * communicator holds at most NCCL_NET_MAX_REQUESTS of them, and isend/irecv
 * answer NULL ("not now") when it is full. Built to export v6 alone, it
 * holds v6's 8 and fails a ninth, as NCCL's own sockets do, so that a
 * loader ignoring v6's limit is caught. test() moves as many bytes as the
 * kernel takes. connect keeps its progress in the handle, as the ABI
 * allows: nothing blocks.
 * Registration only records the region, and isend/irecv check the buffer
 * lies inside the region they are given — which is what catches a caller
 * that forgets to register.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "example_net.h"

#define HANDLE_MAGIC 0x65786e65u
#if defined(WEFT_EXAMPLE_NET_ONLY) && WEFT_EXAMPLE_NET_ONLY == 6
#define MAX_REQS NCCL_NET_MAX_REQUESTS_V6
#define FULL_IS_AN_ERROR 1  // so a loader that posts more than v6 allows is caught
#else
#define MAX_REQS NCCL_NET_MAX_REQUESTS
#define FULL_IS_AN_ERROR 0
#endif

weft_abi_logger_t ex_log;
static char dev_name[IF_NAMESIZE + 1];
static struct sockaddr_in dev_addr;

typedef struct {  // what connect finds in the handle, and keeps its progress in
  uint32_t magic;
  struct sockaddr_in addr;
  int stage;      // 0: not started, 1: connecting on fd
  int fd;
} handle_t;

typedef struct {
  char *base;
  size_t size;
} mr_t;

typedef struct ex_comm ex_comm_t;

typedef struct {
  ex_comm_t *comm;
  int used, done;
  char *data;
  size_t size;      // send: the message; receive: the buffer, then what arrived
  uint64_t len;     // the length on the wire
  size_t len_done, data_done;
} req_t;

struct ex_comm {
  int fd, is_send, failed;
  req_t reqs[MAX_REQS];
  unsigned head, tail;  // oldest unfinished; next free (counting up)
};

typedef struct {
  int fd;
} listen_t;

static int allowed(const char *name) {
  const char *list = getenv("NCCL_SOCKET_IFNAME");
  if (list == NULL || list[0] == '\0' || list[0] == '^' || list[0] == '=') return -1;  // no preference
  char copy[256];
  snprintf(copy, sizeof(copy), "%s", list);
  for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save))
    if (strncmp(name, tok, strlen(tok)) == 0) return 1;
  return 0;
}

ncclResult_t ex_init(weft_abi_logger_t log) {
  ex_log = log;
  if (dev_name[0] != '\0') return ncclSuccess;  // v11 calls init once per context
  struct ifaddrs *list = NULL, *pick = NULL, *lo = NULL;
  if (getifaddrs(&list) != 0) return ncclSystemError;
  for (struct ifaddrs *i = list; i != NULL; i = i->ifa_next) {
    if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    int ok = allowed(i->ifa_name);
    if (ok == 1 && pick == NULL) pick = i;
    if (ok == -1 && (i->ifa_flags & IFF_LOOPBACK) && lo == NULL) lo = i;
    if (ok == -1 && !(i->ifa_flags & IFF_LOOPBACK) && pick == NULL) pick = i;
  }
  if (pick == NULL) pick = lo;
  if (pick != NULL) {
    snprintf(dev_name, sizeof(dev_name), "%s", pick->ifa_name);
    memcpy(&dev_addr, pick->ifa_addr, sizeof(dev_addr));
    dev_addr.sin_port = 0;
  }
  freeifaddrs(list);
  if (pick == NULL) {
    EX_LOG(2, "NET/" EX_NAME ": no IPv4 interface matches NCCL_SOCKET_IFNAME");
    return ncclSystemError;
  }
  char a[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &dev_addr.sin_addr, a, sizeof(a));
  EX_LOG(3, "NET/" EX_NAME ": using %s (%s)", dev_name, a);
  return ncclSuccess;
}

ncclResult_t ex_devices(int *ndev) {
  *ndev = dev_name[0] != '\0' ? 1 : 0;
  return ncclSuccess;
}

ncclResult_t ex_props(int dev, char **name, int *speed) {
  if (dev != 0) return ncclInvalidArgument;
  *name = dev_name;
  *speed = 10000;
  char path[96];
  snprintf(path, sizeof(path), "/sys/class/net/%s/speed", dev_name);
  FILE *f = fopen(path, "r");
  if (f != NULL) {
    int s = 0;
    if (fscanf(f, "%d", &s) == 1 && s > 0) *speed = s;
    fclose(f);
  }
  return ncclSuccess;
}

static int nonblocking_socket(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd >= 0) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

ncclResult_t ex_listen(int dev, void *handle, void **listen_comm) {
  if (dev != 0) return ncclInvalidArgument;
  listen_t *l = calloc(1, sizeof(*l));
  handle_t h = {.magic = HANDLE_MAGIC, .addr = dev_addr, .fd = -1};
  socklen_t len = sizeof(h.addr);
  if (l == NULL || (l->fd = nonblocking_socket()) < 0 || bind(l->fd, (struct sockaddr *)&h.addr, len) != 0 ||
      listen(l->fd, 1024) != 0 || getsockname(l->fd, (struct sockaddr *)&h.addr, &len) != 0) {
    EX_LOG(2, "NET/" EX_NAME ": cannot listen on %s: %s", dev_name, strerror(errno));
    if (l != NULL && l->fd >= 0) close(l->fd);
    free(l);
    return ncclSystemError;
  }
  memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
  memcpy(handle, &h, sizeof(h));
  *listen_comm = l;
  return ncclSuccess;
}

static ex_comm_t *comm_new(int fd, int is_send) {
  ex_comm_t *c = calloc(1, sizeof(*c));
  if (c == NULL) return NULL;
  c->fd = fd;
  c->is_send = is_send;
  return c;
}

ncclResult_t ex_connect(int dev, void *handle, void **send_comm) {
  handle_t *h = handle;
  *send_comm = NULL;
  if (dev != 0 || h->magic != HANDLE_MAGIC) return ncclInvalidArgument;
  if (h->stage == 0) {
    h->fd = nonblocking_socket();
    if (h->fd < 0) return ncclSystemError;
    if (connect(h->fd, (struct sockaddr *)&h->addr, sizeof(h->addr)) != 0 && errno != EINPROGRESS) goto refused;
    h->stage = 1;
  }
  struct pollfd p = {.fd = h->fd, .events = POLLOUT};
  if (poll(&p, 1, 0) <= 0) return ncclSuccess;  // still on its way: call again
  int err = 0;
  socklen_t len = sizeof(err);
  if (getsockopt(h->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
    errno = err;
    goto refused;
  }
  ex_comm_t *c = comm_new(h->fd, 1);
  if (c == NULL) return ncclSystemError;
  h->stage = 0;
  h->fd = -1;
  *send_comm = c;
  return ncclSuccess;
refused:
  EX_LOG(2, "NET/" EX_NAME ": connect failed: %s", strerror(errno));
  close(h->fd);
  h->fd = -1;
  h->stage = 0;
  return ncclRemoteError;
}

ncclResult_t ex_accept(void *listen_comm, void **recv_comm) {
  listen_t *l = listen_comm;
  *recv_comm = NULL;
  int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? ncclSuccess : ncclSystemError;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ex_comm_t *c = comm_new(fd, 0);
  if (c == NULL) {
    close(fd);
    return ncclSystemError;
  }
  *recv_comm = c;
  return ncclSuccess;
}

ncclResult_t ex_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle) {
  (void)comm;
  if (type != NCCL_PTR_HOST) return ncclInvalidArgument;
  mr_t *m = malloc(sizeof(*m));
  if (m == NULL) return ncclSystemError;
  *m = (mr_t){data, size};
  *mhandle = m;
  return ncclSuccess;
}

ncclResult_t ex_dereg_mr(void *comm, void *mhandle) {
  (void)comm;
  free(mhandle);
  return ncclSuccess;
}

static int inside(const mr_t *m, const char *data, size_t size) {
  return m != NULL && m->base <= data && data + size <= m->base + (size ? m->size : m->size + 1);
}

static ncclResult_t post(ex_comm_t *c, char *data, size_t size, void **request) {
  *request = NULL;
  if (c->failed) return ncclRemoteError;
  if (c->tail - c->head >= MAX_REQS) {
    if (!FULL_IS_AN_ERROR) return ncclSuccess;  // full: "not now"
    EX_LOG(2, "NET/" EX_NAME ": more than %d requests outstanding on one communicator", MAX_REQS);
    return ncclInternalError;
  }
  req_t *r = &c->reqs[c->tail % MAX_REQS];
  *r = (req_t){.comm = c, .used = 1, .data = data, .size = size, .len = size};
  c->tail++;
  *request = r;
  return ncclSuccess;
}

ncclResult_t ex_isend(void *send_comm, void *data, size_t size, void *mhandle, void **request) {
  if (!inside(mhandle, data, size)) {
    EX_LOG(2, "NET/" EX_NAME ": isend of %zu bytes at %p outside its registration", size, data);
    return ncclInvalidArgument;
  }
  return post(send_comm, data, size, request);
}

ncclResult_t ex_irecv(void *recv_comm, int n, void **data, const size_t *sizes, void **mhandles, void **request) {
  if (n != 1) return ncclInvalidArgument;  // maxRecvs is 1
  if (!inside(mhandles[0], data[0], sizes[0])) {
    EX_LOG(2, "NET/" EX_NAME ": irecv of %zu bytes at %p outside its registration", sizes[0], data[0]);
    return ncclInvalidArgument;
  }
  return post(recv_comm, data[0], sizes[0], request);
}

static ncclResult_t broken(ex_comm_t *c, const char *what) {
  if (!c->failed) EX_LOG(3, "NET/" EX_NAME ": connection failed: %s", what);
  c->failed = 1;
  return ncclRemoteError;
}

// Move bytes of one request: 1 when it is complete, 0 when the kernel
// would block, -1 on failure.
static int move(ex_comm_t *c, req_t *r) {
  for (;;) {
    char *p;
    size_t left;
    if (r->len_done < sizeof(r->len)) p = (char *)&r->len + r->len_done, left = sizeof(r->len) - r->len_done;
    else if (r->data_done < r->len) p = r->data + r->data_done, left = r->len - r->data_done;
    else return 1;
    ssize_t n = c->is_send ? send(c->fd, p, left, MSG_DONTWAIT | MSG_NOSIGNAL) : recv(c->fd, p, left, MSG_DONTWAIT);
    if (n == 0 && !c->is_send) return broken(c, "closed by the peer"), -1;
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      return broken(c, strerror(errno)), -1;
    }
    if (r->len_done < sizeof(r->len)) {
      r->len_done += (size_t)n;
      if (!c->is_send && r->len_done == sizeof(r->len) && r->len > r->size)
        return broken(c, "a message longer than the receive"), -1;
    } else {
      r->data_done += (size_t)n;
    }
  }
}

static ncclResult_t progress(ex_comm_t *c) {
  if (c->failed) return ncclRemoteError;
  for (unsigned i = c->head; i < c->tail; i++) {
    req_t *r = &c->reqs[i % MAX_REQS];
    if (!r->used || r->done) continue;
    int m = move(c, r);
    if (m < 0) return ncclRemoteError;
    if (m == 0) break;
    r->done = 1;
  }
  return ncclSuccess;
}

ncclResult_t ex_test(void *request, int *done, size_t *size) {
  req_t *r = request;
  ex_comm_t *c = r->comm;
  *done = 0;
  ncclResult_t res = progress(c);
  if (!r->done) return res;  // a request that completed stays complete when a later one fails
  *done = 1;
  if (size != NULL) *size = r->len;
  r->used = 0;
  while (c->head < c->tail && !c->reqs[c->head % MAX_REQS].used) c->head++;
  return ncclSuccess;
}

ncclResult_t ex_close(void *comm) {
  ex_comm_t *c = comm;
  if (c == NULL) return ncclSuccess;
  close(c->fd);
  free(c);
  return ncclSuccess;
}

ncclResult_t ex_close_listen(void *listen_comm) {
  listen_t *l = listen_comm;
  if (l == NULL) return ncclSuccess;
  close(l->fd);
  free(l);
  return ncclSuccess;
}
