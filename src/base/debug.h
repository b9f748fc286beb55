/*
 * debug.h — NCCL-compatible logging.
 *
 * NCCL_DEBUG=VERSION|WARN|INFO|TRACE chooses the level, NCCL_DEBUG_SUBSYS
 * (comma list, "^" prefix negates, ALL) filters INFO/TRACE lines,
 * NCCL_DEBUG_FILE (with %h host and %p pid) redirects them. Every line starts
 * "host:pid:tid [rank] NCCL <LEVEL> ...", as NCCL's do, so existing log
 * tooling parses weft's logs. A disabled line costs one branch on a cached
 * level. WARN text is also kept as the "last error" (ncclGetLastError).
 */
#ifndef WEFT_DEBUG_H
#define WEFT_DEBUG_H

#include <stdint.h>

// Subsystem bits: same values as NCCL's ncclDebugLogSubSys.
enum {
  WEFT_LOG_INIT = 0x1,
  WEFT_LOG_COLL = 0x2,
  WEFT_LOG_P2P = 0x4,
  WEFT_LOG_SHM = 0x8,
  WEFT_LOG_NET = 0x10,
  WEFT_LOG_GRAPH = 0x20,
  WEFT_LOG_TUNING = 0x40,
  WEFT_LOG_ENV = 0x80,
  WEFT_LOG_ALLOC = 0x100,
  WEFT_LOG_CALL = 0x200,
  WEFT_LOG_PROXY = 0x400,
  WEFT_LOG_NVLS = 0x800,
  WEFT_LOG_BOOTSTRAP = 0x1000,
  WEFT_LOG_REG = 0x2000,
  WEFT_LOG_PROFILE = 0x4000,
  WEFT_LOG_RAS = 0x8000,
  WEFT_LOG_ALL = ~0
};

enum { WEFT_LEVEL_NONE = 0, WEFT_LEVEL_VERSION = 1, WEFT_LEVEL_WARN = 2,
       WEFT_LEVEL_INFO = 3, WEFT_LEVEL_ABORT = 4, WEFT_LEVEL_TRACE = 5 };

// Cached level. Until the first log call reads the environment (and after
// weft_debug_reset) it lets everything through to weft_debug_log, which
// reads the settings and filters; from then on a disabled line is one branch.
extern int weft_debug_level;
extern uint64_t weft_debug_mask;

void weft_debug_init(void);      // reads the environment (idempotent, thread-safe)
void weft_debug_reset(void);     // forget cached settings; next log re-reads them
void weft_debug_log(int level, uint64_t subsys, const char *file, int line,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

// While on, this thread's log lines are kept instead of written: env.h turns
// it on while it settles where knob values come from (the debug settings
// are knobs too). weft_debug_flush_held writes the kept lines, in order,
// under the settings then in force (nothing while this thread is still
// holding or reading the settings: their end flushes).
void weft_debug_hold(int on);
void weft_debug_flush_held(void);

// The rank printed in the "[rank]" prefix for log lines from this thread.
void weft_debug_set_rank(int rank);
// Text of the most recent WARN of this process ("" if none).
const char *weft_debug_last_error(void);

#define WEFT_LOG_ENABLED(level, subsys)                                     \
  (__builtin_expect(weft_debug_level >= (level), 0) && (weft_debug_mask & (uint64_t)(subsys)))

#define WARN(...) weft_debug_log(WEFT_LEVEL_WARN, WEFT_LOG_ALL, __FILE__, __LINE__, __VA_ARGS__)
#define INFO(subsys, ...)                                                   \
  do {                                                                      \
    if (WEFT_LOG_ENABLED(WEFT_LEVEL_INFO, subsys))                          \
      weft_debug_log(WEFT_LEVEL_INFO, (subsys), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define TRACE(subsys, ...)                                                  \
  do {                                                                      \
    if (WEFT_LOG_ENABLED(WEFT_LEVEL_TRACE, subsys))                         \
      weft_debug_log(WEFT_LEVEL_TRACE, (subsys), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

#endif
