/*
 * env.c — cached accessors for the knobs in env_table.h, the strict integer
 * parser they use, and the markdown page generated from the same table.
 *
 * Each knob is read from its source (env_source.h: the environment, then
 * NCCL's configuration files, or an env plugin) the first time its accessor
 * runs and cached (one mutex for the slow path, a per-knob flag read with
 * acquire ordering for the fast path), so a plugin is asked once per knob.
 * NCCL_ENV_PLUGIN itself comes from the built-in source and NCCL_CONF_FILE
 * from the process environment only: they say where the others come from.
 * An empty value counts as unset. A value that
 * differs from the default is reported once at INFO/ENV; an integer that does
 * not parse is reported once with a WARN and the default is used.
 *
 * A knob that was renamed keeps its old name as an alias (`aliases` below):
 * when the knob is unset under its name, its old name is read, and the
 * log says which name set it.
 *
 * String values are copied; the copies are never freed (not even by
 * weft_env_reset), so a pointer an accessor returned stays valid for the life
 * of the process.
 */
#include "env.h"

#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "debug.h"
#include "env_source.h"

typedef struct {
  const char *name;
  const char *doc;
  const char *str_default;
  int64_t int_default;
  int is_int;
} weft_env_knob_t;

// A copied string value, kept on a list that is never freed.
typedef struct weft_env_text {
  struct weft_env_text *next;
  char text[];
} weft_env_text_t;

typedef struct {
  int read;  // atomic: 1 once ival/sval hold this knob's value
  int64_t ival;
  const char *sval;
  int from_env;  // the value was taken from a source (not the default)
  const char *origin;  // that source ("environment", a file, the plugin), or NULL
} weft_env_cache_t;

#define WEFT_ENV_INT(name, def, doc) WEFT_ENV_IDX_##name,
#define WEFT_ENV_STR(name, def, doc) WEFT_ENV_IDX_##name,
enum {
#include "env_table.h"
  WEFT_ENV_COUNT
};
#undef WEFT_ENV_INT
#undef WEFT_ENV_STR

#define WEFT_ENV_INT(name, def, doc) {#name, doc, NULL, (def), 1},
#define WEFT_ENV_STR(name, def, doc) {#name, doc, (def), 0, 0},
static const weft_env_knob_t knobs[WEFT_ENV_COUNT] = {
#include "env_table.h"
};
#undef WEFT_ENV_INT
#undef WEFT_ENV_STR

// Renamed knobs: the old name is read when the new one is unset.
static const struct {
  const char *old_name, *name;
} aliases[] = {
    {"WEFT_SHM_SLOT_BYTES", "WEFT_SLOT_BYTES"},
    {"WEFT_SHM_SLOTS", "WEFT_SLOTS"},
    {"WEFT_CUDA_DIRECT", "WEFT_CUDA_IPC"},
    {"WEFT_CUDA_DIRECT_SCRATCH_BYTES", "WEFT_CUDA_IPC_SCRATCH_BYTES"},
    {"WEFT_CUDA_DIRECT_TWO_PHASE_MIN_BYTES", "WEFT_CUDA_IPC_TWO_PHASE_MIN_BYTES"},
    {"WEFT_CUDA_DIRECT_P2P_BYTES", "WEFT_CUDA_IPC_P2P_BYTES"},
};
#define WEFT_ENV_ALIASES (sizeof(aliases) / sizeof(aliases[0]))

// The old name of knob `name`, or NULL.
static const char *old_name_of(const char *name) {
  for (size_t i = 0; i < WEFT_ENV_ALIASES; i++)
    if (strcmp(aliases[i].name, name) == 0) return aliases[i].old_name;
  return NULL;
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static weft_env_cache_t cache[WEFT_ENV_COUNT];
static weft_env_text_t *texts;

int weft_env_parse_int(const char *text, int64_t *value) {
  if (text == NULL || value == NULL) return -1;
  const char *p = text;
  int negative = 0;
  if (*p == '+' || *p == '-') negative = (*p++ == '-');
  unsigned base = 10;
  if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
    base = 16;
    p += 2;
  }
  uint64_t magnitude = 0;
  int digits = 0;
  for (;; p++, digits++) {
    unsigned d;
    if (*p >= '0' && *p <= '9') d = (unsigned)(*p - '0');
    else if (base == 16 && *p >= 'a' && *p <= 'f') d = (unsigned)(*p - 'a' + 10);
    else if (base == 16 && *p >= 'A' && *p <= 'F') d = (unsigned)(*p - 'A' + 10);
    else break;
    if (magnitude > (UINT64_MAX - d) / base) return -1;
    magnitude = magnitude * base + d;
  }
  if (digits == 0) return -1;
  unsigned shift = 0;
  switch (*p) {
    case 'k': case 'K': shift = 10; p++; break;
    case 'm': case 'M': shift = 20; p++; break;
    case 'g': case 'G': shift = 30; p++; break;
    default: break;
  }
  if (*p != '\0') return -1;
  if (magnitude > (UINT64_MAX >> shift)) return -1;
  magnitude <<= shift;
  uint64_t limit = negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  if (magnitude > limit) return -1;
  if (negative)
    *value = magnitude == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)magnitude;
  else
    *value = (int64_t)magnitude;
  return 0;
}

// Values of knobs that hold secrets are never written to logs.
static int is_secret(const char *name) { return strstr(name, "SECRET") != NULL; }

// Knobs are read on every call: the cached case is one load, inlined.
static inline int is_read(int idx) { return __atomic_load_n(&cache[idx].read, __ATOMIC_ACQUIRE); }

// A copy on the list of texts that are never freed, or NULL out of memory.
static const char *keep_text(const char *text) {
  size_t n = strlen(text);
  weft_env_text_t *t = malloc(sizeof(*t) + n + 1);
  if (t == NULL) return NULL;
  memcpy(t->text, text, n + 1);
  t->next = texts;
  texts = t;
  return t->text;
}

// Where knob idx is read from: the two that decide where the others come
// from skip the plugin.
static weft_env_from_t where_from(int idx) {
  if (idx == WEFT_ENV_IDX_NCCL_CONF_FILE) return WEFT_ENV_FROM_PROCESS;
  if (idx == WEFT_ENV_IDX_NCCL_ENV_PLUGIN) return WEFT_ENV_FROM_BUILTIN;
  return WEFT_ENV_FROM_SOURCE;
}

// name's value from its source into *raw (NULL: unset or empty); -1 out of memory.
static int read_raw(const char *name, weft_env_from_t from, char **raw, char *origin, size_t len) {
  int rc = weft_env_source_read(name, from, raw, origin, len);
  if (*raw != NULL && (*raw)[0] == '\0') {
    free(*raw);
    *raw = NULL;
  }
  return rc;
}

// The first read of knob idx: parse, cache, log.
static void load(int idx) {
  const weft_env_knob_t *k = &knobs[idx];
  enum { QUIET, SAY_INT, SAY_STR, BAD_INT, NO_MEMORY } report = QUIET;
  char bad[128] = "", origin[PATH_MAX + 64] = "";
  int64_t ival = 0;
  const char *sval = NULL;
  int from_env = 0;

  // Outside the lock: the first read of the process loads the env plugin,
  // and the log lines that writes read knobs.
  weft_env_source_settle();
  // Read through the source while the loader runs: provisional, not kept.
  int provisional = weft_env_source_settling() && where_from(idx) == WEFT_ENV_FROM_SOURCE;

  pthread_mutex_lock(&lock);
  if (!cache[idx].read) {
    char *raw = NULL;
    const char *old_name = old_name_of(k->name);
    if (read_raw(k->name, where_from(idx), &raw, origin, sizeof(origin)) != 0) report = NO_MEMORY;
    if (raw == NULL && old_name != NULL) {
      if (read_raw(old_name, where_from(idx), &raw, origin, sizeof(origin)) != 0) report = NO_MEMORY;
      size_t n = strlen(origin);
      if (raw != NULL) snprintf(origin + n, sizeof(origin) - n, " (as %s)", old_name);
    }
    ival = k->int_default;
    sval = k->str_default;
    if (k->is_int && raw != NULL) {
      if (weft_env_parse_int(raw, &ival) != 0) {
        ival = k->int_default;
        snprintf(bad, sizeof(bad), "%s", raw);
        report = BAD_INT;
      } else {
        from_env = 1;
        if (ival != k->int_default) report = SAY_INT;
      }
    } else if (raw != NULL) {
      const char *copy = keep_text(raw);
      if (copy == NULL) {
        report = NO_MEMORY;
      } else {
        sval = copy;
        from_env = 1;
        if (k->str_default == NULL || strcmp(sval, k->str_default) != 0) report = SAY_STR;
      }
    }
    free(raw);
    const char *kept_origin = from_env ? keep_text(origin) : NULL;
    cache[idx].ival = ival;
    cache[idx].sval = sval;
    cache[idx].from_env = from_env;
    cache[idx].origin = kept_origin;
    if (!provisional) __atomic_store_n(&cache[idx].read, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&lock);
  if (provisional && report != NO_MEMORY) report = QUIET;  // the knob's real read reports

  // Log outside the lock: logging may read the debug knobs through here.
  switch (report) {
    case SAY_INT:
      INFO(WEFT_LOG_ENV, "%s set by %s to %" PRId64, k->name, origin, ival);
      break;
    case SAY_STR:
      INFO(WEFT_LOG_ENV, "%s set by %s to %s", k->name, origin, is_secret(k->name) ? "(hidden)" : sval);
      break;
    case BAD_INT:
      if (strcmp(origin, "environment") == 0)
        WARN("%s='%s' is not an integer; using default %" PRId64, k->name, is_secret(k->name) ? "(hidden)" : bad,
             k->int_default);
      else
        WARN("%s='%s' (set by %s) is not an integer; using default %" PRId64, k->name,
             is_secret(k->name) ? "(hidden)" : bad, origin, k->int_default);
      break;
    case NO_MEMORY:
      WARN("out of memory reading %s; using its default", k->name);
      break;
    case QUIET:
      break;
  }
}

#define WEFT_ENV_INT(name, def, doc)                 \
  int64_t weft_env_##name(void) {                    \
    if (!is_read(WEFT_ENV_IDX_##name)) load(WEFT_ENV_IDX_##name); \
    return cache[WEFT_ENV_IDX_##name].ival;          \
  }
#define WEFT_ENV_STR(name, def, doc)                 \
  const char *weft_env_##name(void) {                \
    if (!is_read(WEFT_ENV_IDX_##name)) load(WEFT_ENV_IDX_##name); \
    return cache[WEFT_ENV_IDX_##name].sval;          \
  }
#include "env_table.h"
#undef WEFT_ENV_INT
#undef WEFT_ENV_STR

int weft_env_knob_count(void) { return WEFT_ENV_COUNT; }

int weft_env_knob_find(const char *name) {
  for (size_t i = 0; name != NULL && i < WEFT_ENV_ALIASES; i++)
    if (strcmp(aliases[i].old_name, name) == 0) name = aliases[i].name;
  for (int i = 0; name != NULL && i < WEFT_ENV_COUNT; i++)
    if (strcmp(knobs[i].name, name) == 0) return i;
  return -1;
}

void weft_env_knob_info(int idx, weft_env_knob_info_t *out) {
  const weft_env_knob_t *k = &knobs[idx];
  *out = (weft_env_knob_info_t){.name = k->name, .doc = k->doc, .is_int = k->is_int, .int_default = k->int_default,
                                .str_default = k->str_default, .secret = is_secret(k->name)};
}

int64_t weft_env_knob_int(int idx) {
  if (!is_read(idx)) load(idx);
  return cache[idx].ival;
}

const char *weft_env_knob_str(int idx) {
  if (!is_read(idx)) load(idx);
  return cache[idx].sval;
}

int weft_env_knob_from_env(int idx) {
  if (!is_read(idx)) load(idx);
  return cache[idx].from_env;
}

const char *weft_env_knob_origin(int idx) {
  if (!is_read(idx)) load(idx);
  return cache[idx].origin;
}

void weft_env_reset(void) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < WEFT_ENV_COUNT; i++) __atomic_store_n(&cache[i].read, 0, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&lock);
  weft_env_source_forget();  // the configuration files are read again too
  weft_debug_reset();  // the log settings were derived from these knobs
}

// Markdown table cells: '|' would end the cell.
static void print_cell(const char *text) {
  for (const char *p = text; *p; p++) {
    if (*p == '|') fputc('\\', stdout);
    fputc(*p, stdout);
  }
}

void weft_env_print_markdown(void) {
  fputs("# Environment variables\n"
        "\n"
        "weft reads each of these variables once, the first time it is needed, and\n"
        "keeps the value for the life of the process. An empty value counts as\n"
        "unset. Integers are decimal or 0x-prefixed hexadecimal, optionally signed,\n"
        "with an optional K, M or G suffix (powers of 1024); a value that does not\n"
        "parse is reported with a warning and the default is used. A value that\n"
        "differs from the default is logged once at INFO level (subsystem ENV),\n"
        "with where it came from. NCCL's names are used where NCCL has the same\n"
        "knob, WEFT_ otherwise. This page is generated from src/base/env_table.h\n"
        "by `weft-env --markdown`.\n"
        "\n"
        "As in NCCL, a variable the environment does not set (an empty one counts\n"
        "as set) is looked up in the user's configuration file, `$NCCL_CONF_FILE`\n"
        "or else `~/.nccl.conf`, and then in `/etc/nccl.conf`: lines `NAME=VALUE`,\n"
        "`#` starting a comment line, nothing trimmed, a name's first line\n"
        "counting. The files are read at the first read of any variable. Unlike\n"
        "NCCL, weft does not copy their settings into the process environment:\n"
        "they set weft's variables, but the program, its child processes and an\n"
        "env plugin's own `getenv` do not see them. An env plugin\n"
        "(`NCCL_ENV_PLUGIN`, docs/plugins.md), loaded at the first read of any\n"
        "variable, supplies every variable but `NCCL_ENV_PLUGIN` (environment,\n"
        "then the files) and `NCCL_CONF_FILE` (environment only) in place of the\n"
        "environment and the files, `NCCL_DEBUG` and the other logging\n"
        "variables included.\n"
        "\n",
        stdout);
  fputs("Renamed variables are still read under their old names when the new\n"
        "name is unset:", stdout);
  for (size_t i = 0; i < WEFT_ENV_ALIASES; i++)
    printf("%s `%s` for `%s`", i ? "," : "", aliases[i].old_name, aliases[i].name);
  fputs(".\n"
        "\n"
        "| Variable | Default | Meaning |\n"
        "|---|---|---|\n",
        stdout);
  for (int i = 0; i < WEFT_ENV_COUNT; i++) {
    const weft_env_knob_t *k = &knobs[i];
    printf("| `%s` | ", k->name);
    if (k->is_int) {
      printf("`%" PRId64 "`", k->int_default);
    } else if (k->str_default != NULL) {
      fputc('`', stdout);
      print_cell(k->str_default);
      fputc('`', stdout);
    } else {
      fputs("(unset)", stdout);
    }
    fputs(" | ", stdout);
    print_cell(k->doc);
    fputs(" |\n", stdout);
  }
  fflush(stdout);
}
