/*
 * test_tune_file.c — the tuning file weft-calibrate writes is what the cost
 * model prices with: measured lines replace the defaults, bad lines are
 * ignored, missing kinds keep their defaults.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tune_file.h"

Test(tune_file, measured_lines_replace_defaults_and_bad_lines_are_ignored, .timeout = 10) {
  char path[] = "/tmp/weft-tune-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  FILE *f = fdopen(fd, "w");
  cr_assert_not_null(f);
  fprintf(f, "# a comment\n\nintra 0.5 7.25\nbogus 1 2\ninter -3 1.0\ninter nan 2\n");
  fclose(f);
  setenv("WEFT_TUNE_FILE", path, 1);
  const weft_links_t *l = weft_links();
  weft_links_t def = WEFT_LINKS_DEFAULT;
  cr_expect_eq(l->intra.measured, 1);
  cr_expect_float_eq(l->intra.alpha, 0.5e-6, 1e-12);
  cr_expect_float_eq(l->intra.bandwidth, 7.25e9, 1);
  // Both "inter" lines are invalid: the default stands.
  cr_expect_eq(l->inter.measured, 0);
  cr_expect_float_eq(l->inter.alpha, def.inter.alpha, 1e-12);
  cr_expect_float_eq(l->inter.bandwidth, def.inter.bandwidth, 1);
  unlink(path);
}
