/*
 * test_plan_accuracy.c — the accuracy table of docs/planner.md, row by row:
 * every row's command is run (with --json --top 1) and what weft-plan
 * predicts must be the number the table prints, and the table's error must
 * be the one its published and predicted numbers give. So the table and
 * the code cannot drift apart; the test says nothing about how close the
 * predictions are to the published runs (the table does that, honestly).
 * A row whose prediction is "none" must be refused with the reason it
 * names. Each row belongs to the fit set, the validation set or neither
 * ("outside"); the test holds the calibration to what docs/planner.md
 * states for both sets: a mean |error| of at most 5 % on each, and no row
 * of either beyond 16 %. Run from the source tree (docs/planner.md); the
 * binary is $WEFT_BUILD_DIR/bin/weft-plan.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "plan.h"

#define MAX_CELLS 12
#define SET_MEAN_PCT 5.0
#define ROW_MAX_PCT 16.0

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "cannot open %s (run from the source tree)", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc((size_t)n + 1);
  cr_assert_not_null(text);
  cr_assert_eq(fread(text, 1, (size_t)n, f), (size_t)n);
  text[n] = '\0';
  fclose(f);
  return text;
}

// Runs weft-plan with `args` (stderr dropped); returns stdout, sets *status.
static char *run(const char *args, int *status) {
  const char *dir = getenv("WEFT_BUILD_DIR");
  char cmd[2048];
  snprintf(cmd, sizeof(cmd), "'%s/bin/weft-plan' %s --json --top 1 2>/dev/null",
           dir && *dir ? dir : "build", args);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p, "popen %s", cmd);
  size_t cap = 1 << 16, len = 0, n;
  char *out = malloc(cap);
  cr_assert_not_null(out);
  while ((n = fread(out + len, 1, cap - len - 1, p)) > 0) {
    len += n;
    if (len + 1 == cap) {
      out = realloc(out, cap *= 2);
      cr_assert_not_null(out);
    }
  }
  out[len] = '\0';
  int st = pclose(p);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  cr_assert_neq(*status, 127, "cannot run %s", cmd);
  return out;
}

// The text between the first pair of backticks in `cell`, into buf.
static int backticked(const char *cell, char *buf, size_t n) {
  const char *a = strchr(cell, '`'), *b = a ? strchr(a + 1, '`') : NULL;
  if (!b || (size_t)(b - a - 1) >= n) return -1;
  memcpy(buf, a + 1, (size_t)(b - a - 1));
  buf[b - a - 1] = '\0';
  return 0;
}

typedef struct {
  double sum;  // of |error| in %
  int n;
} set_t;

static set_t fit_set, validation_set;

static void check_row(char **cell, int ncell) {
  cr_assert_geq(ncell, 9, "a table row has 9 cells");
  char metric[64], command[1024];
  cr_assert_eq(backticked(cell[3], metric, sizeof(metric)), 0, "metric of %s", cell[0]);
  cr_assert_eq(backticked(cell[8], command, sizeof(command)), 0, "command of %s", cell[0]);
  cr_assert(strncmp(command, "weft-plan ", 10) == 0, "%s: %s", cell[0], command);
  double published = strtod(cell[4], NULL);
  int status;
  char *out = run(command + 10, &status), err[200];
  plan_json_t *doc = plan_json_parse(out, err, sizeof(err));
  cr_assert_not_null(doc, "%s: %s\n%s", cell[0], err, out);
  const plan_json_t *layout = plan_json_get(doc, "layouts")->child;
  if (strstr(cell[5], "none")) {
    cr_expect_eq(status, 1, "%s: no feasible layout", cell[0]);
    cr_expect_null(layout, "%s", cell[0]);
    const char *why = strstr(cell[6], "rejected: ");
    cr_assert_not_null(why, "%s: the error cell names the reason", cell[0]);
    const plan_json_t *miss = plan_json_get(doc, "rejected")->child;
    cr_assert_not_null(miss, "%s", cell[0]);
    const char *reason = plan_json_get(miss, "reason")->string;
    char want[64];
    snprintf(want, sizeof(want), "%.*s", (int)strcspn(why + 10, " |"), why + 10);
    cr_expect(strstr(reason, want) != NULL, "%s: '%s' in '%s'", cell[0], want, reason);
  } else {
    double predicted = strtod(cell[5], NULL), error = strtod(cell[6], NULL);
    cr_expect_eq(status, 0, "%s", cell[0]);
    cr_assert_not_null(layout, "%s: a layout\n%s", cell[0], out);
    double got = plan_json_number(layout, metric, NAN);
    if (strncmp(metric, "mfu", 3) == 0) got *= 100;  // the table prints MFU in %
    cr_expect(fabs(got - predicted) <= fmax(0.051, 5e-5 * fabs(predicted)),
              "%s: weft-plan predicts %s = %.4f, the table says %g", cell[0], metric, got, predicted);
    cr_expect(fabs(100 * (predicted / published - 1) - error) <= 0.06,
              "%s: error %+.2f %% from %g and %g, the table says %g", cell[0],
              100 * (predicted / published - 1), predicted, published, error);
    set_t *set = strstr(cell[7], "validation") ? &validation_set
                 : strstr(cell[7], "fit")      ? &fit_set
                                               : NULL;
    cr_assert(set || strstr(cell[7], "outside"), "%s: set '%s' is fit, validation or outside",
              cell[0], cell[7]);
    if (set) {
      set->sum += fabs(error), set->n++;
      cr_expect(fabs(error) <= ROW_MAX_PCT, "%s: %+.1f %% is beyond %.0f %%", cell[0], error,
                ROW_MAX_PCT);
    }
  }
  plan_json_free(doc);
  free(out);
}

Test(plan_accuracy, every_row_of_the_docs_table_is_what_weft_plan_predicts, .timeout = 120) {
  char *text = slurp("docs/planner.md");
  char *section = strstr(text, "\n## Accuracy against published runs");
  cr_assert_not_null(section, "docs/planner.md has the accuracy section");
  char *header = strstr(section, "\n| run |");
  cr_assert_not_null(header, "and its table");
  char *line = strchr(header + 1, '\n') + 1;  // the |---| line
  line = strchr(line, '\n') + 1;
  int rows = 0;
  while (*line == '|') {
    char *end = strchr(line, '\n');
    cr_assert_not_null(end);
    *end = '\0';
    char *cell[MAX_CELLS];
    int n = 0;
    for (char *p = line + 1; n < MAX_CELLS && *p; n++) {
      char *bar = strchr(p, '|');
      if (!bar) break;
      *bar = '\0';
      cell[n] = p;
      p = bar + 1;
    }
    check_row(cell, n);
    rows++;
    line = end + 1;
  }
  cr_expect_geq(rows, 37, "Megatron-LM (10), MT-NLG (3), BLOOM, Llama 3 (4), DeepSeek (2), "
                          "Megatron-Core (9), MPT (8)");
  cr_assert_geq(fit_set.n, 10);
  cr_assert_geq(validation_set.n, 10);
  cr_expect_leq(fit_set.sum / fit_set.n, SET_MEAN_PCT, "fit set: mean |error| %.2f %%",
                fit_set.sum / fit_set.n);
  cr_expect_leq(validation_set.sum / validation_set.n, SET_MEAN_PCT,
                "validation set: mean |error| %.2f %%", validation_set.sum / validation_set.n);
  free(text);
}
