/*
 * env_plugin.c — loads an NCCL env plugin (NCCL_ENV_PLUGIN) and makes it
 * the source of every knob's value.
 *
 * When libweft is loaded, a constructor hands the loader below to base's
 * env module (env_source.h); it stores a pointer and nothing else. The
 * first knob read of the process runs it, once, as NCCL loads its env
 * plugin at the first parameter read:
 *   - NCCL_ENV_PLUGIN, from the environment or NCCL's configuration files
 *     (never from a plugin), names the library as for the other plugin
 *     kinds (../plugin_dl.h): NAME, then libnccl-env-NAME.so; unset tries
 *     libnccl-env.so quietly; "none" keeps the built-in source;
 *   - ncclEnvPlugin_v2 is looked up, then ncclEnvPlugin_v1;
 *   - init gets the NCCL version of include/nccl.h and, for v2, weft's
 *     logger; a failed init, a missing symbol or a missing library leave
 *     the built-in source (the environment, then the configuration files);
 *   - once init succeeded, finalize is registered with atexit: at process
 *     end the source goes back to the built-in one (no getEnv call starts
 *     or runs after that) and finalize is called.
 * The library stays open after a failure, as the tuner's does: a plugin
 * whose constructors ran may have left something that points into it.
 * Log lines written while the loader runs are held by base and written
 * once the source is settled, under the NCCL_DEBUG it gives.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "checks.h"
#include "env.h"
#include "env_abi.h"
#include "env_source.h"
#include "plugin_dl.h"

static const char *const symbols[] = {NCCL_ENV_PLUGIN_SYMBOL_V2, NCCL_ENV_PLUGIN_SYMBOL_V1, NULL};

static struct {
  const char *name;
  int version;                     // 2 or 1
  ncclResult_t (*finalize)(void);  // may be NULL
  char label[256];
  weft_env_source_t source;
} plugin;

static void finalize_at_exit(void) {
  weft_env_source_retire();
  ncclResult_t res = plugin.finalize != NULL ? plugin.finalize() : ncclSuccess;
  if (res != ncclSuccess)
    INFO(WEFT_LOG_ENV, "env plugin '%s': finalize returned %d (%s)", plugin.name, (int)res, ncclGetErrorString(res));
  else
    INFO(WEFT_LOG_ENV, "env plugin '%s' finalized", plugin.name);
}

// Calls the plugin's init; version 1 gets no logger.
static ncclResult_t init_plugin(const void *api) {
  if (plugin.version == 2) {
    const ncclEnv_v2_t *v2 = api;
    return v2->init(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, NCCL_SUFFIX, weft_plugin_logger);
  }
  const ncclEnv_v1_t *v1 = api;
  return v1->init(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, NCCL_SUFFIX);
}

static const weft_env_source_t *load(void) {
  const char *value = weft_env_NCCL_ENV_PLUGIN();
  int named = 0;
  char path[PATH_MAX] = "";
  void *lib = weft_plugin_open("env", value, &named, path, sizeof(path));
  if (lib == NULL) return NULL;  // weft_plugin_open said why
  const char *file = path[0] != '\0' ? path : "libnccl-env.so";
  int which = -1;
  const void *api = weft_plugin_symbol(lib, symbols, &which);
  if (api == NULL) {
    WARN("env plugin %s exports neither %s nor %s; knobs come from the environment and the configuration files",
         file, symbols[0], symbols[1]);
    return NULL;
  }
  // v1 and v2 share the layout of everything but init's arguments.
  const ncclEnv_v1_t *common = api;
  plugin.version = which == 0 ? 2 : 1;
  plugin.name = common->name != NULL ? common->name : "?";
  if (common->init == NULL || common->getEnv == NULL) {
    WARN("env plugin '%s' (%s) has no %s; knobs come from the environment and the configuration files", plugin.name,
         symbols[which], common->init == NULL ? "init" : "getEnv");
    return NULL;
  }
  ncclResult_t res = init_plugin(api);
  if (res != ncclSuccess) {
    WARN("env plugin '%s' (%s): init failed (%d, %s); knobs come from the environment and the configuration files",
         plugin.name, symbols[which], (int)res, ncclGetErrorString(res));
    return NULL;
  }
  plugin.finalize = common->finalize;
  snprintf(plugin.label, sizeof(plugin.label), "env plugin '%s'", plugin.name);
  plugin.source = (weft_env_source_t){.label = plugin.label, .get = common->getEnv};
  if (atexit(finalize_at_exit) != 0)
    INFO(WEFT_LOG_ENV, "env plugin '%s': its finalize cannot be registered for the end of the process", plugin.name);
  INFO(WEFT_LOG_INIT | WEFT_LOG_ENV, "env plugin '%s' loaded from %s (%s, version %d)", plugin.name, file,
       symbols[which], plugin.version);
  return &plugin.source;
}

__attribute__((constructor)) static void register_loader(void) { weft_env_source_set_loader(load); }
