/*
 * bootstrap.h — out-of-band communication among the ranks of a communicator.
 *
 * After the rendezvous each rank knows every rank's listen address; the
 * bootstrap connects a ring of TCP sockets (rank r -> r+1), authenticated
 * with the job's secret, and offers the few blocking collectives that set-up
 * needs: allgather and barrier. It is slow on purpose-free paths only
 * (init, split, shared-memory set-up); the data path never touches it.
 * Each rank's listen socket stays open while the communicator lives, so
 * ncclCommShrink can reach any rank at the address every rank already
 * knows without the ring (which may run through dead ranks).
 */
#ifndef WEFT_BOOTSTRAP_H
#define WEFT_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"
#include "rendezvous.h"

typedef struct {
  int rank, nranks;
  uint8_t secret[WEFT_SECRET_BYTES];
  int send_fd;  // to rank+1
  int recv_fd;  // from rank-1
  int listen_fd;  // this rank's bootstrap listener (peers[rank].listen), kept for ncclCommShrink
  uint32_t tag; // counts bootstrap operations, to catch ranks out of step
  weft_peer_info_t *peers;  // nranks entries
} weft_bootstrap_t;

// Open a listen socket on the bootstrap interface; fills info->listen.
ncclResult_t weft_bootstrap_listen(weft_peer_info_t *info, int *listen_fd);
// Connect the ring given every rank's info. Takes ownership of listen_fd:
// it is kept in bs->listen_fd (and *listen_fd set to -1), or closed on failure.
ncclResult_t weft_bootstrap_connect(weft_bootstrap_t *bs, int rank, int nranks, const uint8_t *secret,
                                    const weft_peer_info_t *peers, int *listen_fd);
// data holds nranks blocks of `size` bytes; this rank's block is data + rank*size.
ncclResult_t weft_bootstrap_allgather(weft_bootstrap_t *bs, void *data, size_t size);
ncclResult_t weft_bootstrap_barrier(weft_bootstrap_t *bs);
// Set every descriptor to -1 (before the ring exists): weft_bootstrap_close is then safe.
void weft_bootstrap_reset(weft_bootstrap_t *bs);
void weft_bootstrap_close(weft_bootstrap_t *bs);

#endif
