/*
 * dtype.c — datatype sizes and names, reading one element as a scalar,
 * reduction-op names, and the fp8 conversions.
 *
 * fp8 to float is a lookup in a 256-entry table per format. The tables are
 * constant expressions evaluated by the compiler, so they need no run-time
 * initialisation and are safe to read from any thread at any time. Float to
 * fp8 is the saturating round-to-nearest-even in dtype_inline.h.
 */
#include "dtype.h"

#include <math.h>

// Per datatype: element size and name, indexed by ncclDataType_t.
static const struct {
  size_t size;
  const char *name;
  int is_float;
} dtype_info[ncclNumTypes] = {
    [ncclInt8] = {1, "int8", 0},         [ncclUint8] = {1, "uint8", 0},
    [ncclInt32] = {4, "int32", 0},       [ncclUint32] = {4, "uint32", 0},
    [ncclInt64] = {8, "int64", 0},       [ncclUint64] = {8, "uint64", 0},
    [ncclFloat16] = {2, "float16", 1},   [ncclFloat32] = {4, "float32", 1},
    [ncclFloat64] = {8, "float64", 1},   [ncclBfloat16] = {2, "bfloat16", 1},
    [ncclFloat8e4m3] = {1, "f8e4m3", 1}, [ncclFloat8e5m2] = {1, "f8e5m2", 1},
};

static int dtype_valid(ncclDataType_t dt) { return (int)dt >= 0 && (int)dt < ncclNumTypes; }

size_t weft_dtype_size(ncclDataType_t dt) { return dtype_valid(dt) ? dtype_info[dt].size : 0; }

const char *weft_dtype_name(ncclDataType_t dt) {
  return dtype_valid(dt) ? dtype_info[dt].name : "unknown";
}

int weft_dtype_is_float(ncclDataType_t dt) { return dtype_valid(dt) ? dtype_info[dt].is_float : 0; }

void weft_dtype_read_scalar(const void *p, ncclDataType_t dt, int64_t *i, double *f) {
  switch (dt) {
    case ncclInt8: *i = *(const int8_t *)p; break;
    case ncclUint8: *i = *(const uint8_t *)p; break;
    case ncclInt32: *i = *(const int32_t *)p; break;
    case ncclUint32: *i = *(const uint32_t *)p; break;
    case ncclInt64: *i = *(const int64_t *)p; break;
    case ncclUint64: *i = (int64_t) * (const uint64_t *)p; break;
    case ncclFloat16: *f = weft_half_to_float(*(const uint16_t *)p); break;
    case ncclBfloat16: *f = weft_bf16_to_float(*(const uint16_t *)p); break;
    case ncclFloat8e4m3: *f = weft_e4m3_to_float(*(const uint8_t *)p); break;
    case ncclFloat8e5m2: *f = weft_e5m2_to_float(*(const uint8_t *)p); break;
    case ncclFloat32: *f = *(const float *)p; break;
    case ncclFloat64: *f = *(const double *)p; break;
    default: break;
  }
}

const char *weft_op_name(int op) {
  static const char *const names[ncclNumOps] = {"sum", "prod", "max", "min", "avg"};
  if (op < 0) return "unknown";
  return op < ncclNumOps ? names[op] : "premulsum";  // user-created operators
}

// ---- fp8 tables, built by the compiler from the bit fields ----

// e4m3: exponent field E (bias 7), mantissa M (3 bits). Normal values are
// (8 + M) * 2^(E - 10) = ((8 + M) << (E - 1)) * 2^-9, subnormals M * 2^-9.
#define E4M3_E(v) (((v) >> 3) & 15u)
#define E4M3_MAG(v)                                                                   \
  ((float)(E4M3_E(v) ? (8u + ((v) & 7u)) << (E4M3_E(v) ? E4M3_E(v) - 1u : 0u) : ((v) & 7u)) * \
   0x1p-9f)
#define E4M3_VAL(v) (((v) & 0x7fu) == 0x7fu ? (((v) & 0x80u) ? -NAN : NAN) \
                     : ((v) & 0x80u)         ? -E4M3_MAG(v)                \
                                             : E4M3_MAG(v))

// e5m2: exponent field E (bias 15), mantissa M (2 bits). Normal values are
// ((4 + M) << (E - 1)) * 2^-16, subnormals M * 2^-16; E == 31 is inf/NaN.
#define E5M2_E(v) (((v) >> 2) & 31u)
#define E5M2_MAG(v)                                                                      \
  ((float)(E5M2_E(v) ? (4u + ((v) & 3u)) << (E5M2_E(v) ? E5M2_E(v) - 1u : 0u) : ((v) & 3u)) * \
   0x1p-16f)
#define E5M2_ABS(v) (E5M2_E(v) == 31u ? (((v) & 3u) ? NAN : INFINITY) : E5M2_MAG(v))
#define E5M2_VAL(v) (((v) & 0x80u) ? -E5M2_ABS(v) : E5M2_ABS(v))

#define T4(F, v) F(v), F((v) + 1u), F((v) + 2u), F((v) + 3u)
#define T16(F, v) T4(F, v), T4(F, (v) + 4u), T4(F, (v) + 8u), T4(F, (v) + 12u)
#define T64(F, v) T16(F, v), T16(F, (v) + 16u), T16(F, (v) + 32u), T16(F, (v) + 48u)
#define T256(F) T64(F, 0u), T64(F, 64u), T64(F, 128u), T64(F, 192u)

const float weft_dtype_e4m3_table[256] = {T256(E4M3_VAL)};
const float weft_dtype_e5m2_table[256] = {T256(E5M2_VAL)};

float weft_e4m3_to_float(uint8_t v) { return weft_dtype_e4m3_table[v]; }
float weft_e5m2_to_float(uint8_t v) { return weft_dtype_e5m2_table[v]; }
uint8_t weft_float_to_e4m3(float f) { return weft_dtype_e4m3_round(f); }
uint8_t weft_float_to_e5m2(float f) { return weft_dtype_e5m2_round(f); }
