/*
 * membw.c — host memory bandwidth, the yardstick for the collective
 * comparison in perf/compare/.
 *
 * A host-memory collective on one machine cannot move bytes faster than the
 * memory system does, so the comparison reports each large result as a
 * fraction of a memory-traffic bound. This program measures the bandwidth
 * that bound is computed from, with two kernels:
 *   copy  a[i] = b[i]         (memcpy)       traffic 2 x array bytes
 *   add   a[i] = b[i] + c[i]  (float loop)   traffic 3 x array bytes
 * Traffic counts every byte read plus every byte written once; the extra
 * read a cached store may cause (write-allocate) is not counted. GB/s is
 * 1e9 bytes of that traffic per second.
 *
 * Each kernel runs with 1 thread and with T threads (pthreads, each on its
 * own contiguous slice that it first-touched), RUNS times; the median is
 * reported. Arrays should be far larger than the last-level cache.
 *
 *   membw [-s MIB_PER_ARRAY] [-t THREADS] [-r RUNS]
 *
 * Output, one line per (kernel, threads):
 *   MEMBW kernel=copy threads=2 array_mib=1024 traffic_bytes=... gbps=12.34 runs=7
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "prog_util.h"

#define MAX_THREADS 256
#define MAX_RUNS 101

typedef enum { K_COPY, K_ADD } kernel_t;

typedef struct {
  float *a, *b, *c;
  size_t n;  // elements per array
  int nthreads;
  kernel_t kernel;
  pthread_barrier_t start, done;
  int quit;
} job_t;

typedef struct {
  job_t *job;
  int id;
} worker_t;

// Slice [lo, hi) of the arrays that thread `id` of `nthreads` owns.
static void slice(size_t n, int nthreads, int id, size_t *lo, size_t *hi) {
  *lo = n * (size_t)id / (size_t)nthreads;
  *hi = n * (size_t)(id + 1) / (size_t)nthreads;
}

static void run_kernel(job_t *j, int id) {
  size_t lo, hi;
  slice(j->n, j->nthreads, id, &lo, &hi);
  float *restrict a = j->a + lo;
  const float *restrict b = j->b + lo;
  const float *restrict c = j->c + lo;
  size_t len = hi - lo;
  if (j->kernel == K_COPY) {
    memcpy(a, b, len * sizeof(float));
  } else {
    for (size_t i = 0; i < len; i++) a[i] = b[i] + c[i];
  }
}

static void *worker_main(void *arg) {
  worker_t *w = arg;
  job_t *j = w->job;
  size_t lo, hi;
  slice(j->n, j->nthreads, w->id, &lo, &hi);
  // First touch: each thread's slice is placed near the thread that uses it.
  for (size_t i = lo; i < hi; i++) {
    j->a[i] = 0.0f;
    j->b[i] = (float)(i & 1023);
    j->c[i] = 1.0f;
  }
  for (;;) {
    pthread_barrier_wait(&j->start);
    if (j->quit) break;
    run_kernel(j, w->id);
    pthread_barrier_wait(&j->done);
  }
  return NULL;
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

// Median seconds of `runs` timed executions of `kernel` over all threads.
// The calling thread is worker 0.
static double time_kernel(job_t *j, kernel_t kernel, int runs) {
  double t[MAX_RUNS];
  j->kernel = kernel;
  // One untimed run so every page is resident and the code is warm.
  pthread_barrier_wait(&j->start);
  run_kernel(j, 0);
  pthread_barrier_wait(&j->done);
  for (int r = 0; r < runs; r++) {
    pthread_barrier_wait(&j->start);
    double t0 = weft_prog_now_s();
    run_kernel(j, 0);
    pthread_barrier_wait(&j->done);
    t[r] = weft_prog_now_s() - t0;
  }
  qsort(t, (size_t)runs, sizeof(double), cmp_double);
  return runs % 2 ? t[runs / 2] : 0.5 * (t[runs / 2 - 1] + t[runs / 2]);
}

// Measure both kernels with `nthreads` threads and print the results.
static int measure(size_t mib, int nthreads, int runs) {
  job_t j = {.n = (mib << 20) / sizeof(float), .nthreads = nthreads};
  size_t bytes = j.n * sizeof(float);
  j.a = aligned_alloc(4096, bytes);
  j.b = aligned_alloc(4096, bytes);
  j.c = aligned_alloc(4096, bytes);
  if (!j.a || !j.b || !j.c) {
    fprintf(stderr, "membw: cannot allocate 3 x %zu MiB\n", mib);
    free(j.a), free(j.b), free(j.c);
    return -1;
  }
  pthread_barrier_init(&j.start, NULL, (unsigned)nthreads);
  pthread_barrier_init(&j.done, NULL, (unsigned)nthreads);
  pthread_t tid[MAX_THREADS];
  worker_t w[MAX_THREADS];
  for (int i = 1; i < nthreads; i++) {
    w[i] = (worker_t){&j, i};
    if (pthread_create(&tid[i], NULL, worker_main, &w[i]) != 0) {
      fprintf(stderr, "membw: pthread_create failed\n");
      exit(1);
    }
  }
  size_t lo, hi;  // worker 0's first touch
  slice(j.n, nthreads, 0, &lo, &hi);
  for (size_t i = lo; i < hi; i++) j.a[i] = 0.0f, j.b[i] = (float)(i & 1023), j.c[i] = 1.0f;

  double t_copy = time_kernel(&j, K_COPY, runs);
  double t_add = time_kernel(&j, K_ADD, runs);
  j.quit = 1;
  pthread_barrier_wait(&j.start);
  for (int i = 1; i < nthreads; i++) pthread_join(tid[i], NULL);

  // Check the add result so the compiler cannot drop the loop.
  if (j.a[j.n - 1] != j.b[j.n - 1] + 1.0f) fprintf(stderr, "membw: add result wrong\n");
  printf("MEMBW kernel=copy threads=%d array_mib=%zu traffic_bytes=%zu gbps=%.3f runs=%d\n",
         nthreads, mib, 2 * bytes, 2.0 * (double)bytes / t_copy / 1e9, runs);
  printf("MEMBW kernel=add threads=%d array_mib=%zu traffic_bytes=%zu gbps=%.3f runs=%d\n",
         nthreads, mib, 3 * bytes, 3.0 * (double)bytes / t_add / 1e9, runs);
  fflush(stdout);
  pthread_barrier_destroy(&j.start);
  pthread_barrier_destroy(&j.done);
  free(j.a), free(j.b), free(j.c);
  return 0;
}

static void usage(void) {
  fprintf(stderr, "usage: membw [-s MIB_PER_ARRAY] [-t THREADS] [-r RUNS]\n");
  exit(2);
}

int main(int argc, char **argv) {
  long mib = 256, threads = sysconf(_SC_NPROCESSORS_ONLN), runs = 7;
  int opt;
  while ((opt = getopt(argc, argv, "s:t:r:h")) != -1) {
    char *end = NULL;
    long v = optarg ? strtol(optarg, &end, 10) : 0;
    if (opt == 'h' || opt == '?' || !end || *end != '\0' || v < 1) usage();
    if (opt == 's') mib = v;
    if (opt == 't') threads = v;
    if (opt == 'r') runs = v;
  }
  if (optind != argc || threads > MAX_THREADS || runs > MAX_RUNS || mib > (1L << 20)) usage();
  if (threads < 1) threads = 1;
  printf("# membw: traffic = bytes read + bytes written (copy 2x, add 3x array bytes), "
         "median of %ld runs\n",
         runs);
  if (measure((size_t)mib, 1, (int)runs) != 0) return 1;
  if (threads > 1 && measure((size_t)mib, (int)threads, (int)runs) != 0) return 1;
  return 0;
}
