/*
 * mismatch.c — catching ranks that call different collectives.
 *
 * At launch each rank writes a descriptor of its collective (kind, count,
 * datatype, op, root, algorithm, slice, buffers) into the ring in its
 * control segment (segment.h), and every slot it sends carries a 32-bit tag
 * of the sequence number and that descriptor. A receiver compares tags on
 * the first slot; peers whose tags a rank never sees (it only sends to
 * them) are compared by descriptor before it sleeps and before the
 * operation completes, and schedules that read peer memory compare
 * descriptors first (they need the peer's buffer addresses). A difference
 * fails the operation with ncclInvalidUsage and a WARN saying what each
 * rank called. Ranks on other hosts have no descriptor here: their tags
 * vouch for them.
 */
#include "mismatch.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "checks.h"
#include "segment.h"
#include "dtype.h"

static void describe(const weft_desc_t *d, char *buf, size_t len) {
  snprintf(buf, len, "%s count=%" PRIu64 " %s %s root=%d algo=%s slice=%" PRIu64, weft_coll_name(d->coll), d->count,
           weft_dtype_name(d->dtype), weft_coll_has_op(d->coll) ? weft_op_name(d->op) : "-", d->root,
           weft_algo_name(d->algo), d->slice);
}

static void fill_desc(const weft_op_t *op, weft_desc_t *d) {
  d->coll = (uint8_t)op->args.coll;
  d->dtype = (uint8_t)op->dtype;
  d->algo = (uint8_t)op->algo;
  d->op = (uint8_t)(op->user_op < ncclNumOps ? op->user_op : ncclNumOps);
  d->root = op->args.root;
  d->count = op->args.count;
  d->slice = op->args.slice;
  d->sendbuff = (uint64_t)(uintptr_t)op->sendbuff;
  d->recvbuff = (uint64_t)(uintptr_t)op->recvbuff;
}

void weft_mismatch_publish(const weft_op_t *op) {
  weft_desc_t *d = &op->comm->seg->hdr[op->comm->rank]->desc[op->seq % WEFT_DESC_RING];
  atomic_store_explicit(&d->seq, 0, memory_order_relaxed);
  fill_desc(op, d);
  atomic_store_explicit(&d->seq, op->seq + 1, memory_order_release);
}

uint32_t weft_mismatch_tag(const weft_op_t *op) {
  weft_desc_t d = {0};
  fill_desc(op, &d);
  uint64_t h = op->seq * 0x9e3779b97f4a7c15ull;
  const uint64_t parts[] = {d.coll | (uint64_t)d.dtype << 8 | (uint64_t)d.algo << 16 | (uint64_t)d.op << 24 |
                                (uint64_t)(uint32_t)d.root << 32,
                            d.count, d.slice};
  for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
    h ^= parts[i] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
  }
  uint32_t t = (uint32_t)(h ^ (h >> 32));
  return t != 0 ? t : 1;
}

// 1: peer's descriptor matches ours (and, for schedules that read peer
// memory, its buffer addresses are known); 0: the peer has not launched the
// call yet; -1: mismatch (the operation has failed).
int weft_mismatch_verify_peer(weft_op_t *op, int peer) {
  // verified[peer]: 0 unknown, 1 its slot tags matched, 2 its descriptor matched (buffers known).
  if (op->cls != WEFT_CLASS_COLL || op->verified[peer] == 2 || (op->verified[peer] == 1 && !op->reads)) return 1;
  if (!op->check && !op->reads) {
    op->verified[peer] = 1;
    return 1;
  }
  if (op->comm->seg->hdr[peer] == NULL) {  // another host: no descriptor board; its slot tags vouch for it
    op->verified[peer] = 1;
    return 1;
  }
  weft_desc_t *d = &op->comm->seg->hdr[peer]->desc[op->seq % WEFT_DESC_RING];
  uint64_t s1 = atomic_load_explicit(&d->seq, memory_order_acquire);
  if (s1 < op->seq + 1) return 0;
  weft_desc_t theirs, mine;
  memcpy(&theirs, d, sizeof(theirs));
  uint64_t s2 = atomic_load_explicit(&d->seq, memory_order_acquire);
  if (s1 != op->seq + 1 || s2 != s1) {  // the peer is already further on; it cannot be checked
    if (op->reads) {  // impossible unless ranks disagree on the schedule: the peer waits for our tokens
      char reason[200];
      snprintf(reason, sizeof(reason), "rank %d moved past collective #%" PRIu64 " before rank %d read its buffers",
               peer, op->seq, op->comm->rank);
      WARN("%s", reason);
      weft_op_fail(op, ncclInternalError, reason);
      return -1;
    }
    op->verified[peer] = 1;
    return 1;
  }
  if (op->reads) {
    op->peer_buf[2 * peer] = theirs.sendbuff;
    op->peer_buf[2 * peer + 1] = theirs.recvbuff;
  }
  fill_desc(op, &mine);
  if (!op->check || (theirs.coll == mine.coll && theirs.dtype == mine.dtype && theirs.op == mine.op &&
                     theirs.root == mine.root && theirs.count == mine.count && theirs.slice == mine.slice &&
                     theirs.algo == mine.algo)) {
    op->verified[peer] = 2;
    return 1;
  }
  char a[160], b[160], reason[400];
  describe(&mine, a, sizeof(a));
  describe(&theirs, b, sizeof(b));
  snprintf(reason, sizeof(reason), "collective #%" PRIu64 " differs: rank %d called %s, rank %d called %s", op->seq,
           op->comm->rank, a, peer, b);
  WARN("%s", reason);
  weft_op_fail(op, ncclInvalidUsage, reason);
  return -1;
}

// A slot from `peer` carried another call's tag: say what each rank called.
void weft_mismatch_tag_differs(weft_op_t *op, int peer) {
  if (weft_mismatch_verify_peer(op, peer) < 0) return;  // the descriptors tell the story (and failed the op)
  char a[160], reason[400];
  weft_desc_t mine;
  fill_desc(op, &mine);
  describe(&mine, a, sizeof(a));
  snprintf(reason, sizeof(reason),
           "rank %d received data from rank %d that belongs to another call than its collective #%" PRIu64
           " (%s): the ranks disagree on the order or number of collectives",
           op->comm->rank, peer, op->seq, a);
  WARN("%s", reason);
  weft_op_fail(op, ncclInvalidUsage, reason);
}


// verify_peer for every peer the operation exchanges slots with: 1 when all
// run the same call, 0 while one has not launched it, -1 if one launched a
// different call (the operation has then failed).
int weft_mismatch_check_peers(weft_op_t *op) {
  int all = 1;
  for (int p = 0; p < op->comm->nranks; p++) {
    if (op->verified[p] || (op->send_ticket[p] < 0 && op->recv_ticket[p] < 0)) continue;
    int v = weft_mismatch_verify_peer(op, p);
    if (v < 0) return -1;
    if (v == 0) all = 0;
  }
  return all;
}
