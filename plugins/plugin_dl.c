/*
 * plugin_dl.c — opens tuner and profiler plugin libraries by NCCL's naming
 * scheme (see plugin_dl.h) and bridges their log calls into weft's log.
 */
#include "plugin_dl.h"

#include <dlfcn.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "checks.h"

// dlopen, then the same file name in libweft's own directory.
static void *open_one(const char *file, char *err, size_t errlen) {
  void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
  if (h != NULL) return h;
  snprintf(err, errlen, "%s", dlerror());
  if (strchr(file, '/') != NULL) return NULL;
  Dl_info info;
  if (dladdr((void *)&weft_plugin_open, &info) == 0 || info.dli_fname == NULL) return NULL;
  char dir[4096], path[4096 + 256];
  snprintf(dir, sizeof(dir), "%s", info.dli_fname);
  snprintf(path, sizeof(path), "%s/%s", dirname(dir), file);
  return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

void *weft_plugin_open(const char *kind, const char *value, int *named) {
  char file[512], err[512] = "";
  *named = value != NULL && value[0] != '\0';
  if (*named && strcasecmp(value, "none") == 0) {
    INFO(WEFT_LOG_INIT, "%s plugin disabled (\"none\")", kind);
    return NULL;
  }
  void *h = NULL;
  if (!*named) {
    snprintf(file, sizeof(file), "libnccl-%s.so", kind);
    h = open_one(file, err, sizeof(err));
    if (h == NULL) INFO(WEFT_LOG_INIT, "no %s plugin (%s not found); using the built-in one", kind, file);
    return h;
  }
  if (strchr(value, '/') == NULL && strstr(value, ".so") == NULL) {
    snprintf(file, sizeof(file), "libnccl-%s-%s.so", kind, value);
    h = open_one(file, err, sizeof(err));
  }
  if (h == NULL) h = open_one(value, err, sizeof(err));
  if (h == NULL) WARN("%s plugin '%s' could not be loaded (%s); using the built-in one", kind, value, err);
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

void weft_plugin_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt, ...) {
  if ((int)level > WEFT_LEVEL_WARN && !WEFT_LOG_ENABLED((int)level, flags)) return;
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  weft_debug_log((int)level, flags, file, line, "%s", text);
}
