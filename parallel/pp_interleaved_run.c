/*
 * pp_interleaved_run.c — executes one stage's interleaved schedule by its
 * lockstep plan (pp_interleaved_plan.c): per round, the operation (if
 * any), then one group with the send of its result and the receives of
 * the neighbours' results of that round. A received tensor waits in a
 * pool of boundary buffers until its operation runs; the pool is sized
 * from the plan. With one stage, results go to the stage itself and are
 * handed over without communication.
 */
#include <stdlib.h>
#include <time.h>

#include "par_util.h"
#include "pp_interleaved_internal.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// The most boundary buffers the plan holds at once: inputs waiting for
// their operation and the result being computed (the input it consumes
// is held during the call), then the round's receives (the consumed input
// is back in the pool by then; a result kept by the stage itself becomes
// a waiting input).
static int pool_size(const weft_pp_round_t *rounds, int nrounds, const weft_pp_chunk_op_t *ops, int stages,
                     int stage, int chunks) {
  int nv = stages * chunks, waiting = 0, most = 1;
  for (int r = 0; r < nrounds; r++) {
    const weft_pp_round_t *rd = &rounds[r];
    int input = 0, result = 0, remote = 0;
    if (rd->op >= 0) {
      const weft_pp_chunk_op_t *op = &ops[rd->op];
      int vs = weft_pp_vstage(stages, stage, op->chunk);
      input = weft_pp_input_from(op, vs, nv) >= 0;
      result = weft_pp_output_to(op, vs, nv) >= 0;
    }
    for (int i = 0; i < rd->nrecv; i++) remote += rd->recv_from[i] != stage;
    int during = waiting + result, after = waiting - input + result + remote;
    most = during > most ? during : most;
    most = after > most ? after : most;
    waiting += rd->nrecv - input;
  }
  return most;
}

typedef struct {
  float *mem;
  int *free_list, nfree;
  size_t count;
} pool_t;

static float *pool_take(pool_t *p) { return p->nfree > 0 ? p->mem + (size_t)p->free_list[--p->nfree] * p->count : NULL; }
static void pool_give(pool_t *p, float *buf) {
  if (buf != NULL) p->free_list[p->nfree++] = (int)((size_t)(buf - p->mem) / p->count);
}

// Round r's group: the result to another stage, the other stages' results.
static ncclResult_t exchange(ncclComm_t comm, int stage, const weft_pp_round_t *rd, float *result, pool_t *pool,
                             float **input_of) {
  int remote = 0;
  for (int i = 0; i < rd->nrecv; i++) {
    if (rd->recv_from[i] == stage) {
      input_of[rd->recv_for[i]] = result;  // to itself: handed over
      continue;
    }
    if ((input_of[rd->recv_for[i]] = pool_take(pool)) == NULL)
      return weft_par_error(ncclInternalError, "weft_pp_interleaved_run: the buffer pool ran dry");
    remote++;
  }
  if (remote == 0 && (rd->send_to < 0 || rd->send_to == stage)) return ncclSuccess;
  PAR_CHECK(ncclGroupStart());
  ncclResult_t res = ncclSuccess;
  if (rd->send_to >= 0 && rd->send_to != stage)
    res = ncclSend(result, pool->count, ncclFloat32, rd->send_to, comm, NULL);
  for (int i = 0; i < rd->nrecv && res == ncclSuccess; i++)
    if (rd->recv_from[i] != stage)
      res = ncclRecv(input_of[rd->recv_for[i]], pool->count, ncclFloat32, rd->recv_from[i], comm, NULL);
  ncclResult_t end = ncclGroupEnd();
  if (res == ncclSuccess) res = end;
  if (res != ncclSuccess)
    return weft_par_error(res, "weft_pp_interleaved_run: send/recv failed: %s", ncclGetErrorString(res));
  return ncclSuccess;
}

ncclResult_t weft_pp_interleaved_run(ncclComm_t pp_comm, int chunks, int micro, size_t act_count,
                                     const weft_pp_chunk_stage_t *stage, weft_pp_stats_t *stats) {
  if (pp_comm == NULL || stage == NULL || stage->forward == NULL || stage->backward == NULL)
    PAR_INVALID("weft_pp_interleaved_run: pp_comm, the stage or one of its callbacks is NULL");
  if (act_count == 0) PAR_INVALID("weft_pp_interleaved_run: act_count is 0");
  int stages = 0, s = 0, nrounds = 0;
  PAR_CHECK(ncclCommCount(pp_comm, &stages));
  PAR_CHECK(ncclCommUserRank(pp_comm, &s));
  ncclResult_t res = weft_pp_interleaved_check(stages, chunks, micro);
  if (res != ncclSuccess) return res;
  int n = 2 * chunks * micro, nv = stages * chunks;
  weft_pp_round_t *rounds = NULL;
  PAR_CHECK(weft_pp_interleaved_plan(stages, s, chunks, micro, &rounds, &nrounds));
  weft_pp_chunk_op_t *ops = malloc((size_t)n * sizeof(*ops));
  float **input_of = calloc((size_t)n, sizeof(float *));
  pool_t pool = {NULL, NULL, 0, act_count};
  if (ops == NULL || input_of == NULL) {
    res = weft_par_error(ncclSystemError, "weft_pp_interleaved_run: out of memory");
    goto out;
  }
  PAR_CHECK_GOTO(weft_pp_interleaved_schedule(stages, s, chunks, micro, ops), res, out);
  int nbuf = pool_size(rounds, nrounds, ops, stages, s, chunks);
  pool.mem = malloc((size_t)nbuf * act_count * sizeof(float));
  pool.free_list = malloc((size_t)nbuf * sizeof(int));
  if (pool.mem == NULL || pool.free_list == NULL) {
    res = weft_par_error(ncclSystemError, "weft_pp_interleaved_run: out of memory for %d boundary buffers", nbuf);
    goto out;
  }
  for (int i = 0; i < nbuf; i++) pool.free_list[pool.nfree++] = nbuf - 1 - i;
  double start = now_s(), compute = 0;
  for (int r = 0; r < nrounds && res == ncclSuccess; r++) {
    const weft_pp_round_t *rd = &rounds[r];
    float *result = NULL;
    if (rd->op >= 0) {
      const weft_pp_chunk_op_t *op = &ops[rd->op];
      int vs = weft_pp_vstage(stages, s, op->chunk);
      float *in = input_of[rd->op];
      if (weft_pp_input_from(op, vs, nv) >= 0 && in == NULL) {
        res = weft_par_error(ncclInternalError, "weft_pp_interleaved_run: operation %d has no input", rd->op);
        break;
      }
      if (weft_pp_output_to(op, vs, nv) >= 0 && (result = pool_take(&pool)) == NULL) {
        res = weft_par_error(ncclInternalError, "weft_pp_interleaved_run: the buffer pool ran dry");
        break;
      }
      double t0 = now_s();
      res = op->backward ? stage->backward(stage->user, op->chunk, op->micro, in, result)
                         : stage->forward(stage->user, op->chunk, op->micro, in, result);
      compute += now_s() - t0;
      if (res != ncclSuccess) {
        weft_par_error(res, "weft_pp_interleaved_run: stage %d, chunk %d, micro-batch %d: %s failed", s, op->chunk,
                       op->micro, op->backward ? "backward" : "forward");
        break;
      }
      pool_give(&pool, in);
      input_of[rd->op] = NULL;
    }
    res = exchange(pp_comm, s, rd, result, &pool, input_of);
    if (rd->send_to != s) pool_give(&pool, result);  // sent (or kept by no one)
  }
  if (res == ncclSuccess && stats != NULL) {
    stats->wall_s = now_s() - start;
    stats->compute_s = compute;
    stats->bubble_measured = compute > 0 ? (stats->wall_s - compute) / compute : 0;
    stats->bubble_formula = (double)(stages - 1) / ((double)chunks * micro);
  }
out:
  free(rounds), free(ops), free(input_of), free(pool.mem), free(pool.free_list);
  return res;
}
