/*
 * cp_rows.c — the context-parallel group and the load-balanced split of a
 * sequence (see cp.h): which positions a rank holds, selecting its rows
 * out of a whole micro-batch, and gathering every rank's rows back.
 */
#include <string.h>

#include "cp.h"
#include "par_util.h"
#include "weft.h"

ncclResult_t weft_cp_init(weft_cp_t *cp, ncclComm_t comm) {
  if (cp == NULL) PAR_INVALID("weft_cp_init: cp is NULL");
  *cp = (weft_cp_t){comm, 1, 0, NULL};
  if (comm == NULL) return ncclSuccess;
  PAR_CHECK(ncclCommCount(comm, &cp->size));
  PAR_CHECK(ncclCommUserRank(comm, &cp->rank));
  if (cp->size > 1) PAR_CHECK(weftStreamCreate(&cp->stream));
  return ncclSuccess;
}

ncclResult_t weft_cp_free(weft_cp_t *cp) {
  if (cp == NULL || cp->stream == NULL) return ncclSuccess;
  ncclResult_t res = weftStreamSynchronize(cp->stream), r = weftStreamDestroy(cp->stream);
  cp->stream = NULL;
  return res != ncclSuccess ? res : r;
}

ncclResult_t weft_cp_check_seq(const weft_cp_t *cp, const char *api, int seq) {
  if (cp == NULL || cp->size < 1 || cp->rank < 0 || cp->rank >= cp->size || (cp->size > 1 && cp->comm == NULL))
    PAR_INVALID("%s: cp is not initialised (weft_cp_init)", api);
  if (seq < 1 || seq % (2 * cp->size) != 0)
    PAR_INVALID("%s: a sequence of %d positions does not split into 2 * cp = %d equal chunks", api, seq,
                2 * cp->size);
  return ncclSuccess;
}

int weft_cp_local_seq(const weft_cp_t *cp, int seq) { return seq / cp->size; }

// The chunk of the whole sequence that local chunk k (0 or 1) of `rank` is.
static int global_chunk(int size, int rank, int k) { return k == 0 ? rank : 2 * size - 1 - rank; }

int weft_cp_position(const weft_cp_t *cp, int seq, int local) {
  int c = seq / (2 * cp->size);
  return global_chunk(cp->size, cp->rank, local / c) * c + local % c;
}

ncclResult_t weft_cp_select_rows(const weft_cp_t *cp, int seq, int batch, size_t row_bytes, const void *full,
                                 void *local) {
  ncclResult_t res = weft_cp_check_seq(cp, "weft_cp_select_rows", seq);
  if (res != ncclSuccess) return res;
  if (full == NULL || local == NULL || batch < 1)
    PAR_INVALID("weft_cp_select_rows: full, local NULL or batch=%d below 1", batch);
  size_t chunk = (size_t)(seq / (2 * cp->size)) * (size_t)batch * row_bytes;
  for (int k = 0; k < 2; k++)  // ascending: in place never overwrites a source not yet moved
    memmove((char *)local + (size_t)k * chunk, (const char *)full + (size_t)global_chunk(cp->size, cp->rank, k) * chunk,
            chunk);
  return ncclSuccess;
}

ncclResult_t weft_cp_gather_rows(const weft_cp_t *cp, int seq, int batch, size_t row_bytes, const void *local,
                                 void *full, void *work) {
  ncclResult_t res = weft_cp_check_seq(cp, "weft_cp_gather_rows", seq);
  if (res != ncclSuccess) return res;
  if (full == NULL || local == NULL || work == NULL || batch < 1)
    PAR_INVALID("weft_cp_gather_rows: full, local, work NULL or batch=%d below 1", batch);
  size_t chunk = (size_t)(seq / (2 * cp->size)) * (size_t)batch * row_bytes;
  if (cp->size == 1) {
    memmove(full, local, 2 * chunk);
    return ncclSuccess;
  }
  PAR_CHECK(ncclAllGather(local, work, 2 * chunk, ncclInt8, cp->comm, NULL));
  for (int r = 0; r < cp->size; r++)
    for (int k = 0; k < 2; k++)
      memcpy((char *)full + (size_t)global_chunk(cp->size, r, k) * chunk, (const char *)work + (2 * (size_t)r + k) * chunk,
             chunk);
  return ncclSuccess;
}
