/*
 * env_source.h — where the knobs' values come from.
 *
 * The built-in source is NCCL's: the process environment, then NCCL's
 * configuration files (env_file.h). An env plugin (NCCL_ENV_PLUGIN,
 * plugins/env/) replaces it for every knob once loaded. base/ cannot call
 * the plugins layer, so the loader is handed in: the plugins layer sets it
 * (weft_env_source_set_loader) when libweft is loaded, and the first knob
 * read of the process runs it, once, as NCCL loads its env plugin at the
 * first parameter read. While it runs, that thread's log lines are held
 * and written afterwards under the settled source's NCCL_DEBUG (debug.h),
 * other threads' knob reads wait for it, and its own knob reads get the
 * built-in source's values without caching them.
 */
#ifndef WEFT_ENV_SOURCE_H
#define WEFT_ENV_SOURCE_H

#include <stddef.h>

// A source of values other than the built-in one.
typedef struct {
  // How log lines and ncclParamDumpAll name it ("env plugin 'NAME'").
  const char *label;
  // The value of `name`, or NULL when it has none. Called under a lock
  // (one call at a time); the value is copied before the next call.
  const char *(*get)(const char *name);
} weft_env_source_t;

// Returns the source to use from now on, or NULL for the built-in one.
typedef const weft_env_source_t *(*weft_env_source_loader_t)(void);

// Sets the loader. Only a call made before the first knob read counts.
void weft_env_source_set_loader(weft_env_source_loader_t loader);

// Before reading a knob: runs the loader (the first time in the process)
// and reads the configuration files (again, after weft_env_source_forget),
// then writes the log lines held meanwhile. Takes no lock of env.c's.
void weft_env_source_settle(void);

// 1 while this thread runs the loader: what it reads is provisional.
int weft_env_source_settling(void);

// Where a read looks: the settled source (the plugin, else the built-in
// one), the built-in one whatever is loaded (NCCL_ENV_PLUGIN), or only the
// process environment (NCCL_CONF_FILE).
typedef enum { WEFT_ENV_FROM_SOURCE, WEFT_ENV_FROM_BUILTIN, WEFT_ENV_FROM_PROCESS } weft_env_from_t;

// The value of `name` as a malloc'd copy in *value (the caller frees it),
// NULL when it has none; `origin` gets where it came from ("environment",
// a file's path, the plugin's label). Returns 0, or -1 out of memory.
int weft_env_source_read(const char *name, weft_env_from_t from, char **value, char *origin, size_t originlen);

// Back to the built-in source for good (a plugin about to be finalized):
// once it returns, no call into the old source is running or will start.
void weft_env_source_retire(void);

// The configuration files are read again before the next knob read (tests;
// weft_env_reset). The loaded source stays.
void weft_env_source_forget(void);

#endif
