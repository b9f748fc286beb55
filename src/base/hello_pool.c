/*
 * hello_pool.c — reading several connections' hellos at once (see
 * hello_pool.h). One poll() over the listener and every pending
 * connection; each read takes only what has arrived.
 */
#include "hello_pool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checks.h"
#include "util.h"

ncclResult_t weft_hello_pool_init(weft_hello_pool_t *p, int listen_fd, int cap, size_t first, int64_t room_after_ms,
                                  const char *owner) {
  *p = (weft_hello_pool_t){
      .listen_fd = listen_fd, .cap = cap, .first = first, .room_after_ms = room_after_ms, .owner = owner};
  p->slot = calloc((size_t)cap, sizeof(*p->slot));
  p->pfd = calloc((size_t)cap + 1, sizeof(*p->pfd));
  if (p->slot == NULL || p->pfd == NULL) {
    weft_hello_pool_free(p);
    return ncclSystemError;
  }
  return ncclSuccess;
}

void weft_hello_pool_free(weft_hello_pool_t *p) {
  while (p->slot != NULL && p->n > 0) weft_hello_pool_drop(p, p->n - 1);
  free(p->slot);
  free(p->pfd);
  p->slot = NULL;
  p->pfd = NULL;
}

static void remove_slot(weft_hello_pool_t *p, int idx) {
  free(p->slot[idx].buf);
  p->slot[idx] = p->slot[--p->n];
  p->slot[p->n] = (weft_hello_t){.fd = -1};
}

int weft_hello_pool_take(weft_hello_pool_t *p, int idx) {
  int fd = p->slot[idx].fd;
  p->slot[idx].fd = -1;
  remove_slot(p, idx);
  return fd;
}

void weft_hello_pool_drop(weft_hello_pool_t *p, int idx) {
  if (p->slot[idx].fd >= 0) close(p->slot[idx].fd);
  p->slot[idx].fd = -1;
  remove_slot(p, idx);
}

int weft_hello_pool_extend(weft_hello_pool_t *p, int idx, size_t more) {
  weft_hello_t *h = &p->slot[idx];
  char *grown = realloc(h->buf, h->want + more);
  if (grown == NULL) return 0;
  h->buf = grown;
  h->want += more;
  return 1;
}

static int newcomer_waiting(int listen_fd) {
  struct pollfd x = {.fd = listen_fd, .events = POLLIN};
  return poll(&x, 1, 0) > 0 && (x.revents & POLLIN);
}

// With every slot taken and a newcomer waiting, drop the connection silent
// longest if that is at least room_after_ms; returns whether a slot is free.
static int make_room(weft_hello_pool_t *p) {
  if (p->n < p->cap) return 1;
  if (!newcomer_waiting(p->listen_fd)) return 0;
  int q = 0;
  for (int i = 1; i < p->n; i++)
    if (p->slot[i].heard < p->slot[q].heard) q = i;
  int64_t quiet = weft_now_ms() - p->slot[q].heard;
  if (quiet < p->room_after_ms) return 0;
  char who[WEFT_ADDR_STRLEN];
  WARN("%s: dropped a connection from %s, silent for %lld ms, to make room", p->owner,
       weft_socket_addr_str(&p->slot[q].from, who, sizeof(who)), (long long)quiet);
  weft_hello_pool_drop(p, q);
  return 1;
}

static int report(const weft_hello_pool_t *p, weft_hello_event_t *ev, int *idx) {
  for (int i = 0; i < p->n; i++) {
    const weft_hello_t *h = &p->slot[i];
    if (h->lost || h->got == h->want) {
      *ev = h->lost ? WEFT_HELLO_LOST : WEFT_HELLO_READY;
      *idx = i;
      return 1;
    }
  }
  return 0;
}

static void read_some(weft_hello_t *h) {
  size_t before = h->got;
  if (weft_socket_recv_some(h->fd, h->buf, h->want, &h->got) != ncclSuccess) h->lost = 1;
  if (h->got > before) h->heard = weft_now_ms();
}

static ncclResult_t accept_one(weft_hello_pool_t *p) {
  weft_hello_t *h = &p->slot[p->n];
  int fd = -1;
  weft_sockaddr_t from;
  ncclResult_t r = weft_socket_accept(p->listen_fd, 0, &fd, &from);
  if (r == ncclSystemError) return r;
  if (r != ncclSuccess || fd < 0) return ncclSuccess;  // gone again before we took it
  h->buf = malloc(p->first > 0 ? p->first : 1);
  if (h->buf == NULL) {
    WARN("%s: out of memory for a connection's hello", p->owner);
    close(fd);
    return ncclSuccess;
  }
  int64_t now = weft_now_ms();
  h->fd = fd;
  h->from = from;
  h->since = h->heard = now;
  h->got = 0;
  h->want = p->first;
  h->lost = 0;
  p->n++;
  return ncclSuccess;
}

ncclResult_t weft_hello_pool_poll(weft_hello_pool_t *p, int wait_ms, weft_hello_event_t *ev, int *idx) {
  *ev = WEFT_HELLO_IDLE;
  *idx = -1;
  if (report(p, ev, idx)) return ncclSuccess;
  // Newcomers wait in the listen backlog while every slot is busy.
  int room = make_room(p);
  p->pfd[0] = (struct pollfd){.fd = room ? p->listen_fd : -1, .events = POLLIN};
  for (int i = 0; i < p->n; i++) p->pfd[i + 1] = (struct pollfd){.fd = p->slot[i].fd, .events = POLLIN};
  int n = p->n;
  if (poll(p->pfd, (nfds_t)n + 1, wait_ms) < 0) {
    if (errno == EINTR) return ncclSuccess;
    WARN("%s: poll on pending connections failed: %s", p->owner, strerror(errno));
    return ncclSystemError;
  }
  for (int i = 0; i < n; i++)
    if (p->pfd[i + 1].revents != 0) read_some(&p->slot[i]);
  if ((p->pfd[0].revents & POLLIN) && p->n < p->cap) WEFTCHECK(accept_one(p));
  report(p, ev, idx);
  return ncclSuccess;
}
