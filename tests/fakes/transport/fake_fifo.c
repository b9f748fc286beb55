/*
 * fake_fifo.c — the stand-in transport of fake_fifo.h.
 *
 * Each receiving rank makes one FIFO per (sender, class) in its own heap
 * and claims the receiving end; set-up's one allgather hands the FIFOs'
 * addresses to the senders, which claim the sending ends. A FIFO starts
 * with two references, one for each end, and is freed by the last end to
 * go, so neither rank waits for the other to let go. Ranks in different
 * processes are refused at set-up (the addresses would mean nothing there).
 * Each end's doorbell is the other rank's: a post wakes the receiver, a
 * release the sender.
 */
#include "fake_fifo.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  _Atomic uint64_t head;  // messages the receiver released
  _Atomic uint64_t tail;  // messages the sender posted
  _Atomic int refs;       // ends holding it
  size_t nslots, slot_bytes;
  uint32_t len[WEFT_TRANSPORT_MAX_SLOTS], tag[WEFT_TRANSPORT_MAX_SLOTS];
  char *data;
} fifo_t;

// One end of a FIFO: conn->priv.
typedef struct {
  fifo_t *f;
  weft_doorbell_t *wake;  // the other end's rank
} end_t;

static _Atomic uint64_t posted_total;

uint64_t weft_fake_fifo_posted(void) { return atomic_load(&posted_total); }

static void drop(fifo_t *f) {
  if (f != NULL && atomic_fetch_sub(&f->refs, 1) == 1) {
    free(f->data);
    free(f);
  }
}

static int fake_can_connect(const weft_transport_view_t *v, int peer) {
  return peer >= 0 && peer < v->nranks;
}

// Puts one of f's references in a new end of connection (cls, is_send, peer).
static ncclResult_t claim(weft_transport_view_t *v, int cls, int is_send, int peer, fifo_t *f) {
  end_t *e = calloc(1, sizeof(*e));
  if (e == NULL) return ncclSystemError;
  e->f = f;
  e->wake = v->doorbell(v, peer);
  weft_view_claim(v, &weft_fake_fifo_transport, cls, is_send, peer, e);
  return ncclSuccess;
}

// A FIFO from `src` for class cls, claimed as this rank's receiving end;
// its second reference waits for the sender. NULL when out of memory.
static fifo_t *make_in(weft_transport_view_t *v, int cls, int src) {
  fifo_t *f = calloc(1, sizeof(*f));
  if (f != NULL) f->data = malloc(v->nslots * v->slot_bytes);
  if (f == NULL || f->data == NULL || claim(v, cls, 0, src, f) != ncclSuccess) {
    if (f != NULL) free(f->data);
    free(f);
    return NULL;
  }
  f->nslots = v->nslots;
  f->slot_bytes = v->slot_bytes;
  atomic_store(&f->refs, 2);
  return f;
}

// Each rank's card: its pid, then its FIFO from each sender, [cls][sender].
static ncclResult_t fake_setup(weft_transport_view_t *v, const uint8_t *serve, void **state) {
  int n = v->nranks, me = v->rank;
  size_t nfifos = (size_t)WEFT_NUM_CLASSES * (size_t)n, card_bytes = sizeof(int64_t) + nfifos * sizeof(fifo_t *);
  ncclResult_t res = ncclSuccess;
  *state = NULL;  // the connections hold everything
  char *cards = calloc((size_t)n, card_bytes);
  if (cards == NULL) return ncclSystemError;
  int64_t pid = getpid();
  fifo_t **in = (fifo_t **)(cards + (size_t)me * card_bytes + sizeof(int64_t));
  memcpy(cards + (size_t)me * card_bytes, &pid, sizeof(pid));
  for (int cls = 0; cls < WEFT_NUM_CLASSES; cls++)
    for (int p = 0; p < n; p++)
      if (serve[p] && (in[(size_t)cls * n + p] = make_in(v, cls, p)) == NULL) res = ncclSystemError;
  ncclResult_t gathered = v->allgather(v, cards, card_bytes);
  if (gathered != ncclSuccess) {
    for (size_t i = 0; i < nfifos; i++) drop(in[i]);  // no sender learnt of them
    res = gathered;
  }
  // Take each served peer's FIFO to us: the reference it keeps for us.
  for (int p = 0; p < n && gathered == ncclSuccess; p++) {
    int64_t their_pid;
    memcpy(&their_pid, cards + (size_t)p * card_bytes, sizeof(their_pid));
    if (!serve[p]) continue;
    if (their_pid != pid) {  // another process: its addresses mean nothing here, nor ours there
      for (int cls = 0; cls < WEFT_NUM_CLASSES; cls++) drop(in[(size_t)cls * n + p]);
      res = ncclInvalidUsage;
      continue;
    }
    fifo_t **theirs = (fifo_t **)(cards + (size_t)p * card_bytes + sizeof(int64_t));
    for (int cls = 0; cls < WEFT_NUM_CLASSES; cls++) {
      fifo_t *f = theirs[(size_t)cls * n + me];
      if (f == NULL) res = ncclInternalError;  // it ran out of memory
      else if (claim(v, cls, 1, p, f) != ncclSuccess) drop(f), res = ncclSystemError;
    }
  }
  free(cards);
  return res;
}

static void fake_teardown(weft_transport_view_t *v, void *state) {
  (void)state;
  for (size_t i = 0; v->conns != NULL && i < (size_t)WEFT_NUM_CLASSES * 2 * (size_t)v->nranks; i++) {
    weft_conn_t *c = &v->conns[i];
    if (c->tp != &weft_fake_fifo_transport) continue;
    end_t *e = c->priv;
    drop(e->f);
    free(e);
    c->priv = NULL;
    c->tp = NULL;
  }
}

static void *fake_send_slot(weft_conn_t *c) {
  fifo_t *f = ((end_t *)c->priv)->f;
  uint64_t tail = atomic_load_explicit(&f->tail, memory_order_relaxed);
  if (tail - atomic_load_explicit(&f->head, memory_order_acquire) >= f->nslots) return NULL;
  return f->data + (tail % f->nslots) * f->slot_bytes;
}

static void fake_send_post(weft_conn_t *c, size_t bytes, uint32_t tag) {
  end_t *e = c->priv;
  uint64_t tail = atomic_load_explicit(&e->f->tail, memory_order_relaxed);
  e->f->len[tail % e->f->nslots] = (uint32_t)bytes;
  e->f->tag[tail % e->f->nslots] = tag;
  atomic_store_explicit(&e->f->tail, tail + 1, memory_order_release);
  atomic_fetch_add(&posted_total, 1);
  weft_doorbell_ring(e->wake);
}

static const void *fake_recv_slot(weft_conn_t *c, size_t *bytes, uint32_t *tag) {
  fifo_t *f = ((end_t *)c->priv)->f;
  uint64_t head = atomic_load_explicit(&f->head, memory_order_relaxed);
  if (atomic_load_explicit(&f->tail, memory_order_acquire) == head) return NULL;
  *bytes = f->len[head % f->nslots];
  *tag = f->tag[head % f->nslots];
  return f->data + (head % f->nslots) * f->slot_bytes;
}

static void fake_recv_release(weft_conn_t *c) {
  end_t *e = c->priv;
  atomic_fetch_add_explicit(&e->f->head, 1, memory_order_release);
  weft_doorbell_ring(e->wake);
}

const weft_transport_t weft_fake_fifo_transport = {
    .name = "fake-fifo",
    .can_connect = fake_can_connect,
    .setup = fake_setup,
    .teardown = fake_teardown,
    .send_slot = fake_send_slot,
    .send_post = fake_send_post,
    .recv_slot = fake_recv_slot,
    .recv_release = fake_recv_release,
};
