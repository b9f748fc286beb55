/*
 * test_grow.c — ncclCommGetUniqueId and ncclCommGrow (NCCL 2.30) between
 * processes: two ranks grow their communicator to three with a process
 * that joins from outside; every rank of the new communicator has the rank
 * it should and its AllReduce adds up, and the parent still works. Also:
 * one outstanding id per communicator, and the calls' bad arguments.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "harness.h"

typedef struct {
  ncclUniqueId grow_id;
  int id_ready;           // set (atomically) once rank 0 wrote grow_id
  int rank_in_new[3], size_of_new[3];
  float sum_new[3], sum_parent[3];
} grow_out_t;

static grow_out_t *gout;

static ncclComm_t grow_existing(ncclComm_t comm, int rank) {
  ncclComm_t grown = NULL;
  WEFT_TEST_CHECK_RES(ncclCommGrow(comm, 2, NULL, -1, &grown, NULL), ncclInvalidArgument);  // not bigger
  WEFT_TEST_CHECK_RES(ncclCommGrow(comm, 3, NULL, rank, &grown, NULL), ncclInvalidArgument);  // existing: rank -1
  if (rank == 0) {
    ncclUniqueId id, again;
    WEFT_TEST_CHECK_RES(ncclCommGetUniqueId(comm, &id), ncclSuccess);
    WEFT_TEST_CHECK_RES(ncclCommGetUniqueId(comm, &again), ncclInvalidUsage);  // the first is not used yet
    WEFT_TEST_CHECK_RES(ncclCommGetUniqueId(comm, NULL), ncclInvalidArgument);
    gout->grow_id = id;
    __atomic_store_n(&gout->id_ready, 1, __ATOMIC_RELEASE);
    WEFT_TEST_CHECK_RES(ncclCommGrow(comm, 3, &id, -1, &grown, NULL), ncclSuccess);
    WEFT_TEST_CHECK_RES(ncclCommGetUniqueId(comm, &again), ncclSuccess);  // the grow consumed the first
  } else {
    WEFT_TEST_CHECK_RES(ncclCommGrow(comm, 3, NULL, -1, &grown, NULL), ncclSuccess);
  }
  return grown;
}

static ncclComm_t grow_new(int rank) {
  ncclComm_t grown = NULL;
  WEFT_TEST_CHECK_RES(ncclCommGrow(NULL, 3, NULL, rank, &grown, NULL), ncclInvalidArgument);  // no id
  for (int i = 0; i < 3000 && !__atomic_load_n(&gout->id_ready, __ATOMIC_ACQUIRE); i++) weft_test_sleep_ms(10);
  WEFT_TEST_CHECK(gout->id_ready, "rank 0 never published the grow id");
  ncclUniqueId id = gout->grow_id;
  WEFT_TEST_CHECK_RES(ncclCommGrow(NULL, 3, &id, 3, &grown, NULL), ncclInvalidArgument);  // rank out of range
  WEFT_TEST_CHECK_RES(ncclCommGrow(NULL, 3, &id, rank, &grown, NULL), ncclSuccess);
  return grown;
}

// Processes 0 and 1 make a 2-rank communicator; process 2 joins by growing it.
static int grow_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)nranks, (void)arg;
  ncclComm_t comm = NULL;
  if (rank < 2 && (comm = weft_test_init_rank(2, id, rank)) == NULL) return weft_test_failures();
  ncclComm_t grown = rank < 2 ? grow_existing(comm, rank) : grow_new(rank);
  if (grown == NULL) return weft_test_failures() + 1;
  WEFT_TEST_CHECK_RES(ncclCommUserRank(grown, &gout->rank_in_new[rank]), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclCommCount(grown, &gout->size_of_new[rank]), ncclSuccess);
  float x = (float)(rank + 1);
  WEFT_TEST_CHECK_RES(ncclAllReduce(&x, &gout->sum_new[rank], 1, ncclFloat32, ncclSum, grown, NULL), ncclSuccess);
  if (comm != NULL) {
    WEFT_TEST_CHECK_RES(ncclAllReduce(&x, &gout->sum_parent[rank], 1, ncclFloat32, ncclSum, comm, NULL),
                        ncclSuccess);
    WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  }
  WEFT_TEST_CHECK_RES(ncclCommDestroy(grown), ncclSuccess);
  return weft_test_failures();
}

Test(grow, two_ranks_grow_to_three, .timeout = 60) {
  weft_test_env_timeout(20);
  gout = weft_test_shared_alloc(sizeof(*gout));
  cr_assert_not_null(gout);
  cr_expect_eq(weft_test_fork_ranks(3, grow_body, NULL, 40), 0, "a rank failed (see stderr)");
  for (int r = 0; r < 3; r++) {
    cr_expect_eq(gout->rank_in_new[r], r, "process %d has rank %d in the grown communicator", r,
                 gout->rank_in_new[r]);
    cr_expect_eq(gout->size_of_new[r], 3);
    cr_expect_eq(gout->sum_new[r], 6.0f, "process %d: grown AllReduce gave %g", r, gout->sum_new[r]);
    if (r < 2) cr_expect_eq(gout->sum_parent[r], 3.0f, "process %d: parent AllReduce gave %g", r, gout->sum_parent[r]);
  }
  weft_test_shared_free(gout, sizeof(*gout));
}

// Nobody passes the id: every existing rank is told, none waits.
static int no_id_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return weft_test_failures();
  ncclComm_t grown = NULL;
  WEFT_TEST_CHECK_RES(ncclCommGrow(comm, nranks + 1, NULL, -1, &grown, NULL), ncclInvalidUsage);
  WEFT_TEST_CHECK(grown == NULL, "a failed grow returned a communicator");
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  return weft_test_failures();
}

Test(grow, without_the_id_every_rank_fails_cleanly, .timeout = 60) {
  weft_test_env_timeout(20);
  cr_expect_eq(weft_test_fork_ranks(2, no_id_body, NULL, 30), 0, "a rank failed (see stderr)");
  ncclComm_t grown = (ncclComm_t)1;
  cr_expect_eq(ncclCommGrow(NULL, 3, NULL, 0, &grown, NULL), ncclInvalidArgument);
  cr_expect_null(grown);
  cr_expect_eq(ncclCommGrow(NULL, 3, NULL, 0, NULL, NULL), ncclInvalidArgument);
}
