/*
 * topo_hwloc.c — builds the graph from hwloc: this machine, or an hwloc XML
 * file (WEFT_HWLOC_XML, or hwloc's own HWLOC_XMLFILE).
 *
 * One CPU node per NUMA node (numaid, affinity in NCCL's mask format, the
 * package's vendor, family and model). Of the PCI tree only what leads to a
 * GPU (class 0x03 from NVIDIA), a NIC (class 0x02, or a device with a network
 * or RDMA interface) or an NVSwitch (class 0x0680 from NVIDIA, or what hwloc
 * marks as one: subtype NVSwitch) is kept; host bridges become the CPU
 * itself, as in NCCL. Link speeds come from sysfs on this machine and from
 * hwloc's GB/s figure (turned back into rate and width) in files. NVLinks
 * come from hwloc's distance matrices (topo_hwloc_dist.c). On this machine
 * NVML and libibverbs then complete NVLinks and RDMA ports (topo_probe.h).
 *
 * The result carries the same attributes a NCCL XML file would, so the rest
 * (defaults, bandwidths, dump) is shared with topo_xml_load.c.
 */
#include "debug.h"
#include "topo.h"
#include "topo_hwloc.h"
#include "topo_hwloc_compat.h"
#include "topo_probe.h"
#include "topo_sysfs.h"

#include <errno.h>
#include <hwloc.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void mask_string(hwloc_const_bitmap_t set, char *buf, size_t len) {
  int last = hwloc_bitmap_last(set);
  int ngroups = last < 0 ? 1 : last / 32 + 1;
  size_t off = 0;
  buf[0] = '\0';
  for (int g = ngroups - 1; g >= 0 && off + 10 < len; g--) {
    unsigned bits = 0;
    for (int b = 0; b < 32; b++)
      if (hwloc_bitmap_isset(set, (unsigned)(g * 32 + b))) bits |= 1u << b;
    off += (size_t)snprintf(buf + off, len - off, "%s%08x", off ? "," : "", bits);
  }
}

static int add_cpu(weft_hwloc_ctx_t *c, hwloc_obj_t numa) {
  int n = weft_topo_add_node(c->t, WEFT_TOPO_CPU, -1);
  if (n < 0) return -1;
  weft_topo_attrs_t *a = &c->t->nodes[n].attrs;
  char mask[1100];
  mask_string(numa->cpuset, mask, sizeof(mask));
  hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(c->h, HWLOC_OBJ_PACKAGE, numa);
  const char *arch = hwloc_obj_get_info_by_name(hwloc_get_root_obj(c->h), "Architecture");
  const char *vendor = pkg ? hwloc_obj_get_info_by_name(pkg, "CPUVendor") : NULL;
  const char *model_name = pkg ? hwloc_obj_get_info_by_name(pkg, "CPUModel") : NULL;
  const char *fam = pkg ? hwloc_obj_get_info_by_name(pkg, "CPUFamilyNumber") : NULL;
  const char *model = pkg ? hwloc_obj_get_info_by_name(pkg, "CPUModelNumber") : NULL;
  if (!vendor && model_name) // older files name the model only
    vendor = strstr(model_name, "Intel") ? "GenuineIntel" : strstr(model_name, "AMD") ? "AuthenticAMD"
           : strstr(model_name, "POWER")                     ? "IBM" : NULL;
  if (!arch && model_name && strstr(model_name, "POWER")) arch = "ppc64";
  if (!arch && vendor && strcmp(vendor, "IBM") != 0) arch = "x86_64";
  if (arch && strncmp(arch, "ppc64", 5) == 0) arch = "ppc64";
  if (arch && strcmp(arch, "aarch64") == 0) arch = "arm64";
  if (weft_topo_attr_setf(a, "numaid", "%u", numa->os_index) || weft_topo_attr_set(a, "affinity", mask)) return -1;
  if (arch && weft_topo_attr_set(a, "arch", arch)) return -1;
  if (vendor && weft_topo_attr_set(a, "vendor", vendor)) return -1;
  if (fam && weft_topo_attr_set(a, "familyid", fam)) return -1;
  if (model && weft_topo_attr_set(a, "modelid", model)) return -1;
  return 0;
}

int weft_hwloc_cpu_of(weft_hwloc_ctx_t *c, hwloc_obj_t obj) {
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(c->h, obj);
  int numa = anc && anc->nodeset ? hwloc_bitmap_first(anc->nodeset) : -1;
  int first = -1;
  for (int i = 0; i < c->t->nnodes; i++) {
    if (c->t->nodes[i].kind != WEFT_TOPO_CPU) continue;
    if (first < 0) first = i;
    const char *id = weft_topo_attr_get(&c->t->nodes[i].attrs, "numaid");
    if (id && atoi(id) == numa) return i;
  }
  return first;
}

// hwloc gives a PCI link as GB/s; find the rate and width that make it.
static void link_from_gbps(float gbps, weft_topo_attrs_t *a) {
  static const double gts[] = {2.5, 5, 8, 16, 32, 64};
  static const int widths[] = {16, 8, 4, 2, 1, 32};
  for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]) && gbps > 0; w++)
    for (size_t g = 0; g < sizeof(gts) / sizeof(gts[0]); g++) {
      double enc = gts[g] < 8 ? 0.8 : 128.0 / 130.0;
      double bw = gts[g] * widths[w] * enc / 8;
      if (fabs(bw - gbps) < 0.03 * bw) {
        weft_topo_attr_setf(a, "link_speed", "%g GT/s PCIe", gts[g]);
        weft_topo_attr_setf(a, "link_width", "%d", widths[w]);
        return;
      }
    }
}

static int pci_attrs(weft_hwloc_ctx_t *c, const struct hwloc_pcidev_attr_s *p, weft_topo_attrs_t *a) {
  char busid[32];
  snprintf(busid, sizeof(busid), "%04x:%02x:%02x.%x", p->domain, p->bus, p->dev, p->func);
  if (weft_topo_attr_set(a, "busid", busid) || weft_topo_attr_setf(a, "class", "0x%06x", (unsigned)p->class_id << 8) ||
      weft_topo_attr_setf(a, "vendor", "0x%04x", p->vendor_id) ||
      weft_topo_attr_setf(a, "device", "0x%04x", p->device_id) ||
      weft_topo_attr_setf(a, "subsystem_vendor", "0x%04x", p->subvendor_id) ||
      weft_topo_attr_setf(a, "subsystem_device", "0x%04x", p->subdevice_id))
    return -1;
  char speed[64];
  int width;
  if (c->live && weft_sysfs_pci_link(busid, speed, sizeof(speed), &width) == 0) {
    if (weft_topo_attr_set(a, "link_speed", speed) || weft_topo_attr_setf(a, "link_width", "%d", width)) return -1;
  } else
    link_from_gbps(p->linkspeed, a);
  return 0;
}

int weft_hwloc_node_of(hwloc_obj_t obj) { return obj->userdata ? (int)(intptr_t)obj->userdata - 1 : -1; }

// The graph node for a PCI bridge or device, creating its ancestors first.
static int ensure(weft_hwloc_ctx_t *c, hwloc_obj_t obj) {
  if (weft_hwloc_node_of(obj) >= 0) return weft_hwloc_node_of(obj);
  hwloc_obj_t up = obj->parent;
  int parent;
  if (up && up->type == HWLOC_OBJ_BRIDGE && up->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI)
    parent = ensure(c, up);
  else if (up && (up->type == HWLOC_OBJ_BRIDGE || up->type == HWLOC_OBJ_PCI_DEVICE))
    parent = up->type == HWLOC_OBJ_PCI_DEVICE ? ensure(c, up) : weft_hwloc_cpu_of(c, obj); // host bridge: the CPU
  else
    parent = weft_hwloc_cpu_of(c, obj);
  if (parent < 0) return -1;
  int n = weft_topo_add_node(c->t, WEFT_TOPO_PCI, parent);
  if (n < 0) return -1;
  const struct hwloc_pcidev_attr_s *p =
      obj->type == HWLOC_OBJ_BRIDGE ? &obj->attr->bridge.upstream.pci : &obj->attr->pcidev;
  if (pci_attrs(c, p, &c->t->nodes[n].attrs)) return -1;
  obj->userdata = (void *)(intptr_t)(n + 1);
  return n;
}

static int add_port(weft_hwloc_ctx_t *c, int nic, const char *name, int rdma) {
  int p = weft_topo_add_node(c->t, WEFT_TOPO_NET, nic);
  if (p < 0) return -1;
  weft_topo_attrs_t *a = &c->t->nodes[p].attrs;
  int mbps = c->live ? weft_sysfs_net_mbps(name, rdma) : 0;
  if (c->live && mbps <= 0 && !rdma) mbps = WEFT_SYSFS_DEFAULT_MBPS; // virtual NICs report no speed
  int nets = 0;
  for (int i = 0; i < c->t->nnodes; i++) nets += c->t->nodes[i].kind == WEFT_TOPO_NET;
  if (weft_topo_attr_set(a, "name", name) || weft_topo_attr_setf(a, "dev", "%d", nets - 1) ||
      weft_topo_attr_set(a, "port", "1"))
    return -1;
  if (mbps > 0 && weft_topo_attr_setf(a, "speed", "%d", mbps)) return -1;
  return 0;
}

static int add_devices(weft_hwloc_ctx_t *c) {
  for (hwloc_obj_t obj = NULL; (obj = hwloc_get_next_pcidev(c->h, obj));) {
    const struct hwloc_pcidev_attr_s *p = &obj->attr->pcidev;
    int has_rdma = 0, has_net = 0;
    for (hwloc_obj_t o = obj->io_first_child; o; o = o->next_sibling) {
      if (o->type != HWLOC_OBJ_OS_DEVICE) continue;
      has_rdma |= o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS;
      has_net |= o->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK;
    }
    int gpu = (p->class_id >> 8) == 0x03 && p->vendor_id == 0x10de;
    int nic = (p->class_id >> 8) == 0x02 || has_rdma || has_net;
    // hwloc marks the NVSwitches its NVML backend met as NVLink peers, also
    // one whose PCI configuration read back empty (class and vendor 0).
    int marked = obj->subtype && strcmp(obj->subtype, "NVSwitch") == 0;
    int nvs = !gpu && !nic && ((p->class_id == 0x0680 && p->vendor_id == 0x10de) || marked);
    if (!gpu && !nic && !nvs) continue;
    int n = ensure(c, obj);
    if (n < 0) return -1;
    if (nvs && (p->class_id != 0x0680 || p->vendor_id != 0x10de)) {
      weft_topo_attrs_t *a = &c->t->nodes[n].attrs;
      INFO(WEFT_LOG_GRAPH, "%s: %s is an NVSwitch to hwloc but reads class 0x%04x vendor 0x%04x: kept as an NVSwitch",
           c->t->source, weft_topo_attr_get(a, "busid"), p->class_id, p->vendor_id);
      if (weft_topo_attr_set(a, "class", "0x068000") || weft_topo_attr_set(a, "vendor", "0x10de")) return -1;
    }
    if (!nic) continue;
    c->t->nodes[n].kind = WEFT_TOPO_NIC;
    c->t->nodes[n].on_pci = 1;
    // Ports: the RDMA devices if any, else the network interfaces.
    for (hwloc_obj_t o = obj->io_first_child; o; o = o->next_sibling) {
      if (o->type != HWLOC_OBJ_OS_DEVICE || !o->name) continue;
      int rdma = o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS;
      if ((has_rdma && rdma) || (!has_rdma && o->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK))
        if (add_port(c, n, o->name, rdma)) return -1;
    }
  }
  return 0;
}

weft_topo_t *weft_topo_load_hwloc(const char *xml_path, char *err, size_t errlen) {
  if (!xml_path) xml_path = getenv("HWLOC_XMLFILE");
  if (xml_path && access(xml_path, R_OK) != 0) {
    snprintf(err, errlen, "%s: %s", xml_path, strerror(errno));
    return NULL;
  }
  char source[300];
  snprintf(source, sizeof(source), xml_path ? "hwloc XML %s" : "hwloc (this machine)", xml_path);
  weft_hwloc_ctx_t c = {weft_topo_new(source), NULL, xml_path == NULL};
  if (!c.t || hwloc_topology_init(&c.h) < 0) {
    snprintf(err, errlen, "out of memory");
    weft_topo_free(c.t);
    return NULL;
  }
  hwloc_topology_set_io_types_filter(c.h, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
#if HWLOC_API_VERSION >= 0x00020100
  // This machine's PCI tree from sysfs (hwloc's Linux backend), not through
  // libpciaccess, which finds the same devices but never frees what it keeps.
  if (!xml_path) hwloc_topology_set_components(c.h, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
#endif
  size_t v2len = 0;
  char *v2 = xml_path ? weft_hwloc_xml_v2(xml_path, &v2len) : NULL; // hwloc 3 files
  int set = !xml_path ? 0
            : v2      ? hwloc_topology_set_xmlbuffer(c.h, v2, (int)v2len + 1)
                      : hwloc_topology_set_xml(c.h, xml_path);
  if (set < 0) {
    free(v2);
    snprintf(err, errlen, "%s: hwloc cannot read it as XML", xml_path);
    goto fail;
  }
  int loaded = hwloc_topology_load(c.h);
  free(v2);
  if (loaded < 0) {
    snprintf(err, errlen, "%s: hwloc could not load the topology: %s", xml_path ? xml_path : "this machine",
             strerror(errno));
    goto fail;
  }
  int nnuma = hwloc_get_nbobjs_by_type(c.h, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < nnuma; i++)
    if (add_cpu(&c, hwloc_get_obj_by_type(c.h, HWLOC_OBJ_NUMANODE, (unsigned)i))) goto nomem;
  if (add_devices(&c) || weft_hwloc_add_distances(&c)) goto nomem;
  if (c.live && (weft_topo_nvml_probe(c.t, c.t->nvml_status, sizeof(c.t->nvml_status)) ||
                 weft_topo_ibv_probe(c.t, c.t->ibv_status, sizeof(c.t->ibv_status)) ||
                 weft_sysfs_add_virtual_nics(c.t)))
    goto nomem;
  hwloc_topology_destroy(c.h);
  if (weft_topo_finalize(c.t, err, errlen)) {
    weft_topo_free(c.t);
    return NULL;
  }
  return c.t;
nomem:
  snprintf(err, errlen, "out of memory");
fail:
  hwloc_topology_destroy(c.h);
  weft_topo_free(c.t);
  return NULL;
}
