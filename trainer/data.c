/*
 * data.c — opening a data source and cutting sequences from it. Files are
 * read whole: an llm.c token file (header of 256 int32: magic 20240520,
 * version 1, token count; then that many uint16 GPT-2 tokens) or, for any
 * other file, its bytes as tokens 0..255 (a .bin file must be a token
 * file: a wrong magic there is an error, not text). The first 90% of the tokens are
 * the training split, the rest the validation split; sequence `index`
 * starts at a position hashed from (seed, split, index).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"

static data_t *fail(data_t *d, FILE *f, char *err, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, len, fmt, ap);
  va_end(ap);
  if (f != NULL) fclose(f);
  data_close(d);
  return NULL;
}

// The whole file as llm.c tokens (header checked) or as bytes.
static data_t *read_file(data_t *d, const char *path, char *err, size_t len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return fail(d, NULL, err, len, "cannot open %s: %s", path, strerror(errno));
  if (fseek(f, 0, SEEK_END) != 0) return fail(d, f, err, len, "cannot seek in %s: %s", path, strerror(errno));
  long size = ftell(f);
  rewind(f);
  if (size <= 0) return fail(d, f, err, len, "%s is empty or unreadable", path);
  int32_t header[LLMC_HEADER_INTS] = {0};
  size_t got = fread(header, sizeof(int32_t), LLMC_HEADER_INTS, f);
  if (got == LLMC_HEADER_INTS && header[0] == LLMC_MAGIC) {
    if (header[1] != LLMC_VERSION)
      return fail(d, f, err, len, "%s: llm.c token file version %d, only %d is supported", path, header[1], LLMC_VERSION);
    long count = header[2], body = (size - (long)sizeof(header)) / 2;
    if (count < 1 || count > body)
      return fail(d, f, err, len, "%s: header says %ld tokens, the file holds %ld", path, count, body);
    d->kind = DATA_KIND_TOKENS;
    d->vocab = GPT2_VOCAB;
    d->ntokens = count;
    d->tokens = malloc((size_t)count * sizeof(uint16_t));
    if (d->tokens == NULL || fread(d->tokens, sizeof(uint16_t), (size_t)count, f) != (size_t)count)
      return fail(d, f, err, len, "%s: cannot read %ld tokens", path, count);
    for (long i = 0; i < count; i++)
      if (d->tokens[i] >= GPT2_VOCAB)
        return fail(d, f, err, len, "%s: token %ld is %u, outside the GPT-2 vocabulary", path, i, d->tokens[i]);
  } else if (strlen(path) > 4 && strcmp(path + strlen(path) - 4, ".bin") == 0) {
    return fail(d, f, err, len, "%s: not an llm.c token file (magic %d, expected %d); text is read from other names",
                path, got > 0 ? header[0] : 0, LLMC_MAGIC);
  } else {
    rewind(f);
    d->kind = DATA_KIND_BYTES;
    d->vocab = 256;
    d->ntokens = size;
    d->tokens = malloc((size_t)size * sizeof(uint16_t));
    unsigned char *bytes = malloc((size_t)size);
    if (d->tokens == NULL || bytes == NULL || fread(bytes, 1, (size_t)size, f) != (size_t)size) {
      free(bytes);
      return fail(d, f, err, len, "%s: cannot read %ld bytes", path, size);
    }
    for (long i = 0; i < size; i++) d->tokens[i] = bytes[i];
    free(bytes);
  }
  fclose(f);
  if (d->ntokens < 20) return fail(d, NULL, err, len, "%s: %ld tokens are too few to split", path, d->ntokens);
  snprintf(d->describe, sizeof(d->describe), "%s: %ld %s (vocabulary %d), 90%% train / 10%% validation", path,
           d->ntokens, d->kind == DATA_KIND_TOKENS ? "llm.c GPT-2 tokens" : "bytes", d->vocab);
  return d;
}

data_t *data_open(const char *path, int digits, unsigned long long seed, char *err, size_t len) {
  data_t *d = calloc(1, sizeof(*d));
  if (d == NULL) return fail(NULL, NULL, err, len, "out of memory");
  d->seed = seed;
  if (path != NULL && path[0] != '\0') return read_file(d, path, err, len);
  if (digits < 1 || digits > 9) return fail(d, NULL, err, len, "--digits %d: must be 1..9", digits);
  d->kind = DATA_KIND_ADD;
  d->digits = digits;
  d->vocab = ADD_VOCAB;
  snprintf(d->describe, sizeof(d->describe),
           "generated %d-digit additions (\"a+b=c\"), vocabulary %d, 10%% of pairs held out", digits, d->vocab);
  return d;
}

void data_close(data_t *d) {
  if (d == NULL) return;
  free(d->tokens);
  free(d);
}

int data_vocab(const data_t *d) { return d->vocab; }
const char *data_describe(const data_t *d) { return d->describe; }

long data_split_tokens(const data_t *d, int split) {
  if (d->kind == DATA_KIND_ADD) return -1;
  long train = d->ntokens * 9 / 10;
  return split == DATA_TRAIN ? train : d->ntokens - train;
}

void data_sequence(const data_t *d, int split, long index, int seq, int *tokens) {
  if (d->kind == DATA_KIND_ADD) {
    data_add_sequence(d, split, index, seq, tokens);
    return;
  }
  long first = split == DATA_TRAIN ? 0 : d->ntokens * 9 / 10, n = data_split_tokens(d, split);
  long span = n - (seq + 1) > 0 ? n - (seq + 1) + 1 : 1;
  long start = (long)(data_hash(d->seed, 11 + (unsigned long long)split, (unsigned long long)index, 0) % (unsigned long long)span);
  for (int i = 0; i <= seq; i++) tokens[i] = d->tokens[first + (start + i) % n];  // wraps only in a tiny split
}
