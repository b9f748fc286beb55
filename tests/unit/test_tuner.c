/*
 * test_tuner.c — NCCL_ALGO parsing and the tuner's choices.
 */
#include <criterion/criterion.h>

#include "tuner.h"

#define BIT(a) (1u << (a))
#define ALL ((1u << WEFT_NUM_ALGOS) - 1)

Test(tuner, parses_nccl_algo_syntax, .timeout = 10) {
  unsigned m[WEFT_NUM_COLLS];
  cr_assert_eq(weft_tuner_parse_algos(NULL, m), 0);
  cr_expect_eq(m[WEFT_COLL_ALLREDUCE], ALL);

  cr_assert_eq(weft_tuner_parse_algos("ring", m), 0);
  for (int c = 0; c < WEFT_NUM_COLLS; c++) cr_expect_eq(m[c], BIT(WEFT_ALGO_RING));

  cr_assert_eq(weft_tuner_parse_algos("^oneshot", m), 0);
  cr_expect_eq(m[WEFT_COLL_ALLREDUCE], ALL & ~BIT(WEFT_ALGO_ONESHOT));

  cr_assert_eq(weft_tuner_parse_algos("allreduce:Ring, OneShot;broadcast:chain", m), 0);
  cr_expect_eq(m[WEFT_COLL_ALLREDUCE], BIT(WEFT_ALGO_RING) | BIT(WEFT_ALGO_ONESHOT));
  cr_expect_eq(m[WEFT_COLL_BROADCAST], BIT(WEFT_ALGO_CHAIN));
  cr_expect_eq(m[WEFT_COLL_GATHER], ALL, "collectives not named keep every algorithm");

  cr_expect_eq(weft_tuner_parse_algos("nosuchcoll:ring", m), -1);
  cr_expect_eq(m[WEFT_COLL_ALLREDUCE], ALL, "a bad value leaves everything allowed");
}

static int can_read;  // what the transport offers in the current test

static ncclResult_t choose(const char *spec, weft_coll_t coll, int n, size_t count, weft_algo_t *algo,
                           size_t *slice) {
  weft_tuner_params_t p = {.slot_bytes = 65536, .nslots = 8, .oneshot_max = 16384, .algo_spec = spec,
                           .can_read = can_read, .read_min = 262144};
  weft_coll_args_t a = {.coll = coll, .nranks = n, .rank = 0, .count = count};
  ncclResult_t res = weft_tuner_choose(&p, &a, 4, algo);
  *slice = a.slice;
  return res;
}

Test(tuner, picks_by_size_and_honours_nccl_algo, .timeout = 10) {
  weft_algo_t algo;
  size_t slice;
  cr_assert_eq(choose(NULL, WEFT_COLL_ALLREDUCE, 4, 2, &algo, &slice), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_ONESHOT, "small AllReduce goes in one hop");
  cr_expect_eq(slice, 4 * 65536 / 4, "slice is half the connection buffer");
  cr_assert_eq(choose(NULL, WEFT_COLL_ALLREDUCE, 4, 1 << 20, &algo, &slice), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_RING, "large AllReduce uses the ring");
  cr_assert_eq(choose(NULL, WEFT_COLL_ALLREDUCE, 1, 2, &algo, &slice), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_RING, "one rank has nothing to exchange");
  cr_assert_eq(choose("allreduce:oneshot", WEFT_COLL_ALLREDUCE, 4, 1 << 20, &algo, &slice), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_ONESHOT, "NCCL_ALGO forces one hop for large counts");
  cr_assert_eq(choose("^oneshot", WEFT_COLL_ALLREDUCE, 4, 2, &algo, &slice), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_RING);
  cr_assert_eq(choose(NULL, WEFT_COLL_BROADCAST, 4, 100, &algo, &slice), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_CHAIN);
  cr_expect_eq(choose("broadcast:ring", WEFT_COLL_BROADCAST, 4, 100, &algo, &slice), ncclInvalidUsage,
               "no allowed algorithm can run it");
  cr_expect_eq(choose("read", WEFT_COLL_ALLREDUCE, 4, 1 << 20, &algo, &slice), ncclInvalidUsage,
               "single copy cannot be forced where peers' memory is out of reach");
}

Test(tuner, single_copy_for_large_calls_when_memory_is_reachable, .timeout = 10) {
  weft_algo_t algo;
  size_t slice;
  can_read = 1;
  cr_assert_eq(choose(NULL, WEFT_COLL_ALLREDUCE, 2, 1 << 20, &algo, &slice), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_READ);
  cr_assert_eq(choose(NULL, WEFT_COLL_ALLREDUCE, 2, 16384, &algo, &slice), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_RING, "between one hop and the single-copy threshold the ring runs");
  cr_assert_eq(choose(NULL, WEFT_COLL_ALLTOALL, 2, 1 << 20, &algo, &slice), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_DIRECT, "AlltoAll has no single-copy schedule");
  cr_assert_eq(choose("^read", WEFT_COLL_ALLGATHER, 2, 1 << 20, &algo, &slice), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_RING);
  cr_assert_eq(choose("read", WEFT_COLL_BROADCAST, 2, 16, &algo, &slice), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_READ, "NCCL_ALGO forces single copy for small calls too");
  can_read = 0;
}
