/*
 * debug.c — NCCL-compatible logging (see debug.h).
 *
 * Settings (level, subsystem mask, output file, host name) are read from the
 * environment lazily by the first log call (and again after
 * weft_debug_reset()), so a program may set NCCL_DEBUG after loading the
 * library, as it can with NCCL. Until they are read, the cached level and
 * mask let every line through to weft_debug_log(), which reads the settings
 * and then filters, so "disabled costs one branch" holds once settled.
 *
 * Each line is assembled in one buffer and written with one fwrite + fflush
 * under a mutex, so lines from concurrent threads never interleave. WARN text
 * is always kept as the process's last error, printed or not.
 *
 * The settings come through env.h, whose accessors log "set by environment"
 * through this module; a thread-local flag drops those lines while this
 * thread is reading the settings, so the two modules never recurse.
 *
 * While env.h settles where knob values come from (an env plugin is loaded
 * at the first knob read; env_source.h), the settings cannot be read yet:
 * that thread's lines are held (weft_debug_hold) and written afterwards,
 * under the settings the settled source gives (weft_debug_flush_held).
 */
#include "debug.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "env.h"

#define WEFT_DEBUG_LINE_BYTES 2048
#define WEFT_DEBUG_ERROR_BYTES 1024
#define WEFT_DEBUG_HOST_BYTES 64

// Before the settings are read, let every line reach weft_debug_log().
int weft_debug_level = WEFT_LEVEL_TRACE;
uint64_t weft_debug_mask = ~(uint64_t)0;

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static int initialised;                 // atomic; guarded writes under init_lock
static _Thread_local int in_init;       // this thread is reading the settings

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *out_file;                  // NULL: stdout
static char host[WEFT_DEBUG_HOST_BYTES] = "unknown";

static pthread_mutex_t error_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_error[WEFT_DEBUG_ERROR_BYTES];

static _Thread_local int thread_rank = -1;

// Lines held while this thread settles the knobs' source, written later in order.
typedef struct held_line {
  struct held_line *next;
  int level, line;
  uint64_t subsys;
  const char *file;
  char text[];
} held_line_t;
#define WEFT_DEBUG_HELD_MAX 64
static _Thread_local int holding;
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static held_line_t *held_first, **held_last = &held_first;
static int held_count, held_dropped;
static int held_pending;  // atomic: lines wait in the list

static const struct {
  const char *name;
  uint64_t bit;
} subsystems[] = {
    {"INIT", WEFT_LOG_INIT},       {"COLL", WEFT_LOG_COLL},
    {"P2P", WEFT_LOG_P2P},         {"SHM", WEFT_LOG_SHM},
    {"NET", WEFT_LOG_NET},         {"GRAPH", WEFT_LOG_GRAPH},
    {"TUNING", WEFT_LOG_TUNING},   {"ENV", WEFT_LOG_ENV},
    {"ALLOC", WEFT_LOG_ALLOC},     {"CALL", WEFT_LOG_CALL},
    {"PROXY", WEFT_LOG_PROXY},     {"NVLS", WEFT_LOG_NVLS},
    {"BOOTSTRAP", WEFT_LOG_BOOTSTRAP}, {"REG", WEFT_LOG_REG},
    {"PROFILE", WEFT_LOG_PROFILE}, {"RAS", WEFT_LOG_RAS},
    {"ALL", ~(uint64_t)0},
};

static int parse_level(const char *text) {
  static const struct {
    const char *name;
    int level;
  } levels[] = {{"VERSION", WEFT_LEVEL_VERSION}, {"WARN", WEFT_LEVEL_WARN},
                {"INFO", WEFT_LEVEL_INFO},       {"ABORT", WEFT_LEVEL_ABORT},
                {"TRACE", WEFT_LEVEL_TRACE}};
  if (text == NULL) return WEFT_LEVEL_NONE;
  for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
    if (strcasecmp(text, levels[i].name) == 0) return levels[i].level;
  return WEFT_LEVEL_WARN;  // unknown value: warnings only
}

// Comma list of subsystem names; a leading '^' inverts the whole set.
// Unknown names are collected in `bad` (comma separated) for one warning.
static uint64_t parse_mask(const char *text, char *bad, size_t bad_len) {
  bad[0] = '\0';
  if (text == NULL) return WEFT_LOG_INIT | WEFT_LOG_BOOTSTRAP | WEFT_LOG_ENV;
  int invert = 0;
  if (*text == '^') {
    invert = 1;
    text++;
  }
  uint64_t mask = 0;
  while (*text) {
    while (*text == ' ' || *text == ',') text++;
    size_t n = strcspn(text, ",");
    size_t end = n;
    while (end > 0 && text[end - 1] == ' ') end--;
    if (end > 0) {
      int known = 0;
      for (size_t i = 0; i < sizeof(subsystems) / sizeof(subsystems[0]); i++) {
        if (strlen(subsystems[i].name) == end && strncasecmp(text, subsystems[i].name, end) == 0) {
          mask |= subsystems[i].bit;
          known = 1;
          break;
        }
      }
      if (!known) {
        size_t used = strlen(bad);
        snprintf(bad + used, bad_len - used, "%s%.*s", used ? "," : "", (int)end, text);
      }
    }
    text += n;
  }
  return invert ? ~mask : mask;
}

// The host name is read once: log lines on other threads read it unlocked.
static void read_host_name(void) {
  static int done;
  if (done) return;
  done = 1;
  char name[256];
  if (gethostname(name, sizeof(name)) != 0) {
    snprintf(host, sizeof(host), "unknown");
    return;
  }
  name[sizeof(name) - 1] = '\0';
  name[strcspn(name, ".")] = '\0';  // short name, as NCCL prints it
  snprintf(host, sizeof(host), "%.*s", (int)sizeof(host) - 1, name);
}

// Expand %h (host) and %p (pid) and %% in the NCCL_DEBUG_FILE pattern.
static int expand_path(const char *pattern, char *out, size_t out_len) {
  size_t used = 0;
  for (const char *p = pattern; *p; p++) {
    char piece[64];
    const char *add = piece;
    if (p[0] == '%' && p[1] == 'h') {
      add = host;
      p++;
    } else if (p[0] == '%' && p[1] == 'p') {
      snprintf(piece, sizeof(piece), "%d", (int)getpid());
      p++;
    } else if (p[0] == '%' && p[1] == '%') {
      piece[0] = '%', piece[1] = '\0';
      p++;
    } else {
      piece[0] = *p, piece[1] = '\0';
    }
    size_t n = strlen(add);
    if (used + n + 1 > out_len) return -1;
    memcpy(out + used, add, n);
    used += n;
  }
  out[used] = '\0';
  return 0;
}

static long thread_id(void) { return (long)syscall(SYS_gettid); }

// Format one complete line into `stack` (or a heap buffer when it does not
// fit; the caller frees *heap). Returns the line length; *msg points at the
// message part inside the line.
static size_t format_line(char *stack, size_t cap, char **heap, const char **msg, int level,
                          const char *file, int line, const char *fmt, va_list ap) {
  const char *label = level == WEFT_LEVEL_WARN    ? "WARN"
                      : level == WEFT_LEVEL_ABORT ? "ABORT"
                      : level == WEFT_LEVEL_TRACE ? "TRACE"
                                                  : "INFO";
  char rank[16] = "-";
  if (thread_rank >= 0) snprintf(rank, sizeof(rank), "%d", thread_rank);
  char where[128] = "";
  if (level == WEFT_LEVEL_TRACE && file != NULL) {
    const char *base = strrchr(file, '/');
    snprintf(where, sizeof(where), "%s:%d ", base ? base + 1 : file, line);
  }
  int plen = snprintf(stack, cap, "%s:%d:%ld [%s] NCCL %s %s", host, (int)getpid(), thread_id(),
                      rank, label, where);
  if (plen < 0 || (size_t)plen >= cap) plen = 0;

  va_list again;
  va_copy(again, ap);
  char *buf = stack;
  size_t room = cap - (size_t)plen;
  int mlen = vsnprintf(buf + plen, room, fmt, ap);
  if (mlen < 0) mlen = 0, buf[plen] = '\0';
  if ((size_t)mlen + 2 > room) {
    char *big = malloc((size_t)plen + (size_t)mlen + 2);
    if (big != NULL) {
      memcpy(big, stack, (size_t)plen);
      vsnprintf(big + plen, (size_t)mlen + 1, fmt, again);
      buf = *heap = big;
    } else {
      mlen = (int)room - 2;  // keep the truncated text
    }
  }
  va_end(again);
  size_t len = (size_t)plen + (size_t)mlen;
  while (len > (size_t)plen && buf[len - 1] == '\n') len--;
  buf[len] = '\n';
  buf[len + 1] = '\0';
  *msg = buf + plen;
  return len + 1;
}

static void write_line(const char *line, size_t len) {
  pthread_mutex_lock(&out_lock);
  FILE *f = out_file ? out_file : stdout;
  fwrite(line, 1, len, f);
  fflush(f);
  pthread_mutex_unlock(&out_lock);
}

static void log_va(int level, uint64_t subsys, const char *file, int line, int record,
                   const char *fmt, va_list ap) {
  int print = weft_debug_level >= level &&
              (level <= WEFT_LEVEL_WARN || (weft_debug_mask & subsys) != 0);
  int keep = record && level == WEFT_LEVEL_WARN;
  if (!print && !keep) return;

  char stack[WEFT_DEBUG_LINE_BYTES];
  char *heap = NULL;
  const char *msg = NULL;
  size_t len = format_line(stack, sizeof(stack), &heap, &msg, level, file, line, fmt, ap);
  const char *text = heap ? heap : stack;
  if (keep) {
    size_t mlen = (size_t)(text + len - 1 - msg);  // without the newline
    if (mlen >= sizeof(last_error)) mlen = sizeof(last_error) - 1;
    pthread_mutex_lock(&error_lock);
    memcpy(last_error, msg, mlen);
    last_error[mlen] = '\0';
    pthread_mutex_unlock(&error_lock);
  }
  if (print) write_line(text, len);
  free(heap);
}

// A warning about the logging settings themselves: printed, not recorded.
static void settings_warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void settings_warning(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  log_va(WEFT_LEVEL_WARN, WEFT_LOG_ALL, __FILE__, __LINE__, 0, fmt, ap);
  va_end(ap);
}

void weft_debug_init(void) {
  if (in_init || __atomic_load_n(&initialised, __ATOMIC_ACQUIRE)) return;
  char bad[256] = "";
  char path[PATH_MAX] = "";
  int open_errno = 0;
  const char *pattern = NULL;

  pthread_mutex_lock(&init_lock);
  if (!initialised) {
    in_init = 1;
    int level = parse_level(weft_env_NCCL_DEBUG());
    uint64_t mask = parse_mask(weft_env_NCCL_DEBUG_SUBSYS(), bad, sizeof(bad));
    pattern = weft_env_NCCL_DEBUG_FILE();
    in_init = 0;

    read_host_name();
    FILE *file = NULL;
    if (pattern != NULL && level > WEFT_LEVEL_NONE) {
      if (expand_path(pattern, path, sizeof(path)) != 0) {
        open_errno = ENAMETOOLONG;
      } else if ((file = fopen(path, "we")) == NULL) {
        open_errno = errno;
      }
    }
    pthread_mutex_lock(&out_lock);
    if (out_file != NULL) fclose(out_file);
    out_file = file;
    pthread_mutex_unlock(&out_lock);

    __atomic_store_n(&weft_debug_mask, mask, __ATOMIC_RELAXED);
    __atomic_store_n(&weft_debug_level, level, __ATOMIC_RELAXED);
    __atomic_store_n(&initialised, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&init_lock);

  if (open_errno != 0)
    settings_warning("NCCL_DEBUG_FILE '%s' cannot be opened (%s); logging to stdout",
                     path[0] ? path : pattern, strerror(open_errno));
  if (bad[0] != '\0')
    settings_warning("NCCL_DEBUG_SUBSYS: unknown subsystem(s) '%s' ignored", bad);
  weft_debug_flush_held();  // lines held while the settings' source was settled on this thread
}

// Forget the settings; the next log call (or weft_debug_init) reads them
// again. They come through env.h's cache, which weft_env_reset() clears (it
// also calls this function).
void weft_debug_reset(void) {
  pthread_mutex_lock(&init_lock);
  __atomic_store_n(&initialised, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&weft_debug_mask, ~(uint64_t)0, __ATOMIC_RELAXED);
  __atomic_store_n(&weft_debug_level, WEFT_LEVEL_TRACE, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&init_lock);
}

// Keeps a line of a holding thread, formatted now (its arguments do not outlive the call).
static void hold_line(int level, uint64_t subsys, const char *file, int line, const char *fmt, va_list ap) {
  char text[WEFT_DEBUG_LINE_BYTES];
  vsnprintf(text, sizeof(text), fmt, ap);
  size_t n = strlen(text);
  held_line_t *h = malloc(sizeof(*h) + n + 1);
  pthread_mutex_lock(&held_lock);
  if (h == NULL || held_count >= WEFT_DEBUG_HELD_MAX) {
    held_dropped++;
    free(h);
  } else {
    *h = (held_line_t){.level = level, .line = line, .subsys = subsys, .file = file};
    memcpy(h->text, text, n + 1);
    *held_last = h;
    held_last = &h->next;
    held_count++;
  }
  __atomic_store_n(&held_pending, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&held_lock);
}

void weft_debug_hold(int on) { holding = on; }

void weft_debug_flush_held(void) {
  if (holding || in_init || !__atomic_load_n(&held_pending, __ATOMIC_ACQUIRE)) return;
  if (!__atomic_load_n(&initialised, __ATOMIC_ACQUIRE)) weft_debug_init();  // flushes at its end
  pthread_mutex_lock(&held_lock);
  held_line_t *h = held_first;
  int dropped = held_dropped;
  held_first = NULL, held_last = &held_first, held_count = 0, held_dropped = 0;
  __atomic_store_n(&held_pending, 0, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&held_lock);
  while (h != NULL) {
    held_line_t *next = h->next;
    weft_debug_log(h->level, h->subsys, h->file, h->line, "%s", h->text);
    free(h);
    h = next;
  }
  if (dropped > 0)
    weft_debug_log(WEFT_LEVEL_INFO, WEFT_LOG_ENV, __FILE__, __LINE__,
                   "%d log lines written while the environment's source was loading were dropped", dropped);
}

void weft_debug_log(int level, uint64_t subsys, const char *file, int line, const char *fmt,
                    ...) {
  if (holding) {  // the knobs' source is being settled on this thread: keep the line for later
    va_list ap;
    va_start(ap, fmt);
    hold_line(level, subsys, file, line, fmt, ap);
    va_end(ap);
    return;
  }
  if (in_init) return;  // an env accessor logging while we read the settings
  if (!__atomic_load_n(&initialised, __ATOMIC_ACQUIRE)) weft_debug_init();
  va_list ap;
  va_start(ap, fmt);
  log_va(level, subsys, file, line, 1, fmt, ap);
  va_end(ap);
}

void weft_debug_set_rank(int rank) { thread_rank = rank; }

const char *weft_debug_last_error(void) {
  static _Thread_local char snapshot[WEFT_DEBUG_ERROR_BYTES];
  pthread_mutex_lock(&error_lock);
  memcpy(snapshot, last_error, sizeof(snapshot));
  pthread_mutex_unlock(&error_lock);
  return snapshot;
}

// A child forked while another thread held a logging lock would deadlock on
// its first log line; hold all four across fork (in their usual order).
static void fork_prepare(void) {
  pthread_mutex_lock(&init_lock);
  pthread_mutex_lock(&out_lock);
  pthread_mutex_lock(&error_lock);
  pthread_mutex_lock(&held_lock);
}

static void fork_release(void) {
  pthread_mutex_unlock(&held_lock);
  pthread_mutex_unlock(&error_lock);
  pthread_mutex_unlock(&out_lock);
  pthread_mutex_unlock(&init_lock);
}

__attribute__((constructor)) static void debug_load(void) {
  pthread_atfork(fork_prepare, fork_release, fork_release);
}
