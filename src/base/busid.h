/*
 * busid.h — PCI bus ids ("0000:3b:00.0"), as sysfs, hwloc, NCCL's topology
 * files and NVML spell them, brought to one spelling so that they compare.
 */
#ifndef WEFT_BUSID_H
#define WEFT_BUSID_H

#include <stddef.h>

// `in` as "dddd:bb:dd.f" (lower case, zero-padded) into out; 1 when `in`
// has that shape ("0:3B:0.0" has), 0 otherwise (out untouched).
int weft_busid_parse(const char *in, char *out, size_t len);

// The bus id of the PCI function the sysfs link `path` resolves to
// (/sys/class/net/eth0/device, /sys/class/infiniband/mlx5_0/device);
// "" when there is none (a virtual device).
void weft_busid_of_link(const char *path, char *out, size_t len);

#endif
