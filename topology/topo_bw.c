/*
 * topo_bw.c — the bandwidth conventions: what a PCIe link, an NVLink, an
 * inter-socket link and a network port are worth in GB/s per direction.
 *
 * The numbers follow NCCL's, so that bandwidths weft reports compare with
 * NCCL's logs; docs/topology.md lists each with its origin. They are usable
 * rates for collectives, not signalling rates: a PCIe Gen3 x16 link counts
 * 12 GB/s, an H100 NVLink 20.6 GB/s.
 */
#include "topo.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// PCIe: GB/s per lane by transfer rate. Unknown rates count as Gen3.
static const struct {
  double gts, lane_gbps;
} pci_gens[] = {{2.5, 0.1875}, {5.0, 0.375}, {8.0, 0.75}, {16.0, 1.5}, {32.0, 3.0}, {64.0, 6.0}};

double weft_topo_pci_bw(const char *link_speed, int link_width) {
  double lane = 0.75; // Gen3
  if (link_speed && *link_speed) {
    double gts = strtod(link_speed, NULL);
    for (size_t i = 0; i < sizeof(pci_gens) / sizeof(pci_gens[0]); i++)
      if (fabs(gts - pci_gens[i].gts) < 0.3) lane = pci_gens[i].lane_gbps;
  }
  if (link_width <= 0) link_width = 16;
  return lane * link_width;
}

// NVLink: GB/s per link by GPU generation (compute capability x10).
double weft_topo_nvlink_bw(int sm) {
  if (sm >= 100) return 40.1;
  if (sm >= 90) return 20.6;
  if (sm == 86) return 12.0;
  if (sm >= 70) return 20.0;
  if (sm >= 60) return 18.0;
  return 20.0; // unknown GPU: Ampere's figure
}

// Signalling rate of one link in MB/s per direction, as hwloc reports NVLink
// bandwidth; used to turn hwloc's MB/s back into a link count.
int weft_topo_nvlink_raw_mbps(int sm) {
  if (sm >= 100) return 50000;
  if (sm >= 70 || sm == 0) return 25000;
  return 20000;
}

double weft_topo_nvlink_link_bw(int sm, int mbps) {
  double conv = weft_topo_nvlink_bw(sm);
  return mbps / 1000.0 > conv ? mbps / 1000.0 : conv;
}

// Inter-socket link by CPU family.
double weft_topo_cpu_bw(const weft_topo_attrs_t *cpu) {
  const char *arch = weft_topo_attr_get(cpu, "arch");
  const char *vendor = weft_topo_attr_get(cpu, "vendor");
  const char *fam = weft_topo_attr_get(cpu, "familyid");
  const char *mod = weft_topo_attr_get(cpu, "modelid");
  int family = fam ? (int)strtol(fam, NULL, 0) : -1;
  int model = mod ? (int)strtol(mod, NULL, 0) : -1;
  if (arch && strcmp(arch, "ppc64") == 0) return 32.0;
  if (arch && strcmp(arch, "arm64") == 0) return 6.0;
  if (vendor && strcmp(vendor, "GenuineIntel") == 0) {
    if (family != 6) return 6.0;
    if (model >= 0xCF) return 40.0; // Emerald Rapids
    if (model >= 0x8F) return 22.0; // Sapphire Rapids
    if (model >= 0x55) return 10.0; // Skylake
    return 6.0;                      // Broadwell and older
  }
  if (vendor && strcmp(vendor, "AuthenticAMD") == 0) {
    if (family == 0x19) return 24.0; // Zen 3/4
    if (family == 0x1A) return 32.0; // Zen 5
    return 16.0;                     // Zen 1/2 and unknown
  }
  return 6.0;
}

// Compute capability of the NVIDIA data-centre GPUs a topology file is
// likely to name without saying; 0 when unknown.
int weft_topo_gpu_sm_from_device(int device_id) {
  static const struct {
    int lo, hi, sm;
  } table[] = {
      {0x15f7, 0x15f9, 60}, // P100
      {0x1db1, 0x1db8, 70}, // V100
      {0x1df0, 0x1df6, 70}, // V100
      {0x20b0, 0x20bf, 80}, // A100
      {0x20f0, 0x20f5, 80}, // A100, A800
      {0x2320, 0x233f, 90}, // H100, H800, H200
      {0x2900, 0x29ff, 100} // B100, B200
  };
  for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
    if (device_id >= table[i].lo && device_id <= table[i].hi) return table[i].sm;
  return 0;
}

// A port whose speed is not given runs at the InfiniBand rate of its PCIe
// generation: Gen3 EDR 100, Gen4 HDR 200, Gen5 NDR 400, Gen6 XDR 800 Gb/s.
int weft_topo_default_net_mbps(const char *nic_link_speed) {
  double gts = nic_link_speed && *nic_link_speed ? strtod(nic_link_speed, NULL) : 8.0;
  if (gts >= 60) return 800000;
  if (gts >= 30) return 400000;
  if (gts >= 15) return 200000;
  return 100000;
}

// Latencies: coarse figures for the cost model, not measurements.
double weft_topo_link_latency_us(weft_link_kind_t kind) {
  switch (kind) {
  case WEFT_LINK_NVL: return 0.5;
  case WEFT_LINK_PCI: return 1.0;
  case WEFT_LINK_SYS: return 1.0;
  default: return 0.0;
  }
}
