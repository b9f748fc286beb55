/*
 * tuner_abi.h — NCCL's tuner plugin ABI (versions 2 to 6), declared for
 * weft and for tuner plugins built against weft.
 *
 * Written from the layout of NCCL's public plugin headers (tuner_v2.h ...
 * tuner_v6.h, nccl_tuner.h, nccl_common.h): same field order, types and
 * index values, so a plugin built for NCCL loads into weft and one built
 * here loads into NCCL. A plugin exports one of the structs below under the
 * name NCCL looks up (ncclTunerPlugin_v6 ... ncclTunerPlugin_v2; the newest
 * found wins). Needs only nccl.h (for ncclResult_t); plugins include this
 * and link nothing of weft.
 */
#ifndef WEFT_TUNER_ABI_H
#define WEFT_TUNER_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

#include "../plugin_log_abi.h"

// The cost table's axes (NCCL_ALGO_*, NCCL_PROTO_*: plugin_log_abi.h):
// collCostTable is float[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS] handed
// over as float** (cast it back to float (*)[NCCL_NUM_PROTOCOLS]).

// An entry the caller cannot run: leave it alone.
#define NCCL_ALGO_PROTO_IGNORE -1.0

// Version 5's extra inputs to init.
#define NCCL_NUM_HW_LINKS 3
#define NCCL_NUM_COMPCAPS 4
#define NCCL_NUM_TUNING_SCALES 3

typedef struct {
  int nNvlDomains;           // NVLink domains (weft: hosts)
  int minRanksPerNvlDomain;  // fewest ranks in one domain
  int maxRanksPerNvlDomain;  // most ranks in one domain
} ncclNvlDomainInfo_v5_t;

typedef struct {
  double baseLatencies[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  double hwLatencies[NCCL_NUM_HW_LINKS][NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  double llMaxBws[NCCL_NUM_COMPCAPS][NCCL_NUM_TUNING_SCALES];
  double perChMaxRingLL128Bws[NCCL_NUM_COMPCAPS][NCCL_NUM_TUNING_SCALES];
  double perChMaxTreeLL128Bws[NCCL_NUM_COMPCAPS][NCCL_NUM_TUNING_SCALES];
  double perChMaxTreeBws[NCCL_NUM_COMPCAPS][NCCL_NUM_TUNING_SCALES];
  double perChMaxNVLSTreeBws[NCCL_NUM_COMPCAPS][NCCL_NUM_TUNING_SCALES];
} ncclTunerConstants_v5_t;

// Version 5: init takes the communicator id, NVLink-domain facts and
// NCCL's tuning constants (in/out); the last call is finalize.
typedef struct {
  const char *name;
  ncclResult_t (*init)(void **context, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                       ncclNvlDomainInfo_v5_t *nvlDomainInfo, ncclTunerConstants_v5_t *constants);
  // Lower the cost of the entry to use (0 picks it); set *nChannels or leave it.
  ncclResult_t (*getCollInfo)(void *context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float **collCostTable, int numAlgo, int numProto, int regBuff, int *nChannels);
  ncclResult_t (*finalize)(void *context);
} ncclTuner_v5_t;

// Version 6 (NCCL 2.30): version 5 and getChunkSize, which may change the
// bytes a step carries (optional: NULL leaves weft's).
typedef ncclTunerConstants_v5_t ncclTunerConstants_v6_t;
typedef ncclNvlDomainInfo_v5_t ncclNvlDomainInfo_v6_t;
typedef struct {
  const char *name;
  ncclResult_t (*init)(void **context, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                       ncclNvlDomainInfo_v6_t *nvlDomainInfo, ncclTunerConstants_v6_t *constants);
  ncclResult_t (*getCollInfo)(void *context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float **collCostTable, int numAlgo, int numProto, int regBuff, int *nChannels);
  ncclResult_t (*finalize)(void *context);
  // In: the chunk size weft computed for the chosen algorithm and protocol; out: the plugin's.
  ncclResult_t (*getChunkSize)(void *context, ncclFunc_t collType, size_t nBytes, int algo, int proto, int nChannels,
                               size_t *chunkSize);
} ncclTuner_v6_t;

// Version 4: the same calls, a shorter init; the last call is destroy.
typedef struct {
  const char *name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void **context);
  ncclResult_t (*getCollInfo)(void *context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float **collCostTable, int numAlgo, int numProto, int regBuff, int *nChannels);
  ncclResult_t (*destroy)(void *context);
} ncclTuner_v4_t;

// Version 3: version 4's calls, without regBuff.
typedef struct {
  const char *name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void **context);
  ncclResult_t (*getCollInfo)(void *context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float **collCostTable, int numAlgo, int numProto, int *nChannels);
  ncclResult_t (*destroy)(void *context);
} ncclTuner_v3_t;

// Version 2: no cost table; the plugin names the algorithm and protocol
// (NCCL_ALGO_*, NCCL_PROTO_*), or leaves them undefined.
typedef struct {
  const char *name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void **context);
  ncclResult_t (*getCollInfo)(void *context, ncclFunc_t collType, size_t nBytes, int collNetSupport,
                              int nvlsSupport, int numPipeOps, int *algorithm, int *protocol, int *nChannels);
  ncclResult_t (*destroy)(void *context);
} ncclTuner_v2_t;

#define NCCL_TUNER_PLUGIN_SYMBOL_V6 "ncclTunerPlugin_v6"
#define NCCL_TUNER_PLUGIN_SYMBOL_V5 "ncclTunerPlugin_v5"
#define NCCL_TUNER_PLUGIN_SYMBOL_V4 "ncclTunerPlugin_v4"
#define NCCL_TUNER_PLUGIN_SYMBOL_V3 "ncclTunerPlugin_v3"
#define NCCL_TUNER_PLUGIN_SYMBOL_V2 "ncclTunerPlugin_v2"

#endif
