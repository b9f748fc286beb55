/*
 * net_ib.h — the pieces of the ibverbs network backend (net_ib.c) and how
 * they fit: the dlopen'd verbs table (net_ib_dl.c), NCCL_IB_HCA parsing
 * (net_ib_hca.c), device discovery and GID choice (net_ib_dev.c), queue
 * pair set-up (net_ib_qp.c), the connection info exchanged on the side
 * channel (net_ib_conn.c), the registration cache (net_ib_mr.c) and the
 * receive-descriptor FIFO's flow control (net_ib_fifo.c).
 *
 * Everything that is pure logic (parsing, packing, the cache against a
 * table of register/deregister functions, the FIFO credits, attribute
 * filling) is exposed here so that tests run it on machines without RDMA.
 */
#ifndef WEFT_NET_IB_H
#define WEFT_NET_IB_H

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

#include "net.h"

#define WEFT_IB_MAX_QPS 16     // NCCL_IB_QPS_PER_CONNECTION is clamped to this
#define WEFT_IB_MAX_DEVS 32
#define WEFT_IB_FIFO_DEPTH 128 // receive descriptors in flight per communicator (= requests)

/* ---- net_ib_dl.c: libibverbs through a table -------------------------------- */

// Only exported functions are here; ibv_post_send/post_recv/poll_cq/
// req_notify_cq are inline in verbs.h and go through the context's ops.
typedef struct {
  struct ibv_device **(*get_device_list)(int *n);
  void (*free_device_list)(struct ibv_device **list);
  const char *(*get_device_name)(struct ibv_device *dev);
  struct ibv_context *(*open_device)(struct ibv_device *dev);
  int (*close_device)(struct ibv_context *ctx);
  int (*query_device)(struct ibv_context *ctx, struct ibv_device_attr *attr);
  int (*query_port)(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
  int (*query_gid)(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid);
  struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
  int (*dealloc_pd)(struct ibv_pd *pd);
  struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len, int access);
  int (*dereg_mr)(struct ibv_mr *mr);
  struct ibv_comp_channel *(*create_comp_channel)(struct ibv_context *ctx);
  int (*destroy_comp_channel)(struct ibv_comp_channel *ch);
  struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe, void *cq_context, struct ibv_comp_channel *ch, int vec);
  int (*destroy_cq)(struct ibv_cq *cq);
  int (*get_cq_event)(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_context);
  void (*ack_cq_events)(struct ibv_cq *cq, unsigned int nevents);
  struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
  int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
  int (*destroy_qp)(struct ibv_qp *qp);
  const char *(*wc_status_str)(enum ibv_wc_status status);  // optional
} weft_ibv_ops_t;

// Opens `libname` (NULL: libibverbs.so.1) and fills *ops. 0, or -1 with
// the reason in why (the library is missing, or lacks a function).
int weft_ibv_load(const char *libname, weft_ibv_ops_t *ops, void **handle, char *why, size_t len);

/* ---- net_ib_hca.c: NCCL_IB_HCA ------------------------------------------------ */

typedef struct {
  char name[64];
  int port;  // 1..255, or -1: any port
} weft_ib_hca_spec_t;

typedef struct {
  int exclude;  // leading '^': drop what matches
  int exact;    // '=': whole names, not prefixes
  int n;        // 0: no filter
  weft_ib_hca_spec_t specs[WEFT_IB_MAX_DEVS];
} weft_ib_hca_list_t;

// Parses NCCL_IB_HCA's syntax: "[^][=]name[:port][,name[:port]...]".
// NULL or "" is no filter. 0, or -1 with a message in err.
int weft_ib_hca_parse(const char *text, weft_ib_hca_list_t *list, char *err, size_t errlen);
// 1 when (dev, port) is to be used under the filter.
int weft_ib_hca_match(const weft_ib_hca_list_t *list, const char *dev, int port);

/* ---- net_ib_dev.c: devices, ports, GIDs ------------------------------------ */

typedef struct {
  char name[64];
  int port;
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  int link_layer;  // IBV_LINK_LAYER_INFINIBAND or _ETHERNET
  uint16_t lid;
  int mtu;         // enum ibv_mtu, the port's active MTU
  int gid_index;   // -1 when the port needs no GID (InfiniBand, no GRH)
  union ibv_gid gid;
  int speed_mbps;
  int numa;        // -1 unknown
  char busid[32];  // PCI bus id of the device, "" unknown
} weft_ib_dev_t;

// A GID table entry as the choice sees it.
typedef struct {
  uint8_t raw[16];
  int roce_v2;  // the port's gid_attrs say "RoCE v2"
} weft_ib_gid_t;

// The GID to use when NCCL_IB_GID_INDEX is unset: a RoCE v2 GID holding an
// IPv4-mapped address, else a RoCE v2 GID that is not link-local, else any
// valid (non-zero) GID that is not link-local, else the first valid one;
// -1 when there is none.
int weft_ib_gid_pick(const weft_ib_gid_t *gids, int n);

// Ordering hook for several devices: smaller is nearer. The default reads
// the device's NUMA node and scores 0 for this thread's node (or unknown),
// 1 otherwise. Tests may replace it (NULL: the default). This only orders
// the list; which port a rank uses is the network transport's choice by
// topology (net_device.c), device 0 where the topology does not know them.
typedef int (*weft_ib_near_fn)(const weft_ib_dev_t *dev);
void weft_ib_set_near_hook(weft_ib_near_fn fn);
// Stable sort of devs by the hook's score.
void weft_ib_sort_near(weft_ib_dev_t *devs, int n);

// Opens every active port that NCCL_IB_HCA keeps, nearest first. Returns
// the count (0: none; why says so), or -1 when there are devices and
// NCCL_IB_HCA is malformed.
int weft_ib_devs_open(const weft_ibv_ops_t *ops, const char *hca, int gid_index_knob, weft_ib_dev_t *devs, int max,
                      char *why, size_t len);

/* ---- net_ib_conn.c: what the two ends exchange ----------------------------- */

typedef struct {
  uint32_t nqps;
  uint32_t qpn[WEFT_IB_MAX_QPS];
  uint32_t psn;          // first packet sequence number of every QP's send queue
  uint16_t lid;
  uint8_t link_layer;    // IBV_LINK_LAYER_*
  uint8_t mtu;           // enum ibv_mtu
  uint8_t gid[16];
  uint64_t fifo_addr;    // sender's FIFO of receive descriptors (0 from the receiver)
  uint32_t fifo_rkey;
} weft_ib_conn_info_t;

#define WEFT_IB_CONN_BYTES (4 + 2 + 2 + 4 * WEFT_IB_MAX_QPS + 4 + 2 + 1 + 1 + 16 + 8 + 4 + 4 + 8)

// Fixed-size, little-endian, versioned, checksummed. pack returns
// WEFT_IB_CONN_BYTES; unpack returns 0 or -1 with the reason in err.
size_t weft_ib_conn_pack(const weft_ib_conn_info_t *info, uint8_t *buf);
int weft_ib_conn_unpack(const uint8_t *buf, size_t len, weft_ib_conn_info_t *info, char *err, size_t errlen);

/* ---- net_ib_qp.c: queue pair attributes -------------------------------------- */

typedef struct {
  int timeout;    // NCCL_IB_TIMEOUT (clamped 1..31)
  int retry_cnt;  // NCCL_IB_RETRY_CNT (clamped 0..7)
  int sl, tc;     // NCCL_IB_SL, NCCL_IB_TC
} weft_ib_qp_knobs_t;

void weft_ib_qp_knobs(weft_ib_qp_knobs_t *k);  // from the environment, clamped
// INIT -> RTR towards remote QP `qpn` and RTR -> RTS: attributes and masks.
void weft_ib_rtr_attr(const weft_ib_dev_t *dev, const weft_ib_conn_info_t *remote, uint32_t qpn,
                      const weft_ib_qp_knobs_t *k, struct ibv_qp_attr *attr, int *mask);
void weft_ib_rts_attr(uint32_t psn, const weft_ib_qp_knobs_t *k, struct ibv_qp_attr *attr, int *mask);
// An RC QP on cq, moved to INIT; NULL on failure (WARNed).
struct ibv_qp *weft_ib_qp_create(const weft_ibv_ops_t *ops, const weft_ib_dev_t *dev, struct ibv_cq *cq, int max_wr);
// INIT -> RTR -> RTS. 0 or -1 (WARNed).
int weft_ib_qp_connect(const weft_ibv_ops_t *ops, const weft_ib_dev_t *dev, struct ibv_qp *qp,
                       const weft_ib_conn_info_t *remote, uint32_t remote_qpn, uint32_t local_psn);

/* ---- net_ib_mr.c: registration cache ----------------------------------------- */

typedef struct {
  void *ctx;
  // Register [addr, addr + len): the backend's handle, its keys; NULL on failure.
  void *(*reg)(void *ctx, void *addr, size_t len, uint32_t *lkey, uint32_t *rkey);
  int (*dereg)(void *ctx, void *handle);
} weft_ib_mr_ops_t;

typedef struct {
  uintptr_t start;  // page aligned
  size_t len;       // whole pages
  void *handle;
  uint32_t lkey, rkey;
  int refs;
  uint64_t last_use;
} weft_ib_mr_t;

typedef struct {
  weft_ib_mr_ops_t ops;
  weft_ib_mr_t **e;
  int n, cap, max;  // max: entries kept; unreferenced ones beyond it are evicted, least recently used first
  size_t page;
  uint64_t clock;
  uint64_t hits, misses, evictions;
} weft_ib_mr_cache_t;

void weft_ib_mr_cache_init(weft_ib_mr_cache_t *c, const weft_ib_mr_ops_t *ops, int max, size_t page);
// A registration covering [addr, addr + len) with one more reference; NULL
// when registering failed. An entry containing the range is reused.
const weft_ib_mr_t *weft_ib_mr_get(weft_ib_mr_cache_t *c, const void *addr, size_t len);
void weft_ib_mr_put(weft_ib_mr_cache_t *c, const weft_ib_mr_t *mr);
// Deregisters everything (referenced or not); returns how many were still referenced.
int weft_ib_mr_cache_free(weft_ib_mr_cache_t *c);

/* ---- net_ib_fifo.c: receive descriptors and credits -------------------------- */

// One receive descriptor, RDMA-written by the receiver into the sender's
// FIFO slot seq % depth. seq is the message index + 1 (0: never written).
typedef struct {
  uint64_t addr;
  uint32_t rkey;
  uint32_t pad;
  uint64_t size;
  uint64_t seq;
} weft_ib_fifo_entry_t;

typedef struct {      // receiver
  uint32_t depth;
  uint64_t posted;    // descriptors written
  uint64_t done;      // receives finished and given back, in order
} weft_ib_fifo_rx_t;

typedef struct {      // sender
  uint32_t depth;
  uint64_t taken;     // descriptors consumed
} weft_ib_fifo_tx_t;

void weft_ib_fifo_rx_init(weft_ib_fifo_rx_t *rx, uint32_t depth, uint64_t start);
void weft_ib_fifo_tx_init(weft_ib_fifo_tx_t *tx, uint32_t depth, uint64_t start);
uint32_t weft_ib_fifo_rx_credits(const weft_ib_fifo_rx_t *rx);
// The descriptor for the next receive and its slot; -1 without credit.
int weft_ib_fifo_rx_post(weft_ib_fifo_rx_t *rx, uint64_t addr, uint32_t rkey, uint64_t size,
                         weft_ib_fifo_entry_t *entry, uint32_t *slot);
// The oldest posted receive finished; -1 when none is outstanding.
int weft_ib_fifo_rx_complete(weft_ib_fifo_rx_t *rx);
// Takes the next descriptor from the FIFO memory: 1 taken (copied to *out),
// 0 not arrived yet (slot empty or from the previous lap), -1 garbage.
int weft_ib_fifo_tx_take(weft_ib_fifo_tx_t *tx, const volatile weft_ib_fifo_entry_t *fifo, weft_ib_fifo_entry_t *out);

/* ---- net_ib.c --------------------------------------------------------------- */

extern const weft_net_t weft_net_ib;
// 1 when libibverbs loaded and at least one usable port passed NCCL_IB_HCA
// (starts the backend once; NCCL_IB_DISABLE=1 makes it 0).
int weft_net_ib_available(void);
// Tests: the library to open (NULL: libibverbs.so.1); forgets an earlier start.
void weft_net_ib_test_reset(const char *libname);

#endif
