/*
 * env.h — typed, cached access to environment knobs.
 *
 * Every knob weft reads is declared once in env_table.h (name, type, default,
 * one-line doc). That table generates the accessors below and docs/env.md
 * (`build/bin/weft-env --markdown`), so code and documentation cannot drift.
 * Values are read once, from the source env_source.h settles (the
 * environment, then NCCL's configuration files, or an env plugin), and
 * cached; weft_env_reset() forgets the cache and the files (tests).
 */
#ifndef WEFT_ENV_H
#define WEFT_ENV_H

#include <stdint.h>

#define WEFT_ENV_INT(name, def, doc) int64_t weft_env_##name(void);
#define WEFT_ENV_STR(name, def, doc) const char *weft_env_##name(void);
#include "env_table.h"
#undef WEFT_ENV_INT
#undef WEFT_ENV_STR

// Parse an integer knob strictly: decimal/hex, optional K/M/G suffix.
// Returns 0 on success, -1 (value unchanged) on garbage.
int weft_env_parse_int(const char *text, int64_t *value);

void weft_env_reset(void);

// The table itself, for the parameter API (param.c): knob `idx` (0 ..
// weft_env_knob_count()-1) and its value, read and cached as the accessors
// read it. Secret knobs' values are never handed out.
typedef struct {
  const char *name, *doc;
  int is_int;
  int64_t int_default;
  const char *str_default;  // NULL: unset by default
  int secret;
} weft_env_knob_info_t;
int weft_env_knob_count(void);
int weft_env_knob_find(const char *name);  // -1: weft has no such knob
void weft_env_knob_info(int idx, weft_env_knob_info_t *out);
int64_t weft_env_knob_int(int idx);
const char *weft_env_knob_str(int idx);    // NULL when unset
int weft_env_knob_from_env(int idx);       // 1: the value came from a source, not the default
// Where the value came from: "environment", a configuration file's path,
// "env plugin 'NAME'"; NULL for the default.
const char *weft_env_knob_origin(int idx);
// Write the knob table as markdown (docs/env.md) to stdout.
void weft_env_print_markdown(void);

#endif
