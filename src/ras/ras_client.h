/*
 * ras_client.h — one connection to the RAS client socket (NCCL's text
 * protocol: ras_client.c), as the RAS thread holds it.
 */
#ifndef WEFT_RAS_CLIENT_H
#define WEFT_RAS_CLIENT_H

#include <stddef.h>

#include "ras_internal.h"

typedef struct weft_ras_client {
  int fd;
  char in[1024];
  size_t inlen;
  int json;          // SET FORMAT json
  int verbose;       // VERBOSE STATUS
  int timeout_s;     // TIMEOUT: how long a STATUS waits on the other processes
  int wants_status;  // STATUS asked, answered once the job's state is in
  int monitor;       // MONITOR: 1 lifecycle, 2 trace, 3 both
  struct weft_ras_client *next;
} weft_ras_client_t;

// Read what came and act on each whole line; -1: close it.
int weft_ras_client_read(weft_ras_client_t *c);
// Send text (blocking, bounded); -1 when the client is gone.
int weft_ras_client_send(weft_ras_client_t *c, const char *s, size_t len);
// The STATUS answer from the job's view; the caller then closes the client.
void weft_ras_client_answer(weft_ras_client_t *c, const weft_ras_view_t *v);

#endif
