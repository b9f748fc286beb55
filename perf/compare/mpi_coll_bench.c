/*
 * mpi_coll_bench.c — MPI twin of weft's nccl-tests-style benchmarks.
 *
 * The comparison in perf/compare/ measures weft against Open MPI and MPICH
 * on the same host. To make the numbers comparable this program follows
 * nccl-tests' conventions exactly where they matter:
 *   - sizes: -b MIN -e MAX -f FACTOR (K/M/G suffixes are powers of 1024);
 *   - element type float (MPI_FLOAT) or, with -d double, MPI_DOUBLE; sum
 *     for reductions, root 0 for broadcast (MPI has no standard bfloat16 or
 *     half type, so those are weft-only in perf/compare: run.sh reports the
 *     MPI columns as n/a without starting this program);
 *   - per-rank counts rounded like nccl-tests (allgather, reducescatter and
 *     alltoall chunks are a multiple of 16 bytes), so the "size" column is
 *     the same number for the same -b/-e/-f;
 *   - time = (wall time of ITERS back-to-back calls) / ITERS, after WARMUP
 *     untimed calls; taken as the maximum over ranks;
 *   - buffers are allocated for the largest size and call i works on the
 *     region at offset (i mod (MAX / size)) * size, as nccl-tests rotates
 *     its buffers, so every library sees the same cache behaviour;
 *   - algbw = size / time, busbw = algbw * factor with factor 2(n-1)/n for
 *     allreduce, (n-1)/n for allgather, reducescatter and alltoall, 1 for
 *     broadcast. All buffers are out-of-place except broadcast's (MPI_Bcast
 *     has only one buffer).
 * After the timed loop one result is checked against the expected values
 * (inputs are small integers, so float and double sums are exact) and the number of
 * wrong elements is printed.
 *
 * Output: comment lines start with '#' (the first names coll and dtype); one
 * line per size:
 *   RESULT coll=allreduce nranks=2 size=1024 count=256 time_us=12.3
 *          algbw=0.083 busbw=0.083 wrong=0
 * (on one line). Build: mpicc -std=c11 -O2 -o mpi_coll_bench mpi_coll_bench.c
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "prog_util.h"

typedef enum { C_ALLREDUCE, C_ALLGATHER, C_REDUCESCATTER, C_BROADCAST, C_ALLTOALL } coll_t;

static const char *const coll_names[] = {"allreduce", "allgather", "reducescatter", "broadcast",
                                         "alltoall"};

typedef struct {
  coll_t coll;
  int dtype;  // index into dtypes[]
  size_t min_bytes, max_bytes, factor;
  int iters, warmup;
} opts_t;

// The element types this benchmark runs, named as weft's *_perf -d names them.
typedef struct {
  const char *name;
  MPI_Datatype mpi;
  size_t size;
} dtype_info_t;

static dtype_info_t dtypes[2];
static size_t elt;  // the chosen type's size in bytes
static int rank, nranks;
static int is_double;

// Element i of a buffer of the chosen type, read or written as a double
// (every value used here is a small integer, exact in both types).
static void put(void *b, size_t i, double v) {
  if (is_double)
    ((double *)b)[i] = v;
  else
    ((float *)b)[i] = (float)v;
}
static double get(const void *b, size_t i) {
  return is_double ? ((const double *)b)[i] : (double)((const float *)b)[i];
}

static void die(const char *msg) {
  if (rank == 0) fprintf(stderr, "mpi_coll_bench: %s\n", msg);
  MPI_Abort(MPI_COMM_WORLD, 2);
  exit(2);
}

static void usage_and_exit(void) {
  if (rank == 0)
    fprintf(stderr,
            "usage: mpi_coll_bench -c allreduce|allgather|reducescatter|broadcast|alltoall\n"
            "       [-d float|double] [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP]\n");
  MPI_Finalize();
  exit(2);
}

static void parse_args(int argc, char **argv, opts_t *o) {
  *o = (opts_t){.coll = C_ALLREDUCE, .dtype = 0, .min_bytes = 8, .max_bytes = 64u << 20, .factor = 2,
                .iters = 20, .warmup = 5};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (i + 1 >= argc) usage_and_exit();
    const char *v = argv[++i];
    long n;
    if (!strcmp(a, "-c")) {
      int found = 0;
      for (int c = 0; c < 5; c++)
        if (!strcmp(v, coll_names[c])) o->coll = (coll_t)c, found = 1;
      if (!found) usage_and_exit();
    } else if (!strcmp(a, "-d")) {
      int found = 0;
      for (int t = 0; t < 2; t++)
        if (!strcmp(v, dtypes[t].name)) o->dtype = t, found = 1;
      if (!found) usage_and_exit();
    } else if (!strcmp(a, "-b")) {
      if (weft_prog_parse_size(v, &o->min_bytes)) usage_and_exit();
    } else if (!strcmp(a, "-e")) {
      if (weft_prog_parse_size(v, &o->max_bytes)) usage_and_exit();
    } else if (!strcmp(a, "-f")) {
      if (weft_prog_parse_size(v, &o->factor) || o->factor < 2) usage_and_exit();
    } else if (!strcmp(a, "-n")) {
      n = strtol(v, NULL, 10);
      if (n < 1) usage_and_exit();
      o->iters = (int)n;
    } else if (!strcmp(a, "-w")) {
      n = strtol(v, NULL, 10);
      if (n < 0) usage_and_exit();
      o->warmup = (int)n;
    } else {
      usage_and_exit();
    }
  }
  if (o->min_bytes > o->max_bytes) usage_and_exit();
}

// Per-rank element counts for one nccl-tests size: `param` is what the MPI
// call takes as its count; send/recv are the buffer lengths in elements.
typedef struct {
  size_t param, send, recv;
} counts_t;

static counts_t counts_for(coll_t c, size_t bytes) {
  const size_t n = (size_t)nranks;
  size_t count = bytes / elt;
  size_t align = 16 / elt;  // chunks are a multiple of 16 bytes
  counts_t r = {0, 0, 0};
  switch (c) {
    case C_ALLREDUCE:
    case C_BROADCAST: r.param = r.send = r.recv = count; break;
    case C_ALLGATHER: r.param = r.send = (count / n) & ~(align - 1); r.recv = r.param * n; break;
    case C_REDUCESCATTER: r.param = r.recv = (count / n) & ~(align - 1); r.send = r.param * n; break;
    case C_ALLTOALL: r.param = (count / n) & ~(align - 1); r.send = r.recv = r.param * n; break;
  }
  return r;
}

static double bus_factor(coll_t c) {
  double n = nranks;
  switch (c) {
    case C_ALLREDUCE: return 2.0 * (n - 1) / n;
    case C_BROADCAST: return 1.0;
    default: return (n - 1) / n;
  }
}

// Value rank r puts at element i of its send buffer: a small integer so
// sums over ranks are exact in float and double.
static double input_value(int r, size_t i) { return (double)((r + 1) * (int)(i % 13 + 1)); }

static void fill_inputs(coll_t c, void *send, void *recv, counts_t k) {
  for (size_t i = 0; i < k.send; i++) put(send, i, input_value(rank, i));
  for (size_t i = 0; i < k.recv; i++) put(recv, i, -1.0);  // also first-touches the pages
  if (c == C_BROADCAST && rank != 0)
    for (size_t i = 0; i < k.send; i++) put(send, i, -1.0);
}

static void run_once(coll_t c, MPI_Datatype t, char *send, char *recv, counts_t k, size_t shift) {
  int cnt = (int)k.param;
  send += shift * elt;
  recv += shift * elt;
  switch (c) {
    case C_ALLREDUCE: MPI_Allreduce(send, recv, cnt, t, MPI_SUM, MPI_COMM_WORLD); break;
    case C_ALLGATHER: MPI_Allgather(send, cnt, t, recv, cnt, t, MPI_COMM_WORLD); break;
    case C_REDUCESCATTER:
      MPI_Reduce_scatter_block(send, recv, cnt, t, MPI_SUM, MPI_COMM_WORLD);
      break;
    case C_BROADCAST: MPI_Bcast(send, cnt, t, 0, MPI_COMM_WORLD); break;
    case C_ALLTOALL: MPI_Alltoall(send, cnt, t, recv, cnt, t, MPI_COMM_WORLD); break;
  }
}

// Number of elements of this rank's result that differ from the expected.
static long count_wrong(coll_t c, const void *send, const void *recv, counts_t k) {
  long wrong = 0;
  const size_t p = k.param;
  const double tri = (double)(nranks * (nranks + 1) / 2);  // sum over r of (r+1)
  switch (c) {
    case C_ALLREDUCE:
      for (size_t i = 0; i < p; i++) wrong += get(recv, i) != tri * (double)(i % 13 + 1);
      break;
    case C_ALLGATHER:
      for (int r = 0; r < nranks; r++)
        for (size_t i = 0; i < p; i++) wrong += get(recv, r * p + i) != input_value(r, i);
      break;
    case C_REDUCESCATTER:
      for (size_t i = 0; i < p; i++)
        wrong += get(recv, i) != tri * (double)(((size_t)rank * p + i) % 13 + 1);
      break;
    case C_BROADCAST:
      for (size_t i = 0; i < p; i++) wrong += get(send, i) != input_value(0, i);
      break;
    case C_ALLTOALL:  // block r of my output is block `rank` of rank r's input
      for (int r = 0; r < nranks; r++)
        for (size_t i = 0; i < p; i++)
          wrong += get(recv, r * p + i) != input_value(r, (size_t)rank * p + i);
      break;
  }
  return wrong;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  // MPI_FLOAT and MPI_DOUBLE are handles, not constants, in some MPIs.
  dtypes[0] = (dtype_info_t){"float", MPI_FLOAT, sizeof(float)};
  dtypes[1] = (dtype_info_t){"double", MPI_DOUBLE, sizeof(double)};
  opts_t o;
  parse_args(argc, argv, &o);
  const MPI_Datatype mt = dtypes[o.dtype].mpi;
  elt = dtypes[o.dtype].size;
  is_double = o.dtype == 1;

  counts_t kmax = counts_for(o.coll, o.max_bytes);
  if (kmax.param > (size_t)INT32_MAX) die("max size too large for an int count");
  // At least one element so malloc never returns NULL for a legal size.
  // Both buffers hold the largest region either needs, as in nccl-tests, so
  // the rotation below stays inside them for every collective.
  size_t kmax_total = kmax.send > kmax.recv ? kmax.send : kmax.recv;
  char *send = malloc((kmax_total + 1) * elt);
  char *recv = malloc((kmax_total + 1) * elt);
  if (!send || !recv) die("out of memory");
  // Touch every page now, so no page fault lands in a timed call.
  memset(send, 0, (kmax_total + 1) * elt);
  memset(recv, 0, (kmax_total + 1) * elt);

  if (rank == 0) {
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(ver, &len);
    char *nl = strchr(ver, '\n');
    if (nl) *nl = '\0';
    printf("# mpi_coll_bench coll=%s dtype=%s nranks=%d iters=%d warmup=%d\n# library: %s\n",
           coll_names[o.coll], dtypes[o.dtype].name, nranks, o.iters, o.warmup, ver);
    printf("# time: wall time of %d back-to-back calls / %d, max over ranks; out-of-place\n",
           o.iters, o.iters);
    fflush(stdout);
  }

  for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.factor) {
    counts_t k = counts_for(o.coll, bytes);
    fill_inputs(o.coll, send, recv, k);
    // nccl-tests' rotation: call i uses the region at (i mod steps) * total.
    size_t total = k.send > k.recv ? k.send : k.recv;
    size_t steps = total ? kmax_total / total : 1;
    for (int i = 0; i < o.warmup; i++) run_once(o.coll, mt, send, recv, k, total * ((size_t)i % steps));
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < o.iters; i++) run_once(o.coll, mt, send, recv, k, total * ((size_t)i % steps));
    double dt = (MPI_Wtime() - t0) / o.iters, dt_max = 0;
    MPI_Allreduce(&dt, &dt_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

    // The check: fresh inputs, one call at offset 0.
    fill_inputs(o.coll, send, recv, k);
    run_once(o.coll, mt, send, recv, k, 0);

    long wrong = count_wrong(o.coll, send, recv, k), wrong_all = 0;
    MPI_Reduce(&wrong, &wrong_all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    size_t size = (k.send > k.recv ? k.send : k.recv) * elt;
    if (rank == 0) {
      double algbw = dt_max > 0 ? (double)size / dt_max / 1e9 : 0.0;
      printf("RESULT coll=%s nranks=%d size=%zu count=%zu time_us=%.2f algbw=%.4f busbw=%.4f "
             "wrong=%ld\n",
             coll_names[o.coll], nranks, size, k.param, dt_max * 1e6, algbw,
             algbw * bus_factor(o.coll), wrong_all);
      fflush(stdout);
    }
    if (bytes == 0 || bytes > o.max_bytes / o.factor) break;  // no overflow past max
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return 0;
}
