/*
 * example_abi.c — exports the example plugin (example_net.c) as
 * ncclNetPlugin_v11, _v10, _v9 and _v8: the same calls behind each
 * version's struct, so every adapter of weft's loader can be tried
 * against it (WEFT_NET_PLUGIN_VERSION). A loader takes the newest it knows.
 */
#include <limits.h>
#include <string.h>

#include "example_net.h"

#define EXPORT __attribute__((visibility("default")))

static ncclResult_t unsupported(void) { return ncclInvalidUsage; }

// Calls whose signature no version changed.
static ncclResult_t reg_mr_dmabuf(void *c, void *d, size_t n, int type, uint64_t off, int fd, void **mh) {
  (void)c, (void)d, (void)n, (void)type, (void)off, (void)fd, (void)mh;
  return unsupported();
}
static ncclResult_t iflush(void *c, int n, void **d, int *sizes, void **mh, void **req) {
  (void)c, (void)n, (void)d, (void)sizes, (void)mh;
  *req = NULL;  // host memory: nothing to flush
  return ncclSuccess;
}
static ncclResult_t test(void *req, int *done, int *size) {
  size_t n = 0;
  ncclResult_t res = ex_test(req, done, &n);
  if (size != NULL) *size = n > INT_MAX ? INT_MAX : (int)n;
  return res;
}
static ncclResult_t get_device_mr(void *c, void *mh, void **dptr) {
  (void)c, (void)mh, (void)dptr;
  return unsupported();
}
static ncclResult_t irecv_consumed(void *c, int n, void *req) {
  (void)c, (void)n, (void)req;
  return unsupported();
}
static ncclResult_t make_vdevice(int *d, weft_abi_vdev_props_t *props) {
  (void)d, (void)props;
  return unsupported();
}
static ncclResult_t connect_v8(int dev, void *handle, void **sc, weft_abi_dev_handle_t **dh) {
  (void)dh;  // no device offload
  return ex_connect(dev, handle, sc);
}
static ncclResult_t accept_any(void *lc, void **rc, weft_abi_dev_handle_t **dh) {
  (void)dh;
  return ex_accept(lc, rc);
}

// Properties: one helper per struct layout.
#define FILL_COMMON(q)                                 \
  do {                                                 \
    memset((q), 0, sizeof(*(q)));                      \
    ncclResult_t r_ = ex_props(dev, &(q)->name, &(q)->speed); \
    if (r_ != ncclSuccess) return r_;                  \
    (q)->ptr_support = NCCL_PTR_HOST;                  \
    (q)->max_comms = 65536;                            \
    (q)->max_recvs = 1;                                \
  } while (0)

static ncclResult_t props_v8(int dev, weft_abi_props_v8_t *q) {
  FILL_COMMON(q);
  return ncclSuccess;
}
static ncclResult_t props_v9(int dev, weft_abi_props_v9_t *q) {
  FILL_COMMON(q);
  q->vprops.ndevs = 1;
  q->max_p2p_bytes = q->max_coll_bytes = (size_t)1 << 30;
  return ncclSuccess;
}
static ncclResult_t props_v11(int dev, weft_abi_props_v11_t *q) {
  FILL_COMMON(q);
  q->vprops.ndevs = 1;
  q->max_p2p_bytes = q->max_coll_bytes = (size_t)1 << 30;
  q->max_multi_request_size = 1;
  return ncclSuccess;
}

/* ---- v8: int sizes ---- */
static ncclResult_t isend_v8(void *sc, void *d, int n, int tag, void *mh, void **req) {
  (void)tag;
  return n < 0 ? ncclInvalidArgument : ex_isend(sc, d, (size_t)n, mh, req);
}
static ncclResult_t irecv_v8(void *rc, int n, void **d, int *sizes, int *tags, void **mh, void **req) {
  (void)tags;
  size_t s = n == 1 && sizes[0] >= 0 ? (size_t)sizes[0] : 0;
  return ex_irecv(rc, n, d, &s, mh, req);
}

EXPORT const weft_abi_net_v8_t ncclNetPlugin_v8 = {
    .name = EX_NAME, .init = ex_init, .devices = ex_devices, .get_properties = props_v8, .listen = ex_listen,
    .connect = connect_v8, .accept = accept_any, .reg_mr = ex_reg_mr, .reg_mr_dmabuf = reg_mr_dmabuf,
    .dereg_mr = ex_dereg_mr, .isend = isend_v8, .irecv = irecv_v8, .iflush = iflush, .test = test,
    .close_send = ex_close, .close_recv = ex_close, .close_listen = ex_close_listen, .get_device_mr = get_device_mr,
    .irecv_consumed = irecv_consumed,
};

/* ---- v9: size_t sizes ---- */
static ncclResult_t isend_v9(void *sc, void *d, size_t n, int tag, void *mh, void **req) {
  (void)tag;
  return ex_isend(sc, d, n, mh, req);
}
static ncclResult_t irecv_v9(void *rc, int n, void **d, size_t *sizes, int *tags, void **mh, void **req) {
  (void)tags;
  return ex_irecv(rc, n, d, sizes, mh, req);
}

EXPORT const weft_abi_net_v9_t ncclNetPlugin_v9 = {
    .name = EX_NAME, .init = ex_init, .devices = ex_devices, .get_properties = props_v9, .listen = ex_listen,
    .connect = connect_v8, .accept = accept_any, .reg_mr = ex_reg_mr, .reg_mr_dmabuf = reg_mr_dmabuf,
    .dereg_mr = ex_dereg_mr, .isend = isend_v9, .irecv = irecv_v9, .iflush = iflush, .test = test,
    .close_send = ex_close, .close_recv = ex_close, .close_listen = ex_close_listen, .get_device_mr = get_device_mr,
    .irecv_consumed = irecv_consumed, .make_vdevice = make_vdevice,
};

/* ---- v10: profiler arguments, connect with a configuration ---- */
static ncclResult_t init_v10(weft_abi_logger_t log, weft_abi_profiler_cb_t prof) {
  (void)prof;
  return ex_init(log);
}
static ncclResult_t connect_v10(int dev, weft_abi_comm_config_t *config, void *handle, void **sc,
                                weft_abi_dev_handle_t **dh) {
  (void)config, (void)dh;
  return ex_connect(dev, handle, sc);
}
static ncclResult_t isend_v10(void *sc, void *d, size_t n, int tag, void *mh, void *ph, void **req) {
  (void)tag, (void)ph;
  return ex_isend(sc, d, n, mh, req);
}
static ncclResult_t irecv_v10(void *rc, int n, void **d, size_t *sizes, int *tags, void **mh, void **ph, void **req) {
  (void)tags, (void)ph;
  return ex_irecv(rc, n, d, sizes, mh, req);
}

EXPORT const weft_abi_net_v10_t ncclNetPlugin_v10 = {
    .name = EX_NAME, .init = init_v10, .devices = ex_devices, .get_properties = props_v9, .listen = ex_listen,
    .connect = connect_v10, .accept = accept_any, .reg_mr = ex_reg_mr, .reg_mr_dmabuf = reg_mr_dmabuf,
    .dereg_mr = ex_dereg_mr, .isend = isend_v10, .irecv = irecv_v10, .iflush = iflush, .test = test,
    .close_send = ex_close, .close_recv = ex_close, .close_listen = ex_close_listen, .get_device_mr = get_device_mr,
    .irecv_consumed = irecv_consumed, .make_vdevice = make_vdevice,
};

/* ---- v11: a context ---- */
static int context;  // one device, no per-communicator state: every context is this one
static ncclResult_t init_v11(void **ctx, uint64_t comm_id, weft_abi_comm_config_t *config, weft_abi_logger_t log,
                             weft_abi_profiler_cb_t prof) {
  (void)comm_id, (void)config, (void)prof;
  *ctx = &context;
  return ex_init(log);
}
static ncclResult_t listen_v11(void *ctx, int dev, void *handle, void **lc) {
  (void)ctx;
  return ex_listen(dev, handle, lc);
}
static ncclResult_t connect_v11(void *ctx, int dev, void *handle, void **sc, weft_abi_dev_handle_t **dh) {
  (void)ctx, (void)dh;
  return ex_connect(dev, handle, sc);
}
static ncclResult_t finalize_v11(void *ctx) {
  (void)ctx;
  return ncclSuccess;
}
static ncclResult_t set_net_attr_v11(void *ctx, weft_abi_net_attr_t *attr) {
  (void)ctx, (void)attr;
  return ncclSuccess;
}

EXPORT const weft_abi_net_v11_t ncclNetPlugin_v11 = {
    .name = EX_NAME, .init = init_v11, .devices = ex_devices, .get_properties = props_v11, .listen = listen_v11,
    .connect = connect_v11, .accept = accept_any, .reg_mr = ex_reg_mr, .reg_mr_dmabuf = reg_mr_dmabuf,
    .dereg_mr = ex_dereg_mr, .isend = isend_v10, .irecv = irecv_v10, .iflush = iflush, .test = test,
    .close_send = ex_close, .close_recv = ex_close, .close_listen = ex_close_listen, .get_device_mr = get_device_mr,
    .irecv_consumed = irecv_consumed, .make_vdevice = make_vdevice, .finalize = finalize_v11,
    .set_net_attr = set_net_attr_v11,
};
