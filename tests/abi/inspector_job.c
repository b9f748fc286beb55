/*
 * inspector_job.c — one rank of the job nvidia_inspector_plugin.sh runs
 * under weftrun with NVIDIA's Inspector profiler loaded.
 *
 *   inspector_job WAIT_MS HOLD_MS destroy|keep COUNT...
 *
 * It waits WAIT_MS after its communicator is made: the Inspector's dump
 * thread writes once as it starts, and in Prometheus mode each file holds
 * only what finished since the write before, so the calls must come after
 * that first one. Then for each COUNT, three times: an AllReduce (float32
 * sum) of COUNT elements, an AllGather of COUNT elements per rank, and a
 * group sending COUNT elements to the next rank and receiving from the
 * previous one; each result checked. Then it prints "rank R of N pid P"
 * (the Inspector names its files by process), holds the communicator
 * HOLD_MS milliseconds, so that the Inspector's dump thread, which writes
 * only live communicators, writes it out, and destroys it ("destroy") or
 * returns with it alive ("keep": the Inspector's finalize waits out its
 * dump thread's sleep, 30 s in Prometheus mode).
 *
 * Exit status: 0 all good; 1 wrong data; 2 a call failed; 3 bad usage.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"
#include "weft.h"

#define REPEAT 3

static int failed(ncclResult_t res, const char *what) {
  if (res == ncclSuccess) return 0;
  fprintf(stderr, "inspector_job: %s: %s: %s\n", what, ncclGetErrorString(res), ncclGetLastError(NULL));
  return 1;
}

// The ring exchange: send `in` to the next rank, receive the previous one's into `got`.
static ncclResult_t ring(ncclComm_t comm, int rank, int nranks, const float *in, float *got, size_t count) {
  ncclResult_t res = ncclGroupStart();
  if (res == ncclSuccess) res = ncclSend(in, count, ncclFloat32, (rank + 1) % nranks, comm, NULL);
  if (res == ncclSuccess) res = ncclRecv(got, count, ncclFloat32, (rank + nranks - 1) % nranks, comm, NULL);
  ncclResult_t end = ncclGroupEnd();
  return res != ncclSuccess ? res : end;
}

// REPEAT rounds of `count`; returns the wrong elements, or -1 if a call failed.
static long run(ncclComm_t comm, int rank, int nranks, size_t count) {
  float *in = malloc(count * sizeof(float)), *sum = malloc(count * sizeof(float));
  float *all = malloc(count * (size_t)nranks * sizeof(float)), *got = malloc(count * sizeof(float));
  long wrong = in == NULL || sum == NULL || all == NULL || got == NULL ? -1 : 0;
  int prev = (rank + nranks - 1) % nranks;
  float rank_sum = (float)(nranks * (nranks - 1) / 2);
  for (int rep = 0; rep < REPEAT && wrong == 0; rep++) {
    for (size_t i = 0; i < count; i++) in[i] = (float)(rank + (int)(i % 5));
    if (failed(ncclAllReduce(in, sum, count, ncclFloat32, ncclSum, comm, NULL), "AllReduce") ||
        failed(ncclAllGather(in, all, count, ncclFloat32, comm, NULL), "AllGather") ||
        failed(ring(comm, rank, nranks, in, got, count), "Send/Recv")) {
      wrong = -1;
      break;
    }
    for (size_t i = 0; i < count; i++) wrong += sum[i] != (float)nranks * (float)(i % 5) + rank_sum;
    for (int r = 0; r < nranks; r++)
      for (size_t i = 0; i < count; i++) wrong += all[(size_t)r * count + i] != (float)(r + (int)(i % 5));
    for (size_t i = 0; i < count; i++) wrong += got[i] != (float)(prev + (int)(i % 5));
  }
  free(in);
  free(sum);
  free(all);
  free(got);
  return wrong;
}

static void sleep_ms(long ms) {
  struct timespec left = {.tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000};
  while (nanosleep(&left, &left) != 0) {
  }
}

int main(int argc, char **argv) {
  if (argc < 5 || (strcmp(argv[3], "destroy") != 0 && strcmp(argv[3], "keep") != 0)) {
    fprintf(stderr, "usage: inspector_job WAIT_MS HOLD_MS destroy|keep COUNT...\n");
    return 3;
  }
  ncclComm_t comm;
  int rank, nranks;
  if (failed(weftInitFromEnv(&comm), "weftInitFromEnv") || failed(ncclCommUserRank(comm, &rank), "rank") ||
      failed(ncclCommCount(comm, &nranks), "count"))
    return 2;
  sleep_ms(atol(argv[1]));
  for (int a = 4; a < argc; a++) {
    long wrong = run(comm, rank, nranks, (size_t)atol(argv[a]));
    if (wrong != 0) {
      if (wrong > 0) fprintf(stderr, "inspector_job: rank %d: count %s: %ld wrong elements\n", rank, argv[a], wrong);
      return wrong > 0 ? 1 : 2;
    }
  }
  printf("rank %d of %d pid %d\n", rank, nranks, (int)getpid());
  fflush(stdout);
  sleep_ms(atol(argv[2]));
  if (strcmp(argv[3], "destroy") == 0 && failed(ncclCommDestroy(comm), "ncclCommDestroy")) return 2;
  return 0;
}
