/*
 * segment.c — creating, mapping and tearing down the host control block
 * (see segment.h), and publishing a failure through its abort word.
 *
 * Each rank creates its segment under a name only it knows until the
 * bootstrap allgather and maps the segments of the other ranks of its
 * host; the name is unlinked once every rank has mapped it, which the
 * caller learns from its next collective step (weft_segment_unlink).
 */
#include "segment.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "checks.h"
#include "shmem.h"
#include "util.h"

typedef struct {
  char name[64];
  uint64_t bytes, slot_bytes, nslots;
} seg_card_t;

ncclResult_t weft_segment_open(weft_bootstrap_t *bs, const int *host_of, size_t slot_bytes, size_t nslots,
                               weft_segment_t **out) {
  int me = bs->rank, n = bs->nranks;
  ncclResult_t res = ncclSuccess;
  weft_segment_t *seg = calloc(1, sizeof(*seg));
  seg_card_t *cards = calloc((size_t)n, sizeof(*cards));
  *out = seg;
  if (seg == NULL || cards == NULL) {
    free(cards);
    return ncclSystemError;
  }
  seg->rank = me;
  seg->nranks = n;
  for (seg->leader = 0; host_of[seg->leader] != host_of[me];) seg->leader++;
  seg->bytes = WEFT_ALIGN_UP(sizeof(weft_segment_header_t) + (size_t)bs->nranks * sizeof(uint64_t), 4096);
  seg->hdr = calloc((size_t)n, sizeof(*seg->hdr));
  if (seg->hdr == NULL) { res = ncclSystemError; goto out; }

  weft_shmem_name(seg->name, sizeof(seg->name), "weft", me);
  WEFTCHECKGOTO(weft_shmem_map(seg->name, seg->bytes, 1, (void **)&seg->hdr[me]), res, out);
  seg->name_live = 1;
  weft_segment_header_t *h = seg->hdr[me];
  h->magic = WEFT_SEGMENT_MAGIC;
  h->nranks = (uint32_t)n;
  h->rank = (uint32_t)me;
  h->pid = (int32_t)getpid();
  h->pidns = weft_segment_pidns();
  INFO(WEFT_LOG_SHM, "control segment %s: %zu bytes", seg->name, seg->bytes);

  // Exchange names and map the segments of this host's ranks.
  snprintf(cards[me].name, sizeof(cards[me].name), "%s", seg->name);
  cards[me].bytes = seg->bytes;
  cards[me].slot_bytes = slot_bytes;
  cards[me].nslots = nslots;
  WEFTCHECKGOTO(weft_bootstrap_allgather(bs, cards, sizeof(*cards)), res, out);
  for (int p = 0; p < n; p++) {
    if (cards[p].slot_bytes != slot_bytes || cards[p].nslots != nslots) {
      WARN("rank %d uses WEFT_SLOT_BYTES=%llu WEFT_SLOTS=%llu but rank %d uses %zu and %zu; they must match",
           p, (unsigned long long)cards[p].slot_bytes, (unsigned long long)cards[p].nslots, me, slot_bytes, nslots);
      res = ncclInvalidUsage;
      goto out;
    }
    if (p != me && host_of[p] == host_of[me])
      WEFTCHECKGOTO(weft_shmem_map(cards[p].name, cards[p].bytes, 0, (void **)&seg->hdr[p]), res, out);
  }
  weft_segment_watch_peers(seg);
out:
  free(cards);
  return res;
}

void weft_segment_unlink(weft_segment_t *seg) {
  if (seg == NULL || !seg->name_live) return;
  shm_unlink(seg->name);
  seg->name_live = 0;
}

void weft_segment_close(weft_segment_t *seg) {
  if (seg == NULL) return;
  if (seg->name_live) shm_unlink(seg->name);
  if (seg->hdr != NULL && seg->hdr[seg->rank] != NULL) atomic_store(&seg->hdr[seg->rank]->closed, 1);
  weft_segment_unwatch_peers(seg);
  for (int p = 0; seg->hdr != NULL && p < seg->nranks; p++)
    if (seg->hdr[p] != NULL) munmap(seg->hdr[p], seg->bytes);
  free(seg->hdr);
  free(seg);
}

void weft_segment_abort(weft_segment_t *seg, ncclResult_t code, const char *reason) {
  weft_segment_header_t *h0 = weft_segment_abort_header(seg);
  int32_t expected = 0;
  if (h0 == NULL) return;  // set-up failed before this host's abort word was mapped
  // The reason is written before the code is published, so readers see it whole.
  if (atomic_load(&h0->abort_code) == 0) {
    snprintf(h0->abort_reason, sizeof(h0->abort_reason), "%s", reason);
    h0->abort_rank = seg->rank;
    atomic_compare_exchange_strong(&h0->abort_code, &expected, (int32_t)code);
  }
  for (int p = 0; p < seg->nranks; p++)
    if (seg->hdr[p] != NULL) weft_doorbell_ring(&seg->hdr[p]->doorbell);
}
