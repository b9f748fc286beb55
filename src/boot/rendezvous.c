/*
 * rendezvous.c — the root that introduces ranks to each other (see
 * rendezvous.h for the protocol). The root is a small poll() loop in a
 * detached thread: it authenticates each connection with the id's secret,
 * collects one entry per rank (or a batch from a sub-root), and answers with
 * the full table, or with an error naming the ranks that never came.
 *
 * The loop never waits on one connection: it takes whatever bytes of a
 * registration have arrived and comes back for the rest. Over a lossy link
 * TCP may need many seconds of retransmissions to deliver a hello, so a
 * connection is given until the root's own deadline (WEFT_TIMEOUT); one
 * that sends garbage or a wrong secret is dropped as soon as its header is
 * in, and a silent one only when its slot is needed for a newcomer.
 */
#include "rendezvous.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "checks.h"
#include "env.h"
#include "hello_pool.h"
#include "util.h"

enum { RDV_HELLO = 1, RDV_BATCH = 2, RDV_TABLE = 3, RDV_ERROR = 4 };

typedef struct {
  uint32_t magic;
  uint32_t type;
  uint8_t secret[WEFT_SECRET_BYTES];
  int32_t nranks;
  int32_t nid;
  int32_t root_index;
  int32_t count;            // entries that follow (HELLO 1, BATCH m, TABLE nranks), or ERROR text bytes
  weft_sockaddr_t root0;    // HELLO: where root 0 listens (sub-roots forward there)
  uint8_t root0_secret[WEFT_SECRET_BYTES];  // HELLO: root 0's secret, which sub-roots present to it
} rdv_msg_t;

/* ---------- ids ---------- */

ncclResult_t weft_id_decode(const ncclUniqueId *uid, weft_id_t *id) {
  memcpy(id, uid->internal, sizeof(*id));
  if (id->magic != WEFT_ID_MAGIC) {
    WARN("ncclUniqueId is not valid (magic 0x%x): it must come from ncclGetUniqueId", id->magic);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

void weft_id_encode(const weft_id_t *id, ncclUniqueId *uid) {
  memset(uid, 0, sizeof(*uid));
  memcpy(uid->internal, id, sizeof(*id));
}

_Static_assert(sizeof(weft_id_t) <= sizeof(ncclUniqueId), "unique id too large");

uint64_t weft_host_hash(void) {
  const char *over = weft_env_WEFT_HOSTID();
  char buf[512] = {0};
  if (over != NULL) {
    snprintf(buf, sizeof(buf), "%s", over);
  } else {
    gethostname(buf, 255);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f != NULL) {
      size_t len = strlen(buf);
      if (fgets(buf + len, (int)(sizeof(buf) - len), f) == NULL) buf[len] = 0;
      fclose(f);
    }
  }
  return weft_hash_bytes(buf, strlen(buf));
}

/* ---------- the root ---------- */

typedef struct {
  int fd;
  int is_subroot;
} client_t;

typedef struct {
  int listen_fd;
  weft_id_t id;
  int nranks, nid, root_index;   // learned from the first valid hello
  weft_sockaddr_t root0;
  uint8_t root0_secret[WEFT_SECRET_BYTES];
  weft_peer_info_t *entries;
  uint8_t *have;
  int expected, got;
  client_t *clients;
  int nclients;
} root_t;

// Which root collects rank r when nid roots share nranks ranks.
static int root_of(int r, int nranks, int nid) { return (int)((int64_t)r * nid / nranks); }

static int root_expected(int k, int nranks, int nid) {
  if (k == 0) return nranks;  // root 0 ends up with every entry
  int n = 0;
  for (int r = 0; r < nranks; r++) n += root_of(r, nranks, nid) == k;
  return n;
}

static void msg_init(rdv_msg_t *m, const weft_id_t *id, uint32_t type) {
  memset(m, 0, sizeof(*m));
  m->magic = WEFT_ID_MAGIC;
  m->type = type;
  memcpy(m->secret, id->secret, WEFT_SECRET_BYTES);
}

static int msg_authentic(const rdv_msg_t *m, const weft_id_t *id) {
  return m->magic == WEFT_ID_MAGIC && weft_consttime_eq(m->secret, id->secret, WEFT_SECRET_BYTES);
}

static void send_error(const root_t *rt, int fd, const char *text) {
  rdv_msg_t m;
  msg_init(&m, &rt->id, RDV_ERROR);
  m.count = (int32_t)strlen(text);
  if (weft_socket_send(fd, &m, sizeof(m), 1000) == ncclSuccess) weft_socket_send(fd, text, (size_t)m.count, 1000);
}

static void root_reply_error(root_t *rt, const char *text) {
  for (int i = 0; i < rt->nclients; i++) send_error(rt, rt->clients[i].fd, text);
}

static void root_reply_table(root_t *rt, const weft_peer_info_t *table) {
  rdv_msg_t m;
  msg_init(&m, &rt->id, RDV_TABLE);
  m.count = rt->nranks;
  for (int i = 0; i < rt->nclients; i++) {
    int fd = rt->clients[i].fd;
    if (weft_socket_send(fd, &m, sizeof(m), 5000) != ncclSuccess ||
        weft_socket_send(fd, table, sizeof(*table) * (size_t)rt->nranks, 5000) != ncclSuccess)
      WARN("bootstrap root: could not send the rank table to a client");
  }
}

// Check an authenticated header (the first one fixes the job's size); returns
// 0 if it is refused, with the reason (for the client too) in why.
static int root_check(root_t *rt, const rdv_msg_t *m, const char *who, char *why, size_t len) {
  snprintf(why, len, "%s sent a malformed registration", who);
  if (rt->nranks < 0) {
    if (m->nranks <= 0 || m->nid <= 0 || m->nid > m->nranks || m->root_index < 0 || m->root_index >= m->nid) {
      snprintf(why, len, "%s sent nranks=%d nid=%d root=%d", who, m->nranks, m->nid, m->root_index);
      return 0;
    }
    rt->nranks = m->nranks;
    rt->nid = m->nid;
    rt->root_index = m->root_index;
    rt->root0 = m->root0;
    memcpy(rt->root0_secret, m->root0_secret, WEFT_SECRET_BYTES);
    rt->expected = root_expected(rt->root_index, rt->nranks, rt->nid);
    rt->entries = calloc((size_t)rt->nranks, sizeof(*rt->entries));
    rt->have = calloc((size_t)rt->nranks, 1);
    rt->clients = calloc((size_t)rt->nranks, sizeof(*rt->clients));  // each brings at least one new rank
    if (rt->entries == NULL || rt->have == NULL || rt->clients == NULL) {
      snprintf(why, len, "bootstrap root out of memory for %d ranks", rt->nranks);
      return 0;
    }
  } else if (m->nranks != rt->nranks || m->nid != rt->nid) {
    snprintf(why, len, "%s says nranks=%d but the job has nranks=%d (the ranks disagree on the job's size)", who,
             m->nranks, rt->nranks);
    return 0;
  }
  return m->count > 0 && m->count <= rt->nranks && (m->type != RDV_HELLO || m->count == 1);
}

// Record the m->count entries in `in`; returns 0 if they are refused (why says why).
static int root_take(root_t *rt, const rdv_msg_t *m, const weft_peer_info_t *in, const char *who, char *why,
                     size_t len) {
  for (int i = 0; i < m->count; i++) {
    int r = in[i].rank, repeated = 0;
    for (int j = 0; j < i && !repeated; j++) repeated = in[j].rank == r;  // twice in this batch
    if (r < 0 || r >= rt->nranks || rt->have[r] || repeated) {
      snprintf(why, len, "%s registered rank %d of %d, which is %s", who, r, rt->nranks,
               (r < 0 || r >= rt->nranks) ? "out of range"
               : repeated                 ? "named twice in one batch"
                                          : "already taken by another process (two ranks with one number?)");
      return 0;
    }
  }
  for (int i = 0; i < m->count; i++) {
    rt->entries[in[i].rank] = in[i];
    rt->have[in[i].rank] = 1;
    rt->got++;
  }
  return 1;
}

static void root_missing(const root_t *rt, char *buf, size_t len) {
  size_t used = (size_t)snprintf(buf, len, "ranks never arrived:");
  int shown = 0;
  for (int r = 0; rt->have != NULL && r < rt->nranks && used < len; r++) {
    if (rt->have[r] || (rt->root_index != 0 && root_of(r, rt->nranks, rt->nid) != rt->root_index)) continue;
    if (shown++ < 32) used += (size_t)snprintf(buf + used, len - used, " %d", r);
  }
  if (shown > 32 && used < len) snprintf(buf + used, len - used, " ... (%d in all)", shown);
  if (rt->have == NULL) snprintf(buf, len, "no rank arrived");
}

// A sub-root hands its entries to root 0 and relays the table back.
static ncclResult_t root_forward(root_t *rt, weft_peer_info_t *table) {
  int fd = -1;
  ncclResult_t res = weft_socket_connect(&rt->root0, weft_timeout_ms(), &fd);
  if (res != ncclSuccess) return res == ncclInProgress ? ncclRemoteError : res;
  weft_id_t root0 = {.magic = WEFT_ID_MAGIC};  // root 0 knows its own secret, not ours
  memcpy(root0.secret, rt->root0_secret, WEFT_SECRET_BYTES);
  rdv_msg_t m;
  msg_init(&m, &root0, RDV_BATCH);
  m.nranks = rt->nranks;
  m.nid = rt->nid;
  m.root_index = 0;
  m.count = rt->got;
  weft_peer_info_t *mine = calloc((size_t)rt->got, sizeof(*mine));
  if (mine == NULL) { weft_socket_close(&fd); return ncclSystemError; }
  for (int r = 0, i = 0; r < rt->nranks; r++)
    if (rt->have[r]) mine[i++] = rt->entries[r];
  res = weft_socket_send(fd, &m, sizeof(m), 5000);
  if (res == ncclSuccess) res = weft_socket_send(fd, mine, sizeof(*mine) * (size_t)rt->got, 5000);
  free(mine);
  if (res == ncclSuccess) res = weft_socket_recv(fd, &m, sizeof(m), weft_timeout_ms());
  if (res == ncclSuccess && (!msg_authentic(&m, &root0) || m.type != RDV_TABLE || m.count != rt->nranks))
    res = ncclRemoteError;
  if (res == ncclSuccess) res = weft_socket_recv(fd, table, sizeof(*table) * (size_t)rt->nranks, 5000);
  weft_socket_close(&fd);
  return res;
}

static void root_finish(root_t *rt) {
  weft_peer_info_t *table = calloc((size_t)rt->nranks, sizeof(*table));
  if (table == NULL) { root_reply_error(rt, "bootstrap root out of memory"); return; }
  if (rt->root_index == 0) {
    memcpy(table, rt->entries, sizeof(*table) * (size_t)rt->nranks);
    root_reply_table(rt, table);
  } else if (root_forward(rt, table) == ncclSuccess) {
    root_reply_table(rt, table);
  } else {
    WARN("bootstrap root %d: could not reach root 0", rt->root_index);
    root_reply_error(rt, "bootstrap sub-root could not reach root 0");
  }
  free(table);
}

#define PENDING_SLOTS 64    // registrations read at once; registered clients are not counted
#define ROOM_AFTER_MS 5000  // a full root may drop a connection silent this long to admit a newcomer

static void refuse(root_t *rt, weft_hello_pool_t *pool, int idx, const char *why) {
  WARN("bootstrap root: %s; refused", why);
  send_error(rt, pool->slot[idx].fd, why);  // the refused rank says why, too
  weft_hello_pool_drop(pool, idx);
}

// A registration's header arrived: check it and ask for its entries.
static void root_header(root_t *rt, weft_hello_pool_t *pool, int idx, const char *who) {
  rdv_msg_t m;
  memcpy(&m, pool->slot[idx].buf, sizeof(m));
  char why[300];
  if (!msg_authentic(&m, &rt->id) || (m.type != RDV_HELLO && m.type != RDV_BATCH)) {
    WARN("bootstrap root: rejected a connection from %s (wrong secret or malformed message)", who);
    weft_hello_pool_drop(pool, idx);
  } else if (!root_check(rt, &m, who, why, sizeof(why))) {
    refuse(rt, pool, idx, why);
  } else if (!weft_hello_pool_extend(pool, idx, sizeof(weft_peer_info_t) * (size_t)m.count)) {
    refuse(rt, pool, idx, "bootstrap root out of memory");
  }
}

// A whole registration arrived: record its entries and keep its connection for the answer.
static void root_register(root_t *rt, weft_hello_pool_t *pool, int idx, const char *who) {
  const weft_hello_t *h = &pool->slot[idx];
  rdv_msg_t m;
  memcpy(&m, h->buf, sizeof(m));
  weft_peer_info_t *in = malloc(sizeof(*in) * (size_t)m.count);  // aligned: the body follows the header unaligned
  char why[300];
  if (in == NULL) {
    refuse(rt, pool, idx, "bootstrap root out of memory");
    return;
  }
  memcpy(in, h->buf + sizeof(m), sizeof(*in) * (size_t)m.count);
  int taken = root_take(rt, &m, in, who, why, sizeof(why));
  free(in);
  if (!taken) {
    refuse(rt, pool, idx, why);
    return;
  }
  INFO(WEFT_LOG_BOOTSTRAP, "bootstrap root: %s registered %d rank(s), %lld ms after connecting", who, m.count,
       (long long)(weft_now_ms() - h->since));
  rt->clients[rt->nclients++] = (client_t){.fd = weft_hello_pool_take(pool, idx), .is_subroot = m.type == RDV_BATCH};
}

// The root holds a connection per rank until it answers: let it open as many
// descriptors as the hard limit allows (NCCL's root does the same).
static void raise_fd_limit(void) {
  struct rlimit lim;
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= lim.rlim_max) return;
  rlim_t was = lim.rlim_cur;
  lim.rlim_cur = lim.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &lim) == 0)
    INFO(WEFT_LOG_BOOTSTRAP, "bootstrap root: open-file limit raised from %llu to %llu", (unsigned long long)was,
         (unsigned long long)lim.rlim_max);
}

static void *root_main(void *arg) {
  root_t *rt = arg;
  raise_fd_limit();
  weft_hello_pool_t pool;
  int64_t timeout = weft_timeout_ms();
  int64_t deadline = timeout > 0 ? weft_now_ms() + timeout : INT64_MAX;
  if (weft_hello_pool_init(&pool, rt->listen_fd, PENDING_SLOTS, sizeof(rdv_msg_t), ROOM_AFTER_MS, "bootstrap root") !=
      ncclSuccess)
    goto out;

  while (rt->got < rt->expected || rt->nranks < 0) {
    int64_t now = weft_now_ms();
    if (now >= deadline) {
      char missing[512];
      root_missing(rt, missing, sizeof(missing));
      WARN("bootstrap root: timed out after %lld s; %s", (long long)(timeout / 1000), missing);
      root_reply_error(rt, missing);
      break;
    }
    weft_hello_event_t ev;
    int i;
    if (weft_hello_pool_poll(&pool, (int)WEFT_MIN(deadline - now, 1000), &ev, &i) != ncclSuccess) {
      root_reply_error(rt, "bootstrap root could not accept connections");
      break;
    }
    if (ev == WEFT_HELLO_IDLE) continue;
    char who[WEFT_ADDR_STRLEN];
    weft_socket_addr_str(&pool.slot[i].from, who, sizeof(who));
    if (ev == WEFT_HELLO_LOST) {
      WARN("bootstrap root: rejected a connection from %s (closed after %zu bytes of its registration)", who,
           pool.slot[i].got);
      weft_hello_pool_drop(&pool, i);
    } else if (pool.slot[i].want == sizeof(rdv_msg_t)) {
      root_header(rt, &pool, i, who);
    } else {
      root_register(rt, &pool, i, who);
    }
  }
  if (rt->got == rt->expected && rt->nranks >= 0) root_finish(rt);
out:
  weft_hello_pool_free(&pool);
  for (int i = 0; i < rt->nclients; i++) close(rt->clients[i].fd);
  weft_socket_close(&rt->listen_fd);
  free(rt->clients);
  free(rt->entries);
  free(rt->have);
  free(rt);
  return NULL;
}

// Start a root listening on addr (port 0 picks one); addr returns the bound address.
static ncclResult_t root_start(const weft_id_t *id, weft_sockaddr_t *addr) {
  root_t *rt = calloc(1, sizeof(*rt));
  if (rt == NULL) return ncclSystemError;
  rt->id = *id;
  rt->nranks = -1;
  rt->listen_fd = -1;
  ncclResult_t res = weft_socket_listen(addr, &rt->listen_fd);
  if (res != ncclSuccess) { free(rt); return res; }
  pthread_t th;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int err = pthread_create(&th, &attr, root_main, rt);
  pthread_attr_destroy(&attr);
  if (err != 0) {
    WARN("bootstrap root: pthread_create failed: %s", strerror(err));
    weft_socket_close(&rt->listen_fd);
    free(rt);
    return ncclSystemError;
  }
  return ncclSuccess;
}

ncclResult_t weft_rendezvous_create(ncclUniqueId *uid) {
  const char *env = weft_env_NCCL_COMM_ID();
  if (env != NULL) return weft_rendezvous_id_from_addr(env, uid);
  return weft_rendezvous_create_root(uid);
}

ncclResult_t weft_rendezvous_create_root(ncclUniqueId *uid) {
  weft_id_t id = {.magic = WEFT_ID_MAGIC};
  if (getrandom(id.secret, sizeof(id.secret), 0) != (ssize_t)sizeof(id.secret)) {
    WARN("getrandom failed: %s", strerror(errno));
    return ncclSystemError;
  }
  WEFTCHECK(weft_socket_find_interface(&id.root, NULL, 0));
  WEFTCHECK(root_start(&id, &id.root));
  char a[WEFT_ADDR_STRLEN];
  INFO(WEFT_LOG_BOOTSTRAP, "bootstrap root listening on %s", weft_socket_addr_str(&id.root, a, sizeof(a)));
  weft_id_encode(&id, uid);
  return ncclSuccess;
}

ncclResult_t weft_rendezvous_id_from_addr(const char *hostport, ncclUniqueId *uid) {
  weft_id_t id = {.magic = WEFT_ID_MAGIC, .flags = WEFT_ID_HOSTED_BY_RANK0};
  WEFTCHECK(weft_socket_parse_addr(hostport, &id.root));
  // Everyone derives the same secret: from WEFT_COMM_SECRET if set, else the address.
  const char *secret = weft_env_WEFT_COMM_SECRET();
  char seed[512];
  snprintf(seed, sizeof(seed), "weft|%s|%s", secret != NULL ? secret : "", hostport);
  for (int i = 0; i < WEFT_SECRET_BYTES / 8; i++) {
    uint64_t h = weft_hash_bytes(seed, strlen(seed)) ^ (0x9e3779b97f4a7c15ull * (uint64_t)(i + 1));
    h = weft_hash_bytes(&h, sizeof(h));
    memcpy(id.secret + 8 * i, &h, 8);
  }
  weft_id_encode(&id, uid);
  return ncclSuccess;
}

/* ---------- a rank joining ---------- */

ncclResult_t weft_rendezvous_join(const weft_id_t *ids, int nid, int nranks, const weft_peer_info_t *me,
                                  weft_peer_info_t *table) {
  int k = root_of(me->rank, nranks, nid);
  const weft_id_t *id = &ids[k];
  weft_sockaddr_t root = id->root;
  // With NCCL_COMM_ID-style ids the first rank a root serves hosts it.
  if ((id->flags & WEFT_ID_HOSTED_BY_RANK0) && (k == 0 ? me->rank == 0 : root_of(me->rank - 1, nranks, nid) != k))
    WEFTCHECK(root_start(id, &root));

  char a[WEFT_ADDR_STRLEN];
  weft_socket_addr_str(&root, a, sizeof(a));
  int fd = -1;
  ncclResult_t res = weft_socket_connect(&root, weft_timeout_ms(), &fd);
  if (res != ncclSuccess) {
    WARN("rank %d: could not reach the bootstrap root at %s within %lld s", me->rank, a,
         (long long)weft_timeout_ms() / 1000);
    return res == ncclInProgress ? ncclRemoteError : res;
  }
  rdv_msg_t m;
  msg_init(&m, id, RDV_HELLO);
  m.nranks = nranks;
  m.nid = nid;
  m.root_index = k;
  m.count = 1;
  m.root0 = ids[0].root;
  memcpy(m.root0_secret, ids[0].secret, WEFT_SECRET_BYTES);
  res = weft_socket_send(fd, &m, sizeof(m), 5000);
  if (res == ncclSuccess) res = weft_socket_send(fd, me, sizeof(*me), 5000);
  // Wait for the table: the root answers once every rank arrived, or with an error.
  int64_t timeout = weft_timeout_ms();
  if (res == ncclSuccess) res = weft_socket_recv(fd, &m, sizeof(m), timeout > 0 ? (int)(timeout + 5000) : -1);
  if (res == ncclSuccess && !msg_authentic(&m, id)) {
    WARN("rank %d: the bootstrap root at %s answered without the job's secret", me->rank, a);
    res = ncclRemoteError;
  } else if (res == ncclSuccess && m.type == RDV_ERROR) {
    char text[600] = {0};
    size_t len = m.count > 0 && (size_t)m.count < sizeof(text) ? (size_t)m.count : sizeof(text) - 1;
    weft_socket_recv(fd, text, len, 1000);
    WARN("rank %d: bootstrap failed: %s", me->rank, text);
    res = ncclRemoteError;
  } else if (res == ncclSuccess && (m.type != RDV_TABLE || m.count != nranks)) {
    WARN("rank %d: malformed answer from the bootstrap root", me->rank);
    res = ncclRemoteError;
  } else if (res == ncclSuccess) {
    res = weft_socket_recv(fd, table, sizeof(*table) * (size_t)nranks, 5000);
  } else {
    WARN("rank %d: no answer from the bootstrap root at %s (%s)", me->rank, a,
         res == ncclInProgress ? "timed out" : "connection lost");
    if (res == ncclInProgress) res = ncclRemoteError;
  }
  weft_socket_close(&fd);
  for (int r = 0; res == ncclSuccess && r < nranks; r++) {
    if (table[r].rank != r) {
      WARN("rank %d: bootstrap table entry %d names rank %d", me->rank, r, table[r].rank);
      res = ncclInternalError;
    }
  }
  return res;
}
