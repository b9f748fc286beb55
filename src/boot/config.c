/*
 * config.c — reading a caller's ncclConfig_t.
 *
 * The struct grows with NCCL releases: 2.28.9's ends at nvlinkCentricSched,
 * 2.30.7's adds graphUsageMode, numRmaCtx, maxP2pPeers and
 * graphStreamOrdering. A caller's struct is read by its own size (the first
 * field every layout has): never a byte past it, and a field the caller's
 * header did not have (past the size, or newer than the version it was
 * built with) is left unset. Each set field is then checked as NCCL checks
 * it; a bad value is ncclInvalidArgument with a WARN naming the field.
 *
 * What weft does with the values: blocking and commName are applied;
 * numRmaCtx=0 turns off one-sided calls on the communicator (as in NCCL,
 * where no RMA context means no host RMA); the two CUDA-graph knobs
 * (graphUsageMode, graphStreamOrdering) and maxP2pPeers are kept and
 * reported at INFO, since weft refuses graph capture and progresses every
 * point-to-point peer at once; the other fields tune GPU kernels weft does
 * not have and are listed, when set, in one INFO line. docs/config.md
 * says the same per field.
 */
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "checks.h"
#include "comm.h"

// One integer field: where it lives, since which release callers have it,
// and the values NCCL accepts when it is set (bounds inclusive).
typedef struct {
  const char *name;
  size_t offset;
  int since;  // NCCL_VERSION code of the first header with the field
  int lo, hi;
  int used;   // weft acts on it (not listed as merely accepted)
} int_field_t;

#define FIELD(f, since, lo, hi, used) {#f, offsetof(ncclConfig_t, f), since, lo, hi, used}

static const int_field_t int_fields[] = {
    FIELD(blocking, NCCL_VERSION(2, 14, 0), 0, 1, 1),
    FIELD(cgaClusterSize, NCCL_VERSION(2, 17, 0), 0, INT_MAX, 0),
    FIELD(minCTAs, NCCL_VERSION(2, 17, 0), 1, INT_MAX, 0),
    FIELD(maxCTAs, NCCL_VERSION(2, 17, 0), 1, INT_MAX, 0),
    FIELD(splitShare, 0, 0, 1, 0),
    FIELD(trafficClass, NCCL_VERSION(2, 25, 0), INT_MIN, INT_MAX, 0),  // any value
    FIELD(collnetEnable, NCCL_VERSION(2, 27, 0), 0, 1, 0),
    FIELD(CTAPolicy, NCCL_VERSION(2, 27, 0), 0,
          NCCL_CTA_POLICY_DEFAULT | NCCL_CTA_POLICY_EFFICIENCY | NCCL_CTA_POLICY_ZERO, 0),
    FIELD(shrinkShare, NCCL_VERSION(2, 27, 0), 0, 1, 0),
    FIELD(nvlsCTAs, NCCL_VERSION(2, 27, 0), 1, INT_MAX, 0),
    FIELD(nChannelsPerNetPeer, NCCL_VERSION(2, 28, 0), 1, 64, 0),  // 64: NCCL's channel limit
    FIELD(nvlinkCentricSched, NCCL_VERSION(2, 28, 0), 0, 1, 0),
    FIELD(graphUsageMode, NCCL_VERSION(2, 29, 0), 0, 2, 1),
    FIELD(numRmaCtx, NCCL_VERSION(2, 29, 0), 0, INT_MAX, 1),
    FIELD(maxP2pPeers, NCCL_VERSION(2, 30, 0), 1, INT_MAX, 1),
    FIELD(graphStreamOrdering, NCCL_VERSION(2, 30, 5), 0, 1, 1),
};
#define N_INT_FIELDS (sizeof(int_fields) / sizeof(int_fields[0]))

static int *field_at(ncclConfig_t *c, const int_field_t *f) { return (int *)((char *)c + f->offset); }
static int field_value(const ncclConfig_t *c, const int_field_t *f) {
  int v;
  memcpy(&v, (const char *)c + f->offset, sizeof(v));
  return v;
}

void weft_comm_config_defaults(struct ncclComm *comm) {
  comm->blocking = 1;
  comm->num_rma_ctx = 1;
  comm->max_p2p_peers = 0;  // every peer
  comm->graph_usage_mode = 2;
  comm->graph_stream_ordering = 1;
}

void weft_comm_config_inherit(struct ncclComm *dst, const struct ncclComm *parent) {
  dst->blocking = parent->blocking;
  memcpy(dst->name, parent->name, sizeof(dst->name));
  dst->num_rma_ctx = parent->num_rma_ctx;
  dst->max_p2p_peers = parent->max_p2p_peers;
  dst->graph_usage_mode = parent->graph_usage_mode;
  dst->graph_stream_ordering = parent->graph_stream_ordering;
}

void weft_comm_config_to_struct(const struct ncclComm *comm, ncclConfig_t *out) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.blocking = comm->blocking;
  c.commName = comm->name[0] != '\0' ? comm->name : NULL;
  c.numRmaCtx = comm->num_rma_ctx;
  c.maxP2pPeers = comm->max_p2p_peers > 0 ? comm->max_p2p_peers : NCCL_CONFIG_UNDEF_INT;
  c.graphUsageMode = comm->graph_usage_mode;
  c.graphStreamOrdering = comm->graph_stream_ordering;
  *out = c;
}

// The caller's struct, copied by its size into a whole one whose fields the
// caller's header did not have are unset. Fails on a bad size or magic.
static ncclResult_t copy_by_size(const ncclConfig_t *config, const char *api, ncclConfig_t *c) {
  size_t size;
  memcpy(&size, config, sizeof(size));  // the one field every layout starts with
  if (size < offsetof(ncclConfig_t, blocking)) {
    WARN("%s: config->size=%zu is smaller than the config's header (%zu bytes): it was not initialised with "
         "NCCL_CONFIG_INITIALIZER",
         api, size, offsetof(ncclConfig_t, blocking));
    return ncclInvalidArgument;
  }
  *c = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
  memcpy(c, config, size < sizeof(*c) ? size : sizeof(*c));
  if (c->magic != NCCL_API_MAGIC) {
    WARN("%s: config was not initialised with NCCL_CONFIG_INITIALIZER (magic 0x%x, size %zu)", api, c->magic, size);
    return ncclInvalidArgument;
  }
  // A header older than a field leaves whatever its struct holds there unset.
  for (size_t i = 0; i < N_INT_FIELDS; i++)
    if (c->version < (unsigned)int_fields[i].since) *field_at(c, &int_fields[i]) = NCCL_CONFIG_UNDEF_INT;
  if (c->version < (unsigned)NCCL_VERSION(2, 17, 0)) c->netName = NCCL_CONFIG_UNDEF_PTR;
  return ncclSuccess;
}

static ncclResult_t check_values(const ncclConfig_t *c, const char *api) {
  for (size_t i = 0; i < N_INT_FIELDS; i++) {
    const int_field_t *f = &int_fields[i];
    int v = field_value(c, f);
    if (v == NCCL_CONFIG_UNDEF_INT || (v >= f->lo && v <= f->hi)) continue;
    if (f->hi == INT_MAX)
      WARN("%s: config->%s=%d is invalid (must be at least %d)", api, f->name, v, f->lo);
    else
      WARN("%s: config->%s=%d is invalid (must be %d..%d)", api, f->name, v, f->lo, f->hi);
    return ncclInvalidArgument;
  }
  if (c->minCTAs != NCCL_CONFIG_UNDEF_INT && c->maxCTAs != NCCL_CONFIG_UNDEF_INT && c->minCTAs > c->maxCTAs) {
    WARN("%s: config->minCTAs=%d is larger than config->maxCTAs=%d", api, c->minCTAs, c->maxCTAs);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

// One INFO line naming the set fields weft accepts and does not act on.
static void report_unused(const ncclConfig_t *c, const char *api) {
  char line[512];
  size_t used = 0;
  line[0] = '\0';
  for (size_t i = 0; i < N_INT_FIELDS && used < sizeof(line); i++) {
    int v = field_value(c, &int_fields[i]);
    if (int_fields[i].used || v == NCCL_CONFIG_UNDEF_INT) continue;
    int n = snprintf(line + used, sizeof(line) - used, " %s=%d", int_fields[i].name, v);
    if (n > 0) used += (size_t)n;
  }
  if (c->netName != NULL && used < sizeof(line))
    snprintf(line + used, sizeof(line) - used, " netName=%s (NCCL_NET chooses the network)", c->netName);
  if (line[0] != '\0')
    INFO(WEFT_LOG_INIT | WEFT_LOG_ENV, "%s: config fields that tune NCCL's GPU kernels, accepted and unused:%s", api,
         line);
}

ncclResult_t weft_comm_read_config(const ncclConfig_t *config, const char *api, struct ncclComm *comm) {
  weft_comm_config_defaults(comm);
  if (config == NULL) return ncclSuccess;
  ncclConfig_t c;
  WEFTCHECK(copy_by_size(config, api, &c));
  WEFTCHECK(check_values(&c, api));

  if (c.blocking != NCCL_CONFIG_UNDEF_INT) comm->blocking = c.blocking;
  if (c.commName != NULL) snprintf(comm->name, sizeof(comm->name), "%s", c.commName);
  if (c.numRmaCtx != NCCL_CONFIG_UNDEF_INT) {
    comm->num_rma_ctx = c.numRmaCtx;
    if (c.numRmaCtx == 0)
      INFO(WEFT_LOG_INIT, "%s: config numRmaCtx=0: one-sided calls are off on this communicator", api);
    else if (c.numRmaCtx > 1)
      INFO(WEFT_LOG_INIT, "%s: config numRmaCtx=%d: weft has one context for one-sided calls (ctx 0)", api,
           c.numRmaCtx);
  }
  if (c.maxP2pPeers != NCCL_CONFIG_UNDEF_INT) {
    comm->max_p2p_peers = c.maxP2pPeers;
    INFO(WEFT_LOG_INIT, "%s: config maxP2pPeers=%d accepted: weft progresses every peer's sends and receives at once",
         api, c.maxP2pPeers);
  }
  if (c.graphUsageMode != NCCL_CONFIG_UNDEF_INT) comm->graph_usage_mode = c.graphUsageMode;
  if (c.graphStreamOrdering != NCCL_CONFIG_UNDEF_INT) comm->graph_stream_ordering = c.graphStreamOrdering;
  if (comm->graph_stream_ordering == 0 && comm->graph_usage_mode == 2) {
    WARN("%s: config graphStreamOrdering=0 with graphUsageMode=2 (graph mixing) is not supported; using "
         "graphStreamOrdering=1",
         api);
    comm->graph_stream_ordering = 1;
  }
  if (c.graphUsageMode != NCCL_CONFIG_UNDEF_INT || c.graphStreamOrdering != NCCL_CONFIG_UNDEF_INT)
    INFO(WEFT_LOG_INIT,
         "%s: config graphUsageMode=%d graphStreamOrdering=%d kept; weft's calls cannot be captured into CUDA "
         "graphs, so they change nothing",
         api, comm->graph_usage_mode, comm->graph_stream_ordering);
  report_unused(&c, api);
  return ncclSuccess;
}
