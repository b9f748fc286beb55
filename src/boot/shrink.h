/*
 * shrink.h — how the ranks that remain after ncclCommShrink agree on the new
 * communicator without the excluded ranks (shrink_exchange.c).
 */
#ifndef WEFT_SHRINK_H
#define WEFT_SHRINK_H

#include <stdint.h>

#include "comm.h"

typedef struct {
  struct ncclComm *parent;
  const int *excl;        // excluded parent ranks, sorted, no duplicates
  int nexcl;
  const int *surv;        // parent ranks that remain, in order: surv[i] becomes rank i
  int m;                  // how many remain
  int me;                 // this rank's new rank (its index in surv)
  uint64_t id_hash;       // the new communicator's id_hash as this rank would name it (the leader's wins)
  weft_peer_info_t mine;  // this rank as the new communicator knows it (new bootstrap listener)
} weft_shrink_plan_t;

// Every survivor reports to the lowest one (the leader) through the
// leader's bootstrap listener; the leader checks that all exclude lists
// equal its own and answers with the member table. On success members[0..m-1]
// holds every survivor's entry and *id_hash the new communicator's id. Fails with ncclInvalidUsage on every
// survivor the leader reached when the lists differ, and with
// ncclRemoteError when a survivor never reports within WEFT_TIMEOUT; each
// failure is WARNed with the ranks concerned.
ncclResult_t weft_shrink_exchange(const weft_shrink_plan_t *plan, weft_peer_info_t *members, uint64_t *id_hash);

#endif
