/*
 * net_plugin_v7.c — binds an NCCL net plugin of ABI version 7
 * (ncclNetPlugin_v7, NCCL 2.19) to weft_plugin_ops_t.
 *
 * Against v8: regMr takes an int size too (a region of 2 GiB or more is
 * refused here, as NCCL refuses it), and the properties have no
 * regIsGlobal, so speed and what follows sit one int earlier. Messages
 * are int-sized, at most 1 GiB, as for v8. Device offload is never
 * requested.
 */
#include <dlfcn.h>
#include <limits.h>
#include <string.h>

#include "checks.h"
#include "net_plugin.h"

static const weft_abi_net_v7_t *p;

static ncclResult_t v7_init(weft_abi_logger_t log) { return p->init(log); }
static ncclResult_t v7_devices(int *ndev) { return p->devices(ndev); }

static ncclResult_t v7_props(int dev, weft_plugin_props_t *out) {
  weft_abi_props_v7_t q;
  memset(&q, 0, sizeof(q));
  WEFTCHECK(p->get_properties(dev, &q));
  weft_net_plugin_props(out, q.name, q.ptr_support, q.speed, WEFT_NET_PLUGIN_INT_MAX_BYTES);
  return ncclSuccess;
}

static ncclResult_t v7_listen(int dev, void *handle, void **lc) { return p->listen(dev, handle, lc); }

static ncclResult_t v7_connect(int dev, void *handle, void **sc) {
  weft_abi_dev_handle_t *none = NULL;
  return p->connect(dev, handle, sc, &none);
}

static ncclResult_t v7_accept(void *lc, void **rc) {
  weft_abi_dev_handle_t *none = NULL;
  return p->accept(lc, rc, &none);
}

static ncclResult_t v7_reg(void *c, void *d, size_t n, void **mh) {
  if (n > INT_MAX) return ncclInternalError;
  return p->reg_mr(c, d, (int)n, NCCL_PTR_HOST, mh);
}
static ncclResult_t v7_dereg(void *c, void *mh) { return p->dereg_mr(c, mh); }

static ncclResult_t v7_isend(void *sc, void *d, size_t n, int tag, void *mh, void **req) {
  return p->isend(sc, d, (int)n, tag, mh, req);
}

static ncclResult_t v7_irecv(void *rc, void *d, size_t n, int tag, void *mh, void **req) {
  int size = (int)n;
  return p->irecv(rc, 1, &d, &size, &tag, &mh, req);
}

static ncclResult_t v7_test(void *req, int *done, size_t *size) {
  int n = 0;
  ncclResult_t res = p->test(req, done, &n);
  *size = n > 0 ? (size_t)n : 0;
  return res;
}

static ncclResult_t v7_close_send(void *c) { return p->close_send(c); }
static ncclResult_t v7_close_recv(void *c) { return p->close_recv(c); }
static ncclResult_t v7_close_listen(void *c) { return p->close_listen(c); }

int weft_net_plugin_bind_v7(void *dl, weft_plugin_ops_t *ops) {
  p = dlsym(dl, "ncclNetPlugin_v7");
  if (p == NULL) return 0;
  *ops = (weft_plugin_ops_t){
      .name = p->name,
      .version = 7,
      .max_requests = NCCL_NET_MAX_REQUESTS,
      .init = v7_init,
      .devices = v7_devices,
      .get_properties = v7_props,
      .listen = v7_listen,
      .connect = v7_connect,
      .accept = v7_accept,
      .reg_mr = v7_reg,
      .dereg_mr = v7_dereg,
      .isend = v7_isend,
      .irecv = v7_irecv,
      .test = v7_test,
      .close_send = v7_close_send,
      .close_recv = v7_close_recv,
      .close_listen = v7_close_listen,
  };
  return 1;
}
