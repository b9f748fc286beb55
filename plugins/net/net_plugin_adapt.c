/*
 * net_plugin_adapt.c — an NCCL net plugin seen as a weft_net_t.
 *
 * weft's network interface (transports/net/net.h) asks for a little more than
 * the plugin ABI gives; the adapter makes up the difference:
 *  - tags: every weft message travels as two plugin messages on the same
 *    communicator, a 16-byte header (magic, tag, size) and the payload, so
 *    irecv can report the tag; both are posted at once, in order, so
 *    receives stay pipelined;
 *  - hello: connect returns a communicator at once and sends the hello as
 *    its first message (header magic HELLO) when the plugin's connect
 *    completes; accept hands out a communicator only once its hello came;
 *    connections still introducing themselves are progressed by every
 *    connect/accept call of the process, so two ranks accepting each other
 *    cannot wait on each other;
 *  - memory registration: the buffers given to isend/irecv are registered
 *    (regMr, host memory) on first use and cached per communicator, as
 *    weft's slot buffers live as long as their connection; when the cache
 *    is full, a registration no posted message uses is replaced;
 *  - limits: at most NCCL_NET_MAX_REQUESTS plugin requests are outstanding
 *    per communicator (NCCL_NET_MAX_REQUESTS_V6 for a v6 plugin), and a
 *    request the plugin declines (NULL) is posted again later, in order;
 *  - orderly close: close_send sends a goodbye header after the last
 *    message, so the receiver tells an orderly end from a failure (plugins
 *    have no such notion) and leaves its open receives alone;
 *  - poll_fd is -1 (the proxy polls), abort is close without goodbye, and
 *    held receives (hold_large) are not offered.
 * A communicator's calls are serialised by its mutex (the proxy thread
 * tests while another communicator's set-up may progress its hello).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checks.h"
#include "env.h"
#include "net_plugin.h"
#include "util.h"

#define MSG_MAGIC 0x4d4e4657u    // "WFNM"
#define HELLO_MAGIC 0x484e4657u  // "WFNH"
#define BYE_MAGIC 0x424e4657u    // "WFNB"
#define MAX_REQS 256             // weft requests outstanding per communicator
#define MAX_MRS 128              // cached registrations per communicator
#define HELLO_MAX 256
#define MAX_CONNECTING 1024
#define CLOSE_FLUSH_MS 2000

typedef struct {
  uint32_t magic, tag;
  uint64_t size;
} hdr_t;

typedef struct acomm acomm_t;

enum { KIND_DATA, KIND_HELLO, KIND_BYE };

typedef struct {
  acomm_t *comm;
  int used, kind;     // hello and bye: the adapter's own messages
  char *data;
  size_t size;        // send: the message; receive: the buffer's capacity
  uint32_t tag;
  int mr;             // the payload's registration (index in mrs), -1 before
  int posted, tested; // plugin requests posted / completed: header, payload
  void *preq[2];
  size_t got;         // receive: payload bytes the plugin reported
} areq_t;

typedef struct {
  char *base;
  size_t len;
  void *mh;
  int live, refs;  // refs: posted payloads using it; one without may be replaced
} mr_t;

struct acomm {
  int is_send, dev, failed;
  int peer_closed;                        // receive: the sender said goodbye
  pthread_mutex_t mu;
  void *pc;                               // the plugin's communicator (send: NULL while connecting)
  char handle[NCCL_NET_HANDLE_MAXSIZE];   // send: the peer's handle, which the plugin may use to keep state
  int64_t deadline_ms;                    // send: connecting must finish by then (0: never)
  hdr_t hdrs[MAX_REQS];                   // per request: its header, registered as one region
  void *hdr_mh;
  areq_t reqs[MAX_REQS];
  uint64_t head, post, tail;              // oldest unreported; next to post; next free
  int inflight;                           // plugin requests posted and not completed
  char hello[HELLO_MAX];
  mr_t mrs[MAX_MRS];
};

typedef struct {
  void *pl;        // the plugin's listen communicator
  acomm_t *cur;    // accepted by the plugin, its hello not complete yet
} alisten_t;

static const weft_plugin_ops_t *P;
static weft_plugin_props_t props0;

// Send communicators whose hello has not gone yet.
static pthread_mutex_t connecting_mu = PTHREAD_MUTEX_INITIALIZER;
static acomm_t *connecting[MAX_CONNECTING];
static int nconnecting;

static ncclResult_t fail(acomm_t *c, const char *what) {
  if (!c->failed)
    INFO(WEFT_LOG_NET, "net plugin %s: %s communicator failed: %s", P->name, c->is_send ? "send" : "receive", what);
  c->failed = 1;
  return ncclRemoteError;
}

// The registration covering [data, data + size) (its index in c->mrs, with
// a reference taken), made now if none does. When the cache is full, a
// registration no posted message uses is replaced (a slot buffer first
// registered for a short message, say).
static ncclResult_t reg(acomm_t *c, char *data, size_t size, int *index) {
  if (size == 0) size = 1;  // a zero-byte message still names its buffer
  int spare = -1;
  for (int i = 0; i < MAX_MRS; i++) {
    mr_t *m = &c->mrs[i];
    if (m->live && m->base <= data && data + size <= m->base + m->len) {
      m->refs++;
      *index = i;
      return ncclSuccess;
    }
    if (spare < 0 && !m->live) spare = i;
  }
  for (int i = 0; i < MAX_MRS && spare < 0; i++) {
    if (c->mrs[i].refs == 0) {
      P->dereg_mr(c->pc, c->mrs[i].mh);
      c->mrs[i].live = 0;
      spare = i;
    }
  }
  if (spare < 0) {
    WARN("net plugin %s: more than %d buffers in flight on one communicator", P->name, MAX_MRS);
    return fail(c, "registration cache full");
  }
  void *h = NULL;
  if (P->reg_mr(c->pc, data, size, &h) != ncclSuccess) {
    WARN("net plugin %s: regMr of %zu bytes at %p failed", P->name, size, (void *)data);
    return fail(c, "regMr failed");
  }
  c->mrs[spare] = (mr_t){.base = data, .len = size, .mh = h, .live = 1, .refs = 1};
  *index = spare;
  return ncclSuccess;
}

static void unref(acomm_t *c, areq_t *r) {
  if (r->mr >= 0) c->mrs[r->mr].refs--;
  r->mr = -1;
}

static void dereg_all(acomm_t *c) {
  for (int i = 0; i < MAX_MRS; i++)
    if (c->mrs[i].live) P->dereg_mr(c->pc, c->mrs[i].mh);
  memset(c->mrs, 0, sizeof(c->mrs));
  if (c->hdr_mh != NULL) P->dereg_mr(c->pc, c->hdr_mh);
  c->hdr_mh = NULL;
}

static areq_t *enqueue(acomm_t *c, char *data, size_t size, uint32_t tag, int kind) {
  if (c->tail - c->head >= MAX_REQS) {
    WARN("net plugin %s: more than %d requests outstanding on one connection", P->name, MAX_REQS);
    return NULL;
  }
  areq_t *r = &c->reqs[c->tail % MAX_REQS];
  memset(r, 0, sizeof(*r));
  *r = (areq_t){.comm = c, .used = 1, .kind = kind, .data = data, .size = size, .tag = tag, .mr = -1};
  c->tail++;
  return r;
}

// Post what is queued, in order, as far as the plugin takes it.
static ncclResult_t post_queued(acomm_t *c) {
  for (; c->post < c->tail; c->post++) {
    size_t k = c->post % MAX_REQS;
    areq_t *r = &c->reqs[k];
    if (r->posted == 0) {
      if (c->inflight >= P->max_requests) return ncclSuccess;
      if (c->is_send) {
        static const uint32_t magic[] = {MSG_MAGIC, HELLO_MAGIC, BYE_MAGIC};
        c->hdrs[k] = (hdr_t){.magic = magic[r->kind], .tag = r->tag, .size = r->size};
        if (P->isend(c->pc, &c->hdrs[k], sizeof(hdr_t), 0, c->hdr_mh, &r->preq[0]) != ncclSuccess)
          return fail(c, "isend failed");
      } else {
        if (P->irecv(c->pc, &c->hdrs[k], sizeof(hdr_t), 0, c->hdr_mh, &r->preq[0]) != ncclSuccess)
          return fail(c, "irecv failed");
      }
      if (r->preq[0] == NULL) return ncclSuccess;  // not now
      r->posted = 1;
      c->inflight++;
    }
    if (r->posted == 1) {
      if (c->inflight >= P->max_requests) return ncclSuccess;
      if (r->mr < 0) WEFTCHECK(reg(c, r->data, r->size, &r->mr));
      void *mh = c->mrs[r->mr].mh;
      ncclResult_t res = c->is_send ? P->isend(c->pc, r->data, r->size, 0, mh, &r->preq[1])
                                    : P->irecv(c->pc, r->data, r->size, 0, mh, &r->preq[1]);
      if (res != ncclSuccess) return fail(c, c->is_send ? "isend failed" : "irecv failed");
      if (r->preq[1] == NULL) return ncclSuccess;
      r->posted = 2;
      c->inflight++;
    }
  }
  return ncclSuccess;
}

// Test the posted plugin requests in order, up to the first not done.
static ncclResult_t test_posted(acomm_t *c) {
  for (uint64_t i = c->head; i < c->tail; i++) {
    areq_t *r = &c->reqs[i % MAX_REQS];
    if (!r->used) continue;
    while (r->tested < r->posted) {
      int done = 0;
      size_t size = 0;
      if (P->test(r->preq[r->tested], &done, &size) != ncclSuccess) return fail(c, "test failed");
      if (!done) return ncclSuccess;
      c->inflight--;
      if (r->tested == 0 && !c->is_send) {  // the header: what the payload will be
        const hdr_t *h = &c->hdrs[i % MAX_REQS];
        if (h->magic == BYE_MAGIC && r->kind == KIND_DATA) {  // an orderly end: nothing more comes
          c->peer_closed = 1;
          return ncclSuccess;
        }
        if (h->magic != (r->kind == KIND_HELLO ? HELLO_MAGIC : MSG_MAGIC))
          return fail(c, "a message without weft's header");
        if (h->size > r->size) {
          WARN("net plugin %s: a message of %" PRIu64 " bytes does not fit the %zu-byte receive", P->name, h->size,
               r->size);
          return fail(c, "message too long");
        }
      }
      if (r->tested == 1) r->got = size, unref(c, r);
      r->tested++;
    }
    if (r->tested < 2) return ncclSuccess;
    if (r->kind != KIND_DATA && c->is_send) r->used = 0;  // its own: nobody tests it
  }
  return ncclSuccess;
}

static void advance_head(acomm_t *c) {
  while (c->head < c->tail && !c->reqs[c->head % MAX_REQS].used) c->head++;
}

// Everything that can move on `c` now (its mutex held).
static ncclResult_t progress(acomm_t *c) {
  if (c->failed) return ncclRemoteError;
  if (c->peer_closed) return ncclSuccess;  // its open receives stay open: the peer is gone
  if (c->pc == NULL) {  // a send communicator still connecting
    if (P->connect(c->dev, c->handle, &c->pc) != ncclSuccess) return fail(c, "connect failed");
    if (c->pc == NULL) {
      if (c->deadline_ms > 0 && weft_now_ms() > c->deadline_ms) {
        WARN("net plugin %s: connect did not complete within WEFT_TIMEOUT", P->name);
        return fail(c, "connect timed out");
      }
      return ncclSuccess;
    }
    if (P->reg_mr(c->pc, c->hdrs, sizeof(c->hdrs), &c->hdr_mh) != ncclSuccess) return fail(c, "regMr failed");
  }
  WEFTCHECK(post_queued(c));
  WEFTCHECK(test_posted(c));
  advance_head(c);
  return ncclSuccess;
}

static int hello_sent(const acomm_t *c) { return c->pc != NULL && c->head > 0; }

// Progress every send communicator still introducing itself; drop those done.
static void progress_connecting(void) {
  pthread_mutex_lock(&connecting_mu);
  for (int i = 0; i < nconnecting;) {
    acomm_t *c = connecting[i];
    pthread_mutex_lock(&c->mu);
    (void)progress(c);  // a failure shows when the communicator is used
    int done = c->failed || hello_sent(c);
    pthread_mutex_unlock(&c->mu);
    if (done) connecting[i] = connecting[--nconnecting];
    else i++;
  }
  pthread_mutex_unlock(&connecting_mu);
}

static void forget_connecting(acomm_t *c) {
  pthread_mutex_lock(&connecting_mu);
  for (int i = 0; i < nconnecting; i++)
    if (connecting[i] == c) connecting[i] = connecting[--nconnecting];
  pthread_mutex_unlock(&connecting_mu);
}

static acomm_t *comm_new(int is_send) {
  acomm_t *c = calloc(1, sizeof(*c));
  if (c == NULL) return NULL;
  c->is_send = is_send;
  pthread_mutex_init(&c->mu, NULL);
  return c;
}

static void comm_free(acomm_t *c) {
  if (c->pc != NULL) {
    dereg_all(c);
    if (c->is_send) P->close_send(c->pc);
    else P->close_recv(c->pc);
  }
  pthread_mutex_destroy(&c->mu);
  free(c);
}

/* ---- weft_net_t ---- */

static ncclResult_t ad_init(void) {
  if (P->init(weft_net_plugin_log) != ncclSuccess) {
    WARN("net plugin %s: init failed", P->name);
    return ncclSystemError;
  }
  int ndev = 0;
  if (P->devices(&ndev) != ncclSuccess || ndev < 1) {
    WARN("net plugin %s: no network devices", P->name);
    return ncclSystemError;
  }
  WEFTCHECK(P->get_properties(0, &props0));
  if (!(props0.ptr_support & NCCL_PTR_HOST)) {
    WARN("net plugin %s: device %s cannot send from host memory", P->name, props0.name);
    return ncclSystemError;
  }
  INFO(WEFT_LOG_INIT | WEFT_LOG_NET, "net plugin %s (ABI v%d): %d device(s), using %s (%d Mbps)", P->name, P->version,
       ndev, props0.name, props0.speed);
  return ncclSuccess;
}

static ncclResult_t ad_devices(int *ndev) { return P->devices(ndev); }

static ncclResult_t ad_get_properties(int dev, weft_net_props_t *props) {
  weft_plugin_props_t q;
  WEFTCHECK(P->get_properties(dev, &q));
  memset(props, 0, sizeof(*props));
  snprintf(props->name, sizeof(props->name), "%s", q.name);
  snprintf(props->device, sizeof(props->device), "%s", q.name);  // matched to a topology by name
  snprintf(props->addr, sizeof(props->addr), "%.24s/%.32s", P->name, q.name);
  props->speed_mbps = q.speed;
  return ncclSuccess;
}

static ncclResult_t ad_listen(int dev, void *handle, void **listen_comm) {
  alisten_t *l = calloc(1, sizeof(*l));
  if (l == NULL) return ncclSystemError;
  memset(handle, 0, WEFT_NET_HANDLE_BYTES);
  if (P->listen(dev, handle, &l->pl) != ncclSuccess) {
    WARN("net plugin %s: listen on device %d failed", P->name, dev);
    free(l);
    return ncclSystemError;
  }
  *listen_comm = l;
  return ncclSuccess;
}

static ncclResult_t ad_connect(int dev, const void *handle, const void *hello, size_t hello_len, void **send_comm) {
  if (hello_len > HELLO_MAX) return ncclInvalidArgument;
  acomm_t *c = comm_new(1);
  if (c == NULL) return ncclSystemError;
  c->dev = dev;
  memcpy(c->handle, handle, sizeof(c->handle));
  memcpy(c->hello, hello, hello_len);
  int64_t tmo = weft_timeout_ms();
  c->deadline_ms = tmo > 0 ? weft_now_ms() + tmo : 0;
  enqueue(c, c->hello, hello_len, 0, KIND_HELLO);
  pthread_mutex_lock(&c->mu);
  ncclResult_t res = progress(c);
  pthread_mutex_unlock(&c->mu);
  if (res != ncclSuccess) {
    comm_free(c);
    return res;
  }
  pthread_mutex_lock(&connecting_mu);
  int room = nconnecting < MAX_CONNECTING;
  if (room) connecting[nconnecting++] = c;
  pthread_mutex_unlock(&connecting_mu);
  if (!room) {
    WARN("net plugin %s: more than %d connections being set up", P->name, MAX_CONNECTING);
    comm_free(c);
    return ncclSystemError;
  }
  *send_comm = c;  // usable now: messages queue behind the hello
  progress_connecting();
  return ncclSuccess;
}

static ncclResult_t ad_accept(void *listen_comm, void *hello, size_t hello_len, void **recv_comm) {
  alisten_t *l = listen_comm;
  *recv_comm = NULL;
  progress_connecting();
  if (l->cur == NULL) {
    void *pc = NULL;
    if (P->accept(l->pl, &pc) != ncclSuccess) {
      WARN("net plugin %s: accept failed", P->name);
      return ncclRemoteError;
    }
    if (pc == NULL) return ncclSuccess;
    acomm_t *c = comm_new(0);
    if (c == NULL) return ncclSystemError;
    c->pc = pc;
    l->cur = c;
    if (P->reg_mr(pc, c->hdrs, sizeof(c->hdrs), &c->hdr_mh) != ncclSuccess) {
      WARN("net plugin %s: regMr failed", P->name);
      comm_free(c);
      l->cur = NULL;
      return ncclSystemError;
    }
    enqueue(c, c->hello, HELLO_MAX, 0, KIND_HELLO);
  }
  acomm_t *c = l->cur;
  ncclResult_t res = progress(c);
  areq_t *r = &c->reqs[0];
  if (res == ncclSuccess && r->tested < 2) return ncclSuccess;  // its hello is on the way
  l->cur = NULL;
  if (res != ncclSuccess || r->got != hello_len) {
    INFO(WEFT_LOG_NET, "net plugin %s: dropped a connection that did not introduce itself", P->name);
    comm_free(c);
    return ncclSuccess;
  }
  memcpy(hello, c->hello, hello_len);
  r->used = 0;
  advance_head(c);
  *recv_comm = c;
  return ncclSuccess;
}

static ncclResult_t ad_isend(void *send_comm, const void *data, size_t size, uint32_t tag, void **request) {
  acomm_t *c = send_comm;
  if (size > props0.max_bytes) {
    WARN("net plugin %s: a %zu-byte message exceeds the device's %zu", P->name, size, props0.max_bytes);
    return ncclInvalidArgument;
  }
  pthread_mutex_lock(&c->mu);
  areq_t *r = enqueue(c, (char *)data, size, tag, KIND_DATA);
  ncclResult_t res = r == NULL ? ncclInternalError : progress(c);
  pthread_mutex_unlock(&c->mu);
  *request = r;
  return res;
}

static ncclResult_t ad_irecv(void *recv_comm, void *data, size_t size, void **request) {
  acomm_t *c = recv_comm;
  if (size > props0.max_bytes) size = props0.max_bytes;
  pthread_mutex_lock(&c->mu);
  areq_t *r = enqueue(c, data, size, 0, KIND_DATA);
  ncclResult_t res = r == NULL ? ncclInternalError : progress(c);
  pthread_mutex_unlock(&c->mu);
  *request = r;
  return res;
}

static ncclResult_t ad_test(void *request, int *done, size_t *size, uint32_t *tag) {
  areq_t *r = request;
  acomm_t *c = r->comm;
  *done = 0;
  pthread_mutex_lock(&c->mu);
  ncclResult_t res = r->used ? progress(c) : ncclInternalError;
  if (r->used && r->tested == 2) {  // complete, even if a later message failed
    res = ncclSuccess;
    *done = 1;
    if (size != NULL) *size = c->is_send ? r->size : r->got;
    if (tag != NULL) *tag = c->is_send ? r->tag : c->hdrs[r - c->reqs].tag;
    r->used = 0;
    advance_head(c);
  }
  pthread_mutex_unlock(&c->mu);
  return res;
}

static int ad_poll_fd(void *comm) {
  (void)comm;
  return -1;
}

// Orderly: what was posted goes first, then a goodbye (bounded), then the
// plugin closes; the receiver takes the goodbye for an orderly end.
static ncclResult_t ad_close_send(void *send_comm) {
  acomm_t *c = send_comm;
  if (c == NULL) return ncclSuccess;
  forget_connecting(c);
  enqueue(c, c->hello, 0, 0, KIND_BYE);
  int64_t end = weft_now_ms() + CLOSE_FLUSH_MS;
  while (progress(c) == ncclSuccess && c->head < c->tail && weft_now_ms() < end) {
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
  comm_free(c);
  return ncclSuccess;
}

static ncclResult_t ad_close_recv(void *recv_comm) {
  if (recv_comm != NULL) comm_free(recv_comm);
  return ncclSuccess;
}

static ncclResult_t ad_close_listen(void *listen_comm) {
  alisten_t *l = listen_comm;
  if (l == NULL) return ncclSuccess;
  if (l->cur != NULL) comm_free(l->cur);
  ncclResult_t res = P->close_listen(l->pl);
  free(l);
  return res;
}

// The ABI knows no abortive close: close without flushing.
static void ad_abort_comm(void *comm) {
  acomm_t *c = comm;
  if (c == NULL) return;
  if (c->is_send) forget_connecting(c);
  comm_free(c);
}

static weft_net_t adapter = {
    .init = ad_init,
    .devices = ad_devices,
    .get_properties = ad_get_properties,
    .listen = ad_listen,
    .connect = ad_connect,
    .accept = ad_accept,
    .isend = ad_isend,
    .irecv = ad_irecv,
    .test = ad_test,
    .poll_fd = ad_poll_fd,
    .close_send = ad_close_send,
    .close_recv = ad_close_recv,
    .close_listen = ad_close_listen,
    .abort_comm = ad_abort_comm,
    .hold_large = NULL,
    .held = NULL,
    .release = NULL,
};

const weft_net_t *weft_net_plugin_adapt(const weft_plugin_ops_t *ops) {
  P = ops;
  adapter.name = ops->name;
  return &adapter;
}
