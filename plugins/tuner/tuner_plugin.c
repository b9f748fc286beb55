/*
 * tuner_plugin.c — loads NCCL tuner plugins and lets them pick weft's
 * algorithm (see tuner_plugin.h).
 *
 * weft has one protocol and its own algorithms; they sit in NCCL's table as
 *   ring (AllReduce, AllGather, ReduceScatter), chain (Broadcast, Reduce)
 *                       -> RING, SIMPLE
 *   tree                -> TREE, SIMPLE
 *   oneshot             -> COLLNET_DIRECT, SIMPLE  (one hop to every peer)
 *   read (single copy)  -> NVLS, SIMPLE            (loads from peers' memory)
 *   hier                -> NVLS_TREE, SIMPLE       (a stage in the host, one across)
 *   recursive doubling  -> PAT, LL                 (log-step, latency-bound)
 *   rabenseifner        -> PAT, SIMPLE             (log-step, bandwidth-bound)
 * Every other entry is -1 (NCCL_ALGO_PROTO_IGNORE), as are the entries of
 * algorithms NCCL_ALGO excludes or the call's layout cannot run: NCCL_ALGO
 * narrows first, the plugin chooses among what is left, as in NCCL. The
 * costs are the cost model's microseconds (cost.h), priced once per call
 * shape and kept; every rank computes the same table, so a deterministic
 * plugin makes every rank choose alike. weft has no channels: an
 * nChannels the plugin sets is ignored (one INFO per communicator).
 */
#include "tuner_plugin.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "cost.h"
#include "env.h"
#include "plugin_dl.h"
#include "tuner_abi.h"

typedef struct {
  weft_algo_t algo;
  int nccl_algo, proto;
} cell_t;

static const cell_t cells[] = {
    {WEFT_ALGO_RING, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE},
    {WEFT_ALGO_CHAIN, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE},
    {WEFT_ALGO_TREE, NCCL_ALGO_TREE, NCCL_PROTO_SIMPLE},
    {WEFT_ALGO_ONESHOT, NCCL_ALGO_COLLNET_DIRECT, NCCL_PROTO_SIMPLE},
    {WEFT_ALGO_READ, NCCL_ALGO_NVLS, NCCL_PROTO_SIMPLE},
    {WEFT_ALGO_HIER, NCCL_ALGO_NVLS_TREE, NCCL_PROTO_SIMPLE},
    {WEFT_ALGO_RECURSIVE, NCCL_ALGO_PAT, NCCL_PROTO_LL},
    {WEFT_ALGO_RABENSEIFNER, NCCL_ALGO_PAT, NCCL_PROTO_SIMPLE},
};
#define NCELLS (sizeof(cells) / sizeof(cells[0]))

typedef float table_t[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];

// One priced call shape (a communicator's ranks and layout are fixed).
#define SHAPES 32
typedef struct {
  int valid;
  weft_coll_t coll;
  int root;
  size_t count, esize, slice;
  unsigned candidates;
  table_t table;
  int last;  // the algorithm the plugin's table chose last (-1: weft's own), for logging changes
} shape_t;

struct weft_tuner_plugin {
  const ncclTuner_v5_t *v5;  // exactly one of v5, v4
  const ncclTuner_v4_t *v4;
  void *ctx;
  int channels_noted;
  pthread_mutex_t lock;  // the shapes
  shape_t shapes[SHAPES];
  unsigned next;
};

/* ---------- choosing ---------- */

static int nccl_func(weft_coll_t c) {
  switch (c) {
    case WEFT_COLL_BROADCAST: return ncclFuncBroadcast;
    case WEFT_COLL_REDUCE: return ncclFuncReduce;
    case WEFT_COLL_ALLGATHER: return ncclFuncAllGather;
    case WEFT_COLL_REDUCESCATTER: return ncclFuncReduceScatter;
    case WEFT_COLL_ALLREDUCE: return ncclFuncAllReduce;
    default: return -1;  // NCCL's tuner is not asked about the rest either
  }
}

// The cost table of a call: weft's prices where it can run, -1 elsewhere.
static void price(const weft_tuner_params_t *p, const weft_coll_args_t *args, size_t esize, unsigned candidates,
                  table_t table) {
  for (int a = 0; a < NCCL_NUM_ALGORITHMS; a++)
    for (int q = 0; q < NCCL_NUM_PROTOCOLS; q++) table[a][q] = (float)NCCL_ALGO_PROTO_IGNORE;
  // One hop's schedule is nranks x count large: not priced past its limit unless it is all there is.
  if (args->count > p->oneshot_max && (candidates & ~(1u << WEFT_ALGO_ONESHOT)) != 0)
    candidates &= ~(1u << WEFT_ALGO_ONESHOT);
  const weft_links_t *links = p->links ? p->links : weft_links();
  for (size_t i = 0; i < NCELLS; i++) {
    double t;
    if (!(candidates & (1u << cells[i].algo))) continue;
    if (weft_cost_call(args, cells[i].algo, esize, links, &t) != ncclSuccess) continue;
    table[cells[i].nccl_algo][cells[i].proto] = (float)(t * 1e6);
  }
}

// The shape's priced table, computed the first time (under t->lock).
static shape_t *shape_of(struct weft_tuner_plugin *t, const weft_tuner_params_t *p, const weft_coll_args_t *args,
                         size_t esize, unsigned candidates) {
  for (unsigned i = 0; i < SHAPES; i++) {
    shape_t *s = &t->shapes[i];
    if (s->valid && s->coll == args->coll && s->root == args->root && s->count == args->count &&
        s->esize == esize && s->slice == args->slice && s->candidates == candidates)
      return s;
  }
  shape_t *s = &t->shapes[t->next];
  t->next = (t->next + 1) % SHAPES;
  *s = (shape_t){.valid = 1, .coll = args->coll, .root = args->root, .count = args->count, .esize = esize,
                 .slice = args->slice, .candidates = candidates, .last = -2};
  price(p, args, esize, candidates, s->table);
  return s;
}

static void tune(void *tuner, const weft_tuner_params_t *p, const weft_coll_args_t *args, size_t esize,
                 weft_algo_t *algo) {
  struct weft_tuner_plugin *t = tuner;
  int func = nccl_func(args->coll);
  if (func < 0) return;
  unsigned candidates = weft_tuner_candidates(p, args);
  size_t nbytes = args->count * esize;
  if (args->coll == WEFT_COLL_ALLGATHER || args->coll == WEFT_COLL_REDUCESCATTER) nbytes *= (size_t)args->nranks;
  pthread_mutex_lock(&t->lock);
  shape_t *s = shape_of(t, p, args, esize, candidates);
  table_t table, offered;
  memcpy(offered, s->table, sizeof(offered));
  memcpy(table, offered, sizeof(table));
  int nch = 0;
  ncclResult_t res = t->v5 ? t->v5->getCollInfo(t->ctx, (ncclFunc_t)func, nbytes, 1, (float **)table,
                                                NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, 0, &nch)
                           : t->v4->getCollInfo(t->ctx, (ncclFunc_t)func, nbytes, 1, (float **)table,
                                                NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, 0, &nch);
  int chosen = -1;
  if (res == ncclSuccess && memcmp(table, offered, sizeof(table)) != 0) {
    // The cheapest entry weft offered (entries it marked -1 stay out, whatever the plugin wrote).
    float best = 0;
    for (size_t i = 0; i < NCELLS; i++) {
      float was = offered[cells[i].nccl_algo][cells[i].proto], now = table[cells[i].nccl_algo][cells[i].proto];
      if (was < 0 || now < 0 || !(candidates & (1u << cells[i].algo))) continue;
      if (chosen < 0 || now < best) chosen = (int)cells[i].algo, best = now;
    }
  }
  int changed = chosen != s->last;
  s->last = chosen;
  int note_channels = nch > 0 && !t->channels_noted;
  if (note_channels) t->channels_noted = 1;
  pthread_mutex_unlock(&t->lock);
  if (res != ncclSuccess && changed)
    INFO(WEFT_LOG_TUNING, "tuner plugin: getCollInfo failed (%d) for %s of %zu bytes; weft's own choice: %s",
         (int)res, weft_coll_name(args->coll), nbytes, weft_algo_name(*algo));
  else if (changed)
    INFO(WEFT_LOG_TUNING, "tuner plugin: %s of %zu bytes, %d ranks on %d hosts: %s (weft's own choice: %s)",
         weft_coll_name(args->coll), nbytes, args->nranks, args->nhosts,
         chosen >= 0 ? weft_algo_name((weft_algo_t)chosen) : "unchanged", weft_algo_name(*algo));
  if (note_channels)
    INFO(WEFT_LOG_TUNING, "tuner plugin asked for %d channels: weft has no channels, ignored (noted once)", nch);
  if (chosen >= 0) *algo = (weft_algo_t)chosen;
}

/* ---------- the library, once per process ---------- */

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const ncclTuner_v5_t *lib_v5;
static const ncclTuner_v4_t *lib_v4;

static void load(void) {
  int named = 0;
  void *lib = weft_plugin_open("tuner", weft_env_NCCL_TUNER_PLUGIN(), &named, NULL, 0);
  if (lib == NULL) return;
  static const char *const symbols[] = {NCCL_TUNER_PLUGIN_SYMBOL_V5, NCCL_TUNER_PLUGIN_SYMBOL_V4, NULL};
  int which = -1;
  void *sym = weft_plugin_symbol(lib, symbols, &which);
  if (sym == NULL) {
    WARN("tuner plugin '%s' exports neither %s nor %s; using the built-in tuner",
         named ? weft_env_NCCL_TUNER_PLUGIN() : "libnccl-tuner.so", symbols[0], symbols[1]);
    return;  // the library stays open: dlclose of a half-used plugin buys nothing
  }
  if (which == 0) lib_v5 = sym;
  else lib_v4 = sym;
  const char *name = which == 0 ? lib_v5->name : lib_v4->name;
  INFO(WEFT_LOG_INIT | WEFT_LOG_TUNING, "tuner plugin '%s' loaded (%s)", name ? name : "?", symbols[which]);
  weft_plugin_hooks.tune = tune;
}

/* ---------- per communicator ---------- */

void *weft_tuner_plugin_comm_init(const weft_plugin_comm_t *c) {
  pthread_once(&load_once, load);
  if (lib_v5 == NULL && lib_v4 == NULL) return NULL;
  struct weft_tuner_plugin *t = calloc(1, sizeof(*t));
  if (t == NULL) {
    WARN("tuner plugin: out of memory; using the built-in tuner");
    return NULL;
  }
  ncclResult_t res;
  if (lib_v5 != NULL) {
    // Hosts stand in for NVLink domains; NCCL's GPU tuning constants mean nothing here (zeros).
    int *per_host = calloc((size_t)c->nhosts, sizeof(int));
    ncclNvlDomainInfo_v5_t nvl = {.nNvlDomains = c->nhosts, .minRanksPerNvlDomain = c->nranks,
                                  .maxRanksPerNvlDomain = 0};
    if (per_host != NULL) {
      for (int r = 0; r < c->nranks; r++) per_host[c->host_of[r]]++;
      for (int h = 0; h < c->nhosts; h++) {
        if (per_host[h] < nvl.minRanksPerNvlDomain) nvl.minRanksPerNvlDomain = per_host[h];
        if (per_host[h] > nvl.maxRanksPerNvlDomain) nvl.maxRanksPerNvlDomain = per_host[h];
      }
      free(per_host);
    }
    static ncclTunerConstants_v5_t constants;  // zeros; the plugin may write them, weft does not read them
    ncclTunerConstants_v5_t mine = constants;
    res = lib_v5->init(&t->ctx, c->id_hash, (size_t)c->nranks, (size_t)c->nhosts, weft_plugin_logger, &nvl,
                       &mine);
    t->v5 = lib_v5;
  } else {
    res = lib_v4->init((size_t)c->nranks, (size_t)c->nhosts, weft_plugin_logger, &t->ctx);
    t->v4 = lib_v4;
  }
  if (res != ncclSuccess) {
    WARN("tuner plugin '%s': init failed (%d, %s); rank %d uses the built-in tuner",
         t->v5 ? t->v5->name : t->v4->name, (int)res, ncclGetErrorString(res), c->rank);
    free(t);
    return NULL;
  }
  pthread_mutex_init(&t->lock, NULL);
  return t;
}

void weft_tuner_plugin_comm_free(void *tuner) {
  struct weft_tuner_plugin *t = tuner;
  if (t == NULL) return;
  ncclResult_t res = t->v5 ? t->v5->finalize(t->ctx) : t->v4->destroy(t->ctx);
  if (res != ncclSuccess) INFO(WEFT_LOG_TUNING, "tuner plugin: finalize returned %d", (int)res);
  pthread_mutex_destroy(&t->lock);
  free(t);
}
