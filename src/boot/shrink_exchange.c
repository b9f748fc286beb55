/*
 * shrink_exchange.c — the survivors of ncclCommShrink agree on who remains
 * (see shrink.h).
 *
 * The parent's bootstrap ring runs through the excluded ranks, which may be
 * dead, so it cannot carry this. Every rank's bootstrap listener stays open
 * while its communicator lives, at an address every rank learned at init:
 * each survivor connects to the lowest survivor's listener and sends a hello
 * (the parent's secret and id, its exclude list, its new bootstrap address).
 * The leader accepts until every survivor has reported, then answers each
 * with the member table, or with an error that names the difference.
 * Connections without the secret are logged and dropped, and so are stale
 * ones: a survivor that gave up on an earlier attempt before the leader
 * came left a hello whose sender has since closed its end. Hellos are read
 * as they arrive, several at once (hello_pool.c), so neither a slow link
 * nor a silent stranger holds up the others.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "checks.h"
#include "hello_pool.h"
#include "shrink.h"
#include "util.h"

enum { SHRINK_HELLO = 1, SHRINK_TABLE = 2, SHRINK_ERROR = 3 };

#define PENDING_SLOTS 64        // hellos read at once
#define ROOM_AFTER_MS 5000      // with every slot taken, one silent this long makes way
#define MISMATCH_GRACE_MS 2000  // after a mismatch, how long the leader waits for the rest to tell them

typedef struct {
  uint32_t magic;                     // WEFT_ID_MAGIC
  uint32_t type;                      // SHRINK_*
  uint8_t secret[WEFT_SECRET_BYTES];  // the parent's
  uint64_t comm_hash;                 // the parent's id_hash
  uint64_t child_hash;                // TABLE: the new communicator's id_hash
  int32_t rank;                       // HELLO: the sender's parent rank
  int32_t count;                      // HELLO: excluded ranks that follow; TABLE: members; ERROR: text bytes
  int32_t code;                       // ERROR: what every survivor returns
  weft_peer_info_t info;              // HELLO: the sender, with its new bootstrap listener
} shrink_msg_t;

static void msg_init(shrink_msg_t *m, const weft_shrink_plan_t *p, uint32_t type) {
  memset(m, 0, sizeof(*m));
  m->magic = WEFT_ID_MAGIC;
  m->type = type;
  memcpy(m->secret, p->parent->bs.secret, WEFT_SECRET_BYTES);
  m->comm_hash = p->parent->id_hash;
  m->child_hash = p->id_hash;
  m->rank = p->parent->rank;
}

static int msg_authentic(const shrink_msg_t *m, const weft_shrink_plan_t *p) {
  return m->magic == WEFT_ID_MAGIC && weft_consttime_eq(m->secret, p->parent->bs.secret, WEFT_SECRET_BYTES);
}

// "{1, 3}" (at most 16 ranks shown).
static void list_text(const int *r, int n, char *buf, size_t len) {
  size_t used = (size_t)snprintf(buf, len, "{");
  for (int i = 0; i < n && i < 16 && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, "%s%d", i ? ", " : "", r[i]);
  if (used < len) snprintf(buf + used, len - used, "%s}", n > 16 ? ", ..." : "");
}

static int index_of(const int *sorted, int n, int v) {
  int lo = 0, hi = n - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (sorted[mid] == v) return mid;
    if (sorted[mid] < v) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

static void send_error(int fd, const weft_shrink_plan_t *p, ncclResult_t code, const char *text) {
  shrink_msg_t m;
  msg_init(&m, p, SHRINK_ERROR);
  m.code = (int32_t)code;
  m.count = (int32_t)strlen(text);
  if (weft_socket_send(fd, &m, sizeof(m), 1000) == ncclSuccess) weft_socket_send(fd, text, (size_t)m.count, 1000);
}

/* ---------- the leader ---------- */

// The sender closed its end after its hello: it gave up (an earlier attempt).
static int sender_gone(int fd) {
  struct pollfd pfd = {.fd = fd, .events = POLLIN | POLLRDHUP};
  if (poll(&pfd, 1, 0) <= 0) return 0;
  if (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)) return 1;
  char c;
  return recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

typedef enum { HELLO_MORE, HELLO_DROP, HELLO_MEMBER, HELLO_MISMATCH } hello_kind_t;

// The whole hello of m->rank arrived, with its exclude list `theirs`.
static hello_kind_t judge_member(const weft_shrink_plan_t *p, const shrink_msg_t *m, const int *theirs, int fd,
                                 int *member, weft_peer_info_t *info, char *why, size_t why_len) {
  struct ncclComm *comm = p->parent;
  if (sender_gone(fd)) {
    INFO(WEFT_LOG_BOOTSTRAP, "ncclCommShrink: rank %d dropped a stale hello of rank %d", comm->rank, m->rank);
    return HELLO_DROP;
  }
  *member = index_of(p->surv, p->m, m->rank);
  if (*member >= 0 && m->count == p->nexcl && memcmp(theirs, p->excl, sizeof(int) * (size_t)m->count) == 0) {
    *info = m->info;
    info->rank = *member;
    return HELLO_MEMBER;
  }
  char a[128], b[128];
  list_text(theirs, m->count, a, sizeof(a));
  list_text(p->excl, p->nexcl, b, sizeof(b));
  snprintf(why, why_len, "the exclude lists differ: rank %d excludes %s, rank %d excludes %s", m->rank, a, comm->rank,
           b);
  return HELLO_MISMATCH;
}

// Judge what has arrived of connection idx's hello. HELLO_MORE: the header
// is good and the exclude list is asked for; HELLO_MEMBER: *member is the
// sender's new rank and *info its entry; HELLO_MISMATCH: why says what
// differs (*member >= 0 when the sender is one of ours); HELLO_DROP: refused.
static hello_kind_t judge_hello(const weft_shrink_plan_t *p, weft_hello_pool_t *pool, int idx, int *member,
                                weft_peer_info_t *info, char *why, size_t why_len) {
  struct ncclComm *comm = p->parent;
  const weft_hello_t *h = &pool->slot[idx];
  char who[WEFT_ADDR_STRLEN];
  weft_socket_addr_str(&h->from, who, sizeof(who));
  shrink_msg_t m;
  memcpy(&m, h->buf, sizeof(m));
  *member = -1;
  if (h->want == sizeof(m)) {
    if (!msg_authentic(&m, p) || m.type != SHRINK_HELLO || m.rank < 0 || m.rank >= comm->nranks || m.count < 0 ||
        m.count > comm->nranks) {
      WARN("ncclCommShrink: rank %d rejected a connection from %s (not a rank of this communicator)", comm->rank, who);
      return HELLO_DROP;
    }
    if (m.comm_hash != comm->id_hash) {
      WARN("ncclCommShrink: rank %d rejected a connection from %s (another communicator's)", comm->rank, who);
      send_error(h->fd, p, ncclInvalidUsage, "that hello was for another communicator");
      return HELLO_DROP;
    }
    if (m.count > 0) return weft_hello_pool_extend(pool, idx, sizeof(int) * (size_t)m.count) ? HELLO_MORE : HELLO_DROP;
  }
  int *theirs = malloc(sizeof(int) * ((size_t)m.count + 1));  // aligned copy of the exclude list
  if (theirs == NULL) return HELLO_DROP;
  memcpy(theirs, h->buf + sizeof(m), sizeof(int) * (size_t)m.count);
  hello_kind_t k = judge_member(p, &m, theirs, h->fd, member, info, why, why_len);
  free(theirs);
  return k;
}

static void missing_text(const weft_shrink_plan_t *p, const int *fds, char *buf, size_t len) {
  char mine[128];
  list_text(p->excl, p->nexcl, mine, sizeof(mine));
  size_t used = (size_t)snprintf(buf, len, "rank(s)");
  for (int i = 1; i < p->m && used < len; i++)
    if (fds[i] < 0) used += (size_t)snprintf(buf + used, len - used, " %d", p->surv[i]);
  if (used < len)
    snprintf(buf + used, len - used,
             " did not report within %lld s: dead, not calling ncclCommShrink, or excluding other ranks than %s",
             (long long)weft_timeout_ms() / 1000, mine);
}

// The lowest survivor collects every survivor's hello and answers them all.
static ncclResult_t lead(const weft_shrink_plan_t *p, weft_peer_info_t *members) {
  struct ncclComm *comm = p->parent;
  char owner[64];
  snprintf(owner, sizeof(owner), "ncclCommShrink: rank %d", comm->rank);
  weft_hello_pool_t pool;
  int *fds = malloc(sizeof(int) * (size_t)p->m);
  if (fds == NULL) return ncclSystemError;
  ncclResult_t res = weft_hello_pool_init(&pool, comm->bs.listen_fd, PENDING_SLOTS, sizeof(shrink_msg_t),
                                          ROOM_AFTER_MS, owner);
  if (res != ncclSuccess) {
    free(fds);
    return res;
  }
  for (int i = 0; i < p->m; i++) fds[i] = -1;
  members[0] = p->mine;
  members[0].rank = 0;
  ncclResult_t verdict = ncclSuccess;
  char why[512] = "";
  int64_t timeout = weft_timeout_ms();
  int64_t deadline = timeout > 0 ? weft_now_ms() + timeout : INT64_MAX;
  for (int got = 1; got < p->m;) {
    int64_t left = deadline - weft_now_ms();
    if (left <= 0) break;
    weft_hello_event_t ev;
    int i;
    if (weft_hello_pool_poll(&pool, (int)WEFT_MIN(left, 1000), &ev, &i) != ncclSuccess) {
      verdict = ncclSystemError;
      snprintf(why, sizeof(why), "rank %d could not accept connections", comm->rank);
      break;
    }
    if (ev == WEFT_HELLO_IDLE) continue;
    int idx = -1;
    weft_peer_info_t info;
    char diff[400];
    hello_kind_t k = HELLO_DROP;
    if (ev == WEFT_HELLO_READY) k = judge_hello(p, &pool, i, &idx, &info, diff, sizeof(diff));
    else
      INFO(WEFT_LOG_BOOTSTRAP, "ncclCommShrink: rank %d: a connection closed after %zu bytes of its hello", comm->rank,
           pool.slot[i].got);
    if (k == HELLO_MORE) continue;
    if (k == HELLO_MISMATCH) {
      if (verdict == ncclSuccess) {
        verdict = ncclInvalidUsage;
        snprintf(why, sizeof(why), "%s", diff);
        deadline = WEFT_MIN(deadline, weft_now_ms() + MISMATCH_GRACE_MS);  // tell the rest, briefly
      }
      if (idx < 0) {  // not one of ours: tell it now
        send_error(pool.slot[i].fd, p, ncclInvalidUsage, why);
        k = HELLO_DROP;
      }
    }
    if (k != HELLO_DROP && fds[idx] >= 0) {
      WARN("ncclCommShrink: rank %d connected twice; the second connection is dropped", p->surv[idx]);
      k = HELLO_DROP;
    }
    if (k == HELLO_DROP) {
      weft_hello_pool_drop(&pool, i);
      continue;
    }
    fds[idx] = weft_hello_pool_take(&pool, i);
    if (k == HELLO_MEMBER) members[idx] = info;
    got++;
  }
  weft_hello_pool_free(&pool);
  int complete = 1;
  for (int i = 1; i < p->m; i++) complete &= fds[i] >= 0;
  if (verdict == ncclSuccess && !complete) {
    verdict = ncclRemoteError;
    missing_text(p, fds, why, sizeof(why));
  }
  shrink_msg_t m;
  msg_init(&m, p, verdict == ncclSuccess ? SHRINK_TABLE : SHRINK_ERROR);
  m.count = p->m;
  for (int i = 1; i < p->m; i++) {
    if (fds[i] < 0) continue;
    if (verdict != ncclSuccess) send_error(fds[i], p, verdict, why);
    else if (weft_socket_send(fds[i], &m, sizeof(m), 5000) != ncclSuccess ||
             weft_socket_send(fds[i], members, sizeof(*members) * (size_t)p->m, 5000) != ncclSuccess)
      WARN("ncclCommShrink: rank %d could not send the member table to rank %d", comm->rank, p->surv[i]);
    weft_socket_close(&fds[i]);
  }
  if (verdict != ncclSuccess) WARN("ncclCommShrink: rank %d (the lowest remaining rank): %s", comm->rank, why);
  free(fds);
  return verdict;
}

/* ---------- every other survivor ---------- */

static ncclResult_t follow(const weft_shrink_plan_t *p, weft_peer_info_t *members, uint64_t *id_hash) {
  struct ncclComm *comm = p->parent;
  int leader = p->surv[0];
  char a[WEFT_ADDR_STRLEN];
  weft_socket_addr_str(&comm->bs.peers[leader].listen, a, sizeof(a));
  int64_t timeout = weft_timeout_ms();
  int fd = -1;
  ncclResult_t res = weft_socket_connect(&comm->bs.peers[leader].listen, (int)timeout, &fd);
  if (res != ncclSuccess) {
    WARN("ncclCommShrink: rank %d could not reach rank %d (the lowest remaining rank) at %s", comm->rank, leader, a);
    return res == ncclInProgress ? ncclRemoteError : res;
  }
  shrink_msg_t m;
  msg_init(&m, p, SHRINK_HELLO);
  m.count = p->nexcl;
  m.info = p->mine;
  res = weft_socket_send(fd, &m, sizeof(m), 5000);
  if (res == ncclSuccess && p->nexcl > 0) res = weft_socket_send(fd, p->excl, sizeof(int) * (size_t)p->nexcl, 5000);
  // The leader answers once everyone reported, within its own WEFT_TIMEOUT.
  if (res == ncclSuccess) res = weft_socket_recv(fd, &m, sizeof(m), timeout > 0 ? (int)(timeout + 5000) : -1);
  if (res != ncclSuccess) {
    WARN("ncclCommShrink: rank %d got no answer from rank %d (the lowest remaining rank) at %s (%s)", comm->rank,
         leader, a, res == ncclInProgress ? "timed out" : "connection lost");
    res = res == ncclInProgress ? ncclRemoteError : res;
  } else if (!msg_authentic(&m, p) || m.comm_hash != comm->id_hash) {
    WARN("ncclCommShrink: rank %d: the answer from rank %d is not for this shrink", comm->rank, leader);
    res = ncclRemoteError;
  } else if (m.type == SHRINK_ERROR) {
    char text[600] = {0};
    size_t len = m.count > 0 && (size_t)m.count < sizeof(text) ? (size_t)m.count : sizeof(text) - 1;
    weft_socket_recv(fd, text, len, 1000);
    WARN("ncclCommShrink: rank %d: rank %d (the lowest remaining rank) reports: %s", comm->rank, leader, text);
    res = m.code == ncclInvalidUsage ? ncclInvalidUsage : ncclRemoteError;
  } else if (m.type != SHRINK_TABLE || m.count != p->m) {
    WARN("ncclCommShrink: rank %d: malformed answer from rank %d", comm->rank, leader);
    res = ncclRemoteError;
  } else {
    *id_hash = m.child_hash;
    res = weft_socket_recv(fd, members, sizeof(*members) * (size_t)p->m, 5000);
    for (int i = 0; res == ncclSuccess && i < p->m; i++) {
      if (members[i].rank != i ||
          (i == p->me && memcmp(&members[i].listen, &p->mine.listen, sizeof(p->mine.listen)) != 0)) {
        WARN("ncclCommShrink: rank %d: the member table from rank %d is inconsistent at entry %d", comm->rank, leader,
             i);
        res = ncclRemoteError;
      }
    }
  }
  weft_socket_close(&fd);
  return res;
}

ncclResult_t weft_shrink_exchange(const weft_shrink_plan_t *p, weft_peer_info_t *members, uint64_t *id_hash) {
  *id_hash = p->id_hash;
  if (p->m == 1) {
    members[0] = p->mine;
    members[0].rank = 0;
    return ncclSuccess;
  }
  return p->me == 0 ? lead(p, members) : follow(p, members, id_hash);
}
