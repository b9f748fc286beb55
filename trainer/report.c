/*
 * report.c — progress bar / plain progress lines, CSV log, and the GEMM
 * rate measurement behind the MFU estimate (see report.h). MFU here is
 * model FLOPs per second (6 per parameter per token, plus attention) over
 * what OpenBLAS sgemm reaches on the same ranks: an honest CPU estimate,
 * not a datasheet peak.
 */
#include "report.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "prog_util.h"

// The best of ten 20 ms windows: other work on the machine at start-up
// lowers the average but rarely every window, and erring high keeps the
// MFU figure conservative.
double report_measure_peak(void) {
  enum { N = 256, WINDOWS = 10 };
  float *a = calloc(3 * (size_t)N * N, sizeof(float));
  if (a == NULL) return 0;
  for (size_t i = 0; i < 2 * (size_t)N * N; i++) a[i] = (float)(i % 7) * 0.1f;
  double best = 0;
  for (int w = 0; w < WINDOWS; w++) {
    double start = weft_prog_now_s(), elapsed = 0;
    long reps = 0;
    while (elapsed < 0.02) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, a, N, a + N * N, N, 0.0f, a + 2 * N * N,
                  N);
      reps++;
      elapsed = weft_prog_now_s() - start;
    }
    double rate = 2.0 * N * N * N * (double)reps / elapsed;
    best = rate > best ? rate : best;
  }
  free(a);
  return best;
}

int report_open(report_t *r, const char *csv_path, int steps, int print_every, double tokens_per_step,
                double flops_per_step, double peak_flops) {
  memset(r, 0, sizeof(*r));
  r->steps = steps;
  r->print_every = print_every > 0 ? print_every : 1;
  r->tty = isatty(STDOUT_FILENO);
  r->tokens_per_step = tokens_per_step;
  r->flops_per_step = flops_per_step;
  r->peak_flops = peak_flops;
  r->started = weft_prog_now_s();
  if (csv_path == NULL) return 0;
  if ((r->csv = fopen(csv_path, "w")) == NULL) {
    perror(csv_path);
    return -1;
  }
  fprintf(r->csv, "step,loss,lr,grad_norm,tokens_per_s,mfu,val_loss,val_accuracy,elapsed_s\n");
  return 0;
}

static void format_eta(double s, char *out, size_t len) {
  long t = (long)(s + 0.5);
  if (t >= 3600) snprintf(out, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  else snprintf(out, len, "%ld:%02ld", t / 60, t % 60);
}

void report_step(report_t *r, int step, const step_result_t *s) {
  r->train_seconds += s->seconds;
  double tps = r->tokens_per_step / s->seconds, mfu = r->peak_flops > 0 ? r->flops_per_step / s->seconds / r->peak_flops : 0;
  double avg = r->train_seconds / (step + 1 - r->first);
  char eta[32];
  format_eta(avg * (r->steps - step - 1), eta, sizeof(eta));
  if (r->csv != NULL)
    fprintf(r->csv, "%d,%.9g,%.9g,%.9g,%.1f,%.4f,,,%.3f\n", step + 1, s->loss, s->lr, s->grad_norm, tps, mfu,
            weft_prog_now_s() - r->started);
  int last = step + 1 == r->steps;
  if (r->tty) {
    enum { WIDTH = 24 };
    int fill = (int)((double)(step + 1) / r->steps * WIDTH);
    char bar[WIDTH + 1];
    for (int i = 0; i < WIDTH; i++) bar[i] = i < fill ? '#' : '.';
    bar[WIDTH] = '\0';
    printf("\r[%s] step %d/%d  loss %.4f  %.0f tok/s  MFU %.1f%%  ETA %s \033[K", bar, step + 1, r->steps, s->loss,
           tps, 100 * mfu, eta);
    if (last) printf("\n");
  } else if ((step + 1) % r->print_every == 0 || step == 0 || last) {
    printf("step %5d/%d  loss %.4f  lr %.2e  norm %.3f  %.0f tok/s  MFU %.1f%%  ETA %s", step + 1, r->steps,
           s->loss, s->lr, s->grad_norm, tps, 100 * mfu, eta);
    if (s->aux_loss >= 0) printf("  aux %.4f", s->aux_loss);  // MoE load balancing
    printf("\n");
  }
  fflush(stdout);
}

void report_eval(report_t *r, int step, const eval_result_t *e) {
  if (r->tty) printf("\r\033[K");
  printf("eval after step %d: val loss %.4f", step, e->val_loss);
  if (e->accuracy >= 0) printf("  accuracy %.1f%% (%d held-out problems)", 100 * e->accuracy, e->problems);
  printf("\n");
  fflush(stdout);
  if (r->csv != NULL) {
    fprintf(r->csv, "%d,,,,,,%.6f,", step, e->val_loss);
    if (e->accuracy >= 0) fprintf(r->csv, "%.4f", e->accuracy);
    fprintf(r->csv, ",%.3f\n", weft_prog_now_s() - r->started);
  }
}

void report_close(report_t *r) {
  if (r->csv != NULL) fclose(r->csv);
  r->csv = NULL;
}
