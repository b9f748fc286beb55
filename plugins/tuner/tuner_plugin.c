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
 *   numa                -> NVLS_TREE, LL128        (hier's stages over NUMA nodes)
 *   recursive doubling  -> PAT, LL                 (log-step, latency-bound)
 *   rabenseifner        -> PAT, SIMPLE             (log-step, bandwidth-bound)
 * Every other entry is -1 (NCCL_ALGO_PROTO_IGNORE), as are the entries of
 * algorithms NCCL_ALGO excludes or the call's layout cannot run: NCCL_ALGO
 * narrows first, the plugin chooses among what is left, as in NCCL. The
 * costs are the cost model's microseconds (cost.h), priced once per call
 * shape and kept; every rank computes the same table, so a deterministic
 * plugin makes every rank choose alike. weft has no channels: an
 * nChannels the plugin sets is ignored (one INFO per communicator).
 * Versions 2 to 6 load (the newest exported wins): v2 names a cell instead
 * of editing the table; v6's getChunkSize may lower the step size.
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
    {WEFT_ALGO_NUMA, NCCL_ALGO_NVLS_TREE, NCCL_PROTO_LL128},
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
  size_t last_chunk;  // the chunk getChunkSize gave last (0: none yet), for logging changes
} shape_t;

// The plugin's struct, by version: every one starts with its name, v6
// extends v5, and v2 to v4 share init and destroy.
typedef union {
  const void *any;
  const ncclTuner_v6_t *v6;
  const ncclTuner_v5_t *v5;
  const ncclTuner_v4_t *v4;
  const ncclTuner_v3_t *v3;
  const ncclTuner_v2_t *v2;
} tuner_api_t;

static const char *api_name(tuner_api_t api) {
  const char *name = *(const char *const *)api.any;
  return name != NULL ? name : "?";
}

struct weft_tuner_plugin {
  int version;  // 2 .. 6
  tuner_api_t api;
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

// The cell of an algorithm and protocol a version-2 plugin named: the one
// weft offered for exactly that pair, else for that algorithm; -1 if none.
static int cell_named(int nccl_algo, int proto, unsigned candidates, table_t offered) {
  int by_algo = -1;
  for (size_t i = 0; i < NCELLS; i++) {
    if (cells[i].nccl_algo != nccl_algo || !(candidates & (1u << cells[i].algo))) continue;
    if (offered[cells[i].nccl_algo][cells[i].proto] < 0) continue;
    if (cells[i].proto == proto) return (int)cells[i].algo;
    if (by_algo < 0) by_algo = (int)cells[i].algo;
  }
  return by_algo;
}

// getCollInfo of whichever version: versions 3 to 6 edit the table, version
// 2 names an algorithm (*chosen).
static ncclResult_t ask(struct weft_tuner_plugin *t, int func, size_t nbytes, table_t table, unsigned candidates,
                        table_t offered, int *chosen, int *nch) {
  float **cost = (float **)table;
  switch (t->version) {
    case 6:
    case 5:
      return t->api.v5->getCollInfo(t->ctx, (ncclFunc_t)func, nbytes, 1, cost, NCCL_NUM_ALGORITHMS,
                                    NCCL_NUM_PROTOCOLS, 0, nch);
    case 4:
      return t->api.v4->getCollInfo(t->ctx, (ncclFunc_t)func, nbytes, 1, cost, NCCL_NUM_ALGORITHMS,
                                    NCCL_NUM_PROTOCOLS, 0, nch);
    case 3:
      return t->api.v3->getCollInfo(t->ctx, (ncclFunc_t)func, nbytes, 1, cost, NCCL_NUM_ALGORITHMS,
                                    NCCL_NUM_PROTOCOLS, nch);
    default: {
      int algorithm = NCCL_ALGO_UNDEF, protocol = NCCL_PROTO_UNDEF;
      ncclResult_t res = t->api.v2->getCollInfo(t->ctx, (ncclFunc_t)func, nbytes, 0, 0, 1, &algorithm, &protocol, nch);
      if (res == ncclSuccess && algorithm != NCCL_ALGO_UNDEF)
        *chosen = cell_named(algorithm, protocol, candidates, offered);
      return res;
    }
  }
}

// Version 6: the plugin may change the bytes a step carries; weft keeps its
// own as the most (half a connection's buffer, as NCCL clamps to its buffers).
static void chunk(struct weft_tuner_plugin *t, shape_t *s, int func, size_t nbytes, weft_algo_t algo,
                  weft_coll_args_t *args, size_t esize) {
  if (t->version < 6 || t->api.v6->getChunkSize == NULL) return;
  int nccl_algo = NCCL_ALGO_RING, proto = NCCL_PROTO_SIMPLE;
  for (size_t i = 0; i < NCELLS; i++)
    if (cells[i].algo == algo) nccl_algo = cells[i].nccl_algo, proto = cells[i].proto;
  size_t most = args->slice * esize, bytes = most;
  ncclResult_t res = t->api.v6->getChunkSize(t->ctx, (ncclFunc_t)func, nbytes, nccl_algo, proto, 1, &bytes);
  if (res != ncclSuccess || bytes == most) return;
  size_t elems = bytes / esize;
  args->slice = elems < 1 ? 1 : elems < args->slice ? elems : args->slice;
  pthread_mutex_lock(&t->lock);
  int changed = s->last_chunk != bytes;
  s->last_chunk = bytes;
  pthread_mutex_unlock(&t->lock);
  if (changed)
    INFO(WEFT_LOG_TUNING, "tuner plugin: %s of %zu bytes: chunk %zu bytes (asked %zu, at most %zu)",
         weft_coll_name(args->coll), nbytes, args->slice * esize, bytes, most);
}

static void tune(void *tuner, const weft_tuner_params_t *p, weft_coll_args_t *args, size_t esize,
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
  int nch = 0, chosen = -1;
  ncclResult_t res = ask(t, func, nbytes, table, candidates, offered, &chosen, &nch);
  if (t->version >= 3 && res == ncclSuccess && memcmp(table, offered, sizeof(table)) != 0) {
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
  chunk(t, s, func, nbytes, *algo, args, esize);
}

/* ---------- the library, once per process ---------- */

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static tuner_api_t lib_api;
static int lib_version;

static void load(void) {
  int named = 0;
  void *lib = weft_plugin_open("tuner", weft_env_NCCL_TUNER_PLUGIN(), &named, NULL, 0);
  if (lib == NULL) return;
  static const char *const symbols[] = {NCCL_TUNER_PLUGIN_SYMBOL_V6, NCCL_TUNER_PLUGIN_SYMBOL_V5,
                                        NCCL_TUNER_PLUGIN_SYMBOL_V4, NCCL_TUNER_PLUGIN_SYMBOL_V3,
                                        NCCL_TUNER_PLUGIN_SYMBOL_V2, NULL};
  int which = -1;
  void *sym = weft_plugin_symbol(lib, symbols, &which);
  if (sym == NULL) {
    WARN("tuner plugin '%s' exports none of %s ... %s; using the built-in tuner",
         named ? weft_env_NCCL_TUNER_PLUGIN() : "libnccl-tuner.so", symbols[0], symbols[4]);
    return;  // the library stays open: dlclose of a half-used plugin buys nothing
  }
  lib_api.any = sym;
  lib_version = 6 - which;
  INFO(WEFT_LOG_INIT | WEFT_LOG_TUNING, "tuner plugin '%s' loaded (%s)", api_name(lib_api), symbols[which]);
  weft_plugin_hooks.tune = tune;
}

/* ---------- per communicator ---------- */

// Versions 5 and 6: hosts stand in for NVLink domains; NCCL's GPU tuning
// constants mean nothing here (zeros; the plugin may write them, weft does
// not read them).
static ncclResult_t init_v5(struct weft_tuner_plugin *t, const weft_plugin_comm_t *c) {
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
  ncclTunerConstants_v5_t constants;
  memset(&constants, 0, sizeof(constants));
  return t->api.v5->init(&t->ctx, c->id_hash, (size_t)c->nranks, (size_t)c->nhosts, weft_plugin_logger, &nvl,
                         &constants);
}

void *weft_tuner_plugin_comm_init(const weft_plugin_comm_t *c) {
  pthread_once(&load_once, load);
  if (lib_api.any == NULL) return NULL;
  struct weft_tuner_plugin *t = calloc(1, sizeof(*t));
  if (t == NULL) {
    WARN("tuner plugin: out of memory; using the built-in tuner");
    return NULL;
  }
  t->api = lib_api;
  t->version = lib_version;
  // Versions 2 to 4 share init's layout (v4's struct is used for all three).
  ncclResult_t res = t->version >= 5 ? init_v5(t, c)
                                     : t->api.v4->init((size_t)c->nranks, (size_t)c->nhosts, weft_plugin_logger,
                                                       &t->ctx);
  if (res != ncclSuccess) {
    WARN("tuner plugin '%s': init failed (%d, %s); rank %d uses the built-in tuner", api_name(t->api), (int)res,
         ncclGetErrorString(res), c->rank);
    free(t);
    return NULL;
  }
  pthread_mutex_init(&t->lock, NULL);
  return t;
}

void weft_tuner_plugin_comm_free(void *tuner) {
  struct weft_tuner_plugin *t = tuner;
  if (t == NULL) return;
  ncclResult_t res = t->version >= 5 ? t->api.v5->finalize(t->ctx) : t->api.v4->destroy(t->ctx);
  if (res != ncclSuccess) INFO(WEFT_LOG_TUNING, "tuner plugin: finalize returned %d", (int)res);
  pthread_mutex_destroy(&t->lock);
  free(t);
}
