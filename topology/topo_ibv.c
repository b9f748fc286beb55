/*
 * topo_ibv.c — RDMA devices from libibverbs (libibverbs.so.1, opened with
 * dlopen so that a machine without rdma-core still runs).
 *
 * For each device: its active ports with their speed (active_speed lane rate
 * times active_width lanes), the node GUID, and where it sits: the PCI
 * device behind /sys/class/infiniband/<dev>/device and its NUMA node. A
 * device hwloc already placed gets its ports completed; one it missed hangs
 * under its NUMA node's CPU (a PCI NIC when sysfs names a PCI function, a
 * virtual one otherwise). Ports that are not ACTIVE are left out, as NCCL
 * does. No library or no device: the graph is unchanged.
 */
#include "topo_probe.h"
#include "busid.h"
#include "topo_sysfs.h"

#include <dlfcn.h>
#include <endian.h>
#include <infiniband/verbs.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *lib_name = NULL; // test override

void weft_topo_ibv_override(const char *libname) { lib_name = libname; }

typedef struct {
  struct ibv_device **(*get_list)(int *n);
  void (*free_list)(struct ibv_device **list);
  const char *(*name)(struct ibv_device *dev);
  __be64 (*guid)(struct ibv_device *dev);
  struct ibv_context *(*open)(struct ibv_device *dev);
  int (*close)(struct ibv_context *ctx);
  int (*query_device)(struct ibv_context *ctx, struct ibv_device_attr *attr);
  // The exported query_port fills the leading, long-standing fields of
  // struct ibv_port_attr (state, width, speed, link layer): all that is read.
  int (*query_port)(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
} ibv_ops_t;

double weft_topo_ibv_gbps(int active_speed, int active_width) {
  double lane = 0;
  switch (active_speed) {
  case 1: lane = 2.5; break;   // SDR
  case 2: lane = 5; break;     // DDR
  case 4: lane = 10; break;    // QDR
  case 8: lane = 10; break;    // FDR10
  case 16: lane = 14; break;   // FDR
  case 32: lane = 25; break;   // EDR
  case 64: lane = 50; break;   // HDR
  case 128: lane = 100; break; // NDR
  case 256: lane = 200; break; // XDR
  }
  int lanes = active_width == 1 ? 1 : active_width == 2 ? 4 : active_width == 4 ? 8 : active_width == 8 ? 12
              : active_width == 16 ? 2 : 0;
  return lane * lanes;
}

static int load(ibv_ops_t *ops, void **handle, char *why, size_t len) {
  static const weft_topo_sym_t syms[] = {
      {"ibv_get_device_list", offsetof(ibv_ops_t, get_list), 0},  {"ibv_free_device_list", offsetof(ibv_ops_t, free_list), 0},
      {"ibv_get_device_name", offsetof(ibv_ops_t, name), 0},      {"ibv_get_device_guid", offsetof(ibv_ops_t, guid), 0},
      {"ibv_open_device", offsetof(ibv_ops_t, open), 0},          {"ibv_close_device", offsetof(ibv_ops_t, close), 0},
      {"ibv_query_device", offsetof(ibv_ops_t, query_device), 0}, {"ibv_query_port", offsetof(ibv_ops_t, query_port), 0},
  };
  return weft_topo_dlopen(lib_name ? lib_name : "libibverbs.so.1", syms, sizeof(syms) / sizeof(syms[0]), ops, handle,
                          why, len);
}

// The graph node of an RDMA device: the PCI function sysfs names, found in
// or added to the graph, or a virtual NIC. -1 on ENOMEM.
static int nic_node(weft_topo_t *t, const char *dev) {
  char path[PATH_MAX], buf[64], busid[32];
  snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device", dev);
  weft_busid_of_link(path, busid, sizeof(busid));
  for (int i = 0; busid[0] && i < t->nnodes; i++) {
    const char *b = weft_topo_attr_get(&t->nodes[i].attrs, "busid");
    char norm[32];
    if (!b || t->nodes[i].kind == WEFT_TOPO_NET) continue;
    weft_topo_busid_norm(b, norm, sizeof(norm));
    if (strcmp(norm, busid) != 0) continue;
    t->nodes[i].kind = WEFT_TOPO_NIC;
    t->nodes[i].on_pci = 1;
    return i;
  }
  snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device/numa_node", dev);
  int numa = weft_sysfs_read_line(path, buf, sizeof(buf)) == 0 ? atoi(buf) : -1;
  int cpu = weft_sysfs_cpu_for_numa(t, numa);
  if (cpu < 0) return -2; // no CPU to hang it under: skip
  int n = weft_topo_add_node(t, WEFT_TOPO_NIC, cpu);
  if (n < 0 || !busid[0]) return n;
  weft_topo_node_t *node = &t->nodes[n];
  node->on_pci = 1;
  char speed[64], cls[32] = "0x020700", vendor[32] = "", device[32] = "";
  int width;
  snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/class", busid);
  weft_sysfs_read_line(path, cls, sizeof(cls));
  snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/vendor", busid);
  weft_sysfs_read_line(path, vendor, sizeof(vendor));
  snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/device", busid);
  weft_sysfs_read_line(path, device, sizeof(device));
  if (weft_topo_attr_set(&node->attrs, "busid", busid) || weft_topo_attr_set(&node->attrs, "class", cls) ||
      (vendor[0] && weft_topo_attr_set(&node->attrs, "vendor", vendor)) ||
      (device[0] && weft_topo_attr_set(&node->attrs, "device", device)))
    return -1;
  if (weft_sysfs_pci_link(busid, speed, sizeof(speed), &width) == 0 &&
      (weft_topo_attr_set(&node->attrs, "link_speed", speed) || weft_topo_attr_setf(&node->attrs, "link_width", "%d", width)))
    return -1;
  return n;
}

// The port node named dev with this port number under nic, or a new one.
static int port_node(weft_topo_t *t, int nic, const char *dev, int port) {
  int nets = 0;
  for (int i = 0; i < t->nnodes; i++) {
    const weft_topo_node_t *n = &t->nodes[i];
    if (n->kind != WEFT_TOPO_NET) continue;
    nets++;
    const char *name = weft_topo_attr_get(&n->attrs, "name"), *p = weft_topo_attr_get(&n->attrs, "port");
    if (n->parent == nic && name && strcmp(name, dev) == 0 && (!p || atoi(p) == port)) return i;
  }
  int p = weft_topo_add_node(t, WEFT_TOPO_NET, nic);
  if (p < 0) return -1;
  weft_topo_attrs_t *a = &t->nodes[p].attrs;
  if (weft_topo_attr_set(a, "name", dev) || weft_topo_attr_setf(a, "dev", "%d", nets)) return -1;
  return p;
}

// One device's active ports; returns how many, or -1 on ENOMEM.
static int add_device(weft_topo_t *t, const ibv_ops_t *ops, struct ibv_device *d) {
  const char *name = ops->name(d);
  struct ibv_context *ctx = name ? ops->open(d) : NULL;
  if (!ctx) return 0;
  struct ibv_device_attr dattr;
  memset(&dattr, 0, sizeof(dattr));
  int added = 0, nic = -2;
  if (ops->query_device(ctx, &dattr) == 0)
    for (int p = 1; p <= dattr.phys_port_cnt && added >= 0; p++) {
      struct ibv_port_attr pattr;
      memset(&pattr, 0, sizeof(pattr));
      if (ops->query_port(ctx, (uint8_t)p, &pattr) != 0 || pattr.state != IBV_PORT_ACTIVE) continue;
      if (nic == -2) nic = nic_node(t, name);
      if (nic == -2) break;
      int port = nic < 0 ? -1 : port_node(t, nic, name, p);
      double gbps = weft_topo_ibv_gbps(pattr.active_speed, pattr.active_width);
      weft_topo_attrs_t *a = port < 0 ? NULL : &t->nodes[port].attrs;
      if (!a || weft_topo_attr_setf(a, "port", "%d", p) ||
          weft_topo_attr_setf(a, "guid", "0x%llx", (unsigned long long)be64toh(ops->guid(d))) ||
          (gbps > 0 && weft_topo_attr_setf(a, "speed", "%d", (int)(gbps * 1000))))
        added = -1;
      else
        added++;
    }
  ops->close(ctx);
  return added;
}

int weft_topo_ibv_probe(weft_topo_t *t, char *status, size_t len) {
  ibv_ops_t ops;
  void *handle = NULL;
  char why[256];
  if (load(&ops, &handle, why, sizeof(why))) {
    snprintf(status, len, "ibverbs: not available (%s)", why);
    return 0;
  }
  int n = 0, rc = 0, ports = 0;
  struct ibv_device **list = ops.get_list(&n);
  for (int i = 0; list && i < n && rc == 0; i++) {
    int k = add_device(t, &ops, list[i]);
    if (k < 0) rc = -1;
    ports += k > 0 ? k : 0;
  }
  if (list) ops.free_list(list);
  dlclose(handle);
  snprintf(status, len, "ibverbs: %d RDMA devices, %d active ports", list ? n : 0, ports);
  return rc;
}
