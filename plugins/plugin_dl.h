/*
 * plugin_dl.h — finding and opening NCCL-style plugin libraries (net,
 * tuner, profiler, env), and the logger weft hands to plugins.
 *
 * NCCL's naming scheme: the variable (NCCL_NET_PLUGIN, NCCL_TUNER_PLUGIN,
 * NCCL_PROFILER_PLUGIN, NCCL_ENV_PLUGIN) holds NAME, opened as given and then as
 * libnccl-KIND-NAME.so; a path or a lib*.so name is opened as given only.
 * Unset, libnccl-KIND.so is tried quietly; "none" (any case) disables it.
 * A name that dlopen's search does not find is also looked for in the
 * directory libweft itself was loaded from.
 */
#ifndef WEFT_PLUGIN_DL_H
#define WEFT_PLUGIN_DL_H

#include <stdarg.h>
#include <stddef.h>

#include "plugin_log_abi.h"  // ncclDebugLogger_t and its levels

// Opens the plugin library of `kind` ("net", "tuner", "profiler", "env") as `value`
// (the variable's value, NULL when unset) asks. Returns the dlopen handle,
// or NULL: disabled, or not found (WARN naming the files tried when the
// variable named a plugin, INFO otherwise). *named tells whether the
// variable named one; `path` (may be NULL) gets the file that opened.
void *weft_plugin_open(const char *kind, const char *value, int *named, char *path, size_t pathlen);

// Looks up the first of `symbols` (NULL-terminated) the library exports;
// *which gets its index. NULL when none is there.
void *weft_plugin_symbol(void *lib, const char *const *symbols, int *which);

// A plugin's log line into weft's log: NCCL's levels (abort is a warning,
// version lines are dropped), its subsystem bits (0: default_subsys), and
// weft's NCCL_DEBUG / NCCL_DEBUG_SUBSYS filtering.
void weft_plugin_vlog(int level, unsigned long flags, unsigned long default_subsys, const char *file, int line,
                      const char *fmt, va_list ap);

// A logger with NCCL's ncclDebugLogger_t signature that writes through weft's log.
void weft_plugin_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#endif
