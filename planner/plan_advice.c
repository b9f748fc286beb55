/*
 * plan_advice.c — what weft-plan says beyond the table: why the first
 * layout beats the second and by how much, where it departs from the rule
 * of thumb for 3D parallelism and what each departure buys, the range of
 * MFU the fitted constants' uncertainty allows, and (--check) how far a
 * user's own layout is from the best and where the difference goes.
 *
 * Differences are told in seconds per step, split into the parts of the
 * step time (plan_eval.c): compute, the pipeline bubble, each dimension's
 * exposed communication, and the fixed costs.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plan.h"

#define NPARTS 9

typedef struct {
  const char *name[NPARTS];
  double s[NPARTS];
} parts_t;

// A step's seconds by cause. The pipeline's slots (m + (p - 1)/v) each run
// one micro-batch; the (p - 1)/v fill and drain slots are the bubble.
static parts_t parts_of(const plan_candidate_t *c) {
  const plan_result_t *r = &c->result;
  double m = r->micro_batches, fill = (c->layout.pp - 1.0) / c->layout.interleave;
  double slot = fill + m > 0 ? r->t_pipeline / (m + fill) : 0;
  double compute_mb = r->t_mb - r->t_tp - r->t_cp - r->t_ep;
  parts_t p = {{"compute", "pipeline bubble", "TP", "CP", "EP", "PP hand-offs", "DP exposed",
                "optimizer and fixed costs", "slowest-GPU wait"},
               {m * compute_mb, fill * slot, m * r->t_tp, m * r->t_cp, m * r->t_ep,
                r->t_p2p * m / (m + fill), r->dp_exposed,
                r->t_optimizer + r->t_overhead + r->t_engine, r->t_jitter}};
  return p;
}

static void describe(FILE *f, const plan_candidate_t *c) {
  const plan_layout_t *l = &c->layout;
  fprintf(f, "tp %d x cp %d x pp %d x dp %d (ep %d), ZeRO-%d, micro-batch %d, %s", l->tp, l->cp,
          l->pp, l->dp, l->ep, l->zero, l->micro_batch, plan_sched_name(l->schedule));
  if (l->interleave > 1) fprintf(f, " v=%d", l->interleave);
}

// The three parts in which b's step is longest compared with a's.
static void print_differences(FILE *f, const plan_candidate_t *a, const plan_candidate_t *b) {
  parts_t pa = parts_of(a), pb = parts_of(b);
  int used[NPARTS] = {0};
  for (int k = 0; k < 3; k++) {
    int worst = -1;
    for (int i = 0; i < NPARTS; i++)
      if (!used[i] && (worst < 0 || pb.s[i] - pa.s[i] > pb.s[worst] - pa.s[worst])) worst = i;
    if (worst < 0 || pb.s[worst] - pa.s[worst] <= 0.0005 * a->result.step_time) break;
    used[worst] = 1;
    fprintf(f, "%s%s %+.3g s (%.3g vs %.3g)", k ? ", " : " ", pa.name[worst],
            pb.s[worst] - pa.s[worst], pb.s[worst], pa.s[worst]);
  }
  fprintf(f, "\n");
}

static void why_departures(FILE *f, const plan_model_t *m, const plan_cluster_t *c,
                           const plan_candidate_t *l) {
  const char *sep = "";
  int widest = plan_rule_widest_tp(m, c);
  if (l->layout.tp < widest) fprintf(f, "%stp %d below the node's %d", sep, l->layout.tp, widest), sep = "; ";
  if (l->layout.cp > 1 && (double)m->seq / l->layout.cp < PLAN_CP_RULE_TOKENS)
    fprintf(f, "%scp %d leaves %d tokens a rank (< %d)", sep, l->layout.cp, m->seq / l->layout.cp,
            PLAN_CP_RULE_TOKENS), sep = "; ";
  if (l->layout.zero >= 3) fprintf(f, "%sZeRO-3 shards the weights where the rule adds stages", sep);
}

void plan_mfu_range(const plan_model_t *m, const plan_cluster_t *c, const plan_job_t *j,
                    const plan_layout_t *l, double *lo, double *hi) {
  double mfu[2];
  for (int side = 0; side < 2; side++) {
    double sign = side ? -1 : 1;  // side 0: every fitted constant one error slower
    plan_cluster_t cs = *c;
    plan_job_t js = *j;
    double clock = cs.clock_sustain > 0 ? cs.clock_sustain : 1;
    cs.clock_sustain = fmin(1, fmax(0.01, clock - sign * PLAN_CLOCK_SE));
    js.calib.jitter = fmax(0, js.calib.jitter + sign * PLAN_JITTER_SE);
    js.calib.step_overhead = fmax(0, js.calib.step_overhead + sign * PLAN_STEP_OVERHEAD_SE);
    js.calib.engine_mb_overhead = fmax(0, js.calib.engine_mb_overhead + sign * PLAN_ENGINE_MB_OVERHEAD_SE);
    plan_result_t r;
    plan_evaluate(m, &cs, &js, l, &r, NULL);
    mfu[side] = r.mfu;
  }
  *lo = fmin(mfu[0], mfu[1]), *hi = fmax(mfu[0], mfu[1]);
}

// Layout 1's dimensions with each micro-batch size, the other settings
// chosen again: what a run that does not state its micro-batch may get.
static void print_micro_batches(FILE *f, const plan_model_t *m, const plan_cluster_t *c,
                                const plan_job_t *j, const plan_candidate_t *best) {
  fprintf(f, "  micro-batch:");
  for (int mb = 1; mb <= 32; mb *= 2) {
    plan_job_t js = *j;
    js.tp = best->layout.tp, js.cp = best->layout.cp, js.pp = best->layout.pp;
    js.dp = best->layout.dp, js.ep = best->layout.ep, js.micro_batch = mb;
    plan_search_t one;
    char err[200];
    if (plan_search(m, c, &js, &one, err, sizeof(err)) != 0) break;
    if (one.nranked) fprintf(f, " %d: %.4g s (MFU %.3f);", mb, one.ranked[0].result.step_time,
                             one.ranked[0].result.mfu);
    else if (one.nrejected) fprintf(f, " %d: %s;", mb, plan_verdict_name(one.rejected[0].result.verdict));
    plan_search_free(&one);
  }
  fprintf(f, "\n");
}

void plan_print_advice(FILE *f, const plan_model_t *m, const plan_cluster_t *c, const plan_job_t *j,
                       const plan_search_t *s) {
  if (s->nranked == 0) return;
  const plan_candidate_t *best = &s->ranked[0];
  double lo, hi;
  plan_mfu_range(m, c, j, &best->layout, &lo, &hi);
  fprintf(f, "\nadvice\n  layout 1: MFU %.3f, %.2f-%.2f with every fitted constant one standard error"
             " either way\n", best->result.mfu, lo, hi);
  if (j->micro_batch == 0) print_micro_batches(f, m, c, j, best);
  if (s->nranked > 1) {
    const plan_candidate_t *next = &s->ranked[1];
    double d = next->result.step_time - best->result.step_time;
    fprintf(f, "  layout 2 (");
    describe(f, next);
    fprintf(f, ") takes %+.3g s a step (%+.1f %%)", d, 100 * d / best->result.step_time);
    if (d < 0)
      fprintf(f, ": within the %.0f %% the model cannot resolve, so the layout that keeps closer to"
                 " the rule ranks first\n", 100 * PLAN_TIE_BAND);
    else {
      fprintf(f, "; where it loses:");
      print_differences(f, best, next);
    }
  }
  fprintf(f, "  the rule (TP inside a node, PP across nodes until the model fits, DP for the rest,"
             " CP only for long sequences): ");
  if (best->departures == 0) {
    fprintf(f, "layout 1 follows it\n");
    return;
  }
  fprintf(f, "layout 1 departs from it (");
  why_departures(f, m, c, best);
  fprintf(f, ")\n");
  const plan_candidate_t *ruled = NULL;
  for (int i = 1; i < s->nranked && !ruled; i++)
    if (s->ranked[i].departures == 0) ruled = &s->ranked[i];
  if (!ruled) {
    fprintf(f, "    no feasible layout follows the rule here\n");
    return;
  }
  fprintf(f, "    the best layout that follows it, ");
  describe(f, ruled);
  fprintf(f, ", takes %.3g s a step: the departures buy %.3g s (%.1f %%);",
          ruled->result.step_time, ruled->result.step_time - best->result.step_time,
          100 * (ruled->result.step_time / best->result.step_time - 1));
  print_differences(f, best, ruled);
}

void plan_print_check(FILE *f, const plan_candidate_t *yours, const plan_candidate_t *best) {
  fprintf(f, "\ncheck\n  your layout: ");
  describe(f, yours);
  if (yours->result.verdict != PLAN_FEASIBLE) {
    fprintf(f, "\n  cannot run: %s: %s\n", plan_verdict_name(yours->result.verdict),
            yours->result.reason);
  } else {
    fprintf(f, "\n    %.4g s a step, MFU %.3f\n", yours->result.step_time, yours->result.mfu);
  }
  if (!best) {
    fprintf(f, "  no feasible layout to compare with\n");
    return;
  }
  fprintf(f, "  the best layout: ");
  describe(f, best);
  fprintf(f, "\n    %.4g s a step, MFU %.3f\n", best->result.step_time, best->result.mfu);
  if (yours->result.verdict != PLAN_FEASIBLE) return;
  double d = yours->result.step_time / best->result.step_time - 1;
  if (fabs(d) <= PLAN_TIE_BAND) {
    fprintf(f, "  yours is within %.0f %% of it (%+.1f %%): a tie the model cannot resolve\n",
            100 * PLAN_TIE_BAND, 100 * d);
    return;
  }
  fprintf(f, "  yours takes %+.1f %% a step; where:", 100 * d);
  print_differences(f, best, yours);
}
