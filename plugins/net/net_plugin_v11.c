/*
 * net_plugin_v11.c — binds an NCCL net plugin of ABI version 11
 * (ncclNetPlugin_v11, NCCL 2.28-2.29) to weft_plugin_ops_t.
 *
 * Against v10: init makes a context (NCCL: one per communicator; weft: one
 * per process, made with communicator id 0 and the default traffic
 * class) that listen and connect take; connect loses its configuration;
 * finalize and setNetAttr appear (weft sets no attributes; the context is
 * never finalised, as the plugin stays loaded until the process ends).
 */
#include <dlfcn.h>
#include <string.h>

#include "checks.h"
#include "net_plugin.h"

static const weft_abi_net_v11_t *p;
static void *ctx;

static ncclResult_t v11_init(weft_abi_logger_t log) {
  weft_abi_comm_config_t config = {.traffic_class = NCCL_NET_TRAFFIC_CLASS_UNDEF};
  return p->init(&ctx, 0, &config, log, NULL);
}
static ncclResult_t v11_devices(int *ndev) { return p->devices(ndev); }

static ncclResult_t v11_props(int dev, weft_plugin_props_t *out) {
  weft_abi_props_v11_t q;
  memset(&q, 0, sizeof(q));
  WEFTCHECK(p->get_properties(dev, &q));
  weft_net_plugin_props(out, q.name, q.ptr_support, q.speed, q.max_p2p_bytes);
  return ncclSuccess;
}

static ncclResult_t v11_listen(int dev, void *handle, void **lc) { return p->listen(ctx, dev, handle, lc); }

static ncclResult_t v11_connect(int dev, void *handle, void **sc) {
  weft_abi_dev_handle_t *none = NULL;
  return p->connect(ctx, dev, handle, sc, &none);
}

static ncclResult_t v11_accept(void *lc, void **rc) {
  weft_abi_dev_handle_t *none = NULL;
  return p->accept(lc, rc, &none);
}

static ncclResult_t v11_reg(void *c, void *d, size_t n, void **mh) { return p->reg_mr(c, d, n, NCCL_PTR_HOST, mh); }
static ncclResult_t v11_dereg(void *c, void *mh) { return p->dereg_mr(c, mh); }

static ncclResult_t v11_isend(void *sc, void *d, size_t n, int tag, void *mh, void **req) {
  return p->isend(sc, d, n, tag, mh, NULL, req);
}

static ncclResult_t v11_irecv(void *rc, void *d, size_t n, int tag, void *mh, void **req) {
  void *phandle = NULL;
  return p->irecv(rc, 1, &d, &n, &tag, &mh, &phandle, req);
}

static ncclResult_t v11_test(void *req, int *done, size_t *size) {
  int n = 0;
  ncclResult_t res = p->test(req, done, &n);
  *size = n > 0 ? (size_t)n : 0;
  return res;
}

static ncclResult_t v11_close_send(void *c) { return p->close_send(c); }
static ncclResult_t v11_close_recv(void *c) { return p->close_recv(c); }
static ncclResult_t v11_close_listen(void *c) { return p->close_listen(c); }

int weft_net_plugin_bind_v11(void *dl, weft_plugin_ops_t *ops) {
  p = dlsym(dl, "ncclNetPlugin_v11");
  if (p == NULL) return 0;
  *ops = (weft_plugin_ops_t){
      .name = p->name,
      .version = 11,
      .max_requests = NCCL_NET_MAX_REQUESTS,
      .init = v11_init,
      .devices = v11_devices,
      .get_properties = v11_props,
      .listen = v11_listen,
      .connect = v11_connect,
      .accept = v11_accept,
      .reg_mr = v11_reg,
      .dereg_mr = v11_dereg,
      .isend = v11_isend,
      .irecv = v11_irecv,
      .test = v11_test,
      .close_send = v11_close_send,
      .close_recv = v11_close_recv,
      .close_listen = v11_close_listen,
  };
  return 1;
}
