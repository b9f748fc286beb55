/*
 * choice.c — parsing NCCL_ALGO and NCCL_PROTO (see choice.h).
 */
#include "choice.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "checks.h"

static const char *const coll_keys[WEFT_NUM_COLLS] = {"allreduce", "broadcast", "reduce", "allgather",
                                                      "reducescatter", "alltoall", "gather", "scatter",
                                                      "send", "recv"};

static int index_of(const char *name, const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (strcasecmp(name, names[i]) == 0) return i;
  return -1;
}

// One section: "[coll:][^]name,name..."
static int is_foreign(const char *name, const char *const *foreign) {
  for (int i = 0; foreign != NULL && foreign[i] != NULL; i++)
    if (strcasecmp(name, foreign[i]) == 0) return 1;
  return 0;
}

static int parse_section(const char *var, char *sec, const char *const *names, int nnames,
                         const char *const *foreign, unsigned masks[WEFT_NUM_COLLS]) {
  int coll = -1;
  char *colon = strchr(sec, ':');
  if (colon != NULL) {
    *colon = '\0';
    if ((coll = index_of(sec, coll_keys, WEFT_NUM_COLLS)) < 0) {
      WARN("%s: unknown collective '%s'", var, sec);
      return -1;
    }
    sec = colon + 1;
  }
  int negate = sec[0] == '^';
  if (negate) sec++;
  unsigned named = 0;
  char *save = NULL;
  for (char *tok = strtok_r(sec, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
    int a = index_of(tok, names, nnames);
    if (a < 0 && is_foreign(tok, foreign)) {
      INFO(WEFT_LOG_ENV | WEFT_LOG_TUNING, "%s: NCCL's '%s' has no counterpart in weft; ignored", var, tok);
    } else if (a < 0) {
      char known[200];
      size_t at = 0;
      for (int b = 0; b < nnames && at < sizeof(known); b++)
        at += (size_t)snprintf(known + at, sizeof(known) - at, "%s%s", b ? ", " : "", names[b]);
      WARN("%s: '%s' is not one of weft's (%s); ignored", var, tok, known);
    } else {
      named |= 1u << a;
    }
  }
  unsigned all = (1u << nnames) - 1, mask = negate ? all & ~named : named;
  for (int c = 0; c < WEFT_NUM_COLLS; c++)
    if (coll < 0 || c == coll) masks[c] = mask;
  return 0;
}

int weft_choice_parse(const char *var, const char *spec, const char *const *names, int nnames,
                      const char *const *foreign, unsigned masks[WEFT_NUM_COLLS]) {
  for (int c = 0; c < WEFT_NUM_COLLS; c++) masks[c] = (1u << nnames) - 1;
  if (spec == NULL || spec[0] == '\0') return 0;
  char buf[512];
  if (strlen(spec) >= sizeof(buf)) {
    WARN("%s is too long (%zu characters)", var, strlen(spec));
    return -1;
  }
  snprintf(buf, sizeof(buf), "%s", spec);
  unsigned parsed[WEFT_NUM_COLLS];
  memcpy(parsed, masks, sizeof(parsed));
  char *save = NULL;
  for (char *sec = strtok_r(buf, ";", &save); sec != NULL; sec = strtok_r(NULL, ";", &save)) {
    char *w = sec;
    for (char *r = sec; *r; r++)
      if (*r != ' ' && *r != '\t') *w++ = *r;
    *w = '\0';
    if (parse_section(var, sec, names, nnames, foreign, parsed) != 0) return -1;
  }
  memcpy(masks, parsed, sizeof(parsed));
  return 0;
}
