/*
 * test_net_ib.c — the ibverbs backend's logic, on machines without RDMA:
 * NCCL_IB_HCA parsing and matching (every syntax case, bad input refused
 * with a message), connection info packing (round trip; truncated, garbled
 * and foreign input refused), the registration cache against a fake
 * register/deregister table (hits, overlaps, LRU eviction, references),
 * the descriptor FIFO's credits, wrap-around and order, GID choice, QP
 * attributes from the knobs, and "no libibverbs / no device / disabled"
 * making the backend unavailable with one INFO line and no crash.
 * Nothing here needs an HCA; nothing waits.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "debug.h"
#include "env.h"
#include "net_ib.h"
#include "util.h"

/* ---- NCCL_IB_HCA ---- */

Test(net_ib_hca, empty_keeps_everything, .timeout = 10) {
  weft_ib_hca_list_t l;
  char err[128];
  cr_assert_eq(weft_ib_hca_parse(NULL, &l, err, sizeof(err)), 0);
  cr_expect_eq(l.n, 0);
  cr_expect(weft_ib_hca_match(&l, "mlx5_0", 1));
  cr_assert_eq(weft_ib_hca_parse("", &l, err, sizeof(err)), 0);
  cr_expect(weft_ib_hca_match(&l, "anything", 7));
}

Test(net_ib_hca, prefix_exact_exclude_ports, .timeout = 10) {
  weft_ib_hca_list_t l;
  char err[128];
  cr_assert_eq(weft_ib_hca_parse("mlx5", &l, err, sizeof(err)), 0, "%s", err);
  cr_expect(!l.exclude && !l.exact && l.n == 1 && l.specs[0].port == -1);
  cr_expect(weft_ib_hca_match(&l, "mlx5_0", 1));
  cr_expect(weft_ib_hca_match(&l, "mlx5_12", 2));
  cr_expect(!weft_ib_hca_match(&l, "mlx4_0", 1));

  cr_assert_eq(weft_ib_hca_parse("=mlx5_1", &l, err, sizeof(err)), 0, "%s", err);
  cr_expect(l.exact && !l.exclude);
  cr_expect(weft_ib_hca_match(&l, "mlx5_1", 1));
  cr_expect(!weft_ib_hca_match(&l, "mlx5_10", 1), "exact must not prefix-match");

  cr_assert_eq(weft_ib_hca_parse("^mlx5_1", &l, err, sizeof(err)), 0, "%s", err);
  cr_expect(l.exclude && !l.exact);
  cr_expect(!weft_ib_hca_match(&l, "mlx5_1", 1));
  cr_expect(!weft_ib_hca_match(&l, "mlx5_10", 1), "prefix exclusion drops mlx5_10 too");
  cr_expect(weft_ib_hca_match(&l, "mlx5_0", 1));

  cr_assert_eq(weft_ib_hca_parse("^=mlx5_1:2", &l, err, sizeof(err)), 0, "%s", err);
  cr_expect(l.exclude && l.exact && l.specs[0].port == 2);
  cr_expect(!weft_ib_hca_match(&l, "mlx5_1", 2));
  cr_expect(weft_ib_hca_match(&l, "mlx5_1", 1));
  cr_expect(weft_ib_hca_match(&l, "mlx5_10", 2));

  cr_assert_eq(weft_ib_hca_parse("mlx5_0:1,mlx5_2,bnxt_re0:255", &l, err, sizeof(err)), 0, "%s", err);
  cr_expect_eq(l.n, 3);
  cr_expect_str_eq(l.specs[2].name, "bnxt_re0");
  cr_expect_eq(l.specs[2].port, 255);
  cr_expect(weft_ib_hca_match(&l, "mlx5_0", 1));
  cr_expect(!weft_ib_hca_match(&l, "mlx5_0", 2));
  cr_expect(weft_ib_hca_match(&l, "mlx5_2", 2));
  cr_expect(!weft_ib_hca_match(&l, "mlx5_1", 1));
}

Test(net_ib_hca, bad_input_is_refused_with_a_message, .timeout = 10) {
  char longname[80];
  memset(longname, 'a', sizeof(longname) - 1);
  longname[sizeof(longname) - 1] = '\0';
  char many[400] = "";
  for (int i = 0; i <= WEFT_IB_MAX_DEVS; i++) strcat(many, i ? ",d" : "d");
  const char *bad[] = {"^", "=", "^=", "mlx5_0,", ",mlx5_0", "a,,b", "mlx5_0:", "mlx5_0:0", "mlx5_0:256",
                       "mlx5_0:1x", "mlx5_0:-1", "mlx 5", "=^mlx5", ":1", "mlx5_0:1:2", longname, many};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    weft_ib_hca_list_t l;
    char err[128] = "";
    cr_expect_eq(weft_ib_hca_parse(bad[i], &l, err, sizeof(err)), -1, "'%s' was accepted", bad[i]);
    cr_expect(strstr(err, "NCCL_IB_HCA") != NULL, "'%s': message '%s'", bad[i], err);
    cr_expect_eq(l.n, 0, "'%s' left a half-parsed list", bad[i]);
  }
}

/* ---- connection info ---- */

static weft_ib_conn_info_t sample_info(void) {
  weft_ib_conn_info_t in;
  memset(&in, 0, sizeof(in));
  in.nqps = 3;
  in.qpn[0] = 0x11, in.qpn[1] = 0xabcdef, in.qpn[2] = 7;
  in.psn = 0x123456;
  in.lid = 0x4321;
  in.link_layer = IBV_LINK_LAYER_ETHERNET;
  in.mtu = IBV_MTU_4096;
  for (int i = 0; i < 16; i++) in.gid[i] = (uint8_t)(0xf0 + i);
  in.fifo_addr = 0x00007f1234567000ull;
  in.fifo_rkey = 0xdeadbeef;
  return in;
}

Test(net_ib_conn, round_trip, .timeout = 10) {
  weft_ib_conn_info_t in = sample_info(), out;
  uint8_t buf[WEFT_IB_CONN_BYTES];
  char err[128] = "";
  cr_assert_eq(weft_ib_conn_pack(&in, buf), (size_t)WEFT_IB_CONN_BYTES);
  cr_assert_eq(weft_ib_conn_unpack(buf, sizeof(buf), &out, err, sizeof(err)), 0, "%s", err);
  cr_expect_eq(memcmp(&in, &out, sizeof(in)), 0);
  in.nqps = WEFT_IB_MAX_QPS;  // every slot used
  for (int i = 0; i < WEFT_IB_MAX_QPS; i++) in.qpn[i] = (uint32_t)(100 + i);
  in.link_layer = IBV_LINK_LAYER_INFINIBAND;
  weft_ib_conn_pack(&in, buf);
  cr_assert_eq(weft_ib_conn_unpack(buf, sizeof(buf), &out, err, sizeof(err)), 0, "%s", err);
  cr_expect_eq(memcmp(&in, &out, sizeof(in)), 0);
}

Test(net_ib_conn, truncated_and_garbage_refused, .timeout = 10) {
  weft_ib_conn_info_t in = sample_info(), out;
  uint8_t buf[WEFT_IB_CONN_BYTES + 8];
  char err[128];
  weft_ib_conn_pack(&in, buf);
  cr_expect_eq(weft_ib_conn_unpack(NULL, 0, &out, err, sizeof(err)), -1);
  cr_expect_eq(weft_ib_conn_unpack(buf, 0, &out, err, sizeof(err)), -1);
  cr_expect_eq(weft_ib_conn_unpack(buf, WEFT_IB_CONN_BYTES - 1, &out, err, sizeof(err)), -1);
  cr_expect(strstr(err, "bytes") != NULL, "%s", err);
  cr_expect_eq(weft_ib_conn_unpack(buf, WEFT_IB_CONN_BYTES + 8, &out, err, sizeof(err)), -1);
  // Every single flipped bit is caught (magic, version, or the checksum).
  for (size_t i = 0; i < WEFT_IB_CONN_BYTES; i++)
    for (int b = 0; b < 8; b += 3) {
      weft_ib_conn_pack(&in, buf);
      buf[i] ^= (uint8_t)(1u << b);
      err[0] = '\0';
      cr_assert_eq(weft_ib_conn_unpack(buf, WEFT_IB_CONN_BYTES, &out, err, sizeof(err)), -1, "byte %zu bit %d", i, b);
      cr_assert(err[0] != '\0');
    }
  // Random bytes.
  srand(7);
  for (int t = 0; t < 1000; t++) {
    for (size_t i = 0; i < WEFT_IB_CONN_BYTES; i++) buf[i] = (uint8_t)rand();
    cr_assert_eq(weft_ib_conn_unpack(buf, WEFT_IB_CONN_BYTES, &out, err, sizeof(err)), -1);
  }
  // Well-formed but out of range: zero QPs, a 25-bit PSN, an unknown MTU.
  weft_ib_conn_info_t bad = in;
  bad.nqps = 0;
  weft_ib_conn_pack(&bad, buf);
  cr_expect_eq(weft_ib_conn_unpack(buf, WEFT_IB_CONN_BYTES, &out, err, sizeof(err)), -1);
  cr_expect(strstr(err, "queue pairs") != NULL, "%s", err);
  bad = in, bad.psn = 0x1000000;
  weft_ib_conn_pack(&bad, buf);
  cr_expect_eq(weft_ib_conn_unpack(buf, WEFT_IB_CONN_BYTES, &out, err, sizeof(err)), -1);
  bad = in, bad.mtu = 9;
  weft_ib_conn_pack(&bad, buf);
  cr_expect_eq(weft_ib_conn_unpack(buf, WEFT_IB_CONN_BYTES, &out, err, sizeof(err)), -1);
  bad = in, bad.qpn[1] = 0;
  weft_ib_conn_pack(&bad, buf);
  cr_expect_eq(weft_ib_conn_unpack(buf, WEFT_IB_CONN_BYTES, &out, err, sizeof(err)), -1);
  // The reserved word set, checksum made to match: still refused (it must pack back to the same bytes).
  weft_ib_conn_pack(&in, buf);
  buf[WEFT_IB_CONN_BYTES - 12] = 1;
  uint64_t sum = weft_hash_bytes(buf, WEFT_IB_CONN_BYTES - 8);
  for (int i = 0; i < 8; i++) buf[WEFT_IB_CONN_BYTES - 8 + i] = (uint8_t)(sum >> (8 * i));
  cr_expect_eq(weft_ib_conn_unpack(buf, WEFT_IB_CONN_BYTES, &out, err, sizeof(err)), -1);
  cr_expect(strstr(err, "reserved 1") != NULL, "%s", err);
}

/* ---- registration cache ---- */

typedef struct {
  int regs, deregs, live, fail_next;
  uintptr_t last_addr;
  size_t last_len;
} fake_hca_t;

static void *fake_reg(void *ctx, void *addr, size_t len, uint32_t *lkey, uint32_t *rkey) {
  fake_hca_t *h = ctx;
  if (h->fail_next) {
    h->fail_next = 0;
    return NULL;
  }
  h->regs++, h->live++;
  h->last_addr = (uintptr_t)addr, h->last_len = len;
  *lkey = (uint32_t)h->regs, *rkey = (uint32_t)(1000 + h->regs);
  return (void *)(uintptr_t)h->regs;  // a non-NULL token
}

static int fake_dereg(void *ctx, void *handle) {
  fake_hca_t *h = ctx;
  (void)handle;
  h->deregs++, h->live--;
  return 0;
}

#define PG 4096
#define AT(off) ((const void *)(uintptr_t)(0x100000 + (off)))

Test(net_ib_mr, hits_overlaps_and_alignment, .timeout = 10) {
  fake_hca_t h = {0};
  weft_ib_mr_ops_t ops = {.ctx = &h, .reg = fake_reg, .dereg = fake_dereg};
  weft_ib_mr_cache_t c;
  weft_ib_mr_cache_init(&c, &ops, 8, PG);
  const weft_ib_mr_t *a = weft_ib_mr_get(&c, AT(100), 5000);  // pages 0 and 1
  cr_assert_not_null(a);
  cr_expect_eq(h.last_addr, 0x100000);
  cr_expect_eq(h.last_len, 2 * PG);
  const weft_ib_mr_t *b = weft_ib_mr_get(&c, AT(PG + 10), 100);  // inside: a hit
  cr_expect_eq(b, a);
  cr_expect_eq(a->refs, 2);
  cr_expect_eq(h.regs, 1);
  const weft_ib_mr_t *o = weft_ib_mr_get(&c, AT(PG), 2 * PG);  // pages 1..2: overlaps, not inside
  cr_assert_not_null(o);
  cr_expect_neq(o, a);
  cr_expect_eq(h.regs, 2);
  cr_expect_eq(o->start, 0x100000 + PG);
  cr_expect_eq(o->len, 2 * PG);
  const weft_ib_mr_t *z = weft_ib_mr_get(&c, AT(3 * PG), 0);  // zero length: its page
  cr_assert_not_null(z);
  cr_expect_eq(z->len, PG);
  cr_expect_eq(c.hits, 1);
  cr_expect_eq(c.misses, 3);
  weft_ib_mr_put(&c, a), weft_ib_mr_put(&c, b), weft_ib_mr_put(&c, o), weft_ib_mr_put(&c, z);
  cr_expect_eq(a->refs, 0);
  cr_expect_eq(weft_ib_mr_cache_free(&c), 0);
  cr_expect_eq(h.live, 0);
}

Test(net_ib_mr, lru_eviction_spares_referenced, .timeout = 10) {
  fake_hca_t h = {0};
  weft_ib_mr_ops_t ops = {.ctx = &h, .reg = fake_reg, .dereg = fake_dereg};
  weft_ib_mr_cache_t c;
  weft_ib_mr_cache_init(&c, &ops, 3, PG);
  const weft_ib_mr_t *m[3];
  for (int i = 0; i < 3; i++) {
    m[i] = weft_ib_mr_get(&c, AT(i * 16 * PG), PG);
    weft_ib_mr_put(&c, m[i]);
  }
  cr_expect_eq(h.live, 3);
  weft_ib_mr_put(&c, weft_ib_mr_get(&c, AT(0), PG));  // entry 0 used again: entry 1 is now the oldest
  cr_expect_eq(c.hits, 1);
  const weft_ib_mr_t *n = weft_ib_mr_get(&c, AT(100 * PG), PG);  // a fourth: evicts one
  cr_assert_not_null(n);
  cr_expect_eq(h.live, 3);
  cr_expect_eq(c.evictions, 1);
  uint64_t before = c.misses;
  weft_ib_mr_put(&c, weft_ib_mr_get(&c, AT(0), PG));  // entry 0 stayed
  weft_ib_mr_put(&c, weft_ib_mr_get(&c, AT(32 * PG), PG));  // entry 2 stayed
  cr_expect_eq(c.misses, before);
  weft_ib_mr_put(&c, weft_ib_mr_get(&c, AT(16 * PG), PG));  // entry 1 was the one evicted
  cr_expect_eq(c.misses, before + 1);
  // All in use: the cache grows past its bound instead of failing ...
  const weft_ib_mr_t *held[3];
  held[0] = n;
  held[1] = weft_ib_mr_get(&c, AT(0), PG);
  held[2] = weft_ib_mr_get(&c, AT(16 * PG), PG);
  const weft_ib_mr_t *extra = weft_ib_mr_get(&c, AT(200 * PG), PG);
  cr_assert_not_null(extra);
  for (int i = 0; i < 3; i++) cr_expect_gt(held[i]->refs, 0);
  cr_expect_eq(c.n, 4);
  // ... and shrinks back once they are let go.
  weft_ib_mr_put(&c, extra);
  cr_expect_eq(c.n, 3);
  cr_expect_eq(weft_ib_mr_cache_free(&c), 3, "three were still referenced");
  cr_expect_eq(h.live, 0);
  cr_expect_eq(h.regs, h.deregs);
}

Test(net_ib_mr, registration_failure, .timeout = 10) {
  fake_hca_t h = {.fail_next = 1};
  weft_ib_mr_ops_t ops = {.ctx = &h, .reg = fake_reg, .dereg = fake_dereg};
  weft_ib_mr_cache_t c;
  weft_ib_mr_cache_init(&c, &ops, 4, PG);
  cr_expect_null(weft_ib_mr_get(&c, AT(0), 10));
  cr_expect_eq(c.n, 0);
  cr_expect_not_null(weft_ib_mr_get(&c, AT(0), 10));
  cr_expect_null(weft_ib_mr_get(&c, (const void *)(UINTPTR_MAX - 10), 100), "a range that wraps");
  cr_expect_eq(weft_ib_mr_cache_free(&c), 1);
}

/* ---- the descriptor FIFO ---- */

Test(net_ib_fifo, credits_and_slots, .timeout = 10) {
  weft_ib_fifo_rx_t rx;
  weft_ib_fifo_rx_init(&rx, 4, 0);
  weft_ib_fifo_entry_t e;
  uint32_t slot;
  cr_expect_eq(weft_ib_fifo_rx_credits(&rx), 4);
  for (uint32_t i = 0; i < 4; i++) {
    cr_assert_eq(weft_ib_fifo_rx_post(&rx, 0x1000 * i, 7, 64, &e, &slot), 0);
    cr_expect_eq(slot, i);
    cr_expect_eq(e.seq, i + 1);
  }
  cr_expect_eq(weft_ib_fifo_rx_credits(&rx), 0);
  cr_expect_eq(weft_ib_fifo_rx_post(&rx, 0, 0, 0, &e, &slot), -1, "no credit left");
  cr_assert_eq(weft_ib_fifo_rx_complete(&rx), 0);
  cr_expect_eq(weft_ib_fifo_rx_credits(&rx), 1);
  cr_assert_eq(weft_ib_fifo_rx_post(&rx, 0x9000, 7, 64, &e, &slot), 0);
  cr_expect_eq(slot, 0, "wraps to slot 0");
  cr_expect_eq(e.seq, 5);
  for (int i = 0; i < 4; i++) cr_assert_eq(weft_ib_fifo_rx_complete(&rx), 0);
  cr_expect_eq(weft_ib_fifo_rx_complete(&rx), -1, "nothing outstanding");
}

Test(net_ib_fifo, sender_takes_in_order, .timeout = 10) {
  weft_ib_fifo_entry_t fifo[4];
  memset(fifo, 0, sizeof(fifo));
  weft_ib_fifo_tx_t tx;
  weft_ib_fifo_tx_init(&tx, 4, 0);
  weft_ib_fifo_entry_t out;
  cr_expect_eq(weft_ib_fifo_tx_take(&tx, fifo, &out), 0, "empty slot: not yet");
  fifo[1] = (weft_ib_fifo_entry_t){.addr = 2, .seq = 2};  // the second arrives first
  cr_expect_eq(weft_ib_fifo_tx_take(&tx, fifo, &out), 0);
  fifo[0] = (weft_ib_fifo_entry_t){.addr = 1, .rkey = 9, .size = 33, .seq = 1};
  cr_assert_eq(weft_ib_fifo_tx_take(&tx, fifo, &out), 1);
  cr_expect(out.addr == 1 && out.rkey == 9 && out.size == 33);
  cr_assert_eq(weft_ib_fifo_tx_take(&tx, fifo, &out), 1);
  cr_expect_eq(out.addr, 2);
  fifo[2] = (weft_ib_fifo_entry_t){.seq = 3}, fifo[3] = (weft_ib_fifo_entry_t){.seq = 4};
  cr_assert_eq(weft_ib_fifo_tx_take(&tx, fifo, &out), 1);
  cr_assert_eq(weft_ib_fifo_tx_take(&tx, fifo, &out), 1);
  // Slot 0 still holds seq 1 (the previous lap): not yet, not garbage.
  cr_expect_eq(weft_ib_fifo_tx_take(&tx, fifo, &out), 0);
  fifo[0].seq = 77;
  cr_expect_eq(weft_ib_fifo_tx_take(&tx, fifo, &out), -1, "garbage");
  fifo[0].seq = 5;
  cr_expect_eq(weft_ib_fifo_tx_take(&tx, fifo, &out), 1);
}

// Receiver and sender driven in a deterministic shuffle through a shared
// FIFO memory, as the HCA would: every message matches its own receive,
// in order, and no slot is overwritten before the sender took it.
Test(net_ib_fifo, simulated_stream_wraps_many_times, .timeout = 30) {
  enum { DEPTH = 5, MSGS = 10000 };
  weft_ib_fifo_entry_t fifo[DEPTH];
  memset(fifo, 0, sizeof(fifo));
  weft_ib_fifo_rx_t rx;
  weft_ib_fifo_tx_t tx;
  weft_ib_fifo_rx_init(&rx, DEPTH, 0);
  weft_ib_fifo_tx_init(&tx, DEPTH, 0);
  uint64_t sent = 0, landed = 0;
  unsigned seed = 12345;
  while (landed < MSGS) {
    seed = seed * 1103515245u + 12345u;
    switch ((seed >> 16) % 3) {
      case 0: {  // the receiver posts a buffer
        weft_ib_fifo_entry_t e;
        uint32_t slot;
        if (rx.posted < MSGS && weft_ib_fifo_rx_post(&rx, 0x1000 + rx.posted, 1, 8, &e, &slot) == 0) {
          cr_assert(fifo[slot].seq == 0 || fifo[slot].seq <= tx.taken, "slot %u overwritten before it was taken", slot);
          fifo[slot] = e;
        }
        break;
      }
      case 1: {  // the sender sends into the next descriptor
        weft_ib_fifo_entry_t out;
        int got = weft_ib_fifo_tx_take(&tx, fifo, &out);
        cr_assert_geq(got, 0);
        if (got) {
          cr_assert_eq(out.addr, 0x1000 + sent, "message %lu went to the wrong buffer", (unsigned long)sent);
          sent++;
        }
        break;
      }
      default:  // a message lands and the receiver finishes it
        if (landed < sent) {
          cr_assert_eq(weft_ib_fifo_rx_complete(&rx), 0);
          landed++;
        }
    }
  }
  cr_expect_eq(sent, MSGS);
  cr_expect_eq(rx.done, MSGS);
}

/* ---- GIDs, QP attributes ---- */

static weft_ib_gid_t gid(int v2, const char *hex) {  // 32 hex digits
  weft_ib_gid_t g = {.roce_v2 = v2};
  for (int i = 0; i < 16; i++) {
    unsigned b;
    sscanf(hex + 2 * i, "%2x", &b);
    g.raw[i] = (uint8_t)b;
  }
  return g;
}

Test(net_ib_gid, prefers_ipv4_mapped_roce_v2, .timeout = 10) {
  weft_ib_gid_t t[] = {
      gid(0, "fe800000000000000000000000000001"),  // 0 link-local, v1
      gid(1, "fe800000000000000000000000000001"),  // 1 link-local, v2
      gid(0, "00000000000000000000ffff0a000001"),  // 2 IPv4, v1
      gid(1, "00000000000000000000000000000000"),  // 3 empty
      gid(1, "20010db8000000000000000000000001"),  // 4 global IPv6, v2
      gid(1, "00000000000000000000ffff0a000001"),  // 5 IPv4, v2
  };
  cr_expect_eq(weft_ib_gid_pick(t, 6), 5);
  cr_expect_eq(weft_ib_gid_pick(t, 5), 4, "no IPv4 v2: a routable v2");
  cr_expect_eq(weft_ib_gid_pick(t, 4), 2, "no v2 that routes: any routable");
  cr_expect_eq(weft_ib_gid_pick(t, 2), 0, "only link-local: the first");
  cr_expect_eq(weft_ib_gid_pick(&t[3], 1), -1, "nothing valid");
  cr_expect_eq(weft_ib_gid_pick(t, 0), -1);
}

Test(net_ib_qp, attributes_from_knobs, .timeout = 10) {
  setenv("NCCL_IB_TIMEOUT", "99", 1);
  setenv("NCCL_IB_RETRY_CNT", "3", 1);
  setenv("NCCL_IB_TC", "106", 1);
  weft_env_reset();
  weft_ib_qp_knobs_t k;
  weft_ib_qp_knobs(&k);
  cr_expect_eq(k.timeout, 31, "clamped");
  cr_expect_eq(k.retry_cnt, 3);
  weft_ib_dev_t dev = {.port = 2, .link_layer = IBV_LINK_LAYER_ETHERNET, .mtu = IBV_MTU_4096, .gid_index = 3};
  weft_ib_conn_info_t remote = sample_info();
  remote.mtu = IBV_MTU_1024;
  struct ibv_qp_attr a;
  int mask;
  weft_ib_rtr_attr(&dev, &remote, 0xabcdef, &k, &a, &mask);
  cr_expect_eq(a.qp_state, IBV_QPS_RTR);
  cr_expect_eq(a.path_mtu, IBV_MTU_1024, "the smaller MTU");
  cr_expect_eq(a.dest_qp_num, 0xabcdef);
  cr_expect_eq(a.rq_psn, remote.psn);
  cr_expect(a.ah_attr.is_global && a.ah_attr.grh.sgid_index == 3 && a.ah_attr.grh.traffic_class == 106);
  cr_expect_eq(memcmp(a.ah_attr.grh.dgid.raw, remote.gid, 16), 0);
  cr_expect(mask & IBV_QP_AV);
  dev.link_layer = IBV_LINK_LAYER_INFINIBAND;
  weft_ib_rtr_attr(&dev, &remote, 5, &k, &a, &mask);
  cr_expect(!a.ah_attr.is_global && a.ah_attr.dlid == remote.lid && a.ah_attr.port_num == 2);
  weft_ib_rts_attr(77, &k, &a, &mask);
  cr_expect(a.qp_state == IBV_QPS_RTS && a.sq_psn == 77 && a.timeout == 31 && a.retry_cnt == 3 && a.rnr_retry == 7);
}

static int far_unless_named_near(const weft_ib_dev_t *d) { return strstr(d->name, "near") ? 0 : 1; }

Test(net_ib_dev, nearness_hook_orders_stably, .timeout = 10) {
  weft_ib_dev_t d[4];
  memset(d, 0, sizeof(d));
  const char *names[] = {"far_a", "near_b", "far_c", "near_d"};
  for (int i = 0; i < 4; i++) snprintf(d[i].name, sizeof(d[i].name), "%s", names[i]);
  weft_ib_set_near_hook(far_unless_named_near);
  weft_ib_sort_near(d, 4);
  weft_ib_set_near_hook(NULL);
  cr_expect_str_eq(d[0].name, "near_b");
  cr_expect_str_eq(d[1].name, "near_d");
  cr_expect_str_eq(d[2].name, "far_a");
  cr_expect_str_eq(d[3].name, "far_c");
}

/* ---- availability ---- */

// Start the backend with the library `lib` logging INFO/NET to a file;
// returns the log text (caller frees) and whether it became available.
static char *start_logged(const char *lib, int *available) {
  char path[] = "/tmp/weft-test-ib-XXXXXX";
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  close(fd);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "NET", 1);
  setenv("NCCL_DEBUG_FILE", path, 1);
  weft_env_reset();
  weft_debug_reset();
  weft_net_ib_test_reset(lib);
  *available = weft_net_ib_available();
  cr_expect_eq(weft_net_ib_available(), *available, "a second call agrees (started once)");
  weft_debug_reset();  // closes nothing the next test needs; flush what was written
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f);
  char *text = calloc(1, 65536);
  cr_assert_not_null(text);
  size_t n = fread(text, 1, 65535, f);
  text[n] = '\0';
  fclose(f);
  unlink(path);
  return text;
}

static int count(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, needle)) != NULL; p++) n++;
  return n;
}

Test(net_ib_avail, no_library_is_unavailable_with_one_info_line, .timeout = 30) {
  int avail = -1;
  char *log = start_logged("libweft-no-such-ibverbs.so.1", &avail);
  cr_expect_eq(avail, 0);
  cr_expect_eq(count(log, "NET/IB"), 1, "log:\n%s", log);
  cr_expect_eq(count(log, "NCCL INFO NET/IB : not available"), 1, "log:\n%s", log);
  cr_expect(strstr(log, "libweft-no-such-ibverbs.so.1") != NULL, "log:\n%s", log);
  cr_expect(strstr(log, "WARN") == NULL, "log:\n%s", log);
  int ndev = -1;
  cr_expect_neq(weft_net_ib.init(), ncclSuccess);
  cr_expect_eq(weft_net_ib.devices(&ndev), ncclSuccess);
  cr_expect_eq(ndev, 0);
  cr_expect_str_eq(weft_net_ib.name, "IB");
  free(log);
}

Test(net_ib_avail, library_without_verbs_is_unavailable, .timeout = 30) {
  int avail = -1;
  char *log = start_logged("libm.so.6", &avail);  // exists, but is not libibverbs
  cr_expect_eq(avail, 0);
  cr_expect_eq(count(log, "NET/IB : not available"), 1, "log:\n%s", log);
  cr_expect(strstr(log, "lacks ibv_get_device_list") != NULL, "log:\n%s", log);
  free(log);
}

Test(net_ib_avail, disabled_by_knob, .timeout = 30) {
  setenv("NCCL_IB_DISABLE", "1", 1);
  int avail = -1;
  char *log = start_logged(NULL, &avail);
  cr_expect_eq(avail, 0);
  cr_expect(strstr(log, "NCCL_IB_DISABLE=1") != NULL, "log:\n%s", log);
  unsetenv("NCCL_IB_DISABLE");
  free(log);
}

// The machine's own libibverbs (when installed): on a machine without RDMA
// devices it loads, finds none, and says so once.
Test(net_ib_avail, real_library_without_devices, .timeout = 30) {
  int avail = -1;
  char *log = start_logged(NULL, &avail);
  if (avail) {
    cr_log_warn("this machine has RDMA devices: nothing to check here");
  } else {
    cr_expect_eq(count(log, "NET/IB : not available"), 1, "log:\n%s", log);
    cr_expect(strstr(log, "WARN") == NULL, "log:\n%s", log);
  }
  free(log);
}
