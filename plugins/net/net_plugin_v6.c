/*
 * net_plugin_v6.c — binds an NCCL net plugin of ABI version 6
 * (ncclNetPlugin_v6, NCCL 2.13-2.18) to weft_plugin_ops_t: the oldest
 * version weft loads, still what some plugins in use export (Google's
 * nccl-fastsocket, for one).
 *
 * Against v7: there is no device offload, so connect and accept take no
 * handle and the properties end at maxRecvs; and a v6 plugin need accept
 * only NCCL_NET_MAX_REQUESTS_V6 (8) outstanding requests per
 * communicator, so the adapter posts no more (a plugin may fail a request
 * beyond its table rather than decline it, as NCCL's own sockets do). Sizes are int:
 * messages of at most 1 GiB, regions under 2 GiB.
 */
#include <dlfcn.h>
#include <limits.h>
#include <string.h>

#include "checks.h"
#include "net_plugin.h"

static const weft_abi_net_v6_t *p;

static ncclResult_t v6_init(weft_abi_logger_t log) { return p->init(log); }
static ncclResult_t v6_devices(int *ndev) { return p->devices(ndev); }

static ncclResult_t v6_props(int dev, weft_plugin_props_t *out) {
  weft_abi_props_v6_t q;
  memset(&q, 0, sizeof(q));
  WEFTCHECK(p->get_properties(dev, &q));
  weft_net_plugin_props(out, q.name, q.ptr_support, q.speed, WEFT_NET_PLUGIN_INT_MAX_BYTES);
  return ncclSuccess;
}

static ncclResult_t v6_listen(int dev, void *handle, void **lc) { return p->listen(dev, handle, lc); }
static ncclResult_t v6_connect(int dev, void *handle, void **sc) { return p->connect(dev, handle, sc); }
static ncclResult_t v6_accept(void *lc, void **rc) { return p->accept(lc, rc); }

static ncclResult_t v6_reg(void *c, void *d, size_t n, void **mh) {
  if (n > INT_MAX) return ncclInternalError;
  return p->reg_mr(c, d, (int)n, NCCL_PTR_HOST, mh);
}
static ncclResult_t v6_dereg(void *c, void *mh) { return p->dereg_mr(c, mh); }

static ncclResult_t v6_isend(void *sc, void *d, size_t n, int tag, void *mh, void **req) {
  return p->isend(sc, d, (int)n, tag, mh, req);
}

static ncclResult_t v6_irecv(void *rc, void *d, size_t n, int tag, void *mh, void **req) {
  int size = (int)n;
  return p->irecv(rc, 1, &d, &size, &tag, &mh, req);
}

static ncclResult_t v6_test(void *req, int *done, size_t *size) {
  int n = 0;
  ncclResult_t res = p->test(req, done, &n);
  *size = n > 0 ? (size_t)n : 0;
  return res;
}

static ncclResult_t v6_close_send(void *c) { return p->close_send(c); }
static ncclResult_t v6_close_recv(void *c) { return p->close_recv(c); }
static ncclResult_t v6_close_listen(void *c) { return p->close_listen(c); }

int weft_net_plugin_bind_v6(void *dl, weft_plugin_ops_t *ops) {
  p = dlsym(dl, "ncclNetPlugin_v6");
  if (p == NULL) return 0;
  *ops = (weft_plugin_ops_t){
      .name = p->name,
      .version = 6,
      .max_requests = NCCL_NET_MAX_REQUESTS_V6,
      .init = v6_init,
      .devices = v6_devices,
      .get_properties = v6_props,
      .listen = v6_listen,
      .connect = v6_connect,
      .accept = v6_accept,
      .reg_mr = v6_reg,
      .dereg_mr = v6_dereg,
      .isend = v6_isend,
      .irecv = v6_irecv,
      .test = v6_test,
      .close_send = v6_close_send,
      .close_recv = v6_close_recv,
      .close_listen = v6_close_listen,
  };
  return 1;
}
