/*
 * env_example.c — an example NCCL env plugin (ncclEnvPlugin_v2 and _v1;
 * _v1 alone when built with WEFT_ENV_EXAMPLE_V1_ONLY) whose values come
 * from a file first and from the environment otherwise.
 *
 * The file is named by WEFT_ENV_EXAMPLE_FILE: NAME=VALUE lines, '#'
 * comments, blank lines ignored; a name's first line counts. Its values
 * win over the environment's, so a job can keep its settings in one file
 * whatever the launcher exports; a name the file lacks is looked up with
 * getenv. Unset: every value is the environment's. A file that is named
 * but cannot be read fails init (ncclSystemError), so the library falls
 * back to its built-in source and says so.
 *
 * Version 2's init logs, through the logger it receives, how many values
 * the file gave; finalize logs how many lookups were made (the library
 * caches values, so at most one per variable). Built from env_abi.h alone:
 * it links nothing of weft.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env_abi.h"

#define MAX_VALUES 256

static struct {
  int n;
  char *name[MAX_VALUES], *value[MAX_VALUES];
  int lookups;
  ncclDebugLogger_t log;  // version 2 only
} ex;

static void forget_all(void) {
  for (int i = 0; i < ex.n; i++) free(ex.name[i]);  // one allocation holds both strings
  ex.n = 0;
}

// Reads NAME=VALUE lines; returns -1 when the file cannot be read.
static int read_file(const char *path) {
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1;
  char line[4096];
  while (fgets(line, sizeof(line), f) != NULL && ex.n < MAX_VALUES) {
    line[strcspn(line, "\r\n")] = '\0';
    char *eq = strchr(line, '=');
    if (line[0] == '#' || eq == NULL || eq == line) continue;
    char *copy = strdup(line);
    if (copy == NULL) break;
    copy[eq - line] = '\0';
    int seen = 0;
    for (int i = 0; i < ex.n && !seen; i++) seen = strcmp(ex.name[i], copy) == 0;
    if (seen) {
      free(copy);
      continue;
    }
    ex.name[ex.n] = copy;
    ex.value[ex.n] = copy + (eq - line) + 1;
    ex.n++;
  }
  fclose(f);
  return 0;
}

static ncclResult_t example_init_v1(uint8_t major, uint8_t minor, uint8_t patch, const char *suffix) {
  (void)major, (void)minor, (void)patch, (void)suffix;
  forget_all();
  ex.lookups = 0;
  const char *path = getenv("WEFT_ENV_EXAMPLE_FILE");
  if (path != NULL && path[0] != '\0' && read_file(path) != 0) {
    if (ex.log != NULL)
      ex.log(NCCL_LOG_WARN, NCCL_ENV, __FILE__, __LINE__, "env example: cannot read WEFT_ENV_EXAMPLE_FILE=%s", path);
    return ncclSystemError;
  }
  return ncclSuccess;
}

#ifndef WEFT_ENV_EXAMPLE_V1_ONLY
static ncclResult_t example_init_v2(uint8_t major, uint8_t minor, uint8_t patch, const char *suffix,
                                    ncclDebugLogger_t log) {
  ex.log = log;
  ncclResult_t res = example_init_v1(major, minor, patch, suffix);
  if (res == ncclSuccess && log != NULL)
    log(NCCL_LOG_INFO, NCCL_ENV, __FILE__, __LINE__, "env example: %d values from %s, for NCCL %d.%d.%d%s", ex.n,
        getenv("WEFT_ENV_EXAMPLE_FILE") != NULL ? getenv("WEFT_ENV_EXAMPLE_FILE") : "no file", major, minor, patch,
        suffix != NULL ? suffix : "");
  return res;
}
#endif

static ncclResult_t example_finalize(void) {
  if (ex.log != NULL)
    ex.log(NCCL_LOG_INFO, NCCL_ENV, __FILE__, __LINE__, "env example: finalized after %d lookups", ex.lookups);
  forget_all();
  ex.log = NULL;
  return ncclSuccess;
}

static const char *example_get(const char *name) {
  ex.lookups++;
  for (int i = 0; name != NULL && i < ex.n; i++)
    if (strcmp(ex.name[i], name) == 0) return ex.value[i];
  return name != NULL ? getenv(name) : NULL;
}

#ifndef WEFT_ENV_EXAMPLE_V1_ONLY
__attribute__((visibility("default"))) const ncclEnv_v2_t ncclEnvPlugin_v2 = {
    .name = "weft-env-example",
    .init = example_init_v2,
    .finalize = example_finalize,
    .getEnv = example_get,
};
#endif

__attribute__((visibility("default"))) const ncclEnv_v1_t ncclEnvPlugin_v1 = {
#ifdef WEFT_ENV_EXAMPLE_V1_ONLY
    .name = "weft-env-example-v1",
#else
    .name = "weft-env-example",
#endif
    .init = example_init_v1,
    .finalize = example_finalize,
    .getEnv = example_get,
};
