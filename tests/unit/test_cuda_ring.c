/*
 * test_cuda_ring.c — the staging ring of a CUDA stream bridge
 * (src/cuda/cuda_ring.c): regions handed out in order, taken back in order as the
 * stream's `freed` counter passes their batches, wrapping around the block;
 * WAIT only when the stream will free room, NEVER when it cannot (too big,
 * or the room is held by a batch not queued yet); regions given back
 * unqueued; batch numbers that wrap around 2^32.
 */
#include <criterion/criterion.h>

#include "cuda_ring.h"

static size_t take_ok(weft_ring_t *r, size_t need, int *slot) {
  size_t off = 0;
  cr_assert_eq(weft_ring_take(r, need, &off, slot), WEFT_RING_OK, "take %zu failed", need);
  return off;
}

Test(cuda_ring, regions_follow_each_other_and_wrap) {
  weft_ring_t r;
  weft_ring_init(&r, 1024);
  int s[8];
  cr_expect_eq(take_ok(&r, 300, &s[0]), 0);    // [0, 320)
  cr_expect_eq(take_ok(&r, 300, &s[1]), 320);  // [320, 640)
  cr_expect_eq(take_ok(&r, 300, &s[2]), 640);  // [640, 960)
  for (int i = 0; i < 3; i++) weft_ring_set_k(&r, s[i], (uint32_t)(i + 1));
  size_t off;
  int slot;
  cr_expect_eq(weft_ring_take(&r, 100, &off, &slot), WEFT_RING_WAIT, "64 bytes left at the end, none at the start");
  weft_ring_reclaim(&r, 1);  // batch 1 freed: [0, 320) is free again
  cr_expect_eq(weft_ring_busy(&r), 2);
  cr_expect_eq(take_ok(&r, 100, &s[3]), 0, "wraps to the start");             // [0, 128)
  cr_expect_eq(weft_ring_take(&r, 200, &off, &slot), WEFT_RING_WAIT, "192 bytes up to batch 2's region");
  cr_expect_eq(take_ok(&r, 150, &s[4]), 128, "then follows on up to the oldest");  // [128, 320)
  cr_expect_eq(weft_ring_take(&r, 64, &off, &slot), WEFT_RING_WAIT, "full; batch 2 is queued and will be freed");
}

Test(cuda_ring, wait_only_when_the_stream_will_free_room) {
  weft_ring_t r;
  weft_ring_init(&r, 1024);
  int a, b;
  size_t off;
  int slot;
  take_ok(&r, 600, &a);
  cr_expect_eq(weft_ring_take(&r, 600, &off, &slot), WEFT_RING_NEVER, "the room is held by an unqueued region");
  weft_ring_set_k(&r, a, 7);
  cr_expect_eq(weft_ring_take(&r, 600, &off, &slot), WEFT_RING_WAIT, "batch 7 will be freed");
  cr_expect_eq(weft_ring_take(&r, 2048, &off, &slot), WEFT_RING_NEVER, "larger than the ring");
  weft_ring_reclaim(&r, 6);
  cr_expect_eq(weft_ring_busy(&r), 1, "batch 7 is not freed by freed = 6");
  weft_ring_reclaim(&r, 7);
  cr_expect_eq(weft_ring_busy(&r), 0);
  cr_expect_eq(take_ok(&r, 1024, &b), 0, "an empty ring starts over at 0");
}

Test(cuda_ring, regions_given_back_unqueued) {
  weft_ring_t r;
  weft_ring_init(&r, 1024);
  int a, b, c;
  take_ok(&r, 100, &a);
  take_ok(&r, 100, &b);
  weft_ring_drop(&r, b);  // the newest: as if never taken
  cr_expect_eq(take_ok(&r, 100, &c), 128, "the dropped newest region is reused at once");
  weft_ring_set_k(&r, c, 2);
  weft_ring_drop(&r, a);  // not the newest: reclaimed in its turn
  weft_ring_reclaim(&r, 1);
  cr_expect_eq(weft_ring_busy(&r), 1, "the dropped oldest region goes, batch 2 stays");
  weft_ring_reclaim(&r, 2);
  cr_expect_eq(weft_ring_busy(&r), 0);
}

Test(cuda_ring, batch_numbers_wrap_around) {
  weft_ring_t r;
  weft_ring_init(&r, 1 << 20);
  int s[3];
  uint32_t k0 = UINT32_MAX - 1;
  for (int i = 0; i < 3; i++) {
    take_ok(&r, 1000, &s[i]);
    uint32_t k = k0 + (uint32_t)i;
    weft_ring_set_k(&r, s[i], k == 0 ? 1 : k);  // 0 never names a batch
  }
  weft_ring_reclaim(&r, UINT32_MAX);
  cr_expect_eq(weft_ring_busy(&r), 1, "UINT32_MAX-1 and UINT32_MAX freed, the one past the wrap not");
  weft_ring_reclaim(&r, 1);
  cr_expect_eq(weft_ring_busy(&r), 0);
}

Test(cuda_ring, at_most_WEFT_RING_USES_regions) {
  weft_ring_t r;
  weft_ring_init(&r, 1 << 20);
  int slot;
  size_t off;
  for (int i = 0; i < WEFT_RING_USES; i++) {
    take_ok(&r, 64, &slot);
    weft_ring_set_k(&r, slot, (uint32_t)(i + 1));
  }
  cr_expect_eq(weft_ring_take(&r, 64, &off, &slot), WEFT_RING_WAIT, "all slots used by queued batches");
  weft_ring_reclaim(&r, 1);
  cr_expect_eq(weft_ring_take(&r, 64, &off, &slot), WEFT_RING_OK);
}
