/*
 * report.h — what a user sees of a run (rank 0 only): a progress bar with
 * step, loss, tokens/s, MFU and ETA on a terminal, plain lines otherwise;
 * a CSV log of every step and evaluation; the final summary.
 */
#ifndef WEFT_TRAINER_REPORT_H
#define WEFT_TRAINER_REPORT_H

#include <stdio.h>

#include "train.h"

typedef struct {
  int steps, print_every, tty;
  int first;  // the first step this process runs (> 0 after --resume)
  double tokens_per_step, flops_per_step, peak_flops;  // peak: of all ranks together
  double started, train_seconds;
  FILE *csv;
} report_t;

// Opens the CSV (path NULL: none); returns 0 or -1 with a message on stderr.
int report_open(report_t *r, const char *csv_path, int steps, int print_every, double tokens_per_step,
                double flops_per_step, double peak_flops);
void report_step(report_t *r, int step, const step_result_t *s);
void report_eval(report_t *r, int step, const eval_result_t *e);
void report_close(report_t *r);

// Measured single-precision GEMM rate of this process (FLOP/s; the best of
// ten short windows), the denominator of the MFU estimate.
double report_measure_peak(void);

#endif  // WEFT_TRAINER_REPORT_H
