/*
 * example_abi.c — exports the example plugin (example_net.c) as
 * ncclNetPlugin_v12 (its newest, as NVIDIA's example exports NCCL's
 * newest) and every older version down to _v6: the same calls behind each
 * version's struct, so every adapter of weft's loader can be tried against
 * it (WEFT_NET_PLUGIN_VERSION). A loader takes the newest it knows.
 *
 * Built with WEFT_EXAMPLE_NET_ONLY=N it exports version N alone, as a
 * plugin written for an older NCCL does (weft's tests build the v6-only
 * and v7-only variants).
 */
#include <limits.h>
#include <string.h>

#include "example_net.h"

#define EXPORT __attribute__((visibility("default")))
// Helpers are shared between versions; a one-version build leaves some unused.
#define HELPER static __attribute__((unused))

#ifdef WEFT_EXAMPLE_NET_ONLY
#define EXPORTS(v) (WEFT_EXAMPLE_NET_ONLY == (v))
#else
#define EXPORTS(v) 1
#endif

HELPER ncclResult_t unsupported(void) { return ncclInvalidUsage; }

// Calls whose signature no version changed.
HELPER ncclResult_t reg_mr_dmabuf(void *c, void *d, size_t n, int type, uint64_t off, int fd, void **mh) {
  (void)c, (void)d, (void)n, (void)type, (void)off, (void)fd, (void)mh;
  return unsupported();
}
HELPER ncclResult_t iflush(void *c, int n, void **d, int *sizes, void **mh, void **req) {
  (void)c, (void)n, (void)d, (void)sizes, (void)mh;
  *req = NULL;  // host memory: nothing to flush
  return ncclSuccess;
}
HELPER ncclResult_t test(void *req, int *done, int *size) {
  size_t n = 0;
  ncclResult_t res = ex_test(req, done, &n);
  if (size != NULL) *size = n > INT_MAX ? INT_MAX : (int)n;
  return res;
}
HELPER ncclResult_t get_device_mr(void *c, void *mh, void **dptr) {
  (void)c, (void)mh, (void)dptr;
  return unsupported();
}
HELPER ncclResult_t irecv_consumed(void *c, int n, void *req) {
  (void)c, (void)n, (void)req;
  return unsupported();
}
HELPER ncclResult_t make_vdevice_v9(int *d, weft_abi_vdev_props_v9_t *props) {
  (void)d, (void)props;
  return unsupported();
}
HELPER ncclResult_t make_vdevice_v12(int *d, weft_abi_vdev_props_v12_t *props) {
  (void)d, (void)props;
  return unsupported();
}
HELPER ncclResult_t connect_v7(int dev, void *handle, void **sc, weft_abi_dev_handle_t **dh) {
  (void)dh;  // no device offload
  return ex_connect(dev, handle, sc);
}
HELPER ncclResult_t accept_v7(void *lc, void **rc, weft_abi_dev_handle_t **dh) {
  (void)dh;
  return ex_accept(lc, rc);
}

// Properties: one helper per struct layout.
#define FILL_COMMON(q)                                        \
  do {                                                        \
    memset((q), 0, sizeof(*(q)));                             \
    ncclResult_t r_ = ex_props(dev, &(q)->name, &(q)->speed); \
    if (r_ != ncclSuccess) return r_;                         \
    (q)->ptr_support = NCCL_PTR_HOST;                         \
    (q)->max_comms = 65536;                                   \
    (q)->max_recvs = 1;                                       \
  } while (0)

HELPER ncclResult_t props_v6(int dev, weft_abi_props_v6_t *q) {
  FILL_COMMON(q);
  return ncclSuccess;
}
HELPER ncclResult_t props_v7(int dev, weft_abi_props_v7_t *q) {
  FILL_COMMON(q);
  return ncclSuccess;
}
HELPER ncclResult_t props_v8(int dev, weft_abi_props_v8_t *q) {
  FILL_COMMON(q);
  return ncclSuccess;
}
HELPER ncclResult_t props_v9(int dev, weft_abi_props_v9_t *q) {
  FILL_COMMON(q);
  q->vprops.ndevs = 1;
  q->vprops.devs[0] = dev;
  q->max_p2p_bytes = q->max_coll_bytes = (size_t)1 << 30;
  return ncclSuccess;
}
HELPER ncclResult_t props_v11(int dev, weft_abi_props_v11_t *q) {
  FILL_COMMON(q);
  q->vprops.ndevs = 1;
  q->vprops.devs[0] = dev;
  q->max_p2p_bytes = q->max_coll_bytes = (size_t)1 << 30;
  q->max_multi_request_size = 1;
  return ncclSuccess;
}
HELPER ncclResult_t props_v12(int dev, weft_abi_props_v12_t *q) {
  FILL_COMMON(q);
  q->vprops.ndevs = 1;
  q->vprops.devs[0] = dev;
  q->max_p2p_bytes = q->max_coll_bytes = (size_t)1 << 30;
  q->max_multi_request_size = 1;
  q->rail_id = q->plane_id = NCCL_NET_ID_UNDEF;
  return ncclSuccess;
}

/* ---- v6 to v8: int sizes ---- */
HELPER ncclResult_t reg_mr_int(void *c, void *d, int n, int type, void **mh) {
  return n < 0 ? ncclInvalidArgument : ex_reg_mr(c, d, (size_t)n, type, mh);
}
HELPER ncclResult_t isend_int(void *sc, void *d, int n, int tag, void *mh, void **req) {
  (void)tag;
  return n < 0 ? ncclInvalidArgument : ex_isend(sc, d, (size_t)n, mh, req);
}
HELPER ncclResult_t irecv_int(void *rc, int n, void **d, int *sizes, int *tags, void **mh, void **req) {
  (void)tags;
  size_t s = n == 1 && sizes[0] >= 0 ? (size_t)sizes[0] : 0;
  return ex_irecv(rc, n, d, &s, mh, req);
}

#if EXPORTS(6)
EXPORT const weft_abi_net_v6_t ncclNetPlugin_v6 = {
    .name = EX_NAME, .init = ex_init, .devices = ex_devices, .get_properties = props_v6, .listen = ex_listen,
    .connect = ex_connect, .accept = ex_accept, .reg_mr = reg_mr_int, .reg_mr_dmabuf = reg_mr_dmabuf,
    .dereg_mr = ex_dereg_mr, .isend = isend_int, .irecv = irecv_int, .iflush = iflush, .test = test,
    .close_send = ex_close, .close_recv = ex_close, .close_listen = ex_close_listen,
};
#endif

#if EXPORTS(7)
EXPORT const weft_abi_net_v7_t ncclNetPlugin_v7 = {
    .name = EX_NAME, .init = ex_init, .devices = ex_devices, .get_properties = props_v7, .listen = ex_listen,
    .connect = connect_v7, .accept = accept_v7, .reg_mr = reg_mr_int, .reg_mr_dmabuf = reg_mr_dmabuf,
    .dereg_mr = ex_dereg_mr, .isend = isend_int, .irecv = irecv_int, .iflush = iflush, .test = test,
    .close_send = ex_close, .close_recv = ex_close, .close_listen = ex_close_listen, .get_device_mr = get_device_mr,
    .irecv_consumed = irecv_consumed,
};
#endif

#if EXPORTS(8)
EXPORT const weft_abi_net_v8_t ncclNetPlugin_v8 = {
    .name = EX_NAME, .init = ex_init, .devices = ex_devices, .get_properties = props_v8, .listen = ex_listen,
    .connect = connect_v7, .accept = accept_v7, .reg_mr = ex_reg_mr, .reg_mr_dmabuf = reg_mr_dmabuf,
    .dereg_mr = ex_dereg_mr, .isend = isend_int, .irecv = irecv_int, .iflush = iflush, .test = test,
    .close_send = ex_close, .close_recv = ex_close, .close_listen = ex_close_listen, .get_device_mr = get_device_mr,
    .irecv_consumed = irecv_consumed,
};
#endif

/* ---- v9: size_t sizes ---- */
HELPER ncclResult_t isend_v9(void *sc, void *d, size_t n, int tag, void *mh, void **req) {
  (void)tag;
  return ex_isend(sc, d, n, mh, req);
}
HELPER ncclResult_t irecv_v9(void *rc, int n, void **d, size_t *sizes, int *tags, void **mh, void **req) {
  (void)tags;
  return ex_irecv(rc, n, d, sizes, mh, req);
}

#if EXPORTS(9)
EXPORT const weft_abi_net_v9_t ncclNetPlugin_v9 = {
    .name = EX_NAME, .init = ex_init, .devices = ex_devices, .get_properties = props_v9, .listen = ex_listen,
    .connect = connect_v7, .accept = accept_v7, .reg_mr = ex_reg_mr, .reg_mr_dmabuf = reg_mr_dmabuf,
    .dereg_mr = ex_dereg_mr, .isend = isend_v9, .irecv = irecv_v9, .iflush = iflush, .test = test,
    .close_send = ex_close, .close_recv = ex_close, .close_listen = ex_close_listen, .get_device_mr = get_device_mr,
    .irecv_consumed = irecv_consumed, .make_vdevice = make_vdevice_v9,
};
#endif

/* ---- v10: profiler arguments, connect with a configuration ---- */
HELPER ncclResult_t init_v10(weft_abi_logger_t log, weft_abi_profiler_cb_t prof) {
  (void)prof;
  return ex_init(log);
}
HELPER ncclResult_t connect_v10(int dev, weft_abi_comm_config_t *config, void *handle, void **sc,
                                weft_abi_dev_handle_t **dh) {
  (void)config, (void)dh;
  return ex_connect(dev, handle, sc);
}
HELPER ncclResult_t isend_v10(void *sc, void *d, size_t n, int tag, void *mh, void *ph, void **req) {
  (void)tag, (void)ph;
  return ex_isend(sc, d, n, mh, req);
}
HELPER ncclResult_t irecv_v10(void *rc, int n, void **d, size_t *sizes, int *tags, void **mh, void **ph, void **req) {
  (void)tags, (void)ph;
  return ex_irecv(rc, n, d, sizes, mh, req);
}

#if EXPORTS(10)
EXPORT const weft_abi_net_v10_t ncclNetPlugin_v10 = {
    .name = EX_NAME, .init = init_v10, .devices = ex_devices, .get_properties = props_v9, .listen = ex_listen,
    .connect = connect_v10, .accept = accept_v7, .reg_mr = ex_reg_mr, .reg_mr_dmabuf = reg_mr_dmabuf,
    .dereg_mr = ex_dereg_mr, .isend = isend_v10, .irecv = irecv_v10, .iflush = iflush, .test = test,
    .close_send = ex_close, .close_recv = ex_close, .close_listen = ex_close_listen, .get_device_mr = get_device_mr,
    .irecv_consumed = irecv_consumed, .make_vdevice = make_vdevice_v9,
};
#endif

/* ---- v11 and v12: a context ---- */
static int context __attribute__((unused));  // one device, no per-communicator state: every context is this one
HELPER ncclResult_t init_v11(void **ctx, uint64_t comm_id, weft_abi_comm_config_t *config, weft_abi_logger_t log,
                             weft_abi_profiler_cb_t prof) {
  (void)comm_id, (void)config, (void)prof;
  *ctx = &context;
  return ex_init(log);
}
HELPER ncclResult_t listen_v11(void *ctx, int dev, void *handle, void **lc) {
  (void)ctx;
  return ex_listen(dev, handle, lc);
}
HELPER ncclResult_t connect_v11(void *ctx, int dev, void *handle, void **sc, weft_abi_dev_handle_t **dh) {
  (void)ctx, (void)dh;
  return ex_connect(dev, handle, sc);
}
HELPER ncclResult_t finalize_v11(void *ctx) {
  (void)ctx;
  return ncclSuccess;
}
HELPER ncclResult_t set_net_attr_v11(void *ctx, weft_abi_net_attr_t *attr) {
  (void)ctx, (void)attr;
  return ncclSuccess;
}

#if EXPORTS(11)
EXPORT const weft_abi_net_v11_t ncclNetPlugin_v11 = {
    .name = EX_NAME, .init = init_v11, .devices = ex_devices, .get_properties = props_v11, .listen = listen_v11,
    .connect = connect_v11, .accept = accept_v7, .reg_mr = ex_reg_mr, .reg_mr_dmabuf = reg_mr_dmabuf,
    .dereg_mr = ex_dereg_mr, .isend = isend_v10, .irecv = irecv_v10, .iflush = iflush, .test = test,
    .close_send = ex_close, .close_recv = ex_close, .close_listen = ex_close_listen, .get_device_mr = get_device_mr,
    .irecv_consumed = irecv_consumed, .make_vdevice = make_vdevice_v9, .finalize = finalize_v11,
    .set_net_attr = set_net_attr_v11,
};
#endif

#if EXPORTS(12)
EXPORT const weft_abi_net_v12_t ncclNetPlugin_v12 = {
    .name = EX_NAME, .init = init_v11, .devices = ex_devices, .get_properties = props_v12, .listen = listen_v11,
    .connect = connect_v11, .accept = accept_v7, .reg_mr = ex_reg_mr, .reg_mr_dmabuf = reg_mr_dmabuf,
    .dereg_mr = ex_dereg_mr, .isend = isend_v10, .irecv = irecv_v10, .iflush = iflush, .test = test,
    .close_send = ex_close, .close_recv = ex_close, .close_listen = ex_close_listen, .get_device_mr = get_device_mr,
    .irecv_consumed = irecv_consumed, .make_vdevice = make_vdevice_v12, .finalize = finalize_v11,
    .set_net_attr = set_net_attr_v11,
};
#endif
