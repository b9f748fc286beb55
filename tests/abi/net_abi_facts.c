/*
 * net_abi_facts.c — prints the binary facts of the net plugin ABI, versions
 * 6 to 12, one "name value" line each, so that weft's declarations
 * (plugins/net/net_abi.h) and NVIDIA's (the headers beside NVIDIA's example
 * net plugin, built with -DWEFT_NET_FACTS_NVIDIA) can be compared with diff.
 *
 * Covered: the constants both declare, the size of every struct and the
 * offset and size of each of its fields (under weft's field names, which
 * the NVIDIA build maps to NCCL's), and the type of every call of every
 * version, checked against the signature spelled out here (struct
 * arguments in the header's own type for that version): a drift prints
 * "MISMATCH" and the program exits 1. nvidia_net_plugin.sh builds it both
 * ways and diffs the outputs.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef WEFT_NET_FACTS_NVIDIA
#include "net.h"
#define F(weft, nccl) nccl
#define T_PROPS(v) ncclNetProperties_v##v##_t
#define T_NET(v) ncclNet_v##v##_t
#define T_VPROPS(v) ncclNetVDeviceProps_v##v##_t
#define T_CONFIG(v) ncclNetCommConfig_v##v##_t
#define T_ATTR(v) ncclNetAttr_v##v##_t
#define T_COMM_ATTR ncclNetCommAttr_v12_t
#define T_DEVH ncclNetDeviceHandle_v7_t
#define T_LOGGER ncclDebugLogger_t
#define T_PROF ncclProfilerCallback_t
#else
#include "net_abi.h"
#define F(weft, nccl) weft
#define T_PROPS(v) weft_abi_props_v##v##_t
#define T_NET(v) weft_abi_net_v##v##_t
#define T_VPROPS(v) VPROPS_##v
#define VPROPS_9 weft_abi_vdev_props_v9_t
#define VPROPS_10 weft_abi_vdev_props_v9_t
#define VPROPS_11 weft_abi_vdev_props_v9_t
#define VPROPS_12 weft_abi_vdev_props_v12_t
#define T_CONFIG(v) weft_abi_comm_config_t
#define T_ATTR(v) weft_abi_net_attr_t
#define T_COMM_ATTR weft_abi_comm_attr_t
#define T_DEVH weft_abi_dev_handle_t
#define T_LOGGER weft_abi_logger_t
#define T_PROF weft_abi_profiler_cb_t
#endif

static int mismatches;

#define INT_FACT(m) printf("%s %lld\n", #m, (long long)(m))
#define SIZE_FACT(label, t) printf("sizeof(%s) %zu\n", label, sizeof(t))
// A field: its offset and size, under weft's name.
#define FIELD(label, t, weft, nccl) \
  printf("%s.%s %zu %zu\n", label, #weft, offsetof(t, F(weft, nccl)), sizeof(((t *)0)->F(weft, nccl)))
// A call of version v: its offset, and whether its type is `type`.
#define CALL(v, weft, nccl, type)                                                                            \
  do {                                                                                                       \
    int ok_ = _Generic(((T_NET(v) *)0)->F(weft, nccl), type: 1, default: 0);                                 \
    mismatches += !ok_;                                                                                      \
    printf("net_v%d.%s %zu %s\n", v, #weft, offsetof(T_NET(v), F(weft, nccl)), ok_ ? "ok" : "MISMATCH");     \
  } while (0)

typedef ncclResult_t (*close_fn)(void *);

// The calls no version changed (get_properties only in its struct).
#define COMMON_CALLS(v)                                                                                   \
  CALL(v, name, name, const char *);                                                                      \
  CALL(v, devices, devices, ncclResult_t (*)(int *));                                                     \
  CALL(v, get_properties, getProperties, ncclResult_t (*)(int, T_PROPS(v) *));                            \
  CALL(v, reg_mr_dmabuf, regMrDmaBuf, ncclResult_t (*)(void *, void *, size_t, int, uint64_t, int, void **)); \
  CALL(v, dereg_mr, deregMr, ncclResult_t (*)(void *, void *));                                           \
  CALL(v, iflush, iflush, ncclResult_t (*)(void *, int, void **, int *, void **, void **));                \
  CALL(v, test, test, ncclResult_t (*)(void *, int *, int *));                                            \
  CALL(v, close_send, closeSend, close_fn);                                                               \
  CALL(v, close_recv, closeRecv, close_fn);                                                               \
  CALL(v, close_listen, closeListen, close_fn)

// v7 to v12: device offload calls.
#define OFFLOAD_CALLS(v)                                                                   \
  CALL(v, accept, accept, ncclResult_t (*)(void *, void **, T_DEVH **));                   \
  CALL(v, get_device_mr, getDeviceMr, ncclResult_t (*)(void *, void *, void **));          \
  CALL(v, irecv_consumed, irecvConsumed, ncclResult_t (*)(void *, int, void *))

// v6 to v8 (and v9's regMr onwards): the size types.
#define INT_SIZES(v)                                                                                      \
  CALL(v, isend, isend, ncclResult_t (*)(void *, void *, int, int, void *, void **));                    \
  CALL(v, irecv, irecv, ncclResult_t (*)(void *, int, void **, int *, int *, void **, void **))
#define SIZE_T_REG(v) CALL(v, reg_mr, regMr, ncclResult_t (*)(void *, void *, size_t, int, void **))
#define PROFILED_SIZES(v)                                                                                  \
  CALL(v, isend, isend, ncclResult_t (*)(void *, void *, size_t, int, void *, void *, void **));          \
  CALL(v, irecv, irecv, ncclResult_t (*)(void *, int, void **, size_t *, int *, void **, void **, void **))
// v11 and v12: a context.
#define CONTEXT_CALLS(v)                                                                                    \
  CALL(v, init, init, ncclResult_t (*)(void **, uint64_t, T_CONFIG(v) *, T_LOGGER, T_PROF));               \
  CALL(v, listen, listen, ncclResult_t (*)(void *, int, void *, void **));                                 \
  CALL(v, connect, connect, ncclResult_t (*)(void *, int, void *, void **, T_DEVH **));                    \
  CALL(v, make_vdevice, makeVDevice, ncclResult_t (*)(int *, T_VPROPS(v) *));                              \
  CALL(v, finalize, finalize, ncclResult_t (*)(void *));                                                   \
  CALL(v, set_net_attr, setNetAttr, ncclResult_t (*)(void *, T_ATTR(v) *))

#define PROPS_COMMON(v)                                               \
  do {                                                                \
    SIZE_FACT("props_v" #v, T_PROPS(v));                              \
    FIELD("props_v" #v, T_PROPS(v), name, name);                      \
    FIELD("props_v" #v, T_PROPS(v), pci_path, pciPath);               \
    FIELD("props_v" #v, T_PROPS(v), guid, guid);                      \
    FIELD("props_v" #v, T_PROPS(v), ptr_support, ptrSupport);         \
    FIELD("props_v" #v, T_PROPS(v), speed, speed);                    \
    FIELD("props_v" #v, T_PROPS(v), port, port);                      \
    FIELD("props_v" #v, T_PROPS(v), latency, latency);                \
    FIELD("props_v" #v, T_PROPS(v), max_comms, maxComms);             \
    FIELD("props_v" #v, T_PROPS(v), max_recvs, maxRecvs);             \
  } while (0)
#define PROPS_OFFLOAD(v)                                              \
  do {                                                                \
    FIELD("props_v" #v, T_PROPS(v), dev_type, netDeviceType);         \
    FIELD("props_v" #v, T_PROPS(v), dev_version, netDeviceVersion);   \
  } while (0)
#define PROPS_V8(v) FIELD("props_v" #v, T_PROPS(v), reg_is_global, regIsGlobal)
#define PROPS_V9(v)                                                   \
  do {                                                                \
    FIELD("props_v" #v, T_PROPS(v), force_flush, forceFlush);         \
    FIELD("props_v" #v, T_PROPS(v), vprops, vProps);                  \
    FIELD("props_v" #v, T_PROPS(v), max_p2p_bytes, maxP2pBytes);      \
    FIELD("props_v" #v, T_PROPS(v), max_coll_bytes, maxCollBytes);    \
  } while (0)
#define PROPS_V11(v) FIELD("props_v" #v, T_PROPS(v), max_multi_request_size, maxMultiRequestSize)

int main(void) {
  INT_FACT(NCCL_NET_HANDLE_MAXSIZE);
  INT_FACT(NCCL_NET_MAX_REQUESTS);
  INT_FACT(NCCL_NET_MAX_DEVS_PER_NIC);
  INT_FACT(NCCL_NET_TRAFFIC_CLASS_UNDEF);
  INT_FACT(NCCL_NET_ID_UNDEF);
  INT_FACT(NCCL_PTR_HOST);
  INT_FACT(NCCL_PTR_CUDA);
  INT_FACT(NCCL_PTR_DMABUF);
  SIZE_FACT("logger", T_LOGGER);

  SIZE_FACT("dev_handle", T_DEVH);
  FIELD("dev_handle", T_DEVH, type, netDeviceType);
  FIELD("dev_handle", T_DEVH, version, netDeviceVersion);
  FIELD("dev_handle", T_DEVH, handle, handle);
  FIELD("dev_handle", T_DEVH, size, size);
  FIELD("dev_handle", T_DEVH, needs_proxy_progress, needsProxyProgress);
  SIZE_FACT("vprops_v9", T_VPROPS(9));
  FIELD("vprops_v9", T_VPROPS(9), devs, devs);
  SIZE_FACT("vprops_v12", T_VPROPS(12));
  FIELD("vprops_v12", T_VPROPS(12), devs, devs);
  SIZE_FACT("comm_config", T_CONFIG(12));
  FIELD("comm_config", T_CONFIG(12), traffic_class, trafficClass);
  SIZE_FACT("comm_attr", T_COMM_ATTR);
  FIELD("comm_attr", T_COMM_ATTR, max_concurrent_peers, maxConcurrentPeers);
  FIELD("comm_attr", T_COMM_ATTR, min_flows_per_peer, minFlowsPerPeer);
  SIZE_FACT("net_attr", T_ATTR(12));
  FIELD("net_attr", T_ATTR(12), recv_attr, recvCommAttr);
  FIELD("net_attr", T_ATTR(12), op, op);
  FIELD("net_attr", T_ATTR(12), proto, proto);

  PROPS_COMMON(6);
  PROPS_COMMON(7); PROPS_OFFLOAD(7);
  PROPS_COMMON(8); PROPS_OFFLOAD(8); PROPS_V8(8);
  PROPS_COMMON(9); PROPS_OFFLOAD(9); PROPS_V8(9); PROPS_V9(9);
  PROPS_COMMON(10); PROPS_OFFLOAD(10); PROPS_V8(10); PROPS_V9(10);
  PROPS_COMMON(11); PROPS_OFFLOAD(11); PROPS_V8(11); PROPS_V9(11); PROPS_V11(11);
  PROPS_COMMON(12); PROPS_OFFLOAD(12); PROPS_V8(12); PROPS_V9(12); PROPS_V11(12);
  FIELD("props_v12", T_PROPS(12), rail_id, railId);
  FIELD("props_v12", T_PROPS(12), plane_id, planeId);

  SIZE_FACT("net_v6", T_NET(6));
  COMMON_CALLS(6);
  CALL(6, init, init, ncclResult_t (*)(T_LOGGER));
  CALL(6, listen, listen, ncclResult_t (*)(int, void *, void **));
  CALL(6, connect, connect, ncclResult_t (*)(int, void *, void **));
  CALL(6, accept, accept, ncclResult_t (*)(void *, void **));
  CALL(6, reg_mr, regMr, ncclResult_t (*)(void *, void *, int, int, void **));
  INT_SIZES(6);

  SIZE_FACT("net_v7", T_NET(7));
  COMMON_CALLS(7);
  OFFLOAD_CALLS(7);
  CALL(7, init, init, ncclResult_t (*)(T_LOGGER));
  CALL(7, listen, listen, ncclResult_t (*)(int, void *, void **));
  CALL(7, connect, connect, ncclResult_t (*)(int, void *, void **, T_DEVH **));
  CALL(7, reg_mr, regMr, ncclResult_t (*)(void *, void *, int, int, void **));
  INT_SIZES(7);

  SIZE_FACT("net_v8", T_NET(8));
  COMMON_CALLS(8);
  OFFLOAD_CALLS(8);
  CALL(8, init, init, ncclResult_t (*)(T_LOGGER));
  CALL(8, listen, listen, ncclResult_t (*)(int, void *, void **));
  CALL(8, connect, connect, ncclResult_t (*)(int, void *, void **, T_DEVH **));
  SIZE_T_REG(8);
  INT_SIZES(8);

  SIZE_FACT("net_v9", T_NET(9));
  COMMON_CALLS(9);
  OFFLOAD_CALLS(9);
  CALL(9, init, init, ncclResult_t (*)(T_LOGGER));
  CALL(9, listen, listen, ncclResult_t (*)(int, void *, void **));
  CALL(9, connect, connect, ncclResult_t (*)(int, void *, void **, T_DEVH **));
  SIZE_T_REG(9);
  CALL(9, isend, isend, ncclResult_t (*)(void *, void *, size_t, int, void *, void **));
  CALL(9, irecv, irecv, ncclResult_t (*)(void *, int, void **, size_t *, int *, void **, void **));
  CALL(9, make_vdevice, makeVDevice, ncclResult_t (*)(int *, T_VPROPS(9) *));

  SIZE_FACT("net_v10", T_NET(10));
  COMMON_CALLS(10);
  OFFLOAD_CALLS(10);
  CALL(10, init, init, ncclResult_t (*)(T_LOGGER, T_PROF));
  CALL(10, listen, listen, ncclResult_t (*)(int, void *, void **));
  CALL(10, connect, connect, ncclResult_t (*)(int, T_CONFIG(10) *, void *, void **, T_DEVH **));
  SIZE_T_REG(10);
  PROFILED_SIZES(10);
  CALL(10, make_vdevice, makeVDevice, ncclResult_t (*)(int *, T_VPROPS(10) *));

  SIZE_FACT("net_v11", T_NET(11));
  COMMON_CALLS(11);
  OFFLOAD_CALLS(11);
  CONTEXT_CALLS(11);
  SIZE_T_REG(11);
  PROFILED_SIZES(11);

  SIZE_FACT("net_v12", T_NET(12));
  COMMON_CALLS(12);
  OFFLOAD_CALLS(12);
  CONTEXT_CALLS(12);
  SIZE_T_REG(12);
  PROFILED_SIZES(12);

  if (mismatches) fprintf(stderr, "%d call(s) whose type differs from the signature spelled here\n", mismatches);
  return mismatches ? 1 : 0;
}
