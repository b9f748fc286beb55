/*
 * pp_replay.c — replaying pipeline schedules against each other
 * (pp_replay.h): pure arithmetic, no communication.
 */
#include "pp_replay.h"

#include <stdlib.h>

#include "par_util.h"
#include "pp_interleaved_internal.h"

ncclResult_t weft_pp_replay(const char *api, int stages, int chunks, int micro, const weft_pp_chunk_op_t *ops,
                            double tf, double tb, double *bubble) {
  ncclResult_t res = ncclSuccess;
  int nv = stages * chunks, n = 2 * chunks * micro;
  double *fdone = malloc((size_t)nv * micro * sizeof(double)), *bdone = malloc((size_t)nv * micro * sizeof(double));
  int *next = calloc((size_t)stages, sizeof(int));
  double *clock = calloc((size_t)stages, sizeof(double));
  if (fdone == NULL || bdone == NULL || next == NULL || clock == NULL) {
    res = weft_par_error(ncclSystemError, "%s: out of memory", api);
    goto out;
  }
  for (size_t i = 0; i < (size_t)nv * micro; i++) fdone[i] = bdone[i] = -1;  // not yet run
  for (int done = 0, progress = 1; done < stages * n && progress;) {
    progress = 0;
    for (int s = 0; s < stages; s++) {
      while (next[s] < n) {  // this stage's next operation, once its input exists
        const weft_pp_chunk_op_t *op = &ops[(size_t)s * n + next[s]];
        int vs = weft_pp_vstage(stages, s, op->chunk), from = weft_pp_input_from(op, vs, nv);
        double ready = 0;
        if (from >= 0)
          ready = (op->backward ? bdone : fdone)[(size_t)from * micro + op->micro];
        else if (op->backward)  // the last virtual stage starts from its own forward
          ready = fdone[(size_t)vs * micro + op->micro];
        if (ready < 0) break;
        double start = ready > clock[s] ? ready : clock[s];
        clock[s] = start + (op->backward ? tb : tf) / chunks;
        (op->backward ? bdone : fdone)[(size_t)vs * micro + op->micro] = clock[s];
        next[s]++, done++, progress = 1;
      }
    }
    if (!progress) res = weft_par_error(ncclInternalError, "%s: the schedules deadlock", api);
  }
  if (res == ncclSuccess) {
    double makespan = 0, busy = micro * (tf + tb);
    for (int s = 0; s < stages; s++) makespan = clock[s] > makespan ? clock[s] : makespan;
    *bubble = (makespan - busy) / busy;
  }
out:
  free(fdone), free(bdone), free(next), free(clock);
  return res;
}
