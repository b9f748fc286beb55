/*
 * param.c — NCCL 2.30's parameter API (ncclParamBind, ncclParamGet*,
 * ncclParamGetParameter, ncclParamGetAllParameterKeys, ncclParamDumpAll)
 * over weft's one table of knobs (env_table.h).
 *
 * A key is a knob's environment name. Values are the ones weft itself uses:
 * read once from their source (the environment, then NCCL's configuration
 * files, or an env plugin: env_source.h) and cached (env.c), so a program
 * sees what the library sees; set_by names that source. Types follow NCCL's strict rule: integer knobs are
 * 64-bit signed and only ncclParamGetI64 reads them as numbers, string knobs
 * only ncclParamGetStr; another getter, an unknown key or a NULL argument is
 * ncclInvalidArgument (logged at INFO, as NCCL does). A secret knob's value
 * reads as "(hidden)". Every knob is documented (docs/env.md), so all are
 * listed whatever NCCL_PARAM_DUMP_ALL says.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "checks.h"
#include "env.h"
#include "nccl.h"

// A handle names one knob; the library owns the handles (one per knob).
struct ncclParamHandle {
  int idx;
};

#define MAX_KNOBS 256
static struct ncclParamHandle handles[MAX_KNOBS];
static pthread_once_t handles_once = PTHREAD_ONCE_INIT;

static void init_handles(void) {
  for (int i = 0; i < MAX_KNOBS; i++) handles[i].idx = i;
}

static const char hidden[] = "(hidden)";

// Knob idx's value as text: an integer in decimal, a string as it is, ""
// for an unset string. Valid until this thread's next call with `buf`.
static const char *value_text(int idx, char *buf, size_t len) {
  weft_env_knob_info_t k;
  weft_env_knob_info(idx, &k);
  if (k.secret) return hidden;
  if (k.is_int) {
    snprintf(buf, len, "%" PRId64, weft_env_knob_int(idx));
    return buf;
  }
  const char *s = weft_env_knob_str(idx);
  return s != NULL ? s : "";
}

static int handle_ok(ncclParamHandle_t h) {
  return h != NULL && h >= handles && h < handles + weft_env_knob_count() && h == &handles[h->idx];
}

NCCL_API(ncclResult_t, ncclParamBind, ncclParamHandle_t *out, const char *key);
ncclResult_t pncclParamBind(ncclParamHandle_t *out, const char *key) {
  if (out == NULL || key == NULL) return ncclInvalidArgument;
  int idx = weft_env_knob_find(key);
  if (idx < 0 || idx >= MAX_KNOBS) {
    INFO(WEFT_LOG_ENV, "PARAM: key \"%s\" not found in registry", key);
    return ncclInvalidArgument;
  }
  pthread_once(&handles_once, init_handles);
  *out = &handles[idx];
  return ncclSuccess;
}

// The integer getters: only I64 matches weft's integer knobs.
static ncclResult_t get_int(ncclParamHandle_t h, int64_t *out, int is_i64) {
  if (!handle_ok(h) || out == NULL) return ncclInvalidArgument;
  weft_env_knob_info_t k;
  weft_env_knob_info(h->idx, &k);
  if (!k.is_int || !is_i64) {
    INFO(WEFT_LOG_ENV, "PARAM: type mismatch for key \"%s\" (%s)", k.name, k.is_int ? "int64" : "string");
    return ncclInvalidArgument;
  }
  if (k.secret) return ncclInvalidArgument;
  *out = weft_env_knob_int(h->idx);
  return ncclSuccess;
}

#define NARROW_GETTER(suffix, ctype)                                          \
  NCCL_API(ncclResult_t, ncclParamGet##suffix, ncclParamHandle_t h, ctype *out); \
  ncclResult_t pncclParamGet##suffix(ncclParamHandle_t h, ctype *out) {       \
    int64_t unused;                                                          \
    (void)out;                                                               \
    return out == NULL ? ncclInvalidArgument : get_int(h, &unused, 0);       \
  }
NARROW_GETTER(I8, int8_t)
NARROW_GETTER(I16, int16_t)
NARROW_GETTER(I32, int32_t)
NARROW_GETTER(U8, uint8_t)
NARROW_GETTER(U16, uint16_t)
NARROW_GETTER(U32, uint32_t)
NARROW_GETTER(U64, uint64_t)
#undef NARROW_GETTER

NCCL_API(ncclResult_t, ncclParamGetI64, ncclParamHandle_t h, int64_t *out);
ncclResult_t pncclParamGetI64(ncclParamHandle_t h, int64_t *out) { return get_int(h, out, 1); }

NCCL_API(ncclResult_t, ncclParamGetStr, ncclParamHandle_t h, const char **out);
ncclResult_t pncclParamGetStr(ncclParamHandle_t h, const char **out) {
  if (!handle_ok(h) || out == NULL) return ncclInvalidArgument;
  weft_env_knob_info_t k;
  weft_env_knob_info(h->idx, &k);
  if (k.is_int) {
    INFO(WEFT_LOG_ENV, "PARAM: type mismatch for key \"%s\" (int64)", k.name);
    return ncclInvalidArgument;
  }
  static _Thread_local char unused[2];
  *out = value_text(h->idx, unused, sizeof(unused));
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclParamGet, ncclParamHandle_t h, void *out, int maxLen, int *len);
ncclResult_t pncclParamGet(ncclParamHandle_t h, void *out, int maxLen, int *len) {
  if (!handle_ok(h) || out == NULL || len == NULL || maxLen <= 0) return ncclInvalidArgument;
  weft_env_knob_info_t k;
  weft_env_knob_info(h->idx, &k);
  int64_t v = 0;
  const void *src = &v;
  size_t n = sizeof(v);
  if (k.secret) {
    src = hidden, n = sizeof(hidden);
  } else if (k.is_int) {
    v = weft_env_knob_int(h->idx);
  } else {
    const char *s = weft_env_knob_str(h->idx);
    src = s != NULL ? s : "";
    n = strlen(src) + 1;
  }
  if (n > (size_t)maxLen) {
    *len = 0;
    return ncclInvalidArgument;
  }
  memcpy(out, src, n);
  *len = (int)n;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclParamGetParameter, const char *key, const char **value, int *valueLen);
ncclResult_t pncclParamGetParameter(const char *key, const char **value, int *valueLen) {
  if (key == NULL || value == NULL || valueLen == NULL) return ncclInvalidArgument;
  int idx = weft_env_knob_find(key);
  if (idx < 0) {
    *value = NULL;
    *valueLen = 0;
    INFO(WEFT_LOG_ENV, "PARAM: key \"%s\" not found in registry", key);
    return ncclInvalidArgument;
  }
  static _Thread_local char buf[32];
  *value = value_text(idx, buf, sizeof(buf));
  *valueLen = (int)strlen(*value);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclParamGetAllParameterKeys, const char ***table, int *tableLen);
ncclResult_t pncclParamGetAllParameterKeys(const char ***table, int *tableLen) {
  if (table == NULL || tableLen == NULL) return ncclInvalidArgument;
  static _Thread_local const char *keys[MAX_KNOBS];
  int n = weft_env_knob_count() < MAX_KNOBS ? weft_env_knob_count() : MAX_KNOBS;
  for (int i = 0; i < n; i++) {
    weft_env_knob_info_t k;
    weft_env_knob_info(i, &k);
    keys[i] = k.name;  // the table's own strings: valid for the life of the process
  }
  *table = keys;
  *tableLen = n;
  return ncclSuccess;
}

// NCCL's layout: "KEY (type) [flags] description", then the value, where
// it came from and the default, then what is accepted.
NCCL_API(void, ncclParamDumpAll, void);
void pncclParamDumpAll(void) {
  printf("=== ncclParam Registry Dump ===\n");
  for (int i = 0; i < weft_env_knob_count(); i++) {
    weft_env_knob_info_t k;
    weft_env_knob_info(i, &k);
    char buf[32], dflt[32];
    const char *cur = value_text(i, buf, sizeof(buf));
    if (k.is_int) snprintf(dflt, sizeof(dflt), "%" PRId64, k.int_default);
    const char *def = k.is_int ? dflt : k.str_default != NULL ? k.str_default : "";
    printf("%s (%s) [%s] %s\n    Current value=%s set_by=%s default=%s\n    Accepted value: %s\n\n", k.name,
           k.is_int ? "int64" : "string", "published", k.doc, cur[0] ? cur : "<unset>",
           weft_env_knob_origin(i) != NULL ? weft_env_knob_origin(i) : "default", def[0] ? def : "<unset>",
           k.is_int ? "an integer: decimal or 0x hexadecimal, optionally signed, optional K/M/G suffix"
                    : "a string");
  }
  fflush(stdout);
}
