/*
 * plan_search.c — every layout the job allows, judged and ranked.
 *
 * tp runs over the divisors of a node's GPU count (tensor parallelism stays on
 * NVLink), pp over the divisors of what is left, dp takes the rest; inside
 * each (tp, pp, dp) the search tries ZeRO stages 0-3, micro-batch sizes
 * 1..32, recompute none/selective/full, and 1F1B or the interleaved schedule
 * with every v that splits a stage. Each (tp, pp, dp) keeps its fastest
 * feasible setting; one with none keeps its nearest miss (the candidate that
 * passed the most checks — divisibility, then memory, then bubble, then
 * bandwidth — and, among those, needed the least memory) so the report can
 * say why it was rejected. Constraints from the command line narrow each loop.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

typedef struct {
  plan_candidate_t *v;
  int n, cap;
} list_t;

static int push(list_t *l, const plan_candidate_t *c) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 64;
    plan_candidate_t *bigger = realloc(l->v, (size_t)cap * sizeof(*bigger));
    if (bigger == NULL) return -1;
    l->v = bigger, l->cap = cap;
  }
  l->v[l->n++] = *c;
  return 0;
}

// Better of two settings of one (tp, pp, dp): feasible and faster, or (both
// rejected) further through the checks and smaller.
// Settings within half a percent of each other are a tie the simpler one
// wins: lower ZeRO stage, less recompute, fewer chunks, then less memory.
static int better(const plan_candidate_t *a, const plan_candidate_t *b) {
  const plan_result_t *x = &a->result, *y = &b->result;
  if ((x->verdict == PLAN_FEASIBLE) != (y->verdict == PLAN_FEASIBLE)) return x->verdict == PLAN_FEASIBLE;
  if (x->verdict == PLAN_FEASIBLE) {
    if (fabs(x->step_time - y->step_time) > 0.005 * fmin(x->step_time, y->step_time))
      return x->step_time < y->step_time;
    const plan_layout_t *p = &a->layout, *q = &b->layout;
    if (p->zero != q->zero) return p->zero < q->zero;
    if (p->recompute != q->recompute) return p->recompute < q->recompute;
    if (p->interleave != q->interleave) return p->interleave < q->interleave;
    return x->mem_total < y->mem_total;
  }
  if (x->verdict != y->verdict) return x->verdict > y->verdict;
  return x->mem_total < y->mem_total;
}

static int by_step_time(const void *pa, const void *pb) {
  const plan_candidate_t *a = pa, *b = pb;
  return a->result.step_time < b->result.step_time ? -1 : a->result.step_time > b->result.step_time;
}

static void try_settings(const plan_model_t *m, const plan_cluster_t *c, const plan_job_t *j,
                         int tp, int pp, int dp, plan_candidate_t *best, int *have, plan_search_t *out) {
  int zlo = j->zero >= 0 ? j->zero : 0, zhi = j->zero >= 0 ? j->zero : dp > 1 ? 3 : 0;
  int rlo = j->recompute >= 0 ? j->recompute : 0;
  int rhi = j->recompute >= 0 ? j->recompute : PLAN_RECOMPUTE_FULL;
  double per_replica = j->global_batch / dp;
  // v candidates: 1 (plain schedule) and, for pipelines, every v up to the
  // layers of a stage; the evaluation rejects the ones that do not divide.
  int vmax = pp > 1 ? (m->layers + 2) / pp : 1;
  for (int zero = zlo; zero <= zhi; zero++)
    for (int mb = 1; mb <= 32; mb *= 2) {
      int micro = j->micro_batch > 0 ? j->micro_batch : mb;
      if (j->micro_batch > 0 && mb > 1) break;
      if (j->micro_batch == 0 && micro > per_replica) break;
      for (int rc = rlo; rc <= rhi; rc++) {
        if (j->recompute < 0 && rc == PLAN_RECOMPUTE_SELECTIVE && m->flash_attention) continue;
        for (int v = 1; v <= vmax; v++) {
          plan_sched_t sched = v > 1 ? PLAN_SCHED_INTERLEAVED : PLAN_SCHED_1F1B;
          if (j->interleave > 0 && v != j->interleave) continue;
          if (j->schedule >= 0) {
            if (j->schedule != PLAN_SCHED_INTERLEAVED && v > 1) break;
            if (j->schedule == PLAN_SCHED_INTERLEAVED && v == 1 && j->interleave == 0) continue;
            sched = (plan_sched_t)j->schedule;
          }
          plan_candidate_t cand = {.layout = {tp, pp, dp, zero, micro, v, (plan_recompute_t)rc, sched}};
          plan_evaluate(m, c, j, &cand.layout, &cand.result, NULL);
          out->evaluated++;
          out->count[cand.result.verdict]++;
          if (!*have || better(&cand, best)) *best = cand, *have = 1;
        }
      }
    }
}

int plan_search(const plan_model_t *m, const plan_cluster_t *c, const plan_job_t *j,
                plan_search_t *out, char *err, size_t errlen) {
  memset(out, 0, sizeof(*out));
  int g = j->gpus, gpn = c->gpus_per_node;
  if (g < 1) {
    snprintf(err, errlen, "the number of GPUs must be >= 1 (give --gpus or --nodes)");
    return -1;
  }
  if (!(j->global_batch >= 1) || j->global_batch != floor(j->global_batch)) {
    snprintf(err, errlen, "the global batch must be a whole number of sequences >= 1 (got %g)",
             j->global_batch);
    return -1;
  }
  long long forced = (long long)(j->tp ? j->tp : 1) * (j->pp ? j->pp : 1) * (j->dp ? j->dp : 1);
  if (forced > g || g % forced != 0 || (j->tp && j->pp && j->dp && forced != g)) {
    snprintf(err, errlen, "the forced layout (tp %d, pp %d, dp %d) does not multiply out to %d GPUs",
             j->tp, j->pp, j->dp, g);
    return -1;
  }
  list_t ranked = {0}, rejected = {0};
  for (int tp = 1; tp <= g; tp++) {
    if (j->tp ? tp != j->tp : (g % tp != 0 || gpn % tp != 0)) continue;
    for (int pp = 1; pp <= g / tp; pp++) {
      if ((g / tp) % pp != 0 || (j->pp && pp != j->pp)) continue;
      int dp = g / tp / pp;
      if (j->dp && dp != j->dp) continue;
      plan_candidate_t best;
      int have = 0;
      try_settings(m, c, j, tp, pp, dp, &best, &have, out);
      if (have && push(best.result.verdict == PLAN_FEASIBLE ? &ranked : &rejected, &best) != 0) {
        free(ranked.v);
        free(rejected.v);
        snprintf(err, errlen, "out of memory");
        return -1;
      }
    }
  }
  if (ranked.n > 1) qsort(ranked.v, (size_t)ranked.n, sizeof(*ranked.v), by_step_time);
  out->ranked = ranked.v, out->nranked = ranked.n;
  out->rejected = rejected.v, out->nrejected = rejected.n;
  return 0;
}

void plan_search_free(plan_search_t *s) {
  free(s->ranked);
  free(s->rejected);
  memset(s, 0, sizeof(*s));
}
