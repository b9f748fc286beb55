/*
 * tuner_example.c — an example NCCL tuner plugin (ncclTunerPlugin_v6, _v5
 * and _v4; _v2 alone when built with WEFT_EXAMPLE_V2_ONLY) that forces
 * algorithms from a CSV file of overrides and, through v6's getChunkSize,
 * the bytes a step carries (WEFT_TUNER_EXAMPLE_CHUNK, unset: unchanged).
 *
 * The file is named by WEFT_TUNER_EXAMPLE_CSV, else NCCL_TUNER_CONFIG_FILE
 * (the variable NCCL's own example reads); neither set: no overrides. A
 * named file that cannot be read fails init, so the caller falls back to
 * its built-in tuner and says so. One override per line, '#' comments:
 *
 *   collective,minBytes,maxBytes,algorithm,protocol,channels,nNodes,nRanks
 *   allreduce,0,65536,tree,simple,-1,-1,-1
 *
 * collective: broadcast, reduce, allgather, reducescatter, allreduce;
 * algorithm: tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree,
 * pat; protocol: ll, ll128, simple, or -1 for any the caller offers;
 * channels: -1 leaves nChannels; nNodes, nRanks: -1 matches any. The first
 * line matching a call (collective, minBytes <= nBytes <= maxBytes, nodes,
 * ranks) sets its entry's cost to 0 — unless the caller marked it -1
 * (cannot run it). Built from tuner_abi.h alone: it links nothing of weft.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tuner_abi.h"

#define MAX_RULES 128

typedef struct {
  int func;
  size_t min_bytes, max_bytes;
  int algo, proto;  // proto -1: any
  int channels, nodes, ranks;
} rule_t;

typedef struct {
  size_t nranks, nnodes;
  ncclDebugLogger_t log;
  int nrules;
  rule_t rules[MAX_RULES];
} ctx_t;

static int lookup(const char *s, const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (strcasecmp(s, names[i]) == 0) return i;
  return -2;
}

static const char *const func_names[] = {"broadcast", "reduce", "allgather", "reducescatter", "allreduce"};
static const char *const algo_names[] = {"tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"};
static const char *const proto_names[] = {"ll", "ll128", "simple"};

static char *trim(char *s) {
  while (*s == ' ' || *s == '\t') s++;
  char *e = s + strlen(s);
  while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r')) *--e = '\0';
  return s;
}

// One CSV line into *r; 0 on success.
static int parse_line(char *line, rule_t *r) {
  char *f[8];
  int n = 0;
  char *save = NULL;
  for (char *tok = strtok_r(line, ",", &save); tok != NULL && n < 8; tok = strtok_r(NULL, ",", &save))
    f[n++] = trim(tok);
  if (n != 8) return -1;
  r->func = lookup(f[0], func_names, 5);
  r->algo = lookup(f[3], algo_names, 7);
  r->proto = strcmp(f[4], "-1") == 0 ? -1 : lookup(f[4], proto_names, 3);
  if (r->func < 0 || r->algo < 0 || r->proto < -1) return -1;
  r->min_bytes = strtoull(f[1], NULL, 10);
  r->max_bytes = strtoull(f[2], NULL, 10);
  r->channels = atoi(f[5]);
  r->nodes = atoi(f[6]);
  r->ranks = atoi(f[7]);
  return 0;
}

static ncclResult_t read_rules(ctx_t *c, const char *path) {
  FILE *fp = fopen(path, "r");
  if (fp == NULL) {
    c->log(NCCL_LOG_WARN, NCCL_TUNING, __FILE__, __LINE__, "example tuner: cannot open %s: %s", path,
           strerror(errno));
    return ncclSystemError;
  }
  char line[512];
  int lineno = 0;
  while (fgets(line, sizeof(line), fp) != NULL) {
    lineno++;
    char *s = trim(line);
    if (s[0] == '\0' || s[0] == '#') continue;
    if (c->nrules == MAX_RULES || parse_line(s, &c->rules[c->nrules]) != 0) {
      c->log(NCCL_LOG_WARN, NCCL_TUNING, __FILE__, __LINE__, "example tuner: %s:%d ignored", path, lineno);
      continue;
    }
    c->nrules++;
  }
  fclose(fp);
  c->log(NCCL_LOG_INFO, NCCL_TUNING, __FILE__, __LINE__, "example tuner: %d overrides from %s", c->nrules, path);
  return ncclSuccess;
}

static ncclResult_t setup(void **context, size_t nranks, size_t nnodes, ncclDebugLogger_t log) {
  ctx_t *c = calloc(1, sizeof(*c));
  if (c == NULL) return ncclSystemError;
  c->nranks = nranks;
  c->nnodes = nnodes;
  c->log = log;
  const char *path = getenv("WEFT_TUNER_EXAMPLE_CSV");
  if (path == NULL || path[0] == '\0') path = getenv("NCCL_TUNER_CONFIG_FILE");
  if (path != NULL && path[0] != '\0' && read_rules(c, path) != ncclSuccess) {
    free(c);
    return ncclSystemError;
  }
  *context = c;
  return ncclSuccess;
}

static ncclResult_t init_v5(void **context, uint64_t commId, size_t nRanks, size_t nNodes,
                            ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v5_t *nvl,
                            ncclTunerConstants_v5_t *constants) {
  (void)commId, (void)nvl, (void)constants;
  return setup(context, nRanks, nNodes, logFunction);
}

static ncclResult_t init_v4(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void **context) {
  return setup(context, nRanks, nNodes, logFunction);
}

static ncclResult_t get_coll_info(void *context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                                  float **collCostTable, int numAlgo, int numProto, int regBuff, int *nChannels) {
  (void)numPipeOps, (void)regBuff;
  ctx_t *c = context;
  float(*table)[NCCL_NUM_PROTOCOLS] = (float(*)[NCCL_NUM_PROTOCOLS])collCostTable;
  for (int i = 0; i < c->nrules; i++) {
    const rule_t *r = &c->rules[i];
    if (r->func != (int)collType || nBytes < r->min_bytes || nBytes > r->max_bytes) continue;
    if ((r->nodes >= 0 && (size_t)r->nodes != c->nnodes) || (r->ranks >= 0 && (size_t)r->ranks != c->nranks)) continue;
    if (r->algo >= numAlgo) continue;
    int set = 0;
    for (int p = 0; p < numProto && p < NCCL_NUM_PROTOCOLS; p++) {
      if ((r->proto >= 0 && p != r->proto) || table[r->algo][p] == (float)NCCL_ALGO_PROTO_IGNORE) continue;
      table[r->algo][p] = 0.0f;
      set = 1;
    }
    if (set && r->channels > 0) *nChannels = r->channels;
    return ncclSuccess;  // the first matching line decides
  }
  return ncclSuccess;
}

// Version 2: the first matching line names the algorithm and protocol.
static ncclResult_t get_coll_info_v2(void *context, ncclFunc_t collType, size_t nBytes, int collNetSupport,
                                     int nvlsSupport, int numPipeOps, int *algorithm, int *protocol, int *nChannels) {
  (void)collNetSupport, (void)nvlsSupport, (void)numPipeOps;
  ctx_t *c = context;
  for (int i = 0; i < c->nrules; i++) {
    const rule_t *r = &c->rules[i];
    if (r->func != (int)collType || nBytes < r->min_bytes || nBytes > r->max_bytes) continue;
    if ((r->nodes >= 0 && (size_t)r->nodes != c->nnodes) || (r->ranks >= 0 && (size_t)r->ranks != c->nranks)) continue;
    *algorithm = r->algo;
    *protocol = r->proto >= 0 ? r->proto : NCCL_PROTO_SIMPLE;
    if (r->channels > 0) *nChannels = r->channels;
    return ncclSuccess;
  }
  return ncclSuccess;
}

// Version 6: every step carries WEFT_TUNER_EXAMPLE_CHUNK bytes when it is set.
static ncclResult_t get_chunk_size(void *context, ncclFunc_t collType, size_t nBytes, int algo, int proto,
                                   int nChannels, size_t *chunkSize) {
  (void)context, (void)collType, (void)nBytes, (void)algo, (void)proto, (void)nChannels;
  const char *v = getenv("WEFT_TUNER_EXAMPLE_CHUNK");
  if (v != NULL && v[0] != '\0') *chunkSize = (size_t)strtoull(v, NULL, 0);
  return ncclSuccess;
}

static ncclResult_t finish(void *context) {
  free(context);
  return ncclSuccess;
}

// WEFT_EXAMPLE_V4_ONLY and WEFT_EXAMPLE_V2_ONLY build variants that export
// one old version alone (weft's tests of its loaders for those versions).
#if defined(WEFT_EXAMPLE_V2_ONLY)
__attribute__((visibility("default"))) const ncclTuner_v2_t ncclTunerPlugin_v2 = {
    .name = "weft-example", .init = init_v4, .getCollInfo = get_coll_info_v2, .destroy = finish};
static const void *const unused[] __attribute__((unused)) = {init_v5, get_coll_info, get_chunk_size};
#elif defined(WEFT_EXAMPLE_V4_ONLY)
__attribute__((visibility("default"))) const ncclTuner_v4_t ncclTunerPlugin_v4 = {
    .name = "weft-example", .init = init_v4, .getCollInfo = get_coll_info, .destroy = finish};
static const void *const unused[] __attribute__((unused)) = {init_v5, get_coll_info_v2, get_chunk_size};
#else
__attribute__((visibility("default"))) const ncclTuner_v6_t ncclTunerPlugin_v6 = {
    .name = "weft-example", .init = init_v5, .getCollInfo = get_coll_info, .finalize = finish,
    .getChunkSize = get_chunk_size};
__attribute__((visibility("default"))) const ncclTuner_v5_t ncclTunerPlugin_v5 = {
    .name = "weft-example", .init = init_v5, .getCollInfo = get_coll_info, .finalize = finish};
__attribute__((visibility("default"))) const ncclTuner_v4_t ncclTunerPlugin_v4 = {
    .name = "weft-example", .init = init_v4, .getCollInfo = get_coll_info, .destroy = finish};
static const void *const unused[] __attribute__((unused)) = {get_coll_info_v2};
#endif
