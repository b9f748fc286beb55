/*
 * net_transport.h — the network transport (net_transport.c): slot FIFOs to
 * ranks that shared memory does not serve, moved by a proxy thread over a
 * network backend (net.h).
 */
#ifndef WEFT_NET_TRANSPORT_H
#define WEFT_NET_TRANSPORT_H

#include "transport.h"

struct ncclComm;

// Collective over the communicator: decides which pairs need the network
// (other hosts, or NCCL_SHM_DISABLE=1), connects them and starts the proxy.
// Pairs shared memory serves are left alone. Run after shared memory is set up.
ncclResult_t weft_net_setup(struct ncclComm *comm);
// Flushes what was sent, says goodbye to the peers, stops the proxy, frees.
void weft_net_teardown(struct ncclComm *comm);

extern const weft_transport_t weft_net_transport;

#endif
