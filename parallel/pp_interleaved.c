/*
 * pp_interleaved.c — the interleaved 1F1B schedule (see pp_interleaved.h):
 * its shape check, the order of one stage's chunk operations, how many
 * micro-batches each chunk holds, and the bubble it leaves (pure
 * arithmetic, no communication).
 */
#include <stdlib.h>

#include "par_util.h"
#include "pp_interleaved_internal.h"
#include "pp_replay.h"

ncclResult_t weft_pp_interleaved_check(int stages, int chunks, int micro) {
  if (stages < 1 || chunks < 1 || micro < 1)
    PAR_INVALID("interleaved pipeline: stages=%d chunks=%d micro-batches=%d, each must be at least 1", stages, chunks,
                micro);
  if (micro % stages != 0)
    PAR_INVALID("interleaved pipeline: %d micro-batches are not a multiple of the %d stages (they go in groups of %d)",
                micro, stages, stages);
  if ((long)chunks * micro > (1L << 24))
    PAR_INVALID("interleaved pipeline: %d chunks x %d micro-batches are too many", chunks, micro);
  return ncclSuccess;
}

int weft_pp_interleaved_warmup(int stages, int stage, int chunks, int micro) {
  long warm = (long)(stages - 1 - stage) * 2 + (long)(chunks - 1) * stages, total = (long)chunks * micro;
  return (int)(warm < total ? warm : total);
}

// The k-th forward (backward) of a stage, in Megatron-LM's order.
static weft_pp_chunk_op_t kth(int stages, int chunks, int k, int backward) {
  int group = stages * chunks, chunk = (k % group) / stages;
  weft_pp_chunk_op_t op = {backward, backward ? chunks - 1 - chunk : chunk, (k / group) * stages + k % stages};
  return op;
}

ncclResult_t weft_pp_interleaved_schedule(int stages, int stage, int chunks, int micro, weft_pp_chunk_op_t *ops) {
  ncclResult_t res = weft_pp_interleaved_check(stages, chunks, micro);
  if (res != ncclSuccess) return res;
  if (stage < 0 || stage >= stages) PAR_INVALID("weft_pp_interleaved_schedule: stage=%d is not in 0..%d", stage, stages - 1);
  if (ops == NULL) PAR_INVALID("weft_pp_interleaved_schedule: ops is NULL");
  int total = chunks * micro, warm = weft_pp_interleaved_warmup(stages, stage, chunks, micro), n = 0;
  for (int k = 0; k < warm; k++) ops[n++] = kth(stages, chunks, k, 0);
  for (int i = 0; i < total - warm; i++) {
    ops[n++] = kth(stages, chunks, warm + i, 0);
    ops[n++] = kth(stages, chunks, i, 1);
  }
  for (int k = total - warm; k < total; k++) ops[n++] = kth(stages, chunks, k, 1);
  return ncclSuccess;
}

ncclResult_t weft_pp_interleaved_in_flight(int stages, int stage, int chunks, int micro, int *held) {
  if (held == NULL) PAR_INVALID("weft_pp_interleaved_in_flight: held is NULL");
  ncclResult_t res = weft_pp_interleaved_check(stages, chunks, micro);
  if (res != ncclSuccess) return res;
  size_t n = 2 * (size_t)chunks * micro;
  weft_pp_chunk_op_t *ops = malloc(n * sizeof(*ops));
  int *now = calloc((size_t)chunks, sizeof(int));
  if (ops == NULL || now == NULL) {
    free(ops), free(now);
    return weft_par_error(ncclSystemError, "weft_pp_interleaved_in_flight: out of memory");
  }
  res = weft_pp_interleaved_schedule(stages, stage, chunks, micro, ops);
  for (int v = 0; v < chunks; v++) held[v] = 0;
  for (size_t i = 0; i < n && res == ncclSuccess; i++) {
    int v = ops[i].chunk;
    now[v] += ops[i].backward ? -1 : 1;
    if (now[v] > held[v]) held[v] = now[v];
  }
  free(ops), free(now);
  return res;
}

ncclResult_t weft_pp_interleaved_simulate(int stages, int chunks, int micro, double tf, double tb, double *bubble) {
  ncclResult_t res = weft_pp_interleaved_check(stages, chunks, micro);
  if (res != ncclSuccess) return res;
  if (bubble == NULL || !(tf > 0) || !(tb > 0))
    PAR_INVALID("weft_pp_interleaved_simulate: need tf, tb > 0 and a bubble pointer");
  int n = 2 * chunks * micro;
  weft_pp_chunk_op_t *ops = malloc((size_t)stages * n * sizeof(*ops));
  if (ops == NULL) return weft_par_error(ncclSystemError, "weft_pp_interleaved_simulate: out of memory");
  for (int s = 0; s < stages; s++) weft_pp_interleaved_schedule(stages, s, chunks, micro, ops + (size_t)s * n);
  res = weft_pp_replay("weft_pp_interleaved_simulate", stages, chunks, micro, ops, tf, tb, bubble);
  free(ops);
  return res;
}
