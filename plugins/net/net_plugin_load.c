/*
 * net_plugin_load.c — finding, opening and binding an NCCL net plugin.
 *
 * NCCL_NET_PLUGIN names the plugin as NCCL 2.28 reads it (plugin_dl.h:
 * the value as a file or soname, then libnccl-net-<value>.so; unset,
 * libnccl-net.so quietly; "none" loads nothing; a name is also looked for
 * beside libweft). The newest of ncclNetPlugin_v12 ... _v6 found is bound
 * (WEFT_NET_PLUGIN_VERSION caps it, for tests). Once per process.
 * A plugin that cannot be loaded leaves a WARN; the caller falls back to
 * the built-in socket backend.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "debug.h"
#include "env.h"
#include "net_plugin.h"
#include "plugin_dl.h"

#define MAX_VERSION 12
#define MIN_VERSION 6

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static weft_plugin_ops_t ops;
static const weft_net_t *bound;
static char bound_path[512];

void weft_net_plugin_props(weft_plugin_props_t *out, const char *name, int ptr_support, int speed, size_t max_bytes) {
  memset(out, 0, sizeof(*out));
  snprintf(out->name, sizeof(out->name), "%s", name != NULL ? name : "?");
  out->ptr_support = ptr_support;
  out->speed = speed > 0 ? speed : 0;
  out->max_bytes = max_bytes > 0 ? max_bytes : (size_t)-1;
}

void weft_net_plugin_log(int level, unsigned long flags, const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  weft_plugin_vlog(level, flags, WEFT_LOG_NET, file, line, fmt, ap);
  va_end(ap);
}

static const weft_net_t *load(const char *name, int max_version) {
  int named;
  void *dl = weft_plugin_open("net", name, &named, bound_path, sizeof(bound_path));
  if (dl == NULL) return NULL;
  int top = max_version >= MIN_VERSION && max_version < MAX_VERSION ? max_version : MAX_VERSION;
  int (*const bind[])(void *, weft_plugin_ops_t *) = {weft_net_plugin_bind_v6,  weft_net_plugin_bind_v7,
                                                      weft_net_plugin_bind_v8,  weft_net_plugin_bind_v9,
                                                      weft_net_plugin_bind_v10, weft_net_plugin_bind_v11,
                                                      weft_net_plugin_bind_v12};
  _Static_assert(sizeof(bind) / sizeof(bind[0]) == MAX_VERSION - MIN_VERSION + 1, "one binder per version");
  int ok = 0;
  for (int v = top; v >= MIN_VERSION && !ok; v--) ok = bind[v - MIN_VERSION](dl, &ops);
  if (!ok || ops.name == NULL) {
    WARN("NET/Plugin: %s exports none of ncclNetPlugin_v%d ... ncclNetPlugin_v%d; falling back to the built-in Socket "
         "network", bound_path, top, MIN_VERSION);
    dlclose(dl);
    return NULL;
  }
  INFO(WEFT_LOG_INIT | WEFT_LOG_NET, "NET/Plugin: loaded %s: network %s, ABI v%d", bound_path, ops.name, ops.version);
  return weft_net_plugin_adapt(&ops);  // the library stays open for the process's life
}

const weft_net_t *weft_net_plugin_load(const char *name, int max_version) {
  pthread_mutex_lock(&lock);
  if (bound == NULL) bound = load(name, max_version);
  const weft_net_t *net = bound;
  pthread_mutex_unlock(&lock);
  return net;
}

static const weft_net_t *chosen;
static void choose(void) {
  const char *name = weft_env_NCCL_NET_PLUGIN();
  if (name != NULL && strcasecmp(name, "none") == 0) {
    INFO(WEFT_LOG_INIT | WEFT_LOG_NET, "NET/Plugin: NCCL_NET_PLUGIN=none: no plugin");
    return;
  }
  chosen = weft_net_plugin_load(name, (int)weft_env_WEFT_NET_PLUGIN_VERSION());
}

const weft_net_t *weft_net_plugin(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, choose);
  return chosen;
}

int weft_net_plugin_version(void) {
  pthread_mutex_lock(&lock);
  int v = bound != NULL ? ops.version : 0;
  pthread_mutex_unlock(&lock);
  return v;
}
