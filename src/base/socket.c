/*
 * socket.c — TCP helpers with deadlines (see socket.h): address parsing and
 * printing, listen / connect / accept, and exact-length send / recv.
 *
 * Every wait is a poll() bounded by the caller's deadline, and every transfer
 * uses MSG_DONTWAIT, so no call blocks past its deadline whatever the fd's
 * blocking mode. Connected fds are returned in blocking mode (callers may
 * also use them with plain read/write); listening fds are non-blocking so a
 * connection that vanishes between poll and accept cannot stall accept.
 *
 * A deadline that passes mid-transfer returns ncclInProgress with part of
 * the buffer moved: the stream is then out of step and the caller should
 * treat the connection as failed.
 */
#include "socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "debug.h"
#include "env.h"
#include "util.h"

#define WEFT_LISTEN_BACKLOG 1024
#define WEFT_CONNECT_BACKOFF_MIN_MS 10
#define WEFT_CONNECT_BACKOFF_MAX_MS 200
#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24  // Linux 4.2; older C libraries lack the name
#endif

// ---- deadlines ------------------------------------------------------------

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// timeout_ms < 0: no deadline (-1).
static int64_t deadline_after(int timeout_ms) {
  return timeout_ms < 0 ? -1 : now_ns() + (int64_t)timeout_ms * 1000000;
}

// Milliseconds left, rounded up so poll never wakes just before the deadline;
// -1 (poll forever) without a deadline.
static int ms_left(int64_t deadline) {
  if (deadline < 0) return -1;
  int64_t left = deadline - now_ns();
  if (left <= 0) return 0;
  int64_t ms = (left + 999999) / 1000000;
  return ms > INT_MAX ? INT_MAX : (int)ms;
}

static int expired(int64_t deadline) { return deadline >= 0 && now_ns() >= deadline; }

// Wait for `events` on fd: 1 ready, 0 deadline passed, -1 error (WARNed).
static int wait_fd(int fd, short events, int64_t deadline, const char *what) {
  for (;;) {
    struct pollfd p = {.fd = fd, .events = events, .revents = 0};
    int r = poll(&p, 1, ms_left(deadline));
    if (r > 0) {
      if (p.revents & POLLNVAL) {
        WARN("%s: fd %d is not an open socket", what, fd);
        return -1;
      }
      return 1;
    }
    if (r == 0) {
      if (expired(deadline)) return 0;
      continue;
    }
    if (errno == EINTR) continue;
    WARN("%s: poll on fd %d failed: %s", what, fd, strerror(errno));
    return -1;
  }
}

// ---- addresses ------------------------------------------------------------

static socklen_t addr_len(const weft_sockaddr_t *addr) {
  if (addr->sa.sa_family == AF_INET) return sizeof(struct sockaddr_in);
  if (addr->sa.sa_family == AF_INET6) return sizeof(struct sockaddr_in6);
  return 0;
}

static int all_digits_and_dots(const char *s) {
  for (; *s; s++)
    if (!((*s >= '0' && *s <= '9') || *s == '.')) return 0;
  return 1;
}

static int parse_port(const char *text, unsigned *port) {
  unsigned v = 0;
  size_t n = 0;
  for (; text[n]; n++) {
    if (text[n] < '0' || text[n] > '9' || n >= 5) return -1;
    v = v * 10 + (unsigned)(text[n] - '0');
  }
  if (n == 0 || v > 65535) return -1;
  *port = v;
  return 0;
}

ncclResult_t weft_socket_parse_addr(const char *text, weft_sockaddr_t *addr) {
  if (addr == NULL) {
    WARN("weft_socket_parse_addr: NULL output address");
    return ncclInvalidArgument;
  }
  if (text == NULL || text[0] == '\0') {
    WARN("socket address is empty; expected host:port or [ipv6]:port");
    return ncclInvalidArgument;
  }
  char host[256];
  const char *port_text;
  int family = AF_UNSPEC;
  int numeric;
  if (text[0] == '[') {
    const char *close = strchr(text, ']');
    if (close == NULL || close[1] != ':') {
      WARN("socket address '%s' is not [ipv6]:port", text);
      return ncclInvalidArgument;
    }
    size_t n = (size_t)(close - text - 1);
    if (n == 0 || n >= sizeof(host)) {
      WARN("socket address '%s' has an empty or overlong IPv6 address", text);
      return ncclInvalidArgument;
    }
    memcpy(host, text + 1, n);
    host[n] = '\0';
    port_text = close + 2;
    family = AF_INET6;
    numeric = 1;
    // A scope given as an interface name (fe80::1%eth0, as weft prints it)
    // becomes its index, which a numeric-only lookup accepts.
    char *pct = strchr(host, '%');
    if (pct != NULL && pct[1] != '\0' && !all_digits_and_dots(pct + 1)) {
      unsigned idx = if_nametoindex(pct + 1);
      if (idx == 0) {
        WARN("socket address '%s': no network interface is called '%s'", text, pct + 1);
        return ncclInvalidArgument;
      }
      snprintf(pct + 1, sizeof(host) - (size_t)(pct + 1 - host), "%u", idx);
    }
  } else {
    const char *colon = strrchr(text, ':');
    if (colon == NULL) {
      WARN("socket address '%s' has no port; expected host:port or [ipv6]:port", text);
      return ncclInvalidArgument;
    }
    if (memchr(text, ':', (size_t)(colon - text)) != NULL) {
      WARN("socket address '%s' is ambiguous; write an IPv6 address as [addr]:port", text);
      return ncclInvalidArgument;
    }
    size_t n = (size_t)(colon - text);
    if (n == 0 || n >= sizeof(host)) {
      WARN("socket address '%s' has an empty or overlong host", text);
      return ncclInvalidArgument;
    }
    memcpy(host, text, n);
    host[n] = '\0';
    port_text = colon + 1;
    numeric = all_digits_and_dots(host);  // never send "1.2.3" to DNS
  }
  unsigned port;
  if (parse_port(port_text, &port) != 0) {
    WARN("socket address '%s': port '%s' is not a number in 0..65535", text, port_text);
    return ncclInvalidArgument;
  }

  if (family == AF_UNSPEC && numeric) {
    // Dotted quads only: inet_aton's "1.2.3" = 1.2.0.3 is never what was meant.
    memset(addr, 0, sizeof(*addr));
    if (inet_pton(AF_INET, host, &addr->sin.sin_addr) != 1) {
      WARN("socket address '%s': '%s' is not a valid IPv4 address", text, host);
      return ncclInvalidArgument;
    }
    addr->sin.sin_family = AF_INET;
    addr->sin.sin_port = htons((uint16_t)port);
    return ncclSuccess;
  }

  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = numeric ? AI_NUMERICHOST : 0;  // [v6] is never looked up
  int rc = getaddrinfo(host, NULL, &hints, &res);
  if (rc != 0) {
    WARN("socket address '%s': cannot resolve '%s': %s", text, host,
         rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
    return ncclInvalidArgument;
  }
  const struct addrinfo *ai = res;
  while (ai != NULL && ai->ai_family != AF_INET && ai->ai_family != AF_INET6) ai = ai->ai_next;
  if (ai == NULL || ai->ai_addrlen > sizeof(*addr)) {
    freeaddrinfo(res);
    WARN("socket address '%s': '%s' has no IPv4 or IPv6 address", text, host);
    return ncclInvalidArgument;
  }
  memset(addr, 0, sizeof(*addr));
  memcpy(addr, ai->ai_addr, ai->ai_addrlen);
  if (addr->sa.sa_family == AF_INET)
    addr->sin.sin_port = htons((uint16_t)port);
  else
    addr->sin6.sin6_port = htons((uint16_t)port);
  freeaddrinfo(res);
  return ncclSuccess;
}

const char *weft_socket_addr_str(const weft_sockaddr_t *addr, char *buf, size_t len) {
  if (buf == NULL || len == 0) return "";
  char ip[INET6_ADDRSTRLEN] = "?";
  if (addr == NULL) {
    snprintf(buf, len, "(null)");
  } else if (addr->sa.sa_family == AF_INET) {
    inet_ntop(AF_INET, &addr->sin.sin_addr, ip, sizeof(ip));
    snprintf(buf, len, "%s:%u", ip, (unsigned)ntohs(addr->sin.sin_port));
  } else if (addr->sa.sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &addr->sin6.sin6_addr, ip, sizeof(ip));
    char scope[IF_NAMESIZE + 2] = "";
    if (addr->sin6.sin6_scope_id != 0) {
      char name[IF_NAMESIZE];
      if (if_indextoname(addr->sin6.sin6_scope_id, name) != NULL)
        snprintf(scope, sizeof(scope), "%%%s", name);
      else
        snprintf(scope, sizeof(scope), "%%%u", (unsigned)addr->sin6.sin6_scope_id);
    }
    snprintf(buf, len, "[%s%s]:%u", ip, scope, (unsigned)ntohs(addr->sin6.sin6_port));
  } else {
    snprintf(buf, len, "(address family %d)", (int)addr->sa.sa_family);
  }
  return buf;
}

// ---- connection setup -----------------------------------------------------

static void set_int(int fd, int level, int name, int value, const char *what) {
  if (setsockopt(fd, level, name, &value, sizeof(value)) != 0)
    INFO(WEFT_LOG_NET, "fd %d: %s: %s", fd, what, strerror(errno));
}

// Low latency for small control messages. A peer whose host is gone or
// whose link is down sends no end of stream: keepalive probes (when idle)
// and TCP_USER_TIMEOUT (when data waits for an acknowledgement) make the
// kernel fail the connection after about WEFT_NET_DEAD_MS.
static void tune_connection(int fd) {
  set_int(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
  set_int(fd, SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE");
  int64_t dead_ms = weft_env_WEFT_NET_DEAD_MS();
  if (dead_ms <= 0) return;
  // Idle 1 s, then a probe a second: dead after WEFT_NET_DEAD_MS of silence
  // (at least 2 probes, so one lost probe on a lossy link is not a death).
  int probes = dead_ms / 1000 - 1 > 2 ? (int)(dead_ms / 1000 - 1) : 2;
  set_int(fd, IPPROTO_TCP, TCP_KEEPIDLE, 1, "TCP_KEEPIDLE");
  set_int(fd, IPPROTO_TCP, TCP_KEEPINTVL, 1, "TCP_KEEPINTVL");
  set_int(fd, IPPROTO_TCP, TCP_KEEPCNT, probes > 127 ? 127 : probes, "TCP_KEEPCNT");
  set_int(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, (int)(dead_ms < INT32_MAX ? dead_ms : INT32_MAX), "TCP_USER_TIMEOUT");
}

static int set_blocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags == -1) return -1;
  return fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
}

ncclResult_t weft_socket_listen(weft_sockaddr_t *addr, int *listen_fd) {
  if (addr == NULL || listen_fd == NULL) {
    WARN("weft_socket_listen: NULL %s", addr == NULL ? "address" : "fd pointer");
    return ncclInvalidArgument;
  }
  *listen_fd = -1;
  char name[WEFT_ADDR_STRLEN];
  weft_socket_addr_str(addr, name, sizeof(name));
  socklen_t len = addr_len(addr);
  if (len == 0) {
    WARN("cannot listen on %s: not an IPv4 or IPv6 address", name);
    return ncclInvalidArgument;
  }
  int fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    WARN("socket() for listening on %s failed: %s", name, strerror(errno));
    return ncclSystemError;
  }
  int one = 1;
  const char *step = "setsockopt(SO_REUSEADDR)";
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) goto fail;
  step = "bind";
  if (bind(fd, &addr->sa, len) != 0) goto fail;
  step = "listen";
  if (listen(fd, WEFT_LISTEN_BACKLOG) != 0) goto fail;
  step = "getsockname";
  weft_sockaddr_t bound;
  socklen_t blen = sizeof(bound);
  memset(&bound, 0, sizeof(bound));
  if (getsockname(fd, &bound.sa, &blen) != 0) goto fail;
  *addr = bound;
  *listen_fd = fd;
  INFO(WEFT_LOG_NET, "listening on %s (fd %d)", weft_socket_addr_str(addr, name, sizeof(name)), fd);
  return ncclSuccess;
fail:
  WARN("%s on %s failed: %s", step, name, strerror(errno));
  close(fd);
  return ncclSystemError;
}

// Connected to ourselves (simultaneous open on a loopback ephemeral port)?
static int self_connected(int fd) {
  weft_sockaddr_t local, peer;
  socklen_t llen = sizeof(local), plen = sizeof(peer);
  memset(&local, 0, sizeof(local));
  memset(&peer, 0, sizeof(peer));
  if (getsockname(fd, &local.sa, &llen) != 0 || getpeername(fd, &peer.sa, &plen) != 0) return 0;
  return llen == plen && memcmp(&local, &peer, llen) == 0;
}

static int connect_retryable(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH;
}

static void sleep_ms(int ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// One non-blocking connect attempt: 0 connected, else the errno it failed
// with; -1 when the deadline passed while waiting, -2 after a WARNed error.
static int connect_once(int fd, const weft_sockaddr_t *addr, int64_t deadline) {
  if (connect(fd, &addr->sa, addr_len(addr)) == 0) return self_connected(fd) ? ECONNREFUSED : 0;
  int err = errno;
  if (err != EINPROGRESS && err != EINTR) return err;
  int r = wait_fd(fd, POLLOUT, deadline, "connect");
  if (r == 0) return -1;
  if (r < 0) return -2;
  socklen_t elen = sizeof(err);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0) err = errno;
  if (err == 0 && self_connected(fd)) err = ECONNREFUSED;
  return err;
}

// Binds s to the local address `from` (its port ignored) so the connection
// leaves from that interface's address; the port is left to connect(), so
// source ports stay per destination. 0 or an errno.
static int bind_source(int s, const weft_sockaddr_t *from) {
  weft_sockaddr_t local = *from;
  if (local.sa.sa_family == AF_INET) local.sin.sin_port = 0;
  else local.sin6.sin6_port = 0;
  int one = 1;
  setsockopt(s, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));  // old kernels: a port now
  return bind(s, &local.sa, addr_len(&local)) == 0 ? 0 : errno;
}

ncclResult_t weft_socket_connect(const weft_sockaddr_t *addr, int timeout_ms, int *fd) {
  return weft_socket_connect_from(NULL, addr, timeout_ms, fd);
}

ncclResult_t weft_socket_connect_from(const weft_sockaddr_t *from, const weft_sockaddr_t *addr, int timeout_ms,
                                      int *fd) {
  if (addr == NULL || fd == NULL) {
    WARN("weft_socket_connect: NULL %s", addr == NULL ? "address" : "fd pointer");
    return ncclInvalidArgument;
  }
  *fd = -1;
  char name[WEFT_ADDR_STRLEN];
  weft_socket_addr_str(addr, name, sizeof(name));
  if (addr_len(addr) == 0) {
    WARN("cannot connect to %s: not an IPv4 or IPv6 address", name);
    return ncclInvalidArgument;
  }
  if (from != NULL && from->sa.sa_family != addr->sa.sa_family) from = NULL;  // another family: the kernel's choice
  int64_t deadline = deadline_after(timeout_ms);
  int backoff = WEFT_CONNECT_BACKOFF_MIN_MS;
  int attempts = 0;
  for (;;) {
    int s = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0) {
      WARN("socket() for connecting to %s failed: %s", name, strerror(errno));
      return ncclSystemError;
    }
    int err = from != NULL ? bind_source(s, from) : 0;
    if (err != 0) {
      char src[WEFT_ADDR_STRLEN];
      WARN("cannot connect to %s from %s: bind: %s", name, weft_socket_addr_str(from, src, sizeof(src)), strerror(err));
      close(s);
      return ncclSystemError;
    }
    err = connect_once(s, addr, deadline);
    attempts++;
    if (err == 0) {
      if (set_blocking(s) != 0) {
        WARN("fcntl on the connection to %s failed: %s", name, strerror(errno));
        close(s);
        return ncclSystemError;
      }
      tune_connection(s);
      *fd = s;
      TRACE(WEFT_LOG_NET, "connected to %s (fd %d, %d attempts)", name, s, attempts);
      return ncclSuccess;
    }
    close(s);
    if (err == -2) return ncclSystemError;
    if (err == -1) {
      INFO(WEFT_LOG_NET, "connect to %s: no answer within %d ms", name, timeout_ms);
      return ncclInProgress;
    }
    if (!connect_retryable(err)) {
      WARN("connect to %s failed: %s", name, strerror(err));
      return ncclSystemError;
    }
    int left = ms_left(deadline);
    if (left == 0) {
      INFO(WEFT_LOG_NET, "connect to %s: %s after %d attempts in %d ms", name, strerror(err),
           attempts, timeout_ms);
      return ncclInProgress;
    }
    sleep_ms(left < 0 || left > backoff ? backoff : left);
    backoff = backoff * 2 > WEFT_CONNECT_BACKOFF_MAX_MS ? WEFT_CONNECT_BACKOFF_MAX_MS : backoff * 2;
  }
}

// accept(2) errors that concern only the connection being accepted.
static int accept_transient(int err) {
  return err == EINTR || err == EAGAIN || err == EWOULDBLOCK || err == ECONNABORTED ||
         err == EPROTO || err == ENETDOWN || err == ENOPROTOOPT || err == EHOSTDOWN ||
         err == ENONET || err == EHOSTUNREACH || err == EOPNOTSUPP || err == ENETUNREACH;
}

ncclResult_t weft_socket_accept(int listen_fd, int timeout_ms, int *fd, weft_sockaddr_t *peer) {
  if (fd == NULL) {
    WARN("weft_socket_accept: NULL fd pointer");
    return ncclInvalidArgument;
  }
  *fd = -1;
  int64_t deadline = deadline_after(timeout_ms);
  for (;;) {
    int r = wait_fd(listen_fd, POLLIN, deadline, "accept");
    if (r == 0) return ncclInProgress;
    if (r < 0) return ncclSystemError;
    weft_sockaddr_t from;
    socklen_t flen = sizeof(from);
    memset(&from, 0, sizeof(from));
    int s = accept4(listen_fd, &from.sa, &flen, SOCK_CLOEXEC);
    if (s >= 0) {
      tune_connection(s);
      if (peer != NULL) *peer = from;
      *fd = s;
      return ncclSuccess;
    }
    if (!accept_transient(errno)) {
      WARN("accept on fd %d failed: %s", listen_fd, strerror(errno));
      return ncclSystemError;
    }
  }
}

ncclResult_t weft_socket_accept_by(int listen_fd, int64_t end_ms, const char *who, int *fd, weft_sockaddr_t *peer) {
  for (;;) {
    int left = end_ms < 0 ? 1000 : (int)(end_ms - weft_now_ms());
    if (end_ms >= 0 && left <= 0) {
      WARN("%s: no connection arrived within WEFT_TIMEOUT=%lld s", who, (long long)weft_timeout_ms() / 1000);
      return ncclRemoteError;
    }
    ncclResult_t res = weft_socket_accept(listen_fd, left, fd, peer);
    if (res != ncclInProgress) return res;
  }
}

// ---- data -----------------------------------------------------------------

// The peer is gone: closed, reset, or silent past keepalive.
static int peer_gone(int err) { return err == EPIPE || err == ECONNRESET || err == ETIMEDOUT; }

ncclResult_t weft_socket_send(int fd, const void *buf, size_t len, int timeout_ms) {
  if (buf == NULL && len > 0) {
    WARN("weft_socket_send: NULL buffer for %zu bytes", len);
    return ncclInvalidArgument;
  }
  int64_t deadline = deadline_after(timeout_ms);
  size_t done = 0;
  while (done < len) {
    ssize_t n = send(fd, (const char *)buf + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += (size_t)n;
      continue;
    }
    int err = n == 0 ? EAGAIN : errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) {
      int r = wait_fd(fd, POLLOUT, deadline, "send");
      if (r == 0) return ncclInProgress;
      if (r < 0) return ncclSystemError;
      continue;
    }
    if (peer_gone(err)) {
      INFO(WEFT_LOG_NET, "send on fd %d: %s after %zu of %zu bytes", fd, strerror(err), done, len);
      return ncclRemoteError;
    }
    WARN("send of %zu bytes on fd %d failed: %s", len, fd, strerror(err));
    return ncclSystemError;
  }
  return ncclSuccess;
}

ncclResult_t weft_socket_recv(int fd, void *buf, size_t len, int timeout_ms) {
  if (buf == NULL && len > 0) {
    WARN("weft_socket_recv: NULL buffer for %zu bytes", len);
    return ncclInvalidArgument;
  }
  int64_t deadline = deadline_after(timeout_ms);
  size_t done = 0;
  while (done < len) {
    ssize_t n = recv(fd, (char *)buf + done, len - done, MSG_DONTWAIT);
    if (n > 0) {
      done += (size_t)n;
      continue;
    }
    if (n == 0) {
      INFO(WEFT_LOG_NET, "recv on fd %d: peer closed after %zu of %zu bytes", fd, done, len);
      return ncclRemoteError;
    }
    int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) {
      int r = wait_fd(fd, POLLIN, deadline, "recv");
      if (r == 0) return ncclInProgress;
      if (r < 0) return ncclSystemError;
      continue;
    }
    if (peer_gone(err)) {
      INFO(WEFT_LOG_NET, "recv on fd %d: %s after %zu of %zu bytes", fd, strerror(err), done, len);
      return ncclRemoteError;
    }
    WARN("recv of %zu bytes on fd %d failed: %s", len, fd, strerror(err));
    return ncclSystemError;
  }
  return ncclSuccess;
}

ncclResult_t weft_socket_recv_some(int fd, void *buf, size_t len, size_t *done) {
  if ((buf == NULL && len > 0) || done == NULL || *done > len) {
    WARN("weft_socket_recv_some: bad buffer (%zu bytes, %zu done)", len, done == NULL ? 0 : *done);
    return ncclInvalidArgument;
  }
  while (*done < len) {
    ssize_t n = recv(fd, (char *)buf + *done, len - *done, MSG_DONTWAIT);
    if (n > 0) {
      *done += (size_t)n;
      continue;
    }
    if (n == 0) {
      INFO(WEFT_LOG_NET, "recv on fd %d: peer closed after %zu of %zu bytes", fd, *done, len);
      return ncclRemoteError;
    }
    int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) break;
    if (peer_gone(err)) {
      INFO(WEFT_LOG_NET, "recv on fd %d: %s after %zu of %zu bytes", fd, strerror(err), *done, len);
      return ncclRemoteError;
    }
    WARN("recv of %zu bytes on fd %d failed: %s", len, fd, strerror(err));
    return ncclSystemError;
  }
  return ncclSuccess;
}

void weft_socket_close(int *fd) {
  if (fd == NULL || *fd < 0) return;
  close(*fd);
  *fd = -1;
}
