/*
 * fuzz_common.h — small helpers shared by the fuzz targets: loopback
 * sockets the harness plays a (hostile) peer with, and the process setup
 * every target needs (short timeouts, loopback interface, quiet logs).
 *
 * The harness's own sockets never go through the library's socket code, so a
 * bug there cannot hide itself. Everything is bounded: connects are to
 * loopback, reads poll with a deadline.
 */
#ifndef WEFT_FUZZ_COMMON_H
#define WEFT_FUZZ_COMMON_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

// Environment every target runs with: waits bounded by 1 s, sockets on
// loopback, log lines (if a seed turns them on) away from the terminal.
// WEFT_FUZZ_DEBUG=1 keeps NCCL_DEBUG and stdout, to watch one input run.
static inline void fuzz_setup_process(void) {
  setenv("WEFT_TIMEOUT", "1", 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  unsetenv("NCCL_COMM_ID");
  unsetenv("NCCL_DEBUG_FILE");
  if (getenv("WEFT_FUZZ_DEBUG") != NULL) return;
  unsetenv("NCCL_DEBUG");
  if (freopen("/dev/null", "w", stdout) == NULL) perror("freopen /dev/null");
}

// A listening socket on 127.0.0.1 with a kernel-chosen port; -1 on failure.
static inline int fuzz_listen(struct sockaddr_in *addr) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  memset(addr, 0, sizeof(*addr));
  addr->sin_family = AF_INET;
  addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(*addr);
  if (bind(fd, (struct sockaddr *)addr, len) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, (struct sockaddr *)addr, &len) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// One blocking connect attempt to a loopback address; -1 when refused.
static inline int fuzz_connect(const struct sockaddr_in *addr) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Writes all of buf (loopback buffers hold the few KiB the targets send);
// 0 on success.
static inline int fuzz_send_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static inline int64_t fuzz_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

// Reads and discards from every fd until each one reaches EOF (or an error),
// or until timeout_ms passes. Returns the number still open at the end.
static inline int fuzz_drain(const int *fds, int n, int timeout_ms) {
  struct pollfd p[64];
  int open = 0;
  for (int i = 0; i < n && i < 64; i++) {
    p[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
    if (fds[i] < 0) p[i].fd = -1;
    else open++;
  }
  int64_t deadline = fuzz_now_ms() + timeout_ms;
  while (open > 0) {
    int64_t left = deadline - fuzz_now_ms();
    if (left <= 0) break;
    if (poll(p, (nfds_t)(n < 64 ? n : 64), (int)left) < 0 && errno != EINTR) break;
    for (int i = 0; i < n && i < 64; i++) {
      if (p[i].fd < 0 || p[i].revents == 0) continue;
      char sink[4096];
      ssize_t r = recv(p[i].fd, sink, sizeof(sink), MSG_DONTWAIT);
      if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
        p[i].fd = -1;
        open--;
      }
    }
  }
  return open;
}

#endif
