/*
 * threads.c — weft's threaded uses, for ThreadSanitizer (make test-tsan).
 *
 * Four ranks as threads of one process (ncclCommInitAll), each on its own
 * thread with blocking calls and asynchronous calls on a weft stream (whose
 * worker thread runs them); one group over all four communicators from one
 * thread; ncclCommAbort from another thread while a call is blocked;
 * receives from any rank on a stream's worker while the rank's own thread
 * receives from each rank (both serve tickets of the same connections). The
 * Criterion runner itself does not run under TSan, so this is a plain
 * program: exit 0 when every call did what it should, and TSan's own exit
 * code (66) when it saw a race.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "nccl.h"
#include "weft.h"
#define N 4
static ncclComm_t comms[N];
static int failures;
static void check(ncclResult_t r, const char *what) {
  if (r != ncclSuccess) { printf("%s: %s\n", what, ncclGetErrorString(r)); __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST); }
}
// Every rank sends rank 0 N messages holding its rank. Rank 0 takes N-1 of
// them with weftRecvAny on stream s and N-1 with ncclRecv from each rank
// here (the any-source ones are launched first, so they come first in each
// pair's order), then the rest from each rank.
static void any_source(int r, cudaStream_t s) {
  int32_t v = r, got[N], src[N];
  for (int k = 0; r != 0 && k < N; k++) check(ncclSend(&v, 1, ncclInt32, 0, comms[r], NULL), "send");
  if (r != 0) return;
  int left[N] = {0};
  for (int i = 0; i < N - 1; i++) check(weftRecvAny(&got[i], 1, ncclInt32, &src[i], comms[0], s), "recv any");
  for (int p = 1; p < N; p++) check(ncclRecv(&v, 1, ncclInt32, p, comms[0], NULL), "recv");
  check(weftStreamSynchronize(s), "sync any");
  for (int p = 1; p < N; p++) left[p] = N - 1;
  for (int i = 0; i < N - 1; i++) {
    if (src[i] < 1 || src[i] >= N || got[i] != src[i]) { printf("any: %d from %d\n", got[i], src[i]); failures++; }
    else left[src[i]]--;
  }
  for (int p = 1; p < N; p++)
    while (left[p]-- > 0) check(ncclRecv(&v, 1, ncclInt32, p, comms[0], NULL), "recv rest");
}
static void *rank_main(void *p) {
  int r = (int)(long)p;
  float *buf = calloc(1 << 16, sizeof(float));
  cudaStream_t s;
  check(weftStreamCreate(&s), "stream create");
  for (int i = 0; i < 10; i++) {
    check(ncclAllReduce(buf, buf, 1 << 16, ncclFloat32, ncclSum, comms[r], NULL), "allreduce");
    check(ncclAllGather(buf, buf + 1024, 256, ncclFloat32, comms[r], s), "allgather async");
    check(ncclBroadcast(buf, buf, 1000, ncclFloat32, 0, comms[r], s), "broadcast async");
    check(weftStreamSynchronize(s), "sync");
  }
  any_source(r, s);
  check(weftStreamDestroy(s), "stream destroy");
  free(buf);
  return NULL;
}
static void *abort_later(void *p) {
  usleep(200000);
  check(ncclCommAbort(*(ncclComm_t *)p), "abort");
  return NULL;
}
int main(void) {
  int devs[N] = {0, 1, 2, 3};
  check(ncclCommInitAll(comms, N, devs), "init");
  pthread_t th[N];
  for (long r = 0; r < N; r++) pthread_create(&th[r], NULL, rank_main, (void *)r);
  for (int r = 0; r < N; r++) pthread_join(th[r], NULL);
  float x[N] = {1, 2, 3, 4};
  check(ncclGroupStart(), "group start");
  for (int r = 0; r < N; r++) ncclAllReduce(&x[r], &x[r], 1, ncclFloat32, ncclSum, comms[r], NULL);
  check(ncclGroupEnd(), "group end");
  if (x[0] != 10 || x[3] != 10) { printf("group result %g\n", x[0]); failures++; }
  for (int r = 0; r < N; r++) check(ncclCommDestroy(comms[r]), "destroy");
  /* Abort while blocked: rank 1 never joins. */
  ncclComm_t two[2];
  int d2[2] = {0, 1};
  check(ncclCommInitAll(two, 2, d2), "init 2");
  pthread_t ab;
  pthread_create(&ab, NULL, abort_later, &two[0]);
  float y = 1;
  ncclResult_t r = ncclAllReduce(&y, &y, 1, ncclFloat32, ncclSum, two[0], NULL);
  pthread_join(ab, NULL);
  if (r == ncclSuccess) { printf("blocked call succeeded\n"); failures++; }
  check(ncclCommDestroy(two[1]), "destroy 2");
  printf("%s (%d failures)\n", failures ? "FAILED" : "done", failures);
  return failures != 0;
}
