/*
 * socket.h — TCP helpers for bootstrap (and later the socket transport).
 *
 * Every call retries EINTR/EAGAIN and honours a deadline; nothing here
 * blocks forever. Return codes: ncclSuccess; ncclInProgress when the deadline
 * passed with the socket still healthy (the caller decides what a timeout
 * means and names the culprit); ncclRemoteError when the peer closed or reset
 * the connection; ncclSystemError for any other failure (WARNed here);
 * ncclInvalidArgument for unparsable addresses (WARNed here).
 */
#ifndef WEFT_SOCKET_H
#define WEFT_SOCKET_H

#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>

#include "nccl.h"

typedef union {
  struct sockaddr sa;
  struct sockaddr_in sin;
  struct sockaddr_in6 sin6;
} weft_sockaddr_t;  // 28 bytes: fits in an ncclUniqueId

#define WEFT_ADDR_STRLEN 64

// "1.2.3.4:5", "[::1]:5", "host:5" (resolved with getaddrinfo) -> address.
ncclResult_t weft_socket_parse_addr(const char *text, weft_sockaddr_t *addr);
// "1.2.3.4:5" / "[::1]:5" into buf (at least WEFT_ADDR_STRLEN bytes); returns buf.
const char *weft_socket_addr_str(const weft_sockaddr_t *addr, char *buf, size_t len);

// Pick the local interface address for bootstrap traffic: NCCL_SOCKET_IFNAME
// ("eth,ib" prefixes, "^docker,lo" excluded prefixes, "=eth0" exact names)
// and NCCL_SOCKET_FAMILY (AF_INET/AF_INET6) honoured. With neither set, the
// first interface that is up and not loopback/docker/virbr, else loopback.
// The port of *addr is 0. ifname (may be NULL) receives the interface name.
ncclResult_t weft_socket_find_interface(weft_sockaddr_t *addr, char *ifname, size_t ifname_len);

// The interfaces the socket transport offers as devices, in NCCL's order,
// one address each (the first getifaddrs gives an interface: IPv4 before
// IPv6), port 0, at most max (NCCL: WEFT_SOCKET_MAX_IFS). Only running
// interfaces count; NCCL_SOCKET_FAMILY restricts the family; IPv6 loopback
// and link-local addresses are skipped. NCCL_SOCKET_IFNAME (when longer
// than one character) selects them; unset, the first of these rules that
// finds any decides: names starting "ib"; the one interface whose subnet
// holds NCCL_COMM_ID's address; every name but docker*, lo*, virbr*;
// docker*; lo*; virbr*. None found: a WARN naming the interfaces that are
// up, and ncclSystemError.
#define WEFT_SOCKET_MAX_IFS 16
typedef struct {
  char name[64];
  weft_sockaddr_t addr;
} weft_socket_iface_t;
ncclResult_t weft_socket_list_interfaces(weft_socket_iface_t *ifs, int max, int *n);

// Bind and listen on *addr (port 0 = any); on return *addr holds the bound
// address including the chosen port. SO_REUSEADDR is set.
ncclResult_t weft_socket_listen(weft_sockaddr_t *addr, int *listen_fd);

// Connect, retrying refused/unreachable connections with backoff until
// timeout_ms passes (ncclInProgress then). TCP_NODELAY and keepalive are set.
ncclResult_t weft_socket_connect(const weft_sockaddr_t *addr, int timeout_ms, int *fd);
// The same from the local address `from` (its port ignored; NULL, or another
// family than addr's: any), so that the connection leaves from that
// interface's address where routing follows the source (multi-rail hosts).
ncclResult_t weft_socket_connect_from(const weft_sockaddr_t *from, const weft_sockaddr_t *addr, int timeout_ms,
                                      int *fd);

// Accept one connection within timeout_ms (ncclInProgress and *fd = -1 on timeout).
ncclResult_t weft_socket_accept(int listen_fd, int timeout_ms, int *fd, weft_sockaddr_t *peer);
// Accept one connection before end_ms (weft_now_ms; < 0: no deadline); past
// it, a WARN naming `who` and WEFT_TIMEOUT, and ncclRemoteError.
ncclResult_t weft_socket_accept_by(int listen_fd, int64_t end_ms, const char *who, int *fd, weft_sockaddr_t *peer);

// Send / receive exactly len bytes within timeout_ms (timeout_ms < 0: no deadline).
ncclResult_t weft_socket_send(int fd, const void *buf, size_t len, int timeout_ms);
ncclResult_t weft_socket_recv(int fd, void *buf, size_t len, int timeout_ms);
// Take what has already arrived, never waiting: up to len - *done bytes into
// buf + *done, advancing *done (by 0 when nothing is there). For loops that
// poll many connections and must not stall on one that is slow to speak.
ncclResult_t weft_socket_recv_some(int fd, void *buf, size_t len, size_t *done);

void weft_socket_close(int *fd);  // closes and sets *fd = -1; no-op for -1

#endif
