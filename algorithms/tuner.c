/*
 * tuner.c — algorithm and slice choice (see tuner.h), and NCCL_ALGO parsing.
 *
 * NCCL_ALGO is a ';'-separated list of sections; a section is an optional
 * "collective:" prefix and a ','-separated list of algorithm names, negated
 * as a whole by a leading '^'. Without a prefix a section applies to every
 * collective. Names are case-insensitive.
 */
#include "tuner.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "checks.h"

static const char *const coll_keys[WEFT_NUM_COLLS] = {"allreduce", "broadcast", "reduce", "allgather",
                                                      "reducescatter", "alltoall", "gather", "scatter",
                                                      "send", "recv"};

static int algo_by_name(const char *name) {
  for (int a = 0; a < WEFT_NUM_ALGOS; a++)
    if (strcasecmp(name, weft_algo_name((weft_algo_t)a)) == 0) return a;
  return -1;
}

static int coll_by_name(const char *name) {
  for (int c = 0; c < WEFT_NUM_COLLS; c++)
    if (strcasecmp(name, coll_keys[c]) == 0) return c;
  return -1;
}

// One section: "[coll:][^]name,name..."
static int parse_section(char *sec, unsigned masks[WEFT_NUM_COLLS]) {
  int coll = -1;
  char *colon = strchr(sec, ':');
  if (colon != NULL) {
    *colon = '\0';
    if ((coll = coll_by_name(sec)) < 0) {
      WARN("NCCL_ALGO: unknown collective '%s'", sec);
      return -1;
    }
    sec = colon + 1;
  }
  int negate = sec[0] == '^';
  if (negate) sec++;
  unsigned named = 0;
  char *save = NULL;
  for (char *tok = strtok_r(sec, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
    int a = algo_by_name(tok);
    if (a < 0) WARN("NCCL_ALGO: algorithm '%s' is not one of weft's (ring, chain, direct, oneshot, read); ignored", tok);
    else named |= 1u << a;
  }
  unsigned all = (1u << WEFT_NUM_ALGOS) - 1, mask = negate ? all & ~named : named;
  for (int c = 0; c < WEFT_NUM_COLLS; c++)
    if (coll < 0 || c == coll) masks[c] = mask;
  return 0;
}

int weft_tuner_parse_algos(const char *spec, unsigned masks[WEFT_NUM_COLLS]) {
  for (int c = 0; c < WEFT_NUM_COLLS; c++) masks[c] = (1u << WEFT_NUM_ALGOS) - 1;
  if (spec == NULL || spec[0] == '\0') return 0;
  char buf[512];
  if (strlen(spec) >= sizeof(buf)) {
    WARN("NCCL_ALGO is too long (%zu characters)", strlen(spec));
    return -1;
  }
  snprintf(buf, sizeof(buf), "%s", spec);
  unsigned parsed[WEFT_NUM_COLLS];
  memcpy(parsed, masks, sizeof(parsed));
  char *save = NULL;
  for (char *sec = strtok_r(buf, ";", &save); sec != NULL; sec = strtok_r(NULL, ";", &save)) {
    // Whitespace is not part of any name.
    char *w = sec;
    for (char *r = sec; *r; r++)
      if (*r != ' ' && *r != '\t') *w++ = *r;
    *w = '\0';
    if (parse_section(sec, parsed) != 0) return -1;
  }
  memcpy(masks, parsed, sizeof(parsed));
  return 0;
}

// NCCL_ALGO is read once per distinct value (the env accessor caches its string).
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *cached_spec;
static unsigned cached_masks[WEFT_NUM_COLLS];
static int cache_valid;

static void allowed_masks(const char *spec, unsigned masks[WEFT_NUM_COLLS]) {
  pthread_mutex_lock(&cache_lock);
  if (!cache_valid || cached_spec != spec) {
    weft_tuner_parse_algos(spec, cached_masks);
    cached_spec = spec;
    cache_valid = 1;
  }
  memcpy(masks, cached_masks, sizeof(cached_masks));
  pthread_mutex_unlock(&cache_lock);
}

ncclResult_t weft_tuner_choose(const weft_tuner_params_t *p, weft_coll_args_t *args, size_t esize,
                               weft_algo_t *algo) {
  unsigned masks[WEFT_NUM_COLLS];
  allowed_masks(p->algo_spec, masks);
  unsigned allowed = masks[args->coll];
  // Preference order for this call.
  weft_algo_t prefs[WEFT_NUM_ALGOS + 1];
  int np = 0;
  size_t bytes = args->count * esize;
  int small = args->coll == WEFT_COLL_ALLREDUCE && args->nranks > 1 && bytes <= p->oneshot_max;
  int large = p->can_read && p->read_min > 0 && args->nranks > 1 && bytes >= p->read_min;
  if (small) prefs[np++] = WEFT_ALGO_ONESHOT;
  if (large) prefs[np++] = WEFT_ALGO_READ;
  prefs[np++] = WEFT_ALGO_RING;
  prefs[np++] = WEFT_ALGO_CHAIN;
  prefs[np++] = WEFT_ALGO_DIRECT;
  // Forced by NCCL_ALGO even outside their size ranges:
  if (!small) prefs[np++] = WEFT_ALGO_ONESHOT;
  if (!large && p->can_read) prefs[np++] = WEFT_ALGO_READ;
  int chosen = -1;
  for (int i = 0; i < np && chosen < 0; i++)
    if ((allowed & (1u << prefs[i])) && weft_algo_supports(prefs[i], args->coll)) chosen = (int)prefs[i];
  if (chosen < 0) {
    WARN("NCCL_ALGO='%s' leaves no algorithm that can run %s", p->algo_spec ? p->algo_spec : "",
         weft_coll_name(args->coll));
    return ncclInvalidUsage;
  }
  *algo = (weft_algo_t)chosen;
  size_t slot_elems = p->slot_bytes / esize;
  size_t half = p->nslots / 2 > 0 ? p->nslots / 2 : 1;
  args->slice = slot_elems * half > 0 ? slot_elems * half : 1;
  return ncclSuccess;
}
