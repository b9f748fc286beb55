/*
 * topo_probe.h — what the vendor libraries add to hwloc's view of this
 * machine: NVLinks from NVML (topo_nvml.c) and RDMA devices from libibverbs
 * (topo_ibv.c). Both libraries are opened with dlopen when detection runs;
 * where one is missing, or sees no device, the graph is left as it was and
 * the status line says why. Nothing here fails detection except ENOMEM.
 *
 * Tests steer the probes through the overrides below: another library name
 * (a name that does not exist exercises the absent path), or, for NVML, a
 * table of functions standing in for the library.
 */
#ifndef WEFT_TOPO_PROBE_H
#define WEFT_TOPO_PROBE_H

#include <stddef.h>

#include "topo.h"

// --- NVML: the part of its ABI weft uses (declared here, no CUDA headers) ---
typedef int weft_nvml_return_t;         // nvmlReturn_t: 0 is NVML_SUCCESS
typedef struct weft_nvml_device *weft_nvml_device_t; // nvmlDevice_t (opaque)
#define WEFT_NVML_SUCCESS 0
#define WEFT_NVML_MAX_LINKS 18          // NVML_NVLINK_MAX_LINKS
#define WEFT_NVML_REMOTE_GPU 0          // nvmlIntNvLinkDeviceType_t values
#define WEFT_NVML_REMOTE_NPU 1
#define WEFT_NVML_REMOTE_SWITCH 2

typedef struct {                        // nvmlPciInfo_t (version 2 and later)
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
} weft_nvml_pci_t;

typedef struct {
  weft_nvml_return_t (*init)(void);     // nvmlInit_v2
  weft_nvml_return_t (*shutdown)(void); // nvmlShutdown
  const char *(*error_string)(weft_nvml_return_t);
  weft_nvml_return_t (*by_busid)(const char *busid, weft_nvml_device_t *dev);    // ..._v2
  weft_nvml_return_t (*link_state)(weft_nvml_device_t, unsigned link, int *on);  // nvmlEnableState_t
  weft_nvml_return_t (*link_remote)(weft_nvml_device_t, unsigned link, weft_nvml_pci_t *pci); // ..._v2
  weft_nvml_return_t (*link_version)(weft_nvml_device_t, unsigned link, unsigned *version);
  weft_nvml_return_t (*remote_type)(weft_nvml_device_t, unsigned link, int *type); // may be NULL
  weft_nvml_return_t (*cuda_cc)(weft_nvml_device_t, int *major, int *minor);       // may be NULL
} weft_nvml_ops_t;

// Adds, for every NVIDIA GPU already in the (not yet finalised) graph, its
// NVLinks as NVML reports them, replacing those hwloc's distances gave.
// Returns 0 (also when NVML is absent or sees nothing) or -1 on ENOMEM;
// status says what happened in one line.
// A function of an optional library: its name, where its pointer goes in
// the caller's table, and whether the library may lack it.
typedef struct {
  const char *name;
  size_t offset;
  int optional;
} weft_topo_sym_t;

// dlopen `name` and fill *ops from syms (topo_dl.c); 0, or -1 with the reason in why.
int weft_topo_dlopen(const char *name, const weft_topo_sym_t *syms, size_t nsyms, void *ops, void **handle,
                     char *why, size_t len);

int weft_topo_nvml_probe(weft_topo_t *topo, char *status, size_t len);
// Tests: library name to open (NULL: libnvidia-ml.so.1), or a stand-in table.
void weft_topo_nvml_override(const char *libname, const weft_nvml_ops_t *ops);

// --- libibverbs -------------------------------------------------------------------
// Adds every RDMA device's active ports (speed = active_speed x active_width,
// GUID) under the device's PCI node, creating it under its NUMA node's CPU
// when hwloc did not list it. Same contract as weft_topo_nvml_probe.
int weft_topo_ibv_probe(weft_topo_t *topo, char *status, size_t len);
void weft_topo_ibv_override(const char *libname); // NULL: libibverbs.so.1

// Gb/s of one port: the per-lane rate of an ibv active_speed code times the
// lane count of an active_width code; 0 when either code is unknown.
double weft_topo_ibv_gbps(int active_speed, int active_width);

#endif
