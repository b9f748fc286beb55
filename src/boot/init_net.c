/*
 * init_net.c — which of the network backend's devices a rank uses, asked
 * by the network transport through its view (net_device) and answered
 * here, where the communicator's place on its host meets the topology:
 * weft_topo_nic_pick (topology/topo_nic.c) with the rank's local rank and
 * local size and the devices the transport describes.
 *
 * The topology is the process's (weft_topo_system: NCCL_TOPO_FILE, an
 * hwloc XML file or detection, made once and kept), asked for only when
 * there are several devices; one that cannot be had leaves the choice to
 * device 0 as before (a WARN when NCCL_TOPO_FILE named it, else INFO).
 * A rank that drives a GPU is placed at that GPU (its CUDA device's bus
 * id); one that does not, on a host with GPUs, is taken to sit near the
 * (local rank mod nGPUs)-th GPU, as WEFT_BIND assumes. A rank on host
 * memory then has its init threads, the network proxy among them, run
 * near the NIC it uses (comm_affinity.c).
 */
#include "init_net.h"

#include <stdio.h>
#include <stdlib.h>

#include "comm.h"
#include "placement.h"
#include "debug.h"
#include "env.h"
#include "topo.h"

int weft_comm_net_device(const weft_transport_view_t *v, const weft_net_dev_t *devs, int ndevs, char *why,
                         size_t len) {
  struct ncclComm *comm = v->core;
  if (ndevs < 1 || devs == NULL) {
    snprintf(why, len, "no device to choose from");
    return -1;
  }
  char err[256] = "";
  const weft_topo_t *topo = ndevs > 1 ? weft_topo_system(err, sizeof(err)) : NULL;
  if (ndevs > 1 && topo == NULL && weft_env_NCCL_TOPO_FILE() != NULL)  // asked for and not had: say so
    WARN("rank %d: no topology to choose among %d network devices (device 0 it is): %s", comm->rank, ndevs, err);
  else if (ndevs > 1 && topo == NULL)
    INFO(WEFT_LOG_NET, "rank %d: no topology to choose among %d network devices: %s", comm->rank, ndevs, err);
  weft_topo_netdev_t *list = calloc((size_t)ndevs, sizeof(*list));
  if (list == NULL) {
    snprintf(why, len, "out of memory");
    return -1;
  }
  for (int d = 0; d < ndevs; d++) list[d] = (weft_topo_netdev_t){devs[d].name, devs[d].port, devs[d].busid};
  char busid[32] = "";
  if (comm->cuda_dev < 0 || weft_cuda_device_busid(comm->cuda_dev, busid, sizeof(busid)) != 0) busid[0] = '\0';
  weft_topo_nic_pick_t pick;
  int rc = weft_topo_nic_pick(topo, comm->local_rank, comm->local_size, busid[0] ? busid : NULL, list, ndevs, &pick);
  free(list);
  // A rank on host memory: its init threads (the proxy among them) near the NIC it uses.
  if (rc == 0 && busid[0] == '\0' && pick.nic >= 0) weft_comm_threads_near(comm, topo, pick.nic, "its NIC");
  snprintf(why, len, "%s", pick.why);
  return rc == 0 ? pick.dev : -1;
}
