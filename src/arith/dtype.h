/*
 * dtype.h — datatype sizes and names, and the 16-bit and 8-bit float formats.
 *
 * fp16 (IEEE binary16), bf16, fp8 e4m3 (OCP "e4m3fn": no infinities, one NaN
 * pattern per sign, max 448) and fp8 e5m2 (IEEE-like, max 57344).
 * Conversions to float are exact; conversions from float round to nearest
 * even. Out-of-range values saturate to the largest finite value for the fp8
 * formats (CUDA's __NV_SATFINITE, the behaviour of __nv_fp8_* types) and
 * become infinity for fp16/bf16; NaN stays NaN.
 */
#ifndef WEFT_DTYPE_H
#define WEFT_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

size_t weft_dtype_size(ncclDataType_t dt);        // 0 for an unknown datatype
const char *weft_dtype_name(ncclDataType_t dt);   // "float32", ... ; "unknown"
int weft_dtype_is_float(ncclDataType_t dt);
const char *weft_op_name(int op);                 // "sum", "prod", "max", "min", "avg", "premulsum"
// One element of dt at host address p, as an integer (*i, integer types)
// or a double (*f, floating types); the other is left alone.
void weft_dtype_read_scalar(const void *p, ncclDataType_t dt, int64_t *i, double *f);

static inline float weft_half_to_float(uint16_t h);
static inline uint16_t weft_float_to_half(float f);
static inline float weft_bf16_to_float(uint16_t b);
static inline uint16_t weft_float_to_bf16(float f);
float weft_e4m3_to_float(uint8_t v);   // table lookup
uint8_t weft_float_to_e4m3(float f);
float weft_e5m2_to_float(uint8_t v);   // table lookup
uint8_t weft_float_to_e5m2(float f);

#include "dtype_inline.h"  // definitions of the static inline converters

#endif
