/*
 * pp_interleaved_plan.c — the interleaved executor's communication plan
 * (see pp_interleaved.h): every stage plays all stages' schedules in
 * lockstep rounds and keeps its own rounds.
 *
 * Round r: a stage runs its next operation if that needs no message or
 * the message arrived in a round before r; each result is then sent in
 * round r, and its receiver posts the receive in round r too. A stage
 * computes at most one operation per round, so it sends at most one
 * message per round, and a receiver gets at most one from each of its two
 * neighbours: two messages between the same pair of stages never share a
 * round, and the in-order matching of ncclSend/ncclRecv pairs them right.
 */
#include <stdlib.h>

#include "par_util.h"
#include "pp_interleaved_internal.h"

typedef struct {
  int stages, chunks, micro, n;  // n: operations per stage
  weft_pp_chunk_op_t *ops;       // stage s's schedule at s * n
  int *index;                    // (virtual stage, backward, micro) -> index in its stage's schedule
  int *arrived;                  // per operation: the round its input arrived, -1: not yet
  int *next;                     // per stage: its next operation
} lockstep_t;

static int *index_of(lockstep_t *ls, int vs, int backward, int micro) {
  return &ls->index[((size_t)vs * 2 + (size_t)backward) * ls->micro + micro];
}

static ncclResult_t lockstep_init(lockstep_t *ls, int stages, int chunks, int micro) {
  int nv = stages * chunks;
  ls->stages = stages, ls->chunks = chunks, ls->micro = micro, ls->n = 2 * chunks * micro;
  size_t all = (size_t)stages * ls->n;
  ls->ops = malloc(all * sizeof(*ls->ops));
  ls->index = malloc((size_t)nv * 2 * micro * sizeof(int));
  ls->arrived = malloc(all * sizeof(int));
  ls->next = calloc((size_t)stages, sizeof(int));
  if (ls->ops == NULL || ls->index == NULL || ls->arrived == NULL || ls->next == NULL)
    return weft_par_error(ncclSystemError, "weft_pp_interleaved_plan: out of memory");
  for (int s = 0; s < stages; s++) {
    PAR_CHECK(weft_pp_interleaved_schedule(stages, s, chunks, micro, ls->ops + (size_t)s * ls->n));
    for (int j = 0; j < ls->n; j++) {
      const weft_pp_chunk_op_t *op = &ls->ops[(size_t)s * ls->n + j];
      *index_of(ls, weft_pp_vstage(stages, s, op->chunk), op->backward, op->micro) = j;
    }
  }
  for (size_t i = 0; i < all; i++) ls->arrived[i] = -1;
  return ncclSuccess;
}

static void lockstep_free(lockstep_t *ls) { free(ls->ops), free(ls->index), free(ls->arrived), free(ls->next); }

// Round r for every stage; `mine` is `stage`'s entry. Returns how many
// operations ran, or -1 when a stage would receive more than two messages.
static int lockstep_round(lockstep_t *ls, int r, int stage, weft_pp_round_t *mine) {
  int P = ls->stages, nv = P * ls->chunks, ran = 0;
  for (int s = 0; s < P; s++) {
    int j = ls->next[s];
    if (j >= ls->n) continue;
    const weft_pp_chunk_op_t *op = &ls->ops[(size_t)s * ls->n + j];
    int vs = weft_pp_vstage(P, s, op->chunk), arrived = ls->arrived[(size_t)s * ls->n + j];
    if (weft_pp_input_from(op, vs, nv) >= 0 && (arrived < 0 || arrived >= r)) continue;  // waits for its input
    ls->next[s]++, ran++;
    if (s == stage) mine->op = j;
    int to = weft_pp_output_to(op, vs, nv);
    if (to < 0) continue;
    int dst = to % P, dj = *index_of(ls, to, op->backward, op->micro);
    ls->arrived[(size_t)dst * ls->n + dj] = r;
    if (s == stage) mine->send_to = dst;
    if (dst == stage) {
      if (mine->nrecv == 2) return -1;
      mine->recv_from[mine->nrecv] = s;
      mine->recv_for[mine->nrecv++] = dj;
    }
  }
  return ran;
}

ncclResult_t weft_pp_interleaved_plan(int stages, int stage, int chunks, int micro, weft_pp_round_t **rounds,
                                      int *nrounds) {
  if (rounds == NULL || nrounds == NULL) PAR_INVALID("weft_pp_interleaved_plan: rounds or nrounds is NULL");
  *rounds = NULL, *nrounds = 0;
  ncclResult_t res = weft_pp_interleaved_check(stages, chunks, micro);
  if (res != ncclSuccess) return res;
  if (stage < 0 || stage >= stages) PAR_INVALID("weft_pp_interleaved_plan: stage=%d is not in 0..%d", stage, stages - 1);
  lockstep_t ls = {0};
  weft_pp_round_t *plan = NULL;
  int cap = 0, r = 0;
  long left = (long)stages * 2 * chunks * micro;
  if ((res = lockstep_init(&ls, stages, chunks, micro)) != ncclSuccess) goto out;
  for (; left > 0; r++) {
    if (r == cap) {
      cap = cap ? 2 * cap : 4 * chunks * micro + 4 * stages;
      weft_pp_round_t *grown = realloc(plan, (size_t)cap * sizeof(*plan));
      if (grown == NULL) {
        res = weft_par_error(ncclSystemError, "weft_pp_interleaved_plan: out of memory");
        goto out;
      }
      plan = grown;
    }
    plan[r] = (weft_pp_round_t){-1, -1, 0, {-1, -1}, {-1, -1}};
    int ran = lockstep_round(&ls, r, stage, &plan[r]);
    if (ran <= 0) {
      res = weft_par_error(ncclInternalError, "weft_pp_interleaved_plan: %s in round %d (P=%d V=%d M=%d)",
                           ran < 0 ? "three messages for one stage" : "the schedules deadlock", r, stages, chunks, micro);
      goto out;
    }
    left -= ran;
  }
out:
  lockstep_free(&ls);
  if (res != ncclSuccess) {
    free(plan);
    return res;
  }
  *rounds = plan;
  *nrounds = r;
  return ncclSuccess;
}
