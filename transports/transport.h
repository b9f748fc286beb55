/*
 * transport.h — the seam between the engine and the ways bytes move.
 *
 * A connection is one ordered, bounded FIFO of slots from one rank to
 * another for one traffic class (collectives and point-to-point traffic use
 * separate connections, so their orders never interfere). The engine only
 * ever asks a connection for the next free slot to fill or the next full
 * slot to read; it writes reductions straight into send slots and reads
 * straight out of receive slots, so a transport that can expose its buffers
 * (shared memory) costs one copy per hop.
 *
 * Transports are tried in registry order; the first whose can_connect
 * accepts a pair serves it. All calls below are non-blocking.
 */
#ifndef WEFT_TRANSPORT_H
#define WEFT_TRANSPORT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

struct ncclComm;

enum { WEFT_CLASS_COLL = 0, WEFT_CLASS_P2P = 1, WEFT_NUM_CLASSES = 2 };

typedef struct weft_conn weft_conn_t;

typedef struct weft_transport {
  const char *name;
  // May this transport connect comm's rank with `peer`? Pure; no side effects.
  int (*can_connect)(struct ncclComm *comm, int peer);
  // Collective over the communicator (uses its bootstrap): creates the
  // connections this transport serves and stores them in comm->conns.
  ncclResult_t (*setup)(struct ncclComm *comm);
  // Frees what setup made; safe after a failed or partial setup.
  void (*teardown)(struct ncclComm *comm);
  // Sender: the next free slot (conn->slot_bytes long), or NULL if all are full.
  void *(*send_slot)(weft_conn_t *c);
  // Sender: publish the slot from send_slot holding `bytes` bytes; wakes the
  // receiver. `tag` travels with the slot untouched (the engine uses it to
  // check that both sides run the same collective).
  void (*send_post)(weft_conn_t *c, size_t bytes, uint32_t tag);
  // Receiver: the next full slot, its length and tag, or NULL if none is ready.
  const void *(*recv_slot)(weft_conn_t *c, size_t *bytes, uint32_t *tag);
  // Receiver: the slot from recv_slot has been consumed; wakes the sender.
  void (*recv_release)(weft_conn_t *c);
  // Optional (NULL: messages always land in slots). Receiver: the next
  // messages may land straight in the engine's buffers. recv_expect_room:
  // how many more messages may be described now; recv_expect: the next
  // undescribed message goes to dst (NULL: its slot) if it is `bytes` long
  // and tagged `tag` (0: any); recv_landed: 1 once the next message is at
  // its described dst (*got and *tag set; consumed), 0 not yet, -1 when it
  // is in a slot (use recv_slot for it).
  size_t (*recv_expect_room)(weft_conn_t *c);
  void (*recv_expect)(weft_conn_t *c, void *dst, size_t bytes, uint32_t tag);
  int (*recv_landed)(weft_conn_t *c, size_t *got, uint32_t *tag);
  // Optional. After an operation on the connection failed: returns once
  // nothing can still write into a buffer recv_into was given.
  void (*quiesce)(weft_conn_t *c);
  // Copy `bytes` from address `remote` in the peer's memory into dst
  // (blocking, bounded by the copy itself). NULL when the transport cannot
  // reach peer memory; then comm->can_read is 0 and no schedule reads.
  ncclResult_t (*read)(weft_conn_t *c, void *dst, uint64_t remote, size_t bytes);
} weft_transport_t;

struct weft_conn {
  const weft_transport_t *tp;
  int peer;
  int cls;
  int is_send;
  size_t slot_bytes;
  // Ordering: an operation may use the connection only when `served` equals
  // the ticket it was given at launch (tickets are issued in launch order,
  // which every rank shares), so operations never interleave their slots.
  uint64_t issued;
  _Atomic uint64_t served;
  void *priv;  // the transport's state
};

extern const weft_transport_t weft_shm_transport;

#endif
