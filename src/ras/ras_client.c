/*
 * ras_client.c — NCCL's RAS client protocol, one line per command:
 *
 *   CLIENT PROTOCOL <n>   ->  SERVER PROTOCOL 2
 *   TIMEOUT <seconds>     ->  OK      (0: wait for every process)
 *   SET FORMAT text|json  ->  OK
 *   STATUS, VERBOSE STATUS -> the report, then the connection closes
 *   MONITOR [lifecycle|trace|all,...] -> OK, then one line (text) or one
 *                            object (json) per event while connected
 *
 * Keywords are case-insensitive and a trailing CR is ignored (telnet), as
 * NCCL's server does; anything else gets "ERROR: ..." and the connection
 * stays open.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "ras_client.h"
#include "socket.h"

int weft_ras_client_send(weft_ras_client_t *c, const char *s, size_t len) {
  return weft_socket_send(c->fd, s, len, 5000) == ncclSuccess ? 0 : -1;
}

static int reply(weft_ras_client_t *c, const char *s) { return weft_ras_client_send(c, s, strlen(s)); }

// "lifecycle,trace" -> mask; 0 for an unknown group (named in *bad).
static int monitor_mask(char *spec, const char **bad) {
  int mask = 0;
  char *save = NULL;
  for (char *t = strtok_r(spec, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
    while (*t == ' ') t++;
    if (strcasecmp(t, "lifecycle") == 0)
      mask |= 1;
    else if (strcasecmp(t, "trace") == 0)
      mask |= 2;
    else if (strcasecmp(t, "all") == 0)
      mask |= 3;
    else {
      *bad = t;
      return 0;
    }
  }
  return mask ? mask : 1;
}

static int command(weft_ras_client_t *c, char *cmd) {
  char line[1200];
  if (strncasecmp(cmd, "client protocol ", 16) == 0) {
    snprintf(line, sizeof(line), "SERVER PROTOCOL %d\n", WEFT_RAS_PROTOCOL);
    return reply(c, line);
  }
  if (strncasecmp(cmd, "timeout ", 8) == 0) {
    char *end;
    long t = strtol(cmd + 8, &end, 10);
    if (end == cmd + 8 || *end != '\0' || t < 0 || t > 86400) {
      snprintf(line, sizeof(line), "ERROR: Invalid timeout value %.1000s\n", cmd + 8);
      return reply(c, line);
    }
    c->timeout_s = (int)t;
    return reply(c, "OK\n");
  }
  if (strncasecmp(cmd, "set format ", 11) == 0) {
    const char *f = cmd + 11;
    if (strcasecmp(f, "text") != 0 && strcasecmp(f, "json") != 0) {
      snprintf(line, sizeof(line), "ERROR: Invalid format %.1000s\n", f);
      return reply(c, line);
    }
    c->json = strcasecmp(f, "json") == 0;
    return reply(c, "OK\n");
  }
  if (strcasecmp(cmd, "status") == 0 || strcasecmp(cmd, "verbose status") == 0) {
    c->verbose = strcasecmp(cmd, "verbose status") == 0;
    c->wants_status = 1;
    return 0;
  }
  if (strcasecmp(cmd, "monitor") == 0 || strncasecmp(cmd, "monitor ", 8) == 0) {
    const char *bad = NULL;
    char spec[1024];
    snprintf(spec, sizeof(spec), "%s", cmd[7] ? cmd + 8 : "");
    int mask = monitor_mask(spec, &bad);
    if (mask == 0) {
      snprintf(line, sizeof(line), "ERROR: Invalid event group '%.1000s'\n", bad);
      return reply(c, line);
    }
    c->monitor = mask;
    return reply(c, "OK\n");
  }
  snprintf(line, sizeof(line), "ERROR: Unknown command %.1000s\n", cmd);
  return reply(c, line);
}

int weft_ras_client_read(weft_ras_client_t *c) {
  ssize_t k = recv(c->fd, c->in + c->inlen, sizeof(c->in) - c->inlen, MSG_DONTWAIT);
  if (k == 0) return -1;
  if (k < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
  c->inlen += (size_t)k;
  char *start = c->in, *nl;
  while (!c->wants_status && (nl = memchr(start, '\n', c->inlen - (size_t)(start - c->in))) != NULL) {
    *nl = '\0';
    if (nl > start && nl[-1] == '\r') nl[-1] = '\0';
    if (command(c, start) != 0) return -1;
    start = nl + 1;
  }
  size_t left = c->inlen - (size_t)(start - c->in);
  if (left == sizeof(c->in)) return -1;  // a line longer than any command
  memmove(c->in, start, left);
  c->inlen = left;
  return 0;
}

void weft_ras_client_answer(weft_ras_client_t *c, const weft_ras_view_t *v) {
  weft_ras_out_t o = {0};
  if (c->json)
    weft_ras_report_json(v, &o);
  else
    weft_ras_report_text(v, c->verbose, &o);
  if (!o.failed && o.len > 0) weft_ras_client_send(c, o.s, o.len);
  free(o.s);
}
