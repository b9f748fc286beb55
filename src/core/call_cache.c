/*
 * call_cache.c — remembering the tuner's answers per communicator (see
 * call_cache.h).
 *
 * An entry is a seqlock over plain words: the key (collective, count,
 * element size, root, the settings the answer depends on) and the answer
 * (algorithm, protocol, slice). A shape's set comes from a hash of its key;
 * a new shape replaces the set's ways in turn. Concurrent callers of one
 * communicator, which NCCL does not allow but weft survives, at worst ask
 * the tuner again.
 */
#include "call_cache.h"

enum { W_COUNT, W_SHAPE, W_ALGO_SPEC, W_PROTO_SPEC, W_ONESHOT_MAX, W_READ_MIN, W_SLICE, W_ANSWER, W_WORDS };
_Static_assert(sizeof(((weft_call_cache_entry_t *)0)->word) / sizeof(uint64_t) == W_WORDS, "entry layout");

static void key_of(const weft_tuner_params_t *tp, const weft_coll_args_t *args, size_t esize,
                   uint64_t key[W_SLICE]) {
  key[W_COUNT] = args->count;
  key[W_SHAPE] = (uint64_t)(esize & 0xffff) | (uint64_t)args->coll << 16 | (uint64_t)(tp->mapped != 0) << 31 |
                 (uint64_t)(uint32_t)args->root << 32;
  key[W_ALGO_SPEC] = (uint64_t)(uintptr_t)tp->algo_spec;
  key[W_PROTO_SPEC] = (uint64_t)(uintptr_t)tp->proto_spec;
  key[W_ONESHOT_MAX] = tp->oneshot_max;
  key[W_READ_MIN] = (uint64_t)tp->read_min;
}

static int lookup(weft_call_cache_entry_t *e, const uint64_t key[W_SLICE], uint64_t *slice, uint64_t *answer) {
  uint64_t v = atomic_load_explicit(&e->version, memory_order_acquire);
  if (v == 0 || (v & 1)) return 0;
  int same = 1;
  for (int i = 0; i < W_SLICE; i++) same &= atomic_load_explicit(&e->word[i], memory_order_relaxed) == key[i];
  *slice = atomic_load_explicit(&e->word[W_SLICE], memory_order_relaxed);
  *answer = atomic_load_explicit(&e->word[W_ANSWER], memory_order_relaxed);
  atomic_thread_fence(memory_order_acquire);
  return same && atomic_load_explicit(&e->version, memory_order_relaxed) == v;
}

static void store(weft_call_cache_entry_t *e, const uint64_t key[W_SLICE], uint64_t slice, uint64_t answer) {
  uint64_t v = atomic_load_explicit(&e->version, memory_order_relaxed);
  if ((v & 1) || !atomic_compare_exchange_strong_explicit(&e->version, &v, v + 1, memory_order_acquire,
                                                          memory_order_relaxed))
    return;  // another thread is writing it
  atomic_thread_fence(memory_order_release);
  for (int i = 0; i < W_SLICE; i++) atomic_store_explicit(&e->word[i], key[i], memory_order_relaxed);
  atomic_store_explicit(&e->word[W_SLICE], slice, memory_order_relaxed);
  atomic_store_explicit(&e->word[W_ANSWER], answer, memory_order_relaxed);
  atomic_store_explicit(&e->version, v + 2, memory_order_release);
}

static unsigned set_of(const uint64_t key[W_SLICE]) {
  uint64_t h = (key[W_COUNT] ^ key[W_SHAPE] * 0x9e3779b97f4a7c15ull) * 0xff51afd7ed558ccdull;
  return (unsigned)(h >> 32) % WEFT_CALL_CACHE_SETS;
}

ncclResult_t weft_call_choose(weft_call_cache_t *cache, const weft_tuner_params_t *tp, weft_coll_args_t *args,
                              size_t esize, weft_algo_t *algo, weft_proto_t *proto) {
  uint64_t key[W_SLICE], slice, answer;
  key_of(tp, args, esize, key);
  weft_call_cache_set_t *set = &cache->set[set_of(key)];
  for (int w = 0; w < WEFT_CALL_CACHE_WAYS; w++)
    if (lookup(&set->way[w], key, &slice, &answer)) {
      args->slice = slice;
      *algo = (weft_algo_t)(answer & 0xff);
      *proto = (weft_proto_t)(answer >> 8);
      return ncclSuccess;
    }
  ncclResult_t res = weft_tuner_choose(tp, args, esize, algo);
  if (res != ncclSuccess) return res;
  *proto = weft_tuner_proto(tp, args, *algo, esize);
  unsigned victim = atomic_fetch_add_explicit(&set->next, 1, memory_order_relaxed) % WEFT_CALL_CACHE_WAYS;
  store(&set->way[victim], key, args->slice, (uint64_t)*algo | (uint64_t)*proto << 8);
  return ncclSuccess;
}
