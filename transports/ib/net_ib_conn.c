/*
 * net_ib_conn.c — the connection info the two ends of a verbs connection
 * exchange over the side channel (net_ib.c): queue pair numbers, first
 * PSN, LID, GID, MTU, link layer and (from the sender) where its FIFO of
 * receive descriptors lives. Fixed size, little endian, with a magic, a
 * version and a checksum, so a stranger's bytes, a truncated read or a
 * peer of another version is refused instead of wiring a QP to garbage.
 */
#include <stdio.h>
#include <string.h>

#include "net_ib.h"
#include "util.h"

#define CONN_MAGIC 0x42494657u  // "WFIB"
#define CONN_VERSION 1

static uint8_t *put(uint8_t *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) p[i] = (uint8_t)(v >> (8 * i));
  return p + bytes;
}

static uint64_t get(const uint8_t **p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v |= (uint64_t)(*p)[i] << (8 * i);
  *p += bytes;
  return v;
}

size_t weft_ib_conn_pack(const weft_ib_conn_info_t *info, uint8_t *buf) {
  uint8_t *p = buf;
  p = put(p, CONN_MAGIC, 4);
  p = put(p, CONN_VERSION, 2);
  p = put(p, info->nqps, 2);
  for (int i = 0; i < WEFT_IB_MAX_QPS; i++) p = put(p, i < (int)info->nqps ? info->qpn[i] : 0, 4);
  p = put(p, info->psn, 4);
  p = put(p, info->lid, 2);
  p = put(p, info->link_layer, 1);
  p = put(p, info->mtu, 1);
  memcpy(p, info->gid, 16);
  p += 16;
  p = put(p, info->fifo_addr, 8);
  p = put(p, info->fifo_rkey, 4);
  p = put(p, 0, 4);  // reserved
  size_t body = (size_t)(p - buf);
  p = put(p, weft_hash_bytes(buf, body), 8);
  return (size_t)(p - buf);
}

int weft_ib_conn_unpack(const uint8_t *buf, size_t len, weft_ib_conn_info_t *info, char *err, size_t errlen) {
  memset(info, 0, sizeof(*info));
  if (buf == NULL || len != WEFT_IB_CONN_BYTES) {
    snprintf(err, errlen, "connection info of %zu bytes, want %d", len, WEFT_IB_CONN_BYTES);
    return -1;
  }
  const uint8_t *p = buf;
  uint32_t magic = (uint32_t)get(&p, 4);
  unsigned version = (unsigned)get(&p, 2);
  if (magic != CONN_MAGIC) {
    snprintf(err, errlen, "not a weft verbs connection (magic %08x)", magic);
    return -1;
  }
  if (version != CONN_VERSION) {
    snprintf(err, errlen, "connection info version %u, this build speaks %d", version, CONN_VERSION);
    return -1;
  }
  const uint8_t *q = buf + WEFT_IB_CONN_BYTES - 8;
  uint64_t sum = get(&q, 8);
  if (sum != weft_hash_bytes(buf, WEFT_IB_CONN_BYTES - 8)) {
    snprintf(err, errlen, "connection info checksum mismatch");
    return -1;
  }
  info->nqps = (uint32_t)get(&p, 2);
  if (info->nqps < 1 || info->nqps > WEFT_IB_MAX_QPS) {
    snprintf(err, errlen, "connection info names %u queue pairs (1..%d)", info->nqps, WEFT_IB_MAX_QPS);
    return -1;
  }
  for (int i = 0; i < WEFT_IB_MAX_QPS; i++) {
    uint32_t qpn = (uint32_t)get(&p, 4);
    if (i < (int)info->nqps) info->qpn[i] = qpn;
    if ((i < (int)info->nqps && (qpn == 0 || qpn > 0xffffff)) || (i >= (int)info->nqps && qpn != 0)) {
      snprintf(err, errlen, "connection info has a bad queue pair number %u at %d", qpn, i);
      return -1;
    }
  }
  info->psn = (uint32_t)get(&p, 4);
  info->lid = (uint16_t)get(&p, 2);
  info->link_layer = (uint8_t)get(&p, 1);
  info->mtu = (uint8_t)get(&p, 1);
  memcpy(info->gid, p, 16);
  p += 16;
  info->fifo_addr = get(&p, 8);
  info->fifo_rkey = (uint32_t)get(&p, 4);
  uint32_t reserved = (uint32_t)get(&p, 4);
  if (reserved != 0 || info->psn > 0xffffff || info->mtu < IBV_MTU_256 || info->mtu > IBV_MTU_4096 ||
      (info->link_layer != IBV_LINK_LAYER_INFINIBAND && info->link_layer != IBV_LINK_LAYER_ETHERNET)) {
    snprintf(err, errlen, "connection info out of range (psn %u, mtu %u, link layer %u, reserved %u)", info->psn,
             info->mtu, info->link_layer, reserved);
    return -1;
  }
  return 0;
}
