/*
 * rendezvous.h — ncclUniqueId contents and the root that introduces ranks.
 *
 * A unique id carries the root's address and a random secret. The process
 * that calls ncclGetUniqueId hosts the root in a background thread (whether
 * or not it is a rank); with NCCL_COMM_ID (or a launcher's environment) rank
 * 0 hosts it instead. Each rank connects, proves it knows the secret, and
 * registers its bootstrap listen address; once all ranks have arrived the
 * root sends everyone the table and exits. Every wait is bounded by
 * WEFT_TIMEOUT, and a timeout names the ranks that never arrived. Strangers
 * (wrong secret, garbage) are logged and dropped; the job goes on. A silent
 * connection may be a rank whose hello TCP is still retransmitting, so it
 * keeps its place until the root needs the slot or finishes.
 *
 * ncclCommInitRankScalable spreads registration over several roots: root k
 * collects a contiguous range of ranks, forwards it to root 0, and relays
 * the full table back.
 */
#ifndef WEFT_RENDEZVOUS_H
#define WEFT_RENDEZVOUS_H

#include <stdint.h>

#include "nccl.h"
#include "socket.h"

#define WEFT_ID_MAGIC 0x77656674u  // "weft"
#define WEFT_SECRET_BYTES 32

enum { WEFT_ID_HOSTED_BY_RANK0 = 0x1 };

typedef struct {
  uint32_t magic;
  uint32_t flags;
  weft_sockaddr_t root;
  uint8_t secret[WEFT_SECRET_BYTES];
} weft_id_t;

// What every rank tells the others at start-up.
typedef struct {
  int32_t rank;
  int32_t pid;
  uint64_t host_hash;       // host name + boot id
  weft_sockaddr_t listen;   // bootstrap listen address
} weft_peer_info_t;

// Decode / validate an ncclUniqueId.
ncclResult_t weft_id_decode(const ncclUniqueId *uid, weft_id_t *id);
void weft_id_encode(const weft_id_t *id, ncclUniqueId *uid);

// New id with a fresh secret and a root listening here (ncclGetUniqueId);
// with NCCL_COMM_ID set, the id of that address instead.
ncclResult_t weft_rendezvous_create(ncclUniqueId *uid);
// Always a fresh secret and a root here, whatever NCCL_COMM_ID says
// (ncclCommGetUniqueId: that address already served the parent).
ncclResult_t weft_rendezvous_create_root(ncclUniqueId *uid);
// Id for "rendezvous at hostport, hosted by rank 0" (NCCL_COMM_ID, launchers).
ncclResult_t weft_rendezvous_id_from_addr(const char *hostport, ncclUniqueId *id);

// Register with the root(s) and receive the table of all ranks (nranks entries,
// indexed by rank). ids: nid unique ids (1 except for ncclCommInitRankScalable).
ncclResult_t weft_rendezvous_join(const weft_id_t *ids, int nid, int nranks, const weft_peer_info_t *me,
                                  weft_peer_info_t *table);

// Host identity: hash of host name and boot id (WEFT_HOSTID overrides).
uint64_t weft_host_hash(void);

#endif
