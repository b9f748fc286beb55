/*
 * plugin_dl.c — opens net, tuner, profiler and env plugin libraries by NCCL's naming
 * scheme (see plugin_dl.h) and bridges their log calls into weft's log.
 */
#include "plugin_dl.h"

#include <dlfcn.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "checks.h"

// dlopen, then the same file name in libweft's own directory. On success
// `path` (if given) gets the file that opened; on failure `err` says why.
static void *open_one(const char *file, char *path, size_t pathlen, char *err, size_t errlen) {
  void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
  char where[4096 + 256];
  snprintf(where, sizeof(where), "%s", file);
  if (h == NULL) {
    snprintf(err, errlen, "%s", dlerror());
    Dl_info info;
    if (strchr(file, '/') != NULL || dladdr((void *)&weft_plugin_open, &info) == 0 || info.dli_fname == NULL)
      return NULL;
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", info.dli_fname);
    snprintf(where, sizeof(where), "%s/%s", dirname(dir), file);
    if ((h = dlopen(where, RTLD_NOW | RTLD_LOCAL)) == NULL) return NULL;
  }
  if (path != NULL) snprintf(path, pathlen, "%s", where);
  return h;
}

void *weft_plugin_open(const char *kind, const char *value, int *named, char *path, size_t pathlen) {
  char file[2][512], err[2][512] = {"", ""};
  *named = value != NULL && value[0] != '\0';
  if (*named && strcasecmp(value, "none") == 0) {
    INFO(WEFT_LOG_INIT, "%s plugin disabled (\"none\")", kind);
    return NULL;
  }
  if (!*named) {
    snprintf(file[0], sizeof(file[0]), "libnccl-%s.so", kind);
    void *h = open_one(file[0], path, pathlen, err[0], sizeof(err[0]));
    if (h == NULL) INFO(WEFT_LOG_INIT, "no %s plugin (%s not found); using the built-in one", kind, file[0]);
    return h;
  }
  // The value as given, then (unless it is a path or a lib*.so name)
  // libnccl-KIND-VALUE.so, as NCCL tries them.
  size_t len = strlen(value);
  int as_given_only = strchr(value, '/') != NULL || (strncmp(value, "lib", 3) == 0 && len >= 3 &&
                                                      strcmp(value + len - 3, ".so") == 0);
  int n = as_given_only ? 1 : 2;
  snprintf(file[0], sizeof(file[0]), "%s", value);
  snprintf(file[1], sizeof(file[1]), "libnccl-%s-%s.so", kind, value);
  void *h = NULL;
  for (int i = 0; i < n && h == NULL; i++) h = open_one(file[i], path, pathlen, err[i], sizeof(err[i]));
  if (h == NULL)
    WARN("%s plugin '%s' could not be loaded (%s%s%s); falling back to the built-in one", kind, value, err[0], n > 1 ? "; " : "",
         n > 1 ? err[1] : "");
  return h;
}

void *weft_plugin_symbol(void *lib, const char *const *symbols, int *which) {
  for (int i = 0; symbols[i] != NULL; i++) {
    void *s = dlsym(lib, symbols[i]);
    if (s != NULL) {
      *which = i;
      return s;
    }
  }
  return NULL;
}

void weft_plugin_vlog(int level, unsigned long flags, unsigned long default_subsys, const char *file, int line,
                      const char *fmt, va_list ap) {
  // NCCL's levels are weft's; an "abort" line is a warning here.
  int lvl = level == WEFT_LEVEL_ABORT ? WEFT_LEVEL_WARN : level;
  if (lvl <= WEFT_LEVEL_VERSION || fmt == NULL) return;
  uint64_t subsys = lvl == WEFT_LEVEL_WARN ? (uint64_t)WEFT_LOG_ALL : flags != 0 ? (uint64_t)flags : default_subsys;
  if (lvl != WEFT_LEVEL_WARN && !WEFT_LOG_ENABLED(lvl, subsys)) return;
  char text[1024];
  vsnprintf(text, sizeof(text), fmt, ap);
  weft_debug_log(lvl, subsys, file != NULL ? file : "plugin", line, "%s", text);
}

void weft_plugin_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  weft_plugin_vlog((int)level, flags, WEFT_LOG_ALL, file, line, fmt, ap);
  va_end(ap);
}
