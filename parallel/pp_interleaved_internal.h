/*
 * pp_interleaved_internal.h — what the interleaved schedule's files share:
 * the virtual stages an operation talks to.
 */
#ifndef WEFT_PAR_PP_INTERLEAVED_INTERNAL_H
#define WEFT_PAR_PP_INTERLEAVED_INTERNAL_H

#include "pp_interleaved.h"

// Virtual stage of chunk v on stage s.
static inline int weft_pp_vstage(int stages, int stage, int chunk) { return chunk * stages + stage; }

// The virtual stage whose result `op` (on virtual stage vs of nv) takes as
// input: the previous one's activation for a forward, the next one's
// gradient for a backward; -1 when the input is local (virtual stage 0's
// forward, the last one's backward).
static inline int weft_pp_input_from(const weft_pp_chunk_op_t *op, int vs, int nv) {
  if (!op->backward) return vs == 0 ? -1 : vs - 1;
  return vs == nv - 1 ? -1 : vs + 1;
}

// The virtual stage that takes `op`'s result as input; -1: none.
static inline int weft_pp_output_to(const weft_pp_chunk_op_t *op, int vs, int nv) {
  if (!op->backward) return vs == nv - 1 ? -1 : vs + 1;
  return vs == 0 ? -1 : vs - 1;
}

#endif  // WEFT_PAR_PP_INTERLEAVED_INTERNAL_H
