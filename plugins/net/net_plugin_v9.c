/*
 * net_plugin_v9.c — binds an NCCL net plugin of ABI version 9
 * (ncclNetPlugin_v9, NCCL 2.24-2.25) to weft_plugin_ops_t.
 *
 * Against v8: message sizes are size_t, the properties carry virtual
 * devices and the largest point-to-point message (maxP2pBytes), and
 * makeVDevice appears (weft makes no virtual devices).
 */
#include <dlfcn.h>
#include <string.h>

#include "checks.h"
#include "net_plugin.h"

static const weft_abi_net_v9_t *p;

static ncclResult_t v9_init(weft_abi_logger_t log) { return p->init(log); }
static ncclResult_t v9_devices(int *ndev) { return p->devices(ndev); }

static ncclResult_t v9_props(int dev, weft_plugin_props_t *out) {
  weft_abi_props_v9_t q;
  memset(&q, 0, sizeof(q));
  WEFTCHECK(p->get_properties(dev, &q));
  weft_net_plugin_props(out, q.name, q.ptr_support, q.speed, q.max_p2p_bytes);
  return ncclSuccess;
}

static ncclResult_t v9_listen(int dev, void *handle, void **lc) { return p->listen(dev, handle, lc); }

static ncclResult_t v9_connect(int dev, void *handle, void **sc) {
  weft_abi_dev_handle_t *none = NULL;
  return p->connect(dev, handle, sc, &none);
}

static ncclResult_t v9_accept(void *lc, void **rc) {
  weft_abi_dev_handle_t *none = NULL;
  return p->accept(lc, rc, &none);
}

static ncclResult_t v9_reg(void *c, void *d, size_t n, void **mh) { return p->reg_mr(c, d, n, NCCL_PTR_HOST, mh); }
static ncclResult_t v9_dereg(void *c, void *mh) { return p->dereg_mr(c, mh); }

static ncclResult_t v9_isend(void *sc, void *d, size_t n, int tag, void *mh, void **req) {
  return p->isend(sc, d, n, tag, mh, req);
}

static ncclResult_t v9_irecv(void *rc, void *d, size_t n, int tag, void *mh, void **req) {
  return p->irecv(rc, 1, &d, &n, &tag, &mh, req);
}

static ncclResult_t v9_test(void *req, int *done, size_t *size) {
  int n = 0;
  ncclResult_t res = p->test(req, done, &n);
  *size = n > 0 ? (size_t)n : 0;
  return res;
}

static ncclResult_t v9_close_send(void *c) { return p->close_send(c); }
static ncclResult_t v9_close_recv(void *c) { return p->close_recv(c); }
static ncclResult_t v9_close_listen(void *c) { return p->close_listen(c); }

int weft_net_plugin_bind_v9(void *dl, weft_plugin_ops_t *ops) {
  p = dlsym(dl, "ncclNetPlugin_v9");
  if (p == NULL) return 0;
  *ops = (weft_plugin_ops_t){
      .name = p->name,
      .version = 9,
      .max_requests = NCCL_NET_MAX_REQUESTS,
      .init = v9_init,
      .devices = v9_devices,
      .get_properties = v9_props,
      .listen = v9_listen,
      .connect = v9_connect,
      .accept = v9_accept,
      .reg_mr = v9_reg,
      .dereg_mr = v9_dereg,
      .isend = v9_isend,
      .irecv = v9_irecv,
      .test = v9_test,
      .close_send = v9_close_send,
      .close_recv = v9_close_recv,
      .close_listen = v9_close_listen,
  };
  return 1;
}
