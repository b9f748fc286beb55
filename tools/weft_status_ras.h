/*
 * weft_status_ras.h — weft-status's RAS client (weft_status_ras.c).
 */
#ifndef WEFT_STATUS_RAS_H
#define WEFT_STATUS_RAS_H

typedef struct {
  const char *addr;  // HOST:PORT of a RAS client socket
  int json, verbose;
  int timeout_s;        // TIMEOUT: how long the server waits on the job's other processes
  const char *monitor;  // MONITOR's groups ("" for the default), NULL: STATUS
  int for_s;            // how long to monitor (0: until killed)
} weft_ras_args_t;

// Print the job's state (or its events); 0 on success.
int weft_status_ras(const weft_ras_args_t *a);

#endif
