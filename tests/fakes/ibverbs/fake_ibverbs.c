/*
 * fake_ibverbs.c — a stand-in libibverbs for test_net_ib.c, built as a
 * shared library the verbs backend dlopens instead of libibverbs.so.1, so
 * its data path runs on machines without RDMA. NOT a model of an HCA's
 * timing, only of the rules the backend must follow:
 *
 * One device "fake0", port 1 ACTIVE, InfiniBand (FAKE_IBV_ROCE=1: RoCE
 * with one IPv4-mapped GID). RC queue pairs in one process: a QP must be
 * in RTS to send; RDMA_WRITE_WITH_IMM checks the local lkey and range, the
 * remote rkey, range and REMOTE_WRITE access, that the target QP is
 * connected back to the sender and expects its PSN, and consumes one of the
 * target's posted receives (none: the write waits, as an RNR retry would).
 * Writes are delivered from poll_cq, in order per QP but in a pseudo-random
 * order across QPs. Completion channels are eventfds signalled only when
 * the CQ was armed. Anything the backend gets wrong fails the write with
 * an error completion (or the call with EINVAL), which the test sees.
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define MAX_OBJS 256
#define CQ_MAX 8192
#define RQ_MAX 4096

typedef struct {
  struct ibv_cq cq;
  struct ibv_wc wc[CQ_MAX];
  int head, tail;  // ring
  int armed;
} fcq_t;

typedef struct {
  struct ibv_qp qp;
  int access;
  uint32_t dest_qpn, rq_psn, sq_psn;
  uint64_t rq[RQ_MAX];  // wr_ids of posted receives
  int rq_head, rq_tail;
} fqp_t;

typedef struct pending {
  struct pending *next;
  fqp_t *src;
  uint64_t wr_id;
  int signaled;
  void *data;
  size_t len;
  uint64_t raddr;
  uint32_t rkey, imm;
} pending_t;

static struct ibv_device dev;
static struct ibv_device *dev_list[2];
static struct ibv_mr *mrs[MAX_OBJS];
static fqp_t *qps[MAX_OBJS];
static pending_t *pend_head;
static uint32_t next_qpn = 0x100, next_key = 0x1000;
static unsigned rnd = 1;

static int roce(void) {
  const char *e = getenv("FAKE_IBV_ROCE");
  return e && e[0] == '1';
}

struct ibv_device **ibv_get_device_list(int *n) {
  strcpy(dev.name, "fake0");
  dev_list[0] = &dev;
  dev_list[1] = NULL;
  if (n) *n = 1;
  return dev_list;
}

void ibv_free_device_list(struct ibv_device **list) { (void)list; }
const char *ibv_get_device_name(struct ibv_device *d) { return d->name; }

static int fake_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
static int fake_req_notify(struct ibv_cq *cq, int solicited);
static int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
static int fake_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);

struct ibv_context *ibv_open_device(struct ibv_device *d) {
  struct ibv_context *c = calloc(1, sizeof(*c));
  c->device = d;
  c->ops.poll_cq = fake_poll_cq;
  c->ops.req_notify_cq = fake_req_notify;
  c->ops.post_send = fake_post_send;
  c->ops.post_recv = fake_post_recv;
  return c;
}

int ibv_close_device(struct ibv_context *c) {
  free(c);
  return 0;
}

int ibv_query_device(struct ibv_context *c, struct ibv_device_attr *a) {
  (void)c;
  memset(a, 0, sizeof(*a));
  a->phys_port_cnt = 2;  // port 2 is DOWN
  return 0;
}

#undef ibv_query_port  // verbs.h routes callers through an inline wrapper; this is the exported symbol
int ibv_query_port(struct ibv_context *c, uint8_t port, struct _compat_ibv_port_attr *compat) {
  (void)c;
  struct ibv_port_attr *a = (struct ibv_port_attr *)compat;  // the leading fields are the same
  memset(a, 0, sizeof(*a));
  a->state = port == 1 ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
  a->link_layer = roce() ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
  a->lid = roce() ? 0 : 7;
  a->active_mtu = IBV_MTU_4096;
  a->gid_tbl_len = 2;
  return 0;
}

int ibv_query_gid(struct ibv_context *c, uint8_t port, int index, union ibv_gid *gid) {
  (void)c, (void)port;
  memset(gid, 0, sizeof(*gid));
  if (index == 0) gid->raw[0] = 0xfe, gid->raw[1] = 0x80, gid->raw[15] = 1;  // link-local
  if (index == 1) gid->raw[10] = gid->raw[11] = 0xff, gid->raw[12] = 10, gid->raw[15] = 1;  // ::ffff:10.0.0.1
  return index < 2 ? 0 : EINVAL;
}

struct ibv_pd *ibv_alloc_pd(struct ibv_context *c) {
  struct ibv_pd *pd = calloc(1, sizeof(*pd));
  pd->context = c;
  return pd;
}

int ibv_dealloc_pd(struct ibv_pd *pd) {
  free(pd);
  return 0;
}

#undef ibv_reg_mr
struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access) {
  for (int i = 0; i < MAX_OBJS; i++)
    if (mrs[i] == NULL) {
      struct ibv_mr *m = calloc(1, sizeof(*m));
      m->context = pd->context, m->pd = pd, m->addr = addr, m->length = len;
      m->lkey = next_key++, m->rkey = next_key++;
      m->handle = (uint32_t)access;  // the fake keeps the access flags here
      mrs[i] = m;
      return m;
    }
  errno = ENOMEM;
  return NULL;
}

int ibv_dereg_mr(struct ibv_mr *mr) {
  for (int i = 0; i < MAX_OBJS; i++)
    if (mrs[i] == mr) {
      mrs[i] = NULL;
      free(mr);
      return 0;
    }
  return EINVAL;
}

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *c) {
  struct ibv_comp_channel *ch = calloc(1, sizeof(*ch));
  ch->context = c;
  ch->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  return ch;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *ch) {
  close(ch->fd);
  free(ch);
  return 0;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *c, int cqe, void *ctx, struct ibv_comp_channel *ch, int vec) {
  (void)vec;
  if (cqe > CQ_MAX) return NULL;
  fcq_t *f = calloc(1, sizeof(*f));
  f->cq.context = c, f->cq.channel = ch, f->cq.cq_context = ctx, f->cq.cqe = cqe;
  return &f->cq;
}

int ibv_destroy_cq(struct ibv_cq *cq) {
  free(cq);
  return 0;
}

int ibv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **ctx) {
  (void)ctx;
  uint64_t v;
  if (read(ch->fd, &v, sizeof(v)) != sizeof(v)) return -1;  // EAGAIN: non-blocking
  *cq = NULL;  // the backend acknowledges whatever it is given
  return 0;
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int n) { (void)cq, (void)n; }

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a) {
  if (a->qp_type != IBV_QPT_RC || a->send_cq == NULL || a->recv_cq == NULL) return NULL;
  for (int i = 0; i < MAX_OBJS; i++)
    if (qps[i] == NULL) {
      fqp_t *q = calloc(1, sizeof(*q));
      q->qp.context = pd->context, q->qp.pd = pd, q->qp.send_cq = a->send_cq, q->qp.recv_cq = a->recv_cq;
      q->qp.qp_num = next_qpn++, q->qp.qp_type = IBV_QPT_RC, q->qp.state = IBV_QPS_RESET;
      qps[i] = q;
      return &q->qp;
    }
  return NULL;
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask) {
  fqp_t *q = (fqp_t *)qp;
  if (!(mask & IBV_QP_STATE)) return EINVAL;
  enum ibv_qp_state want = a->qp_state, have = qp->state;
  if (want == IBV_QPS_INIT && have == IBV_QPS_RESET) {
    if (!(mask & IBV_QP_PORT) || a->port_num != 1 || !(mask & IBV_QP_ACCESS_FLAGS)) return EINVAL;
    q->access = (int)a->qp_access_flags;
  } else if (want == IBV_QPS_RTR && have == IBV_QPS_INIT) {
    int need = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    if ((mask & need) != need || a->ah_attr.port_num != 1) return EINVAL;
    if (roce() ? !a->ah_attr.is_global || a->ah_attr.grh.sgid_index != 1 : a->ah_attr.dlid != 7) return EINVAL;
    q->dest_qpn = a->dest_qp_num, q->rq_psn = a->rq_psn;
  } else if (want == IBV_QPS_RTS && have == IBV_QPS_RTR) {
    if (!(mask & IBV_QP_SQ_PSN) || !(mask & IBV_QP_TIMEOUT) || !(mask & IBV_QP_RETRY_CNT)) return EINVAL;
    q->sq_psn = a->sq_psn;
  } else {
    return EINVAL;
  }
  qp->state = want;
  return 0;
}

int ibv_destroy_qp(struct ibv_qp *qp) {
  for (int i = 0; i < MAX_OBJS; i++)
    if (qps[i] == (fqp_t *)qp) qps[i] = NULL;
  for (pending_t **p = &pend_head; *p;) {  // its writes in flight are dropped
    if ((*p)->src == (fqp_t *)qp) {
      pending_t *d = *p;
      *p = d->next;
      free(d);
    } else {
      p = &(*p)->next;
    }
  }
  free(qp);
  return 0;
}

const char *ibv_wc_status_str(enum ibv_wc_status s) { return s == IBV_WC_SUCCESS ? "success" : "fake error"; }

/* ---- the data path ---- */

static void cq_push(struct ibv_cq *cq, const struct ibv_wc *wc) {
  fcq_t *f = (fcq_t *)cq;
  if ((f->tail + 1) % CQ_MAX == f->head) abort();  // overrun: the backend sized its CQ wrong
  f->wc[f->tail] = *wc;
  f->tail = (f->tail + 1) % CQ_MAX;
  if (f->armed && cq->channel) {
    uint64_t one = 1;
    if (write(cq->channel->fd, &one, sizeof(one)) != sizeof(one)) abort();
    f->armed = 0;
  }
}

static struct ibv_mr *find_mr(uint32_t key, int remote, uint64_t addr, size_t len) {
  for (int i = 0; i < MAX_OBJS; i++) {
    struct ibv_mr *m = mrs[i];
    if (m && (remote ? m->rkey : m->lkey) == key && addr >= (uintptr_t)m->addr &&
        addr + len <= (uintptr_t)m->addr + m->length)
      return m;
  }
  return NULL;
}

static fqp_t *find_qp(uint32_t qpn) {
  for (int i = 0; i < MAX_OBJS; i++)
    if (qps[i] && qps[i]->qp.qp_num == qpn) return qps[i];
  return NULL;
}

static void complete_send(pending_t *p, enum ibv_wc_status st) {
  if (!p->signaled && st == IBV_WC_SUCCESS) return;
  struct ibv_wc wc = {.wr_id = p->wr_id, .status = st, .opcode = IBV_WC_RDMA_WRITE, .qp_num = p->src->qp.qp_num};
  cq_push(p->src->qp.send_cq, &wc);
}

// Try to deliver p; 1 done (or failed), 0 must wait (no receive posted).
static int deliver(pending_t *p) {
  fqp_t *dst = find_qp(p->src->dest_qpn);
  if (dst == NULL || dst->qp.state < IBV_QPS_RTR || dst->dest_qpn != p->src->qp.qp_num || dst->rq_psn != p->src->sq_psn) {
    complete_send(p, IBV_WC_RETRY_EXC_ERR);
    return 1;
  }
  struct ibv_mr *m = p->len ? find_mr(p->rkey, 1, p->raddr, p->len) : NULL;
  if (p->len && (m == NULL || !(m->handle & IBV_ACCESS_REMOTE_WRITE) || !(dst->access & IBV_ACCESS_REMOTE_WRITE))) {
    complete_send(p, IBV_WC_REM_ACCESS_ERR);
    return 1;
  }
  if (dst->rq_head == dst->rq_tail) return 0;  // RNR: retried later
  if (p->len) memcpy((void *)(uintptr_t)p->raddr, p->data, p->len);
  uint64_t wr_id = dst->rq[dst->rq_head];
  dst->rq_head = (dst->rq_head + 1) % RQ_MAX;
  struct ibv_wc wc = {.wr_id = wr_id, .status = IBV_WC_SUCCESS, .opcode = IBV_WC_RECV_RDMA_WITH_IMM,
                      .byte_len = (uint32_t)p->len, .imm_data = p->imm, .wc_flags = IBV_WC_WITH_IMM,
                      .qp_num = dst->qp.qp_num};
  cq_push(dst->qp.recv_cq, &wc);
  complete_send(p, IBV_WC_SUCCESS);
  return 1;
}

// Deliver some pending writes: the oldest of a pseudo-randomly chosen QP each time.
static void pump(void) {
  for (int round = 0; round < 8 && pend_head; round++) {
    int n = 0;
    for (pending_t *p = pend_head; p; p = p->next) n++;
    rnd = rnd * 1103515245u + 12345u;
    int k = (int)((rnd >> 16) % (unsigned)n);
    pending_t *pick = pend_head;
    for (int i = 0; i < k; i++) pick = pick->next;
    pending_t **pp = &pend_head;  // the oldest pending write of pick's QP
    while ((*pp)->src != pick->src) pp = &(*pp)->next;
    pending_t *p = *pp;
    if (!deliver(p)) continue;
    *pp = p->next;
    free(p->data);
    free(p);
  }
}

static int fake_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc) {
  pump();
  fcq_t *f = (fcq_t *)cq;
  int got = 0;
  while (got < n && f->head != f->tail) {
    wc[got++] = f->wc[f->head];
    f->head = (f->head + 1) % CQ_MAX;
  }
  return got;
}

static int fake_req_notify(struct ibv_cq *cq, int solicited) {
  (void)solicited;
  ((fcq_t *)cq)->armed = 1;
  return 0;
}

static int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
  fqp_t *q = (fqp_t *)qp;
  for (; wr; wr = wr->next) {
    *bad = wr;
    if (qp->state != IBV_QPS_RTS || wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM || wr->num_sge > 1) return EINVAL;
    size_t len = wr->num_sge ? wr->sg_list[0].length : 0;
    if (len && find_mr(wr->sg_list[0].lkey, 0, wr->sg_list[0].addr, len) == NULL) return EINVAL;
    pending_t *p = calloc(1, sizeof(*p));
    p->src = q, p->wr_id = wr->wr_id, p->signaled = (wr->send_flags & IBV_SEND_SIGNALED) != 0;
    p->len = len, p->raddr = wr->wr.rdma.remote_addr, p->rkey = wr->wr.rdma.rkey, p->imm = wr->imm_data;
    p->data = malloc(len ? len : 1);  // the HCA reads the source when posted (good enough here)
    if (len) memcpy(p->data, (void *)(uintptr_t)wr->sg_list[0].addr, len);
    pending_t **tail = &pend_head;
    while (*tail) tail = &(*tail)->next;
    *tail = p;
  }
  *bad = NULL;
  return 0;
}

static int fake_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
  fqp_t *q = (fqp_t *)qp;
  for (; wr; wr = wr->next) {
    *bad = wr;
    if (qp->state < IBV_QPS_INIT || wr->num_sge != 0) return EINVAL;  // the backend posts zero-length receives
    if ((q->rq_tail + 1) % RQ_MAX == q->rq_head) return ENOMEM;
    q->rq[q->rq_tail] = wr->wr_id;
    q->rq_tail = (q->rq_tail + 1) % RQ_MAX;
  }
  *bad = NULL;
  return 0;
}

// For the test (through dlsym): registrations and queue pairs still alive.
int fake_ibv_live(void) {
  int n = 0;
  for (int i = 0; i < MAX_OBJS; i++) n += (mrs[i] != NULL) + (qps[i] != NULL);
  return n;
}
