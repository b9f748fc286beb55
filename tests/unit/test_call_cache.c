/*
 * test_call_cache.c — the communicator's decision cache (src/core/
 * call_cache.c): whatever order shapes come in, and however many, it gives
 * exactly the tuner's answer; and a setting that changes the answer is part
 * of the key.
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "call_cache.h"

static const weft_coll_t colls[] = {WEFT_COLL_ALLREDUCE, WEFT_COLL_BROADCAST, WEFT_COLL_REDUCE,
                                    WEFT_COLL_ALLGATHER, WEFT_COLL_REDUCESCATTER, WEFT_COLL_ALLTOALL};
#define NCOLLS (int)(sizeof(colls) / sizeof(colls[0]))

typedef struct {
  weft_coll_t coll;
  size_t count, esize;
  int root;
} shape_t;

static const int two_hosts[8] = {0, 0, 0, 0, 1, 1, 1, 1};

static weft_coll_args_t args_of(const shape_t *s, int across_hosts) {
  weft_coll_args_t a = {.coll = s->coll, .nranks = 8, .rank = 0, .count = s->count, .root = s->root};
  if (across_hosts) a.host_of = two_hosts, a.nhosts = 2;
  return a;
}

static weft_tuner_params_t params(const char *algo_spec) {
  weft_tuner_params_t p = {.slot_bytes = 65536, .nslots = 8, .oneshot_max = 16384, .can_read = 1,
                           .read_min = -1, .algo_spec = algo_spec, .ll_max = 4096};
  return p;
}

// Checks that the cache's answer for every shape, asked in random order,
// equals the tuner's own.
static void agrees_with_the_tuner(int across_hosts) {
  enum { SHAPES = 300, CALLS = 3000 };  // far more shapes than the cache holds
  static const size_t esizes[] = {1, 2, 4, 8};
  shape_t shapes[SHAPES];
  srand(7);
  for (int i = 0; i < SHAPES; i++)
    shapes[i] = (shape_t){.coll = colls[rand() % NCOLLS],
                          .count = (size_t)1 << (rand() % 25),
                          .esize = esizes[rand() % 4],
                          .root = rand() % 8};
  weft_call_cache_t *cache = calloc(1, sizeof(*cache));
  cr_assert_not_null(cache);
  weft_tuner_params_t p = params(NULL);
  for (int c = 0; c < CALLS; c++) {
    // Mostly a few hot shapes, as a training loop calls, with others between.
    const shape_t *s = &shapes[c % 4 == 0 ? rand() % SHAPES : rand() % 6];
    weft_coll_args_t cached = args_of(s, across_hosts), direct = cached;
    weft_algo_t algo, want;
    weft_proto_t proto;
    cr_assert_eq(weft_call_choose(cache, &p, &cached, s->esize, &algo, &proto), ncclSuccess);
    cr_assert_eq(weft_tuner_choose(&p, &direct, s->esize, &want), ncclSuccess);
    cr_assert_eq(algo, want, "call %d: %s of %zu x %zu root %d", c, weft_coll_name(s->coll), s->count, s->esize,
                 s->root);
    cr_assert_eq(cached.slice, direct.slice);
    cr_assert_eq(proto, weft_tuner_proto(&p, &direct, want, s->esize));
  }
  free(cache);
}

Test(call_cache, gives_the_tuners_answer_for_every_shape_on_one_host, .timeout = 30) { agrees_with_the_tuner(0); }

Test(call_cache, gives_the_tuners_answer_for_every_shape_across_hosts, .timeout = 60) { agrees_with_the_tuner(1); }

Test(call_cache, a_changed_nccl_algo_is_a_new_key, .timeout = 10) {
  weft_call_cache_t *cache = calloc(1, sizeof(*cache));
  cr_assert_not_null(cache);
  shape_t s = {.coll = WEFT_COLL_ALLREDUCE, .count = 2, .esize = 4};
  weft_algo_t algo;
  weft_proto_t proto;
  weft_tuner_params_t p = params(NULL);
  weft_coll_args_t a = args_of(&s, 0);
  cr_assert_eq(weft_call_choose(cache, &p, &a, 4, &algo, &proto), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_ONESHOT);
  p = params("ring");  // another NCCL_ALGO value: the env accessor hands out another string
  a = args_of(&s, 0);
  cr_assert_eq(weft_call_choose(cache, &p, &a, 4, &algo, &proto), ncclSuccess);
  cr_expect_eq(algo, WEFT_ALGO_RING, "the remembered one-hop answer is not reused");
  p.mapped = 1;
  s.count = 1 << 20;
  a = args_of(&s, 0);
  weft_coll_args_t direct = a;
  weft_algo_t want;
  cr_assert_eq(weft_call_choose(cache, &p, &a, 4, &algo, &proto), ncclSuccess);
  cr_assert_eq(weft_tuner_choose(&p, &direct, 4, &want), ncclSuccess);
  cr_expect_eq(algo, want);
  free(cache);
}
