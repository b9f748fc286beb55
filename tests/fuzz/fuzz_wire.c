/*
 * fuzz_wire.c — libFuzzer target: the start-up wire format, as read by the
 * real receiving code from real loopback TCP connections whose other end is
 * the harness playing a hostile peer.
 *
 * Input: byte 0 picks the mode (low two bits) and options (the rest), byte 1
 * the shape (nranks, rank, block size), the remaining bytes are what the
 * hostile peer sends. Options let the harness splice in the job's secret and
 * magic, so the fuzzer reaches the code behind authentication too (a real
 * stranger could not; a buggy or stale rank of the same job could).
 *
 *   mode 0, rendezvous root: root_main (src/boot/rendezvous.c) runs in a thread on
 *     a loopback listener; one hostile connection sends the bytes (a
 *     rdv_msg_t, then peer entries). The harness then completes the job with
 *     well-formed hellos, so the root always finishes, and joins the thread.
 *     The hostile message's nranks is reduced to -16..16 (an authenticated
 *     client may ask for any table size; that is trust, not parsing) and its
 *     root-0 address is cleared so a sub-root never connects off this host.
 *   mode 1, a rank joining: weft_rendezvous_join talks to a hostile root
 *     that reads the hello and answers with the bytes (header, then an error
 *     text or a rank table).
 *   mode 2, the bootstrap ring: weft_bootstrap_connect accepts a hostile
 *     connection (hello from the bytes) ahead of the real neighbour, then
 *     weft_bootstrap_allgather and weft_bootstrap_barrier read their headers
 *     and blocks from whichever connection it kept.
 *
 * rendezvous.c and bootstrap.c are included rather than linked so that the
 * root's thread function and the private message types are reachable without
 * changing those files; their objects are then not pulled from the archive.
 * Waits are bounded by WEFT_TIMEOUT=1; every peer closes its end after
 * sending, so a well-behaved library sees EOF instead of waiting.
 */
#include "rendezvous.c"  // IWYU pragma: keep (static root_main, rdv_msg_t)
#include "bootstrap.c"   // IWYU pragma: keep (ring_hello_t, ring_header_t)

#include <pthread.h>
#include <stddef.h>

#include "fuzz_common.h"

enum { OPT_SECRET = 0x4, OPT_MAGIC = 0x8, OPT_FIX = 0x10 };

static const uint8_t job_secret[WEFT_SECRET_BYTES] = {
    0x5a, 0x17, 0x33, 0x90, 0x01, 0xfe, 0x42, 0x7c, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
    0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_setup_process();
  return 0;
}

static weft_id_t job_id(void) {
  weft_id_t id = {.magic = WEFT_ID_MAGIC};
  memcpy(id.secret, job_secret, WEFT_SECRET_BYTES);
  return id;
}

static void loopback_any(weft_sockaddr_t *a) {
  memset(a, 0, sizeof(*a));
  a->sin.sin_family = AF_INET;
  a->sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
}

/* ---------- mode 0: the rendezvous root ---------- */

static int send_hello(const struct sockaddr_in *root, const weft_id_t *id, int nranks, int nid, int k, int rank) {
  rdv_msg_t m;
  msg_init(&m, id, RDV_HELLO);
  m.nranks = nranks;
  m.nid = nid;
  m.root_index = k;
  m.count = 1;
  weft_peer_info_t me = {.rank = rank};
  uint8_t hello[sizeof(m) + sizeof(me)];  // on the wire back to back, no padding
  memcpy(hello, &m, sizeof(m));
  memcpy(hello + sizeof(m), &me, sizeof(me));
  int fd = fuzz_connect(root);
  if (fd >= 0 && fuzz_send_all(fd, hello, sizeof(hello)) != 0) {
    close(fd);
    fd = -1;
  }
  return fd;
}

static void fuzz_root(uint8_t opts, const uint8_t *data, size_t size) {
  weft_id_t id = job_id();
  uint8_t *msg = malloc(size + 1);
  memcpy(msg, data, size);
  rdv_msg_t m;
  memset(&m, 0, sizeof(m));
  int latched = 0;
  if (size >= sizeof(m)) {
    memcpy(&m, msg, sizeof(m));
    if (opts & OPT_SECRET) memcpy(m.secret, job_secret, WEFT_SECRET_BYTES);
    if (opts & OPT_MAGIC) m.magic = WEFT_ID_MAGIC;
    m.nranks %= 17;
    memset(&m.root0, 0, sizeof(m.root0));
    memcpy(msg, &m, sizeof(m));
    // Does this header fix the job's shape (root_take), whatever follows it?
    latched = msg_authentic(&m, &id) && (m.type == RDV_HELLO || m.type == RDV_BATCH) && m.nranks > 0 &&
              m.nid > 0 && m.nid <= m.nranks && m.root_index >= 0 && m.root_index < m.nid;
  }
  root_t *rt = calloc(1, sizeof(*rt));
  if (rt == NULL) {
    free(msg);
    return;
  }
  rt->id = id;
  rt->nranks = -1;
  weft_sockaddr_t addr;
  loopback_any(&addr);
  if (weft_socket_listen(&addr, &rt->listen_fd) != ncclSuccess) {
    free(rt);
    free(msg);
    return;
  }
  struct sockaddr_in root;
  memcpy(&root, &addr.sin, sizeof(root));
  pthread_t th;
  if (pthread_create(&th, NULL, root_main, rt) != 0) {
    weft_socket_close(&rt->listen_fd);
    free(rt);
    free(msg);
    return;
  }

  int fds[20], n = 0;
  fds[n] = fuzz_connect(&root);
  if (fds[n] >= 0) {
    fuzz_send_all(fds[n], msg, size);
    shutdown(fds[n], SHUT_WR);
    n++;
  }
  free(msg);
  // Complete the job so the root finishes now rather than at its timeout.
  if (!latched) {
    fds[n] = send_hello(&root, &id, 1, 1, 0, 0);
    n += fds[n] >= 0;
  } else {
    for (int r = 0; r < m.nranks; r++) {
      fds[n] = send_hello(&root, &id, m.nranks, m.nid, m.root_index, r);
      n += fds[n] >= 0;
    }
  }
  // A table the root hands out must name every rank in its own slot.
  for (int i = 1; i < n; i++) {
    struct pollfd p = {.fd = fds[i], .events = POLLIN};
    rdv_msg_t answer;
    if (poll(&p, 1, 3000) <= 0 || recv(fds[i], &answer, sizeof(answer), MSG_WAITALL) != (ssize_t)sizeof(answer) ||
        answer.type != RDV_TABLE || answer.count <= 0 || answer.count > 16)
      continue;
    weft_peer_info_t table[16];
    size_t bytes = sizeof(table[0]) * (size_t)answer.count;
    if (recv(fds[i], table, bytes, MSG_WAITALL) != (ssize_t)bytes) continue;
    for (int r = 0; r < answer.count; r++) {
      if (table[r].rank != r) {
        fprintf(stderr, "fuzz_wire: the root sent a table whose entry %d names rank %d\n", r, table[r].rank);
        abort();
      }
    }
    break;
  }
  fuzz_drain(fds, n, 3000);
  pthread_join(th, NULL);
  for (int i = 0; i < n; i++) close(fds[i]);
}

/* ---------- mode 1: a rank joining through a hostile root ---------- */

typedef struct {
  int listen_fd;
  uint8_t opts;
  int nranks;
  const uint8_t *data;
  size_t size;
} hostile_root_t;

static void *hostile_root_main(void *arg) {
  hostile_root_t *h = arg;
  struct pollfd p = {.fd = h->listen_fd, .events = POLLIN};
  if (poll(&p, 1, 3000) <= 0) return NULL;
  int fd = accept(h->listen_fd, NULL, NULL);
  if (fd < 0) return NULL;
  uint8_t hello[sizeof(rdv_msg_t) + sizeof(weft_peer_info_t)];
  size_t have = 0;
  int64_t deadline = fuzz_now_ms() + 2000;
  while (have < sizeof(hello) && fuzz_now_ms() < deadline) {
    struct pollfd q = {.fd = fd, .events = POLLIN};
    if (poll(&q, 1, 100) <= 0) continue;
    ssize_t r = recv(fd, hello + have, sizeof(hello) - have, 0);
    if (r <= 0) break;
    have += (size_t)r;
  }
  uint8_t *answer = malloc(h->size + 1);
  memcpy(answer, h->data, h->size);
  if (h->size >= sizeof(rdv_msg_t)) {
    rdv_msg_t m;
    memcpy(&m, answer, sizeof(m));
    weft_id_t id = job_id();
    if (h->opts & OPT_SECRET) memcpy(m.secret, id.secret, WEFT_SECRET_BYTES);
    if (h->opts & OPT_MAGIC) m.magic = WEFT_ID_MAGIC;
    if (h->opts & OPT_FIX) m.count = h->nranks;
    memcpy(answer, &m, sizeof(m));
  }
  fuzz_send_all(fd, answer, h->size);
  free(answer);
  close(fd);
  return NULL;
}

static void fuzz_join(uint8_t opts, uint8_t shape, const uint8_t *data, size_t size) {
  int nranks = 1 + (shape & 7), rank = (shape >> 3) % nranks;
  struct sockaddr_in at;
  hostile_root_t h = {.listen_fd = fuzz_listen(&at), .opts = opts, .nranks = nranks, .data = data, .size = size};
  if (h.listen_fd < 0) return;
  pthread_t th;
  if (pthread_create(&th, NULL, hostile_root_main, &h) != 0) {
    close(h.listen_fd);
    return;
  }
  weft_id_t id = job_id();
  memcpy(&id.root.sin, &at, sizeof(at));
  weft_peer_info_t me = {.rank = rank, .pid = (int32_t)getpid(), .host_hash = 1};
  loopback_any(&me.listen);
  weft_peer_info_t *table = calloc((size_t)nranks, sizeof(*table));
  ncclResult_t res = weft_rendezvous_join(&id, 1, nranks, &me, table);
  // A table that passed must name every rank in its slot.
  for (int r = 0; res == ncclSuccess && r < nranks; r++)
    if (table[r].rank != r) abort();
  free(table);
  pthread_join(th, NULL);
  close(h.listen_fd);
}

/* ---------- mode 2: the bootstrap ring ---------- */

static void fuzz_ring(uint8_t opts, uint8_t shape, const uint8_t *data, size_t size) {
  int nranks = 2 + (shape & 3), rank = (shape >> 2) % nranks;
  size_t block = 1 + (size_t)(shape >> 5) * 9;  // 1..64 bytes per rank
  int prev = (rank + nranks - 1) % nranks, next = (rank + 1) % nranks;

  weft_sockaddr_t mine;
  loopback_any(&mine);
  int listen_fd = -1;
  if (weft_socket_listen(&mine, &listen_fd) != ncclSuccess) return;
  struct sockaddr_in next_at, my_at;
  int next_fd = fuzz_listen(&next_at);
  memcpy(&my_at, &mine.sin, sizeof(my_at));
  weft_peer_info_t *peers = calloc((size_t)nranks, sizeof(*peers));
  for (int r = 0; r < nranks; r++) peers[r].rank = r;
  peers[rank].listen = mine;
  memcpy(&peers[next].listen.sin, &next_at, sizeof(next_at));

  // The hostile hello is the first sizeof(ring_hello_t) bytes; the rest is
  // what comes after the hello on both connections (allgather traffic).
  ring_hello_t hostile;
  memset(&hostile, 0, sizeof(hostile));
  size_t head = size < sizeof(hostile) ? size : sizeof(hostile);
  memcpy(&hostile, data, head);
  if (opts & OPT_SECRET) memcpy(hostile.secret, job_secret, WEFT_SECRET_BYTES);
  if (opts & OPT_MAGIC) hostile.magic = WEFT_ID_MAGIC;
  if (opts & OPT_FIX) hostile.rank = prev;
  ring_hello_t real = {.magic = WEFT_ID_MAGIC, .rank = prev};
  memcpy(real.secret, job_secret, WEFT_SECRET_BYTES);

  int fds[2] = {fuzz_connect(&my_at), fuzz_connect(&my_at)};
  if (fds[0] >= 0) {
    fuzz_send_all(fds[0], &hostile, head);
    fuzz_send_all(fds[0], data + head, size - head);
    shutdown(fds[0], SHUT_WR);
  }
  if (fds[1] >= 0) {
    fuzz_send_all(fds[1], &real, sizeof(real));
    fuzz_send_all(fds[1], data + head, size - head);
    shutdown(fds[1], SHUT_WR);
  }

  weft_bootstrap_t bs;
  ncclResult_t res = weft_bootstrap_connect(&bs, rank, nranks, job_secret, peers, &listen_fd);
  if (res == ncclSuccess) {
    uint8_t *buf = calloc((size_t)nranks, block);
    memset(buf + (size_t)rank * block, 0xa5, block);
    if (weft_bootstrap_allgather(&bs, buf, block) == ncclSuccess) weft_bootstrap_barrier(&bs);
    free(buf);
    weft_bootstrap_close(&bs);
  }
  free(peers);
  weft_socket_close(&listen_fd);
  for (int i = 0; i < 2; i++)
    if (fds[i] >= 0) close(fds[i]);
  if (next_fd >= 0) close(next_fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2 || size > 4096) return 0;
  uint8_t opts = data[0], shape = data[1];
  switch (opts & 3) {
    case 0: fuzz_root(opts, data + 2, size - 2); break;
    case 1: fuzz_join(opts, shape, data + 2, size - 2); break;
    default: fuzz_ring(opts, shape, data + 2, size - 2); break;
  }
  return 0;
}
