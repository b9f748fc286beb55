/*
 * plot.h — the PNG loss curve weft-train draws at the end of a run from
 * its CSV log, with gnuplot (Debian: gnuplot-nox). Without gnuplot the
 * run says so in one line and succeeds.
 */
#ifndef WEFT_TRAINER_PLOT_H
#define WEFT_TRAINER_PLOT_H

// Plots the CSV's training loss, and the validation loss and accuracy when
// has_val / has_accuracy. Returns 0 when the PNG was written, 1 when gnuplot
// is missing (noted on stdout), -1 on an error (message on stderr).
int plot_loss(const char *csv, const char *png, int has_val, int has_accuracy);

#endif // WEFT_TRAINER_PLOT_H
