/*
 * net_ib_fifo.c — flow control of the verbs backend, as pure functions.
 *
 * NCCL's design: for each posted receive the receiver RDMA-writes a
 * descriptor (address, rkey, size, sequence number) into slot seq % depth
 * of a FIFO in the sender's memory; the sender writes message seq straight
 * into that buffer. The receiver holds at most `depth` descriptors not yet
 * finished (its credits), so it never overwrites a slot the sender has not
 * consumed; the sender takes slots strictly in order and recognises a new
 * descriptor by its sequence number (message index + 1), so a slot still
 * holding the previous lap's descriptor, or never written, reads as "not
 * yet". Anything else in the slot is garbage and fails the connection.
 */
#include <string.h>

#include "net_ib.h"

void weft_ib_fifo_rx_init(weft_ib_fifo_rx_t *rx, uint32_t depth, uint64_t start) {
  rx->depth = depth ? depth : 1;
  rx->posted = rx->done = start;
}

void weft_ib_fifo_tx_init(weft_ib_fifo_tx_t *tx, uint32_t depth, uint64_t start) {
  tx->depth = depth ? depth : 1;
  tx->taken = start;
}

uint32_t weft_ib_fifo_rx_credits(const weft_ib_fifo_rx_t *rx) {
  uint64_t out = rx->posted - rx->done;
  return out >= rx->depth ? 0 : rx->depth - (uint32_t)out;
}

int weft_ib_fifo_rx_post(weft_ib_fifo_rx_t *rx, uint64_t addr, uint32_t rkey, uint64_t size,
                         weft_ib_fifo_entry_t *entry, uint32_t *slot) {
  if (weft_ib_fifo_rx_credits(rx) == 0) return -1;
  memset(entry, 0, sizeof(*entry));
  entry->addr = addr;
  entry->rkey = rkey;
  entry->size = size;
  entry->seq = rx->posted + 1;
  *slot = (uint32_t)(rx->posted % rx->depth);
  rx->posted++;
  return 0;
}

int weft_ib_fifo_rx_complete(weft_ib_fifo_rx_t *rx) {
  if (rx->done == rx->posted) return -1;
  rx->done++;
  return 0;
}

int weft_ib_fifo_tx_take(weft_ib_fifo_tx_t *tx, const volatile weft_ib_fifo_entry_t *fifo, weft_ib_fifo_entry_t *out) {
  const volatile weft_ib_fifo_entry_t *e = &fifo[tx->taken % tx->depth];
  uint64_t seq = e->seq, want = tx->taken + 1;
  if (seq != want) {
    int stale = seq == 0 || (want > tx->depth && seq == want - tx->depth);
    return stale ? 0 : -1;
  }
  __atomic_thread_fence(__ATOMIC_ACQUIRE);  // the descriptor's other fields were written before its seq
  out->addr = e->addr;
  out->rkey = e->rkey;
  out->pad = 0;
  out->size = e->size;
  out->seq = seq;
  tx->taken++;
  return 1;
}
