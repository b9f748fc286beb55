/*
 * plugin_dl.h — finding and opening NCCL-style plugin libraries (tuner,
 * profiler), and the logger weft hands to them.
 *
 * NCCL's naming scheme: the variable (NCCL_TUNER_PLUGIN, NCCL_PROFILER_PLUGIN)
 * holds a name NAME, opened as libnccl-KIND-NAME.so and then as NAME itself;
 * a value with a '/' or ".so" is a path or soname, opened as given. Unset,
 * libnccl-KIND.so is tried quietly; "none" (any case) disables the plugin.
 * A name that dlopen's search does not find is also looked for in the
 * directory libweft itself was loaded from.
 */
#ifndef WEFT_PLUGIN_DL_H
#define WEFT_PLUGIN_DL_H

#include "tuner/tuner_abi.h"  // ncclDebugLogger_t and its levels

// Opens the plugin library of `kind` ("tuner", "profiler") as `value` (the
// variable's value, NULL when unset) asks. Returns the dlopen handle, or
// NULL: disabled, or not found (WARN when the variable named a plugin,
// INFO otherwise). *named tells whether the variable named one.
void *weft_plugin_open(const char *kind, const char *value, int *named);

// Looks up the first of `symbols` (NULL-terminated) the library exports;
// *which gets its index. NULL when none is there.
void *weft_plugin_symbol(void *lib, const char *const *symbols, int *which);

// A logger with NCCL's ncclDebugLogger_t signature that writes through weft's log.
void weft_plugin_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#endif
