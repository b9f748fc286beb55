/*
 * topo_sysfs.h — what hwloc does not say about this machine, read from
 * sysfs: PCIe link rate and width, network port speeds, and the network
 * interfaces that are not PCI functions (virtual machines, containers).
 */
#ifndef WEFT_TOPO_SYSFS_H
#define WEFT_TOPO_SYSFS_H

#include <stddef.h>

#include "topo.h"

// Port speed used when an interface does not report one (Mbit/s).
#define WEFT_SYSFS_DEFAULT_MBPS 10000

// The first line of a file, without its newline; 0, or -1 when unreadable.
int weft_sysfs_read_line(const char *path, char *buf, size_t len);
// The CPU node of a NUMA node (the first CPU when numa is -1 or unknown); -1 none.
int weft_sysfs_cpu_for_numa(const weft_topo_t *topo, int numa);
// max_link_speed ("16.0 GT/s PCIe") and max_link_width of a PCI device; 0 or -1.
int weft_sysfs_pci_link(const char *busid, char *speed, size_t len, int *width);
// Speed of a network interface or (rdma) an RDMA device's port 1, Mbit/s; 0 unknown.
int weft_sysfs_net_mbps(const char *name, int rdma);
// Adds the interfaces in /sys/class/net that the graph lacks (not lo, not
// down): as a port of the NIC node of their PCI function when the graph has
// it (an RDMA NIC's Ethernet side), else as NICs without PCI under their
// NUMA node's CPU. 0 or -1 (ENOMEM).
int weft_sysfs_add_virtual_nics(weft_topo_t *topo);

#endif
