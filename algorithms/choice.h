/*
 * choice.h — NCCL's syntax for choosing among named options per
 * collective, as NCCL_ALGO and NCCL_PROTO take it (choice.c).
 *
 * A value is a ';'-separated list of sections; a section is an optional
 * "collective:" prefix and a ','-separated list of names, negated as a
 * whole by a leading '^'. Without a prefix a section applies to every
 * collective. Names are case-insensitive; whitespace is ignored.
 */
#ifndef WEFT_CHOICE_H
#define WEFT_CHOICE_H

#include "schedule.h"

// Per collective, the mask (bit i = names[i]) of what `spec` allows; every
// option when spec is NULL or empty. `var` names the variable in logs.
// Names NCCL has and weft does not (`foreign`, NULL-terminated, may be
// NULL) are ignored with an INFO line; any other unknown name with a WARN.
// A section may thus allow nothing: the tuner then keeps its own choice
// (tuner.h). Returns -1 for text that does not parse (the masks are then
// all-allowed), else 0.
int weft_choice_parse(const char *var, const char *spec, const char *const *names, int nnames,
                      const char *const *foreign, unsigned masks[WEFT_NUM_COLLS]);

#endif
