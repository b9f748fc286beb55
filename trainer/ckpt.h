/*
 * ckpt.h — weft-train's checkpoint file: everything a run needs to go on
 * exactly where it stopped, in a form independent of the parallel layout.
 *
 *   header (little-endian, 96 bytes): magic "WEFTCKPT", version, header
 *     bytes, the model's dims (vocab seq layers hidden heads ffn), steps
 *     done, data seed, AdamW steps, global batch (sequences per step),
 *     parameter count Ψ, then experts and MoE block frequency (zero for a
 *     dense model, as files from before MoE have them)
 *   payload: Ψ fp32 parameters, Ψ fp32 Adam m, Ψ fp32 Adam v, all of the
 *     unsharded model (layers one after another, as gpt_init_full; every
 *     expert of every MoE block last)
 *   trailer: FNV-1a 64 of the payload
 *
 * The data position is a pure function of (seed, step, global batch), so
 * these three restore it; the model was initialised from the seed only.
 */
#ifndef WEFT_TRAINER_CKPT_H
#define WEFT_TRAINER_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

enum { CKPT_VERSION = 1, CKPT_HEADER_BYTES = 96 };

typedef struct {
  gpt_dims_t dims;
  int64_t step; // steps done
  uint64_t seed;
  int64_t adam_steps;   // the optimizer's step counter (bias correction)
  int64_t global_batch; // sequences per step
  uint64_t nparams;     // Ψ
} ckpt_header_t;

// Reads and checks the header and the file's size. 0, or -1 with why in err.
int ckpt_read_header(const char *path, ckpt_header_t *h, char *err,
                     size_t errlen);
// Reads the whole file (header checked again, checksum verified) into
// params, m, v (h->nparams floats each). 0, or -1 with why in err.
int ckpt_read(const char *path, ckpt_header_t *h, float *params, float *m,
              float *v, char *err, size_t errlen);
// Writes atomically: a temporary file beside `path`, flushed, then renamed.
int ckpt_write(const char *path, const ckpt_header_t *h, const float *params,
               const float *m, const float *v, char *err, size_t errlen);

#endif // WEFT_TRAINER_CKPT_H
