/*
 * dp_internal.h — the data-parallel engine's state, shared by dp.c (life
 * cycle, loading), dp_micro.c (the forward/backward protocol),
 * dp_step.c (AdamW and the parameter gather) and dp_memory.c.
 */
#ifndef WEFT_PAR_DP_INTERNAL_H
#define WEFT_PAR_DP_INTERNAL_H

#include "dp.h"
#include "par_util.h"

// Where each layer sits, for N ranks: computed from the sizes alone.
typedef struct {
  int nlayers, nranks;
  size_t *size;       // n_l
  size_t *shard;      // s_l = ceil(n_l / N)
  size_t *full_off;   // offset of layer l in a full (padded) buffer
  size_t *shard_off;  // offset of layer l's shard in a shard buffer
  size_t *orig_off;   // offset of layer l in the caller's unpadded vector
  size_t psi, psi_padded, shard_total, max_padded;
} weft_dp_layout_t;

ncclResult_t weft_dp_layout_init(weft_dp_layout_t *lay, int nlayers, const size_t *sizes, int nranks);
void weft_dp_layout_free(weft_dp_layout_t *lay);
// Fills the byte counts of `out` for the layout (shared by the model and the engine).
void weft_dp_layout_memory(const weft_dp_layout_t *lay, weft_dp_stage_t stage, weft_dp_precision_t precision,
                           weft_dp_memory_t *out);

// Rejects a stage or precision outside its enum (named in the message).
ncclResult_t weft_dp_check_kind(weft_dp_stage_t stage, weft_dp_precision_t precision);

enum { DP_PARAM_SLOTS = 3, DP_GRAD_SLOTS = 2 };

typedef enum { SLOT_FREE = 0, SLOT_GATHERING, SLOT_GATHERED, SLOT_IN_USE, SLOT_FILLING, SLOT_REDUCING } slot_state_t;

typedef struct {
  void *buf;  // max_padded elements of the parameter type
  int layer;
  slot_state_t state;
} dp_slot_t;

struct weft_dp {
  ncclComm_t comm;
  int rank, nranks;
  weft_dp_stage_t stage;
  weft_dp_precision_t precision;
  weft_dp_average_t average;
  int accum_steps;
  weft_dp_layout_t lay;
  size_t esize;          // bytes per parameter / gradient
  ncclDataType_t dtype;  // their NCCL type
  ncclRedOp_t op;        // ncclAvg or this engine's PreMulSum
  int op_created;
  cudaStream_t stream;   // every collective of this engine runs here, in order
  int micro;             // current micro-batch, -1 before the first
  long steps;            // AdamW steps taken
  float grad_mult;       // weft_dp_scale_grads for the next step (1 otherwise)
  void *params;          // full (DDP, ZeRO-1/2) or shard (ZeRO-3)
  void *grads;           // full (DDP, ZeRO-1) or shard accumulator (ZeRO-2/3)
  float *master;         // mixed precision only: full (DDP) or shard
  float *m, *v;          // Adam moments: full (DDP) or shard
  dp_slot_t pslots[DP_PARAM_SLOTS];  // ZeRO-3 gathered layers
  dp_slot_t gslots[DP_GRAD_SLOTS];   // ZeRO-2/3 gradient buckets
  weft_dp_memory_t mem;              // what was allocated, by category
};

// Waits for every queued collective, then settles the slots: gathers
// become usable, reduced buckets are added into the gradient shard.
ncclResult_t weft_dp_sync(weft_dp_t *dp);

#endif  // WEFT_PAR_DP_INTERNAL_H
