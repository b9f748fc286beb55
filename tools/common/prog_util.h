/*
 * prog_util.h — what weft's programs share (tools/, perf/, trainer/, the
 * peer benchmarks in perf/compare/): sizes on the command line and the
 * monotonic clock. Plain C11 and POSIX, no libweft: a program built with
 * another library's compiler (mpicc) compiles prog_util.c beside its own file.
 */
#ifndef WEFT_PROG_UTIL_H
#define WEFT_PROG_UTIL_H

#include <stddef.h>
#include <stdint.h>

// A byte or element count as nccl-tests writes it: a decimal number (a
// fraction too: "0.5M"), or 0x hexadecimal, with an optional K, M or G
// (powers of 1024) and an optional trailing B. Returns 0, or -1 (and leaves
// *out alone) for an empty, negative, malformed or overflowing text.
int weft_prog_parse_size(const char *s, size_t *out);

// CLOCK_MONOTONIC in seconds, and in nanoseconds.
double weft_prog_now_s(void);
int64_t weft_prog_now_ns(void);

#endif
