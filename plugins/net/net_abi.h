/*
 * net_abi.h — the binary interface of NCCL net plugins, versions 6 to 12,
 * declared here for weft's loader (net_plugin*.c) and for plugins built
 * against weft (example/). Written from NCCL's published plugin headers:
 * every struct below has the layout of NCCL's struct of that version (field
 * order and types), under weft's own names; only the exported symbols
 * (ncclNetPlugin_vN) and the constants keep NCCL's names and values.
 *
 * A plugin is a shared library exporting a variable `ncclNetPlugin_vN` of
 * type weft_abi_net_vN_t. Only the point-to-point network is declared:
 * weft has no use for NCCL's collective-network plugins (ncclCollNet).
 * Self-contained: needs only <stddef.h>, <stdint.h> and nccl.h
 * (ncclResult_t).
 */
#ifndef WEFT_NET_ABI_H
#define WEFT_NET_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

#define NCCL_NET_HANDLE_MAXSIZE 128
#define NCCL_NET_MAX_REQUESTS 32    // outstanding requests per communicator a plugin must accept (v7+)
#define NCCL_NET_MAX_REQUESTS_V6 8  // the same for a v6 plugin
#define NCCL_NET_MAX_DEVS_PER_NIC 8 // physical devices a virtual one may fuse (v12)
#define WEFT_ABI_MAX_DEVS_PER_NIC_V9 4  // the same for v9 to v11
#define NCCL_NET_TRAFFIC_CLASS_UNDEF -1
#define NCCL_NET_ID_UNDEF -1        // v12's rail or plane that is not known

#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4

// The logger a plugin receives at init: level is NCCL's (0 none, 1
// version, 2 warn, 3 info, 4 abort, 5 trace), flags the subsystem bits.
typedef void (*weft_abi_logger_t)(int level, unsigned long flags, const char *file, int line, const char *fmt, ...);
// The profiler callback (v10+); weft passes NULL.
typedef ncclResult_t (*weft_abi_profiler_cb_t)(void **event, int type, void *parent, int64_t plugin_id, void *data);

// Device offload description (v7+; netDeviceType 0 = host; weft asks for none).
typedef struct {
  int type;  // an enum in NCCL: 0 host, 1 unpack, ...
  int version;
  void *handle;
  size_t size;
  int needs_proxy_progress;
} weft_abi_dev_handle_t;

// A virtual device: the physical ones it fuses. v12 doubled the room.
typedef struct {
  int ndevs;
  int devs[WEFT_ABI_MAX_DEVS_PER_NIC_V9];
} weft_abi_vdev_props_v9_t;  // v9 to v11
typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC];
} weft_abi_vdev_props_v12_t;

typedef struct {
  int traffic_class;  // NCCL_NET_TRAFFIC_CLASS_UNDEF: the plugin's default
} weft_abi_comm_config_t;  // v10+

/* ---- device properties ---- */

typedef struct {
  char *name, *pci_path;
  uint64_t guid;
  int ptr_support;  // NCCL_PTR_* bits
  int speed;        // Mbps
  int port;
  float latency;
  int max_comms, max_recvs;
} weft_abi_props_v6_t;

typedef struct {
  char *name, *pci_path;
  uint64_t guid;
  int ptr_support;
  int speed, port;
  float latency;
  int max_comms, max_recvs;
  int dev_type, dev_version;  // device offload appears
} weft_abi_props_v7_t;

typedef struct {
  char *name, *pci_path;
  uint64_t guid;
  int ptr_support;
  int reg_is_global;  // new in v8, before speed
  int speed, port;
  float latency;
  int max_comms, max_recvs;
  int dev_type, dev_version;
} weft_abi_props_v8_t;

typedef struct {
  char *name, *pci_path;
  uint64_t guid;
  int ptr_support, reg_is_global, force_flush;
  int speed, port;
  float latency;
  int max_comms, max_recvs;
  int dev_type, dev_version;
  weft_abi_vdev_props_v9_t vprops;
  size_t max_p2p_bytes, max_coll_bytes;
} weft_abi_props_v9_t;  // v10 has the same layout

typedef struct {
  char *name, *pci_path;
  uint64_t guid;
  int ptr_support, reg_is_global, force_flush;
  int speed, port;
  float latency;
  int max_comms, max_recvs;
  int dev_type, dev_version;
  weft_abi_vdev_props_v9_t vprops;
  size_t max_p2p_bytes, max_coll_bytes;
  int max_multi_request_size;
} weft_abi_props_v11_t;

// v12: the larger virtual device moves every field after it; rail and
// plane (NCCL_NET_ID_UNDEF when not known) fill the tail.
typedef struct {
  char *name, *pci_path;
  uint64_t guid;
  int ptr_support, reg_is_global, force_flush;
  int speed, port;
  float latency;
  int max_comms, max_recvs;
  int dev_type, dev_version;
  weft_abi_vdev_props_v12_t vprops;
  size_t max_p2p_bytes, max_coll_bytes;
  int max_multi_request_size;
  int16_t rail_id, plane_id;
} weft_abi_props_v12_t;

typedef weft_abi_props_v9_t weft_abi_props_v10_t;

// v11's and v12's per-communicator attributes (setNetAttr); weft never sets them.
typedef struct {
  int32_t max_concurrent_peers, min_concurrent_peers, max_flows_per_peer, min_flows_per_peer;
} weft_abi_comm_attr_t;
typedef struct {
  weft_abi_comm_attr_t send_attr, recv_attr;
  uint32_t op, algo, proto;
} weft_abi_net_attr_t;

/* ---- the plugin structs ---- */

// v6 (NCCL 2.13-2.18), the oldest version weft loads: int sizes, regMr
// included; no device offload, so connect and accept take no handle.
typedef struct {
  const char *name;
  ncclResult_t (*init)(weft_abi_logger_t log);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*get_properties)(int dev, weft_abi_props_v6_t *props);
  ncclResult_t (*listen)(int dev, void *handle, void **listen_comm);
  ncclResult_t (*connect)(int dev, void *handle, void **send_comm);
  ncclResult_t (*accept)(void *listen_comm, void **recv_comm);
  ncclResult_t (*reg_mr)(void *comm, void *data, int size, int type, void **mhandle);
  ncclResult_t (*reg_mr_dmabuf)(void *comm, void *data, size_t size, int type, uint64_t offset, int fd, void **mhandle);
  ncclResult_t (*dereg_mr)(void *comm, void *mhandle);
  ncclResult_t (*isend)(void *send_comm, void *data, int size, int tag, void *mhandle, void **request);
  ncclResult_t (*irecv)(void *recv_comm, int n, void **data, int *sizes, int *tags, void **mhandles, void **request);
  ncclResult_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhandles, void **request);
  ncclResult_t (*test)(void *request, int *done, int *sizes);
  ncclResult_t (*close_send)(void *send_comm);
  ncclResult_t (*close_recv)(void *recv_comm);
  ncclResult_t (*close_listen)(void *listen_comm);
} weft_abi_net_v6_t;

// v7 (NCCL 2.19): device offload (a handle out of connect and accept,
// getDeviceMr, irecvConsumed); regMr still takes an int size.
typedef struct {
  const char *name;
  ncclResult_t (*init)(weft_abi_logger_t log);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*get_properties)(int dev, weft_abi_props_v7_t *props);
  ncclResult_t (*listen)(int dev, void *handle, void **listen_comm);
  ncclResult_t (*connect)(int dev, void *handle, void **send_comm, weft_abi_dev_handle_t **send_dev);
  ncclResult_t (*accept)(void *listen_comm, void **recv_comm, weft_abi_dev_handle_t **recv_dev);
  ncclResult_t (*reg_mr)(void *comm, void *data, int size, int type, void **mhandle);
  ncclResult_t (*reg_mr_dmabuf)(void *comm, void *data, size_t size, int type, uint64_t offset, int fd, void **mhandle);
  ncclResult_t (*dereg_mr)(void *comm, void *mhandle);
  ncclResult_t (*isend)(void *send_comm, void *data, int size, int tag, void *mhandle, void **request);
  ncclResult_t (*irecv)(void *recv_comm, int n, void **data, int *sizes, int *tags, void **mhandles, void **request);
  ncclResult_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhandles, void **request);
  ncclResult_t (*test)(void *request, int *done, int *sizes);
  ncclResult_t (*close_send)(void *send_comm);
  ncclResult_t (*close_recv)(void *recv_comm);
  ncclResult_t (*close_listen)(void *listen_comm);
  ncclResult_t (*get_device_mr)(void *comm, void *mhandle, void **dptr_mhandle);
  ncclResult_t (*irecv_consumed)(void *recv_comm, int n, void *request);
} weft_abi_net_v7_t;

// v8 (NCCL 2.20-2.23): regMr takes a size_t; message sizes stay int, no
// context.
typedef struct {
  const char *name;
  ncclResult_t (*init)(weft_abi_logger_t log);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*get_properties)(int dev, weft_abi_props_v8_t *props);
  ncclResult_t (*listen)(int dev, void *handle, void **listen_comm);
  ncclResult_t (*connect)(int dev, void *handle, void **send_comm, weft_abi_dev_handle_t **send_dev);
  ncclResult_t (*accept)(void *listen_comm, void **recv_comm, weft_abi_dev_handle_t **recv_dev);
  ncclResult_t (*reg_mr)(void *comm, void *data, size_t size, int type, void **mhandle);
  ncclResult_t (*reg_mr_dmabuf)(void *comm, void *data, size_t size, int type, uint64_t offset, int fd, void **mhandle);
  ncclResult_t (*dereg_mr)(void *comm, void *mhandle);
  ncclResult_t (*isend)(void *send_comm, void *data, int size, int tag, void *mhandle, void **request);
  ncclResult_t (*irecv)(void *recv_comm, int n, void **data, int *sizes, int *tags, void **mhandles, void **request);
  ncclResult_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhandles, void **request);
  ncclResult_t (*test)(void *request, int *done, int *sizes);
  ncclResult_t (*close_send)(void *send_comm);
  ncclResult_t (*close_recv)(void *recv_comm);
  ncclResult_t (*close_listen)(void *listen_comm);
  ncclResult_t (*get_device_mr)(void *comm, void *mhandle, void **dptr_mhandle);
  ncclResult_t (*irecv_consumed)(void *recv_comm, int n, void *request);
} weft_abi_net_v8_t;

// v9: sizes become size_t; properties grow; virtual devices.
typedef struct {
  const char *name;
  ncclResult_t (*init)(weft_abi_logger_t log);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*get_properties)(int dev, weft_abi_props_v9_t *props);
  ncclResult_t (*listen)(int dev, void *handle, void **listen_comm);
  ncclResult_t (*connect)(int dev, void *handle, void **send_comm, weft_abi_dev_handle_t **send_dev);
  ncclResult_t (*accept)(void *listen_comm, void **recv_comm, weft_abi_dev_handle_t **recv_dev);
  ncclResult_t (*reg_mr)(void *comm, void *data, size_t size, int type, void **mhandle);
  ncclResult_t (*reg_mr_dmabuf)(void *comm, void *data, size_t size, int type, uint64_t offset, int fd, void **mhandle);
  ncclResult_t (*dereg_mr)(void *comm, void *mhandle);
  ncclResult_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request);
  ncclResult_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles, void **request);
  ncclResult_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhandles, void **request);
  ncclResult_t (*test)(void *request, int *done, int *sizes);
  ncclResult_t (*close_send)(void *send_comm);
  ncclResult_t (*close_recv)(void *recv_comm);
  ncclResult_t (*close_listen)(void *listen_comm);
  ncclResult_t (*get_device_mr)(void *comm, void *mhandle, void **dptr_mhandle);
  ncclResult_t (*irecv_consumed)(void *recv_comm, int n, void *request);
  ncclResult_t (*make_vdevice)(int *dev, weft_abi_vdev_props_v9_t *props);
} weft_abi_net_v9_t;

// v10: init takes a profiler callback, connect a communicator config,
// isend/irecv a profiler handle each.
typedef struct {
  const char *name;
  ncclResult_t (*init)(weft_abi_logger_t log, weft_abi_profiler_cb_t prof);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*get_properties)(int dev, weft_abi_props_v10_t *props);
  ncclResult_t (*listen)(int dev, void *handle, void **listen_comm);
  ncclResult_t (*connect)(int dev, weft_abi_comm_config_t *config, void *handle, void **send_comm,
                          weft_abi_dev_handle_t **send_dev);
  ncclResult_t (*accept)(void *listen_comm, void **recv_comm, weft_abi_dev_handle_t **recv_dev);
  ncclResult_t (*reg_mr)(void *comm, void *data, size_t size, int type, void **mhandle);
  ncclResult_t (*reg_mr_dmabuf)(void *comm, void *data, size_t size, int type, uint64_t offset, int fd, void **mhandle);
  ncclResult_t (*dereg_mr)(void *comm, void *mhandle);
  ncclResult_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mhandle, void *phandle,
                        void **request);
  ncclResult_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles, void **phandles,
                        void **request);
  ncclResult_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhandles, void **request);
  ncclResult_t (*test)(void *request, int *done, int *sizes);
  ncclResult_t (*close_send)(void *send_comm);
  ncclResult_t (*close_recv)(void *recv_comm);
  ncclResult_t (*close_listen)(void *listen_comm);
  ncclResult_t (*get_device_mr)(void *comm, void *mhandle, void **dptr_mhandle);
  ncclResult_t (*irecv_consumed)(void *recv_comm, int n, void *request);
  ncclResult_t (*make_vdevice)(int *dev, weft_abi_vdev_props_v9_t *props);
} weft_abi_net_v10_t;

// v11: a context per init (per NCCL communicator) passed to listen and
// connect; the config moves to init; finalize and setNetAttr.
typedef struct {
  const char *name;
  ncclResult_t (*init)(void **ctx, uint64_t comm_id, weft_abi_comm_config_t *config, weft_abi_logger_t log,
                       weft_abi_profiler_cb_t prof);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*get_properties)(int dev, weft_abi_props_v11_t *props);
  ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listen_comm);
  ncclResult_t (*connect)(void *ctx, int dev, void *handle, void **send_comm, weft_abi_dev_handle_t **send_dev);
  ncclResult_t (*accept)(void *listen_comm, void **recv_comm, weft_abi_dev_handle_t **recv_dev);
  ncclResult_t (*reg_mr)(void *comm, void *data, size_t size, int type, void **mhandle);
  ncclResult_t (*reg_mr_dmabuf)(void *comm, void *data, size_t size, int type, uint64_t offset, int fd, void **mhandle);
  ncclResult_t (*dereg_mr)(void *comm, void *mhandle);
  ncclResult_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mhandle, void *phandle,
                        void **request);
  ncclResult_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles, void **phandles,
                        void **request);
  ncclResult_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhandles, void **request);
  ncclResult_t (*test)(void *request, int *done, int *sizes);
  ncclResult_t (*close_send)(void *send_comm);
  ncclResult_t (*close_recv)(void *recv_comm);
  ncclResult_t (*close_listen)(void *listen_comm);
  ncclResult_t (*get_device_mr)(void *comm, void *mhandle, void **dptr_mhandle);
  ncclResult_t (*irecv_consumed)(void *recv_comm, int n, void *request);
  ncclResult_t (*make_vdevice)(int *dev, weft_abi_vdev_props_v9_t *props);
  ncclResult_t (*finalize)(void *ctx);
  ncclResult_t (*set_net_attr)(void *ctx, weft_abi_net_attr_t *attr);
} weft_abi_net_v11_t;

// v12 (NCCL 2.30): v11's calls, with v12's properties (rail, plane,
// eight devices per virtual one) for getProperties and makeVDevice.
typedef struct {
  const char *name;
  ncclResult_t (*init)(void **ctx, uint64_t comm_id, weft_abi_comm_config_t *config, weft_abi_logger_t log,
                       weft_abi_profiler_cb_t prof);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*get_properties)(int dev, weft_abi_props_v12_t *props);
  ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listen_comm);
  ncclResult_t (*connect)(void *ctx, int dev, void *handle, void **send_comm, weft_abi_dev_handle_t **send_dev);
  ncclResult_t (*accept)(void *listen_comm, void **recv_comm, weft_abi_dev_handle_t **recv_dev);
  ncclResult_t (*reg_mr)(void *comm, void *data, size_t size, int type, void **mhandle);
  ncclResult_t (*reg_mr_dmabuf)(void *comm, void *data, size_t size, int type, uint64_t offset, int fd, void **mhandle);
  ncclResult_t (*dereg_mr)(void *comm, void *mhandle);
  ncclResult_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mhandle, void *phandle,
                        void **request);
  ncclResult_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles, void **phandles,
                        void **request);
  ncclResult_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhandles, void **request);
  ncclResult_t (*test)(void *request, int *done, int *sizes);
  ncclResult_t (*close_send)(void *send_comm);
  ncclResult_t (*close_recv)(void *recv_comm);
  ncclResult_t (*close_listen)(void *listen_comm);
  ncclResult_t (*get_device_mr)(void *comm, void *mhandle, void **dptr_mhandle);
  ncclResult_t (*irecv_consumed)(void *recv_comm, int n, void *request);
  ncclResult_t (*make_vdevice)(int *dev, weft_abi_vdev_props_v12_t *props);
  ncclResult_t (*finalize)(void *ctx);
  ncclResult_t (*set_net_attr)(void *ctx, weft_abi_net_attr_t *attr);
} weft_abi_net_v12_t;

#endif
