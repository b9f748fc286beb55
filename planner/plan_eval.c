/*
 * plan_eval.c — one layout, start to finish: is it legal, does it fit, how
 * long is a step, and what does that make MFU and days to train.
 *
 * Step time = (m + (p - 1)/v) (t_mb + 2 v t_p2p) + exposed DP traffic + the
 * optimizer, where m is the number of micro-batches per pipeline, t_mb one
 * micro-batch's forward + backward (+ recompute) through the busiest stage
 * with its tensor-parallel collectives, and t_p2p one activation handed to
 * the next stage. The bubble is (p - 1)/(v m) of the work (GPipe and 1F1B:
 * v = 1). Gradient traffic overlaps the last micro-batch's pass; ZeRO-3's
 * gathers overlap each micro-batch's compute. Stage sizes: layers split
 * evenly, or, as Llama 3 did, the first and last stage one layer short when
 * pp divides layers + 2 (they also carry the embedding and the output layer).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "plan_internal.h"

void plan_job_defaults(plan_job_t *job) {
  memset(job, 0, sizeof(*job));
  job->bytes = (plan_bytes_t){.weight = 2, .grad = 2, .optim = 12, .act = 2};
  job->sequence_parallel = 1;
  job->max_bubble = PLAN_MAX_BUBBLE;
  job->calib = (plan_calib_t){PLAN_GEMM_EFF, PLAN_ATTN_EFF, PLAN_HBM_EFF, PLAN_LINK_EFF,
                             PLAN_RESERVE_GIB * PLAN_GIB, PLAN_KERNEL_GAP_US * 1e-6};
  job->zero = job->recompute = job->schedule = -1;
}

const char *plan_verdict_name(plan_verdict_t v) {
  static const char *const names[] = {"feasible", "divisibility", "memory", "bubble", "bandwidth"};
  return v <= PLAN_REJECT_BANDWIDTH ? names[v] : "?";
}

// Layers on the first, middle and last stage; -1 when pp cannot split them.
static int split_layers(int L, int p, int n[3]) {
  if (p <= 1 || L % p == 0) {
    n[0] = n[1] = n[2] = p <= 1 ? L : L / p;
    return 0;
  }
  if ((L + 2) % p == 0 && (L + 2) / p >= 2) {
    n[1] = (L + 2) / p;
    n[0] = n[2] = n[1] - 1;
    return 0;
  }
  return -1;
}

static int reject(plan_result_t *r, plan_verdict_t v, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int reject(plan_result_t *r, plan_verdict_t v, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  r->verdict = v;
  vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
  va_end(ap);
  return -1;
}

static int check_divisibility(const plan_model_t *m, const plan_cluster_t *c, const plan_job_t *j,
                              const plan_layout_t *l, int n[3], plan_result_t *r) {
  int t = l->tp, p = l->pp, d = l->dp, v = l->interleave;
  if (t < 1 || p < 1 || d < 1 || l->micro_batch < 1 || v < 1 || l->zero < 0 || l->zero > 3)
    return reject(r, PLAN_REJECT_DIVISIBILITY, "tp, pp, dp, micro-batch and v must be >= 1, zero 0..3");
  if ((long long)t * p * d != j->gpus)
    return reject(r, PLAN_REJECT_DIVISIBILITY, "tp x pp x dp = %lld is not the %d GPUs",
                  (long long)t * p * d, j->gpus);
  if (t <= c->gpus_per_node && c->gpus_per_node % t != 0)
    return reject(r, PLAN_REJECT_DIVISIBILITY, "tp %d does not divide %d GPUs per node", t,
                  c->gpus_per_node);
  if (m->heads % t || m->kv_heads % t || m->ffn % t)
    return reject(r, PLAN_REJECT_DIVISIBILITY, "tp %d does not divide heads %d, kv-heads %d and ffn %d",
                  t, m->heads, m->kv_heads, m->ffn);
  if (j->sequence_parallel && m->seq % t)
    return reject(r, PLAN_REJECT_DIVISIBILITY, "sequence parallel: tp %d does not divide seq %d", t,
                  m->seq);
  if (p > m->layers || split_layers(m->layers, p, n) != 0)
    return reject(r, PLAN_REJECT_DIVISIBILITY,
                  "pp %d does not divide layers %d (nor layers + 2 with short end stages)", p,
                  m->layers);
  double per_replica = j->global_batch / d;
  if (per_replica != floor(per_replica))
    return reject(r, PLAN_REJECT_DIVISIBILITY, "dp %d does not divide the batch of %.0f sequences", d,
                  j->global_batch);
  if (fmod(per_replica, l->micro_batch) != 0)
    return reject(r, PLAN_REJECT_DIVISIBILITY,
                  "micro-batch %d does not divide the %.0f sequences per replica", l->micro_batch,
                  per_replica);
  double mbs = per_replica / l->micro_batch;
  if (l->schedule == PLAN_SCHED_INTERLEAVED) {
    if (p < 2 || v < 2)
      return reject(r, PLAN_REJECT_DIVISIBILITY, "interleaving needs pp >= 2 and v >= 2");
    if (n[1] % v != 0)
      return reject(r, PLAN_REJECT_DIVISIBILITY, "v %d does not divide the %d layers of a stage", v,
                    n[1]);
    if (fmod(mbs, p) != 0)
      return reject(r, PLAN_REJECT_DIVISIBILITY,
                    "interleaving needs micro-batches (%.0f) to be a multiple of pp %d", mbs, p);
  } else if (v != 1) {
    return reject(r, PLAN_REJECT_DIVISIBILITY, "v > 1 needs the interleaved schedule");
  }
  return 0;
}

// Memory of pipeline stage i (bytes); fills the result's parts when `keep`.
static double stage_memory(const plan_model_t *m, const plan_job_t *j, const plan_layout_t *l,
                           const int n[3], int i, double act_layer, double act_none, double mbs,
                           plan_result_t *r, int keep, FILE *why) {
  int p = l->pp, t = l->tp, last = i == p - 1, layers = i == 0 ? n[0] : last ? n[2] : n[1];
  double params = layers * plan_model_layer_params(m);
  if (i == 0) params += plan_model_embedding_params(m);
  if (last) params += (m->tied_embeddings && p > 1 ? (double)m->vocab * m->hidden
                                                   : plan_model_head_params(m)) + m->hidden;
  params /= t;
  plan_states_t st = plan_model_states(params, l->dp, l->zero, &j->bytes, why);
  double inflight = plan_inflight_layers(l->schedule, p, l->interleave, i, layers, mbs);
  double act = act_layer * inflight, work = 0, T = l->micro_batch * (double)m->seq;
  if (l->recompute == PLAN_RECOMPUTE_FULL) work += act_none;  // one layer rebuilt at a time
  if (l->zero == 3) work += 2 * plan_model_layer_params(m) / t * j->bytes.weight;  // gathered layers
  if (last) work += T * m->vocab / t * (j->bytes.act + 4);  // logits and their fp32 softmax
  double total = st.weights + st.grads + st.optim + act + work;
  if (keep) {
    r->mem_weights = st.weights, r->mem_grads = st.grads, r->mem_optim = st.optim;
    r->mem_act = act, r->mem_work = work, r->mem_total = total;
    r->inflight_layers = inflight, r->params_per_gpu = params;
  }
  if (why)
    fprintf(why,
            "  stage %d: %d layers, %.4g params/GPU; activations %.4g MiB x %.4g layer-micro-batches"
            " in flight (%s) = %.4g GiB; working %.4g GiB; total %.4g GiB\n",
            i, layers, params, act_layer / 1048576, inflight, plan_sched_name(l->schedule),
            act / PLAN_GIB, work / PLAN_GIB, total / PLAN_GIB);
  return total;
}

static double hw_flops_per_token(const plan_model_t *m, plan_recompute_t rc) {
  double layer = plan_model_layer_fwd_flops(m), attn = 4.0 * m->seq * m->heads * m->head_dim;
  double passes = 3 * layer + (rc == PLAN_RECOMPUTE_FULL ? layer : 0) +
                  (rc == PLAN_RECOMPUTE_SELECTIVE && !m->flash_attention ? attn : 0);
  return m->layers * passes + 6.0 * m->vocab * m->hidden;
}

void plan_evaluate(const plan_model_t *m, const plan_cluster_t *c, const plan_job_t *j,
                   const plan_layout_t *l, plan_result_t *r, FILE *why) {
  memset(r, 0, sizeof(*r));
  int n[3];
  if (check_divisibility(m, c, j, l, n, r) != 0) return;
  int t = l->tp, p = l->pp, d = l->dp, v = l->interleave;
  double b = l->micro_batch, mbs = j->global_batch / d / b, e = j->bytes.act;
  plan_links_t links = plan_links(c, &j->calib, t, d);
  r->micro_batches = mbs;

  // Memory: every stage, the fullest one reported.
  r->act_per_layer = plan_layer_activation_bytes(m, b, t, j->sequence_parallel, l->recompute, e, why);
  double act_none = plan_layer_activation_bytes(m, b, t, j->sequence_parallel, PLAN_RECOMPUTE_NONE, e, NULL);
  // Stage 0 and 1 hold the most micro-batches, the last stage the output
  // layer; the middle stages hold no more than stage 1.
  int fullest = 0, probe[3] = {0, 1, p - 1};
  double worst = -1;
  for (int k = 0; k < 3; k++) {
    if (probe[k] >= p) continue;
    double mem = stage_memory(m, j, l, n, probe[k], r->act_per_layer, act_none, mbs, r, 0, NULL);
    if (mem > worst) worst = mem, fullest = probe[k];
  }
  stage_memory(m, j, l, n, fullest, r->act_per_layer, act_none, mbs, r, 1, why);
  r->mem_usable = c->mem_bytes - j->calib.reserve_bytes;

  // Time of one micro-batch through each kind of stage.
  plan_cost_t lc = plan_layer_cost(m, c, j, t, b, &links, why);
  plan_cost_t ec = plan_embedding_cost(m, c, j, t, b, &links);
  plan_cost_t hc = plan_head_cost(m, c, j, t, b, &links);
  double rec = l->recompute == PLAN_RECOMPUTE_FULL ? lc.fwd + lc.tp_fwd
               : l->recompute == PLAN_RECOMPUTE_SELECTIVE && !m->flash_attention ? lc.core_fwd : 0;
  for (int kind = 0; kind < 3; kind++) {
    int layers = n[kind], first = kind == 0 || p == 1, last = kind == 2 || p == 1;
    if (p == 1 && kind > 0) break;
    double fwd = layers * lc.fwd + (first ? ec.fwd : 0) + (last ? hc.fwd : 0);
    double bwd = layers * lc.bwd + (first ? ec.bwd : 0) + (last ? hc.bwd : 0);
    double tpc = layers * (lc.tp_fwd + lc.tp_bwd + (l->recompute == PLAN_RECOMPUTE_FULL ? lc.tp_fwd : 0)) +
                 (first ? ec.tp_fwd + ec.tp_bwd : 0) + (last ? hc.tp_fwd + hc.tp_bwd : 0);
    double total = fwd + bwd + layers * rec + tpc;
    if (total > r->t_mb) {
      r->t_mb = total, r->t_fwd = fwd, r->t_bwd = bwd, r->t_recompute = layers * rec, r->t_tp = tpc;
      r->stage_layers = layers;
      r->tp_bytes = layers * lc.tp_bytes * (l->recompute == PLAN_RECOMPUTE_FULL ? 1.5 : 1) +
                    (first ? ec.tp_bytes : 0) + (last ? hc.tp_bytes : 0);
    }
  }
  r->tp_bytes *= mbs;
  double compute_mb = r->t_mb - r->t_tp;

  // ZeRO-3 gathers the weights for every micro-batch (twice, three times
  // with full recompute) and reduce-scatters gradients; prefetching hides
  // them behind the micro-batch's compute when the links keep up.
  // They go layer by layer, so each layer pays the ring's latency too.
  double psi = r->params_per_gpu, wb = j->bytes.weight, gb = j->bytes.grad, z3 = 0;
  if (l->zero == 3) {
    int gathers = 2 + (l->recompute == PLAN_RECOMPUTE_FULL);
    double blocks = r->stage_layers + 1, block = psi / blocks;  // the layers and the end block
    z3 = blocks * (gathers * plan_allgather_time(wb * block, d, links.dp_busbw, links.dp_lat) +
                   plan_allgather_time(gb * block, d, links.dp_busbw, links.dp_lat));
    r->dp_bytes = mbs * (d - 1.0) / d * (gathers * wb + gb) * psi;
    r->dp_time = mbs * z3;
    if (z3 > r->t_mb) r->t_mb = z3;
  }

  // Pipeline: fill and drain cost (p - 1)/v micro-batch slots.
  double msg = e * b * m->seq * m->hidden / t;  // scatter/gather (or SP) shards the boundary
  double cross = p > 1 ? plan_p2p_time(msg, links.pp_bw, links.pp_lat) : 0;
  double slots = mbs + (p - 1.0) / v;
  r->bubble = (p - 1.0) / (v * mbs);
  r->t_p2p = slots * 2 * v * cross;
  r->pp_bytes = p > 1 ? 2.0 * v * mbs * msg : 0;
  r->t_pipeline = slots * (r->t_mb + 2 * v * cross);

  // Data-parallel gradients (ZeRO 0-2), overlapped with one micro-batch.
  if (l->zero < 3 && d > 1) {
    if (l->zero == 0) {
      r->dp_time = plan_allreduce_time(gb * psi, d, links.dp_busbw, links.dp_lat);
      r->dp_bytes = 2.0 * (d - 1) / d * gb * psi;
      r->dp_exposed = fmax(0, r->dp_time - r->t_bwd);
    } else {
      r->dp_time = plan_allgather_time(gb * psi, d, links.dp_busbw, links.dp_lat) +
                   plan_allgather_time(wb * psi, d, links.dp_busbw, links.dp_lat);
      r->dp_bytes = (d - 1.0) / d * (gb + wb) * psi;
      r->dp_exposed = fmax(0, r->dp_time - compute_mb);
    }
  }
  // Adam reads and writes its state, reads the gradient, writes the weights.
  double local = l->zero >= 1 ? psi / d : psi;
  r->t_optimizer = (2 * j->bytes.optim + gb + wb) * local / plan_mem_rate(c, &j->calib);
  r->step_time = r->t_pipeline + r->dp_exposed + r->t_optimizer;

  double tokens = j->global_batch * m->seq, peak = c->peak_flops;
  r->model_flops = plan_model_flops_per_token(m, 1, why) * tokens;
  r->hw_flops = hw_flops_per_token(m, l->recompute) * tokens;
  r->model_tflops = r->model_flops / (r->step_time * j->gpus) / 1e12;
  r->hw_tflops = r->hw_flops / (r->step_time * j->gpus) / 1e12;
  r->mfu = r->model_tflops * 1e12 / peak;
  r->hfu = r->hw_tflops * 1e12 / peak;
  double steps = plan_training_tokens(m, j) / tokens;
  r->days = steps * r->step_time / 86400;

  if (why)
    fprintf(why,
            "  micro-batch on the busiest stage (%d layers): fwd %.4g + bwd %.4g + recompute %.4g"
            " + TP %.4g = t_mb %.4g s\n"
            "  pipeline: m = %.0f micro-batches, bubble (p-1)/(v m) = %d/(%d x %.0f) = %.4f;"
            " p2p %.4g MB per hop at %.4g GB/s\n"
            "    (m + (p-1)/v)(t_mb + 2 v t_p2p) = %.4g x (%.4g + %.4g) = %.4g s\n"
            "  DP (ZeRO-%d, %d ranks at %.4g GB/s): %.4g GB per GPU, %.4g s, exposed %.4g s;"
            " optimizer %.4g s\n"
            "  step = %.4g + %.4g + %.4g = %.4g s; MFU = %.4g / (%.4g s x %d x %.4g) = %.4f,"
            " HFU %.4f\n"
            "  days = tokens / (batch s) x step = %.4g / %.4g x %.4g s = %.4g days\n",
            r->stage_layers, r->t_fwd, r->t_bwd, r->t_recompute, r->t_tp, r->t_mb, mbs, p - 1, v,
            mbs, r->bubble, msg / 1e6, links.pp_bw / 1e9, slots, r->t_mb, 2 * v * cross,
            r->t_pipeline, l->zero, d, links.dp_busbw / 1e9, r->dp_bytes / 1e9, r->dp_time,
            r->dp_exposed, r->t_optimizer, r->t_pipeline, r->dp_exposed, r->t_optimizer,
            r->step_time, r->model_flops, r->step_time, j->gpus, peak, r->mfu, r->hfu,
            plan_training_tokens(m, j), tokens, r->step_time, r->days);

  // Verdicts after the numbers, so a rejected layout still shows them.
  char need[32], have[32];
  if (r->mem_total > r->mem_usable) {
    snprintf(need, sizeof(need), "%.1f", r->mem_total / PLAN_GIB);
    snprintf(have, sizeof(have), "%.1f", r->mem_usable / PLAN_GIB);
    reject(r, PLAN_REJECT_MEMORY,
           "needs %s GiB per GPU (states %.1f, activations %.1f, working %.1f), %s GiB usable", need,
           (r->mem_weights + r->mem_grads + r->mem_optim) / PLAN_GIB, r->mem_act / PLAN_GIB,
           r->mem_work / PLAN_GIB, have);
  } else if (r->bubble > j->max_bubble) {
    reject(r, PLAN_REJECT_BUBBLE, "pipeline bubble (p-1)/(v m) = %d/(%d x %.0f) = %.2f > %.2f", p - 1,
           v, mbs, r->bubble, j->max_bubble);
  } else if (t > c->gpus_per_node) {
    reject(r, PLAN_REJECT_BANDWIDTH, "tp %d spans %d nodes: its collectives would leave NVLink", t,
           (t + c->gpus_per_node - 1) / c->gpus_per_node);
  } else {
    double waiting = mbs * (r->t_tp + fmax(0, r->t_mb - compute_mb - r->t_tp)) + r->t_p2p + r->dp_exposed;
    double working = mbs * compute_mb;
    if (waiting > working)
      reject(r, PLAN_REJECT_BANDWIDTH,
             "communication-bound: %.3g s per step waiting on links vs %.3g s of compute", waiting,
             working);
  }
}
