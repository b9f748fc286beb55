/*
 * fake_view.c — the view of fake_view.h: what the core's connect.c does
 * for a communicator, done with a shared board so that a test can set a
 * transport up on ranks that are threads or forked processes.
 */
#include "fake_view.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>

#include "net.h"

#define BOARD_BYTES 65536  // the largest allgather: nranks blocks

struct weft_fake_board {
  pthread_barrier_t bar;
  int nranks;
  _Atomic int failed;  // the first failure's code, 0 for none
  weft_doorbell_t bell[WEFT_FAKE_VIEW_MAX_RANKS];
  uint8_t secret[16];
  unsigned char data[BOARD_BYTES];
};

// One rank's part, behind v->core.
typedef struct {
  weft_fake_board_t *b;
  int *host_of;
  int calls, fail_at;  // allgathers so far; the first to fail (0: none)
} rank_part_t;

weft_fake_board_t *weft_fake_board_new(int nranks) {
  if (nranks < 1 || nranks > WEFT_FAKE_VIEW_MAX_RANKS) return NULL;
  weft_fake_board_t *b = mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (b == MAP_FAILED) return NULL;
  pthread_barrierattr_t attr;
  pthread_barrierattr_init(&attr);
  pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  int err = pthread_barrier_init(&b->bar, &attr, (unsigned)nranks);
  pthread_barrierattr_destroy(&attr);
  if (err != 0) {
    munmap(b, sizeof(*b));
    return NULL;
  }
  b->nranks = nranks;
  if (getrandom(b->secret, sizeof(b->secret), 0) != (ssize_t)sizeof(b->secret))
    memset(b->secret, 0x5e, sizeof(b->secret));  // still the same on every rank
  return b;
}

void weft_fake_board_free(weft_fake_board_t *b) {
  if (b == NULL) return;
  pthread_barrier_destroy(&b->bar);
  munmap(b, sizeof(*b));
}

static rank_part_t *part(const weft_transport_view_t *v) { return v->core; }

void weft_fake_view_barrier(const weft_transport_view_t *v) { pthread_barrier_wait(&part(v)->b->bar); }

void weft_fake_view_fail_allgather_at(weft_transport_view_t *v, int k) {
  part(v)->calls = 0;
  part(v)->fail_at = k;
}

static ncclResult_t fake_allgather(const weft_transport_view_t *v, void *data, size_t size) {
  rank_part_t *r = part(v);
  if (++r->calls >= r->fail_at && r->fail_at > 0) return ncclSystemError;
  if (size * (size_t)v->nranks > BOARD_BYTES) return ncclInternalError;
  memcpy(r->b->data + size * (size_t)v->rank, (char *)data + size * (size_t)v->rank, size);
  pthread_barrier_wait(&r->b->bar);
  memcpy(data, r->b->data, size * (size_t)v->nranks);
  pthread_barrier_wait(&r->b->bar);  // the board is free for the next one
  return ncclSuccess;
}

// This rank's doorbell and those of its host's ranks; NULL for other hosts.
static weft_doorbell_t *fake_doorbell(const weft_transport_view_t *v, int rank) {
  if (rank < 0 || rank >= v->nranks || v->host_of[rank] != v->host_of[v->rank]) return NULL;
  return &part(v)->b->bell[rank];
}

static void fake_fail(const weft_transport_view_t *v, ncclResult_t code, const char *reason) {
  (void)reason;
  int none = 0;
  weft_fake_board_t *b = part(v)->b;
  atomic_compare_exchange_strong(&b->failed, &none, code == ncclSuccess ? ncclInternalError : (int)code);
  for (int p = 0; p < v->nranks; p++)
    if (fake_doorbell(v, p) != NULL) weft_doorbell_ring(fake_doorbell(v, p));
}

static int fake_failed(const weft_transport_view_t *v) { return atomic_load(&part(v)->b->failed) != 0; }

static pthread_once_t socket_once = PTHREAD_ONCE_INIT;
static ncclResult_t socket_init_res;

static void socket_init(void) { socket_init_res = weft_net_socket.init(); }

static const struct weft_net *fake_net_backend(ncclResult_t *res) {
  pthread_once(&socket_once, socket_init);
  *res = socket_init_res;
  return socket_init_res == ncclSuccess ? &weft_net_socket : NULL;
}

static int fake_net_device(const weft_transport_view_t *v, const weft_net_dev_t *devs, int ndevs, char *why,
                           size_t len) {
  (void)v, (void)devs, (void)ndevs;
  strncpy(why, "the test's choice", len);
  why[len - 1] = '\0';
  return 0;
}

ncclResult_t weft_fake_view_init(weft_transport_view_t *v, weft_fake_board_t *b, int rank, const int *host_of,
                                 size_t slot_bytes, size_t nslots) {
  memset(v, 0, sizeof(*v));
  rank_part_t *r = calloc(1, sizeof(*r));
  int n = b->nranks;
  if (r != NULL) r->host_of = malloc((size_t)n * sizeof(int));
  weft_conn_t *conns = calloc((size_t)WEFT_NUM_CLASSES * 2 * (size_t)n, sizeof(*conns));
  if (r == NULL || r->host_of == NULL || conns == NULL) {
    if (r != NULL) free(r->host_of);
    free(r);
    free(conns);
    return ncclSystemError;
  }
  memcpy(r->host_of, host_of, (size_t)n * sizeof(int));
  r->b = b;
  *v = (weft_transport_view_t){
      .rank = rank,
      .nranks = n,
      .host_of = r->host_of,
      .id_hash = 0x7465737476696577ull,
      .allgather = fake_allgather,
      .secret = b->secret,
      .secret_bytes = sizeof(b->secret),
      .doorbell = fake_doorbell,
      .fail = fake_fail,
      .failed = fake_failed,
      .net_backend = fake_net_backend,
      .net_device = fake_net_device,
      .slot_bytes = slot_bytes,
      .nslots = nslots,
      .conns = conns,
      .core = r,
  };
  return ncclSuccess;
}

void weft_fake_view_fini(weft_transport_view_t *v) {
  rank_part_t *r = part(v);
  if (r != NULL) free(r->host_of);
  free(r);
  free(v->conns);
  memset(v, 0, sizeof(*v));
}
