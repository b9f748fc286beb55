/*
 * net_choice.h — the network a rank uses: the process's backend and the
 * rank's device on it (net_choice.c), lent to the network transport
 * through its view (net_backend, net_device).
 */
#ifndef WEFT_NET_CHOICE_H
#define WEFT_NET_CHOICE_H

#include <stddef.h>

#include "comm.h"  // the view (transports/transport.h)
#include "net.h"   // weft_net_t

// The network backend the process uses, chosen and started on the first
// call; NULL with *res saying why when none can start.
const weft_net_t *weft_net_backend(ncclResult_t *res);

// weft_transport_view_t.net_device for a communicator's view (v->core is
// the communicator): the topology's choice for its local rank.
int weft_comm_net_device(const weft_transport_view_t *v, const weft_net_dev_t *devs, int ndevs, char *why,
                         size_t len);

#endif
