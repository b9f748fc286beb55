/*
 * net_device.c — which of the network backend's devices a rank's
 * connections use, as NCCL sends each GPU's traffic through the NIC
 * nearest it: the backend's devices (interfaces for the socket backend,
 * RDMA ports for verbs, a plugin's devices) are described by name, port
 * and PCI bus id, and the view's net_device answers for the rank's place
 * on its host (the core asks topology/topo_nic.c: its GPU's NIC, or on
 * hosts without GPUs the NICs of its NUMA node, taken in turn by the
 * local ranks there as rails). With one device there is nothing to ask.
 */
#include "net_device.h"

#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "debug.h"

ncclResult_t weft_net_choose_device(const weft_transport_view_t *v, const weft_net_t *net, int *dev,
                                    weft_net_props_t *props) {
  int ndev = 0;
  WEFTCHECK(net->devices(&ndev));
  if (ndev < 1) {
    WARN("rank %d: network %s offers no device", v->rank, net->name);
    return ncclSystemError;
  }
  weft_net_props_t *all = calloc((size_t)ndev, sizeof(*all));
  weft_net_dev_t *list = calloc((size_t)ndev, sizeof(*list));
  ncclResult_t res = ncclSuccess;
  if (all == NULL || list == NULL) {
    res = ncclSystemError;
    goto out;
  }
  for (int d = 0; d < ndev; d++) {
    WEFTCHECKGOTO(net->get_properties(d, &all[d]), res, out);
    list[d] = (weft_net_dev_t){all[d].device[0] ? all[d].device : all[d].name, all[d].port, all[d].busid};
  }
  char why[128] = "the only device";
  int pick = ndev > 1 && v->net_device != NULL ? v->net_device(v, list, ndev, why, sizeof(why)) : 0;
  if (pick < 0 || pick >= ndev) {
    WARN("rank %d: choosing among %d devices of network %s: %s", v->rank, ndev, net->name, why);
    res = ncclSystemError;
    goto out;
  }
  *dev = pick;
  *props = all[pick];
  INFO(WEFT_LOG_NET, "rank %d uses NIC %s (%s)", v->rank, props->name, why);
out:
  free(all);
  free(list);
  return res;
}
