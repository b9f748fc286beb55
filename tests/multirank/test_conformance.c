/*
 * test_conformance.c — the multi-rank conformance sweep: every collective
 * and both point-to-point patterns against a serial reference, through the
 * public API only.
 *
 * Sweeps nranks {1,2,3,4,5,8} x counts {0, 1, 1031, large} x the 12
 * datatypes x every reduction (sum, prod, max, min, avg, PreMulSum with
 * scalar 2) x out-of-place/in-place (NCCL's in-place layouts) x roots
 * {0, nranks-1} (under ASan, the large count for one datatype of each
 * element size: see LARGE_DTYPES). Ranks run three ways: forked processes
 * (ncclCommInitRank) and one thread per rank (ncclCommInitAll), each over
 * every nranks, and one thread driving every rank inside
 * ncclGroupStart/End (2, 3 and 8 ranks, smaller large counts). One
 * Criterion test per (way, nranks). After each call, on every
 * rank: the output against the reference, the bytes around the output and
 * the send buffer unchanged, Reduce/Gather outputs of non-roots never
 * written; and for outputs every rank shares (AllReduce, Broadcast, Bcast,
 * AllGather) the same bits on every rank, compared by hash.
 *
 * Reductions use small integers (see input_value) for which every partial
 * result is exact in every datatype, so results compare bit for bit (-0 and
 * +0 taken as equal); only Avg on floating types is compared within a
 * tolerance, and only where 1/nranks is not a power of two (see avg_tol).
 * Data-movement collectives carry arbitrary bit patterns, compared exactly.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdarg.h>

#include "harness.h"

// ---- What is swept ----

typedef enum {
  ALLREDUCE,
  BROADCAST,
  BCAST,
  REDUCE,
  ALLGATHER,
  REDUCESCATTER,
  ALLTOALL,
  GATHER,
  SCATTER,
  P2P_RING,      // send to rank+1, receive from rank-1, in one group
  P2P_ALLPAIRS,  // every rank sends to and receives from every rank, itself included
  NCOLLS
} coll_t;

#define PLACE_OUT 1  // out-of-place is defined
#define PLACE_IN 2   // in-place is defined

typedef struct {
  const char *name;
  int has_op;      // takes a reduction
  int rooted;      // swept over roots {0, nranks-1}
  int per_peer;    // buffers hold count * nranks elements: the large count is smaller
  int replicated;  // every rank ends with the same output
  int places;      // PLACE_OUT | PLACE_IN
} coll_info_t;

static const coll_info_t colls[NCOLLS] = {
    [ALLREDUCE] = {"AllReduce", 1, 0, 0, 1, PLACE_OUT | PLACE_IN},
    [BROADCAST] = {"Broadcast", 0, 1, 0, 1, PLACE_OUT | PLACE_IN},
    [BCAST] = {"Bcast", 0, 1, 0, 1, PLACE_IN},
    [REDUCE] = {"Reduce", 1, 1, 0, 0, PLACE_OUT | PLACE_IN},
    [ALLGATHER] = {"AllGather", 0, 0, 1, 1, PLACE_OUT | PLACE_IN},
    [REDUCESCATTER] = {"ReduceScatter", 1, 0, 1, 0, PLACE_OUT | PLACE_IN},
    [ALLTOALL] = {"AlltoAll", 0, 0, 1, 0, PLACE_OUT | PLACE_IN},
    [GATHER] = {"Gather", 0, 1, 1, 0, PLACE_OUT | PLACE_IN},
    [SCATTER] = {"Scatter", 0, 1, 1, 0, PLACE_OUT | PLACE_IN},
    [P2P_RING] = {"Send/Recv ring", 0, 0, 0, 0, PLACE_OUT},
    [P2P_ALLPAIRS] = {"Send/Recv all-pairs", 0, 0, 1, 0, PLACE_OUT},
};

typedef enum { OP_SUM, OP_PROD, OP_MAX, OP_MIN, OP_AVG, OP_PREMUL, NOPS, OP_NONE = -1 } op_t;
static const char *const op_names[NOPS] = {"sum", "prod", "max", "min", "avg", "premulsum(x2)"};
static const ncclRedOp_t builtin_ops[OP_PREMUL] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};

#define ODD_COUNT 1031

typedef struct {
  size_t large;      // the large count where a buffer holds `count` elements
  size_t large_all;  // the large count where buffers hold count * nranks elements
  unsigned dtypes;   // bit d: sweep datatype d
  unsigned colls;    // bit c: sweep collective c
  char mode[48];     // how ranks run (and the algorithm when one is forced), for messages
} sweep_cfg_t;

#define ALL_DTYPES ((1u << ncclNumTypes) - 1)

// Under AddressSanitizer (make test-asan) the large count runs for one
// datatype of each element size. Every choice the library makes by a call's
// size in bytes (algorithm, protocol, pipelining, non-temporal stores) still
// meets the same sizes, and each datatype's own code runs at 1 and 1031
// elements; the sweep takes half the time where every access is checked.
#if defined(__SANITIZE_ADDRESS__)
#define LARGE_DTYPES ((1u << ncclInt8) | (1u << ncclFloat16) | (1u << ncclFloat32) | (1u << ncclFloat64))
#else
#define LARGE_DTYPES ALL_DTYPES
#endif

// ---- One case, and one rank's buffers for it ----

#define SWEEP_MAX_RANKS 8  // the reference tables below hold this many ranks

// Inputs of reductions repeat with this period, so the serial reference is
// a table of PERIOD entries per case. A prime: no pipeline slot, chunk or
// rank split of the buffers is a multiple of it, so any misplaced piece
// still shows.
#define PERIOD 4099

// One case's reduction inputs and reference, for indices 0..span-1 (span =
// min(PERIOD, elements in a send buffer)).
typedef struct {
  size_t span;
  uint64_t in_bits[SWEEP_MAX_RANKS][PERIOD];  // element j of rank s is in_bits[s][j % PERIOD]
  uint64_t ref_bits[PERIOD];                  // the result's bits, when tol == 0
  double ref_val[PERIOD];                     // the exact result, compared within tol when tol > 0
  double tol;
} red_tab_t;

typedef struct {
  coll_t coll;
  const weft_test_dtype_t *t;
  int op;  // op_t, OP_NONE for data movement
  size_t count;
  int inplace;
  int root;
  int nranks;
  uint64_t salt;         // varies the inputs from case to case
  const red_tab_t *tab;  // reductions only
} case_t;

#define GUARD 64        // bytes checked on each side of a region
#define SEND_FILL 0xA5  // send arena guards
#define RECV_FILL 0xC3  // recv arena guards, and recv bytes the call must not write

typedef struct {
  int rank;
  ncclComm_t comm;
  ncclRedOp_t op;
  int premul_made;
  unsigned char *sarena, *rarena;  // GUARD + the largest region + GUARD each
  // Layout for the current case (counts in elements):
  unsigned char *sreg;  // out-of-place send region in sarena (NULL: none); must stay unchanged
  size_t sn;
  unsigned char *rreg;  // region in rarena: output, in-place input, or bytes never to be written
  size_t rn;
  size_t in_off, in_n;    // in-place: this rank's input inside rreg
  size_t out_off, out_n;  // the elements of rreg the call defines
  const void *sendbuf;
  void *recvbuf;
} local_t;

#define MAX_HASHES 128  // replicated-output cases of one (collective, datatype)

typedef struct {
  const sweep_cfg_t *cfg;
  const char *mode;
  int nranks, nlocal;
  local_t loc[WEFT_TEST_MAX_RANKS];
  int failures;
  int fatal;  // a call failed: ranks may now disagree on what comes next, so stop
  int nhash;
  uint64_t hashes[WEFT_TEST_MAX_RANKS][MAX_HASHES];
  char labels[MAX_HASHES][112];
  uint64_t all_hashes[WEFT_TEST_MAX_RANKS * MAX_HASHES];
  red_tab_t tab;
} driver_t;

// ---- Inputs and the serial reference ----

// Element j (< PERIOD) of rank s's input to a reduction: pseudo-random,
// from sets small enough that every partial result is an integer (or, for
// Avg, a multiple of 1/nranks) that every type holds exactly:
//   sum, avg, premulsum: {-1,0,1} (unsigned: {0,1,2}); |any partial| <= 8,
//     or <= 16 after the x2 of PreMulSum, and e5m2 holds every integer up to
//     16 (unsigned PreMulSum partials <= 32 fit every integer type);
//   prod: {-1,1} (unsigned: {1,2}, so uint8 products may wrap: 2^8 = 0);
//   max, min: -4..4 (unsigned 0..8): e5m2's 2 mantissa bits hold every
//     integer up to 8 but not 9, 11, 13, 15.
static int64_t input_value(const case_t *cs, int s, size_t j) {
  int sgn = cs->t->is_float || cs->t->is_signed;
  uint64_t x = weft_test_mix64(cs->salt ^ ((uint64_t)s << 40) ^ j) >> 32;
  switch (cs->op) {
    case OP_PROD: return sgn ? (x % 2 ? -1 : 1) : 1 + (int64_t)(x % 2);
    case OP_MAX:
    case OP_MIN: return (int64_t)(x % 9) - (sgn ? 4 : 0);
    default: return (int64_t)(x % 3) - (sgn ? 1 : 0);
  }
}

// Bits of element j of rank s's send buffer: arbitrary for data movement.
static uint64_t input_bits(const case_t *cs, int s, size_t j) {
  if (cs->op == OP_NONE) return weft_test_mix64(cs->salt ^ ((uint64_t)s << 40) ^ j);
  return cs->tab->in_bits[s][j % PERIOD];
}

static uint64_t elem_mask(size_t size) { return size == 8 ? ~(uint64_t)0 : ((uint64_t)1 << (8 * size)) - 1; }

static int is_pow2(int n) { return (n & (n - 1)) == 0; }

// Tolerance of floating Avg when nranks is not a power of two (it is 0 when
// it is: then x/nranks and all partial sums are exact). weft multiplies
// each rank's operand by 1/nranks and adds it to the partial sum: one
// rounding to the type per rank for fp16/bf16/fp8 (computed in float, whose
// own errors add at most ~4 * 2^-24 per rank), two native roundings plus
// the scalar's own rounding for float32/float64. Partial sums stay below 2
// in magnitude, where half an ulp is 2^-(mbits+1). So:
//   fp16/bf16/fp8:   nranks * (2^-(mbits+1) + 2^-21)
//                    (fp16 ~ 2.4e-3 at 5 ranks, bf16 ~ 2e-2, e4m3 0.31, e5m2 0.63);
//   float32/float64: 3 * nranks * 2^-(mbits+1).
static double avg_tol(const weft_test_dtype_t *t, int n) {
  double half_ulp = ldexp(1.0, -(t->mbits + 1));
  if (t->size <= 2) return n * (half_ulp + ldexp(1.0, -21));
  return 3.0 * n * half_ulp;
}

#define ENC_MAX 64  // beyond every input and partial result of the reductions

// Fills the case's input and reference tables, computed serially.
static void build_tables(const case_t *cs, red_tab_t *tab) {
  const weft_test_dtype_t *t = cs->t;
  int n = cs->nranks;
  uint64_t enc[2 * ENC_MAX + 1];  // bits of the small integers, computed once
  for (int v = -ENC_MAX; v <= ENC_MAX; v++) enc[v + ENC_MAX] = weft_test_encode_int(t, v);
  size_t len = cs->count * (cs->coll == REDUCESCATTER ? (size_t)n : 1);
  tab->span = len < PERIOD ? len : PERIOD;
  tab->tol = cs->op == OP_AVG && t->is_float && !is_pow2(n) ? avg_tol(t, n) : 0;
  for (size_t j = 0; j < tab->span; j++) {
    int64_t acc = cs->op == OP_MAX ? INT64_MIN : cs->op == OP_MIN ? INT64_MAX : 0;
    uint64_t prod = 1;
    for (int s = 0; s < n; s++) {
      int64_t v = input_value(cs, s, j);
      tab->in_bits[s][j] = enc[v + ENC_MAX];
      switch (cs->op) {
        case OP_PROD: prod *= (uint64_t)v; break;  // wraps like the integer types
        case OP_MAX: acc = v > acc ? v : acc; break;
        case OP_MIN: acc = v < acc ? v : acc; break;
        case OP_PREMUL: acc += 2 * v; break;
        default: acc += v; break;
      }
    }
    if (cs->op == OP_PROD) acc = (int64_t)prod;
    if (cs->op == OP_AVG && t->is_float) {  // exact when nranks is a power of two
      tab->ref_val[j] = (double)acc / n;
      tab->ref_bits[j] = weft_test_float_bits(t, tab->ref_val[j]);
      continue;
    }
    if (cs->op == OP_AVG) acc /= n;  // integer Avg: the sum / nranks, truncated toward zero
    tab->ref_bits[j] = acc >= -ENC_MAX && acc <= ENC_MAX ? enc[acc + ENC_MAX] : weft_test_encode_int(t, acc);
  }
}

// Element k of the output region of rank r: which rank's input, at which
// index, it is a copy of (data movement).
static void copy_source(const case_t *cs, int r, size_t k, int *src, size_t *j) {
  size_t c = cs->count;
  int n = cs->nranks;
  switch (cs->coll) {
    case ALLGATHER:
    case GATHER: *src = (int)(k / c), *j = k % c; break;
    case ALLTOALL:
    case P2P_ALLPAIRS: *src = (int)(k / c), *j = (size_t)r * c + k % c; break;
    case SCATTER: *src = cs->root, *j = (size_t)r * c + k; break;
    case P2P_RING: *src = (r + n - 1) % n, *j = k; break;
    default: *src = cs->root, *j = k; break;  // Broadcast, Bcast
  }
}

// ---- Reporting ----

typedef struct {
  driver_t *d;
  const case_t *cs;
  int rank;
  int bad;  // mismatches found in this case on this rank
} report_t;

#define MAX_LINES 4  // printed per case and rank; the rest are counted

static void case_label(const case_t *cs, char *buf, size_t len) {
  const coll_info_t *ci = &colls[cs->coll];
  int at = snprintf(buf, len, "%s %s%s%s count=%zu %s", ci->name, cs->t->name, ci->has_op ? " op=" : "",
                    ci->has_op ? op_names[cs->op] : "", cs->count, cs->inplace ? "in-place" : "out-of-place");
  if (ci->rooted && at > 0 && (size_t)at < len) snprintf(buf + at, len - (size_t)at, " root=%d", cs->root);
}

static void report(report_t *rp, const char *fmt, ...) {
  if (rp->bad++ >= MAX_LINES) return;
  char label[112], msg[256];
  case_label(rp->cs, label, sizeof(label));
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  fprintf(stderr, "FAIL [%s] nranks=%d rank=%d %s: %s\n", rp->d->mode, rp->d->nranks, rp->rank, label, msg);
}

static void report_done(report_t *rp) {
  if (rp->bad == 0) return;
  if (rp->bad > MAX_LINES) {
    char label[112];
    case_label(rp->cs, label, sizeof(label));
    fprintf(stderr, "FAIL [%s] nranks=%d rank=%d %s: %d mismatches in all\n", rp->d->mode, rp->d->nranks,
            rp->rank, label, rp->bad);
  }
  rp->d->failures++;
}

// ---- Buffers ----

// Lays out one rank's buffers for the case (NCCL's in-place layouts) and
// fills them: inputs, guards, and RECV_FILL wherever the call may not write.
static void prepare(const case_t *cs, local_t *l) {
  size_t c = cs->count, all = c * (size_t)cs->nranks, es = cs->t->size;
  int r = l->rank, root = r == cs->root;
  size_t sn = c, rn = c, out_off = 0, out_n = c;
  switch (cs->coll) {
    case REDUCE: out_n = root ? c : 0; break;
    case ALLGATHER: rn = out_n = all; break;
    case REDUCESCATTER: sn = all; break;
    case ALLTOALL:
    case P2P_ALLPAIRS: sn = rn = out_n = all; break;
    case GATHER: rn = all, out_n = root ? all : 0; break;
    case SCATTER: sn = all; break;
    default: break;
  }
  l->sreg = NULL;
  l->sn = 0;
  l->in_off = l->in_n = 0;
  l->rreg = l->rarena + GUARD;
  if (!cs->inplace) {
    l->sreg = l->sarena + GUARD;
    l->sn = sn;
    l->sendbuf = l->sreg;
    l->recvbuf = l->rreg;
  } else {
    l->in_n = sn;
    switch (cs->coll) {
      case BROADCAST:
      case BCAST: l->in_n = root ? c : 0; break;
      case ALLGATHER: l->in_off = (size_t)r * c; break;
      case REDUCESCATTER: rn = all, out_off = (size_t)r * c; break;
      case GATHER:
        if (root) {
          l->in_off = (size_t)cs->root * c;
        } else {  // only the root has an in-place layout; recvbuff is unused elsewhere
          l->sreg = l->sarena + GUARD, l->sn = c;
          l->in_n = rn = 0;
        }
        break;
      case SCATTER:
        if (root) {
          rn = all, out_off = (size_t)cs->root * c;
        } else {  // sendbuff is unused off the root
          l->in_n = 0;
        }
        break;
      default: break;
    }
    unsigned char *in = l->rreg + l->in_off * es;
    l->sendbuf = l->sreg ? (const void *)l->sreg : in;
    l->recvbuf = l->rreg + out_off * es;
    if (cs->coll == GATHER && !root) l->recvbuf = NULL;
    if (cs->coll == SCATTER && !root) l->sendbuf = NULL;
  }
  l->rn = rn;
  l->out_off = out_off;
  l->out_n = out_n;

  memset(l->rarena, RECV_FILL, 2 * GUARD + rn * es);
  for (size_t j = 0; j < l->in_n; j++) weft_test_store(l->rreg + (l->in_off + j) * es, es, input_bits(cs, r, j));
  if (l->sreg) {
    memset(l->sarena, SEND_FILL, GUARD);
    for (size_t j = 0; j < l->sn; j++) weft_test_store(l->sreg + j * es, es, input_bits(cs, r, j));
    memset(l->sreg + l->sn * es, SEND_FILL, GUARD);
  }
}

static int all_bytes(const unsigned char *p, size_t n, unsigned char v, size_t *where) {
  for (size_t i = 0; i < n; i++) {
    if (p[i] != v) {
      *where = i;
      return 0;
    }
  }
  return 1;
}

static void check_guards(report_t *rp, const local_t *l, size_t es) {
  size_t at;
  if (!all_bytes(l->rarena, GUARD, RECV_FILL, &at))
    report(rp, "byte %zu before the receive region was written (0x%02x)", GUARD - at, l->rarena[at]);
  if (!all_bytes(l->rreg + l->rn * es, GUARD, RECV_FILL, &at))
    report(rp, "byte %zu after the receive region was written (0x%02x)", at, l->rreg[l->rn * es + at]);
  if (l->sreg == NULL) return;
  if (!all_bytes(l->sarena, GUARD, SEND_FILL, &at))
    report(rp, "byte %zu before sendbuff was written (0x%02x)", GUARD - at, l->sarena[at]);
  if (!all_bytes(l->sreg + l->sn * es, GUARD, SEND_FILL, &at))
    report(rp, "byte %zu after sendbuff was written (0x%02x)", at, l->sreg[l->sn * es + at]);
}

static void check_output_elem(report_t *rp, const case_t *cs, const local_t *l, size_t k, uint64_t got) {
  const weft_test_dtype_t *t = cs->t;
  size_t idx = k;  // recvbuff starts at the output
  if (cs->op == OP_NONE) {
    int src;
    size_t j;
    copy_source(cs, l->rank, k, &src, &j);
    uint64_t want = input_bits(cs, src, j) & elem_mask(t->size);
    if (got != want)
      report(rp, "recvbuff[%zu]: got 0x%0*llx, expected 0x%0*llx (rank %d's element %zu)", idx, (int)(2 * t->size),
             (unsigned long long)got, (int)(2 * t->size), (unsigned long long)want, src, j);
    return;
  }
  size_t j = (cs->coll == REDUCESCATTER ? (size_t)l->rank * cs->count + k : k) % PERIOD;
  uint64_t want = cs->tab->ref_bits[j];
  if (cs->tab->tol > 0) {
    double g = weft_test_value(t, got), val = cs->tab->ref_val[j], tol = cs->tab->tol;
    if (!(fabs(g - val) <= tol))
      report(rp, "recvbuff[%zu]: got %.9g (0x%0*llx), expected %.9g within %.3g", idx, g, (int)(2 * t->size),
             (unsigned long long)got, val, tol);
    return;
  }
  if (weft_test_canon(t, got) != weft_test_canon(t, want))
    report(rp, "recvbuff[%zu]: got %.9g (0x%0*llx), expected %.9g (0x%0*llx)", idx, weft_test_value(t, got),
           (int)(2 * t->size), (unsigned long long)got, weft_test_value(t, want), (int)(2 * t->size),
           (unsigned long long)want);
}

// Checks one rank after the call; records the output's hash for the
// cross-rank comparison.
static void check_rank(driver_t *d, const case_t *cs, local_t *l, int li) {
  report_t rp = {d, cs, l->rank, 0};
  size_t es = cs->t->size;
  uint64_t mask = elem_mask(es);
  check_guards(&rp, l, es);
  for (size_t j = 0; l->sreg && j < l->sn; j++) {
    uint64_t got = weft_test_load(l->sreg + j * es, es), want = input_bits(cs, l->rank, j) & mask;
    if (got != want)
      report(&rp, "sendbuff[%zu] changed: 0x%0*llx, was 0x%0*llx", j, (int)(2 * es), (unsigned long long)got,
             (int)(2 * es), (unsigned long long)want);
  }
  uint64_t fill = mask & (0x0101010101010101ull * RECV_FILL);
  for (size_t k = 0; k < l->rn; k++) {
    uint64_t got = weft_test_load(l->rreg + k * es, es);
    if (k >= l->out_off && k < l->out_off + l->out_n) {
      check_output_elem(&rp, cs, l, k - l->out_off, got);
    } else if (k >= l->in_off && k < l->in_off + l->in_n) {
      uint64_t want = input_bits(cs, l->rank, k - l->in_off) & mask;
      if (got != want)
        report(&rp, "element %zu of the in-place buffer (input, not output) changed: 0x%0*llx, was 0x%0*llx", k,
               (int)(2 * es), (unsigned long long)got, (int)(2 * es), (unsigned long long)want);
    } else if (got != fill) {
      report(&rp, "element %zu of %s was written: 0x%0*llx", k,
             l->out_n ? "the receive region outside the output" : "an output this rank does not get", (int)(2 * es),
             (unsigned long long)got);
    }
  }
  if (colls[cs->coll].replicated && d->nhash < MAX_HASHES) {
    d->hashes[li][d->nhash] = weft_test_hash(l->rreg + l->out_off * es, l->out_n * es);
    if (li == 0) case_label(cs, d->labels[d->nhash], sizeof(d->labels[0]));
  }
  report_done(&rp);
}

// ---- Running one case ----

static ncclResult_t issue(const case_t *cs, const local_t *l) {
  size_t c = cs->count, es = cs->t->size;
  ncclDataType_t dt = cs->t->dt;
  ncclComm_t comm = l->comm;
  int n = cs->nranks, r = l->rank;
  switch (cs->coll) {
    case ALLREDUCE: return ncclAllReduce(l->sendbuf, l->recvbuf, c, dt, l->op, comm, NULL);
    case BROADCAST: return ncclBroadcast(l->sendbuf, l->recvbuf, c, dt, cs->root, comm, NULL);
    case BCAST: return ncclBcast(l->recvbuf, c, dt, cs->root, comm, NULL);
    case REDUCE: return ncclReduce(l->sendbuf, l->recvbuf, c, dt, l->op, cs->root, comm, NULL);
    case ALLGATHER: return ncclAllGather(l->sendbuf, l->recvbuf, c, dt, comm, NULL);
    case REDUCESCATTER: return ncclReduceScatter(l->sendbuf, l->recvbuf, c, dt, l->op, comm, NULL);
    case ALLTOALL: return ncclAlltoAll(l->sendbuf, l->recvbuf, c, dt, comm, NULL);
    case GATHER: return ncclGather(l->sendbuf, l->recvbuf, c, dt, cs->root, comm, NULL);
    case SCATTER: return ncclScatter(l->sendbuf, l->recvbuf, c, dt, cs->root, comm, NULL);
    case P2P_RING: {
      ncclResult_t res = ncclSend(l->sendbuf, c, dt, (r + 1) % n, comm, NULL);
      return res != ncclSuccess ? res : ncclRecv(l->recvbuf, c, dt, (r + n - 1) % n, comm, NULL);
    }
    case P2P_ALLPAIRS:
      for (int p = 0; p < n; p++) {
        ncclResult_t res = ncclSend((const char *)l->sendbuf + (size_t)p * c * es, c, dt, p, comm, NULL);
        if (res == ncclSuccess) res = ncclRecv((char *)l->recvbuf + (size_t)p * c * es, c, dt, p, comm, NULL);
        if (res != ncclSuccess) return res;
      }
      return ncclSuccess;
    default: return ncclInvalidArgument;
  }
}

static void call_failed(driver_t *d, const case_t *cs, int rank, ncclComm_t comm, const char *what,
                        ncclResult_t res) {
  char label[112];
  case_label(cs, label, sizeof(label));
  fprintf(stderr, "FAIL [%s] nranks=%d rank=%d %s: %s returned %s: %s\n", d->mode, d->nranks, rank, label, what,
          ncclGetErrorString(res), ncclGetLastError(comm));
  d->failures++;
  d->fatal = 1;
}

static void run_case(driver_t *d, const case_t *cs) {
  for (int li = 0; li < d->nlocal; li++) prepare(cs, &d->loc[li]);
  // PreMulSum with scalar 2 in the datatype: host-immediate on out-of-place
  // calls, "device" residence (host memory here) on in-place ones.
  for (int li = 0; li < d->nlocal; li++) {
    local_t *l = &d->loc[li];
    l->premul_made = 0;
    if (cs->op == OP_PREMUL) {
      unsigned char scalar[8];
      weft_test_store(scalar, cs->t->size, weft_test_encode_int(cs->t, 2));
      ncclScalarResidence_t res_kind = cs->inplace ? ncclScalarDevice : ncclScalarHostImmediate;
      ncclResult_t res = ncclRedOpCreatePreMulSum(&l->op, scalar, cs->t->dt, res_kind, l->comm);
      if (res != ncclSuccess) {
        call_failed(d, cs, l->rank, l->comm, "ncclRedOpCreatePreMulSum", res);
        return;
      }
      l->premul_made = 1;
    } else {
      l->op = cs->op >= 0 ? builtin_ops[cs->op] : ncclSum;
    }
  }
  int grouped = d->nlocal > 1 || cs->coll == P2P_RING || cs->coll == P2P_ALLPAIRS;
  ncclResult_t res = grouped ? ncclGroupStart() : ncclSuccess;
  if (res != ncclSuccess) call_failed(d, cs, d->loc[0].rank, NULL, "ncclGroupStart", res);
  for (int li = 0; li < d->nlocal && res == ncclSuccess; li++) {
    res = issue(cs, &d->loc[li]);
    if (res != ncclSuccess) call_failed(d, cs, d->loc[li].rank, d->loc[li].comm, colls[cs->coll].name, res);
  }
  if (grouped) {
    ncclResult_t end = ncclGroupEnd();
    if (end != ncclSuccess) call_failed(d, cs, d->loc[0].rank, d->loc[0].comm, "ncclGroupEnd", end);
  }
  for (int li = 0; li < d->nlocal; li++) {
    local_t *l = &d->loc[li];
    if (!l->premul_made) continue;
    ncclResult_t r = ncclRedOpDestroy(l->op, l->comm);
    if (r != ncclSuccess) call_failed(d, cs, l->rank, l->comm, "ncclRedOpDestroy", r);
  }
  if (d->fatal) return;
  for (int li = 0; li < d->nlocal; li++) check_rank(d, cs, &d->loc[li], li);
  if (colls[cs->coll].replicated && d->nhash < MAX_HASHES) d->nhash++;
}

// Every rank must hold the same bits for each replicated output since the
// last call: local ranks compare directly, a lone rank exchanges its hashes
// with ncclAllGather (itself checked by the sweep).
static void compare_hashes(driver_t *d) {
  int n = d->nranks, nh = d->nhash;
  d->nhash = 0;
  if (nh == 0 || n == 1 || d->fatal) return;
  uint64_t *all = d->all_hashes;
  if (d->nlocal == n) {
    for (int li = 0; li < n; li++) memcpy(all + (size_t)li * nh, d->hashes[li], sizeof(uint64_t) * (size_t)nh);
  } else {
    ncclResult_t res = ncclAllGather(d->hashes[0], all, (size_t)nh, ncclUint64, d->loc[0].comm, NULL);
    if (res != ncclSuccess) {
      fprintf(stderr, "FAIL [%s] nranks=%d rank=%d: hash exchange (ncclAllGather) returned %s\n", d->mode, n,
              d->loc[0].rank, ncclGetErrorString(res));
      d->failures++;
      d->fatal = 1;
      return;
    }
  }
  for (int k = 0; k < nh; k++) {
    for (int p = 1; p < n; p++) {
      if (all[(size_t)p * nh + k] == all[k]) continue;
      if (d->loc[0].rank == 0)
        fprintf(stderr, "FAIL [%s] nranks=%d %s: output differs between rank 0 and rank %d (hash %016llx vs %016llx)\n",
                d->mode, n, d->labels[k], p, (unsigned long long)all[k], (unsigned long long)all[(size_t)p * nh + k]);
      d->failures++;
      break;
    }
  }
}

// ---- The sweep ----

static size_t sweep_counts(const sweep_cfg_t *cfg, coll_t coll, int dt, size_t out[4]) {
  out[0] = 0;
  out[1] = 1;
  out[2] = ODD_COUNT;
  out[3] = colls[coll].per_peer ? cfg->large_all : cfg->large;
  return LARGE_DTYPES & (1u << dt) ? 4 : 3;
}

static uint64_t case_salt(const case_t *cs) {
  uint64_t key = ((((uint64_t)cs->coll * 16 + (uint64_t)cs->t->dt) * 8 + (uint64_t)(cs->op + 1)) * 2 +
                  (uint64_t)cs->inplace) * 64 + (uint64_t)cs->root;
  return weft_test_mix64(key * 0x100000 + cs->count);
}

// Runs the whole sweep on nlocal ranks of an nranks communicator (1: this
// thread is one rank; nranks: this thread drives them all inside groups).
// Returns the number of failed cases.
static int run_sweep(const sweep_cfg_t *cfg, int nranks, int nlocal, const ncclComm_t *comms, const int *ranks) {
  const char *mode = cfg->mode;
  if (nranks < 1 || nranks > SWEEP_MAX_RANKS || nlocal < 1 || nlocal > nranks) {
    fprintf(stderr, "FAIL [%s]: the sweep runs 1..%d ranks, not %d (%d here)\n", mode, SWEEP_MAX_RANKS, nranks, nlocal);
    return 1;
  }
  driver_t *d = calloc(1, sizeof(*d));
  if (d == NULL) return 1;
  d->cfg = cfg;
  d->mode = mode;
  d->nranks = nranks;
  d->nlocal = nlocal;
  size_t most = cfg->large > cfg->large_all * (size_t)nranks ? cfg->large : cfg->large_all * (size_t)nranks;
  if (ODD_COUNT * (size_t)nranks > most) most = ODD_COUNT * (size_t)nranks;
  size_t arena = (2 * GUARD + most * 8 + 63) / 64 * 64;  // aligned_alloc wants a multiple of 64
  for (int li = 0; li < nlocal; li++) {
    d->loc[li].rank = ranks[li];
    d->loc[li].comm = comms[li];
    d->loc[li].sarena = aligned_alloc(64, arena);
    d->loc[li].rarena = aligned_alloc(64, arena);
    if (d->loc[li].sarena == NULL || d->loc[li].rarena == NULL) {
      fprintf(stderr, "FAIL [%s]: out of memory for %zu-byte buffers\n", mode, arena);
      d->failures++;
      d->fatal = 1;
    }
  }
  for (int coll = 0; coll < NCOLLS && !d->fatal; coll++) {
    if (!(cfg->colls & (1u << coll))) continue;
    const coll_info_t *ci = &colls[coll];
    for (int dt = 0; dt < ncclNumTypes && !d->fatal; dt++) {
      if (!(cfg->dtypes & (1u << dt))) continue;
      size_t counts[4];
      size_t ncounts = sweep_counts(cfg, (coll_t)coll, dt, counts);
      int nroots = ci->rooted && nranks > 1 ? 2 : 1;
      for (int op = ci->has_op ? 0 : OP_NONE; op < (ci->has_op ? NOPS : 0) && !d->fatal; op++) {
        for (size_t k = 0; k < ncounts && !d->fatal; k++) {
          for (int place = 0; place < 2 && !d->fatal; place++) {
            if (!(ci->places & (place ? PLACE_IN : PLACE_OUT))) continue;
            for (int ri = 0; ri < nroots && !d->fatal; ri++) {
              case_t cs = {.coll = (coll_t)coll, .t = weft_test_dtype((ncclDataType_t)dt), .op = op,
                           .count = counts[k], .inplace = place, .root = ri ? nranks - 1 : 0, .nranks = nranks};
              cs.salt = case_salt(&cs);
              if (op != OP_NONE) {
                build_tables(&cs, &d->tab);
                cs.tab = &d->tab;
              }
              run_case(d, &cs);
            }
          }
        }
      }
      if (ci->replicated) compare_hashes(d);
    }
  }
  int fails = d->failures;
  for (int li = 0; li < nlocal; li++) {
    free(d->loc[li].sarena);
    free(d->loc[li].rarena);
  }
  free(d);
  return fails;
}

// ---- The three ways of running ranks ----

static int fork_rank(int rank, int nranks, ncclUniqueId id, void *arg) {
  const sweep_cfg_t *cfg = arg;
  ncclComm_t comm;
  ncclResult_t res = ncclCommInitRank(&comm, nranks, id, rank);
  if (res != ncclSuccess) {
    fprintf(stderr, "FAIL [%s] nranks=%d rank=%d: ncclCommInitRank returned %s: %s\n", cfg->mode, nranks, rank,
            ncclGetErrorString(res), ncclGetLastError(NULL));
    return 1;
  }
  int fails = run_sweep(cfg, nranks, 1, &comm, &rank);
  res = ncclCommDestroy(comm);
  if (res != ncclSuccess) {
    fprintf(stderr, "FAIL [%s] nranks=%d rank=%d: ncclCommDestroy returned %s\n", cfg->mode, nranks, rank,
            ncclGetErrorString(res));
    fails++;
  }
  return fails;
}

static int thread_rank(int rank, int nranks, ncclComm_t comm, void *arg) {
  return run_sweep(arg, nranks, 1, &comm, &rank);
}

// The algorithms every sweep runs under, as NCCL_ALGO values; "" leaves the
// choice to the tuner (one hop for small AllReduce counts, the ring above).
// A forced algorithm sweeps only the collectives it changes, except for the
// plain lists users set for NCCL, which must leave every collective working. Each entry is
// its own Criterion test (a process of its own), because the library reads
// NCCL_ALGO once per process. The multi-host AllReduce algorithms run here
// on one host (the tree over ranks, recursive doubling and halving with
// their folds; hier is the ring there) over a few datatypes, enough to
// cover every reduction path and keep the sweep's time in bounds.
typedef struct {
  char algo[32];
  unsigned colls;
  unsigned dtypes;  // 0: every datatype
} algo_param_t;

#define ALL_COLLS ((1u << NCOLLS) - 1)
#define SOME_DTYPES                                                                                    \
  ((1u << ncclInt8) | (1u << ncclUint64) | (1u << ncclFloat16) | (1u << ncclBfloat16) | (1u << ncclFloat32) | \
   (1u << ncclFloat64))
#define FEW_DTYPES ((1u << ncclInt8) | (1u << ncclFloat16) | (1u << ncclFloat32))

static algo_param_t algo_params[] = {
    {"", ALL_COLLS, 0},
    {"allreduce:ring", 1u << ALLREDUCE, 0},
    {"allreduce:oneshot", 1u << ALLREDUCE, 0},
    {"read", (1u << ALLREDUCE) | (1u << REDUCESCATTER) | (1u << ALLGATHER) | (1u << BROADCAST) |
                 (1u << BCAST) | (1u << REDUCE) | (1u << ALLTOALL), 0},
    {"allreduce:tree", 1u << ALLREDUCE, SOME_DTYPES},
    {"allreduce:recursive", 1u << ALLREDUCE, SOME_DTYPES},
    {"allreduce:rabenseifner", 1u << ALLREDUCE, SOME_DTYPES},
    {"allreduce:hier", 1u << ALLREDUCE, SOME_DTYPES},
    // As users set them for NCCL: applied where they can run, weft's choice elsewhere.
    {"ring", ALL_COLLS, FEW_DTYPES},
    {"Tree", ALL_COLLS, FEW_DTYPES},
};

// Per-test limits: the forked ranks get FORK_DEADLINE seconds, and every
// test's Criterion timeout leaves room above that.
#define FORK_DEADLINE 150
#define TEST_TIMEOUT 170

// Sets the environment (before any communicator exists) and the sweep for
// one test. The large counts: 262147 where a buffer holds count elements,
// 65537 where buffers hold count * nranks (4 MiB of float64 per buffer at
// 8 ranks). When one thread does the work of every rank they shrink to
// 65537 and 16411, which still span many pipeline slots.
static sweep_cfg_t setup(const char *mode, const algo_param_t *p) {
  weft_test_env_defaults();
  if (p->algo[0]) setenv("NCCL_ALGO", p->algo, 1);
  sweep_cfg_t cfg = {.large = 262147, .large_all = 65537, .dtypes = p->dtypes ? p->dtypes : ALL_DTYPES,
                     .colls = p->colls};
  if (strcmp(mode, "group") == 0) cfg.large = 65537, cfg.large_all = 16411;
  snprintf(cfg.mode, sizeof(cfg.mode), "%s%s%s", mode, p->algo[0] ? " NCCL_ALGO=" : "", p->algo);
  return cfg;
}

static void run_fork(int n, const algo_param_t *p) {
  sweep_cfg_t cfg = setup("fork", p);
  int bad = weft_test_fork_ranks(n, fork_rank, &cfg, FORK_DEADLINE);
  cr_assert_geq(bad, 0, "[%s] could not start %d ranks", cfg.mode, n);
  cr_assert_eq(bad, 0, "[%s] %d of %d ranks failed (see the lines above)", cfg.mode, bad, n);
}

static void init_all(int n, ncclComm_t *comms) {
  ncclResult_t res = ncclCommInitAll(comms, n, NULL);
  cr_assert_eq(res, ncclSuccess, "ncclCommInitAll(%d) returned %s: %s", n, ncclGetErrorString(res),
               ncclGetLastError(NULL));
  for (int i = 0; i < n; i++) {
    int rank = -1, count = -1;
    cr_assert_eq(ncclCommUserRank(comms[i], &rank), ncclSuccess);
    cr_assert_eq(ncclCommCount(comms[i], &count), ncclSuccess);
    cr_assert(rank == i && count == n, "ncclCommInitAll: comms[%d] is rank %d of %d, expected %d of %d", i, rank,
              count, i, n);
  }
}

static void destroy_all(int n, ncclComm_t *comms) {
  for (int i = 0; i < n; i++) {
    ncclResult_t res = ncclCommDestroy(comms[i]);
    cr_expect_eq(res, ncclSuccess, "ncclCommDestroy(rank %d) returned %s", i, ncclGetErrorString(res));
  }
}

static void run_threads(int n, const algo_param_t *p) {
  sweep_cfg_t cfg = setup("threads", p);
  ncclComm_t comms[WEFT_TEST_MAX_RANKS];
  init_all(n, comms);
  int fails = weft_test_thread_ranks(n, comms, thread_rank, &cfg);
  destroy_all(n, comms);
  cr_assert_eq(fails, 0, "[%s] %d failed case(s) over %d ranks (see the lines above)", cfg.mode, fails, n);
}

// One thread drives every rank: each call is issued on all communicators
// between ncclGroupStart and ncclGroupEnd.
static void run_group(int n, const algo_param_t *p) {
  sweep_cfg_t cfg = setup("group", p);
  ncclComm_t comms[WEFT_TEST_MAX_RANKS];
  int ranks[WEFT_TEST_MAX_RANKS];
  init_all(n, comms);
  for (int i = 0; i < n; i++) ranks[i] = i;
  int fails = run_sweep(&cfg, n, n, comms, ranks);
  destroy_all(n, comms);
  cr_assert_eq(fails, 0, "[%s] %d failed case(s) over %d ranks (see the lines above)", cfg.mode, fails, n);
}

// One Criterion test per (way, nranks), parameterised by algorithm.
#define CONFORMANCE_TEST(way, n)                                                                          \
  ParameterizedTestParameters(conformance_##way, nranks_##n) {                                           \
    return cr_make_param_array(algo_param_t, algo_params, sizeof(algo_params) / sizeof(algo_params[0])); \
  }                                                                                                       \
  ParameterizedTest(algo_param_t *p, conformance_##way, nranks_##n, .timeout = TEST_TIMEOUT) {            \
    run_##way(n, p);                                                                                      \
  }

CONFORMANCE_TEST(fork, 1)
CONFORMANCE_TEST(fork, 2)
CONFORMANCE_TEST(fork, 3)
CONFORMANCE_TEST(fork, 4)
CONFORMANCE_TEST(fork, 5)
CONFORMANCE_TEST(fork, 8)

CONFORMANCE_TEST(threads, 1)
CONFORMANCE_TEST(threads, 2)
CONFORMANCE_TEST(threads, 3)
CONFORMANCE_TEST(threads, 4)
CONFORMANCE_TEST(threads, 5)
CONFORMANCE_TEST(threads, 8)

CONFORMANCE_TEST(group, 2)
CONFORMANCE_TEST(group, 3)
CONFORMANCE_TEST(group, 8)
