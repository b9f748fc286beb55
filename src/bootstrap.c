/*
 * bootstrap.c — the authenticated TCP ring used during set-up (see
 * bootstrap.h). Each connection opens with a hello carrying the job's secret
 * and the sender's rank; a connection that fails that check is logged and
 * dropped, and the rank keeps waiting for the real neighbour until
 * WEFT_TIMEOUT, then names it. Hellos are read as they arrive, from several
 * connections at once: over a lossy link TCP may take seconds to deliver
 * one, and a silent stranger must not hold up the neighbour.
 */
#include "bootstrap.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checks.h"
#include "socket.h"
#include "util.h"

typedef struct {
  uint32_t magic;
  int32_t rank;
  uint8_t secret[WEFT_SECRET_BYTES];
} ring_hello_t;

typedef struct {
  uint32_t tag;
  uint32_t len;
} ring_header_t;

ncclResult_t weft_bootstrap_listen(weft_peer_info_t *info, int *listen_fd) {
  WEFTCHECK(weft_socket_find_interface(&info->listen, NULL, 0));
  return weft_socket_listen(&info->listen, listen_fd);
}

#define HELLO_SLOTS 8        // connections whose hello is read at once
#define ROOM_AFTER_MS 5000   // with every slot taken, one silent this long makes way

typedef struct {
  int fd;
  int64_t heard;  // accepted, or last bytes received (weft_now_ms)
  size_t got;
  ring_hello_t h;
  weft_sockaddr_t from;
} hello_slot_t;

static void slot_reject(weft_bootstrap_t *bs, hello_slot_t *s, const char *why) {
  char a[WEFT_ADDR_STRLEN];
  WARN("rank %d: rejected a bootstrap connection from %s (%s)", bs->rank,
       weft_socket_addr_str(&s->from, a, sizeof(a)), why);
  close(s->fd);
}

// Accept connections until the expected neighbour shows up with the secret.
static ncclResult_t accept_prev(weft_bootstrap_t *bs, int listen_fd, int prev) {
  int64_t timeout = weft_timeout_ms();
  int64_t deadline = timeout > 0 ? weft_now_ms() + timeout : INT64_MAX;
  hello_slot_t slot[HELLO_SLOTS];
  struct pollfd pfd[HELLO_SLOTS + 1];
  int n = 0;
  ncclResult_t res = ncclRemoteError;
  for (;;) {
    int64_t now = weft_now_ms(), left = deadline - now;
    if (left <= 0) {
      char a[WEFT_ADDR_STRLEN];
      WARN("rank %d: bootstrap timed out waiting for rank %d (%s) to connect", bs->rank, prev,
           weft_socket_addr_str(&bs->peers[prev].listen, a, sizeof(a)));
      break;
    }
    if (n == HELLO_SLOTS) {
      int q = 0;
      for (int i = 1; i < n; i++)
        if (slot[i].heard < slot[q].heard) q = i;
      if (now - slot[q].heard >= ROOM_AFTER_MS) {
        slot_reject(bs, &slot[q], "silent, and its slot was needed");
        slot[q] = slot[--n];
      }
    }
    // Newcomers wait in the listen backlog while every slot is busy.
    pfd[0] = (struct pollfd){.fd = n < HELLO_SLOTS ? listen_fd : -1, .events = POLLIN};
    for (int i = 0; i < n; i++) pfd[i + 1] = (struct pollfd){.fd = slot[i].fd, .events = POLLIN};
    if (poll(pfd, (nfds_t)n + 1, (int)WEFT_MIN(left, 1000)) < 0) {
      if (errno == EINTR) continue;
      WARN("rank %d: poll on the bootstrap listener failed: %s", bs->rank, strerror(errno));
      res = ncclSystemError;
      break;
    }
    for (int i = n - 1; i >= 0; i--) {
      if (pfd[i + 1].revents == 0) continue;
      hello_slot_t *s = &slot[i];
      size_t before = s->got;
      ncclResult_t r = weft_socket_recv_some(s->fd, &s->h, sizeof(s->h), &s->got);
      if (r == ncclSuccess && s->got < sizeof(s->h)) {
        if (s->got > before) s->heard = weft_now_ms();
        continue;
      }
      if (r == ncclSuccess && s->h.magic == WEFT_ID_MAGIC &&
          weft_consttime_eq(s->h.secret, bs->secret, WEFT_SECRET_BYTES) && s->h.rank == prev) {
        bs->recv_fd = s->fd;
        slot[i] = slot[--n];
        res = ncclSuccess;
        goto out;
      }
      char why[64] = "closed before its hello";
      if (r == ncclSuccess) snprintf(why, sizeof(why), "not rank %d of this job", prev);
      slot_reject(bs, s, why);
      slot[i] = slot[--n];
    }
    if (pfd[0].revents & POLLIN) {
      hello_slot_t *s = &slot[n];
      *s = (hello_slot_t){.fd = -1};
      ncclResult_t r = weft_socket_accept(listen_fd, 0, &s->fd, &s->from);
      if (r == ncclSystemError) {
        res = r;
        break;
      }
      if (r == ncclSuccess && s->fd >= 0) {
        s->heard = weft_now_ms();
        n++;
      }
    }
  }
out:
  for (int i = 0; i < n; i++) close(slot[i].fd);
  return res;
}

ncclResult_t weft_bootstrap_connect(weft_bootstrap_t *bs, int rank, int nranks, const uint8_t *secret,
                                    const weft_peer_info_t *peers, int *listen_fd) {
  ncclResult_t res = ncclSuccess;
  weft_bootstrap_reset(bs);
  bs->rank = rank;
  bs->nranks = nranks;
  memcpy(bs->secret, secret, WEFT_SECRET_BYTES);
  bs->peers = calloc((size_t)nranks, sizeof(*bs->peers));
  if (bs->peers == NULL) { res = ncclSystemError; goto out; }
  memcpy(bs->peers, peers, sizeof(*peers) * (size_t)nranks);
  if (nranks > 1) {
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    WEFTCHECKGOTO(weft_socket_connect(&peers[next].listen, (int)weft_timeout_ms(), &bs->send_fd), res, fail);
    ring_hello_t h = {.magic = WEFT_ID_MAGIC, .rank = rank};
    memcpy(h.secret, secret, WEFT_SECRET_BYTES);
    WEFTCHECKGOTO(weft_socket_send(bs->send_fd, &h, sizeof(h), 5000), res, fail);
    WEFTCHECKGOTO(accept_prev(bs, *listen_fd, prev), res, fail);
  }
  bs->listen_fd = *listen_fd;
  *listen_fd = -1;
  goto out;
fail:
  if (res == ncclInProgress) {
    WARN("rank %d: bootstrap could not connect to rank %d", rank, (rank + 1) % nranks);
    res = ncclRemoteError;
  }
  weft_bootstrap_close(bs);
out:
  weft_socket_close(listen_fd);
  return res;
}

static ncclResult_t ring_io(weft_bootstrap_t *bs, ncclResult_t r, int peer, const char *what) {
  if (r == ncclSuccess) return r;
  WARN("rank %d: bootstrap %s rank %d failed (%s)", bs->rank, what, peer,
       r == ncclInProgress ? "timed out" : r == ncclRemoteError ? "connection closed" : "socket error");
  return r == ncclInProgress ? ncclRemoteError : r;
}

ncclResult_t weft_bootstrap_allgather(weft_bootstrap_t *bs, void *data, size_t size) {
  int n = bs->nranks, next = (bs->rank + 1) % n, prev = (bs->rank + n - 1) % n;
  uint32_t tag = ++bs->tag;
  int timeout = (int)weft_timeout_ms();
  char *base = data;
  for (int step = 0; step < n - 1; step++) {
    int send_block = (bs->rank - step + n) % n, recv_block = (bs->rank - step - 1 + n) % n;
    ring_header_t h = {.tag = tag, .len = (uint32_t)size}, in;
    WEFTCHECK(ring_io(bs, weft_socket_send(bs->send_fd, &h, sizeof(h), timeout), next, "send to"));
    WEFTCHECK(ring_io(bs, weft_socket_send(bs->send_fd, base + (size_t)send_block * size, size, timeout), next,
                      "send to"));
    WEFTCHECK(ring_io(bs, weft_socket_recv(bs->recv_fd, &in, sizeof(in), timeout), prev, "receive from"));
    if (in.tag != tag || in.len != size) {
      WARN("rank %d: bootstrap out of step with rank %d (operation %u of %u bytes vs %u of %u)", bs->rank, prev,
           in.tag, in.len, tag, (unsigned)size);
      return ncclInvalidUsage;
    }
    WEFTCHECK(ring_io(bs, weft_socket_recv(bs->recv_fd, base + (size_t)recv_block * size, size, timeout), prev,
                      "receive from"));
  }
  return ncclSuccess;
}

ncclResult_t weft_bootstrap_barrier(weft_bootstrap_t *bs) {
  if (bs->nranks == 1) return ncclSuccess;
  int *flags = calloc((size_t)bs->nranks, sizeof(int));
  if (flags == NULL) return ncclSystemError;
  flags[bs->rank] = 1;
  ncclResult_t res = weft_bootstrap_allgather(bs, flags, sizeof(int));
  free(flags);
  return res;
}

void weft_bootstrap_reset(weft_bootstrap_t *bs) {
  memset(bs, 0, sizeof(*bs));
  bs->send_fd = bs->recv_fd = bs->listen_fd = -1;
}

void weft_bootstrap_close(weft_bootstrap_t *bs) {
  weft_socket_close(&bs->send_fd);
  weft_socket_close(&bs->recv_fd);
  weft_socket_close(&bs->listen_fd);
  free(bs->peers);
  bs->peers = NULL;
}
