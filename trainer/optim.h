/*
 * optim.h — the optimiser's schedule and clipping. AdamW itself runs in
 * the data-parallel engine (parallel/dp.h, weft_dp_step) on the shard each
 * rank owns; the trainer supplies the learning rate of every step and the
 * factor that clips the global gradient norm.
 */
#ifndef WEFT_TRAINER_OPTIM_H
#define WEFT_TRAINER_OPTIM_H

typedef struct {
  float lr, min_lr;  // peak and final learning rate
  int warmup, steps; // linear warm-up steps, total steps
} lr_schedule_t;

// Learning rate at step (0-based): lr·(step+1)/warmup during warm-up, then
// a cosine from lr down to min_lr at the last step.
float lr_at(const lr_schedule_t *s, int step);

// The factor that scales a gradient of norm `norm` to at most max_norm
// (1 when it is already within, or when max_norm <= 0: no clipping).
float clip_factor(double norm, float max_norm);

#endif  // WEFT_TRAINER_OPTIM_H
