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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "hello_pool.h"
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

static void reject(weft_bootstrap_t *bs, weft_hello_pool_t *pool, int idx, const char *why) {
  char a[WEFT_ADDR_STRLEN];
  WARN("rank %d: rejected a bootstrap connection from %s (%s)", bs->rank,
       weft_socket_addr_str(&pool->slot[idx].from, a, sizeof(a)), why);
  weft_hello_pool_drop(pool, idx);
}

// Accept connections until the expected neighbour shows up with the secret.
static ncclResult_t accept_prev(weft_bootstrap_t *bs, int listen_fd, int prev) {
  int64_t timeout = weft_timeout_ms();
  int64_t deadline = timeout > 0 ? weft_now_ms() + timeout : INT64_MAX;
  char owner[48];
  snprintf(owner, sizeof(owner), "rank %d: bootstrap", bs->rank);
  weft_hello_pool_t pool;
  WEFTCHECK(weft_hello_pool_init(&pool, listen_fd, HELLO_SLOTS, sizeof(ring_hello_t), ROOM_AFTER_MS, owner));
  ncclResult_t res = ncclRemoteError;
  for (;;) {
    int64_t left = deadline - weft_now_ms();
    if (left <= 0) {
      char a[WEFT_ADDR_STRLEN];
      WARN("rank %d: bootstrap timed out waiting for rank %d (%s) to connect", bs->rank, prev,
           weft_socket_addr_str(&bs->peers[prev].listen, a, sizeof(a)));
      break;
    }
    weft_hello_event_t ev;
    int i;
    if ((res = weft_hello_pool_poll(&pool, (int)WEFT_MIN(left, 1000), &ev, &i)) != ncclSuccess) break;
    res = ncclRemoteError;
    if (ev == WEFT_HELLO_LOST) reject(bs, &pool, i, "closed before its hello");
    if (ev != WEFT_HELLO_READY) continue;
    ring_hello_t h;
    memcpy(&h, pool.slot[i].buf, sizeof(h));
    if (h.magic == WEFT_ID_MAGIC && weft_consttime_eq(h.secret, bs->secret, WEFT_SECRET_BYTES) && h.rank == prev) {
      bs->recv_fd = weft_hello_pool_take(&pool, i);
      res = ncclSuccess;
      break;
    }
    char why[64];
    snprintf(why, sizeof(why), "not rank %d of this job", prev);
    reject(bs, &pool, i, why);
  }
  weft_hello_pool_free(&pool);
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
