/*
 * net_plugin_v10.c — binds an NCCL net plugin of ABI version 10
 * (ncclNetPlugin_v10, NCCL 2.26-2.27) to weft_plugin_ops_t.
 *
 * Against v9: init takes a profiler callback (weft passes NULL), connect a
 * communicator configuration (the plugin's default traffic class), and
 * isend/irecv a profiler handle each (NULL).
 */
#include <dlfcn.h>
#include <string.h>

#include "checks.h"
#include "net_plugin.h"

static const weft_abi_net_v10_t *p;

static ncclResult_t v10_init(weft_abi_logger_t log) { return p->init(log, NULL); }
static ncclResult_t v10_devices(int *ndev) { return p->devices(ndev); }

static ncclResult_t v10_props(int dev, weft_plugin_props_t *out) {
  weft_abi_props_v10_t q;
  memset(&q, 0, sizeof(q));
  WEFTCHECK(p->get_properties(dev, &q));
  weft_net_plugin_props(out, q.name, q.ptr_support, q.speed, q.max_p2p_bytes);
  return ncclSuccess;
}

static ncclResult_t v10_listen(int dev, void *handle, void **lc) { return p->listen(dev, handle, lc); }

static ncclResult_t v10_connect(int dev, void *handle, void **sc) {
  weft_abi_dev_handle_t *none = NULL;
  weft_abi_comm_config_t config = {.traffic_class = NCCL_NET_TRAFFIC_CLASS_UNDEF};
  return p->connect(dev, &config, handle, sc, &none);
}

static ncclResult_t v10_accept(void *lc, void **rc) {
  weft_abi_dev_handle_t *none = NULL;
  return p->accept(lc, rc, &none);
}

static ncclResult_t v10_reg(void *c, void *d, size_t n, void **mh) { return p->reg_mr(c, d, n, NCCL_PTR_HOST, mh); }
static ncclResult_t v10_dereg(void *c, void *mh) { return p->dereg_mr(c, mh); }

static ncclResult_t v10_isend(void *sc, void *d, size_t n, int tag, void *mh, void **req) {
  return p->isend(sc, d, n, tag, mh, NULL, req);
}

static ncclResult_t v10_irecv(void *rc, void *d, size_t n, int tag, void *mh, void **req) {
  void *phandle = NULL;
  return p->irecv(rc, 1, &d, &n, &tag, &mh, &phandle, req);
}

static ncclResult_t v10_test(void *req, int *done, size_t *size) {
  int n = 0;
  ncclResult_t res = p->test(req, done, &n);
  *size = n > 0 ? (size_t)n : 0;
  return res;
}

static ncclResult_t v10_close_send(void *c) { return p->close_send(c); }
static ncclResult_t v10_close_recv(void *c) { return p->close_recv(c); }
static ncclResult_t v10_close_listen(void *c) { return p->close_listen(c); }

int weft_net_plugin_bind_v10(void *dl, weft_plugin_ops_t *ops) {
  p = dlsym(dl, "ncclNetPlugin_v10");
  if (p == NULL) return 0;
  *ops = (weft_plugin_ops_t){
      .name = p->name,
      .version = 10,
      .max_requests = NCCL_NET_MAX_REQUESTS,
      .init = v10_init,
      .devices = v10_devices,
      .get_properties = v10_props,
      .listen = v10_listen,
      .connect = v10_connect,
      .accept = v10_accept,
      .reg_mr = v10_reg,
      .dereg_mr = v10_dereg,
      .isend = v10_isend,
      .irecv = v10_irecv,
      .test = v10_test,
      .close_send = v10_close_send,
      .close_recv = v10_close_recv,
      .close_listen = v10_close_listen,
  };
  return 1;
}
