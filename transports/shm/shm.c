/*
 * shm.c — the shared-memory transport between the ranks of one host.
 *
 * Each rank makes one FIFO segment: a small header (magic, owner pid, the
 * owner's address of the header), then one FIFO per (source rank, traffic
 * class) that the sources write into. The ranks of a host map each other's
 * FIFO segments at set-up and unlink the names as soon as every rank has
 * mapped them, as the core does with its control segments (src/core/segment.c).
 *
 * Each FIFO is a single-producer single-consumer ring of slots. Every slot
 * has a one-cache-line header — sequence flag, length, tag and, for short
 * messages, the data itself — so a receiver polls exactly the line that
 * carries the message: the sender fills message n's slot (n % nslots) and
 * stores n+1 into its header's flag with release order; the receiver waits
 * for that value with an acquire load, consumes the slot and publishes its
 * head counter, which the sender reads only when its cached copy says the
 * ring is full. The FIFO lives in the receiver's segment.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "checks.h"
#include "shmem.h"
#include "env.h"
#include "transport.h"
#include "util.h"

#define FIFO_MAGIC 0x7765667466696631ull  // "weftfif1": the layout below

// Messages this short travel inside the slot's header line, so a receiver
// that polls the header has the data in the same cache line as the flag.
#define INLINE_BYTES 48

// A receiver prefetches a slot's data lines with its flag for messages of
// at most this many lines.
#define PREFETCH_LINES_MAX 8

// One cache line per slot: written by the sender, `seq` last (release).
typedef struct {
  _Alignas(64) _Atomic uint64_t seq;  // n + 1 once the n-th message sent on this FIFO is in the slot
  uint32_t len, tag;
  unsigned char inline_data[INLINE_BYTES];
} slot_hdr_t;

typedef struct {
  _Alignas(64) _Atomic uint64_t head;  // messages the receiver has consumed
  _Alignas(64) slot_hdr_t slot[WEFT_TRANSPORT_MAX_SLOTS];
} fifo_ctl_t;

// The head of a FIFO segment; the FIFOs follow at HDR_BYTES.
typedef struct {
  uint64_t magic;
  int32_t pid;         // the owning process, for cross-memory reads
  uint64_t self_addr;  // where the owner maps this header (probe for cross-memory reads)
} fifo_seg_hdr_t;

#define CTL_BYTES WEFT_ALIGN_UP(sizeof(fifo_ctl_t), 4096)
#define HDR_BYTES WEFT_ALIGN_UP(sizeof(fifo_seg_hdr_t), 4096)

// Per-connection state kept in conn->priv.
typedef struct {
  fifo_ctl_t *ctl;
  char *data;
  size_t nslots;
  uint64_t pos;                // messages sent (sender) or consumed (receiver) so far
  uint64_t seen_head;          // sender: the receiver's head when last read
  uint32_t last_len;           // receiver: the length of the last message, to guess the next one's lines
  uint32_t polls;              // receiver: polls of the current slot so far (1: it was there at once)
  weft_doorbell_t *wake;       // the other side's doorbell
  pid_t peer_pid;              // for cross-memory reads; our own pid for thread ranks
} shm_conn_t;

// The transport's state: every served rank's FIFO segment, mapped here.
typedef struct {
  int rank, nranks;
  size_t seg_bytes, fifo_bytes;
  char name[64];
  int name_live;               // our segment's name still exists in /dev/shm
  fifo_seg_hdr_t **seg;        // [nranks]; NULL for ranks not served
} shm_state_t;

static fifo_ctl_t *fifo_ctl(const shm_state_t *st, int owner, int src, int cls) {
  char *base = (char *)st->seg[owner];
  return (fifo_ctl_t *)(base + HDR_BYTES + ((size_t)src * WEFT_NUM_CLASSES + (size_t)cls) * st->fifo_bytes);
}

// A rank's connection to itself always stays in its own segment.
static int shm_can_connect(const weft_transport_view_t *v, int peer) {
  return peer == v->rank || (weft_env_NCCL_SHM_DISABLE() == 0 && v->host_of[peer] == v->host_of[v->rank]);
}

typedef struct {
  char name[64];
  uint64_t seg_bytes;
} seg_card_t;

// Copy between our `local` and another process's `remote` with cross-memory
// attach (write: ours into theirs), or plainly within our own process.
static ncclResult_t cross_copy(pid_t pid, void *local, uint64_t remote, size_t bytes, int write) {
  if (pid == getpid()) {
    if (write) memcpy((void *)(uintptr_t)remote, local, bytes);
    else memcpy(local, (const void *)(uintptr_t)remote, bytes);
    return ncclSuccess;
  }
  size_t done = 0;
  while (done < bytes) {
    struct iovec near = {(char *)local + done, bytes - done};
    struct iovec far = {(void *)(uintptr_t)(remote + done), bytes - done};
    ssize_t got = write ? process_vm_writev(pid, &near, 1, &far, 1, 0) : process_vm_readv(pid, &near, 1, &far, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      WARN("%s %zu bytes %s process %d failed: %s", write ? "writing" : "reading", bytes - done,
           write ? "to" : "from", (int)pid, got < 0 ? strerror(errno) : "nothing moved (did the peer exit?)");
      return ncclRemoteError;
    }
    done += (size_t)got;
  }
  return ncclSuccess;
}

// Can this rank read every peer's memory? Each rank reads each peer's
// header through the peer's own address of it; the answers are combined so
// every rank agrees whether single-copy schedules may be used.
static ncclResult_t probe_reads(weft_transport_view_t *v, const shm_state_t *st) {
  int *ok = calloc((size_t)v->nranks, sizeof(int));
  if (ok == NULL) return ncclSystemError;
  ok[v->rank] = 1;
  for (int p = 0; p < v->nranks; p++) {
    const fifo_seg_hdr_t *h = st->seg[p];
    uint64_t magic = 0;
    if (h == NULL) {  // not served by shared memory (another host, or shared memory off): no reads
      ok[v->rank] = 0;
      continue;
    }
    if (p == v->rank || h->pid == getpid()) continue;
    struct iovec local = {&magic, sizeof(magic)}, far = {(void *)(uintptr_t)h->self_addr, sizeof(magic)};
    if (process_vm_readv(h->pid, &local, 1, &far, 1, 0) != (ssize_t)sizeof(magic) || magic != FIFO_MAGIC) {
      INFO(WEFT_LOG_SHM, "rank %d cannot read rank %d's memory (%s): single-copy transfers are off", v->rank, p,
           strerror(errno));
      ok[v->rank] = 0;
    }
  }
  ncclResult_t res = v->allgather(v, ok, sizeof(int));
  v->can_read = res == ncclSuccess;
  for (int p = 0; p < v->nranks && v->can_read; p++) v->can_read = ok[p];
  free(ok);
  INFO(WEFT_LOG_SHM, "single-copy reads between ranks: %s", v->can_read ? "on" : "off");
  return res;
}

static ncclResult_t shm_setup(weft_transport_view_t *v, const uint8_t *serve, void **state) {
  ncclResult_t res = ncclSuccess;
  int me = v->rank, n = v->nranks;
  shm_state_t *st = calloc(1, sizeof(*st));
  seg_card_t *cards = calloc((size_t)n, sizeof(*cards));
  *state = st;
  if (st == NULL || cards == NULL) {
    free(cards);
    return ncclSystemError;
  }
  st->rank = me;
  st->nranks = n;
  st->fifo_bytes = CTL_BYTES + v->slot_bytes * v->nslots;
  st->seg_bytes = HDR_BYTES + st->fifo_bytes * WEFT_NUM_CLASSES * (size_t)n;
  st->seg = calloc((size_t)n, sizeof(*st->seg));
  if (st->seg == NULL) { res = ncclSystemError; goto out; }

  weft_shmem_name(st->name, sizeof(st->name), "weft-fifo", me);
  WEFTCHECKGOTO(weft_shmem_map(st->name, st->seg_bytes, 1, (void **)&st->seg[me]), res, out);
  st->name_live = 1;
  st->seg[me]->magic = FIFO_MAGIC;
  st->seg[me]->pid = (int32_t)getpid();
  st->seg[me]->self_addr = (uint64_t)(uintptr_t)st->seg[me];
  INFO(WEFT_LOG_SHM, "shm segment %s: %zu bytes, %zu slots of %zu bytes per FIFO", st->name, st->seg_bytes,
       v->nslots, v->slot_bytes);

  // Exchange segment names and map the served peers' segments; the name is
  // unlinked once the probe's allgather shows that every rank has mapped.
  snprintf(cards[me].name, sizeof(cards[me].name), "%s", st->name);
  cards[me].seg_bytes = st->seg_bytes;
  WEFTCHECKGOTO(v->allgather(v, cards, sizeof(*cards)), res, out);
  for (int p = 0; p < n; p++) {
    if (p == me || !serve[p]) continue;
    WEFTCHECKGOTO(weft_shmem_map(cards[p].name, cards[p].seg_bytes, 0, (void **)&st->seg[p]), res, out);
  }

  // Wire the connections to the served peers to their FIFOs.
  for (int cls = 0; cls < WEFT_NUM_CLASSES; cls++) {
    for (int is_send = 0; is_send < 2; is_send++) {
      for (int p = 0; p < n; p++) {
        if (!serve[p]) continue;
        shm_conn_t *sc = calloc(1, sizeof(*sc));
        if (sc == NULL) { res = ncclSystemError; goto out; }
        int owner = is_send ? p : me, src = is_send ? me : p;
        sc->ctl = fifo_ctl(st, owner, src, cls);
        sc->data = (char *)sc->ctl + CTL_BYTES;
        sc->nslots = v->nslots;
        sc->wake = v->doorbell(v, p);
        sc->peer_pid = (pid_t)st->seg[p]->pid;
        weft_view_claim(v, &weft_shm_transport, cls, is_send, p, sc);
      }
    }
  }
  WEFTCHECKGOTO(probe_reads(v, st), res, out);
  shm_unlink(st->name);
  st->name_live = 0;
out:
  free(cards);
  return res;
}

static void shm_teardown(weft_transport_view_t *v, void *state) {
  shm_state_t *st = state;
  if (v->conns != NULL) {
    for (size_t i = 0; i < (size_t)WEFT_NUM_CLASSES * 2 * (size_t)v->nranks; i++) {
      if (v->conns[i].tp == &weft_shm_transport) {
        free(v->conns[i].priv);
        v->conns[i].priv = NULL;
        v->conns[i].tp = NULL;
      }
    }
  }
  if (st == NULL) return;
  if (st->name_live) shm_unlink(st->name);
  for (int p = 0; st->seg != NULL && p < st->nranks; p++)
    if (st->seg[p] != NULL) munmap(st->seg[p], st->seg_bytes);
  free(st->seg);
  free(st);
}

// The sender reads the receiver's head only when its cached copy says the
// FIFO is full, so an uncongested message costs the receiver one cache miss
// (the slot header) and the sender none.
static void *shm_send_slot(weft_conn_t *c) {
  shm_conn_t *sc = c->priv;
  if (sc->pos - sc->seen_head >= sc->nslots) {
    sc->seen_head = atomic_load_explicit(&sc->ctl->head, memory_order_acquire);
    if (sc->pos - sc->seen_head >= sc->nslots) return NULL;
  }
  return sc->data + (sc->pos % sc->nslots) * c->slot_bytes;
}

static void shm_send_post(weft_conn_t *c, size_t bytes, uint32_t tag) {
  shm_conn_t *sc = c->priv;
  slot_hdr_t *h = &sc->ctl->slot[sc->pos % sc->nslots];
  h->len = (uint32_t)bytes;
  h->tag = tag;
  if (bytes <= INLINE_BYTES) memcpy(h->inline_data, sc->data + (sc->pos % sc->nslots) * c->slot_bytes, bytes);
  sc->pos++;
  atomic_store_explicit(&h->seq, sc->pos, memory_order_release);
  weft_doorbell_ring(sc->wake);
}

// Asks for the first `lines` cache lines at p (a prefetch: no access in the
// memory model, so a sender still writing them is no race).
static inline void prefetch_lines(const char *p, uint32_t lines) {
  for (uint32_t i = 0; i < lines; i++) __builtin_prefetch(p + (size_t)i * 64, 0, 3);
}

static const void *shm_recv_slot(weft_conn_t *c, size_t *bytes, uint32_t *tag) {
  shm_conn_t *sc = c->priv;
  slot_hdr_t *h = &sc->ctl->slot[sc->pos % sc->nslots];
  const char *data = sc->data + (sc->pos % sc->nslots) * c->slot_bytes;
  uint64_t seq = atomic_load_explicit(&h->seq, memory_order_acquire);
  // A message longer than the header line carries its data in the slot's
  // lines, which the sender wrote before the flag. When the last message
  // was a few lines long, asking for as many lines in the same poll as the
  // flag brings them in together with it rather than one transfer later
  // (10-18% off 128-512 B calls on 2 ranks). Longer ones are left alone:
  // polling lines a sender is still filling makes them bounce between caches.
  if (sc->last_len > INLINE_BYTES && sc->last_len <= PREFETCH_LINES_MAX * 64)
    prefetch_lines(data, (sc->last_len + 63) / 64);
  if (seq != sc->pos + 1) {
    sc->polls++;
    return NULL;
  }
  // There at the first poll: the sender is ahead of this rank (a root
  // broadcasting call after call), so the next slot's header is likely
  // written too; asking for it now overlaps its transfer with this one.
  // A sender that is not ahead is left alone: it may be writing that line.
  if (sc->polls == 0) __builtin_prefetch(&sc->ctl->slot[(sc->pos + 1) % sc->nslots], 0, 3);
  sc->polls = 0;
  *bytes = sc->last_len = h->len;
  *tag = h->tag;
  if (h->len <= INLINE_BYTES) return h->inline_data;
  return data;
}

static void shm_recv_release(weft_conn_t *c) {
  shm_conn_t *sc = c->priv;
  sc->pos++;
  atomic_store_explicit(&sc->ctl->head, sc->pos, memory_order_release);
  weft_doorbell_ring(sc->wake);
}

static ncclResult_t shm_read(weft_conn_t *c, void *dst, uint64_t remote, size_t bytes) {
  return cross_copy(((shm_conn_t *)c->priv)->peer_pid, dst, remote, bytes, 0);
}

static ncclResult_t shm_write(weft_conn_t *c, uint64_t remote, const void *src, size_t bytes) {
  return cross_copy(((shm_conn_t *)c->priv)->peer_pid, (void *)(uintptr_t)src, remote, bytes, 1);
}

const weft_transport_t weft_shm_transport = {
    .name = "shm",
    .can_connect = shm_can_connect,
    .setup = shm_setup,
    .teardown = shm_teardown,
    .send_slot = shm_send_slot,
    .send_post = shm_send_post,
    .recv_slot = shm_recv_slot,
    .recv_release = shm_recv_release,
    .read = shm_read,
    .write = shm_write,
};
