/*
 * ras.c — which communicators this process reports, and where its RAS
 * thread listens.
 *
 * A communicator joins at the end of its initialisation: its ranks
 * allgather their processes' RAS addresses, pids and hosts over the
 * bootstrap ring, so every process knows the job's other processes through
 * the communicators it shares with them. The first communicator starts the
 * RAS thread (ras_thread.c), the last one to leave stops it.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "debug.h"
#include "ras.h"
#include "ras_internal.h"

pthread_mutex_t weft_ras_lock = PTHREAD_MUTEX_INITIALIZER;
weft_ras_comm_t *weft_ras_comms;

ncclResult_t weft_ras_comm_join(struct ncclComm *comm) {
  weft_ras_peer_t *all = calloc((size_t)comm->nranks, sizeof(*all));
  weft_ras_comm_t *c = calloc(1, sizeof(*c));
  if (all == NULL || c == NULL) {
    free(all);
    free(c);
    return ncclSystemError;
  }
  weft_ras_thread_hold(&all[comm->rank]);

  ncclResult_t res = weft_bootstrap_allgather(&comm->bs, all, sizeof(*all));
  if (res != ncclSuccess) {
    free(all);
    free(c);
    weft_ras_thread_release();  // stops the thread if it was started for this one
    return res;
  }
  c->comm = comm;
  c->hash = comm->id_hash;
  c->rank = comm->rank;
  c->nranks = comm->nranks;
  memcpy(c->secret, comm->bs.secret, sizeof(c->secret));
  c->members = all;
  pthread_mutex_lock(&weft_ras_lock);
  c->next = weft_ras_comms;
  weft_ras_comms = c;
  pthread_mutex_unlock(&weft_ras_lock);
  weft_ras_wake();  // a monitoring client hears of it
  return ncclSuccess;
}

void weft_ras_comm_leave(struct ncclComm *comm) {
  int found = 0;
  pthread_mutex_lock(&weft_ras_lock);
  for (weft_ras_comm_t **p = &weft_ras_comms; *p != NULL; p = &(*p)->next) {
    if ((*p)->comm != comm) continue;
    weft_ras_comm_t *c = *p;
    *p = c->next;
    free(c->members);
    free(c);
    found = 1;
    break;
  }
  pthread_mutex_unlock(&weft_ras_lock);
  if (found) weft_ras_thread_release();  // the last one stops the thread
}
