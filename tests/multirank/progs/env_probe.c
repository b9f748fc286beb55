/*
 * env_probe.c — what a program sees of weft's knobs: each key's value
 * through NCCL's parameter API, then a one-rank AllReduce. The env plugin
 * tests (tests/multirank/test_env_plugin.c) start it with the environment
 * of each case, so the plugin is loaded once, by this process, at its
 * first knob read, as in any program.
 *
 * Usage: env_probe i:KEY|s:KEY...
 * Prints "KEY=VALUE" for each key, read with ncclParamGetI64 (i:) or
 * ncclParamGetStr (s:; "<unset>" for an unset string), then "knobs=N"
 * (ncclParamGetAllParameterKeys) and "allreduce ok".
 * Exit status: 0, or 1 when a call fails (the reason on stderr).
 */
#include <inttypes.h>
#include <stdio.h>

#include "nccl.h"

static int fail(const char *what, ncclResult_t res) {
  fprintf(stderr, "env_probe: %s: %s: %s\n", what, ncclGetErrorString(res), ncclGetLastError(NULL));
  return 1;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *key = argv[i] + 2;
    if ((argv[i][0] != 'i' && argv[i][0] != 's') || argv[i][1] != ':') {
      fprintf(stderr, "env_probe: '%s' is neither i:KEY nor s:KEY\n", argv[i]);
      return 1;
    }
    ncclParamHandle_t h;
    ncclResult_t res = ncclParamBind(&h, key);
    if (res != ncclSuccess) return fail(key, res);
    int64_t v;
    const char *s = NULL;
    if (argv[i][0] == 'i' && (res = ncclParamGetI64(h, &v)) == ncclSuccess)
      printf("%s=%" PRId64 "\n", key, v);
    else if (argv[i][0] == 's' && (res = ncclParamGetStr(h, &s)) == ncclSuccess)
      printf("%s=%s\n", key, s[0] != '\0' ? s : "<unset>");
    else
      return fail(key, res);
  }
  const char **keys;
  int nkeys = 0;
  ncclResult_t res = ncclParamGetAllParameterKeys(&keys, &nkeys);
  if (res != ncclSuccess) return fail("ncclParamGetAllParameterKeys", res);
  printf("knobs=%d\n", nkeys);

  ncclUniqueId id;
  ncclComm_t comm;
  if ((res = ncclGetUniqueId(&id)) != ncclSuccess) return fail("ncclGetUniqueId", res);
  if ((res = ncclCommInitRank(&comm, 1, id, 0)) != ncclSuccess) return fail("ncclCommInitRank", res);
  int x[3] = {1, 2, 3};
  if ((res = ncclAllReduce(x, x, 3, ncclInt32, ncclSum, comm, NULL)) != ncclSuccess) return fail("ncclAllReduce", res);
  if ((res = ncclCommDestroy(comm)) != ncclSuccess) return fail("ncclCommDestroy", res);
  if (x[0] != 1 || x[1] != 2 || x[2] != 3) {
    fprintf(stderr, "env_probe: one-rank AllReduce gave %d %d %d\n", x[0], x[1], x[2]);
    return 1;
  }
  printf("allreduce ok\n");
  fflush(stdout);
  return 0;
}
