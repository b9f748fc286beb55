/*
 * weft_demo.c — a tour of every collective, checked and timed
 * (`make demo` runs it as `weftrun -n 4 weft-demo`).
 *
 * Each rank joins with weftInitFromEnv, then runs AllReduce, Broadcast,
 * Reduce, AllGather, ReduceScatter, AlltoAll, Gather, Scatter and a ring
 * SendRecv on host buffers, for a few (datatype, op) pairs and two sizes.
 * Inputs are small integers derived from (rank, index), so every expected
 * result is exact in every type and each element is compared exactly.
 * Rank 0 prints one table in nccl-tests' units (median of 5 timed calls,
 * algorithm and bus bandwidth); the exit status is non-zero if any element
 * on any rank was wrong. A client of the public API only: nccl.h and weft.h.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl.h"
#include "weft.h"
#include "prog_util.h"

#define WARMUP 2
#define TIMED 5

#define CHECK(call)                                                                 \
  do {                                                                              \
    ncclResult_t r_ = (call);                                                       \
    if (r_ != ncclSuccess) {                                                        \
      fprintf(stderr, "weft-demo: rank %d: %s failed: %s (%s)\n", g_rank, #call,    \
              ncclGetErrorString(r_), ncclGetLastError(g_comm));                    \
      exit(1);                                                                      \
    }                                                                               \
  } while (0)

typedef enum { ALLREDUCE, BROADCAST, REDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL, GATHER, SCATTER,
               SENDRECV } coll_t;

// busbw factor: 0 -> 2(n-1)/n, 1 -> (n-1)/n, 2 -> 1 (nccl-tests' conventions).
static const struct {
  const char *name;
  int bw_kind, rooted, reducing;
} colls[] = {
    [ALLREDUCE] = {"AllReduce", 0, 0, 1},   [BROADCAST] = {"Broadcast", 2, 1, 0},
    [REDUCE] = {"Reduce", 2, 1, 1},         [ALLGATHER] = {"AllGather", 1, 0, 0},
    [REDUCESCATTER] = {"ReduceScatter", 1, 0, 1}, [ALLTOALL] = {"AlltoAll", 1, 0, 0},
    [GATHER] = {"Gather", 1, 1, 0},         [SCATTER] = {"Scatter", 1, 1, 0},
    [SENDRECV] = {"SendRecv", 2, 0, 0},
};

typedef struct {
  coll_t coll;
  ncclDataType_t dt;
  ncclRedOp_t op;
} case_t;

static const case_t cases[] = {
    {ALLREDUCE, ncclInt32, ncclSum},      {ALLREDUCE, ncclFloat32, ncclSum},
    {ALLREDUCE, ncclFloat16, ncclMax},    {ALLREDUCE, ncclBfloat16, ncclAvg},
    {BROADCAST, ncclFloat32, ncclSum},
    {REDUCE, ncclInt32, ncclSum},         {REDUCE, ncclFloat32, ncclMax},
    {REDUCE, ncclFloat16, ncclSum},
    {ALLGATHER, ncclFloat32, ncclSum},
    {REDUCESCATTER, ncclInt32, ncclAvg},  {REDUCESCATTER, ncclFloat32, ncclMin},
    {REDUCESCATTER, ncclBfloat16, ncclSum},
    {ALLTOALL, ncclFloat32, ncclSum},     {GATHER, ncclFloat32, ncclSum},
    {SCATTER, ncclFloat32, ncclSum},      {SENDRECV, ncclFloat32, ncclSum},
};
static const size_t sizes[] = {1024, 1024 * 1024};

static int g_rank, g_nranks;
static ncclComm_t g_comm;

// ---- 16-bit floats (round to nearest even; demo values are small integers)

static uint16_t float_to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
  int exp = (int)((x >> 23) & 0xff) - 127 + 15;
  if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 31) return (uint16_t)(sign | 0x7c00u);
  int shift = 13;
  uint32_t h = (uint32_t)exp << 10;
  if (exp <= 0) {  // subnormal
    if (exp < -10) return (uint16_t)sign;
    mant |= 0x800000u;
    shift = 14 - exp;
    h = 0;
  }
  uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
  h += mant >> shift;
  if (rem > half || (rem == half && (h & 1))) h++;  // a carry may bump the exponent: correct
  return (uint16_t)(sign | h);
}

static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, x;
  if (exp == 0) {
    float v = (float)mant / 16777216.0f;  // mant * 2^-24, exact
    return sign ? -v : v;
  }
  x = exp == 31 ? (sign | 0x7f800000u | (mant << 13)) : (sign | ((exp + 112) << 23) | (mant << 13));
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static uint16_t float_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);  // NaN stays NaN
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

static float bf16_to_float(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

// ---- typed element access

static size_t type_size(ncclDataType_t dt) {
  return dt == ncclFloat16 || dt == ncclBfloat16 ? 2 : 4;
}

static const char *type_name(ncclDataType_t dt) {
  return dt == ncclInt32 ? "int32" : dt == ncclFloat32 ? "float32" : dt == ncclFloat16 ? "float16"
                                                                                       : "bfloat16";
}

static const char *op_name(ncclRedOp_t op) {
  return op == ncclSum ? "sum" : op == ncclMax ? "max" : op == ncclMin ? "min" : "avg";
}

static void put(ncclDataType_t dt, void *buf, size_t i, double v) {
  switch (dt) {
    case ncclInt32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case ncclFloat16: ((uint16_t *)buf)[i] = float_to_half((float)v); break;
    case ncclBfloat16: ((uint16_t *)buf)[i] = float_to_bf16((float)v); break;
    default: ((float *)buf)[i] = (float)v; break;
  }
}

static double get(ncclDataType_t dt, const void *buf, size_t i) {
  switch (dt) {
    case ncclInt32: return ((const int32_t *)buf)[i];
    case ncclFloat16: return half_to_float(((const uint16_t *)buf)[i]);
    case ncclBfloat16: return bf16_to_float(((const uint16_t *)buf)[i]);
    default: return ((const float *)buf)[i];
  }
}

// ---- inputs and expected outputs

// Rank r's input element j. For avg the inputs are multiples of nranks, so
// the average is an exact small integer in every type.
static double input(const case_t *c, int r, size_t j) {
  double base = (double)((r + 3 * j) % 5);
  return c->op == ncclAvg && colls[c->coll].reducing ? base * g_nranks : base;
}

static double reduced(const case_t *c, size_t j) {
  double acc = input(c, 0, j);
  for (int r = 1; r < g_nranks; r++) {
    double v = input(c, r, j);
    acc = c->op == ncclMax ? (v > acc ? v : acc) : c->op == ncclMin ? (v < acc ? v : acc) : acc + v;
  }
  return c->op == ncclAvg ? acc / g_nranks : acc;
}

// Elements this rank sends / receives; `per` is count or the per-rank chunk.
static size_t in_len(coll_t k, size_t per) {
  return k == REDUCESCATTER || k == ALLTOALL || k == SCATTER ? per * g_nranks : per;
}

static size_t out_len(coll_t k, size_t per, int root) {
  if ((k == REDUCE || k == GATHER) && g_rank != root) return 0;  // nothing defined here
  return k == ALLGATHER || k == ALLTOALL || k == GATHER ? per * g_nranks : per;
}

static double expected(const case_t *c, size_t i, size_t per, int root) {
  int me = g_rank, n = g_nranks;
  switch (c->coll) {
    case ALLREDUCE: case REDUCE: return reduced(c, i);
    case BROADCAST: return input(c, root, i);
    case ALLGATHER: case GATHER: return input(c, (int)(i / per), i % per);
    case REDUCESCATTER: return reduced(c, me * per + i);
    case ALLTOALL: return input(c, (int)(i / per), me * per + i % per);
    case SCATTER: return input(c, root, me * per + i);
    case SENDRECV: return input(c, (me + n - 1) % n, i);
  }
  return 0;
}

static void run_once(const case_t *c, const void *send, void *recv, size_t per, int root) {
  ncclDataType_t dt = c->dt;
  switch (c->coll) {
    case ALLREDUCE: CHECK(ncclAllReduce(send, recv, per, dt, c->op, g_comm, NULL)); break;
    case BROADCAST: CHECK(ncclBroadcast(send, recv, per, dt, root, g_comm, NULL)); break;
    case REDUCE: CHECK(ncclReduce(send, recv, per, dt, c->op, root, g_comm, NULL)); break;
    case ALLGATHER: CHECK(ncclAllGather(send, recv, per, dt, g_comm, NULL)); break;
    case REDUCESCATTER: CHECK(ncclReduceScatter(send, recv, per, dt, c->op, g_comm, NULL)); break;
    case ALLTOALL: CHECK(ncclAlltoAll(send, recv, per, dt, g_comm, NULL)); break;
    case GATHER: CHECK(ncclGather(send, recv, per, dt, root, g_comm, NULL)); break;
    case SCATTER: CHECK(ncclScatter(send, recv, per, dt, root, g_comm, NULL)); break;
    case SENDRECV:
      CHECK(ncclGroupStart());
      CHECK(ncclSend(send, per, dt, (g_rank + 1) % g_nranks, g_comm, NULL));
      CHECK(ncclRecv(recv, per, dt, (g_rank + g_nranks - 1) % g_nranks, g_comm, NULL));
      CHECK(ncclGroupEnd());
      break;
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

// Runs, times and verifies one case; returns the job-wide count of wrong elements.
static int run_case(const case_t *c, size_t count, void *send, void *recv) {
  int root = colls[c->coll].rooted ? 1 % g_nranks : -1;
  int chunked = c->coll == ALLGATHER || c->coll == REDUCESCATTER || c->coll == ALLTOALL ||
                c->coll == GATHER || c->coll == SCATTER;
  size_t per = chunked ? (count / g_nranks ? count / g_nranks : 1) : count;
  size_t total = chunked ? per * g_nranks : count;  // the count nccl-tests reports
  size_t nin = in_len(c->coll, per), nout = out_len(c->coll, per, root);

  for (size_t j = 0; j < nin; j++) put(c->dt, send, j, input(c, g_rank, j));
  for (size_t i = 0; i < nout; i++) put(c->dt, recv, i, -7);  // never a valid result

  double t[TIMED] = {0};
  for (int it = 0; it < WARMUP + TIMED; it++) {
    double t0 = (weft_prog_now_s() * 1e6);
    run_once(c, send, recv, per, root);
    if (it >= WARMUP) t[it - WARMUP] = (weft_prog_now_s() * 1e6) - t0;
  }
  qsort(t, TIMED, sizeof(double), cmp_double);
  double us = t[TIMED / 2];

  int32_t wrong = 0;
  for (size_t i = 0; i < nout; i++) wrong += get(c->dt, recv, i) != expected(c, i, per, root);
  CHECK(ncclAllReduce(&wrong, &wrong, 1, ncclInt32, ncclSum, g_comm, NULL));
  CHECK(ncclAllReduce(&us, &us, 1, ncclFloat64, ncclMax, g_comm, NULL));  // slowest rank

  if (g_rank == 0) {
    double bytes = (double)total * (double)type_size(c->dt), n = g_nranks;
    double algbw = us > 0 ? bytes / us * 1e-3 : 0;  // GB/s
    int kind = colls[c->coll].bw_kind;
    double busbw = algbw * (kind == 0 ? 2 * (n - 1) / n : kind == 1 ? (n - 1) / n : 1);
    char rootbuf[16], result[32];
    snprintf(rootbuf, sizeof(rootbuf), root < 0 ? "-" : "%d", root);
    snprintf(result, sizeof(result), wrong ? "WRONG(%d)" : "ok", (int)wrong);
    printf("%-14s %-9s %-4s %4s %10zu %12.0f %11.1f %12.3f %12.3f  %s\n", colls[c->coll].name,
           type_name(c->dt), colls[c->coll].reducing ? op_name(c->op) : "-", rootbuf, total, bytes,
           us, algbw, busbw, result);
    fflush(stdout);
  }
  return (int)wrong;
}

int main(void) {
  CHECK(weftInitFromEnv(&g_comm));
  CHECK(ncclCommUserRank(g_comm, &g_rank));
  CHECK(ncclCommCount(g_comm, &g_nranks));

  if (g_rank == 0) {
    int wv, nv;
    CHECK(weftGetVersion(&wv));
    CHECK(ncclGetVersion(&nv));
    printf("weft-demo: weft %d.%d.%d, NCCL API %d.%d.%d, %d rank%s\n\n", wv / 10000,
           wv / 100 % 100, wv % 100, nv / 10000, nv / 100 % 100, nv % 100, g_nranks,
           g_nranks == 1 ? "" : "s");
    printf("%-14s %-9s %-4s %4s %10s %12s %11s %12s %12s  %s\n", "collective", "type", "op",
           "root", "count", "bytes", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "result");
  }

  size_t max_elems = sizes[sizeof(sizes) / sizeof(sizes[0]) - 1] + (size_t)g_nranks;
  void *send = malloc(max_elems * 4), *recv = malloc(max_elems * 4);
  if (send == NULL || recv == NULL) {
    fprintf(stderr, "weft-demo: rank %d: out of memory\n", g_rank);
    return 1;
  }

  int checks = 0, failed = 0;
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
      checks++;
      if (run_case(&cases[c], sizes[s], send, recv) != 0) failed++;
    }

  if (g_rank == 0) {
    if (failed == 0)
      printf("\nweft-demo: all %d checks passed on %d rank%s\n", checks, g_nranks,
             g_nranks == 1 ? "" : "s");
    else
      printf("\nweft-demo: %d of %d checks FAILED on %d rank%s\n", failed, checks, g_nranks,
             g_nranks == 1 ? "" : "s");
  }
  free(send);
  free(recv);
  CHECK(ncclCommDestroy(g_comm));
  return failed ? 1 : 0;
}
