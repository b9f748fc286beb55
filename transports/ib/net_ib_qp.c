/*
 * net_ib_qp.c — reliable-connected queue pairs of the verbs backend: made
 * on a communicator's completion queue, moved INIT -> RTR -> RTS with the
 * peer's connection info and the knobs NCCL_IB_TIMEOUT, NCCL_IB_RETRY_CNT,
 * NCCL_IB_SL and NCCL_IB_TC. The attribute filling is separate and pure so
 * tests can check it without an HCA. Access: local write and remote write
 * only (data and descriptors move by RDMA write; nothing is read).
 */
#include <stdio.h>
#include <string.h>

#include "checks.h"
#include "env.h"
#include "net_ib.h"

static int clamp(int64_t v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : (int)v; }

void weft_ib_qp_knobs(weft_ib_qp_knobs_t *k) {
  k->timeout = clamp(weft_env_NCCL_IB_TIMEOUT(), 1, 31);
  k->retry_cnt = clamp(weft_env_NCCL_IB_RETRY_CNT(), 0, 7);
  k->sl = clamp(weft_env_NCCL_IB_SL(), 0, 15);
  k->tc = clamp(weft_env_NCCL_IB_TC(), 0, 255);
}

void weft_ib_rtr_attr(const weft_ib_dev_t *dev, const weft_ib_conn_info_t *remote, uint32_t qpn,
                      const weft_ib_qp_knobs_t *k, struct ibv_qp_attr *attr, int *mask) {
  memset(attr, 0, sizeof(*attr));
  attr->qp_state = IBV_QPS_RTR;
  attr->path_mtu = (enum ibv_mtu)(dev->mtu < remote->mtu ? dev->mtu : remote->mtu);
  attr->dest_qp_num = qpn;
  attr->rq_psn = remote->psn;
  attr->max_dest_rd_atomic = 1;
  attr->min_rnr_timer = 12;
  attr->ah_attr.dlid = remote->lid;
  attr->ah_attr.sl = (uint8_t)k->sl;
  attr->ah_attr.port_num = (uint8_t)dev->port;
  if (dev->link_layer == IBV_LINK_LAYER_ETHERNET) {  // RoCE: routed by GID
    attr->ah_attr.is_global = 1;
    memcpy(attr->ah_attr.grh.dgid.raw, remote->gid, 16);
    attr->ah_attr.grh.sgid_index = (uint8_t)(dev->gid_index < 0 ? 0 : dev->gid_index);
    attr->ah_attr.grh.hop_limit = 255;
    attr->ah_attr.grh.traffic_class = (uint8_t)k->tc;
  }
  *mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
          IBV_QP_MIN_RNR_TIMER;
}

void weft_ib_rts_attr(uint32_t psn, const weft_ib_qp_knobs_t *k, struct ibv_qp_attr *attr, int *mask) {
  memset(attr, 0, sizeof(*attr));
  attr->qp_state = IBV_QPS_RTS;
  attr->sq_psn = psn;
  attr->timeout = (uint8_t)k->timeout;
  attr->retry_cnt = (uint8_t)k->retry_cnt;
  attr->rnr_retry = 7;  // infinite: a receiver that is briefly out of posted receives is waited for
  attr->max_rd_atomic = 1;
  *mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
}

struct ibv_qp *weft_ib_qp_create(const weft_ibv_ops_t *ops, const weft_ib_dev_t *dev, struct ibv_cq *cq, int max_wr) {
  struct ibv_qp_init_attr init;
  memset(&init, 0, sizeof(init));
  init.send_cq = init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = (uint32_t)max_wr;
  init.cap.max_recv_wr = (uint32_t)max_wr;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  struct ibv_qp *qp = ops->create_qp(dev->pd, &init);
  if (qp == NULL) {
    WARN("NET/IB %s:%d: ibv_create_qp failed", dev->name, dev->port);
    return NULL;
  }
  struct ibv_qp_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = (uint8_t)dev->port;
  attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  int err = ops->modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (err != 0) {
    WARN("NET/IB %s:%d: QP to INIT failed: %s", dev->name, dev->port, strerror(err));
    ops->destroy_qp(qp);
    return NULL;
  }
  return qp;
}

int weft_ib_qp_connect(const weft_ibv_ops_t *ops, const weft_ib_dev_t *dev, struct ibv_qp *qp,
                       const weft_ib_conn_info_t *remote, uint32_t remote_qpn, uint32_t local_psn) {
  weft_ib_qp_knobs_t k;
  weft_ib_qp_knobs(&k);
  struct ibv_qp_attr attr;
  int mask, err;
  weft_ib_rtr_attr(dev, remote, remote_qpn, &k, &attr, &mask);
  if ((err = ops->modify_qp(qp, &attr, mask)) != 0) {
    WARN("NET/IB %s:%d: QP to RTR (remote QP %u) failed: %s", dev->name, dev->port, remote_qpn, strerror(err));
    return -1;
  }
  weft_ib_rts_attr(local_psn, &k, &attr, &mask);
  if ((err = ops->modify_qp(qp, &attr, mask)) != 0) {
    WARN("NET/IB %s:%d: QP to RTS failed: %s", dev->name, dev->port, strerror(err));
    return -1;
  }
  return 0;
}
