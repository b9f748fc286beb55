/*
 * optim.c — learning-rate schedule (linear warm-up, cosine decay) and the
 * gradient-clipping factor (see optim.h).
 */
#include "optim.h"

#include <math.h>

float lr_at(const lr_schedule_t *s, int step) {
  if (step < s->warmup) return s->lr * (float)(step + 1) / (float)s->warmup;
  int decay = s->steps - s->warmup;
  if (decay <= 1) return s->lr;
  double progress = (double)(step - s->warmup) / (double)(decay - 1);
  if (progress > 1.0) progress = 1.0;
  double cosine = 0.5 * (1.0 + cos(3.14159265358979323846 * progress));
  return (float)(s->min_lr + (s->lr - s->min_lr) * cosine);
}

float clip_factor(double norm, float max_norm) {
  if (max_norm <= 0.0f || !(norm > max_norm)) return 1.0f;
  return (float)(max_norm / norm);
}
