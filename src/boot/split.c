/*
 * split.c — ncclCommSplit: a collective over the parent that builds one new
 * communicator per color, ranks ordered by (key, parent rank). The parent's
 * bootstrap carries everyone's (color, key, new listen address); each
 * child then connects its own bootstrap ring and transports. No root is
 * needed: the parent already authenticated everyone. Building a child from
 * a member table is shared with ncclCommShrink (shrink.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "checks.h"
#include "comm.h"
#include "placement.h"
#include "ras.h"
#include "util.h"

typedef struct {
  int32_t color;
  int32_t key;
  weft_peer_info_t info;  // rank = parent rank; listen = the child's bootstrap address
} split_card_t;

// Order members by key, then by parent rank.
static int card_cmp(const void *a, const void *b) {
  const split_card_t *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return x->info.rank < y->info.rank ? -1 : x->info.rank > y->info.rank;
}

ncclResult_t weft_comm_create_child(const struct ncclComm *parent, const struct ncclComm *settings, int rank,
                                    int nranks, const weft_peer_info_t *members, int *listen_fd, uint64_t id_hash,
                                    struct ncclComm **out) {
  ncclResult_t res = ncclSuccess;
  *out = NULL;
  struct ncclComm *child = calloc(1, sizeof(*child));
  if (child == NULL) {
    weft_socket_close(listen_fd);
    return ncclSystemError;
  }
  child->magic = WEFT_COMM_MAGIC;
  child->rank = rank;
  child->nranks = nranks;
  child->cuda_dev = parent->cuda_dev;
  child->cuda_ctx = parent->cuda_ctx;
  weft_comm_config_inherit(child, settings);
  weft_bootstrap_reset(&child->bs);
  pthread_mutex_init(&child->lock, NULL);
  WEFTCHECKGOTO(weft_bootstrap_connect(&child->bs, rank, nranks, parent->bs.secret, members, listen_fd), res, fail);
  WEFTCHECKGOTO(weft_comm_map_hosts(child), res, fail);
  WEFTCHECKGOTO(weft_comm_order_ranks(child), res, fail);
  WEFTCHECKGOTO(weft_comm_connect(child), res, fail);
  WEFTCHECKGOTO(weft_cuda_ipc_init(child), res, fail);
  weft_comm_restore_affinity(child);
  child->id_hash = id_hash;
  weft_comm_plugins_init(child);
  WEFTCHECKGOTO(weft_ras_comm_join(child), res, fail);
  weft_registry_add(child);
  *out = child;
  return ncclSuccess;
fail:
  weft_comm_restore_affinity(child);
  weft_socket_close(listen_fd);
  weft_comm_free(child);
  return res;
}

NCCL_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
         ncclConfig_t *config);
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config) {
  WEFTCHECK(weft_comm_check_parent(comm, "ncclCommSplit", 0));
  if (newcomm == NULL) {
    WARN("ncclCommSplit: newcomm is NULL");
    return ncclInvalidArgument;
  }
  *newcomm = NULL;
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
    WARN("ncclCommSplit: color=%d must be >= 0 or NCCL_SPLIT_NOCOLOR", color);
    return ncclInvalidArgument;
  }
  struct ncclComm settings = {0};
  weft_comm_config_inherit(&settings, comm);  // a NULL config inherits the parent's
  if (config != NULL) WEFTCHECK(weft_comm_read_config(config, "ncclCommSplit", &settings));
  weft_debug_set_rank(comm->rank);
  ncclResult_t res = ncclSuccess;
  int n = comm->nranks, listen_fd = -1;
  split_card_t *cards = calloc((size_t)n, sizeof(*cards));
  weft_peer_info_t *members = calloc((size_t)n, sizeof(*members));
  if (cards == NULL || members == NULL) { res = ncclSystemError; goto out; }

  split_card_t *mine = &cards[comm->rank];
  mine->color = color;
  mine->key = key;
  mine->info = (weft_peer_info_t){.rank = comm->rank, .pid = (int32_t)getpid(),
                                  .host_hash = comm->bs.peers[comm->rank].host_hash};
  if (color != NCCL_SPLIT_NOCOLOR) WEFTCHECKGOTO(weft_bootstrap_listen(&mine->info, &listen_fd), res, out);
  WEFTCHECKGOTO(weft_bootstrap_allgather(&comm->bs, cards, sizeof(*cards)), res, out);
  if (color == NCCL_SPLIT_NOCOLOR) goto out;

  split_card_t *group = calloc((size_t)n, sizeof(*group));
  if (group == NULL) { res = ncclSystemError; goto out; }
  int m = 0;
  for (int r = 0; r < n; r++)
    if (cards[r].color == color) group[m++] = cards[r];
  qsort(group, (size_t)m, sizeof(*group), card_cmp);
  int my_rank = -1;
  for (int i = 0; i < m; i++) {
    members[i] = group[i].info;
    members[i].rank = i;
    if (group[i].info.rank == comm->rank) my_rank = i;
  }
  free(group);

  uint64_t id_hash = comm->id_hash ^ weft_hash_bytes(&color, sizeof(color));
  WEFTCHECKGOTO(weft_comm_create_child(comm, &settings, my_rank, m, members, &listen_fd, id_hash, newcomm), res, out);
  INFO(WEFT_LOG_INIT, "comm %p split from %p: color %d key %d -> rank %d of %d", (void *)*newcomm, (void *)comm,
       color, key, my_rank, m);
out:
  weft_socket_close(&listen_fd);
  free(cards);
  free(members);
  return res;
}
