/*
 * net_ib_dev.c — which RDMA ports the verbs backend uses, and with which
 * GID: every ACTIVE port of every device that NCCL_IB_HCA keeps, opened
 * once per process with its protection domain, nearest to this process
 * first (a hook: NUMA node of the device against this thread's node), with
 * its PCI bus id for the network transport's choice by topology.
 *
 * RoCE needs a GID (the routable address in the GRH). NCCL_IB_GID_INDEX
 * forces one; unset, the port's table is read (ibv_query_gid plus sysfs
 * gid_attrs/types for the RoCE version) and weft_ib_gid_pick chooses,
 * preferring RoCE v2 with an IPv4-mapped address as NCCL does by default.
 * InfiniBand ports are addressed by LID and use no GID.
 */
#include <limits.h>
#include <numa.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "busid.h"
#include "net_ib.h"

static int is_zero(const uint8_t *g) {
  for (int i = 0; i < 16; i++)
    if (g[i]) return 0;
  return 1;
}

static int is_link_local(const uint8_t *g) { return g[0] == 0xfe && (g[1] & 0xc0) == 0x80; }

static int is_v4_mapped(const uint8_t *g) {
  for (int i = 0; i < 10; i++)
    if (g[i]) return 0;
  return g[10] == 0xff && g[11] == 0xff;
}

int weft_ib_gid_pick(const weft_ib_gid_t *gids, int n) {
  int best = -1, best_rank = 0;
  for (int i = 0; i < n; i++) {
    const uint8_t *g = gids[i].raw;
    if (is_zero(g)) continue;
    int rank = gids[i].roce_v2 && is_v4_mapped(g) ? 4 : gids[i].roce_v2 && !is_link_local(g) ? 3
               : !is_link_local(g) ? 2 : 1;
    if (rank > best_rank) best = i, best_rank = rank;
  }
  return best;
}

static int default_near(const weft_ib_dev_t *dev) {
  int cpu = sched_getcpu();
  int here = cpu >= 0 && numa_available() >= 0 ? numa_node_of_cpu(cpu) : -1;
  return dev->numa < 0 || here < 0 || dev->numa == here ? 0 : 1;
}

static weft_ib_near_fn near_hook = default_near;

void weft_ib_set_near_hook(weft_ib_near_fn fn) { near_hook = fn ? fn : default_near; }

void weft_ib_sort_near(weft_ib_dev_t *devs, int n) {
  int score[WEFT_IB_MAX_DEVS];
  if (n > WEFT_IB_MAX_DEVS) n = WEFT_IB_MAX_DEVS;
  for (int i = 0; i < n; i++) score[i] = near_hook(&devs[i]);
  for (int i = 1; i < n; i++) {  // insertion sort: stable, n is small
    weft_ib_dev_t d = devs[i];
    int s = score[i], j = i - 1;
    for (; j >= 0 && score[j] > s; j--) devs[j + 1] = devs[j], score[j + 1] = score[j];
    devs[j + 1] = d, score[j + 1] = s;
  }
}

static int read_int_file(const char *path, int dflt) {
  FILE *f = fopen(path, "r");
  int v = dflt;
  if (f) {
    if (fscanf(f, "%d", &v) != 1) v = dflt;
    fclose(f);
  }
  return v;
}

// The PCI bus id ("0000:3b:00.0") the sysfs device link at `path` resolves to, or "".


static int gid_is_roce_v2(const char *dev, int port, int index) {
  char path[256], buf[32] = "";
  snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/gid_attrs/types/%d", dev, port, index);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  int ok = fgets(buf, sizeof(buf), f) != NULL && strstr(buf, "v2") != NULL;
  fclose(f);
  return ok;
}

// The GID index of a RoCE port: the knob, or the pick over its table.
static int choose_gid(const weft_ibv_ops_t *ops, weft_ib_dev_t *d, int table_len, int knob) {
  if (knob >= 0) return ops->query_gid(d->ctx, (uint8_t)d->port, knob, &d->gid) == 0 ? knob : -1;
  enum { MAX_GIDS = 256 };
  weft_ib_gid_t *gids = calloc(MAX_GIDS, sizeof(*gids));
  if (gids == NULL) return -1;
  int n = table_len < MAX_GIDS ? table_len : MAX_GIDS;
  for (int i = 0; i < n; i++) {
    union ibv_gid g;
    if (ops->query_gid(d->ctx, (uint8_t)d->port, i, &g) != 0) continue;
    memcpy(gids[i].raw, g.raw, 16);
    gids[i].roce_v2 = gid_is_roce_v2(d->name, d->port, i);
  }
  int pick = weft_ib_gid_pick(gids, n);
  if (pick >= 0) memcpy(d->gid.raw, gids[pick].raw, 16);
  free(gids);
  return pick;
}

int weft_ib_devs_open(const weft_ibv_ops_t *ops, const char *hca, int gid_index_knob, weft_ib_dev_t *devs, int max,
                      char *why, size_t len) {
  int n = 0, ndev = 0;
  struct ibv_device **list = ops->get_device_list(&ndev);
  if (list == NULL || ndev == 0) {  // NCCL_IB_HCA is not even read: nothing to choose from
    snprintf(why, len, "no RDMA devices");
    if (list) ops->free_device_list(list);
    return 0;
  }
  weft_ib_hca_list_t filter;
  if (weft_ib_hca_parse(hca, &filter, why, len) != 0) {
    ops->free_device_list(list);
    return -1;
  }
  for (int i = 0; i < ndev && n < max; i++) {
    const char *name = ops->get_device_name(list[i]);
    struct ibv_context *ctx = name ? ops->open_device(list[i]) : NULL;
    if (ctx == NULL) continue;
    struct ibv_device_attr dattr;
    memset(&dattr, 0, sizeof(dattr));
    struct ibv_pd *pd = NULL;
    int used = 0;
    if (ops->query_device(ctx, &dattr) == 0)
      for (int p = 1; p <= dattr.phys_port_cnt && n < max; p++) {
        struct ibv_port_attr pattr;
        memset(&pattr, 0, sizeof(pattr));
        if (ops->query_port(ctx, (uint8_t)p, &pattr) != 0 || pattr.state != IBV_PORT_ACTIVE) continue;
        if (!weft_ib_hca_match(&filter, name, p)) continue;
        if (pd == NULL && (pd = ops->alloc_pd(ctx)) == NULL) break;
        weft_ib_dev_t *d = &devs[n];
        memset(d, 0, sizeof(*d));
        snprintf(d->name, sizeof(d->name), "%s", name);
        d->port = p;
        d->ctx = ctx;
        d->pd = pd;
        d->link_layer = pattr.link_layer == IBV_LINK_LAYER_ETHERNET ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
        d->lid = pattr.lid;
        d->mtu = pattr.active_mtu;
        d->gid_index = -1;
        if (d->link_layer == IBV_LINK_LAYER_ETHERNET &&
            (d->gid_index = choose_gid(ops, d, pattr.gid_tbl_len, gid_index_knob)) < 0)
          continue;  // RoCE without a usable GID
        char path[256];
        snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device/numa_node", name);
        d->numa = read_int_file(path, -1);
        snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device", name);
        weft_busid_of_link(path, d->busid, sizeof(d->busid));
        snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/rate", name, p);
        d->speed_mbps = read_int_file(path, 0) * 1000;  // "100 Gb/sec (4X EDR)"
        n++, used = 1;
      }
    if (!used) {
      if (pd) ops->dealloc_pd(pd);
      ops->close_device(ctx);
    }
  }
  ops->free_device_list(list);
  if (n == 0) snprintf(why, len, "%d RDMA devices, no active port that NCCL_IB_HCA keeps", ndev);
  weft_ib_sort_near(devs, n);
  return n;
}
