/*
 * test_trainer_ckpt.c — the checkpoint file (trainer/ckpt.c) on its own:
 * a written file reads back bit for bit; a flipped payload byte fails the
 * checksum, a changed version or a short file is refused with a message.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt.h"

static ckpt_header_t header(void) {
  ckpt_header_t h = {{13, 8, 1, 8, 2, 16, 0, 0, 0, 0, 0}, 7, 1337, 7, 32, 0};
  h.nparams = gpt_full_count(&h.dims);
  return h;
}

static void fill(float *x, size_t n, float base) {
  for (size_t i = 0; i < n; i++)
    x[i] = base + (float)i * 1e-3f;
}

static void patch(const char *path, long offset, unsigned char byte) {
  FILE *f = fopen(path, "r+b");
  cr_assert_not_null(f);
  cr_assert_eq(fseek(f, offset, SEEK_SET), 0);
  cr_assert_eq(fwrite(&byte, 1, 1, f), 1);
  fclose(f);
}

Test(trainer_ckpt_file, round_trip_and_corruption, .timeout = 10) {
  char path[] = "/tmp/weft-ckpt-unit-XXXXXX";
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  close(fd);
  ckpt_header_t h = header(), r;
  size_t n = h.nparams;
  float *a = malloc(6 * n * sizeof(float)), *b = a + 3 * n;
  cr_assert_not_null(a);
  fill(a, n, 1.0f), fill(a + n, n, -2.0f), fill(a + 2 * n, n, 3.0f);
  char err[512];
  cr_assert_eq(ckpt_write(path, &h, a, a + n, a + 2 * n, err, sizeof(err)), 0,
               "%s", err);
  cr_assert_eq(ckpt_read(path, &r, b, b + n, b + 2 * n, err, sizeof(err)), 0,
               "%s", err);
  cr_expect_eq(memcmp(a, b, 3 * n * sizeof(float)), 0);
  cr_expect(r.step == 7 && r.seed == 1337 && r.adam_steps == 7 &&
            r.global_batch == 32 && r.nparams == n);
  cr_expect_eq(memcmp(&r.dims, &h.dims, sizeof(h.dims)), 0);

  patch(path, CKPT_HEADER_BYTES + 5, 0x55); // payload
  cr_expect_neq(ckpt_read(path, &r, b, b + n, b + 2 * n, err, sizeof(err)), 0);
  cr_expect_not_null(strstr(err, "checksum"), "%s", err);

  patch(path, 8, 9); // version
  cr_expect_neq(ckpt_read_header(path, &r, err, sizeof(err)), 0);
  cr_expect_not_null(strstr(err, "version"), "%s", err);

  cr_assert_eq(ckpt_write(path, &h, a, a + n, a + 2 * n, err, sizeof(err)), 0,
               "%s", err);
  cr_assert_eq(truncate(path, CKPT_HEADER_BYTES + 12), 0);
  cr_expect_neq(ckpt_read_header(path, &r, err, sizeof(err)), 0);
  cr_expect_not_null(strstr(err, "truncated"), "%s", err);

  cr_expect_neq(ckpt_write("/nonexistent/dir/ck", &h, a, a + n, a + 2 * n, err,
                           sizeof(err)),
                0);
  free(a);
  unlink(path);
}
