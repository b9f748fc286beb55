/*
 * net_select.c — which network backend the process uses, chosen and started
 * once: NCCL_NET by name ("Socket", "IB" or the plugin's name), else the net
 * plugin when one is loaded (net_plugin.h) and starts, else the built-in
 * socket backend. The verbs backend (transports/ib/) is untested on RDMA
 * hardware, so it is used only when NCCL_NET=IB asks for it.
 *
 * It lives beside the plugin loader, above the built-in backends, so that
 * the network transport only receives the choice (the view's net_backend).
 */
#include <pthread.h>
#include <strings.h>

#include "checks.h"
#include "env.h"
#include "net_ib.h"
#include "net_plugin.h"

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
