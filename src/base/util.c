/*
 * util.c — clocks, hashing, the global timeout and other small helpers.
 */
#include "util.h"

#include <stdio.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "debug.h"
#include "env.h"
#include "socket.h"

int64_t weft_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t weft_now_ms(void) { return weft_now_ns() / 1000000; }

int64_t weft_timeout_ms(void) {
  int64_t s = weft_env_WEFT_TIMEOUT();
  return s <= 0 ? -1 : s * 1000;
}

int weft_timeout_due(int64_t idle_ns, int64_t warned) {
  int64_t ms = weft_timeout_ms();
  return ms > 0 && idle_ns > ms * 1000000 * (warned + 1);
}

int weft_timeout_warn(const char *reason) {
  if (weft_env_WEFT_TIMEOUT_FAIL()) {
    WARN("%s", reason);
    return 1;
  }
  WARN("%s; still waiting (WEFT_TIMEOUT_FAIL=1 fails it)", reason);
  return 0;
}

// A futex wake-up costs 30-40 us on a virtual CPU that went idle, more than
// most gaps between the steps of a collective; a rank that has a core to
// itself polls through them. Ranks that share cores poll briefly, so the one
// with work gets the core.
#define SPIN_OWN_CORE_NS 1000000
#define SPIN_SHARED_CORE_NS 20000

int64_t weft_spin_ns(int sharers) {
  int64_t set = weft_env_WEFT_SPIN_NS();
  if (set >= 0) return set;
  if (sharers <= 0) return SPIN_SHARED_CORE_NS;  // stream workers ask on every idle spell: no sysconf (a file read)
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus > 0 && sharers <= cpus ? SPIN_OWN_CORE_NS : SPIN_SHARED_CORE_NS;
}

uint64_t weft_hash_bytes(const void *data, size_t len) {
  const unsigned char *p = data;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

int weft_consttime_eq(const void *a, const void *b, size_t len) {
  const volatile unsigned char *x = a, *y = b;
  unsigned char diff = 0;
  for (size_t i = 0; i < len; i++) diff |= (unsigned char)(x[i] ^ y[i]);
  return diff == 0;
}

void weft_socket_peer_str(int fd, char *buf, size_t len) {
  weft_sockaddr_t addr;
  socklen_t alen = sizeof(addr);
  if (getpeername(fd, &addr.sa, &alen) != 0) {
    snprintf(buf, len, "?");
    return;
  }
  weft_socket_addr_str(&addr, buf, len);
}
