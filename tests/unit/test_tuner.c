/*
 * test_tuner.c — NCCL_ALGO and NCCL_PROTO parsing and the tuner's choices:
 * thresholds on one host, the cost model across hosts, the protocol.
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

static weft_proto_t proto(const char *spec, weft_coll_t coll, weft_algo_t algo, size_t count) {
  weft_tuner_params_t p = {.slot_bytes = 65536, .nslots = 8, .oneshot_max = 16384, .proto_spec = spec,
                           .ll_max = 4096};
  weft_coll_args_t a = {.coll = coll, .nranks = 4, .rank = 0, .count = count};
  return weft_tuner_proto(&p, &a, algo, 4);
}

Test(tuner, chooses_the_protocol_by_size_and_honours_nccl_proto, .timeout = 10) {
  cr_expect_eq(proto(NULL, WEFT_COLL_ALLREDUCE, WEFT_ALGO_ONESHOT, 2), WEFT_PROTO_LL, "small one-hop AllReduce: LL");
  cr_expect_eq(proto(NULL, WEFT_COLL_ALLREDUCE, WEFT_ALGO_ONESHOT, 1024), WEFT_PROTO_LL, "4 KiB per rank still fits");
  cr_expect_eq(proto(NULL, WEFT_COLL_ALLREDUCE, WEFT_ALGO_ONESHOT, 1025), WEFT_PROTO_SIMPLE, "past ll_max");
  cr_expect_eq(proto(NULL, WEFT_COLL_ALLREDUCE, WEFT_ALGO_RING, 2), WEFT_PROTO_SIMPLE, "LL carries one hop only");
  cr_expect_eq(proto(NULL, WEFT_COLL_BROADCAST, WEFT_ALGO_CHAIN, 2), WEFT_PROTO_LL, "small chain Broadcast: LL");
  cr_expect_eq(proto(NULL, WEFT_COLL_ALLGATHER, WEFT_ALGO_RING, 2), WEFT_PROTO_LL, "small ring AllGather: LL");
  cr_expect_eq(proto(NULL, WEFT_COLL_ALLTOALL, WEFT_ALGO_DIRECT, 2), WEFT_PROTO_LL, "small direct AlltoAll: LL");
  cr_expect_eq(proto(NULL, WEFT_COLL_REDUCESCATTER, WEFT_ALGO_RING, 2), WEFT_PROTO_LL, "small ring ReduceScatter: LL");
  cr_expect_eq(proto(NULL, WEFT_COLL_REDUCE, WEFT_ALGO_CHAIN, 2), WEFT_PROTO_SIMPLE, "Reduce has no LL path");
  cr_expect_eq(proto(NULL, WEFT_COLL_ALLGATHER, WEFT_ALGO_READ, 2), WEFT_PROTO_SIMPLE);
  cr_expect_eq(proto("Simple", WEFT_COLL_ALLREDUCE, WEFT_ALGO_ONESHOT, 2), WEFT_PROTO_SIMPLE);
  cr_expect_eq(proto("^ll", WEFT_COLL_ALLREDUCE, WEFT_ALGO_ONESHOT, 2), WEFT_PROTO_SIMPLE, "names ignore case");
  cr_expect_eq(proto("LL128,Simple", WEFT_COLL_ALLREDUCE, WEFT_ALGO_ONESHOT, 2), WEFT_PROTO_SIMPLE);
  cr_expect_eq(proto("broadcast:Simple", WEFT_COLL_ALLREDUCE, WEFT_ALGO_ONESHOT, 2), WEFT_PROTO_LL,
               "a section for another collective leaves AllReduce alone");
  cr_expect_eq(proto("allreduce:^LL", WEFT_COLL_ALLREDUCE, WEFT_ALGO_ONESHOT, 2), WEFT_PROTO_SIMPLE);
  cr_expect_eq(proto("LL", WEFT_COLL_ALLREDUCE, WEFT_ALGO_ONESHOT, 4096), WEFT_PROTO_SIMPLE,
               "LL alone still leaves calls it cannot carry to the slot path");
  cr_expect_eq(proto("LL,nosuch", WEFT_COLL_ALLREDUCE, WEFT_ALGO_ONESHOT, 2), WEFT_PROTO_LL, "unknown names are ignored");
  cr_expect_str_eq(weft_proto_name(WEFT_PROTO_LL128), "LL128");
}

static int can_read;  // what the transport offers in the current test

static int64_t read_min = 262144;  // WEFT_READ_MIN_BYTES in the current test

static int mapped;  // the buffers lie in symmetric windows every rank maps

static ncclResult_t choose(const char *spec, weft_coll_t coll, int n, size_t count, weft_algo_t *algo,
                           size_t *slice) {
  weft_tuner_params_t p = {.slot_bytes = 65536, .nslots = 8, .oneshot_max = 16384, .algo_spec = spec,
                           .can_read = can_read, .read_min = read_min, .mapped = mapped};
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
  cr_assert_eq(choose("broadcast:ring", WEFT_COLL_BROADCAST, 4, 100, &algo, &slice), ncclSuccess,
               "an algorithm list that cannot serve the call leaves weft's choice");
  cr_expect_eq(algo, WEFT_ALGO_CHAIN);
  cr_assert_eq(choose("read", WEFT_COLL_ALLREDUCE, 4, 1 << 20, &algo, &slice), ncclSuccess,
               "single copy cannot be forced where peers' memory is out of reach");
  cr_expect_eq(algo, WEFT_ALGO_RING, "weft's choice instead");
}

// NCCL applies an algorithm list only where it can: NCCL_ALGO=ring or Tree
// must leave Broadcast, AlltoAll, Gather, Scatter and Send/Recv running.
Test(tuner, nccl_algo_applies_only_where_it_can_run, .timeout = 10) {
  static const char *const specs[] = {"ring", "Tree", "NVLS", "^ring,chain,direct,oneshot,read"};
  for (int i = 0; i < 4; i++) {
    for (int c = 0; c < WEFT_NUM_COLLS; c++) {
      for (size_t count = 2; count <= (1u << 20); count *= 512) {
        weft_algo_t algo = WEFT_NUM_ALGOS, dflt = WEFT_NUM_ALGOS;
        size_t slice;
        cr_assert_eq(choose(specs[i], (weft_coll_t)c, 4, count, &algo, &slice), ncclSuccess,
                     "NCCL_ALGO=%s, %s of %zu", specs[i], weft_coll_name((weft_coll_t)c), count);
        cr_assert_eq(choose(NULL, (weft_coll_t)c, 4, count, &dflt, &slice), ncclSuccess);
        cr_expect(weft_algo_supports(algo, (weft_coll_t)c), "NCCL_ALGO=%s gave %s an algorithm it lacks: %s",
                  specs[i], weft_coll_name((weft_coll_t)c), weft_algo_name(algo));
        unsigned m[WEFT_NUM_COLLS];
        weft_tuner_parse_algos(specs[i], m);
        weft_algo_t named = i == 0 ? WEFT_ALGO_RING : WEFT_ALGO_TREE;
        if (i < 2 && weft_algo_supports(named, (weft_coll_t)c))
          cr_expect_eq(algo, named, "NCCL_ALGO=%s, %s of %zu", specs[i], weft_coll_name((weft_coll_t)c), count);
        else if (!(m[c] & BIT(algo)))
          cr_expect_eq(algo, dflt, "NCCL_ALGO=%s cannot serve %s: weft's choice, %s, not %s", specs[i],
                       weft_coll_name((weft_coll_t)c), weft_algo_name(dflt), weft_algo_name(algo));
      }
    }
  }
}

Test(tuner, nccl_only_algorithm_names_are_ignored, .timeout = 10) {
  unsigned m[WEFT_NUM_COLLS];
  cr_assert_eq(weft_tuner_parse_algos("NVLS,CollNetDirect,CollNetChain,NVLSTree,PAT", m), 0);
  for (int c = 0; c < WEFT_NUM_COLLS; c++) cr_expect_eq(m[c], 0u, "they allow nothing of weft's");
  cr_assert_eq(weft_tuner_parse_algos("nvls,ring", m), 0);
  cr_expect_eq(m[WEFT_COLL_ALLREDUCE], BIT(WEFT_ALGO_RING));
  cr_assert_eq(weft_tuner_parse_algos("^PAT", m), 0);
  cr_expect_eq(m[WEFT_COLL_ALLGATHER], ALL, "excluding what weft lacks excludes nothing");
  cr_assert_eq(weft_tuner_parse_algos("ring,nosuchalgo", m), 0);
  cr_expect_eq(m[WEFT_COLL_ALLREDUCE], BIT(WEFT_ALGO_RING), "an unknown name is dropped (with a WARN)");
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
  cr_expect_eq(algo, WEFT_ALGO_READ, "AlltoAll pushes its blocks");
  cr_assert_eq(choose(NULL, WEFT_COLL_GATHER, 2, 1 << 20, &algo, &slice), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_DIRECT, "Gather has no single-copy schedule");
  cr_assert_eq(choose("^read", WEFT_COLL_ALLGATHER, 2, 1 << 20, &algo, &slice), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_RING);
  cr_assert_eq(choose("read", WEFT_COLL_BROADCAST, 2, 16, &algo, &slice), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_READ, "NCCL_ALGO forces single copy for small calls too");
  can_read = 0;
}

// WEFT_READ_MIN_BYTES=-1: each collective's measured threshold (counts of 4-byte elements).
Test(tuner, single_copy_thresholds_by_collective, .timeout = 10) {
  weft_algo_t algo;
  size_t slice;
  can_read = 1;
  read_min = -1;
  cr_assert_eq(choose(NULL, WEFT_COLL_BROADCAST, 2, 65536 / 4, &algo, &slice), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_READ, "Broadcast of 64 KiB: single copy");
  cr_assert_eq(choose(NULL, WEFT_COLL_BROADCAST, 2, 32768 / 4, &algo, &slice), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_CHAIN, "Broadcast of 32 KiB: the chain");
  cr_assert_eq(choose(NULL, WEFT_COLL_ALLGATHER, 4, 16384 / 4, &algo, &slice), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_READ, "AllGather of 16 KiB per rank: single copy");
  cr_assert_eq(choose(NULL, WEFT_COLL_ALLGATHER, 4, 8192 / 4, &algo, &slice), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_RING);
  cr_assert_eq(choose(NULL, WEFT_COLL_ALLTOALL, 2, 32768 / 4, &algo, &slice), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_READ, "AlltoAll of 32 KiB blocks: single copy");
  cr_assert_eq(choose(NULL, WEFT_COLL_ALLTOALL, 2, 16384 / 4, &algo, &slice), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_DIRECT);
  cr_assert_eq(choose(NULL, WEFT_COLL_ALLREDUCE, 2, 1 << 24, &algo, &slice), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_RING, "AllReduce folds in the ring at every size");
  cr_assert_eq(choose(NULL, WEFT_COLL_REDUCESCATTER, 2, 1 << 24, &algo, &slice), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_RING);
  can_read = 0;
  cr_assert_eq(choose(NULL, WEFT_COLL_BROADCAST, 2, 1 << 24, &algo, &slice), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_CHAIN, "no single copy where peers' memory is out of reach");
  read_min = 262144;
}

// On mapped buffers a read is a load, and single copy starts earlier:
// AllGather and ReduceScatter from 4 KiB per rank, AllReduce and Broadcast
// from 8 KiB (AllReduce ahead of its one hop), AlltoAll from blocks of
// 32 KiB, Reduce never.
Test(tuner, single_copy_thresholds_on_mapped_buffers, .timeout = 10) {
  static const struct {
    weft_coll_t coll;
    size_t from;             // bytes per rank from which single copy runs
    weft_algo_t below;       // what runs just below
  } rows[] = {
      {WEFT_COLL_ALLGATHER, 4096, WEFT_ALGO_RING},   {WEFT_COLL_REDUCESCATTER, 4096, WEFT_ALGO_RING},
      {WEFT_COLL_BROADCAST, 8192, WEFT_ALGO_CHAIN},  {WEFT_COLL_ALLTOALL, 32768, WEFT_ALGO_DIRECT},
      {WEFT_COLL_ALLREDUCE, 8192, WEFT_ALGO_ONESHOT},
  };
  weft_algo_t algo;
  size_t slice;
  can_read = 1, read_min = -1, mapped = 1;
  for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
    const char *name = weft_coll_name(rows[i].coll);
    cr_assert_eq(choose(NULL, rows[i].coll, 2, rows[i].from / 4, &algo, &slice), ncclSuccess);
    cr_expect_eq(algo, WEFT_ALGO_READ, "%s of %zu bytes per rank on mapped buffers: single copy", name, rows[i].from);
    cr_assert_eq(choose(NULL, rows[i].coll, 2, rows[i].from / 8, &algo, &slice), ncclSuccess);
    cr_expect_eq(algo, rows[i].below, "%s of %zu bytes per rank: %s, not %s", name, rows[i].from / 2,
                 weft_algo_name(rows[i].below), weft_algo_name(algo));
  }
  cr_assert_eq(choose(NULL, WEFT_COLL_REDUCE, 2, 1 << 24, &algo, &slice), ncclSuccess);
  cr_expect_neq(algo, WEFT_ALGO_READ, "Reduce folds through the slots at every size");
  mapped = 0;
  cr_assert_eq(choose(NULL, WEFT_COLL_BROADCAST, 2, 8192 / 4, &algo, &slice), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_CHAIN, "unmapped buffers keep their own thresholds");
  can_read = 0, read_min = 262144;
}

Test(tuner, parses_the_multi_host_algorithms, .timeout = 10) {
  unsigned m[WEFT_NUM_COLLS];
  cr_assert_eq(weft_tuner_parse_algos("allreduce:Tree,recursive;allreduce:rabenseifner,HIER", m), 0);
  cr_expect_eq(m[WEFT_COLL_ALLREDUCE], BIT(WEFT_ALGO_RABENSEIFNER) | BIT(WEFT_ALGO_HIER), "the last section wins");
  cr_assert_eq(weft_tuner_parse_algos("^tree,recursive", m), 0);
  cr_expect_eq(m[WEFT_COLL_ALLREDUCE], ALL & ~(BIT(WEFT_ALGO_TREE) | BIT(WEFT_ALGO_RECURSIVE)));
}

Test(tuner, one_host_can_force_the_multi_host_algorithms, .timeout = 10) {
  weft_algo_t algo;
  size_t slice;
  static const weft_algo_t forced[] = {WEFT_ALGO_TREE, WEFT_ALGO_RECURSIVE, WEFT_ALGO_RABENSEIFNER, WEFT_ALGO_HIER};
  // Distinct strings: the tuner caches the parse of NCCL_ALGO by its pointer.
  static const char *const specs[] = {"allreduce:tree", "allreduce:recursive", "allreduce:rabenseifner",
                                      "allreduce:hier"};
  for (int i = 0; i < 4; i++) {
    const char *spec = specs[i];
    cr_assert_eq(choose(spec, WEFT_COLL_ALLREDUCE, 4, 1 << 20, &algo, &slice), ncclSuccess);
    cr_expect_eq(algo, forced[i], "%s", spec);
    cr_assert_eq(choose(spec, WEFT_COLL_ALLREDUCE, 4, 2, &algo, &slice), ncclSuccess);
    cr_expect_eq(algo, forced[i], "%s for small counts too", spec);
  }
  // Unforced, one host keeps its thresholds: one hop, then the ring.
  cr_assert_eq(choose(NULL, WEFT_COLL_ALLREDUCE, 8, 2, &algo, &slice), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_ONESHOT);
  cr_assert_eq(choose(NULL, WEFT_COLL_ALLREDUCE, 8, 1 << 20, &algo, &slice), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_RING);
}

static ncclResult_t choose_on(const char *spec, const int *host_of, int nhosts, int n, int rank, size_t count,
                              weft_algo_t *algo) {
  weft_tuner_params_t p = {.slot_bytes = 65536, .nslots = 8, .oneshot_max = 16384, .algo_spec = spec};
  weft_coll_args_t a = {.coll = WEFT_COLL_ALLREDUCE, .nranks = n, .rank = rank, .count = count, .host_of = host_of,
                        .nhosts = nhosts};
  return weft_tuner_choose(&p, &a, 4, algo);
}

// Hosts of the given sizes, in rank order.
static int hosts_of_sizes(const int *sizes, int nhosts, int *host_of) {
  int n = 0;
  for (int h = 0; h < nhosts; h++)
    for (int i = 0; i < sizes[h]; i++) host_of[n++] = h;
  return n;
}

Test(tuner, prices_multi_host_calls_alike_on_every_rank, .timeout = 60) {
  static const int layouts[][4] = {{4, 4, 0, 0}, {2, 2, 2, 2}, {1, 1, 1, 1}, {3, 5, 0, 0}, {2, 1, 3, 0}};
  int host_of[16];
  for (int l = 0; l < 5; l++) {
    int nhosts = 0;
    while (nhosts < 4 && layouts[l][nhosts]) nhosts++;
    int n = hosts_of_sizes(layouts[l], nhosts, host_of);
    for (size_t count = 1; count <= (16u << 20); count *= 8) {
      weft_algo_t first, other;
      cr_assert_eq(choose_on(NULL, host_of, nhosts, n, 0, count, &first), ncclSuccess);
      for (int r = 1; r < n; r++) {
        cr_assert_eq(choose_on(NULL, host_of, nhosts, n, r, count, &other), ncclSuccess);
        cr_assert_eq(other, first, "layout %d count %zu: rank %d picks %s, rank 0 %s", l, count, r,
                     weft_algo_name(other), weft_algo_name(first));
      }
      cr_expect(weft_algo_fits(first, &(weft_coll_args_t){.coll = WEFT_COLL_ALLREDUCE, .nranks = n,
                                                          .host_of = host_of, .nhosts = nhosts},
                               NULL, 0),
                "layout %d: %s cannot run here", l, weft_algo_name(first));
    }
  }
}

Test(tuner, multi_host_choices_follow_the_cost_model, .timeout = 30) {
  int host_of[16];
  weft_algo_t algo;
  // Eight hosts of one rank, 4 bytes: latency rules; the 2(n-1)-hop ring loses.
  int ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  int n = hosts_of_sizes(ones, 8, host_of);
  cr_assert_eq(choose_on(NULL, host_of, 8, n, 0, 1, &algo), ncclSuccess);
  cr_expect(algo == WEFT_ALGO_RECURSIVE || algo == WEFT_ALGO_ONESHOT || algo == WEFT_ALGO_TREE,
            "small call across 8 hosts: %s", weft_algo_name(algo));
  // Two hosts of eight, 64 MiB: bandwidth across the network rules; the flat
  // ring sends 2(n-1)/n of the buffer through each host's link, the
  // hierarchical schedules about half of that.
  int two[2] = {8, 8};
  n = hosts_of_sizes(two, 2, host_of);
  cr_assert_eq(choose_on(NULL, host_of, 2, n, 0, 16u << 20, &algo), ncclSuccess);
  cr_expect(algo == WEFT_ALGO_HIER || algo == WEFT_ALGO_RABENSEIFNER, "large call on 2x8: %s", weft_algo_name(algo));
  // Forced and allowed: NCCL_ALGO still narrows the choice.
  cr_assert_eq(choose_on("allreduce:ring,tree", host_of, 2, n, 0, 16u << 20, &algo), ncclSuccess);
  cr_expect(algo == WEFT_ALGO_RING || algo == WEFT_ALGO_TREE);
  cr_assert_eq(choose_on("allreduce:tree", host_of, 2, n, 3, 1, &algo), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_TREE);
}

Test(tuner, hier_is_never_picked_on_uneven_hosts, .timeout = 30) {
  int sizes[3] = {2, 3, 3}, host_of[8];
  int n = hosts_of_sizes(sizes, 3, host_of);
  weft_algo_t algo;
  for (size_t count = 1; count <= (16u << 20); count *= 4) {
    cr_assert_eq(choose_on(NULL, host_of, 3, n, 0, count, &algo), ncclSuccess);
    cr_expect_neq(algo, WEFT_ALGO_HIER, "count %zu", count);
  }
  cr_assert_eq(choose_on("allreduce:hier", host_of, 3, n, 0, 1 << 20, &algo), ncclSuccess,
               "hier cannot run on hosts of different sizes: weft's choice instead");
  cr_expect_neq(algo, WEFT_ALGO_HIER);
  cr_assert_eq(choose_on("allreduce:hier,ring", host_of, 3, n, 0, 1 << 20, &algo), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_RING);
}
