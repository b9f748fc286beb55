/*
 * env.h — typed, cached access to environment knobs.
 *
 * Every knob weft reads is declared once in env_table.h (name, type, default,
 * one-line doc). That table generates the accessors below and docs/env.md
 * (`build/bin/weft-env --markdown`), so code and documentation cannot drift.
 * Values are read once and cached; weft_env_reset() forgets the cache (tests).
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
// Write the knob table as markdown (docs/env.md) to stdout.
void weft_env_print_markdown(void);

#endif
