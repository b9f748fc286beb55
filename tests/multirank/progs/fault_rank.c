/*
 * fault_rank.c — one rank of a job that runs AllReduce in a loop until a
 * fault stops it, for the multi-host fault tests.
 *
 *   fault_rank [-v VICTIM] [-s] [-b BOUND_S] [-n MAX_CALLS] [-c COUNT] [-k]
 *
 * Starts with weftInitFromEnv. Rank VICTIM (none by default) sends itself
 * SIGKILL (with -s: SIGSTOP, after printing "rank V: stopping, pid P") from
 * a second thread a few milliseconds after its 20th call began, while that
 * call runs; a fault from outside (a link taken down) needs no victim. Every other rank loops until a call fails, then checks
 * that it failed within BOUND_S seconds (default 5) of its last call that
 * succeeded, that a later call fails too, and that the communicator can
 * still be destroyed; it prints "rank R: <error> after S s" and exits 0 if
 * all of that holds. Exit 1: no call failed (MAX_CALLS, default 1e6, ran
 * out); 2: the failure came too late; 3: a call after it succeeded; 4:
 * destroy failed; 20 + result when weftInitFromEnv fails.
 *
 * With -k the fault is one the job must ride out (a rank stopped and
 * resumed, a link down and up): every rank runs MAX_CALLS calls, each on
 * values that change with the call (without a victim each prints "rank R:
 * running" at its 20th), checks every result exactly, prints
 * "rank R: N calls correct" and exits 0; 5 on a wrong value, 6 when a call
 * failed.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"
#include "weft.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int victim_signal = SIGKILL;

static void *die_soon(void *arg) {
  (void)arg;
  struct timespec ts = {0, 5000000};
  nanosleep(&ts, NULL);
  if (victim_signal == SIGSTOP) {
    printf("rank %d: stopping, pid %d\n", *(int *)arg, (int)getpid());
    fflush(stdout);
  }
  raise(victim_signal);
  return NULL;
}

// -k: MAX_CALLS calls, each result checked. Returns the exit status.
static int ride_out(ncclComm_t comm, int rank, int victim, long max_calls, float *buf, size_t count) {
  int nranks = 0;
  ncclCommCount(comm, &nranks);
  for (long call = 0; call < max_calls; call++) {
    if (call == 20 && rank == victim) {
      pthread_t th;
      pthread_create(&th, NULL, die_soon, &rank);
    }
    if (call == 20 && victim < 0) {  // for the script that makes the fault
      printf("rank %d: running\n", rank);
      fflush(stdout);
    }
    float scale = (float)(call % 7 + 1), want = scale * (float)(nranks * (nranks + 1) / 2);
    for (size_t i = 0; i < count; i++) buf[i] = scale * (float)(rank + 1);
    ncclResult_t res = ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, NULL);
    if (res != ncclSuccess) {
      printf("rank %d: call %ld failed: %s: %s\n", rank, call, ncclGetErrorString(res), ncclGetLastError(comm));
      return 6;
    }
    for (size_t i = 0; i < count; i++)
      if (buf[i] != want) {
        printf("rank %d: call %ld: element %zu is %g, not %g\n", rank, call, i, (double)buf[i], (double)want);
        return 5;
      }
  }
  printf("rank %d: %ld calls correct\n", rank, max_calls);
  return 0;
}

int main(int argc, char **argv) {
  int victim = -1, opt, ride = 0;
  double bound = 5.0;
  long max_calls = 1000000;
  size_t count = 64 * 1024;
  while ((opt = getopt(argc, argv, "v:sb:n:c:k")) != -1) {
    if (opt == 'v') victim = atoi(optarg);
    else if (opt == 's') victim_signal = SIGSTOP;
    else if (opt == 'b') bound = atof(optarg);
    else if (opt == 'n') max_calls = atol(optarg);
    else if (opt == 'c') count = (size_t)atol(optarg);
    else if (opt == 'k') ride = 1;
    else return 64;
  }
  ncclComm_t comm;
  ncclResult_t res = weftInitFromEnv(&comm);
  if (res != ncclSuccess) {
    fprintf(stderr, "fault_rank: weftInitFromEnv: %s\n", ncclGetErrorString(res));
    return 20 + (int)res;
  }
  int rank = -1;
  ncclCommUserRank(comm, &rank);
  float *buf = calloc(count, sizeof(float));
  if (buf == NULL) return 64;
  if (ride) {
    int code = ride_out(comm, rank, victim, max_calls, buf, count);
    fflush(stdout);
    if (ncclCommDestroy(comm) != ncclSuccess && code == 0) code = 4;
    free(buf);
    return code;
  }
  double last_ok = now_s();
  long calls = 0;
  for (; calls < max_calls && res == ncclSuccess; calls++) {
    if (calls == 20 && rank == victim) {
      pthread_t th;
      pthread_create(&th, NULL, die_soon, &rank);
    }
    res = ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, NULL);
    if (res == ncclSuccess) last_ok = now_s();
  }
  double took = now_s() - last_ok;
  if (res == ncclSuccess) {
    fprintf(stderr, "rank %d: no call failed in %ld calls\n", rank, calls);
    return 1;
  }
  printf("rank %d: %s after %.3f s (call %ld): %s\n", rank, ncclGetErrorString(res), took, calls,
         ncclGetLastError(comm));
  fflush(stdout);
  int code = took > bound ? 2 : 0;
  if (code == 0 && ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, comm, NULL) == ncclSuccess) code = 3;
  if (ncclCommDestroy(comm) != ncclSuccess) code = code ? code : 4;
  free(buf);
  return code;
}
