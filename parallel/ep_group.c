/*
 * ep_group.c — the expert-parallel (EP) and expert-data-parallel (EDP)
 * communicators, split from a data-parallel group as Megatron-Core forms
 * them (EP divides DP): consecutive data-parallel ranks share an EP group,
 * and the ranks at the same place of every EP group (so holding the same
 * experts) form an EDP group, over which the experts' gradients are
 * reduced. With context parallelism the ranks of a CP group hold the same
 * experts and see other tokens, so the EDP group is split from DP x CP:
 * every rank of it at the same place of its EP group. The mesh itself is
 * untouched: these are two more splits of its communicators.
 */
#include <string.h>

#include "moe.h"
#include "par_util.h"

ncclResult_t weft_ep_groups_create(ncclComm_t dp_comm, ncclComm_t replica_comm, int ep, weft_ep_groups_t *g) {
  if (g == NULL) PAR_INVALID("weft_ep_groups_create: groups is NULL");
  memset(g, 0, sizeof(*g));
  if (dp_comm == NULL) PAR_INVALID("weft_ep_groups_create: dp_comm is NULL");
  if (replica_comm == NULL) replica_comm = dp_comm;
  int dp = 0, rank = 0, replicas = 0, at = 0;
  PAR_CHECK(ncclCommCount(dp_comm, &dp));
  PAR_CHECK(ncclCommUserRank(dp_comm, &rank));
  PAR_CHECK(ncclCommCount(replica_comm, &replicas));
  PAR_CHECK(ncclCommUserRank(replica_comm, &at));
  if (ep < 1 || dp % ep != 0)
    PAR_INVALID("weft_ep_groups_create: the expert-parallel size %d does not divide the data-parallel size %d", ep,
                dp);
  if (replicas % dp != 0)
    PAR_INVALID("weft_ep_groups_create: the replica group's %d ranks are not a multiple of the data-parallel %d",
                replicas, dp);
  *g = (weft_ep_groups_t){NULL, NULL, ep, rank % ep, replicas / ep, 0};
  ncclResult_t res;
  PAR_CHECK_GOTO(ncclCommSplit(dp_comm, rank / ep, rank % ep, &g->ep_comm, NULL), res, fail);
  PAR_CHECK_GOTO(ncclCommSplit(replica_comm, rank % ep, at, &g->edp_comm, NULL), res, fail);
  PAR_CHECK_GOTO(ncclCommUserRank(g->edp_comm, &g->edp_rank), res, fail);
  return ncclSuccess;
fail:
  weft_ep_groups_destroy(g);
  return res;
}

ncclResult_t weft_ep_groups_destroy(weft_ep_groups_t *g) {
  if (g == NULL) return ncclSuccess;
  ncclResult_t res = ncclSuccess, r;
  if (g->ep_comm != NULL && (r = ncclCommDestroy(g->ep_comm)) != ncclSuccess) res = r;
  if (g->edp_comm != NULL && (r = ncclCommDestroy(g->edp_comm)) != ncclSuccess && res == ncclSuccess) res = r;
  g->ep_comm = g->edp_comm = NULL;
  return res;
}
