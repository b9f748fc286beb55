/*
 * plan_comm.c — how long the collectives of each parallel dimension take,
 * and which links they cross.
 *
 * The alpha-beta model of a ring, in nccl-tests' bus-bandwidth terms: an
 * AllReduce of S bytes over n ranks moves 2 (n - 1)/n S through every rank
 * and takes 2 (n - 1) hops of latency; AllGather and ReduceScatter move
 * (n - 1)/n S in n - 1 hops; a point-to-point send is one hop. busbw is what
 * nccl-tests reports as "busbw", so a measured value drops straight in. An
 * all-to-all sends (n - 1)/n of each rank's buffer to the others at once:
 * the part for ranks in the same node over NVLink, the rest through the
 * rank's own NIC, both at the same time, one hop of latency.
 *
 * Ranks are laid out as Megatron-Core lays them out (tp fastest, then cp,
 * then dp with its expert-parallel ranks innermost, then pp), so a group of
 * n ranks whose members are `stride` ranks apart has gpus_per_node / stride
 * members in each node (at least 1). A ring that crosses nodes uses one NIC
 * per member it has in each node (rail-optimised, NCCL's multi-ring layout):
 * with k members per node its bus bandwidth is k x the per-GPU share of the
 * node's NICs, capped by NVLink.
 */
#include <math.h>

#include "plan.h"

double plan_allreduce_time(double bytes, int n, double busbw, double hop_lat) {
  if (n <= 1 || bytes <= 0) return 0;
  return 2.0 * (n - 1) * hop_lat + 2.0 * (n - 1) / n * bytes / busbw;
}

double plan_allgather_time(double bytes, int n, double busbw, double hop_lat) {
  if (n <= 1 || bytes <= 0) return 0;
  return (n - 1.0) * hop_lat + (n - 1.0) / n * bytes / busbw;
}

double plan_p2p_time(double bytes, double bw, double lat) {
  return bytes > 0 ? lat + bytes / bw : 0;
}

double plan_alltoall_time(double bytes, int n, int m, double nvlink_bw, double net_bw,
                          double lat) {
  if (n <= 1 || bytes <= 0) return 0;
  if (m < 1) m = 1;
  if (m > n) m = n;
  double inside = bytes * (m - 1.0) / n / nvlink_bw, across = bytes * (double)(n - m) / n / net_bw;
  return lat + fmax(inside, across);
}

// Per-GPU bandwidths: NVLink (or the measured intra-node busbw) and the
// GPU's share of the node's NICs (or the measured per-GPU network busbw).
static double nvlink_rate(const plan_cluster_t *c, const plan_calib_t *k) {
  return c->intra_busbw > 0 ? c->intra_busbw : c->nvlink_bw * k->nvlink_eff;
}

static double nic_rate(const plan_cluster_t *c, const plan_calib_t *k) {
  return c->inter_busbw > 0 ? c->inter_busbw : c->nics * c->nic_bw / c->gpus_per_node * k->nic_eff;
}

// Members of a group with the same position in every faster dimension,
// `stride` ranks apart, that share a node with a given member.
static int near_members(int gpn, long long stride, int n) {
  long long k = stride < gpn ? gpn / stride : 1;
  return (int)(k < n ? k : n);
}

// A ring of n ranks of which per_node share each node.
static plan_group_t ring(const plan_cluster_t *c, const plan_calib_t *k, int n, int per_node) {
  plan_group_t g = {.n = n, .per_node = per_node < 1 ? 1 : per_node};
  g.crosses_nodes = n > g.per_node;
  double nvlink = nvlink_rate(c, k);
  g.busbw = g.crosses_nodes ? fmin(nvlink, g.per_node * nic_rate(c, k)) : nvlink;
  g.lat = g.crosses_nodes ? c->inter_lat : c->intra_lat;
  return g;
}

plan_links_t plan_links(const plan_cluster_t *c, const plan_calib_t *k, int tp, int cp, int dp,
                        int ep) {
  plan_links_t l = {0};
  if (cp < 1) cp = 1;
  if (ep < 1) ep = 1;
  int gpn = c->gpus_per_node;
  double nvlink = nvlink_rate(c, k), nic = nic_rate(c, k);
  // Tensor parallel: NVLink inside a node; a group wider than a node crosses
  // the network with every member's NIC.
  l.tp = ring(c, k, tp, near_members(gpn, 1, tp));
  if (tp > gpn) l.tp.busbw = fmin(nvlink, gpn * nic);
  // Context parallel: tp ranks apart. A ring step that leaves the node goes
  // through one NIC; all steps run at once, so the slowest hop sets the pace.
  int cp_near = near_members(gpn, tp, cp);
  l.cp = ring(c, k, cp, cp_near);
  l.cp_bw = l.cp.crosses_nodes ? fmin(nvlink, nic) : nvlink;
  l.cp_lat = l.cp.lat;
  // Gradients of the dense weights are reduced over the dp x cp ranks that
  // hold the same tp shard (the weights are replicated over cp); those of
  // the routed experts over the dp x cp / ep of them that hold the same
  // experts (the cp ranks, and every ep-th dp rank).
  l.dp = ring(c, k, dp * cp, near_members(gpn, tp, dp * cp));
  int edp = dp / ep > 0 ? dp / ep : 1;
  l.edp = ring(c, k, edp * cp, cp_near * near_members(gpn, (long long)tp * cp * ep, edp));
  // Expert parallel: the innermost ep of the dp ranks, tp x cp ranks apart.
  l.ep = ring(c, k, ep, near_members(gpn, (long long)tp * cp, ep));
  l.ep_nvlink_bw = nvlink;
  l.ep_net_bw = nic;
  l.ep_lat = l.ep.lat;
  // Pipeline neighbours are tp x cp x dp ranks apart; each GPU sends its shard.
  l.pp_crosses_nodes = (double)tp * cp * dp >= gpn;
  l.pp_bw = l.pp_crosses_nodes ? fmin(nvlink, nic) : nvlink;
  l.pp_lat = l.pp_crosses_nodes ? c->inter_lat : c->intra_lat;
  return l;
}
