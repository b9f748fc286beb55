/*
 * net_plugin_v8.c — binds an NCCL net plugin of ABI version 8
 * (ncclNetPlugin_v8, NCCL 2.20-2.23) to weft_plugin_ops_t.
 *
 * What sets v8 apart: message sizes are int (weft, as NCCL, sends at most
 * 1 GiB in one), the properties struct is the short one, there is no
 * context and no profiler. Device offload is never requested.
 */
#include <dlfcn.h>
#include <string.h>

#include "checks.h"
#include "net_plugin.h"

static const weft_abi_net_v8_t *p;

static ncclResult_t v8_init(weft_abi_logger_t log) { return p->init(log); }
static ncclResult_t v8_devices(int *ndev) { return p->devices(ndev); }

static ncclResult_t v8_props(int dev, weft_plugin_props_t *out) {
  weft_abi_props_v8_t q;
  memset(&q, 0, sizeof(q));
  WEFTCHECK(p->get_properties(dev, &q));
  weft_net_plugin_props(out, q.name, q.ptr_support, q.speed, WEFT_NET_PLUGIN_INT_MAX_BYTES);
  return ncclSuccess;
}

static ncclResult_t v8_listen(int dev, void *handle, void **lc) { return p->listen(dev, handle, lc); }

static ncclResult_t v8_connect(int dev, void *handle, void **sc) {
  weft_abi_dev_handle_t *none = NULL;
  return p->connect(dev, handle, sc, &none);
}

static ncclResult_t v8_accept(void *lc, void **rc) {
  weft_abi_dev_handle_t *none = NULL;
  return p->accept(lc, rc, &none);
}

static ncclResult_t v8_reg(void *c, void *d, size_t n, void **mh) { return p->reg_mr(c, d, n, NCCL_PTR_HOST, mh); }
static ncclResult_t v8_dereg(void *c, void *mh) { return p->dereg_mr(c, mh); }

static ncclResult_t v8_isend(void *sc, void *d, size_t n, int tag, void *mh, void **req) {
  return p->isend(sc, d, (int)n, tag, mh, req);
}

static ncclResult_t v8_irecv(void *rc, void *d, size_t n, int tag, void *mh, void **req) {
  int size = (int)n;
  return p->irecv(rc, 1, &d, &size, &tag, &mh, req);
}

static ncclResult_t v8_test(void *req, int *done, size_t *size) {
  int n = 0;
  ncclResult_t res = p->test(req, done, &n);
  *size = n > 0 ? (size_t)n : 0;
  return res;
}

static ncclResult_t v8_close_send(void *c) { return p->close_send(c); }
static ncclResult_t v8_close_recv(void *c) { return p->close_recv(c); }
static ncclResult_t v8_close_listen(void *c) { return p->close_listen(c); }

int weft_net_plugin_bind_v8(void *dl, weft_plugin_ops_t *ops) {
  p = dlsym(dl, "ncclNetPlugin_v8");
  if (p == NULL) return 0;
  *ops = (weft_plugin_ops_t){
      .name = p->name,
      .version = 8,
      .max_requests = NCCL_NET_MAX_REQUESTS,
      .init = v8_init,
      .devices = v8_devices,
      .get_properties = v8_props,
      .listen = v8_listen,
      .connect = v8_connect,
      .accept = v8_accept,
      .reg_mr = v8_reg,
      .dereg_mr = v8_dereg,
      .isend = v8_isend,
      .irecv = v8_irecv,
      .test = v8_test,
      .close_send = v8_close_send,
      .close_recv = v8_close_recv,
      .close_listen = v8_close_listen,
  };
  return 1;
}
