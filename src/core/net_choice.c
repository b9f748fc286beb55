/*
 * net_choice.c — the network a rank uses, decided in one place: which
 * backend the process uses, and which of that backend's devices (NICs)
 * each rank listens and connects on. The network transport receives both
 * through its view (net_backend, net_device) and decides neither.
 *
 * The backend is chosen and started once per process: NCCL_NET by name
 * ("Socket", "IB" or the plugin's name), else the net plugin when one is
 * loaded (plugins/net/net_plugin.h) and starts, else the built-in socket
 * backend. The verbs backend (transports/ib/) is untested on RDMA
 * hardware, so it is used only when NCCL_NET=IB asks for it.
 *
 * The device is chosen per rank where the communicator's place on its host
 * meets the topology: weft_topo_nic_pick (topology/topo_nic.c) with the
 * rank's local rank and local size and the devices the backend lists. The
 * topology is the process's (weft_topo_system: NCCL_TOPO_FILE, an hwloc
 * XML file or detection, made once and kept), asked for only when there
 * are several devices; one that cannot be had leaves the choice to device
 * 0 (a WARN when NCCL_TOPO_FILE named it, else INFO). A rank that drives a
 * GPU is placed at that GPU (its CUDA device's bus id); one that does not,
 * on a host with GPUs, is taken to sit near the (local rank mod nGPUs)-th
 * GPU, as WEFT_BIND assumes. A rank on host memory then has its init
 * threads, the network proxy among them, run near the NIC it uses
 * (comm_affinity.c).
 */
#include "net_choice.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "checks.h"
#include "debug.h"
#include "env.h"
#include "net_ib.h"
#include "net_plugin.h"
#include "placement.h"
#include "topo.h"

/* ---------- the process's backend ---------- */

static const weft_net_t *chosen_net;
static ncclResult_t chosen_res;

static void backend_init(void) {
  const char *want = weft_env_NCCL_NET();
  const weft_net_t *plugin = weft_net_plugin();
  const weft_net_t *net = &weft_net_socket;
  if (want != NULL && want[0] != '\0') {
    if (plugin != NULL && strcasecmp(want, plugin->name) == 0) {
      net = plugin;
    } else if (strcasecmp(want, weft_net_ib.name) == 0) {
      if (!weft_net_ib_available()) {
        WARN("NCCL_NET=%s: the ibverbs network is not available here (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET says why)",
             want);
        chosen_res = ncclSystemError;
        return;
      }
      net = &weft_net_ib;
    } else if (strcasecmp(want, weft_net_socket.name) != 0) {
      WARN("NCCL_NET=%s: no such network; available: %s, %s%s%s", want, weft_net_socket.name, weft_net_ib.name,
           plugin ? ", " : "", plugin ? plugin->name : "");
      chosen_res = ncclInvalidArgument;
      return;
    }
  } else if (plugin != NULL) {
    net = plugin;
  }
  if (net == plugin && net->init() != ncclSuccess) {
    if (want != NULL && want[0] != '\0') {
      WARN("NCCL_NET=%s: the network plugin could not start", want);
      chosen_res = ncclSystemError;
      return;
    }
    WARN("NET/Plugin: %s could not start; falling back to the built-in %s network", net->name, weft_net_socket.name);
    net = &weft_net_socket;
  }
  if (net == &weft_net_socket && weft_net_socket.init() != ncclSuccess) {
    chosen_res = ncclSystemError;
    return;
  }
  chosen_net = net;
  INFO(WEFT_LOG_INIT | WEFT_LOG_NET, "NET: using network %s", net->name);
}

const weft_net_t *weft_net_backend(ncclResult_t *res) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, backend_init);
  *res = chosen_net != NULL ? ncclSuccess : chosen_res != ncclSuccess ? chosen_res : ncclSystemError;
  return chosen_net;
}

/* ---------- a rank's device ---------- */

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
