/*
 * transport.h — the seam between the core and the ways bytes move.
 *
 * A connection is one ordered, bounded FIFO of slots from one rank to
 * another for one traffic class (collectives and point-to-point traffic use
 * separate connections, so their orders never interfere). The engine only
 * ever asks a connection for the next free slot to fill or the next full
 * slot to read; it writes reductions straight into send slots and reads
 * straight out of receive slots, so a transport that can expose its buffers
 * (shared memory) costs one copy per hop.
 *
 * A transport never sees the communicator. The core hands it a view
 * (weft_transport_view_t): who the ranks are and where they live, the
 * bootstrap ring's allgather to agree with its peers during set-up, each same-host
 * rank's doorbell, the communicator's failure word, the slot geometry and
 * the table of connections to fill. The core walks its registry
 * (src/core/connect.c: shm, then net) and gives each peer to the first
 * transport whose can_connect accepts it; then it sets up every transport,
 * in registry order, on every rank, with the peers it serves (set-up is
 * collective even for a transport that serves no peer here).
 */
#ifndef WEFT_TRANSPORT_H
#define WEFT_TRANSPORT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "doorbell.h"
#include "nccl.h"

enum { WEFT_CLASS_COLL = 0, WEFT_CLASS_P2P = 1, WEFT_NUM_CLASSES = 2 };

// A tag the engine never gives a slot: transports use it for their own
// messages (the network transport's failure notice, net/net_notice.h).
#define WEFT_TAG_FAILURE UINT32_MAX

// The most slots a FIFO may have (WEFT_SLOTS; the shared-memory FIFO's control block holds this many).
#define WEFT_TRANSPORT_MAX_SLOTS 64

typedef struct weft_conn weft_conn_t;
typedef struct weft_transport weft_transport_t;

// A network backend's device as a topology may know it (the view's net_device).
typedef struct {
  const char *name;   // interface or RDMA device: "eth0", "mlx5_0"
  int port;           // RDMA port, 0 for none
  const char *busid;  // PCI bus id, NULL or "" unknown
} weft_net_dev_t;

// What a transport sees of its communicator; filled by the core before the
// first can_connect and valid until the last teardown.
typedef struct weft_transport_view {
  int rank, nranks;
  const int *host_of;           // [nranks]: host index of each rank (hosts numbered by their first rank)
  uint64_t id_hash;             // the communicator, for logs
  // The bootstrap ring's allgather (collective, blocking; set-up only):
  // data holds nranks blocks of `size` bytes, this rank's at data + rank * size.
  ncclResult_t (*allgather)(const struct weft_transport_view *v, void *data, size_t size);
  const uint8_t *secret;        // secret_bytes: proves a connection belongs to this communicator
  size_t secret_bytes;
  // The rank's own doorbell, and those of the ranks of this host (NULL for
  // other hosts): ring a peer's after posting data for it or freeing its slot.
  weft_doorbell_t *(*doorbell)(const struct weft_transport_view *v, int rank);
  // The communicator's failure word: fail() records the first failure for
  // every rank of this host and wakes them; failed() is nonzero once the
  // communicator failed or was aborted. Both may be called from any thread.
  void (*fail)(const struct weft_transport_view *v, ncclResult_t code, const char *reason);
  int (*failed)(const struct weft_transport_view *v);
  // Optional (NULL: unknown): the first failure recorded on this host, as
  // text, into buf[len] ("" when none is recorded).
  void (*failure)(const struct weft_transport_view *v, char *buf, size_t len);
  // The process's network backend (transports/net/net.h), chosen once, on
  // the first call, by the core: an NCCL net plugin, the verbs or the socket
  // backend; NULL with *res saying why when none can start.
  const struct weft_net *(*net_backend)(ncclResult_t *res);
  // Which of that backend's devices devs[0..ndevs) this rank listens and
  // connects on: the core asks the topology (the NIC nearest the rank's GPU
  // or NUMA node, the ranks of a node taking equally near NICs in turn as
  // rails; device 0 where it cannot say). why (len bytes) says why, for
  // the log. Returns the index, or -1 with the reason in why.
  int (*net_device)(const struct weft_transport_view *v, const weft_net_dev_t *devs, int ndevs, char *why,
                    size_t len);
  size_t slot_bytes, nslots;    // every connection's FIFO geometry (the same on every rank)
  weft_conn_t *conns;           // [WEFT_NUM_CLASSES][2 (recv=0, send=1)][nranks], filled by setup
  int can_read;                 // set by setup: every rank can read (and so write) every other rank's memory
  void *core;                   // the core's, behind the callbacks above
} weft_transport_view_t;

struct weft_transport {
  const char *name;
  // May this transport connect the view's rank with `peer`? Pure; no side
  // effects; the same answer on both ranks of a pair (for the same settings).
  int (*can_connect)(const weft_transport_view_t *v, int peer);
  // Collective over the communicator: creates the connections to the peers
  // with serve[peer] != 0 (this rank's own included when it serves it) and
  // stores them in v->conns; *state is the transport's, handed to teardown.
  ncclResult_t (*setup)(weft_transport_view_t *v, const uint8_t *serve, void **state);
  // Frees what setup made; safe after a failed or partial setup (state may be NULL).
  void (*teardown)(weft_transport_view_t *v, void *state);
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
  // nothing can still write into a buffer recv_expect was given.
  void (*quiesce)(weft_conn_t *c);
  // Copy `bytes` from address `remote` in the peer's memory into dst
  // (blocking, bounded by the copy itself). NULL when the transport cannot
  // reach peer memory; then v->can_read is 0 and no schedule reads.
  ncclResult_t (*read)(weft_conn_t *c, void *dst, uint64_t remote, size_t bytes);
  // Copy `bytes` from src into address `remote` in the peer's memory
  // (blocking, bounded by the copy itself). NULL exactly when read is.
  ncclResult_t (*write)(weft_conn_t *c, uint64_t remote, const void *src, size_t bytes);
};

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

// The connection of class cls in direction is_send with `peer`.
static inline weft_conn_t *weft_view_conn(const weft_transport_view_t *v, int cls, int is_send, int peer) {
  return &v->conns[((size_t)cls * 2 + (size_t)is_send) * (size_t)v->nranks + (size_t)peer];
}

// Claim a connection for transport tp (setup): the fields every transport sets.
static inline weft_conn_t *weft_view_claim(const weft_transport_view_t *v, const weft_transport_t *tp, int cls,
                                           int is_send, int peer, void *priv) {
  weft_conn_t *c = weft_view_conn(v, cls, is_send, peer);
  c->tp = tp;
  c->peer = peer;
  c->cls = cls;
  c->is_send = is_send;
  c->slot_bytes = v->slot_bytes;
  c->priv = priv;
  return c;
}

// The registry, in the order the core tries them (src/core/connect.c).
extern const weft_transport_t weft_shm_transport;  // transports/shm/
extern const weft_transport_t weft_net_transport;  // transports/net/

#endif
