/*
 * conformance_rank.c — one rank of the conformance sweep, for jobs started
 * by a launcher (weftrun, possibly one per host): it meets the other ranks
 * through weftInitFromEnv, so the same program checks one host and many.
 *
 *   conformance_rank [-c COLLS]
 *
 * COLLS is a comma list out of allreduce, broadcast, reduce, allgather,
 * reducescatter, alltoall, gather, scatter, sendrecv (default: all of them).
 * Sweeps the 12 datatypes x every reduction (sum, prod, max, min, avg,
 * PreMulSum with scalar 2) x out-of-place/in-place (NCCL's in-place
 * layouts; Send/Recv out-of-place) x counts {1, 1031, 64 KiB / element size
 * + 3} x roots {0, nranks-1}. Send/Recv is every rank to every rank, itself
 * included, in one group. NCCL_ALGO from the environment picks the
 * algorithms, as it would for any program.
 *
 * After each call this rank checks: the output against a reference computed
 * here serially; the bytes around the buffers and the send buffer unchanged;
 * in-place inputs that are not outputs unchanged; outputs a rank does not
 * get (Reduce, Gather off the root) never written. Reduction inputs are
 * small integers chosen so every partial result is exact in every datatype
 * (at most 8 ranks add a non-zero term to any one element), so integer and
 * floating results compare bit for bit (-0 equal to +0); the one tolerance
 * is floating Avg over a rank count that is not a power of two, within
 * nranks * (half an ulp + 2^-21) for 8/16-bit formats and 3 * nranks * half
 * an ulp for float32/float64. Outputs every rank holds (AllReduce,
 * Broadcast, AllGather) must also be bitwise identical on all ranks: their
 * hashes are exchanged with ncclAllGather after each (collective, datatype).
 *
 * Each mismatch prints "FAIL" with the rank and the case (collective,
 * datatype, op, count, placement, root). Exit status: 0 all good on every
 * rank; 1 some check failed (on any rank); 2 a call failed (the sweep stops:
 * the ranks may no longer agree on what comes next); 3 bad arguments or
 * environment; 20 + ncclResult_t when weftInitFromEnv fails.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"
#include "weft.h"

#include "../harness.h"

typedef enum {
  ALLREDUCE,
  BROADCAST,
  REDUCE,
  ALLGATHER,
  REDUCESCATTER,
  ALLTOALL,
  GATHER,
  SCATTER,
  SENDRECV,  // every rank to every rank, itself included
  NCOLLS
} coll_t;

typedef struct {
  const char *name, *key;
  int has_op, rooted, per_peer, replicated, inplace;
} coll_info_t;

static const coll_info_t colls[NCOLLS] = {
    [ALLREDUCE] = {"AllReduce", "allreduce", 1, 0, 0, 1, 1},
    [BROADCAST] = {"Broadcast", "broadcast", 0, 1, 0, 1, 1},
    [REDUCE] = {"Reduce", "reduce", 1, 1, 0, 0, 1},
    [ALLGATHER] = {"AllGather", "allgather", 0, 0, 1, 1, 1},
    [REDUCESCATTER] = {"ReduceScatter", "reducescatter", 1, 0, 1, 0, 1},
    [ALLTOALL] = {"AlltoAll", "alltoall", 0, 0, 1, 0, 1},
    [GATHER] = {"Gather", "gather", 0, 1, 1, 0, 1},
    [SCATTER] = {"Scatter", "scatter", 0, 1, 1, 0, 1},
    [SENDRECV] = {"Send/Recv", "sendrecv", 0, 0, 1, 0, 0},
};

typedef enum { OP_SUM, OP_PROD, OP_MAX, OP_MIN, OP_AVG, OP_PREMUL, NOPS, OP_NONE = -1 } op_t;
static const char *const op_names[NOPS] = {"sum", "prod", "max", "min", "avg", "premulsum(x2)"};
static const ncclRedOp_t builtin_ops[OP_PREMUL] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};

#define ODD_COUNT 1031
#define PERIOD 4099     // reduction inputs repeat with this (prime) period
#define MAX_TERMS 8     // ranks adding a non-zero term to one element of a sum
#define ENC_MAX 64      // beyond every input and partial result
#define GUARD 64        // bytes checked on each side of a region
#define SEND_FILL 0xA5
#define RECV_FILL 0xC3  // receive guards, and receive bytes the call must not write
#define MAX_HASHES 64   // replicated-output cases of one (collective, datatype)
#define MAX_LINES 4     // mismatches printed per case; the rest are counted

typedef struct {
  coll_t coll;
  const weft_test_dtype_t *t;
  int op;  // op_t
  size_t count;
  int inplace, root;
  uint64_t salt;
} case_t;

// Everything about this rank and the case in flight.
static struct {
  ncclComm_t comm;
  int rank, n;
  const char *algo;
  // Reduction tables for the current case: element j of rank s is in[s * PERIOD + j % PERIOD].
  uint64_t *in;
  uint64_t ref_bits[PERIOD];
  double ref_val[PERIOD], tol;
  // Buffers: GUARD + region + GUARD; the current layout in elements.
  unsigned char *sarena, *rarena, *sreg, *rreg;
  size_t sn, rn, in_off, in_n, out_off, out_n;
  const void *sendbuf;
  void *recvbuf;
  // Results.
  long failures, cases;
  int bad;  // mismatches in the current case
  int nhash;
  uint64_t hashes[MAX_HASHES], *all_hashes;
  char labels[MAX_HASHES][112];
} R;

// ---- Inputs and the serial reference ----

static uint64_t elem_mask(size_t size) { return size == 8 ? ~(uint64_t)0 : ((uint64_t)1 << (8 * size)) - 1; }

// Rank s's term for element j (< PERIOD) of a reduction: small integers
// whose partial results every type holds exactly (sum, avg, premulsum:
// {-1,0,1}, unsigned {0,1,2}, from at most MAX_TERMS ranks, so |partial| <=
// 8, or 16 after PreMulSum's x2; prod: {-1,1}, unsigned {1,2}; max, min:
// -4..4, unsigned 0..8).
static int64_t input_value(const case_t *cs, int s, size_t j) {
  int sgn = cs->t->is_float || cs->t->is_signed;
  uint64_t x = weft_test_mix64(cs->salt ^ ((uint64_t)s << 40) ^ j) >> 32;
  switch (cs->op) {
    case OP_PROD: return sgn ? (x % 2 ? -1 : 1) : 1 + (int64_t)(x % 2);
    case OP_MAX:
    case OP_MIN: return (int64_t)(x % 9) - (sgn ? 4 : 0);
    default:
      if (R.n > MAX_TERMS && (size_t)(s + (int)(j % (size_t)R.n)) % (size_t)R.n >= MAX_TERMS) return 0;
      return (int64_t)(x % 3) - (sgn ? 1 : 0);
  }
}

// Bits of element j of rank s's input: arbitrary patterns for data movement.
static uint64_t input_bits(const case_t *cs, int s, size_t j) {
  if (cs->op == OP_NONE) return weft_test_mix64(cs->salt ^ ((uint64_t)s << 40) ^ j) & elem_mask(cs->t->size);
  return R.in[(size_t)s * PERIOD + j % PERIOD];
}

static double avg_tol(const weft_test_dtype_t *t, int n) {
  double half_ulp = ldexp(1.0, -(t->mbits + 1));
  return t->size <= 2 ? n * (half_ulp + ldexp(1.0, -21)) : 3.0 * n * half_ulp;
}

static void build_tables(const case_t *cs) {
  const weft_test_dtype_t *t = cs->t;
  int n = R.n;
  uint64_t enc[2 * ENC_MAX + 1];
  for (int v = -ENC_MAX; v <= ENC_MAX; v++) enc[v + ENC_MAX] = weft_test_encode_int(t, v);
  R.tol = cs->op == OP_AVG && t->is_float && (n & (n - 1)) != 0 ? avg_tol(t, n) : 0;
  for (size_t j = 0; j < PERIOD; j++) {
    int64_t acc = cs->op == OP_MAX ? INT64_MIN : cs->op == OP_MIN ? INT64_MAX : 0;
    uint64_t prod = 1;
    for (int s = 0; s < n; s++) {
      int64_t v = input_value(cs, s, j);
      R.in[(size_t)s * PERIOD + j] = enc[v + ENC_MAX];
      switch (cs->op) {
        case OP_PROD: prod *= (uint64_t)v; break;  // wraps like the integer types
        case OP_MAX: acc = v > acc ? v : acc; break;
        case OP_MIN: acc = v < acc ? v : acc; break;
        case OP_PREMUL: acc += 2 * v; break;
        default: acc += v; break;
      }
    }
    if (cs->op == OP_PROD) acc = (int64_t)prod;
    if (cs->op == OP_AVG && t->is_float) {
      R.ref_val[j] = (double)acc / n;
      R.ref_bits[j] = weft_test_float_bits(t, R.ref_val[j]);
      continue;
    }
    if (cs->op == OP_AVG) acc /= n;  // integer Avg: truncated toward zero
    R.ref_bits[j] = acc >= -ENC_MAX && acc <= ENC_MAX ? enc[acc + ENC_MAX] : weft_test_encode_int(t, acc);
  }
}

// Which rank's input, at which index, element k of this rank's output copies.
static void copy_source(const case_t *cs, size_t k, int *src, size_t *j) {
  size_t c = cs->count;
  switch (cs->coll) {
    case ALLGATHER:
    case GATHER: *src = (int)(k / c), *j = k % c; break;
    case ALLTOALL:
    case SENDRECV: *src = (int)(k / c), *j = (size_t)R.rank * c + k % c; break;
    case SCATTER: *src = cs->root, *j = (size_t)R.rank * c + k; break;
    default: *src = cs->root, *j = k; break;  // Broadcast
  }
}

// ---- Reporting ----

static void case_label(const case_t *cs, char *buf, size_t len) {
  const coll_info_t *ci = &colls[cs->coll];
  int at = snprintf(buf, len, "%s %s%s%s count=%zu %s", ci->name, cs->t->name, ci->has_op ? " op=" : "",
                    ci->has_op ? op_names[cs->op] : "", cs->count, cs->inplace ? "in-place" : "out-of-place");
  if (ci->rooted && at > 0 && (size_t)at < len) snprintf(buf + at, len - (size_t)at, " root=%d", cs->root);
}

__attribute__((format(printf, 2, 3))) static void mismatch(const case_t *cs, const char *fmt, ...) {
  if (R.bad++ >= MAX_LINES) return;
  char label[112], msg[256];
  case_label(cs, label, sizeof(label));
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  fprintf(stderr, "FAIL rank %d of %d [NCCL_ALGO=%s] %s: %s\n", R.rank, R.n, R.algo, label, msg);
}

// A call failed: the ranks may disagree on what comes next, so stop here.
__attribute__((noreturn)) static void call_failed(const char *what, const case_t *cs, ncclResult_t res) {
  char label[112] = "";
  if (cs != NULL) case_label(cs, label, sizeof(label));
  fprintf(stderr, "FAIL rank %d of %d [NCCL_ALGO=%s] %s: %s returned %s: %s\n", R.rank, R.n, R.algo, label, what,
          ncclGetErrorString(res), ncclGetLastError(R.comm));
  fflush(NULL);
  exit(2);
}

// ---- Buffers (NCCL's in-place layouts) ----

static void prepare(const case_t *cs) {
  size_t c = cs->count, all = c * (size_t)R.n, es = cs->t->size;
  int r = R.rank, root = r == cs->root;
  size_t sn = c, rn = c, out_off = 0, out_n = c;
  switch (cs->coll) {
    case REDUCE: out_n = root ? c : 0; break;
    case ALLGATHER: rn = out_n = all; break;
    case REDUCESCATTER: sn = all; break;
    case ALLTOALL:
    case SENDRECV: sn = rn = out_n = all; break;
    case GATHER: rn = all, out_n = root ? all : 0; break;
    case SCATTER: sn = all; break;
    default: break;
  }
  R.sreg = NULL;
  R.sn = R.in_off = R.in_n = 0;
  R.rreg = R.rarena + GUARD;
  if (!cs->inplace) {
    R.sreg = R.sarena + GUARD;
    R.sn = sn;
    R.sendbuf = R.sreg;
    R.recvbuf = R.rreg;
  } else {
    R.in_n = sn;
    switch (cs->coll) {
      case BROADCAST: R.in_n = root ? c : 0; break;
      case ALLGATHER: R.in_off = (size_t)r * c; break;
      case REDUCESCATTER: rn = all, out_off = (size_t)r * c; break;
      case GATHER:
        if (root) {
          R.in_off = (size_t)cs->root * c;
        } else {  // only the root has an in-place layout
          R.sreg = R.sarena + GUARD, R.sn = c;
          R.in_n = rn = 0;
        }
        break;
      case SCATTER:
        if (root) rn = all, out_off = (size_t)cs->root * c;
        else R.in_n = 0;  // sendbuff is unused off the root
        break;
      default: break;
    }
    R.sendbuf = R.sreg ? (const void *)R.sreg : R.rreg + R.in_off * es;
    R.recvbuf = R.rreg + out_off * es;
    if (cs->coll == GATHER && !root) R.recvbuf = NULL;
    if (cs->coll == SCATTER && !root) R.sendbuf = NULL;
  }
  R.rn = rn;
  R.out_off = out_off;
  R.out_n = out_n;
  memset(R.rarena, RECV_FILL, 2 * GUARD + rn * es);
  for (size_t j = 0; j < R.in_n; j++) weft_test_store(R.rreg + (R.in_off + j) * es, es, input_bits(cs, r, j));
  if (R.sreg) {
    memset(R.sarena, SEND_FILL, GUARD);
    for (size_t j = 0; j < R.sn; j++) weft_test_store(R.sreg + j * es, es, input_bits(cs, r, j));
    memset(R.sreg + R.sn * es, SEND_FILL, GUARD);
  }
}

static long first_not(const unsigned char *p, size_t n, unsigned char v) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != v) return (long)i;
  return -1;
}

static void check_output(const case_t *cs, size_t k, uint64_t got) {
  const weft_test_dtype_t *t = cs->t;
  int w = 2 * (int)t->size;
  if (cs->op == OP_NONE) {
    int src;
    size_t j;
    copy_source(cs, k, &src, &j);
    uint64_t want = input_bits(cs, src, j);
    if (got != want)
      mismatch(cs, "recvbuff[%zu]: got 0x%0*llx, expected 0x%0*llx (rank %d's element %zu)", k, w,
               (unsigned long long)got, w, (unsigned long long)want, src, j);
    return;
  }
  size_t j = (cs->coll == REDUCESCATTER ? (size_t)R.rank * cs->count + k : k) % PERIOD;
  if (R.tol > 0) {
    double g = weft_test_value(t, got);
    if (!(fabs(g - R.ref_val[j]) <= R.tol))
      mismatch(cs, "recvbuff[%zu]: got %.9g (0x%0*llx), expected %.9g within %.3g", k, g, w, (unsigned long long)got,
               R.ref_val[j], R.tol);
    return;
  }
  uint64_t want = R.ref_bits[j];
  if (weft_test_canon(t, got) != weft_test_canon(t, want))
    mismatch(cs, "recvbuff[%zu]: got %.9g (0x%0*llx), expected %.9g (0x%0*llx)", k, weft_test_value(t, got), w,
             (unsigned long long)got, weft_test_value(t, want), w, (unsigned long long)want);
}

static void check(const case_t *cs) {
  size_t es = cs->t->size;
  uint64_t mask = elem_mask(es), fill = mask & (0x0101010101010101ull * RECV_FILL);
  int w = 2 * (int)es;
  long at;
  if ((at = first_not(R.rarena, GUARD, RECV_FILL)) >= 0)
    mismatch(cs, "byte %ld before the receive region was written", GUARD - at);
  if ((at = first_not(R.rreg + R.rn * es, GUARD, RECV_FILL)) >= 0)
    mismatch(cs, "byte %ld after the receive region was written", at);
  if (R.sreg && ((at = first_not(R.sarena, GUARD, SEND_FILL)) >= 0 ||
                 (at = first_not(R.sreg + R.sn * es, GUARD, SEND_FILL)) >= 0))
    mismatch(cs, "a guard byte around sendbuff was written");
  for (size_t j = 0; R.sreg && j < R.sn; j++) {
    uint64_t got = weft_test_load(R.sreg + j * es, es), want = input_bits(cs, R.rank, j);
    if (got != want)
      mismatch(cs, "sendbuff[%zu] changed: 0x%0*llx, was 0x%0*llx", j, w, (unsigned long long)got, w,
               (unsigned long long)want);
  }
  for (size_t k = 0; k < R.rn; k++) {
    uint64_t got = weft_test_load(R.rreg + k * es, es);
    if (k >= R.out_off && k < R.out_off + R.out_n) {
      check_output(cs, k - R.out_off, got);
    } else if (k >= R.in_off && k < R.in_off + R.in_n) {
      uint64_t want = input_bits(cs, R.rank, k - R.in_off);
      if (got != want)
        mismatch(cs, "in-place input element %zu (not an output) changed: 0x%0*llx, was 0x%0*llx", k, w,
                 (unsigned long long)got, w, (unsigned long long)want);
    } else if (got != fill) {
      mismatch(cs, "element %zu of %s was written: 0x%0*llx", k,
               R.out_n ? "the receive region outside the output" : "an output this rank does not get", w,
               (unsigned long long)got);
    }
  }
}

// ---- Running cases ----

static ncclResult_t issue(const case_t *cs, ncclRedOp_t op) {
  size_t c = cs->count, es = cs->t->size;
  ncclDataType_t dt = cs->t->dt;
  ncclComm_t comm = R.comm;
  switch (cs->coll) {
    case ALLREDUCE: return ncclAllReduce(R.sendbuf, R.recvbuf, c, dt, op, comm, NULL);
    case BROADCAST: return ncclBroadcast(R.sendbuf, R.recvbuf, c, dt, cs->root, comm, NULL);
    case REDUCE: return ncclReduce(R.sendbuf, R.recvbuf, c, dt, op, cs->root, comm, NULL);
    case ALLGATHER: return ncclAllGather(R.sendbuf, R.recvbuf, c, dt, comm, NULL);
    case REDUCESCATTER: return ncclReduceScatter(R.sendbuf, R.recvbuf, c, dt, op, comm, NULL);
    case ALLTOALL: return ncclAlltoAll(R.sendbuf, R.recvbuf, c, dt, comm, NULL);
    case GATHER: return ncclGather(R.sendbuf, R.recvbuf, c, dt, cs->root, comm, NULL);
    case SCATTER: return ncclScatter(R.sendbuf, R.recvbuf, c, dt, cs->root, comm, NULL);
    case SENDRECV: {
      ncclResult_t res = ncclGroupStart();
      for (int p = 0; p < R.n && res == ncclSuccess; p++) {
        res = ncclSend((const char *)R.sendbuf + (size_t)p * c * es, c, dt, p, comm, NULL);
        if (res == ncclSuccess) res = ncclRecv((char *)R.recvbuf + (size_t)p * c * es, c, dt, p, comm, NULL);
      }
      ncclResult_t end = ncclGroupEnd();
      return res != ncclSuccess ? res : end;
    }
    default: return ncclInvalidArgument;
  }
}

static void run_case(const case_t *cs) {
  if (cs->op != OP_NONE) build_tables(cs);
  prepare(cs);
  ncclRedOp_t op = cs->op >= 0 && cs->op < OP_PREMUL ? builtin_ops[cs->op] : ncclSum;
  if (cs->op == OP_PREMUL) {  // scalar 2: host-immediate out-of-place, "device" residence in-place
    unsigned char scalar[8];
    weft_test_store(scalar, cs->t->size, weft_test_encode_int(cs->t, 2));
    ncclResult_t res = ncclRedOpCreatePreMulSum(&op, scalar, cs->t->dt,
                                                cs->inplace ? ncclScalarDevice : ncclScalarHostImmediate, R.comm);
    if (res != ncclSuccess) call_failed("ncclRedOpCreatePreMulSum", cs, res);
  }
  ncclResult_t res = issue(cs, op);
  if (res != ncclSuccess) call_failed(colls[cs->coll].name, cs, res);
  if (cs->op == OP_PREMUL && (res = ncclRedOpDestroy(op, R.comm)) != ncclSuccess)
    call_failed("ncclRedOpDestroy", cs, res);
  R.bad = 0;
  check(cs);
  R.cases++;
  if (R.bad > MAX_LINES) {
    char label[112];
    case_label(cs, label, sizeof(label));
    fprintf(stderr, "FAIL rank %d of %d [NCCL_ALGO=%s] %s: %d mismatches in all\n", R.rank, R.n, R.algo, label, R.bad);
  }
  R.failures += R.bad > 0;
  if (colls[cs->coll].replicated && R.nhash < MAX_HASHES) {
    R.hashes[R.nhash] = weft_test_hash(R.rreg + R.out_off * cs->t->size, R.out_n * cs->t->size);
    case_label(cs, R.labels[R.nhash], sizeof(R.labels[0]));
    R.nhash++;
  }
}

// Every rank must hold the same bits for each replicated output since the last call.
static void compare_hashes(void) {
  int nh = R.nhash;
  R.nhash = 0;
  if (nh == 0 || R.n == 1) return;
  ncclResult_t res = ncclAllGather(R.hashes, R.all_hashes, (size_t)nh, ncclUint64, R.comm, NULL);
  if (res != ncclSuccess) call_failed("ncclAllGather of the output hashes", NULL, res);
  for (int k = 0; k < nh; k++) {
    for (int p = 0; p < R.n; p++) {
      if (R.all_hashes[(size_t)p * nh + k] == R.hashes[k]) continue;
      fprintf(stderr, "FAIL rank %d of %d [NCCL_ALGO=%s] %s: output differs from rank %d's (hash %016llx vs %016llx)\n",
              R.rank, R.n, R.algo, R.labels[k], p, (unsigned long long)R.hashes[k],
              (unsigned long long)R.all_hashes[(size_t)p * nh + k]);
      R.failures++;
      break;
    }
  }
}

static uint64_t case_salt(const case_t *cs) {
  uint64_t key = ((((uint64_t)cs->coll * 16 + (uint64_t)cs->t->dt) * 8 + (uint64_t)(cs->op + 1)) * 2 +
                  (uint64_t)cs->inplace) * 64 + (uint64_t)(cs->root != 0);
  return weft_test_mix64(key * 0x100000 + cs->count);
}

static void sweep(unsigned which) {
  for (int coll = 0; coll < NCOLLS; coll++) {
    if (!(which & (1u << coll))) continue;
    const coll_info_t *ci = &colls[coll];
    for (int dt = 0; dt < ncclNumTypes; dt++) {
      const weft_test_dtype_t *t = weft_test_dtype((ncclDataType_t)dt);
      size_t counts[3] = {1, ODD_COUNT, 65536 / t->size + 3};
      for (int op = ci->has_op ? 0 : OP_NONE; op < (ci->has_op ? NOPS : 0); op++)
        for (int k = 0; k < 3; k++)
          for (int place = 0; place < 1 + ci->inplace; place++)
            for (int ri = 0; ri < (ci->rooted && R.n > 1 ? 2 : 1); ri++) {
              case_t cs = {(coll_t)coll, t, op, counts[k], place, ri ? R.n - 1 : 0, 0};
              cs.salt = case_salt(&cs);
              run_case(&cs);
            }
      if (ci->replicated) compare_hashes();
    }
  }
}

// ---- Setup ----

static unsigned parse_colls(const char *list) {
  unsigned mask = 0;
  char buf[256];
  snprintf(buf, sizeof(buf), "%s", list);
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
    int found = -1;
    for (int c = 0; c < NCOLLS; c++)
      if (strcmp(tok, colls[c].key) == 0) found = c;
    if (found < 0) {
      fprintf(stderr, "conformance_rank: unknown collective '%s'\n", tok);
      return 0;
    }
    mask |= 1u << found;
  }
  return mask;
}

static int env_int(const char *name) {
  const char *v = getenv(name);
  return v ? atoi(v) : -1;
}

int main(int argc, char **argv) {
  unsigned which = (1u << NCOLLS) - 1;
  if (argc == 3 && strcmp(argv[1], "-c") == 0) {
    which = parse_colls(argv[2]);
    if (which == 0) return 3;
  } else if (argc != 1) {
    fprintf(stderr, "usage: conformance_rank [-c allreduce,broadcast,reduce,allgather,reducescatter,"
                    "alltoall,gather,scatter,sendrecv]\n");
    return 3;
  }
  const char *algo = getenv("NCCL_ALGO");
  R.algo = algo && *algo ? algo : "default";
  double start = weft_test_now();
  ncclResult_t res = weftInitFromEnv(&R.comm);
  if (res != ncclSuccess) {
    fprintf(stderr, "FAIL conformance_rank: weftInitFromEnv: %s: %s\n", ncclGetErrorString(res),
            ncclGetLastError(NULL));
    return 20 + (int)res;
  }
  if ((res = ncclCommUserRank(R.comm, &R.rank)) != ncclSuccess || (res = ncclCommCount(R.comm, &R.n)) != ncclSuccess)
    call_failed("ncclCommUserRank/ncclCommCount", NULL, res);
  // Under weftrun the environment must describe this very rank.
  if (getenv("WEFT_RANK") != NULL && (env_int("WEFT_RANK") != R.rank || env_int("WEFT_NRANKS") != R.n ||
                                      env_int("WEFT_LOCAL_RANK") < 0 ||
                                      env_int("WEFT_LOCAL_RANK") >= env_int("WEFT_LOCAL_SIZE"))) {
    fprintf(stderr, "FAIL conformance_rank: rank %d of %d, but WEFT_RANK=%d WEFT_NRANKS=%d WEFT_LOCAL_RANK=%d "
                    "WEFT_LOCAL_SIZE=%d\n", R.rank, R.n, env_int("WEFT_RANK"), env_int("WEFT_NRANKS"),
            env_int("WEFT_LOCAL_RANK"), env_int("WEFT_LOCAL_SIZE"));
    return 3;
  }

  // The largest region holds nranks x the large count (64 KiB / size + 3
  // elements): at most (65536 + 3 * 8) * nranks bytes.
  size_t arena = (2 * GUARD + (65536 + 3 * 8) * (size_t)R.n + 63) / 64 * 64;
  R.sarena = aligned_alloc(64, arena);
  R.rarena = aligned_alloc(64, arena);
  R.in = malloc(sizeof(uint64_t) * PERIOD * (size_t)R.n);
  R.all_hashes = malloc(sizeof(uint64_t) * MAX_HASHES * (size_t)R.n);
  if (R.sarena == NULL || R.rarena == NULL || R.in == NULL || R.all_hashes == NULL) {
    fprintf(stderr, "FAIL conformance_rank: rank %d: out of memory\n", R.rank);
    return 3;
  }
  sweep(which);

  // Every rank learns whether any rank failed.
  int64_t mine = R.failures, total = 0;
  if ((res = ncclAllReduce(&mine, &total, 1, ncclInt64, ncclSum, R.comm, NULL)) != ncclSuccess)
    call_failed("ncclAllReduce of the failure counts", NULL, res);
  if ((res = ncclCommDestroy(R.comm)) != ncclSuccess) call_failed("ncclCommDestroy", NULL, res);
  if (R.rank == 0)
    printf("conformance_rank: %d ranks [NCCL_ALGO=%s]: %ld cases per rank, %s (%.1f s)\n", R.n, R.algo, R.cases,
           total ? "FAILED" : "all passed", weft_test_now() - start);
  free(R.sarena);
  free(R.rarena);
  free(R.in);
  free(R.all_hashes);
  return total ? 1 : 0;
}
