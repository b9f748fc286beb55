/*
 * topo_nvml.c — NVLinks from NVML (libnvidia-ml.so.1, opened with dlopen).
 *
 * hwloc reports NVLinks only where its NVML plugin was built in; NVML
 * itself is the authority. For each NVIDIA GPU hwloc found, every NVLink
 * that is up is followed to the PCI device at its far end: links to the
 * same device are counted together and recorded as one <nvlink> (a GPU, or
 * an NVSwitch that finalize creates when it is not in the tree). Where NVML
 * reports links for a GPU they replace the ones taken from hwloc's
 * distances. NVML's compute capability fills the GPU's sm.
 *
 * The few NVML types and prototypes used are declared in topo_probe.h, after
 * NVML's documented ABI, so no CUDA header is needed to build this.
 */
#include "topo_probe.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *lib_name = NULL;       // test override
static const weft_nvml_ops_t *fake = NULL; // test override

void weft_topo_nvml_override(const char *libname, const weft_nvml_ops_t *ops) {
  lib_name = libname;
  fake = ops;
}

static int is_nvidia_gpu(const weft_topo_node_t *n) {
  const char *cls = weft_topo_attr_get(&n->attrs, "class"), *vendor = weft_topo_attr_get(&n->attrs, "vendor");
  if (n->kind == WEFT_TOPO_GPU) return 1;
  return n->kind == WEFT_TOPO_PCI && cls && vendor && (strtol(cls, NULL, 0) >> 16) == 0x03 &&
         strtol(vendor, NULL, 0) == 0x10de;
}

// The node described with this bus id (the graph is not finalised yet).
static int node_by_busid(const weft_topo_t *t, const char *busid) {
  char want[32], have[32];
  weft_topo_busid_norm(busid, want, sizeof(want));
  for (int i = 0; i < t->nnodes; i++) {
    const char *b = weft_topo_attr_get(&t->nodes[i].attrs, "busid");
    if (!b || t->nodes[i].kind == WEFT_TOPO_NET) continue;
    weft_topo_busid_norm(b, have, sizeof(have));
    if (strcmp(have, want) == 0) return i;
  }
  return -1;
}

// Opens the library and fills ops; 0, or -1 with the reason in why.
static int load(weft_nvml_ops_t *ops, void **handle, char *why, size_t len) {
  static const weft_topo_sym_t syms[] = {
      {"nvmlInit_v2", offsetof(weft_nvml_ops_t, init), 0},
      {"nvmlShutdown", offsetof(weft_nvml_ops_t, shutdown), 0},
      {"nvmlErrorString", offsetof(weft_nvml_ops_t, error_string), 0},
      {"nvmlDeviceGetHandleByPciBusId_v2", offsetof(weft_nvml_ops_t, by_busid), 0},
      {"nvmlDeviceGetNvLinkState", offsetof(weft_nvml_ops_t, link_state), 0},
      {"nvmlDeviceGetNvLinkRemotePciInfo_v2", offsetof(weft_nvml_ops_t, link_remote), 0},
      {"nvmlDeviceGetNvLinkVersion", offsetof(weft_nvml_ops_t, link_version), 0},
      {"nvmlDeviceGetNvLinkRemoteDeviceType", offsetof(weft_nvml_ops_t, remote_type), 1},
      {"nvmlDeviceGetCudaComputeCapability", offsetof(weft_nvml_ops_t, cuda_cc), 1},
  };
  memset(ops, 0, sizeof(*ops));
  return weft_topo_dlopen(lib_name ? lib_name : "libnvidia-ml.so.1", syms, sizeof(syms) / sizeof(syms[0]), ops,
                          handle, why, len);
}

static void drop_nvlinks_from(weft_topo_t *t, int node) {
  int k = 0;
  for (int i = 0; i < t->nnvlinks; i++)
    if (t->nvlinks[i].from != node) t->nvlinks[k++] = t->nvlinks[i];
  t->nnvlinks = k;
}

// One GPU: its links grouped by far end. Returns the links added, -1 on ENOMEM.
static int probe_gpu(weft_topo_t *t, const weft_nvml_ops_t *ops, int g, unsigned *version) {
  weft_nvml_device_t dev;
  const char *busid = weft_topo_attr_get(&t->nodes[g].attrs, "busid");
  if (!busid || ops->by_busid(busid, &dev) != WEFT_NVML_SUCCESS) return 0;
  int major = 0, minor = 0;
  if (ops->cuda_cc && ops->cuda_cc(dev, &major, &minor) == WEFT_NVML_SUCCESS && major > 0 &&
      !weft_topo_attr_get(&t->nodes[g].dev, "sm") && weft_topo_attr_setf(&t->nodes[g].dev, "sm", "%d", major * 10 + minor))
    return -1;
  char target[WEFT_NVML_MAX_LINKS][32];
  int count[WEFT_NVML_MAX_LINKS], tclass[WEFT_NVML_MAX_LINKS], n = 0;
  for (unsigned l = 0; l < WEFT_NVML_MAX_LINKS; l++) {
    int on = 0, type = -1;
    weft_nvml_pci_t pci;
    memset(&pci, 0, sizeof(pci));
    if (ops->link_state(dev, l, &on) != WEFT_NVML_SUCCESS || !on) continue;
    if (ops->link_remote(dev, l, &pci) != WEFT_NVML_SUCCESS) continue;
    pci.bus_id[sizeof(pci.bus_id) - 1] = '\0';
    if (ops->link_version && *version == 0) ops->link_version(dev, l, version);
    char norm[32];
    weft_topo_busid_norm(pci.bus_id, norm, sizeof(norm));
    if (ops->remote_type && ops->remote_type(dev, l, &type) != WEFT_NVML_SUCCESS) type = -1;
    int cls = type == WEFT_NVML_REMOTE_GPU ? 0x030200 : type >= 0 && type <= WEFT_NVML_REMOTE_SWITCH ? 0x068000 : -1;
    if (cls < 0) { // no device type: a GPU when the graph has it as one, else an NVSwitch
      int peer = node_by_busid(t, norm);
      cls = peer >= 0 && is_nvidia_gpu(&t->nodes[peer]) ? 0x030200 : 0x068000;
    }
    int k = 0;
    while (k < n && strcmp(target[k], norm) != 0) k++;
    if (k == n) {
      snprintf(target[n], sizeof(target[n]), "%s", norm);
      count[n] = 0;
      tclass[n++] = cls;
    }
    count[k]++;
  }
  if (n == 0) return 0;
  drop_nvlinks_from(t, g);
  for (int k = 0; k < n; k++)
    if (weft_topo_add_nvlink(t, g, target[k], count[k], tclass[k], 0)) return -1;
  int links = 0;
  for (int k = 0; k < n; k++) links += count[k];
  return links;
}

int weft_topo_nvml_probe(weft_topo_t *t, char *status, size_t len) {
  int ngpus = 0;
  for (int i = 0; i < t->nnodes; i++) ngpus += is_nvidia_gpu(&t->nodes[i]);
  weft_nvml_ops_t ops;
  void *handle = NULL;
  char why[256];
  if (fake)
    ops = *fake;
  else if (load(&ops, &handle, why, sizeof(why))) {
    snprintf(status, len, "NVML: not available (%s)", why);
    return 0;
  }
  if (ngpus == 0) {
    snprintf(status, len, "NVML: available, no NVIDIA GPU to ask about");
    if (handle) dlclose(handle);
    return 0;
  }
  weft_nvml_return_t r = ops.init();
  if (r != WEFT_NVML_SUCCESS) {
    snprintf(status, len, "NVML: not available (nvmlInit: %s)", ops.error_string ? ops.error_string(r) : "error");
    if (handle) dlclose(handle);
    return 0;
  }
  int rc = 0, seen = 0, links = 0;
  unsigned version = 0;
  for (int i = 0; i < t->nnodes && rc == 0; i++) {
    if (!is_nvidia_gpu(&t->nodes[i])) continue;
    int k = probe_gpu(t, &ops, i, &version);
    if (k < 0) rc = -1;
    links += k > 0 ? k : 0;
    seen += k > 0;
  }
  ops.shutdown();
  if (handle) dlclose(handle);
  if (version)
    snprintf(status, len, "NVML: %d of %d GPUs with NVLinks, %d links (NVLink version code %u)", seen, ngpus, links,
             version);
  else
    snprintf(status, len, "NVML: %d GPUs, no NVLink up", ngpus);
  return rc;
}
