/*
 * weft_calibrate.c — measure the links the tuner prices schedules with.
 *
 *   weftrun -n 2 build/bin/weft-calibrate [-o FILE] [--link intra|inter] [-n ITERS]
 *
 * Two ranks bounce messages of 8 B .. 4 MiB off each other (ncclSend and
 * ncclRecv in a group, the NULL stream), take the median round trip per
 * size, and fit one-way time t(s) = alpha + s / bandwidth by least squares
 * (weights 1/t, so small and large sizes count alike). Rank 0 prints the
 * fit and, with -o, writes it to the tuning file the library reads
 * (WEFT_TUNE_FILE): one line "link alpha_us bandwidth_GBps" per link kind,
 * replacing an older line for the same kind and keeping the others.
 *
 * Which link is measured is the caller's choice: two ranks of one host
 * measure shared memory ("intra", the default); two ranks on two hosts (or
 * with NCCL_SHM_DISABLE=1) measure the network ("inter"). The measurement
 * is an ordinary job: run it when the machine is quiet.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl.h"
#include "weft.h"
#include "prog_util.h"

#define MAX_SIZES 32

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int check(ncclResult_t r, const char *what) {
  if (r == ncclSuccess) return 0;
  fprintf(stderr, "weft-calibrate: %s failed: %s\n", what, ncclGetErrorString(r));
  return 1;
}

// One round trip of `bytes` between ranks 0 and 1.
static int bounce(ncclComm_t comm, int rank, char *buf, size_t bytes) {
  int peer = 1 - rank;
  if (rank == 0) {
    if (check(ncclSend(buf, bytes, ncclUint8, peer, comm, NULL), "ncclSend")) return 1;
    return check(ncclRecv(buf, bytes, ncclUint8, peer, comm, NULL), "ncclRecv");
  }
  if (check(ncclRecv(buf, bytes, ncclUint8, peer, comm, NULL), "ncclRecv")) return 1;
  return check(ncclSend(buf, bytes, ncclUint8, peer, comm, NULL), "ncclSend");
}

// Weighted least squares of t = alpha + s * inv_bw over the points.
static void fit(const double *s, const double *t, int n, double *alpha, double *inv_bw) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (int i = 0; i < n; i++) {
    double w = 1.0 / (t[i] * t[i]);  // relative error
    sw += w, sx += w * s[i], sy += w * t[i], sxx += w * s[i] * s[i], sxy += w * s[i] * t[i];
  }
  double det = sw * sxx - sx * sx;
  *inv_bw = det > 0 ? (sw * sxy - sx * sy) / det : 0;
  *alpha = (sy - *inv_bw * sx) / sw;
  if (*alpha < 0) *alpha = 0;
}

// Replace (or add) the line for `link` in `path`, keeping the other lines.
static int write_line(const char *path, const char *link, double alpha_us, double gbps) {
  char lines[16][256];
  int n = 0;
  FILE *f = fopen(path, "r");
  if (f != NULL) {
    char buf[256], word[64];
    while (n < 16 && fgets(buf, sizeof(buf), f) != NULL)
      if (sscanf(buf, "%63s", word) == 1 && strcmp(word, link) != 0 && word[0] != '#')
        snprintf(lines[n++], sizeof(lines[0]), "%s", buf);
    fclose(f);
  }
  f = fopen(path, "w");
  if (f == NULL) {
    perror(path);
    return 1;
  }
  fprintf(f, "# weft tuning file: link alpha_us bandwidth_GBps (written by weft-calibrate)\n");
  for (int i = 0; i < n; i++) fputs(lines[i], f);
  fprintf(f, "%s %.3f %.3f\n", link, alpha_us, gbps);
  return fclose(f) != 0;
}

int main(int argc, char **argv) {
  const char *out = NULL, *link = "intra";
  int iters = 200;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
    else if (!strcmp(argv[i], "--link") && i + 1 < argc) link = argv[++i];
    else if (!strcmp(argv[i], "-n") && i + 1 < argc) iters = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: weftrun -n 2 weft-calibrate [-o FILE] [--link intra|inter] [-n ITERS]\n");
      return 2;
    }
  }
  if (strcmp(link, "intra") != 0 && strcmp(link, "inter") != 0) {
    fprintf(stderr, "weft-calibrate: --link must be intra or inter, not '%s'\n", link);
    return 2;
  }
  if (iters < 5) iters = 5;
  ncclComm_t comm;
  if (check(weftInitFromEnv(&comm), "weftInitFromEnv")) return 1;
  int rank = 0, n = 0;
  ncclCommUserRank(comm, &rank);
  ncclCommCount(comm, &n);
  if (n != 2) {
    if (rank == 0) fprintf(stderr, "weft-calibrate: needs exactly 2 ranks, got %d\n", n);
    ncclCommDestroy(comm);
    return 2;
  }
  size_t max = (size_t)4 << 20;
  char *buf = calloc(1, max);
  double sizes[MAX_SIZES], times[MAX_SIZES], *samples = calloc((size_t)iters, sizeof(double));
  int npts = 0, fail = buf == NULL || samples == NULL;
  for (size_t s = 8; s <= max && !fail && npts < MAX_SIZES; s *= 4) {
    int reps = s >= ((size_t)1 << 20) ? iters / 10 + 5 : iters;
    for (int w = 0; w < 5 && !fail; w++) fail = bounce(comm, rank, buf, s);
    for (int k = 0; k < reps && !fail; k++) {
      double t0 = weft_prog_now_s();
      fail = bounce(comm, rank, buf, s);
      samples[k] = (weft_prog_now_s() - t0) / 2;  // one way
    }
    if (fail) break;
    qsort(samples, (size_t)reps, sizeof(double), cmp_double);
    sizes[npts] = (double)s;
    times[npts++] = samples[reps / 2];
  }
  int res = fail;
  if (!fail && rank == 0) {
    double alpha, inv_bw;
    fit(sizes, times, npts, &alpha, &inv_bw);
    double gbps = inv_bw > 0 ? 1e-9 / inv_bw : 0;
    printf("# %s link: one-way time per size (median of the round trips / 2)\n", link);
    for (int i = 0; i < npts; i++)
      printf("#   %9.0f B  %10.3f us  (fit %10.3f us)\n", sizes[i], times[i] * 1e6, (alpha + sizes[i] * inv_bw) * 1e6);
    printf("%s alpha_us=%.3f bandwidth_GBps=%.3f\n", link, alpha * 1e6, gbps);
    if (out != NULL && write_line(out, link, alpha * 1e6, gbps) != 0) res = 1;
  }
  free(samples);
  free(buf);
  ncclCommDestroy(comm);
  return res;
}
