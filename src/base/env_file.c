/*
 * env_file.c — reads NCCL's configuration files into a table of settings
 * (see env_file.h for the format and the order of the files).
 *
 * The table is a list of NAME, VALUE and the file each came from, in
 * reading order, so the first setting of a name (the user's file before the
 * system's, an earlier line before a later one) is the one a lookup finds.
 */
#include "env_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct weft_env_setting {
  struct weft_env_setting *next;
  const char *file;  // the path, shared by the settings of one file
  char *value;       // points into text, after the name's terminator
  char text[];       // NAME\0VALUE\0
} weft_env_setting_t;

typedef struct weft_env_path {
  struct weft_env_path *next;
  char path[];
} weft_env_path_t;

struct weft_env_files {
  weft_env_setting_t *first, **last;
  weft_env_path_t *paths;
  int count;
};

int weft_env_files_user_path(char *path, size_t len) {
  const char *conf = getenv("NCCL_CONF_FILE");
  if (conf != NULL && conf[0] != '\0') {
    int n = snprintf(path, len, "%s", conf);
    return n >= 0 && (size_t)n < len ? 1 : -1;
  }
  const char *home = getenv("HOME");
  if (home == NULL) return -1;
  int n = snprintf(path, len, "%s/.nccl.conf", home);
  return n >= 0 && (size_t)n < len ? 0 : -1;
}

// Adds one line's setting, if it is one. Returns -1 when out of memory.
static int add_line(weft_env_files_t *t, const char *file, char *line) {
  size_t len = strlen(line);
  if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
  if (len > 0 && line[len - 1] == '\r') line[--len] = '\0';
  if (line[0] == '#') return 0;
  char *eq = strchr(line, '=');
  if (eq == NULL || eq == line) return 0;  // no '=', or no name
  weft_env_setting_t *s = malloc(sizeof(*s) + len + 1);
  if (s == NULL) return -1;
  memcpy(s->text, line, len + 1);
  s->text[eq - line] = '\0';
  s->value = s->text + (eq - line) + 1;
  s->file = file;
  s->next = NULL;
  *t->last = s;
  t->last = &s->next;
  t->count++;
  return 0;
}

// Reads one file into the table. Returns 0, or the errno of a failed open,
// or -1 when out of memory.
static int read_one(weft_env_files_t *t, const char *path) {
  FILE *f = fopen(path, "re");
  if (f == NULL) return errno != 0 ? errno : ENOENT;
  size_t n = strlen(path);
  weft_env_path_t *p = malloc(sizeof(*p) + n + 1);
  if (p == NULL) {
    fclose(f);
    return -1;
  }
  memcpy(p->path, path, n + 1);
  p->next = t->paths;
  t->paths = p;
  char *line = NULL;
  size_t cap = 0;
  int res = 0;
  while (res == 0 && getline(&line, &cap, f) >= 0) res = add_line(t, p->path, line);
  free(line);
  fclose(f);
  return res;
}

weft_env_files_t *weft_env_files_read(const char *user, const char *system, int *user_errno) {
  if (user_errno != NULL) *user_errno = 0;
  weft_env_files_t *t = calloc(1, sizeof(*t));
  if (t == NULL) return NULL;
  t->last = &t->first;
  if (user != NULL) {
    int res = read_one(t, user);
    if (res == -1) goto no_memory;
    if (user_errno != NULL) *user_errno = res;
  }
  if (system != NULL && read_one(t, system) == -1) goto no_memory;
  return t;
no_memory:
  weft_env_files_free(t);
  return NULL;
}

const char *weft_env_files_get(const weft_env_files_t *t, const char *name, const char **file) {
  for (const weft_env_setting_t *s = t != NULL ? t->first : NULL; s != NULL && name != NULL; s = s->next) {
    if (strcmp(s->text, name) != 0) continue;
    if (file != NULL) *file = s->file;
    return s->value;
  }
  return NULL;
}

int weft_env_files_count(const weft_env_files_t *t) { return t != NULL ? t->count : 0; }

void weft_env_files_free(weft_env_files_t *t) {
  if (t == NULL) return;
  for (weft_env_setting_t *s = t->first, *next; s != NULL; s = next) {
    next = s->next;
    free(s);
  }
  for (weft_env_path_t *p = t->paths, *next; p != NULL; p = next) {
    next = p->next;
    free(p);
  }
  free(t);
}
