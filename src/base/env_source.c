/*
 * env_source.c — the source of the knobs' values: the built-in one (the
 * process environment, then NCCL's configuration files) or the one the
 * loader handed in by the plugins layer returns (see env_source.h).
 *
 * One mutex guards the settled source and the files' table; every read
 * holds it while it asks the source and copies the value, so a plugin's
 * getEnv is called one at a time and its value is copied before the next
 * call, as NCCL's env plugin contract asks, and retiring the source cannot
 * pull a value away from a read in progress. The loader runs once per
 * process (pthread_once): other threads' first knob reads wait for it.
 */
#include "env_source.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "debug.h"
#include "env_file.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const weft_env_source_t *active;  // under lock; NULL: the built-in source
static weft_env_files_t *files;          // under lock
static int files_fresh;                  // atomic: `files` holds this round's reading
static weft_env_source_loader_t loader;  // atomic
static pthread_once_t settle_once = PTHREAD_ONCE_INIT;
static _Thread_local int settling;

void weft_env_source_set_loader(weft_env_source_loader_t l) { __atomic_store_n(&loader, l, __ATOMIC_RELEASE); }

int weft_env_source_settling(void) { return settling; }

// Reads the configuration files and puts their table in place.
static void read_files(void) {
  char user[PATH_MAX];
  int named = weft_env_files_user_path(user, sizeof(user));
  int user_errno = 0;
  weft_env_files_t *t = weft_env_files_read(named >= 0 ? user : NULL, WEFT_ENV_SYSTEM_CONF, &user_errno);
  pthread_mutex_lock(&lock);
  weft_env_files_t *old = files;
  files = t;
  __atomic_store_n(&files_fresh, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&lock);
  weft_env_files_free(old);
  if (t == NULL)
    WARN("out of memory reading NCCL's configuration files; only the environment sets knobs");
  else if (named == 1 && user_errno != 0)
    WARN("NCCL_CONF_FILE='%s' cannot be read (%s); ignored", user, strerror(user_errno));
}

// The first knob read of the process: the files, then the loader (the
// files may name the env plugin), with this thread's log lines held.
static void settle_first(void) {
  settling = 1;
  weft_debug_hold(1);
  read_files();
  weft_env_source_loader_t l = __atomic_load_n(&loader, __ATOMIC_ACQUIRE);
  const weft_env_source_t *s = l != NULL ? l() : NULL;
  if (s != NULL && s->get == NULL) s = NULL;
  pthread_mutex_lock(&lock);
  active = s;
  pthread_mutex_unlock(&lock);
  weft_debug_hold(0);
  settling = 0;
}

void weft_env_source_settle(void) {
  if (settling) return;
  pthread_once(&settle_once, settle_first);
  if (!__atomic_load_n(&files_fresh, __ATOMIC_ACQUIRE)) read_files();
  weft_debug_flush_held();
}

int weft_env_source_read(const char *name, weft_env_from_t from, char **value, char *origin, size_t originlen) {
  const char *found, *where;
  int res = 0;
  *value = NULL;
  pthread_mutex_lock(&lock);
  if (from == WEFT_ENV_FROM_SOURCE && active != NULL) {
    found = active->get(name);
    where = active->label;
  } else {
    found = getenv(name);
    where = "environment";
    if (found == NULL && from != WEFT_ENV_FROM_PROCESS) found = weft_env_files_get(files, name, &where);
  }
  if (found != NULL) {
    *value = strdup(found);
    if (*value == NULL) res = -1;
    snprintf(origin, originlen, "%s", where != NULL ? where : "?");
  }
  pthread_mutex_unlock(&lock);
  return res;
}

void weft_env_source_retire(void) {
  pthread_mutex_lock(&lock);
  active = NULL;
  pthread_mutex_unlock(&lock);
}

void weft_env_source_forget(void) { __atomic_store_n(&files_fresh, 0, __ATOMIC_RELEASE); }
