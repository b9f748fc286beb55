/*
 * ras_rank.c — one rank of a job for the RAS tests: known operation
 * counts, then pauses the test controls through files.
 *
 *   ras_rank DIR
 *
 * Starts with weftInitFromEnv, runs 20 AllReduce and 1 Broadcast on the
 * world communicator, splits it by rank parity and runs 3 AllGather on each
 * half, writes its pid to DIR/pid.RANK, then waits for DIR/go (the test may
 * stop a rank meanwhile) and runs one more AllReduce, writes DIR/done.RANK,
 * waits for DIR/end and tears down. Every wait is bounded (120 s). Exit 0,
 * or 1 and a line saying what failed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"
#include "weft.h"

static int wait_file(const char *dir, const char *name) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  for (int i = 0; i < 12000; i++) {
    if (access(path, F_OK) == 0) return 0;
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
  return -1;
}

static void mark(const char *dir, const char *what, int rank, long value) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s.%d", dir, what, rank);
  FILE *f = fopen(path, "w");
  if (f != NULL) fprintf(f, "%ld\n", value), fclose(f);
}

#define CHECK(call)                                                       \
  do {                                                                    \
    ncclResult_t r_ = (call);                                             \
    if (r_ != ncclSuccess) {                                              \
      printf("ras_rank: %s failed: %s\n", #call, ncclGetErrorString(r_)); \
      return 1;                                                           \
    }                                                                     \
  } while (0)

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: ras_rank DIR\n");
    return 2;
  }
  const char *dir = argv[1];
  ncclComm_t world, half;
  CHECK(weftInitFromEnv(&world));
  int rank, n;
  CHECK(ncclCommUserRank(world, &rank));
  CHECK(ncclCommCount(world, &n));
  float buf[1024] = {0}, gathered[1024];
  for (int i = 0; i < 20; i++) CHECK(ncclAllReduce(buf, buf, 1024, ncclFloat, ncclSum, world, NULL));
  CHECK(ncclBroadcast(buf, buf, 16, ncclFloat, 0, world, NULL));
  CHECK(ncclCommSplit(world, rank % 2, rank, &half, NULL));
  for (int i = 0; i < 3; i++) CHECK(ncclAllGather(buf, gathered, 8, ncclFloat, half, NULL));
  mark(dir, "pid", rank, (long)getpid());
  if (wait_file(dir, "go") != 0) return printf("ras_rank: no go\n"), 1;
  CHECK(ncclAllReduce(buf, buf, 1024, ncclFloat, ncclSum, world, NULL));
  mark(dir, "done", rank, 1);
  if (wait_file(dir, "end") != 0) return printf("ras_rank: no end\n"), 1;
  CHECK(ncclCommDestroy(half));
  CHECK(ncclCommDestroy(world));
  return 0;
}
