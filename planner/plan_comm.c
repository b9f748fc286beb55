/*
 * plan_comm.c — how long the collectives of each parallel dimension take.
 *
 * The alpha-beta model of a ring, in nccl-tests' bus-bandwidth terms: an
 * AllReduce of S bytes over n ranks moves 2 (n - 1)/n S through every rank
 * and takes 2 (n - 1) hops of latency; AllGather and ReduceScatter move
 * (n - 1)/n S in n - 1 hops; a point-to-point send is one hop. busbw is what
 * nccl-tests reports as "busbw", so a measured value drops straight in.
 *
 * Ranks are laid out tp fastest, then dp, then pp (Megatron-LM's order), so
 * a tp group sits inside a node and a dp group spans nodes once tp x dp
 * exceeds a node. A ring that crosses nodes uses one NIC per member it has in
 * each node (rail-optimised, NCCL's multi-ring layout): with k members per
 * node its bus bandwidth is k x the per-GPU share of the node's NICs.
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

plan_links_t plan_links(const plan_cluster_t *c, const plan_calib_t *k, int tp, int dp) {
  plan_links_t l = {0};
  int gpn = c->gpus_per_node;
  double nvlink = c->intra_busbw > 0 ? c->intra_busbw : c->nvlink_bw * k->link_eff;
  double nic_per_gpu = c->inter_busbw > 0 ? c->inter_busbw
                                          : c->nics * c->nic_bw / gpn * k->link_eff;
  // Tensor parallel: NVLink inside a node; a group wider than a node crosses
  // the network with every member's NIC.
  if (tp <= gpn) {
    l.tp_busbw = nvlink;
    l.tp_lat = c->intra_lat;
  } else {
    l.tp_busbw = fmin(nvlink, gpn * nic_per_gpu);
    l.tp_lat = c->inter_lat;
  }
  // Data parallel: members per node are the GPUs a node has left after tp.
  int per_node = tp < gpn ? gpn / tp : 1;
  if (per_node > dp) per_node = dp;
  l.dp_crosses_nodes = (double)tp * dp > gpn;
  if (l.dp_crosses_nodes) {
    l.dp_busbw = fmin(nvlink, per_node * nic_per_gpu);
    l.dp_lat = c->inter_lat;
  } else {
    l.dp_busbw = nvlink;
    l.dp_lat = c->intra_lat;
  }
  // Pipeline neighbours are tp x dp ranks apart; each GPU sends its shard.
  l.pp_crosses_nodes = (double)tp * dp >= gpn;
  l.pp_bw = l.pp_crosses_nodes ? fmin(nvlink, nic_per_gpu) : nvlink;
  l.pp_lat = l.pp_crosses_nodes ? c->inter_lat : c->intra_lat;
  return l;
}
