/*
 * init_net.h — at communicator set-up: which network device a rank uses
 * (init_net.c), the view's net_device.
 */
#ifndef WEFT_INIT_NET_H
#define WEFT_INIT_NET_H

#include <stddef.h>

#include "comm.h"  // the view (transports/transport.h)

// weft_transport_view_t.net_device for a communicator's view (v->core is
// the communicator): the topology's choice for its local rank.
int weft_comm_net_device(const weft_transport_view_t *v, const weft_net_dev_t *devs, int ndevs, char *why,
                         size_t len);

#endif
