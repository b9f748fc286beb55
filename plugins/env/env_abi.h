/*
 * env_abi.h — NCCL's env plugin ABI (versions 1 and 2), declared for weft
 * and for env plugins built against weft.
 *
 * Written from the layout of NCCL's public plugin headers (env_v1.h,
 * env_v2.h, nccl_env.h): the same fields in the same order with the same
 * types, so a plugin built for NCCL loads into weft and one built here
 * loads into NCCL. A plugin exports a struct below under the name NCCL
 * looks up (ncclEnvPlugin_v2, else ncclEnvPlugin_v1). Needs only nccl.h
 * (ncclResult_t) and ../plugin_log_abi.h (the logger); plugins include this
 * and link nothing of weft.
 *
 * The contract, as NCCL states it: init is called once, before any getEnv,
 * with the version of NCCL the library implements; getEnv returns a
 * variable's value or NULL, and that value must stay readable until the
 * next getEnv of the same name or finalize; finalize is called once, when
 * the process ends. A failed init means the plugin is not used.
 */
#ifndef WEFT_ENV_ABI_H
#define WEFT_ENV_ABI_H

#include <stdint.h>

#include "nccl.h"

#include "../plugin_log_abi.h"

// Version 2: init also receives the logger.
typedef struct {
  const char *name;  // shown in the library's log lines
  ncclResult_t (*init)(uint8_t ncclMajor, uint8_t ncclMinor, uint8_t ncclPatch, const char *suffix,
                       ncclDebugLogger_t logFunction);
  ncclResult_t (*finalize)(void);
  const char *(*getEnv)(const char *name);
} ncclEnv_v2_t;

// Version 1: no logger.
typedef struct {
  const char *name;
  ncclResult_t (*init)(uint8_t ncclMajor, uint8_t ncclMinor, uint8_t ncclPatch, const char *suffix);
  ncclResult_t (*finalize)(void);
  const char *(*getEnv)(const char *name);
} ncclEnv_v1_t;

typedef ncclEnv_v2_t ncclEnv_t;

#define NCCL_ENV_PLUGIN_SYMBOL_V2 "ncclEnvPlugin_v2"
#define NCCL_ENV_PLUGIN_SYMBOL_V1 "ncclEnvPlugin_v1"

#endif  // WEFT_ENV_ABI_H
