/*
 * weft_status_ras.c — weft-status's RAS client: the whole job's state from
 * the RAS thread of any of its processes, in NCCL's text protocol (the one
 * NVIDIA's ncclras speaks, src/ras/ras_client.c answers it).
 *
 *   weft-status --ras[=HOST:PORT] [--json] [--verbose] [--timeout S] [--monitor[=GROUPS]] [--for S]
 *
 * Connects (HOST:PORT defaults to NCCL_RAS_ADDR, else localhost:28028),
 * trades "CLIENT PROTOCOL 2" for "SERVER PROTOCOL", sets TIMEOUT and the
 * format, then prints the STATUS answer until the server closes, or with
 * --monitor the events, for S seconds with --for (default: until killed).
 * The job's processes of a host share the port; one that is stopped takes
 * connections it never answers, so a handshake unanswered within a second
 * is retried on a new connection, as ncclras does (for 30 s at most).
 */
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "weft_status_ras.h"

static int write_all(int fd, const char *s) {
  for (size_t len = strlen(s), done = 0; done < len;) {
    ssize_t k = send(fd, s + done, len - done, MSG_NOSIGNAL);
    if (k <= 0) return -1;
    done += (size_t)k;
  }
  return 0;
}

// One line of answer within ms (0 bytes: closed or silent).
static int read_line(int fd, char *buf, size_t len, int ms) {
  size_t n = 0;
  while (n + 1 < len) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, ms) <= 0) break;
    ssize_t k = recv(fd, buf + n, 1, 0);
    if (k <= 0) break;
    if (buf[n++] == '\n') break;
  }
  buf[n] = '\0';
  return (int)n;
}

static int connect_to(const char *hostport) {
  char host[256];
  snprintf(host, sizeof(host), "%s", hostport);
  char *colon = strrchr(host, ':');
  if (colon == NULL) {
    fprintf(stderr, "weft-status: '%s' is not HOST:PORT\n", hostport);
    return -1;
  }
  *colon = '\0';
  char *h = host;
  if (h[0] == '[' && colon[-1] == ']') h++, colon[-1] = '\0';
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
  if (getaddrinfo(h, colon + 1, &hints, &ai) != 0) {
    fprintf(stderr, "weft-status: cannot resolve %s\n", hostport);
    return -1;
  }
  int fd = -1;
  for (struct addrinfo *a = ai; a != NULL && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(ai);
  return fd;
}

// Connect and shake hands, retrying connections that reach a silent process.
static int open_session(const weft_ras_args_t *a) {
  char line[256];
  for (int tries = 0; tries < 30; tries++) {
    int fd = connect_to(a->addr);
    if (fd < 0) {
      fprintf(stderr, "weft-status: no RAS server at %s (is NCCL_RAS_ENABLE=0 or NCCL_RAS_ADDR different?)\n", a->addr);
      return -1;
    }
    if (write_all(fd, "CLIENT PROTOCOL 2\n") == 0 && read_line(fd, line, sizeof(line), 1000) > 0) {
      if (strncasecmp(line, "SERVER PROTOCOL ", 16) != 0) {
        fprintf(stderr, "weft-status: unexpected handshake answer: %s", line);
        close(fd);
        return -1;
      }
      return fd;
    }
    close(fd);  // a stopped process holds this connection: try another
  }
  fprintf(stderr, "weft-status: the RAS server at %s never answered\n", a->addr);
  return -1;
}

static int command_ok(int fd, const char *cmd) {
  char line[256];
  if (write_all(fd, cmd) != 0 || read_line(fd, line, sizeof(line), 5000) <= 0) return -1;
  if (strncmp(line, "OK", 2) != 0) {
    fprintf(stderr, "weft-status: '%.*s' was refused: %s", (int)strcspn(cmd, "\n"), cmd, line);
    return -1;
  }
  return 0;
}

int weft_status_ras(const weft_ras_args_t *a) {
  int fd = open_session(a);
  if (fd < 0) return 1;
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "TIMEOUT %d\n", a->timeout_s);
  int rc = command_ok(fd, cmd);
  snprintf(cmd, sizeof(cmd), "SET FORMAT %s\n", a->json ? "json" : "text");
  if (rc == 0) rc = command_ok(fd, cmd);
  if (a->monitor != NULL)
    snprintf(cmd, sizeof(cmd), "MONITOR%s%s\n", a->monitor[0] ? " " : "", a->monitor);
  else
    snprintf(cmd, sizeof(cmd), "%sSTATUS\n", a->verbose ? "VERBOSE " : "");
  if (rc == 0 && a->monitor != NULL)
    rc = command_ok(fd, cmd);
  else if (rc == 0)
    rc = write_all(fd, cmd);
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  // The answer ends when the server closes (STATUS); events come until --for runs out (MONITOR).
  int limit_ms = a->monitor != NULL ? (a->for_s > 0 ? a->for_s * 1000 : -1) : (a->timeout_s + 10) * 1000;
  char buf[4096];
  while (rc == 0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    int spent = (int)((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
    if (limit_ms >= 0 && spent >= limit_ms) {
      if (a->monitor == NULL) rc = -1, fprintf(stderr, "weft-status: the STATUS answer did not end in time\n");
      break;
    }
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, limit_ms >= 0 ? limit_ms - spent : -1) <= 0) continue;
    ssize_t k = recv(fd, buf, sizeof(buf), 0);
    if (k <= 0) break;
    fwrite(buf, 1, (size_t)k, stdout);
    fflush(stdout);
  }
  close(fd);
  return rc == 0 ? 0 : 1;
}
