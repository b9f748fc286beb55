/*
 * fuzz_unique_id.c — libFuzzer target: ncclUniqueIds as a program might hand
 * them to ncclCommInitRank / ncclCommInitRankScalable (corrupted, truncated,
 * from another library, or crafted).
 *
 * Input: one to four 128-byte ids (a short tail is zero-padded), then one
 * byte choosing nranks (1..8) and the rank. Every id goes through the real
 * public entry point. The property checked: a garbage id fails cleanly and
 * fast — ncclInvalidArgument, without touching the network, when its magic
 * is wrong; some error (never success, never a hang) otherwise.
 *
 * An id with the right magic makes the library connect to the address it
 * carries. So that fuzzing never reaches for arbitrary hosts, the harness
 * points every IPv4/IPv6 root address at its own loopback "closer": a
 * listener whose thread accepts each connection and closes it at once, so the
 * rank sees EOF instead of waiting WEFT_TIMEOUT. Other address families are
 * left as the fuzzer wrote them (the library must refuse them by itself).
 * weft_socket_addr_str is run on the untouched address, as log lines would.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "nccl.h"
#include "rendezvous.h"
#include "socket.h"

static struct sockaddr_in closer_addr;
static int closer_fd = -1;

static void *closer_main(void *arg) {
  (void)arg;
  for (;;) {
    int fd = accept(closer_fd, NULL, NULL);
    if (fd >= 0) close(fd);
  }
  return NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_setup_process();
  closer_fd = fuzz_listen(&closer_addr);
  pthread_t th;
  if (closer_fd < 0 || pthread_create(&th, NULL, closer_main, NULL) != 0) {
    fprintf(stderr, "fuzz_unique_id: cannot start the loopback closer\n");
    abort();
  }
  pthread_detach(th);
  return 0;
}

// Keep the id's address away from the network (see the header comment).
static void redirect(ncclUniqueId *uid) {
  weft_id_t id;
  memcpy(&id, uid->internal, sizeof(id));
  char text[WEFT_ADDR_STRLEN];
  weft_socket_addr_str(&id.root, text, sizeof(text));
  if (id.root.sa.sa_family != AF_INET && id.root.sa.sa_family != AF_INET6) return;
  memset(&id.root, 0, sizeof(id.root));
  memcpy(&id.root.sin, &closer_addr, sizeof(closer_addr));
  memcpy(uid->internal, &id, sizeof(id));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  enum { MAX_IDS = 4 };
  ncclUniqueId ids[MAX_IDS];
  memset(ids, 0, sizeof(ids));
  size_t nid = size / NCCL_UNIQUE_ID_BYTES + (size % NCCL_UNIQUE_ID_BYTES != 0);
  if (nid == 0) nid = 1;
  if (nid > MAX_IDS) nid = MAX_IDS;
  size_t idbytes = size < nid * NCCL_UNIQUE_ID_BYTES ? size : nid * NCCL_UNIQUE_ID_BYTES;
  memcpy(ids, data, idbytes);
  uint8_t shape = size > idbytes ? data[idbytes] : 0;
  int nranks = 1 + (shape & 7);
  int rank = (shape >> 3) % nranks;

  int magic_ok = 1;
  for (size_t i = 0; i < nid; i++) {
    uint32_t magic;
    memcpy(&magic, ids[i].internal, sizeof(magic));
    magic_ok &= magic == WEFT_ID_MAGIC;
    redirect(&ids[i]);
  }

  ncclComm_t comm = NULL;
  ncclResult_t res;
  if (nid == 1)
    res = ncclCommInitRank(&comm, nranks, ids[0], rank);
  else
    res = ncclCommInitRankScalable(&comm, nranks, rank, (int)nid, ids, NULL);

  // The closer never answers, so no id can produce a communicator; with a
  // wrong magic the refusal must be an argument error.
  if (res == ncclSuccess || comm != NULL) {
    fprintf(stderr, "fuzz_unique_id: init succeeded against a closed root (res %d)\n", (int)res);
    abort();
  }
  if ((!magic_ok || (int)nid > nranks) && res != ncclInvalidArgument) {
    fprintf(stderr, "fuzz_unique_id: invalid id gave %d, not ncclInvalidArgument\n", (int)res);
    abort();
  }
  return 0;
}
