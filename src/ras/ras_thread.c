/*
 * ras_thread.c — the RAS thread: one per process while it has a
 * communicator, asleep in poll() until a client, a peer or a communicator
 * wakes it.
 *
 * It listens twice: on NCCL_RAS_ADDR (default localhost:28028) for
 * clients, with SO_REUSEPORT so that every process of the job on a host
 * shares the port, as NCCL's do (the kernel hands each connection to one
 * of them; a client whose handshake goes unanswered, because it reached a
 * stopped process, retries), and on an ephemeral port of the bootstrap
 * interface for the other processes' queries. A STATUS starts a gathering
 * (ras_collect.c) that this loop drives; MONITOR clients get a gathering
 * every second and the events between two of them (ras_monitor.c).
 * Nothing here is on the data path: the ranks' own threads only publish
 * their state in their control segments, as they did without RAS.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "debug.h"
#include "env.h"
#include "ras_client.h"
#include "ras_internal.h"
#include "util.h"

#define MAX_POLL 256
#define MONITOR_EVERY_NS 1000000000LL

static pthread_mutex_t life = PTHREAD_MUTEX_INITIALIZER;  // start, stop, the count; never taken by the thread
static int holders;                                       // communicators joined (or joining)
static int running;
static pthread_t thread;
static int wake_fd = -1, client_fd = -1, peer_fd = -1;
static _Atomic int stopping;
static weft_ras_peer_t self;

const weft_ras_peer_t *weft_ras_self(void) { return &self; }

void weft_ras_wake(void) {
  uint64_t one = 1;
  if (wake_fd >= 0 && write(wake_fd, &one, sizeof(one)) < 0) {
    // the counter is full: the thread is awake anyway
  }
}

// NCCL_RAS_ADDR, shared with the host's other processes of the job.
static int listen_clients(void) {
  const char *text = weft_env_NCCL_RAS_ADDR();
  weft_sockaddr_t a;
  if (weft_socket_parse_addr(text, &a) != ncclSuccess) {
    WARN("RAS: NCCL_RAS_ADDR=%s is not host:port; no client socket", text);
    return -1;
  }
  int fd = socket(a.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int one = 1;
  socklen_t len = a.sa.sa_family == AF_INET6 ? sizeof(a.sin6) : sizeof(a.sin);
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0 || bind(fd, &a.sa, len) != 0 ||
      listen(fd, 64) != 0) {
    INFO(WEFT_LOG_RAS | WEFT_LOG_INIT, "RAS: no client socket at %s: %s", text, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  INFO(WEFT_LOG_RAS | WEFT_LOG_INIT, "RAS client socket at %s", text);
  return fd;
}

static void drop(weft_ras_client_t **list, weft_ras_client_t *c) {
  for (weft_ras_client_t **p = list; *p != NULL; p = &(*p)->next)
    if (*p == c) {
      *p = c->next;
      break;
    }
  close(c->fd);
  free(c);
}

static void accept_client(weft_ras_client_t **list) {
  int fd = accept4(client_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) return;
  weft_ras_client_t *c = calloc(1, sizeof(*c));
  if (c == NULL) {
    close(fd);
    return;
  }
  c->fd = fd;
  c->timeout_s = WEFT_RAS_DEFAULT_TIMEOUT_S;
  c->next = *list;
  *list = c;
}

// A gathering ended: answer the STATUS clients, tell the monitors.
static void deliver(weft_ras_client_t **list, weft_ras_job_t *job, weft_ras_seen_t **seen) {
  weft_ras_view_t v;
  if (weft_ras_view_build(job, &v) != 0) return;
  weft_ras_out_t text = {0}, json = {0};
  int monitors = 0;
  for (weft_ras_client_t *c = *list; c != NULL; c = c->next) monitors += c->monitor != 0;
  if (monitors)
    weft_ras_monitor_events(seen, &v, &text, &json);
  else
    weft_ras_monitor_forget(seen);  // a later MONITOR starts from a fresh baseline
  for (weft_ras_client_t *c = *list, *next; c != NULL; c = next) {
    next = c->next;
    if (c->wants_status) {
      weft_ras_client_answer(c, &v);
      drop(list, c);
    } else if ((c->monitor & 1) && (c->json ? json.len : text.len) > 0 &&
               weft_ras_client_send(c, c->json ? json.s : text.s, c->json ? json.len : text.len) != 0) {
      drop(list, c);
    }
  }
  free(text.s);
  free(json.s);
  weft_ras_view_free(&v);
}

static void *ras_main(void *arg) {
  (void)arg;
  weft_ras_client_t *clients = NULL;
  weft_ras_job_t *job = NULL;
  weft_ras_seen_t *seen = NULL;
  int64_t next_monitor = 0;
  struct pollfd pfd[MAX_POLL];
  while (!atomic_load(&stopping)) {
    int n = 0, monitors = 0, asked = 0;
    pfd[n++] = (struct pollfd){.fd = wake_fd, .events = POLLIN};
    pfd[n++] = (struct pollfd){.fd = peer_fd, .events = POLLIN};
    pfd[n++] = (struct pollfd){.fd = client_fd, .events = POLLIN};  // -1 is ignored by poll
    for (weft_ras_client_t *c = clients; c != NULL && n < MAX_POLL / 2; c = c->next) {
      pfd[n++] = (struct pollfd){.fd = c->fd, .events = c->wants_status ? 0 : POLLIN};
      monitors += c->monitor != 0;
      asked += c->wants_status;
    }
    int first_job = n;
    if (job != NULL) n += weft_ras_job_pollfds(job, pfd + n, MAX_POLL - n);
    int64_t now = weft_now_ns(), wait_ms = -1;
    if (job != NULL)
      wait_ms = n > first_job ? 50 : 0;  // no socket left to wait on: finish it now
    else if (monitors)
      wait_ms = next_monitor > now ? (next_monitor - now) / 1000000 + 1 : 0;
    if (poll(pfd, (nfds_t)n, (int)wait_ms) < 0 && errno != EINTR) break;
    if (pfd[0].revents & POLLIN) {
      uint64_t v;
      if (read(wake_fd, &v, sizeof(v)) > 0 && monitors) next_monitor = 0;  // a communicator came or went
    }
    if (pfd[1].revents & POLLIN) {
      int fd = accept4(peer_fd, NULL, NULL, SOCK_CLOEXEC);
      if (fd >= 0) {
        weft_ras_answer_peer(fd);
        close(fd);
      }
    }
    if (pfd[2].revents & POLLIN) accept_client(&clients);
    for (int k = 3; k < first_job; k++) {
      if (pfd[k].revents == 0) continue;
      for (weft_ras_client_t *c = clients; c != NULL; c = c->next)
        if (c->fd == pfd[k].fd) {
          int was_asked = c->wants_status;
          if (weft_ras_client_read(c) != 0)
            drop(&clients, c);
          else
            asked += c->wants_status && !was_asked;
          break;
        }
    }
    if (job == NULL && (asked || (monitors && weft_now_ns() >= next_monitor))) {
      int timeout = -1;  // the longest TIMEOUT asked (0: no limit); a monitor's round: 1 s
      for (weft_ras_client_t *c = clients; c != NULL; c = c->next)
        if (c->wants_status && timeout != 0 && (c->timeout_s == 0 || c->timeout_s > timeout)) timeout = c->timeout_s;
      job = weft_ras_job_start(timeout < 0 ? 1 : timeout);
      if (monitors) next_monitor = weft_now_ns() + MONITOR_EVERY_NS;
      continue;  // poll its sockets
    }
    if (job != NULL && weft_ras_job_progress(job, pfd + first_job, n - first_job)) {
      deliver(&clients, job, &seen);
      weft_ras_job_free(job);
      job = NULL;
    }
  }
  weft_ras_job_free(job);
  weft_ras_monitor_forget(&seen);
  while (clients != NULL) drop(&clients, clients);
  return NULL;
}

static void close_all(void) {
  weft_socket_close(&wake_fd);
  weft_socket_close(&client_fd);
  weft_socket_close(&peer_fd);
}

static void start(void) {
  memset(&self, 0, sizeof(self));
  self.pid = (int32_t)getpid();
  weft_sockaddr_t a;
  memset(&a, 0, sizeof(a));
  snprintf(self.host, sizeof(self.host), "unknown");
  if (weft_socket_find_interface(&a, NULL, 0) == ncclSuccess) {
    const void *ip = a.sa.sa_family == AF_INET6 ? (const void *)&a.sin6.sin6_addr : (const void *)&a.sin.sin_addr;
    inet_ntop(a.sa.sa_family, ip, self.host, sizeof(self.host));
  }
  if (weft_env_NCCL_RAS_ENABLE() == 0) return;
  wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0 || weft_socket_listen(&a, &peer_fd) != ncclSuccess) {
    INFO(WEFT_LOG_RAS | WEFT_LOG_INIT, "RAS: cannot listen for peers; RAS is off in this process");
    close_all();
    return;
  }
  client_fd = listen_clients();
  atomic_store(&stopping, 0);
  if (pthread_create(&thread, NULL, ras_main, NULL) != 0) {
    close_all();
    return;
  }
  self.ras = a;
  running = 1;
}

static void stop(void) {
  if (running) {
    atomic_store(&stopping, 1);
    weft_ras_wake();
    pthread_join(thread, NULL);
    running = 0;
  }
  close_all();
}

void weft_ras_thread_hold(weft_ras_peer_t *me) {
  pthread_mutex_lock(&life);
  if (holders++ == 0) start();
  *me = self;
  pthread_mutex_unlock(&life);
}

void weft_ras_thread_release(void) {
  pthread_mutex_lock(&life);
  if (holders > 0 && --holders == 0) stop();
  pthread_mutex_unlock(&life);
}

// A forked child has no RAS thread and none of its parent's communicators
// to report; its own first communicator starts afresh.
static void after_fork_child(void) {
  pthread_mutex_init(&life, NULL);
  pthread_mutex_init(&weft_ras_lock, NULL);
  running = 0;
  holders = 0;
  close_all();
  weft_ras_comms = NULL;  // the parent's entries stay allocated: they are the parent's
}

__attribute__((constructor)) static void ras_atfork(void) { pthread_atfork(NULL, NULL, after_fork_child); }
