/*
 * common_check.c — the benchmarks' inputs and result checks.
 *
 * Inputs are chosen so that every expected result is exact in every type:
 * small non-negative integers whose sum over the ranks (times the PreMulSum
 * scalar, 1 or 2) stays within the type's exact-integer range; for prod,
 * factors 1 and 2 with no more 2s per element than the type's exponent
 * range holds. Results are then compared bit for bit, except Avg on
 * floating types, which multiplies each input by 1/n before summing and is
 * allowed (n+1) units in the last place of the largest input. Values come
 * from a hash of (seed, rank, index), so each rank's data differs and any
 * misplaced block shows. The 16- and 8-bit float formats are converted
 * here (round to nearest even), independent of the library.
 */
#include <math.h>
#include <string.h>

#include "common_internal.h"

const perf_type_t perf_types[PERF_NTYPES] = {
    {"int8", 1, 0, 0},     {"uint8", 1, 0, 0},    {"int32", 4, 0, 0},  {"uint32", 4, 0, 0},
    {"int64", 8, 0, 0},    {"uint64", 8, 0, 0},   {"half", 2, 5, 10},  {"float", 4, 8, 23},
    {"double", 8, 11, 52}, {"bfloat16", 2, 8, 7}, {"f8e4m3", 1, 4, 3}, {"f8e5m2", 1, 5, 2}};
const char *const perf_opnames[PERF_NOPS] = {"sum", "prod", "max", "min", "avg", "mulsum"};

// ---- half, bfloat16, fp8 (no overflow handling: every value here is in range)

static uint32_t mini_encode(double x, int t) {
  int eb = perf_types[t].ebits, mb = perf_types[t].mbits, bias = (1 << (eb - 1)) - 1, e;
  uint32_t sign = 0;
  if (x < 0) sign = 1u << (eb + mb), x = -x;
  if (x == 0) return sign;
  frexp(x, &e);
  e -= 1;                                  // x in [2^e, 2^(e+1))
  if (e < 1 - bias) e = 1 - bias;          // subnormal
  double m = nearbyint(ldexp(x, mb - e));  // significand in last-place units
  if (m >= ldexp(1.0, mb + 1)) m /= 2, e++;
  if (m < ldexp(1.0, mb)) return sign | (uint32_t)m;
  return sign | (uint32_t)(e + bias) << mb | ((uint32_t)m & ((1u << mb) - 1));
}

static double mini_decode(uint32_t b, int t) {
  int eb = perf_types[t].ebits, mb = perf_types[t].mbits, bias = (1 << (eb - 1)) - 1;
  uint32_t ex = (b >> mb) & ((1u << eb) - 1), man = b & ((1u << mb) - 1);
  double s = (b >> (eb + mb)) & 1 ? -1.0 : 1.0;
  int e4m3 = t == ncclFloat8e4m3;  // no infinities; only S.1111.111 is NaN
  if (ex == (1u << eb) - 1 && (!e4m3 || man == (1u << mb) - 1))
    return !e4m3 && man == 0 ? s * INFINITY : NAN;
  return s * (ex ? ldexp(1.0 + ldexp(man, -mb), (int)ex - bias) : ldexp(man, 1 - bias - mb));
}

void perf_check_put(int t, void *p, size_t i, double v) {
  size_t size = (size_t)perf_types[t].size;
  if (!perf_types[t].mbits) {  // integers: v is a non-negative integer below 2^63
    uint64_t u = (uint64_t)v;
    memcpy((char *)p + i * size, &u, size);  // little-endian
  } else if (t == ncclFloat32) {
    ((float *)p)[i] = (float)v;
  } else if (t == ncclFloat64) {
    ((double *)p)[i] = v;
  } else if (size == 2) {
    ((uint16_t *)p)[i] = (uint16_t)mini_encode(v, t);
  } else {
    ((uint8_t *)p)[i] = (uint8_t)mini_encode(v, t);
  }
}

// Element i's bits, zero-extended.
static uint64_t get_bits(int t, const void *p, size_t i) {
  uint64_t b = 0;
  memcpy(&b, (const char *)p + i * (size_t)perf_types[t].size, (size_t)perf_types[t].size);
  return b;
}

static double float_value(int t, uint64_t b) {
  if (t == ncclFloat32) {
    float f;
    uint32_t u = (uint32_t)b;
    memcpy(&f, &u, 4);
    return f;
  }
  if (t == ncclFloat64) {
    double d;
    memcpy(&d, &b, 8);
    return d;
  }
  return mini_decode((uint32_t)b, t);
}

// ---- Inputs and expected results

typedef struct {
  int t, op;
  uint64_t seed;
  uint64_t cap;     // values 0..cap, or when 0: at most `sparse` ranks give a 1 per element
  uint64_t sparse;  // (types too narrow for every rank to add even 1)
  uint64_t twos;    // prod: at most this many ranks give a 2 per element
} gen_t;

static void gen_init(gen_t *g, int t, int op, uint64_t seed) {
  int bits = 8 * perf_types[t].size, mb = perf_types[t].mbits, eb = perf_types[t].ebits;
  uint64_t exact = mb ? 1ull << (mb + 1) : (1ull << (bits - 1)) - 1;  // largest exact sum
  uint64_t smax = op == PERF_OP_PREMUL ? 2 : 1;
  g->t = t, g->op = op, g->seed = seed;
  g->cap = exact / ((uint64_t)perf_nranks * smax);
  if (g->cap > (1u << 20)) g->cap = 1u << 20;
  g->sparse = exact / smax;
  g->twos = mb ? (1ull << (eb - 1)) - 1 : (uint64_t)bits - 2;  // 2^twos fits the type
}

static uint64_t gen_value(const gen_t *g, int rank, size_t i) {
  uint64_t x = (g->seed * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)rank + 1) * 0xC2B2AE3D27D4EB4Full ^
               ((uint64_t)i + 0x632BE59BD9B4E019ull) * 0xD6E8FEB86659FD93ull;
  x ^= x >> 31, x *= 0x94D049BB133111EBull, x ^= x >> 29;
  uint64_t slot = ((uint64_t)i + (uint64_t)rank) % (uint64_t)perf_nranks;  // distinct per rank
  if (g->op == PERF_OP_PROD) return 1 + (slot < g->twos ? (x & 1) : 0);
  if (g->cap) return x % (g->cap + 1);
  return slot < g->sparse ? (x & 1) : 0;
}

double perf_check_scalar(int rank) { return (double)(1 + (rank & 1)); }

// A copy of one input, or the reduction of element idx over all ranks.
// Exact in double: every value and partial result is an integer below 2^53
// or a power of two.
static double expect(const gen_t *g, perf_src_t k, int src, size_t idx) {
  if (k == PERF_SRC_COPY) return (double)gen_value(g, src, idx);
  double acc = 0;
  for (int q = 0; q < perf_nranks; q++) {
    double v = (double)gen_value(g, q, idx);
    if (g->op == PERF_OP_PROD)
      acc = q ? acc * v : v;
    else if (g->op == PERF_OP_MAX)
      acc = q ? fmax(acc, v) : v;
    else if (g->op == PERF_OP_MIN)
      acc = q ? fmin(acc, v) : v;
    else
      acc += g->op == PERF_OP_PREMUL ? perf_check_scalar(q) * v : v;
  }
  if (g->op == PERF_OP_AVG)  // integers: the sum divided, truncated
    acc = perf_types[g->t].mbits ? acc / perf_nranks
                                 : (double)((uint64_t)acc / (uint64_t)perf_nranks);
  return acc;
}

// Elements of the receive buffer a call touches, from its base: in place,
// the send region lies inside it too.
static size_t recv_extent(const perf_thread_t *th, int rank, int inplace) {
  if (!inplace) return th->c.recv;
  size_t s = th->c.send_inplace * (size_t)rank + th->c.send, r = th->c.recv_inplace * (size_t)rank + th->c.recv;
  return s > r ? s : r;
}

void perf_check_fill(perf_thread_t *th, int t, int op, uint64_t seed, int inplace) {
  size_t e = (size_t)perf_types[t].size;
  gen_t g;
  gen_init(&g, t, op, seed);
  for (int l = 0; l < perf_opts.ngpus; l++) {
    int rank = th->first + l;
    char *rb = perf_hrecv_base(th, l, t);
    memset(rb, 0, th->c.recv * e);
    char *data = inplace ? rb + th->c.send_inplace * (size_t)rank * e : perf_hsend_base(th, l, t);
    for (size_t i = 0; i < th->c.send; i++)
      perf_check_put(t, data, i, (double)gen_value(&g, rank, i));
    memcpy(th->snap[l], rb + (inplace ? th->c.recv_inplace * (size_t)rank * e : 0), th->c.recv * e);
    if (perf_opts.device) {  // the device buffers get the same bytes
      perf_dev_put(rank, perf_recv_base(th, l, t), rb, recv_extent(th, rank, inplace) * e);
      if (!inplace) perf_dev_put(rank, perf_send_base(th, l, t), data, th->c.send * e);
    }
  }
}

int64_t perf_check_count(perf_thread_t *th, int t, int op, int root, uint64_t seed, int inplace) {
  size_t e = (size_t)perf_types[t].size;
  uint64_t mask = e == 8 ? ~0ull : (1ull << (8 * e)) - 1;
  int isfloat = perf_types[t].mbits != 0;
  gen_t g;
  gen_init(&g, t, op, seed);
  double tol = (perf_nranks + 1) * ldexp(1.0, -perf_types[t].mbits) * (g.cap ? (double)g.cap : 1.0);
  int64_t wrong = 0;
  for (int l = 0; l < perf_opts.ngpus; l++) {
    int rank = th->first + l;
    if (perf_opts.device)
      perf_dev_get(rank, perf_hrecv_base(th, l, t), perf_recv_base(th, l, t), recv_extent(th, rank, inplace) * e);
    const char *got =
        perf_hrecv_base(th, l, t) + (inplace ? th->c.recv_inplace * (size_t)rank * e : 0);
    for (size_t j = 0; j < th->c.recv; j++) {
      int src = 0;
      size_t idx = 0;
      perf_src_t k = perf_coll->source(rank, perf_nranks, root, th->c.param, j, &src, &idx);
      if (k == PERF_SRC_NONE) {  // must be as it was before the call
        wrong += memcmp(got + j * e, th->snap[l] + j * e, e) != 0;
        continue;
      }
      double want = expect(&g, k, src, idx);
      uint64_t bits = get_bits(t, got, j);
      if (!isfloat)
        wrong += bits != ((uint64_t)want & mask);
      else if (op == PERF_OP_AVG && k == PERF_SRC_REDUCE)
        wrong += !(fabs(float_value(t, bits) - want) <= tol);
      else
        wrong += float_value(t, bits) != want;
    }
  }
  return wrong;
}
