/*
 * shm.c — the shared-memory transport (see shm.h for the segment layout).
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
#include "shm.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <unistd.h>

#include "checks.h"
#include "comm.h"
#include "env.h"
#include "transport.h"
#include "util.h"


// Messages this short travel inside the slot's header line, so a receiver
// that polls the header has the data in the same cache line as the flag.
#define INLINE_BYTES 48

// One cache line per slot: written by the sender, `seq` last (release).
typedef struct {
  _Alignas(64) _Atomic uint64_t seq;  // n + 1 once the n-th message sent on this FIFO is in the slot
  uint32_t len, tag;
  unsigned char inline_data[INLINE_BYTES];
} slot_hdr_t;

typedef struct {
  _Alignas(64) _Atomic uint64_t head;  // messages the receiver has consumed
  _Alignas(64) slot_hdr_t slot[WEFT_SHM_MAX_SLOTS];
} fifo_ctl_t;

#define CTL_BYTES WEFT_ALIGN_UP(sizeof(fifo_ctl_t), 4096)
#define HDR_BYTES WEFT_ALIGN_UP(sizeof(weft_shm_header_t), 4096)

// Per-connection state kept in conn->priv.
typedef struct {
  fifo_ctl_t *ctl;
  char *data;
  size_t nslots;
  uint64_t pos;                // messages sent (sender) or consumed (receiver) so far
  uint64_t seen_head;          // sender: the receiver's head when last read
  weft_doorbell_t *wake;       // the other side's doorbell
  pid_t peer_pid;              // for cross-memory reads; our own pid for thread ranks
} shm_conn_t;

static fifo_ctl_t *fifo_ctl(weft_shm_t *shm, int owner, int src, int cls) {
  char *base = (char *)shm->hdr[owner];
  return (fifo_ctl_t *)(base + HDR_BYTES + ((size_t)src * WEFT_NUM_CLASSES + (size_t)cls) * shm->fifo_bytes);
}

static int same_host(const struct ncclComm *comm, int peer) {
  return comm->host_of[peer] == comm->host_of[comm->rank];
}

// A rank's connection to itself always stays in its own segment.
static int shm_can_connect(struct ncclComm *comm, int peer) {
  return peer == comm->rank || (weft_env_NCCL_SHM_DISABLE() == 0 && same_host(comm, peer));
}

static ncclResult_t shm_params(weft_shm_t *shm) {
  int64_t slot = weft_env_WEFT_SHM_SLOT_BYTES(), nslots = weft_env_WEFT_SHM_SLOTS();
  if (slot < 4096 || slot % 64 != 0 || slot > (1 << 26)) {
    WARN("WEFT_SHM_SLOT_BYTES=%lld must be a multiple of 64 between 4096 and 64 MiB", (long long)slot);
    return ncclInvalidArgument;
  }
  if (nslots < 2 || nslots > WEFT_SHM_MAX_SLOTS) {
    WARN("WEFT_SHM_SLOTS=%lld must be between 2 and %d", (long long)nslots, WEFT_SHM_MAX_SLOTS);
    return ncclInvalidArgument;
  }
  shm->slot_bytes = (size_t)slot;
  shm->nslots = (size_t)nslots;
  shm->fifo_bytes = CTL_BYTES + shm->slot_bytes * shm->nslots;
  shm->seg_bytes = HDR_BYTES + shm->fifo_bytes * WEFT_NUM_CLASSES * (size_t)shm->nranks;
  return ncclSuccess;
}

static ncclResult_t map_segment(const char *name, size_t bytes, int create, weft_shm_header_t **out) {
  int fd = shm_open(name, O_RDWR | (create ? O_CREAT | O_EXCL : 0) | O_CLOEXEC, 0600);
  if (fd < 0) {
    WARN("shm_open(%s) failed: %s", name, strerror(errno));
    return ncclSystemError;
  }
  if (create && ftruncate(fd, (off_t)bytes) != 0) {
    WARN("ftruncate(%s, %zu) failed: %s (is /dev/shm large enough?)", name, bytes, strerror(errno));
    close(fd);
    shm_unlink(name);
    return ncclSystemError;
  }
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    WARN("mmap of %s (%zu bytes) failed: %s", name, bytes, strerror(errno));
    if (create) shm_unlink(name);
    return ncclSystemError;
  }
  *out = p;
  return ncclSuccess;
}

typedef struct {
  char name[64];
  uint64_t seg_bytes, slot_bytes, nslots;
} seg_card_t;

// Copy from another process with cross-memory attach, or plainly within ours.
static ncclResult_t read_pid(pid_t pid, void *dst, uint64_t remote, size_t bytes) {
  if (pid == getpid()) {
    memcpy(dst, (const void *)(uintptr_t)remote, bytes);
    return ncclSuccess;
  }
  size_t done = 0;
  while (done < bytes) {
    struct iovec local = {(char *)dst + done, bytes - done};
    struct iovec far = {(void *)(uintptr_t)(remote + done), bytes - done};
    ssize_t got = process_vm_readv(pid, &local, 1, &far, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      WARN("reading %zu bytes from process %d failed: %s", bytes - done, (int)pid,
           got < 0 ? strerror(errno) : "nothing read (did the peer exit?)");
      return ncclRemoteError;
    }
    done += (size_t)got;
  }
  return ncclSuccess;
}

// Can this rank read every peer's memory? Each rank reads each peer's
// header through the peer's own address of it; the answers are combined so
// every rank agrees whether single-copy schedules may be used.
static ncclResult_t probe_reads(struct ncclComm *comm) {
  weft_shm_t *shm = comm->shm;
  int *ok = calloc((size_t)comm->nranks, sizeof(int));
  if (ok == NULL) return ncclSystemError;
  ok[comm->rank] = 1;
  for (int p = 0; p < comm->nranks; p++) {
    weft_shm_header_t *h = shm->hdr[p];
    uint64_t magic = 0;
    if (h == NULL || !shm_can_connect(comm, p)) {  // another host, or shared memory off: no reads
      ok[comm->rank] = 0;
      continue;
    }
    if (p == comm->rank || h->pid == getpid()) continue;
    struct iovec local = {&magic, sizeof(magic)}, far = {(void *)(uintptr_t)h->self_addr, sizeof(magic)};
    if (process_vm_readv(h->pid, &local, 1, &far, 1, 0) != (ssize_t)sizeof(magic) || magic != WEFT_SHM_MAGIC) {
      INFO(WEFT_LOG_SHM, "rank %d cannot read rank %d's memory (%s): single-copy transfers are off", comm->rank,
           p, strerror(errno));
      ok[comm->rank] = 0;
    }
  }
  ncclResult_t res = weft_bootstrap_allgather(&comm->bs, ok, sizeof(int));
  comm->can_read = res == ncclSuccess;
  for (int p = 0; p < comm->nranks && comm->can_read; p++) comm->can_read = ok[p];
  free(ok);
  INFO(WEFT_LOG_SHM, "single-copy reads between ranks: %s", comm->can_read ? "on" : "off");
  return res;
}

static ncclResult_t shm_setup(struct ncclComm *comm) {
  ncclResult_t res = ncclSuccess;
  weft_shm_t *shm = calloc(1, sizeof(*shm));
  seg_card_t *cards = calloc((size_t)comm->nranks, sizeof(*cards));
  if (shm == NULL || cards == NULL) { free(shm); free(cards); return ncclSystemError; }
  comm->shm = shm;
  shm->rank = comm->rank;
  shm->nranks = comm->nranks;
  for (shm->leader = 0; !same_host(comm, shm->leader);) shm->leader++;
  shm->hdr = calloc((size_t)comm->nranks, sizeof(*shm->hdr));
  if (shm->hdr == NULL) { res = ncclSystemError; goto out; }
  WEFTCHECKGOTO(shm_params(shm), res, out);

  uint64_t nonce = 0;
  if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce)) nonce = (uint64_t)weft_now_ns();
  snprintf(shm->name, sizeof(shm->name), "/weft-%d-%016llx-r%d", (int)getpid(), (unsigned long long)nonce,
           comm->rank);
  WEFTCHECKGOTO(map_segment(shm->name, shm->seg_bytes, 1, &shm->hdr[comm->rank]), res, out);
  shm->name_live = 1;
  weft_shm_header_t *me = shm->hdr[comm->rank];
  me->magic = WEFT_SHM_MAGIC;
  me->nranks = (uint32_t)comm->nranks;
  me->rank = (uint32_t)comm->rank;
  me->slot_bytes = shm->slot_bytes;
  me->nslots = shm->nslots;
  me->fifo_bytes = shm->fifo_bytes;
  me->pid = (int32_t)getpid();
  me->pidns = weft_shm_pidns();
  me->self_addr = (uint64_t)(uintptr_t)me;
  INFO(WEFT_LOG_SHM, "shm segment %s: %zu bytes, %zu slots of %zu bytes per FIFO", shm->name, shm->seg_bytes,
       shm->nslots, shm->slot_bytes);

  // Exchange segment names, map every peer's segment, then unlink our name.
  snprintf(cards[comm->rank].name, sizeof(cards[comm->rank].name), "%s", shm->name);
  cards[comm->rank].seg_bytes = shm->seg_bytes;
  cards[comm->rank].slot_bytes = shm->slot_bytes;
  cards[comm->rank].nslots = shm->nslots;
  WEFTCHECKGOTO(weft_bootstrap_allgather(&comm->bs, cards, sizeof(*cards)), res, out);
  for (int p = 0; p < comm->nranks; p++) {
    if (cards[p].slot_bytes != shm->slot_bytes || cards[p].nslots != shm->nslots) {
      WARN("rank %d uses WEFT_SHM_SLOT_BYTES=%llu WEFT_SHM_SLOTS=%llu but rank %d uses %zu and %zu; they must match",
           p, (unsigned long long)cards[p].slot_bytes, (unsigned long long)cards[p].nslots, comm->rank,
           shm->slot_bytes, shm->nslots);
      res = ncclInvalidUsage;
      goto out;
    }
    if (p != comm->rank && same_host(comm, p))
      WEFTCHECKGOTO(map_segment(cards[p].name, cards[p].seg_bytes, 0, &shm->hdr[p]), res, out);
  }
  WEFTCHECKGOTO(weft_bootstrap_barrier(&comm->bs), res, out);
  shm_unlink(shm->name);
  shm->name_live = 0;
  weft_shm_watch_peers(shm);

  // Wire the connections to peers shared memory serves to their FIFOs.
  for (int cls = 0; cls < WEFT_NUM_CLASSES; cls++) {
    for (int is_send = 0; is_send < 2; is_send++) {
      for (int p = 0; p < comm->nranks; p++) {
        if (!shm_can_connect(comm, p)) continue;
        weft_conn_t *c = weft_comm_conn(comm, cls, is_send, p);
        shm_conn_t *sc = calloc(1, sizeof(*sc));
        if (sc == NULL) { res = ncclSystemError; goto out; }
        int owner = is_send ? p : comm->rank, src = is_send ? comm->rank : p;
        sc->ctl = fifo_ctl(shm, owner, src, cls);
        sc->data = (char *)sc->ctl + CTL_BYTES;
        sc->nslots = shm->nslots;
        sc->wake = weft_shm_doorbell(shm, p);
        c->tp = &weft_shm_transport;
        c->peer = p;
        c->cls = cls;
        c->is_send = is_send;
        c->slot_bytes = shm->slot_bytes;
        c->priv = sc;
        sc->peer_pid = (pid_t)shm->hdr[p]->pid;
      }
    }
  }
  WEFTCHECKGOTO(probe_reads(comm), res, out);
out:
  free(cards);
  return res;
}

static void shm_teardown(struct ncclComm *comm) {
  weft_shm_t *shm = comm->shm;
  if (comm->conns != NULL) {
    for (size_t i = 0; i < (size_t)WEFT_NUM_CLASSES * 2 * (size_t)comm->nranks; i++) {
      if (comm->conns[i].tp == &weft_shm_transport) {
        free(comm->conns[i].priv);
        comm->conns[i].priv = NULL;
        comm->conns[i].tp = NULL;
      }
    }
  }
  if (shm == NULL) return;
  if (shm->name_live) shm_unlink(shm->name);
  if (shm->hdr != NULL && shm->hdr[shm->rank] != NULL) atomic_store(&shm->hdr[shm->rank]->closed, 1);
  weft_shm_unwatch_peers(shm);
  for (int p = 0; shm->hdr != NULL && p < shm->nranks; p++)
    if (shm->hdr[p] != NULL) munmap(shm->hdr[p], shm->seg_bytes);
  free(shm->hdr);
  free(shm);
  comm->shm = NULL;
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

static const void *shm_recv_slot(weft_conn_t *c, size_t *bytes, uint32_t *tag) {
  shm_conn_t *sc = c->priv;
  slot_hdr_t *h = &sc->ctl->slot[sc->pos % sc->nslots];
  if (atomic_load_explicit(&h->seq, memory_order_acquire) != sc->pos + 1) return NULL;
  *bytes = h->len;
  *tag = h->tag;
  if (h->len <= INLINE_BYTES) return h->inline_data;
  return sc->data + (sc->pos % sc->nslots) * c->slot_bytes;
}

static void shm_recv_release(weft_conn_t *c) {
  shm_conn_t *sc = c->priv;
  sc->pos++;
  atomic_store_explicit(&sc->ctl->head, sc->pos, memory_order_release);
  weft_doorbell_ring(sc->wake);
}

static ncclResult_t shm_read(weft_conn_t *c, void *dst, uint64_t remote, size_t bytes) {
  return read_pid(((shm_conn_t *)c->priv)->peer_pid, dst, remote, bytes);
}

void weft_shm_abort(weft_shm_t *shm, ncclResult_t code, const char *reason) {
  weft_shm_header_t *h0 = weft_shm_abort_header(shm);
  int32_t expected = 0;
  // The reason is written before the code is published, so readers see it whole.
  if (atomic_load(&h0->abort_code) == 0) {
    snprintf(h0->abort_reason, sizeof(h0->abort_reason), "%s", reason);
    h0->abort_rank = shm->rank;
    atomic_compare_exchange_strong(&h0->abort_code, &expected, (int32_t)code);
  }
  for (int p = 0; p < shm->nranks; p++)
    if (shm->hdr[p] != NULL) weft_doorbell_ring(&shm->hdr[p]->doorbell);
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
};
