/*
 * util.h — small helpers shared by the core: clocks, hashing, the global
 * timeout, the spin budget, constant-time comparison, the spin-wait pause.
 */
#ifndef WEFT_UTIL_H
#define WEFT_UTIL_H

#include <stddef.h>
#include <stdint.h>

int64_t weft_now_ms(void);   // monotonic
int64_t weft_now_ns(void);   // monotonic
// WEFT_TIMEOUT in milliseconds; -1 means "never" (as the socket calls take it).
int64_t weft_timeout_ms(void);
// A call idle for idle_ns whose wait has WARNed `warned` times already: is
// the next WARN due (at each multiple of WEFT_TIMEOUT; never without one)?
int weft_timeout_due(int64_t idle_ns, int64_t warned);
// That WARN, naming what waits on what (`reason`). Returns 1 when the call
// must now fail with ncclTimeout (WEFT_TIMEOUT_FAIL=1); else it says the
// wait goes on and returns 0.
int weft_timeout_warn(const char *reason);
// How long a rank waiting for `sharers` ranks of its host polls before it
// sleeps: WEFT_SPIN_NS, or with -1 a long poll while they fit on the online
// CPUs and a short one when they outnumber them (0 sharers: not known).
int64_t weft_spin_ns(int sharers);
uint64_t weft_hash_bytes(const void *data, size_t len);  // FNV-1a 64
int weft_consttime_eq(const void *a, const void *b, size_t len);
// "ip:port" of the socket's peer ("?" when unknown).
void weft_socket_peer_str(int fd, char *buf, size_t len);

// One polling pause for a thread spinning on a line another core will write.
static inline void weft_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

#define WEFT_MIN(a, b) ((a) < (b) ? (a) : (b))
#define WEFT_MAX(a, b) ((a) > (b) ? (a) : (b))
#define WEFT_DIV_UP(a, b) (((a) + (b)-1) / (b))
#define WEFT_ALIGN_UP(a, b) (WEFT_DIV_UP(a, b) * (b))

#endif
