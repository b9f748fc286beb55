/*
 * test_trainer_data.c — the trainer's data sources: generated additions
 * are correct, deterministic and never show a held-out problem in
 * training; text files come back as bytes; llm.c token files are read
 * through their header, and bad ones are refused with a reason.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data.h"

static data_t *open_ok(const char *path, int digits) {
  char err[256] = "";
  data_t *d = data_open(path, digits, 5, err, sizeof(err));
  cr_assert_not_null(d, "data_open(%s): %s", path ? path : "(task)", err);
  return d;
}

// Parses "a+b=c" problems out of a token sequence and checks every complete one.
static int check_sums(const int *tok, int n) {
  int checked = 0, i = 0;
  while (i < n && tok[i] != ADD_NEWLINE) i++;  // sequences start at a newline
  cr_assert_eq(i, 0, "a sequence starts at a problem boundary");
  for (;;) {
    long v[3] = {0, 0, 0};
    int field = 0, j = i + 1, complete = 0;
    for (; j < n; j++) {
      int t = tok[j];
      if (t <= 9) v[field] = 10 * v[field] + t;
      else if (t == ADD_PLUS && field == 0) field = 1;
      else if (t == ADD_EQUALS && field == 1) field = 2;
      else if (t == ADD_NEWLINE && field == 2) { complete = 1; break; }
      else cr_assert_fail("token %d at %d is out of place", t, j);
    }
    if (!complete) return checked;
    cr_expect_eq(v[0] + v[1], v[2], "%ld+%ld=%ld", v[0], v[1], v[2]);
    checked++;
    i = j;
  }
}

Test(trainer_data, additions_are_right_and_deterministic, .timeout = 10) {
  data_t *d = open_ok(NULL, 3);
  cr_expect_eq(data_vocab(d), ADD_VOCAB);
  int a[65], b[65], total = 0;
  for (long s = 0; s < 50; s++) {
    data_sequence(d, DATA_TRAIN, s, 64, a);
    data_sequence(d, DATA_TRAIN, s, 64, b);
    cr_expect_eq(memcmp(a, b, sizeof(a)), 0, "sequence %ld differs between calls", s);
    total += check_sums(a, 65);
  }
  cr_expect_gt(total, 150);
  int p[32], n = data_add_prompt(123, 456, p);
  int want[] = {ADD_NEWLINE, 1, 2, 3, ADD_PLUS, 4, 5, 6, ADD_EQUALS};
  cr_expect_eq(n, 9);
  cr_expect_eq(memcmp(p, want, sizeof(want)), 0);
  n = data_add_answer(999, 1, p);
  cr_expect(n == 5 && p[0] == 1 && p[3] == 0 && p[4] == ADD_NEWLINE);
  data_close(d);
}

Test(trainer_data, held_out_problems_never_train, .timeout = 10) {
  data_t *d = open_ok(NULL, 2);
  static char held[100][100];
  for (long i = 0; i < 5000; i++) {
    long a, b;
    data_add_problem(d, DATA_VAL, i, &a, &b);
    cr_assert(a >= 0 && a < 100 && b >= 0 && b < 100);
    held[a][b] = 1;
  }
  int distinct = 0;
  for (int a = 0; a < 100; a++)
    for (int b = 0; b < 100; b++) distinct += held[a][b];
  cr_expect(distinct > 500 && distinct < 1500, "about 10%% of pairs are held out: %d", distinct);
  for (long i = 0; i < 20000; i++) {
    long a, b;
    data_add_problem(d, DATA_TRAIN, i, &a, &b);
    cr_expect(!held[a][b], "training problem %ld+%ld is held out", a, b);
  }
  data_close(d);
}

static void write_file(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(data, 1, len, f), len);
  fclose(f);
}

Test(trainer_data, text_file_is_bytes, .timeout = 10) {
  char path[] = "/tmp/weft-train-text-XXXXXX";
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  close(fd);
  const char *text = "the quick brown fox jumps over the lazy dog, again and again and again.";
  write_file(path, text, strlen(text));
  data_t *d = open_ok(path, 3);
  cr_expect_eq(data_vocab(d), 256);
  long train = data_split_tokens(d, DATA_TRAIN);
  cr_expect_eq(train + data_split_tokens(d, DATA_VAL), (long)strlen(text));
  int tok[9];
  for (long s = 0; s < 20; s++) {
    data_sequence(d, DATA_TRAIN, s, 8, tok);
    char piece[10];
    for (int i = 0; i < 9; i++) piece[i] = (char)tok[i];
    piece[9] = '\0';
    cr_expect_not_null(strstr(text, piece), "\"%s\" is not a piece of the text", piece);
  }
  data_close(d);
  unlink(path);
}

Test(trainer_data, llmc_token_file, .timeout = 10) {
  char path[] = "/tmp/weft-train-tokens-XXXXXX.bin";
  int fd = mkstemps(path, 4);
  cr_assert(fd >= 0);
  close(fd);
  enum { N = 100 };
  struct {
    int32_t header[LLMC_HEADER_INTS];
    uint16_t tokens[N];
  } file = {{LLMC_MAGIC, LLMC_VERSION, N}, {0}};
  for (int i = 0; i < N; i++) file.tokens[i] = (uint16_t)(1000 + i);
  write_file(path, &file, sizeof(file));
  data_t *d = open_ok(path, 3);
  cr_expect_eq(data_vocab(d), GPT2_VOCAB);
  cr_expect_eq(data_split_tokens(d, DATA_TRAIN), 90);
  int tok[6];
  data_sequence(d, DATA_VAL, 3, 5, tok);
  for (int i = 0; i < 6; i++) cr_expect(tok[i] >= 1090 && tok[i] < 1100, "validation token %d", tok[i]);
  data_close(d);
  char err[256];
  file.header[0] = 12345;  // wrong magic in a .bin file
  write_file(path, &file, sizeof(file));
  cr_expect_null(data_open(path, 3, 5, err, sizeof(err)));
  cr_expect_not_null(strstr(err, "magic"), "%s", err);
  file.header[0] = LLMC_MAGIC, file.header[1] = 7;  // unknown version
  write_file(path, &file, sizeof(file));
  cr_expect_null(data_open(path, 3, 5, err, sizeof(err)));
  cr_expect_not_null(strstr(err, "version"), "%s", err);
  file.header[1] = LLMC_VERSION, file.header[2] = 5000;  // more tokens than the file has
  write_file(path, &file, sizeof(file));
  cr_expect_null(data_open(path, 3, 5, err, sizeof(err)));
  cr_expect_not_null(strstr(err, "holds"), "%s", err);
  unlink(path);
  cr_expect_null(data_open(path, 3, 5, err, sizeof(err)));  // missing file
  cr_expect_not_null(strstr(err, "cannot open"), "%s", err);
  cr_expect_null(data_open(NULL, 12, 5, err, sizeof(err)));  // digits out of range
}
