/*
 * env_allreduce.c — one rank of a job that starts with weftInitFromEnv and
 * checks an int32 and a float32 AllReduce. Used by the launcher tests under
 * weftrun and under hand-made torchrun/Slurm-style environments.
 *
 * Exit status: 0 all good; 1 wrong data; 2 a later call failed;
 * 20 + ncclResult_t when weftInitFromEnv fails (24 = ncclInvalidArgument).
 * On failure the error string and ncclGetLastError() go to stderr.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "nccl.h"
#include "weft.h"

#define COUNT 4099  // odd, so no algorithm gets an even split for free

static int check(ncclResult_t res, const char *what) {
  if (res == ncclSuccess) return 0;
  fprintf(stderr, "env_allreduce: %s: %s: %s\n", what, ncclGetErrorString(res),
          ncclGetLastError(NULL));
  return 1;
}

int main(void) {
  ncclComm_t comm;
  ncclResult_t res = weftInitFromEnv(&comm);
  if (res != ncclSuccess) {
    fprintf(stderr, "env_allreduce: weftInitFromEnv: %s (%d): %s\n", ncclGetErrorString(res),
            (int)res, ncclGetLastError(NULL));
    return 20 + (int)res;
  }
  int rank, nranks;
  if (check(ncclCommUserRank(comm, &rank), "ncclCommUserRank") ||
      check(ncclCommCount(comm, &nranks), "ncclCommCount"))
    return 2;

  int32_t *ibuf = malloc(COUNT * sizeof(int32_t));
  float *fbuf = malloc(COUNT * sizeof(float));
  if (ibuf == NULL || fbuf == NULL) return 2;
  for (int i = 0; i < COUNT; i++) {
    ibuf[i] = rank * 7 + i % 13;
    fbuf[i] = (float)(rank + i % 5);
  }
  if (check(ncclAllReduce(ibuf, ibuf, COUNT, ncclInt32, ncclSum, comm, NULL), "int32 allreduce") ||
      check(ncclAllReduce(fbuf, fbuf, COUNT, ncclFloat32, ncclSum, comm, NULL), "float allreduce"))
    return 2;

  int wrong = 0;
  int32_t rank_sum = nranks * (nranks - 1) / 2;
  for (int i = 0; i < COUNT; i++) {
    wrong += ibuf[i] != nranks * (i % 13) + 7 * rank_sum;
    wrong += fbuf[i] != (float)(nranks * (i % 5) + rank_sum);
  }
  if (check(ncclCommDestroy(comm), "ncclCommDestroy")) return 2;
  free(ibuf);
  free(fbuf);
  if (wrong) {
    fprintf(stderr, "env_allreduce: rank %d of %d: %d wrong elements\n", rank, nranks, wrong);
    return 1;
  }
  printf("env_allreduce: rank %d of %d ok\n", rank, nranks);
  return 0;
}
