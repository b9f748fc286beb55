/*
 * hello_pool.h — connections on a listener whose opening message is still
 * arriving.
 *
 * Set-up servers (the bootstrap root, a rank waiting for its ring
 * neighbour, the leader of ncclCommShrink) accept connections and read a
 * hello from each before they know who is calling. Over a lossy link TCP may
 * take seconds to deliver a hello, and a stranger may connect and say
 * nothing, so no server may wait on one connection: the pool reads whatever
 * has arrived on each and hands a connection back once the bytes asked for
 * are in. A silent connection keeps its slot until the slot is needed for a
 * newcomer and it has been silent for `room_after_ms`.
 *
 * The caller asks for a header first, reads it from `buf`, and then either
 * asks for more (the body the header announces), takes the connection, or
 * drops it.
 */
#ifndef WEFT_HELLO_POOL_H
#define WEFT_HELLO_POOL_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl.h"
#include "socket.h"

typedef struct {
  int fd;
  weft_sockaddr_t from;
  int64_t since, heard;  // accepted at, last bytes at (weft_now_ms)
  size_t got, want;      // bytes in buf; bytes asked for
  char *buf;             // want bytes
  int lost;              // closed (or failed) before `want` bytes arrived
} weft_hello_t;

typedef struct {
  int listen_fd;
  int cap, n;
  size_t first;          // bytes every newcomer is asked for
  int64_t room_after_ms;
  const char *owner;     // names the server in log lines
  weft_hello_t *slot;
  struct pollfd *pfd;
} weft_hello_pool_t;

typedef enum {
  WEFT_HELLO_READY,  // *idx has `want` bytes in its buf
  WEFT_HELLO_LOST,   // *idx closed first; drop it (its got says how far it came)
  WEFT_HELLO_IDLE,   // nothing within the wait
} weft_hello_event_t;

// A pool of at most cap connections on listen_fd (which stays the caller's),
// asking each for `first` bytes.
ncclResult_t weft_hello_pool_init(weft_hello_pool_t *p, int listen_fd, int cap, size_t first, int64_t room_after_ms,
                                  const char *owner);
// Closes the connections still pending.
void weft_hello_pool_free(weft_hello_pool_t *p);

// Accept newcomers and read what has arrived, for at most wait_ms. A ready
// or lost connection is reported before waiting again; the caller must then
// ask for more, take or drop it. ncclSystemError if the listener fails.
ncclResult_t weft_hello_pool_poll(weft_hello_pool_t *p, int wait_ms, weft_hello_event_t *ev, int *idx);

// Ask connection idx for `more` bytes beyond those it has (0 if out of memory).
int weft_hello_pool_extend(weft_hello_pool_t *p, int idx, size_t more);
// Remove connection idx from the pool and return its fd, now the caller's.
// Other indices may change.
int weft_hello_pool_take(weft_hello_pool_t *p, int idx);
// Close connection idx. Other indices may change.
void weft_hello_pool_drop(weft_hello_pool_t *p, int idx);

#endif
