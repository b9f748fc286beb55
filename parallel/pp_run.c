/*
 * pp_run.c — executes one stage's pipeline schedule.
 *
 * Before each operation the stage receives what it needs (a forward's
 * input from the previous stage, a backward's output gradient from the
 * next) in one group together with the send of the previous operation's
 * result, so neighbouring stages that both send and receive never wait on
 * each other in a cycle. Only four boundary buffers exist, whatever M.
 */
#include <stdlib.h>
#include <time.h>

#include "par_util.h"
#include "pp.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct {
  const float *buf;
  int peer;  // -1: nothing to send
} pending_send_t;

static ncclResult_t exchange(ncclComm_t comm, size_t count, pending_send_t *send, float *recv, int recv_peer) {
  if (send->peer < 0 && recv_peer < 0) return ncclSuccess;
  PAR_CHECK(ncclGroupStart());
  ncclResult_t res = ncclSuccess;
  if (send->peer >= 0) res = ncclSend(send->buf, count, ncclFloat32, send->peer, comm, NULL);
  if (res == ncclSuccess && recv_peer >= 0) res = ncclRecv(recv, count, ncclFloat32, recv_peer, comm, NULL);
  ncclResult_t end = ncclGroupEnd();
  if (res == ncclSuccess) res = end;
  if (res != ncclSuccess) return weft_par_error(res, "weft_pp_run: send/recv failed: %s", ncclGetErrorString(res));
  send->peer = -1;
  return ncclSuccess;
}

ncclResult_t weft_pp_run(ncclComm_t pp_comm, weft_pp_kind_t kind, int micro, size_t act_count,
                         const weft_pp_stage_t *stage, weft_pp_stats_t *stats) {
  if (pp_comm == NULL || stage == NULL || stage->forward == NULL || stage->backward == NULL)
    PAR_INVALID("weft_pp_run: pp_comm, the stage or one of its callbacks is NULL");
  if (act_count == 0) PAR_INVALID("weft_pp_run: act_count is 0");
  int stages = 0, s = 0;
  PAR_CHECK(ncclCommCount(pp_comm, &stages));
  PAR_CHECK(ncclCommUserRank(pp_comm, &s));
  weft_pp_op_t *ops = malloc(2 * (size_t)(micro > 0 ? micro : 1) * sizeof(*ops));
  float *bufs = malloc(4 * act_count * sizeof(float));
  if (ops == NULL || bufs == NULL) {
    free(ops), free(bufs);
    return weft_par_error(ncclSystemError, "weft_pp_run: out of memory");
  }
  float *in = bufs, *out = bufs + act_count, *dout = bufs + 2 * act_count, *din = bufs + 3 * act_count;
  int first = s == 0, last = s == stages - 1;
  double start = now_s(), compute = 0;
  pending_send_t send = {NULL, -1};
  ncclResult_t res = weft_pp_schedule(kind, stages, s, micro, ops);
  for (int k = 0; k < 2 * micro && res == ncclSuccess; k++) {
    weft_pp_op_t op = ops[k];
    if (!op.backward) {
      if ((res = exchange(pp_comm, act_count, &send, in, first ? -1 : s - 1)) != ncclSuccess) break;
      double t0 = now_s();
      res = stage->forward(stage->user, op.micro, first ? NULL : in, last ? NULL : out);
      compute += now_s() - t0;
      send = (pending_send_t){out, last ? -1 : s + 1};
    } else {
      if ((res = exchange(pp_comm, act_count, &send, dout, last ? -1 : s + 1)) != ncclSuccess) break;
      double t0 = now_s();
      res = stage->backward(stage->user, op.micro, last ? NULL : dout, first ? NULL : din);
      compute += now_s() - t0;
      send = (pending_send_t){din, first ? -1 : s - 1};
    }
    if (res != ncclSuccess) weft_par_error(res, "weft_pp_run: stage %d, micro-batch %d: %s failed", s, op.micro,
                                           op.backward ? "backward" : "forward");
  }
  if (res == ncclSuccess) res = exchange(pp_comm, act_count, &send, NULL, -1);
  if (res == ncclSuccess && stats != NULL) {
    stats->wall_s = now_s() - start;
    stats->compute_s = compute;
    stats->bubble_measured = compute > 0 ? (stats->wall_s - compute) / compute : 0;
    stats->bubble_formula = (double)(stages - 1) / micro;
  }
  free(ops), free(bufs);
  return res;
}
