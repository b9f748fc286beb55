/*
 * ckpt.c — reading and writing weft-train checkpoint files (see ckpt.h).
 * Plain stdio; every failure (missing file, wrong magic or version, a
 * size that does not match the header, a bad checksum, a full disk) is a
 * message, never a crash. Assumes a little-endian host, as the rest of
 * weft's file formats do.
 */
#include "ckpt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char MAGIC[8] = {'W', 'E', 'F', 'T', 'C', 'K', 'P', 'T'};

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}
static const uint64_t fnv_basis = 0xcbf29ce484222325ull;

static void encode(const ckpt_header_t *h, unsigned char *buf) {
  memset(buf, 0, CKPT_HEADER_BYTES);
  uint32_t v32[2] = {CKPT_VERSION, CKPT_HEADER_BYTES};
  int32_t dims[6] = {h->dims.vocab,  h->dims.seq,   h->dims.layers,
                     h->dims.hidden, h->dims.heads, h->dims.ffn};
  int64_t v64[5] = {h->step, (int64_t)h->seed, h->adam_steps, h->global_batch,
                    (int64_t)h->nparams};
  memcpy(buf, MAGIC, 8);
  memcpy(buf + 8, v32, sizeof(v32));
  memcpy(buf + 16, dims, sizeof(dims));
  memcpy(buf + 40, v64,
         sizeof(v64)); // up to byte 80
  int32_t moe[2] = {h->dims.experts, h->dims.experts > 0 ? h->dims.moe_every : 0};
  memcpy(buf + 80, moe, sizeof(moe)); // a dense model's are zero; 88..95 reserved
}

static int decode(const unsigned char *buf, ckpt_header_t *h, char *err,
                  size_t errlen) {
  uint32_t v32[2];
  int32_t dims[6];
  int64_t v64[5];
  int32_t moe[2];
  if (memcmp(buf, MAGIC, 8) != 0)
    return snprintf(err, errlen, "not a weft-train checkpoint (bad magic)"), -1;
  memcpy(v32, buf + 8, sizeof(v32));
  memcpy(dims, buf + 16, sizeof(dims));
  memcpy(v64, buf + 40, sizeof(v64));
  memcpy(moe, buf + 80, sizeof(moe));
  if (v32[0] != CKPT_VERSION || v32[1] != CKPT_HEADER_BYTES)
    return snprintf(err, errlen,
                    "checkpoint version %u (header %u bytes); this weft-train "
                    "reads version %d",
                    v32[0], v32[1], CKPT_VERSION),
           -1;
  h->dims = (gpt_dims_t){dims[0], dims[1], dims[2], dims[3], dims[4], dims[5],
                         moe[0],  0,       moe[1],  0.0f,    0.0f};
  h->step = v64[0], h->seed = (uint64_t)v64[1], h->adam_steps = v64[2],
  h->global_batch = v64[3];
  h->nparams = (uint64_t)v64[4];
  const gpt_dims_t *d = &h->dims;
  if (d->vocab < 2 || d->seq < 1 || d->layers < 1 || d->hidden < 1 ||
      d->heads < 1 || d->ffn < 1 || d->experts < 0 ||
      (d->experts > 0 && d->moe_every < 1) || h->step < 0 || h->adam_steps < 0 ||
      h->global_batch < 1 || h->nparams != gpt_full_count(d))
    return snprintf(err, errlen,
                    "corrupt checkpoint header (model shape and parameter "
                    "count disagree)"),
           -1;
  return 0;
}

static int open_checked(const char *path, ckpt_header_t *h, FILE **out,
                        char *err, size_t errlen) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return snprintf(err, errlen, "%s: %s", path, strerror(errno)), -1;
  unsigned char buf[CKPT_HEADER_BYTES];
  char why[256];
  if (fread(buf, 1, sizeof(buf), f) != sizeof(buf)) {
    fclose(f);
    return snprintf(err, errlen,
                    "%s: truncated checkpoint (no complete header)", path),
           -1;
  }
  if (decode(buf, h, why, sizeof(why)) != 0) {
    fclose(f);
    return snprintf(err, errlen, "%s: %s", path, why), -1;
  }
  long want = CKPT_HEADER_BYTES + 3 * (long)h->nparams * 4 + 8, size = -1;
  if (fseek(f, 0, SEEK_END) == 0)
    size = ftell(f);
  if (size != want || fseek(f, CKPT_HEADER_BYTES, SEEK_SET) != 0) {
    fclose(f);
    return snprintf(err, errlen,
                    "%s: %ld bytes, but a checkpoint of %llu parameters has "
                    "%ld (truncated?)",
                    path, size, (unsigned long long)h->nparams, want),
           -1;
  }
  *out = f;
  return 0;
}

int ckpt_read_header(const char *path, ckpt_header_t *h, char *err,
                     size_t errlen) {
  FILE *f;
  if (open_checked(path, h, &f, err, errlen) != 0)
    return -1;
  fclose(f);
  return 0;
}

int ckpt_read(const char *path, ckpt_header_t *h, float *params, float *m,
              float *v, char *err, size_t errlen) {
  FILE *f;
  if (open_checked(path, h, &f, err, errlen) != 0)
    return -1;
  float *parts[3] = {params, m, v};
  uint64_t sum = fnv_basis, stored = 0;
  int ok = 1;
  for (int k = 0; k < 3 && ok; k++) {
    ok = fread(parts[k], sizeof(float), h->nparams, f) == h->nparams;
    if (ok)
      sum = fnv(sum, parts[k], h->nparams * sizeof(float));
  }
  ok = ok && fread(&stored, sizeof(stored), 1, f) == 1;
  fclose(f);
  if (!ok)
    return snprintf(err, errlen, "%s: read error", path), -1;
  if (stored != sum)
    return snprintf(err, errlen, "%s: checksum mismatch (the file is corrupt)",
                    path),
           -1;
  return 0;
}

int ckpt_write(const char *path, const ckpt_header_t *h, const float *params,
               const float *m, const float *v, char *err, size_t errlen) {
  size_t len = strlen(path) + 32;
  char *tmp = malloc(len);
  if (tmp == NULL)
    return snprintf(err, errlen, "out of memory"), -1;
  snprintf(tmp, len, "%s.tmp.%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  if (f == NULL) {
    snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
    free(tmp);
    return -1;
  }
  unsigned char buf[CKPT_HEADER_BYTES];
  encode(h, buf);
  int ok = fwrite(buf, 1, sizeof(buf), f) == sizeof(buf);
  const float *parts[3] = {params, m, v};
  uint64_t sum = fnv_basis;
  for (int k = 0; k < 3 && ok; k++) {
    ok = fwrite(parts[k], sizeof(float), h->nparams, f) == h->nparams;
    sum = fnv(sum, parts[k], h->nparams * sizeof(float));
  }
  ok = ok && fwrite(&sum, sizeof(sum), 1, f) == 1;
  ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
  int saved = errno;
  ok = (fclose(f) == 0) && ok;
  if (ok && rename(tmp, path) != 0)
    ok = 0, saved = errno;
  if (!ok) {
    snprintf(err, errlen, "writing %s: %s", path,
             strerror(saved ? saved : EIO));
    unlink(tmp);
  }
  free(tmp);
  return ok ? 0 : -1;
}
