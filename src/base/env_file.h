/*
 * env_file.h — NCCL's configuration files: NAME=VALUE lines that give knobs
 * the values the process environment leaves unset.
 *
 * NCCL reads, in this order of precedence, the environment, then the
 * user's file ($NCCL_CONF_FILE when set and not empty, else
 * $HOME/.nccl.conf), then /etc/nccl.conf. In a file, NAME is everything
 * before a line's first '=' and VALUE everything after it, up to the end
 * of the line (a trailing '\r' is dropped too); a line that starts with
 * '#' or has no '=' is skipped, and nothing is trimmed, as NCCL reads them.
 * When a name appears twice, its first line counts.
 *
 * This module only reads and looks up; env_source.c decides when.
 */
#ifndef WEFT_ENV_FILE_H
#define WEFT_ENV_FILE_H

#include <stddef.h>

#define WEFT_ENV_SYSTEM_CONF "/etc/nccl.conf"

typedef struct weft_env_files weft_env_files_t;

// The file the user's settings come from: $NCCL_CONF_FILE, else
// $HOME/.nccl.conf (both read from the process environment), written to
// `path`. Returns 1 when NCCL_CONF_FILE named it, 0 for the home file, -1
// when there is none (no HOME, or the name does not fit).
int weft_env_files_user_path(char *path, size_t len);

// Reads `user` and then `system` (either may be NULL; a file that cannot
// be opened adds nothing) into one table, the user's lines first. NULL only
// when out of memory. *user_errno (may be NULL) gets why `user` could not
// be opened, or 0.
weft_env_files_t *weft_env_files_read(const char *user, const char *system, int *user_errno);

// The value of `name` in the table and the file it came from (*file; may be
// NULL), or NULL. Pointers stay valid until weft_env_files_free.
const char *weft_env_files_get(const weft_env_files_t *t, const char *name, const char **file);

// How many settings the table holds.
int weft_env_files_count(const weft_env_files_t *t);

void weft_env_files_free(weft_env_files_t *t);

#endif
