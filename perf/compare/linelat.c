/*
 * linelat.c — the floor under a small collective between two cores.
 *
 * A 2-rank AllReduce of a few bytes cannot finish faster than the two
 * cores can swap one cache line each: rank A stores into its line, rank B
 * into its own, and each waits until it sees the other's store. This
 * program measures exactly that exchange between two processes pinned to
 * two CPUs, in a shared anonymous mapping, the waiting side polling with
 * `pause` as every shared-memory library does. It is the yardstick the
 * comparison puts next to the 8-byte figures (perf/compare/README.md).
 *
 *   linelat [-a CPU] [-b CPU] [-n ROUNDS] [-r RUNS]
 *
 * Output: LINELAT cpus=0,1 rounds=... ns_per_exchange=... runs=... (the median run)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "prog_util.h"

#define MAX_RUNS 101

typedef struct {
  _Alignas(64) _Atomic long value;
} line_t;

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    perror("linelat: sched_setaffinity");
    exit(1);
  }
}

static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

// Rounds first..last: store ours, wait for theirs.
static void exchange(line_t *mine, line_t *theirs, long first, long last) {
  for (long i = first; i <= last; i++) {
    atomic_store_explicit(&mine->value, i, memory_order_release);
    while (atomic_load_explicit(&theirs->value, memory_order_acquire) < i) relax();
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void usage(void) {
  fprintf(stderr, "usage: linelat [-a CPU] [-b CPU] [-n ROUNDS] [-r RUNS 1..%d]\n", MAX_RUNS);
  exit(2);
}

// The value after option *i, in [lo, hi].
static long arg(int argc, char **argv, int *i, long lo, long hi) {
  if (*i + 1 >= argc) usage();
  char *end;
  long v = strtol(argv[++*i], &end, 10);
  if (*end != '\0' || v < lo || v > hi) usage();
  return v;
}

int main(int argc, char **argv) {
  int cpu_a = 0, cpu_b = 1, runs = 7;
  long rounds = 1000000;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-a")) cpu_a = (int)arg(argc, argv, &i, 0, CPU_SETSIZE - 1);
    else if (!strcmp(argv[i], "-b")) cpu_b = (int)arg(argc, argv, &i, 0, CPU_SETSIZE - 1);
    else if (!strcmp(argv[i], "-n")) rounds = arg(argc, argv, &i, 1, 1L << 40);
    else if (!strcmp(argv[i], "-r")) runs = (int)arg(argc, argv, &i, 1, MAX_RUNS);
    else usage();
  }
  line_t *lines = mmap(NULL, 2 * sizeof(line_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (lines == MAP_FAILED) {
    perror("linelat: mmap");
    return 1;
  }
  double ns[MAX_RUNS];
  pid_t child = fork();
  if (child < 0) {
    perror("linelat: fork");
    return 1;
  }
  int me = child == 0;
  pin(me ? cpu_b : cpu_a);
  exchange(&lines[me], &lines[!me], 1, rounds / 10 + 1);  // warm-up
  long next = rounds / 10 + 2;
  for (int r = 0; r < runs; r++) {
    int64_t t0 = weft_prog_now_ns();
    exchange(&lines[me], &lines[!me], next, next + rounds - 1);
    ns[r] = (double)(weft_prog_now_ns() - t0) / (double)rounds;
    next += rounds;
  }
  if (me) return 0;
  int status = 0;
  waitpid(child, &status, 0);
  qsort(ns, (size_t)runs, sizeof(ns[0]), cmp_double);
  printf("LINELAT cpus=%d,%d rounds=%ld ns_per_exchange=%.1f min=%.1f max=%.1f runs=%d\n", cpu_a, cpu_b, rounds,
         ns[runs / 2], ns[0], ns[runs - 1], runs);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
