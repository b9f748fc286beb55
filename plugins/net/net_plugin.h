/*
 * net_plugin.h — NCCL net plugins inside weft: the loader (net_plugin_load.c)
 * finds and binds a plugin, the adapter (net_plugin_adapt.c) presents it to
 * the network transport as a weft_net_t (transports/net/net.h).
 *
 * Between them sits weft_plugin_ops_t: one plugin's calls with the
 * differences between ABI versions taken out (argument order, int or
 * size_t sizes, the v11 and v12 context, the properties' layouts, the
 * device-offload and profiler arguments weft never uses). Each version has a small file,
 * net_plugin_vN.c, that fills it from that version's exported struct.
 */
#ifndef WEFT_NET_PLUGIN_H
#define WEFT_NET_PLUGIN_H

#include <stddef.h>

#include "net.h"
#include "net_abi.h"

// The largest message an ABI with int sizes (v6 to v8) is given, as NCCL
// gives it: a power of two rather than INT_MAX.
#define WEFT_NET_PLUGIN_INT_MAX_BYTES ((size_t)1 << 30)

typedef struct {
  char name[64];      // the device's name
  int ptr_support;    // NCCL_PTR_* bits
  int speed;          // Mbps
  size_t max_bytes;   // the largest message one isend/irecv may carry
} weft_plugin_props_t;

typedef struct {
  const char *name;   // the plugin's name, from its struct
  int version;        // the ABI version bound (6..12)
  int max_requests;   // plugin requests one communicator may have outstanding
  ncclResult_t (*init)(weft_abi_logger_t log);  // v11+: makes the process's one context
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*get_properties)(int dev, weft_plugin_props_t *props);
  ncclResult_t (*listen)(int dev, void *handle, void **listen_comm);
  // Non-blocking, as in the ABI: *send_comm / *recv_comm stay NULL until up.
  ncclResult_t (*connect)(int dev, void *handle, void **send_comm);
  ncclResult_t (*accept)(void *listen_comm, void **recv_comm);
  ncclResult_t (*reg_mr)(void *comm, void *data, size_t size, void **mhandle);  // host memory
  ncclResult_t (*dereg_mr)(void *comm, void *mhandle);
  // *request NULL: the plugin cannot take it now; post it again later.
  ncclResult_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request);
  ncclResult_t (*irecv)(void *recv_comm, void *data, size_t size, int tag, void *mhandle, void **request);
  ncclResult_t (*test)(void *request, int *done, size_t *size);
  ncclResult_t (*close_send)(void *send_comm);
  ncclResult_t (*close_recv)(void *recv_comm);
  ncclResult_t (*close_listen)(void *listen_comm);
} weft_plugin_ops_t;

// net_plugin_vN.c: if `dl` exports ncclNetPlugin_vN, fill *ops from it and
// return 1; else 0.
int weft_net_plugin_bind_v6(void *dl, weft_plugin_ops_t *ops);
int weft_net_plugin_bind_v7(void *dl, weft_plugin_ops_t *ops);
int weft_net_plugin_bind_v8(void *dl, weft_plugin_ops_t *ops);
int weft_net_plugin_bind_v9(void *dl, weft_plugin_ops_t *ops);
int weft_net_plugin_bind_v10(void *dl, weft_plugin_ops_t *ops);
int weft_net_plugin_bind_v11(void *dl, weft_plugin_ops_t *ops);
int weft_net_plugin_bind_v12(void *dl, weft_plugin_ops_t *ops);

// Fills the version-independent properties (name may be NULL).
void weft_net_plugin_props(weft_plugin_props_t *out, const char *name, int ptr_support, int speed, size_t max_bytes);

// The logger plugins receive: NCCL's ncclDebugLogger_t, printing through
// weft's debug.h (levels, NCCL_DEBUG_SUBSYS, NCCL_DEBUG_FILE).
void weft_net_plugin_log(int level, unsigned long flags, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

// The adapter over bound ops (net_plugin_adapt.c); one per process. Its
// init() initialises the plugin and checks it has a device for host memory.
const weft_net_t *weft_net_plugin_adapt(const weft_plugin_ops_t *ops);

// The plugin NCCL_NET_PLUGIN names (unset: libnccl-net.so if there is one;
// "none": no plugin), loaded once per process; NULL when there is none or
// it could not be loaded (a WARN said why). Not initialised yet.
const weft_net_t *weft_net_plugin(void);

// Load `name` now (NULL: the default libnccl-net.so, quietly), binding the
// newest version <= max_version (0: 12). For weft_net_plugin and tests; a
// process binds one plugin: later calls return the first one bound.
const weft_net_t *weft_net_plugin_load(const char *name, int max_version);

// The ABI version of the bound plugin, 0 if none.
int weft_net_plugin_version(void);

#endif
