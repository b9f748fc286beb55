/*
 * cuda_sweep.h — the oracle of test_cuda_stream.c: a rank's stand-in (or
 * real) CUDA driver, context and stream, and the sweep that runs one call
 * on host copies with weft's host path and again on device memory, and
 * compares every byte the device call leaves, sentinels around the
 * outputs included. Header-only, for that one test file (it defines the
 * file's driver table `cu`).
 */
#ifndef WEFT_TEST_CUDA_SWEEP_H
#define WEFT_TEST_CUDA_SWEEP_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_driver.h"
#include "harness.h"

static tcu_t cu;

// A rank's driver, context (device = rank % 2 on the fake's two devices) and stream.
static int rank_setup(int rank, tcu_stream *stream) {
  if (tcu_open(&cu) != 0) return -1;
  if (tcu_use_device(&cu, tcu_real() ? 0 : rank % 2) != 0) return -1;
  return cu.stream_create(stream, 1 /* CU_STREAM_NON_BLOCKING */);
}

static void driver_setup(void) {
  if (!tcu_real()) tcu_use_fake_driver();
}

// For a test that needs two devices: skips with real CUDA on fewer.
static void need_two_devices(void) {
  int n = tcu_real() ? tcu_device_count() : 2;  // the stand-in has two
  if (n < 2) cr_skip_test("needs two CUDA devices; this machine has %d", n);
}

/* ---------- the sweep: device path against the host path ---------- */

typedef enum { AR, BC, RD, AG, RS, A2A, GA, SC, NCOLL } coll_t;
static const char *coll_name[] = {"AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter",
                                  "AlltoAll", "Gather", "Scatter"};

static size_t esize_of(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}

// Elements in the send and the recv buffer of coll with `count` on n ranks.
static void sizes(coll_t c, size_t count, int n, size_t *s, size_t *r) {
  size_t all = count * (size_t)n;
  switch (c) {
    case AG: case GA: *s = count, *r = all; break;
    case RS: case SC: *s = all, *r = count; break;
    case A2A: *s = all, *r = all; break;
    default: *s = count, *r = count; break;
  }
}

static ncclResult_t call(coll_t c, const void *s, void *r, size_t count, ncclDataType_t t, ncclRedOp_t op, int root,
                         ncclComm_t comm, cudaStream_t st) {
  switch (c) {
    case AR: return ncclAllReduce(s, r, count, t, op, comm, st);
    case BC: return ncclBroadcast(s, r, count, t, root, comm, st);
    case RD: return ncclReduce(s, r, count, t, op, root, comm, st);
    case AG: return ncclAllGather(s, r, count, t, comm, st);
    case RS: return ncclReduceScatter(s, r, count, t, op, comm, st);
    case A2A: return ncclAlltoAll(s, r, count, t, comm, st);
    case GA: return ncclGather(s, r, count, t, root, comm, st);
    default: return ncclScatter(s, r, count, t, root, comm, st);
  }
}

static uint64_t rng_state;
static void fill_random(unsigned char *p, size_t bytes, uint64_t seed) {
  rng_state = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < bytes; i++) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    p[i] = (unsigned char)(rng_state >> 24);
  }
}

enum { SENTINEL = 0xA5, PAD = 64 };

static int is_float(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclBfloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclFloat8e4m3 ||
         t == ncclFloat8e5m2;
}

// Clears the top exponent bit of every element (bit 6 of its last byte, in
// every float format here) and makes -0 +0: no NaN, infinity or signed zero,
// where a OP b and b OP a may give different bits (NaN payloads, max of +0
// and -0).
static int finite_floats;
static void make_finite(unsigned char *p, size_t bytes, size_t es) {
  for (size_t e = 0; e + es <= bytes; e += es) {
    p[e + es - 1] &= (unsigned char)~0x40;
    int zero = (p[e + es - 1] & 0x7f) == 0;
    for (size_t b = 0; b + 1 < es && zero; b++) zero = p[e + b] == 0;
    if (zero) p[e + es - 1] = 0;
  }
}

typedef struct {
  ncclComm_t comm;
  tcu_stream stream;
  int rank, nranks;
  size_t cap;              // bytes of each space (send space, recv space)
  unsigned char *h[2];     // host spaces: the host call's buffers
  unsigned char *d[2];     // device spaces
  unsigned char *back;     // device bytes read back
  int cases;
} sweep_t;

// One call on host and on device; 0 when the device bytes equal the host's.
static int run_case(sweep_t *w, coll_t c, ncclDataType_t t, ncclRedOp_t op, size_t count, int inplace, int root) {
  size_t es = esize_of(t), se, re;
  sizes(c, count, w->nranks, &se, &re);
  size_t sb = se * es, rb = re * es;
  // In place: one space; the send region sits inside the recv region (or the reverse for ReduceScatter/Scatter).
  size_t soff = PAD, roff = PAD;
  if (inplace) {
    if (c == AG) soff = PAD + (size_t)w->rank * count * es;
    if (c == RS) roff = PAD + (size_t)w->rank * count * es;
  }
  int sspace = 0, rspace = inplace ? 0 : 1;
  size_t used = (sb > rb ? sb : rb) + 2 * PAD;
  for (int k = 0; k < 2; k++) memset(w->h[k], SENTINEL, used);
  fill_random(w->h[sspace] + soff, sb, ((uint64_t)w->cases << 8) ^ (uint64_t)w->rank);
  if (finite_floats && is_float(t)) make_finite(w->h[sspace] + soff, sb, es);
  for (int k = 0; k < 2; k++)
    if (cu.htod(tcu_p(w->d[k]), w->h[k], used) != 0) return -1;
  ncclResult_t hr = call(c, w->h[sspace] + soff, w->h[rspace] + roff, count, t, op, root, w->comm, NULL);
  ncclResult_t dr = call(c, w->d[sspace] + soff, w->d[rspace] + roff, count, t, op, root, w->comm,
                         (cudaStream_t)w->stream);
  int bad = 0;
  WEFT_TEST_CHECK(hr == ncclSuccess && dr == ncclSuccess, "%s: host %d, device %d", coll_name[c], hr, dr);
  WEFT_TEST_CHECK(cu.stream_sync(w->stream) == 0, "cuStreamSynchronize failed");
  for (int k = 0; k < 2 && hr == ncclSuccess && dr == ncclSuccess; k++) {
    if (cu.dtoh(w->back, tcu_p(w->d[k]), used) != 0) return -1;
    for (size_t i = 0; i < used && !bad; i++) {
      if (w->back[i] == w->h[k][i]) continue;
      WEFT_TEST_CHECK(0, "%s %d ranks dtype %d op %d count %zu %s root %d: space %d byte %zu: device 0x%02x, "
                      "host 0x%02x", coll_name[c], w->nranks, (int)t, (int)op, count,
                      inplace ? "in place" : "out of place", root, k, i, w->back[i], w->h[k][i]);
      bad = 1;
    }
  }
  w->cases++;
  return bad;
}

// A rank's driver, stream, communicator and spaces; 0 when all is ready.
static int sweep_open(sweep_t *w, int rank, int nranks, ncclUniqueId id) {
  *w = (sweep_t){.rank = rank, .nranks = nranks};
  WEFT_TEST_CHECK(rank_setup(rank, &w->stream) == 0, "driver setup failed");
  if (weft_test_failures()) return -1;
  w->comm = weft_test_init_rank(nranks, id, rank);
  if (w->comm == NULL) return -1;
  w->cap = 70000 * 8 * (size_t)nranks + 2 * PAD;  // within the staging reserved at init
  for (int k = 0; k < 2; k++) w->h[k] = malloc(w->cap), w->d[k] = tcu_alloc(&cu, w->cap);
  w->back = malloc(w->cap);
  WEFT_TEST_CHECK(w->h[0] && w->h[1] && w->d[0] && w->d[1] && w->back, "allocation failed");
  return weft_test_failures() ? -1 : 0;
}

static void sweep_close(sweep_t *w) {
  WEFT_TEST_CHECK_RES(ncclCommDestroy(w->comm), ncclSuccess);
  for (int k = 0; k < 2; k++) free(w->h[k]), cu.free(tcu_p(w->d[k]));
  free(w->back);
  cu.stream_destroy(w->stream);
}

#endif
