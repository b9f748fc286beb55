/*
 * net_plugin_v12.c — binds an NCCL net plugin of ABI version 12
 * (ncclNetPlugin_v12, NCCL 2.30) to weft_plugin_ops_t.
 *
 * Against v11 the calls are the same; the properties are not: a virtual
 * device may fuse eight physical ones instead of four, which moves every
 * field after it (maxP2pBytes among them), and rail and plane ids close
 * the struct. As for v11, weft makes one context per process (communicator
 * id 0, the default traffic class) and never finalises it.
 */
#include <dlfcn.h>
#include <string.h>

#include "checks.h"
#include "net_plugin.h"

static const weft_abi_net_v12_t *p;
static void *ctx;

static ncclResult_t v12_init(weft_abi_logger_t log) {
  weft_abi_comm_config_t config = {.traffic_class = NCCL_NET_TRAFFIC_CLASS_UNDEF};
  return p->init(&ctx, 0, &config, log, NULL);
}
static ncclResult_t v12_devices(int *ndev) { return p->devices(ndev); }

static ncclResult_t v12_props(int dev, weft_plugin_props_t *out) {
  weft_abi_props_v12_t q;
  memset(&q, 0, sizeof(q));
  WEFTCHECK(p->get_properties(dev, &q));
  weft_net_plugin_props(out, q.name, q.ptr_support, q.speed, q.max_p2p_bytes);
  return ncclSuccess;
}

static ncclResult_t v12_listen(int dev, void *handle, void **lc) { return p->listen(ctx, dev, handle, lc); }

static ncclResult_t v12_connect(int dev, void *handle, void **sc) {
  weft_abi_dev_handle_t *none = NULL;
  return p->connect(ctx, dev, handle, sc, &none);
}

static ncclResult_t v12_accept(void *lc, void **rc) {
  weft_abi_dev_handle_t *none = NULL;
  return p->accept(lc, rc, &none);
}

static ncclResult_t v12_reg(void *c, void *d, size_t n, void **mh) { return p->reg_mr(c, d, n, NCCL_PTR_HOST, mh); }
static ncclResult_t v12_dereg(void *c, void *mh) { return p->dereg_mr(c, mh); }

static ncclResult_t v12_isend(void *sc, void *d, size_t n, int tag, void *mh, void **req) {
  return p->isend(sc, d, n, tag, mh, NULL, req);
}

static ncclResult_t v12_irecv(void *rc, void *d, size_t n, int tag, void *mh, void **req) {
  void *phandle = NULL;
  return p->irecv(rc, 1, &d, &n, &tag, &mh, &phandle, req);
}

static ncclResult_t v12_test(void *req, int *done, size_t *size) {
  int n = 0;
  ncclResult_t res = p->test(req, done, &n);
  *size = n > 0 ? (size_t)n : 0;
  return res;
}

static ncclResult_t v12_close_send(void *c) { return p->close_send(c); }
static ncclResult_t v12_close_recv(void *c) { return p->close_recv(c); }
static ncclResult_t v12_close_listen(void *c) { return p->close_listen(c); }

int weft_net_plugin_bind_v12(void *dl, weft_plugin_ops_t *ops) {
  p = dlsym(dl, "ncclNetPlugin_v12");
  if (p == NULL) return 0;
  *ops = (weft_plugin_ops_t){
      .name = p->name,
      .version = 12,
      .max_requests = NCCL_NET_MAX_REQUESTS,
      .init = v12_init,
      .devices = v12_devices,
      .get_properties = v12_props,
      .listen = v12_listen,
      .connect = v12_connect,
      .accept = v12_accept,
      .reg_mr = v12_reg,
      .dereg_mr = v12_dereg,
      .isend = v12_isend,
      .irecv = v12_irecv,
      .test = v12_test,
      .close_send = v12_close_send,
      .close_recv = v12_close_recv,
      .close_listen = v12_close_listen,
  };
  return 1;
}
