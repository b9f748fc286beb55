/*
 * bootstrap.c — the authenticated TCP ring used during set-up (see
 * bootstrap.h). Each connection opens with a hello carrying the job's secret
 * and the sender's rank; a connection that fails that check is logged and
 * dropped, and the rank keeps waiting for the real neighbour until
 * WEFT_TIMEOUT, then names it.
 */
#include "bootstrap.h"

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

// Accept connections until the expected neighbour shows up with the secret.
static ncclResult_t accept_prev(weft_bootstrap_t *bs, int listen_fd, int prev) {
  int64_t timeout = weft_timeout_ms();
  int64_t deadline = timeout > 0 ? weft_now_ms() + timeout : INT64_MAX;
  for (;;) {
    int64_t left = deadline - weft_now_ms();
    if (left <= 0) {
      char a[WEFT_ADDR_STRLEN];
      WARN("rank %d: bootstrap timed out waiting for rank %d (%s) to connect", bs->rank, prev,
           weft_socket_addr_str(&bs->peers[prev].listen, a, sizeof(a)));
      return ncclRemoteError;
    }
    int fd = -1;
    weft_sockaddr_t from;
    ncclResult_t res = weft_socket_accept(listen_fd, (int)WEFT_MIN(left, 1000), &fd, &from);
    if (res == ncclInProgress || fd < 0) continue;
    WEFTCHECK(res);
    ring_hello_t h;
    if (weft_socket_recv(fd, &h, sizeof(h), 5000) == ncclSuccess && h.magic == WEFT_ID_MAGIC &&
        weft_consttime_eq(h.secret, bs->secret, WEFT_SECRET_BYTES) && h.rank == prev) {
      bs->recv_fd = fd;
      return ncclSuccess;
    }
    char a[WEFT_ADDR_STRLEN];
    WARN("rank %d: rejected a bootstrap connection from %s (not rank %d of this job)", bs->rank,
         weft_socket_addr_str(&from, a, sizeof(a)), prev);
    close(fd);
  }
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
