/*
 * topo_sysfs.c — sysfs readings that complete hwloc's view of this machine
 * (see topo_sysfs.h). Every file may be missing; a missing file means
 * "unknown", never an error.
 */
#include "topo_sysfs.h"
#include "busid.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int weft_sysfs_read_line(const char *path, char *buf, size_t len) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char *ok = fgets(buf, (int)len, f);
  fclose(f);
  if (!ok) return -1;
  buf[strcspn(buf, "\n")] = '\0';
  return 0;
}

int weft_sysfs_pci_link(const char *busid, char *speed, size_t len, int *width) {
  char path[320], buf[64];
  snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/max_link_speed", busid);
  if (weft_sysfs_read_line(path, speed, len) || strtod(speed, NULL) <= 0) return -1;
  snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/max_link_width", busid);
  if (weft_sysfs_read_line(path, buf, sizeof(buf))) return -1;
  *width = atoi(buf);
  return *width > 0 ? 0 : -1;
}

int weft_sysfs_net_mbps(const char *name, int rdma) {
  char path[320], buf[64];
  if (rdma) { // "200 Gb/sec (4X HDR)"
    snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/rate", name);
    return weft_sysfs_read_line(path, buf, sizeof(buf)) ? 0 : (int)(strtod(buf, NULL) * 1000);
  }
  snprintf(path, sizeof(path), "/sys/class/net/%s/speed", name);
  int mbps = weft_sysfs_read_line(path, buf, sizeof(buf)) ? 0 : atoi(buf);
  return mbps > 0 ? mbps : 0;
}

static int has_port(const weft_topo_t *t, const char *name) {
  for (int i = 0; i < t->nnodes; i++) {
    const char *n = weft_topo_attr_get(&t->nodes[i].attrs, "name");
    if (t->nodes[i].kind == WEFT_TOPO_NET && n && strcmp(n, name) == 0) return 1;
  }
  return 0;
}

int weft_sysfs_cpu_for_numa(const weft_topo_t *t, int numa) {
  int first = -1;
  for (int i = 0; i < t->nnodes; i++) {
    if (t->nodes[i].kind != WEFT_TOPO_CPU) continue;
    const char *id = weft_topo_attr_get(&t->nodes[i].attrs, "numaid");
    if (first < 0) first = i;
    if (id && atoi(id) == numa) return i;
  }
  return first;
}

// The NIC node of the PCI function behind a network interface, -1 none.
static int pci_nic_of(const weft_topo_t *t, const char *ifname) {
  char path[320], busid[32], norm[32];
  snprintf(path, sizeof(path), "/sys/class/net/%s/device", ifname);
  weft_busid_of_link(path, busid, sizeof(busid));
  if (busid[0] == '\0') return -1;
  for (int i = 0; i < t->nnodes; i++) {
    const char *b = weft_topo_attr_get(&t->nodes[i].attrs, "busid");
    if (t->nodes[i].kind != WEFT_TOPO_NIC || !b) continue;
    weft_topo_busid_norm(b, norm, sizeof(norm));
    if (strcmp(norm, busid) == 0) return i;
  }
  return -1;
}

int weft_sysfs_add_virtual_nics(weft_topo_t *t) {
  DIR *d = opendir("/sys/class/net");
  if (!d) return 0;
  int rc = 0, nets = 0;
  for (int i = 0; i < t->nnodes; i++) nets += t->nodes[i].kind == WEFT_TOPO_NET;
  for (struct dirent *e; rc == 0 && (e = readdir(d));) {
    if (e->d_name[0] == '.' || strcmp(e->d_name, "lo") == 0 || has_port(t, e->d_name)) continue;
    char path[320], buf[64];
    snprintf(path, sizeof(path), "/sys/class/net/%s/operstate", e->d_name);
    if (weft_sysfs_read_line(path, buf, sizeof(buf)) == 0 && strcmp(buf, "down") == 0) continue;
    snprintf(path, sizeof(path), "/sys/class/net/%s/device/numa_node", e->d_name);
    int numa = weft_sysfs_read_line(path, buf, sizeof(buf)) == 0 ? atoi(buf) : -1;
    int cpu = weft_sysfs_cpu_for_numa(t, numa);
    if (cpu < 0) break;
    int nic = pci_nic_of(t, e->d_name); // the netdev of a NIC listed for its RDMA ports
    if (nic < 0) nic = weft_topo_add_node(t, WEFT_TOPO_NIC, cpu);
    int port = nic < 0 ? -1 : weft_topo_add_node(t, WEFT_TOPO_NET, nic);
    if (port < 0) {
      rc = -1;
      break;
    }
    int mbps = weft_sysfs_net_mbps(e->d_name, 0);
    weft_topo_attrs_t *a = &t->nodes[port].attrs;
    if (weft_topo_attr_set(a, "name", e->d_name) || weft_topo_attr_setf(a, "dev", "%d", nets++) ||
        weft_topo_attr_setf(a, "speed", "%d", mbps > 0 ? mbps : WEFT_SYSFS_DEFAULT_MBPS) ||
        weft_topo_attr_set(a, "port", "0") || weft_topo_attr_set(a, "gdr", "0"))
      rc = -1;
  }
  closedir(d);
  return rc;
}
