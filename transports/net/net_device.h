/*
 * net_device.h — which of the network backend's devices a rank uses
 * (net_device.c).
 */
#ifndef WEFT_NET_DEVICE_H
#define WEFT_NET_DEVICE_H

#include "net.h"
#include "transport.h"

// The device the view's rank listens and connects on, and its properties:
// the view's net_device (the topology's choice), device 0 where the backend
// offers one. Logs which and why, at INFO (NET).
ncclResult_t weft_net_choose_device(const weft_transport_view_t *v, const weft_net_t *net, int *dev,
                                    weft_net_props_t *props);

#endif
