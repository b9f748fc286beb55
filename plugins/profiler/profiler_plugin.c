/*
 * profiler_plugin.c — loads an NCCL profiler plugin and sets it up per
 * communicator (see profiler_plugin.h).
 *
 * The library is opened once per process; the newest of ncclProfiler_v6
 * ... ncclProfiler_v1 it exports is bound (profiler_v1.c ... profiler_v6.c)
 * and the log says which. The events are profiler_events.c's.
 */
#include "profiler_plugin.h"

#include <pthread.h>
#include <stdlib.h>

#include "checks.h"
#include "env.h"
#include "plugin_dl.h"
#include "profiler_bind.h"

typedef const weft_prof_abi_t *(*bind_fn)(const void *table, const char **name);

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const weft_prof_abi_t *lib_abi;
static const char *lib_name;

static void load(void) {
  int named = 0;
  void *lib = weft_plugin_open("profiler", weft_env_NCCL_PROFILER_PLUGIN(), &named, NULL, 0);
  if (lib == NULL) return;
  static const char *const symbols[] = {NCCL_PROFILER_PLUGIN_SYMBOL_V6, NCCL_PROFILER_PLUGIN_SYMBOL_V5,
                                        NCCL_PROFILER_PLUGIN_SYMBOL_V4, NCCL_PROFILER_PLUGIN_SYMBOL_V3,
                                        NCCL_PROFILER_PLUGIN_SYMBOL_V2, NCCL_PROFILER_PLUGIN_SYMBOL_V1, NULL};
  static const bind_fn binders[] = {weft_profiler_bind_v6, weft_profiler_bind_v5, weft_profiler_bind_v4,
                                    weft_profiler_bind_v3, weft_profiler_bind_v2, weft_profiler_bind_v1};
  int which = -1;
  void *sym = weft_plugin_symbol(lib, symbols, &which);
  if (sym == NULL) {
    WARN("profiler plugin '%s' exports none of %s ... %s; no profiler",
         named ? weft_env_NCCL_PROFILER_PLUGIN() : "libnccl-profiler.so", symbols[0], symbols[5]);
    return;
  }
  lib_abi = binders[which](sym, &lib_name);
  if (lib_name == NULL) lib_name = "?";
  INFO(WEFT_LOG_INIT | WEFT_LOG_PROFILE, "profiler plugin '%s' loaded (%s)", lib_name, symbols[which]);
  weft_profiler_events_install(lib_abi);
}

void *weft_profiler_comm_init(const weft_plugin_comm_t *c) {
  pthread_once(&load_once, load);
  if (lib_abi == NULL) return NULL;
  weft_profiler_t *p = calloc(1, sizeof(*p));
  if (p == NULL) {
    WARN("profiler plugin: out of memory; no profiler on rank %d", c->rank);
    return NULL;
  }
  p->abi = lib_abi;
  p->rank = c->rank;
  p->nranks = c->nranks;
  p->comm_hash = c->id_hash;
  p->comm_name = c->name;
  ncclResult_t res = lib_abi->init(&p->ctx, &p->mask, c);
  if (res != ncclSuccess) {
    WARN("profiler plugin '%s': init failed (%d, %s); no profiler on rank %d", lib_name, (int)res,
         ncclGetErrorString(res), c->rank);
    free(p);
    return NULL;
  }
  return p;
}

void weft_profiler_comm_free(void *prof) {
  weft_profiler_t *p = prof;
  if (p == NULL) return;
  ncclResult_t res = p->abi->finalize(p->ctx);
  if (res != ncclSuccess) INFO(WEFT_LOG_PROFILE, "profiler plugin: finalize returned %d", (int)res);
  free(p);
}
