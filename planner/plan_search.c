/*
 * plan_search.c — every layout the job allows, judged and ranked.
 *
 * tp runs over the divisors of a node's GPU count (tensor parallelism stays on
 * NVLink), cp over the divisors of what is left that split the sequence into
 * 2 cp chunks (fused attention only), pp over the divisors of the rest up to
 * the layer count, dp takes what remains, and for a mixture-of-experts model
 * ep over the divisors of dp that divide the experts. Inside each (tp, cp,
 * pp, dp, ep) the search tries ZeRO stages 0-3, micro-batch sizes 1..32,
 * recompute none/selective/full, and 1F1B or the interleaved schedule with
 * every v that splits a stage. Each (tp, cp, pp, dp, ep) keeps its fastest
 * feasible setting; one with none keeps its nearest miss (the candidate that
 * passed the most checks — divisibility, then memory, then bubble, then
 * bandwidth — and, among those, needed the least memory) so the report can
 * say why it was rejected. Constraints from the command line narrow each
 * loop; constraints that cannot hold are refused before the search with a
 * sentence naming the flag.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"

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
                         const plan_layout_t *dims, plan_candidate_t *best, int *have,
                         plan_search_t *out) {
  int dp = dims->dp, pp = dims->pp;
  int zlo = j->zero >= 0 ? j->zero : 0, zhi = j->zero >= 0 ? j->zero : dp * dims->cp > 1 ? 3 : 0;
  int rlo = j->recompute >= 0 ? j->recompute : 0;
  int rhi = j->recompute >= 0 ? j->recompute : PLAN_RECOMPUTE_FULL;
  double per_replica = j->global_batch / dp;
  // v candidates: 1 (plain schedule) and, for pipelines, every v up to the
  // layers of the fullest stage; the evaluation rejects the ones that do not divide.
  int vmax = pp > 1 ? plan_stage_max_layers(m, pp) : 1;
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
          plan_candidate_t cand = {.layout = *dims};
          cand.layout.zero = zero, cand.layout.micro_batch = micro, cand.layout.interleave = v;
          cand.layout.recompute = (plan_recompute_t)rc, cand.layout.schedule = sched;
          plan_evaluate(m, c, j, &cand.layout, &cand.result, NULL);
          out->evaluated++;
          out->count[cand.result.verdict]++;
          if (!*have || better(&cand, best)) *best = cand, *have = 1;
        }
      }
    }
}

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return -1;
}

// Constraints from the command line that no layout can meet.
static int check_constraints(const plan_model_t *m, const plan_job_t *j, char *err, size_t errlen) {
  int g = j->gpus;
  if (g < 1) return fail(err, errlen, "the number of GPUs must be >= 1 (give --gpus or --nodes)");
  if (!(j->global_batch >= 1) || j->global_batch != floor(j->global_batch))
    return fail(err, errlen, "the global batch must be a whole number of sequences >= 1 (got %g)",
                j->global_batch);
  long long forced = (long long)(j->tp ? j->tp : 1) * (j->cp ? j->cp : 1) * (j->pp ? j->pp : 1) *
                     (j->dp ? j->dp : 1);
  if (forced > g || g % forced != 0 || (j->tp && j->cp && j->pp && j->dp && forced != g)) {
    char given[96] = "";
    const struct { const char *flag; int v; } dims[] = {
        {"--tp", j->tp}, {"--cp", j->cp}, {"--pp", j->pp}, {"--dp", j->dp}};
    for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++)
      if (dims[i].v)
        snprintf(given + strlen(given), sizeof(given) - strlen(given), "%s%s %d",
                 given[0] ? " x " : "", dims[i].flag, dims[i].v);
    return fail(err, errlen, "the forced layout (%s = %lld) %s %d GPUs (world = tp x cp x pp x dp)",
                given, forced,
                forced > g                          ? "is more than the"
                : j->tp && j->cp && j->pp && j->dp ? "does not multiply out to"
                                                    : "does not divide the",
                g);
  }
  if (j->cp > 1 && !m->flash_attention)
    return fail(err, errlen, "--cp %d needs fused attention (--flash on): context parallelism "
                             "passes K and V blocks between flash-attention steps", j->cp);
  if (j->cp > 1 && m->seq % (2 * j->cp))
    return fail(err, errlen, "--cp %d does not split --seq %d into 2 x cp = %d equal chunks", j->cp,
                m->seq, 2 * j->cp);
  if (j->cp > 1 && j->tp > 1 && j->sequence_parallel && (m->seq / j->cp) % j->tp)
    return fail(err, errlen, "--tp %d does not divide the %d tokens each of --cp %d ranks holds",
                j->tp, m->seq / j->cp, j->cp);
  if (j->ep > 1 && !plan_model_is_moe(m))
    return fail(err, errlen, "--ep %d needs a mixture-of-experts model (--experts N, or an MoE "
                             "preset such as mixtral-8x7b)", j->ep);
  if (j->ep > 1 && m->experts % j->ep)
    return fail(err, errlen, "--ep %d does not divide --experts %d", j->ep, m->experts);
  if (j->ep > 1 && j->dp && j->dp % j->ep)
    return fail(err, errlen, "--ep %d does not divide --dp %d (expert parallelism splits the "
                             "data-parallel ranks)", j->ep, j->dp);
  if (j->ep > 1 && g / (j->tp ? j->tp : 1) / (j->cp ? j->cp : 1) / (j->pp ? j->pp : 1) < j->ep)
    return fail(err, errlen, "--ep %d is more than the %d data-parallel ranks left", j->ep,
                g / (j->tp ? j->tp : 1) / (j->cp ? j->cp : 1) / (j->pp ? j->pp : 1));
  if (j->pp > m->layers)
    return fail(err, errlen, "--pp %d is more stages than the %d layers", j->pp, m->layers);
  return 0;
}

// Context-parallel sizes worth trying: they must split the sequence into
// 2 cp chunks, need fused attention, and (a bound on the search, not a rule
// of Megatron-Core's) keep each chunk at least one 128-query attention tile.
static int cp_allowed(const plan_model_t *m, int cp) {
  return cp == 1 || (m->flash_attention && m->seq % (2 * cp) == 0 && m->seq / (2 * cp) >= 128);
}

// The practitioners' rule for 3D parallelism: tensor parallel inside a node
// (as wide as the node and the heads allow), pipeline across nodes until
// the model fits, data parallel for the rest, and context parallel only
// where the sequence needs it. A layout departs from it once for each of:
// tensor parallelism narrower than the node; context parallelism that
// leaves a rank fewer than PLAN_CP_RULE_TOKENS tokens of a sequence (the
// pre-training length of Llama 3 and Megatron-Core's recipes, which run
// without it); ZeRO-3, which fits the model by sharding weights over the
// data-parallel ranks where the rule would add pipeline stages.
int plan_rule_widest_tp(const plan_model_t *m, const plan_cluster_t *c) {
  int widest = 1;
  for (int t = 1; t <= c->gpus_per_node; t++)
    if (c->gpus_per_node % t == 0 && m->heads % t == 0 && m->kv_heads % t == 0 && m->ffn % t == 0)
      widest = t;
  return widest;
}

int plan_rule_departures(const plan_model_t *m, const plan_cluster_t *c, const plan_layout_t *l) {
  int widest = plan_rule_widest_tp(m, c);
  int cp = l->cp > 1 && (double)m->seq / l->cp < PLAN_CP_RULE_TOKENS;
  return cp + (l->tp < widest) + (l->zero >= 3);
}

// Ranks the feasible layouts: fastest first, except that layouts within
// PLAN_TIE_BAND of the fastest not yet placed are a tie the model cannot
// resolve, and inside a tie the one that departs least from the rule
// comes first (then the faster).
static int by_rule_then_time(const void *pa, const void *pb) {
  const plan_candidate_t *a = pa, *b = pb;
  if (a->departures != b->departures) return a->departures - b->departures;
  return by_step_time(pa, pb);
}

static void rank_with_ties(const plan_model_t *m, const plan_cluster_t *c, plan_candidate_t *v, int n) {
  for (int i = 0; i < n; i++) v[i].departures = plan_rule_departures(m, c, &v[i].layout);
  qsort(v, (size_t)n, sizeof(*v), by_step_time);
  for (int first = 0; first < n;) {
    int last = first + 1;
    while (last < n && v[last].result.step_time <= v[first].result.step_time * (1 + PLAN_TIE_BAND)) last++;
    qsort(v + first, (size_t)(last - first), sizeof(*v), by_rule_then_time);
    first = last;
  }
}

int plan_search(const plan_model_t *m, const plan_cluster_t *c, const plan_job_t *j,
                plan_search_t *out, char *err, size_t errlen) {
  memset(out, 0, sizeof(*out));
  if (check_constraints(m, j, err, errlen) != 0) return -1;
  int g = j->gpus, gpn = c->gpus_per_node, moe = plan_model_is_moe(m);
  list_t ranked = {0}, rejected = {0};
  for (int tp = 1; tp <= g; tp++) {
    if (j->tp ? tp != j->tp : (g % tp != 0 || gpn % tp != 0)) continue;
    for (int cp = 1; cp <= g / tp; cp++) {
      if ((g / tp) % cp != 0 || (j->cp ? cp != j->cp : !cp_allowed(m, cp))) continue;
      for (int pp = 1; pp <= g / tp / cp && pp <= m->layers; pp++) {
        if ((g / tp / cp) % pp != 0 || (j->pp && pp != j->pp)) continue;
        int dp = g / tp / cp / pp;
        if (j->dp && dp != j->dp) continue;
        for (int ep = 1; ep <= (moe ? dp : 1); ep++) {
          if (j->ep ? ep != j->ep : (dp % ep != 0 || (moe && m->experts % ep != 0))) continue;
          plan_layout_t dims = {.tp = tp, .pp = pp, .dp = dp, .cp = cp, .ep = ep};
          plan_candidate_t best;
          int have = 0;
          try_settings(m, c, j, &dims, &best, &have, out);
          if (have && push(best.result.verdict == PLAN_FEASIBLE ? &ranked : &rejected, &best) != 0) {
            free(ranked.v);
            free(rejected.v);
            return fail(err, errlen, "out of memory");
          }
        }
      }
    }
  }
  if (ranked.n > 1) rank_with_ties(m, c, ranked.v, ranked.n);
  out->ranked = ranked.v, out->nranked = ranked.n;
  out->rejected = rejected.v, out->nrejected = rejected.n;
  return 0;
}

void plan_search_free(plan_search_t *s) {
  free(s->ranked);
  free(s->rejected);
  memset(s, 0, sizeof(*s));
}
