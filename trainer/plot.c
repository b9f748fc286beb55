/*
 * plot.c — the loss curve (see plot.h): a short gnuplot script fed through
 * a pipe. Training loss by step on the left axis, validation loss as
 * points, exact-match accuracy (%) on the right axis.
 */
#include "plot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

// gnuplot takes strings in single quotes; refuse paths that would break out of
// them.
static int quotable(const char *s) {
  return strchr(s, '\'') == NULL && strchr(s, '\n') == NULL;
}

int plot_loss(const char *csv, const char *png, int has_val, int has_accuracy) {
  if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
    printf("note: gnuplot is not installed, so no %s (Debian: apt-get install "
           "gnuplot-nox)\n",
           png);
    return 1;
  }
  if (!quotable(csv) || !quotable(png)) {
    fprintf(stderr,
            "weft-train: --plot %s: a path with a quote or newline cannot be "
            "plotted\n",
            png);
    return -1;
  }
  FILE *g = popen("gnuplot 2>&1", "w");
  if (g == NULL) {
    perror("weft-train: gnuplot");
    return -1;
  }
  fprintf(g,
          "set terminal pngcairo size 960,540 noenhanced\n"
          "set output '%s'\n"
          "set datafile separator ','\n"
          "set key autotitle columnhead top right\n"
          "set title 'weft-train'\nset xlabel 'step'\nset ylabel 'loss'\nset "
          "grid\n",
          png);
  if (has_accuracy)
    fprintf(g, "set y2label 'accuracy (%%)'\nset y2tics\nset ytics "
               "nomirror\nset y2range [0:100]\n");
  fprintf(g,
          "plot '%s' using 1:($2 == $2 ? $2 : NaN) with lines lw 2 title "
          "'train loss'",
          csv);
  if (has_val)
    fprintf(g, ", '' using 1:7 with linespoints pt 7 title 'validation loss'");
  if (has_accuracy)
    fprintf(g, ", '' using 1:(100*$8) axes x1y2 with linespoints pt 5 title "
               "'accuracy'");
  fprintf(g, "\n");
  int status = pclose(g);
  if (status != 0) {
    fprintf(stderr, "weft-train: gnuplot failed (status %d) drawing %s\n",
            status, png);
    return -1;
  }
  printf("loss curve: %s\n", png);
  return 0;
}
