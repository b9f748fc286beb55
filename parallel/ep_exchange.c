/*
 * ep_exchange.c — moving token rows between the ranks of an expert-
 * parallel group: the counts every source sends each expert, the dispatch
 * (sources -> experts' ranks) and the combine (back to the sources), the
 * backward reusing both directions for gradients.
 *
 * With a capacity every peer block has the same size (E/P experts x
 * min(C, T) rows, padded), so one ncclAlltoAll moves it. Without one the
 * counts differ per peer: a group of ncclSend/ncclRecv moves exactly the
 * counted rows, skipping empty blocks on both sides (both know the counts
 * from the count exchange, so the calls always match). A rank's own block
 * is a copy. Every rank calls every exchange of a pass, whatever it holds.
 */
#include <string.h>

#include "moe_internal.h"

ncclResult_t weft_moe_exchange_counts(const weft_moe_t *moe, const moe_dims_t *d, moe_acts_t *a) {
  int P = d->P, El = d->El;
  if (P == 1)
    memcpy(a->rcount, a->scount, (size_t)El * sizeof(int32_t));
  else
    PAR_CHECK(ncclAlltoAll(a->scount, a->rcount, (size_t)El, ncclInt32, moe->ep_comm, NULL));
  // Peer blocks in rows: send's blocks follow expert order, recv's source order.
  for (int j = 0, s_at = 0, r_at = 0; j < P; j++) {
    int sn = 0, rn = 0;
    for (int l = 0; l < El; l++) sn += a->scount[j * El + l], rn += a->rcount[j * El + l];
    a->soff[j] = d->fixed ? j * El * d->fixed : s_at;
    a->roff[j] = d->fixed ? j * El * d->fixed : r_at;
    a->scnt[j] = d->fixed ? El * d->fixed : sn;
    a->rcnt[j] = d->fixed ? El * d->fixed : rn;
    s_at += sn, r_at += rn;
  }
  return ncclSuccess;
}

// Block j of `from` (offsets fo, counts fc) to rank j, which places it at
// its block for this rank in `to` (offsets to_off, counts tc).
static ncclResult_t exchange(const weft_moe_t *moe, const moe_dims_t *d, const float *from, const int32_t *fo,
                             const int32_t *fc, float *to, const int32_t *to_off, const int32_t *tc) {
  size_t h = (size_t)d->h;
  int me = moe->ep_rank;
  if (d->P > 1 && d->fixed) {
    PAR_CHECK(ncclAlltoAll(from, to, (size_t)d->El * d->fixed * h, ncclFloat32, moe->ep_comm, NULL));
    return ncclSuccess;
  }
  memcpy(to + (size_t)to_off[me] * h, from + (size_t)fo[me] * h, (size_t)fc[me] * h * sizeof(float));
  if (d->P == 1) return ncclSuccess;
  PAR_CHECK(ncclGroupStart());
  ncclResult_t res = ncclSuccess;
  for (int j = 0; j < d->P && res == ncclSuccess; j++) {
    if (j == me) continue;
    if (fc[j] > 0) res = ncclSend(from + (size_t)fo[j] * h, (size_t)fc[j] * h, ncclFloat32, j, moe->ep_comm, NULL);
    if (res == ncclSuccess && tc[j] > 0)
      res = ncclRecv(to + (size_t)to_off[j] * h, (size_t)tc[j] * h, ncclFloat32, j, moe->ep_comm, NULL);
  }
  ncclResult_t end = ncclGroupEnd();
  PAR_CHECK(res);
  PAR_CHECK(end);
  return ncclSuccess;
}

ncclResult_t weft_moe_dispatch(const weft_moe_t *moe, const moe_dims_t *d, moe_acts_t *a) {
  return exchange(moe, d, a->send, a->soff, a->scnt, a->recv, a->roff, a->rcnt);
}

ncclResult_t weft_moe_combine(const weft_moe_t *moe, const moe_dims_t *d, moe_acts_t *a) {
  return exchange(moe, d, a->recv, a->roff, a->rcnt, a->back, a->soff, a->scnt);
}
