/*
 * plan_eval.c — one layout, start to finish: is it legal, does it fit, how
 * long is a step, and what does that make MFU and days to train.
 *
 * Step time = (m + (p - 1)/v) (t_mb + 2 v t_p2p) + exposed DP traffic + the
 * optimizer, where m is the number of micro-batches per pipeline, t_mb one
 * micro-batch's forward + backward (+ recompute) through the busiest stage
 * with its TP, CP and EP traffic, and t_p2p one activation handed to the
 * next stage. The bubble is (p - 1)/(v m) of the work (Narayanan et al.
 * 2021; GPipe and 1F1B: v = 1). Gradient reduction runs bucket by bucket
 * during the last micro-batch's backward and the parameter all-gather of a
 * sharded optimizer during the first one's forward (Megatron-Core's
 * overlap_grad_reduce and overlap_param_gather); what does not fit behind
 * them, and at least the last bucket, is exposed. ZeRO-3's gathers overlap
 * each micro-batch's compute.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "plan_internal.h"

void plan_job_defaults(plan_job_t *job) {
  memset(job, 0, sizeof(*job));
  // bf16 weights, fp32 gradients (accumulated and reduced in fp32, as
  // Megatron-LM does for bf16 and Llama 3 reports), fp32 master, m and v.
  job->bytes = (plan_bytes_t){.weight = 2, .grad = 4, .optim = 12, .act = 2};
  job->sequence_parallel = 1;
  job->dp_overlap = 1;
  job->max_bubble = PLAN_MAX_BUBBLE;
  // Constants of the time model and their sources:
  //   hbm_eff 0.80: an assumption (no measurement of this project's); STREAM-
  //     style copies reach more, small elementwise kernels less. Measure a
  //     copy kernel on the GPU and pass --hbm-eff.
  //   nvlink_eff 0.82: ~370 GB/s AllReduce bus bandwidth of 450 GB/s on
  //     8x H100 without NVLink SHARP, as "How to Scale Your Model" (Austin
  //     et al. 2025, the GPU chapter) reports it measured.
  //   nic_eff 0.85: 340 of 400 Gb/s, the inter-node all-reduce bandwidth
  //     Bekman's ml-engineering measured with network/benchmarks/
  //     all_reduce_bench.py (training/performance, the IDEFICS-80B example).
  //   kernel_gap 50 us: fitted (planner/fit.py) inside its declared bound of
  //     0-50 us, and at that bound: a launch (~5 us) plus the prologue and
  //     tail each kernel pays; it is what makes small models' GEMMs slow.
  //   reserve 2 GiB: CUDA context, cuBLAS/NCCL workspaces; an assumption.
  //   attn_half_len 200 tokens: FlashAttention-3 on H100 (head dim 128,
  //     B x S = 16K tokens) runs at 430, 517, 566, 590, 614 and 621 TFLOP/s
  //     for S = 512 .. 16384 (pytorch/benchmark commit ff65cb6, "Fix
  //     dimension order for FlashAttention-3"): S / (S + L0) with L0 = 200,
  //     relative to S = 16384, fits each within 5 %.
  //   jitter, step_overhead, engine_mb_overhead: fitted on the fit set of
  //     docs/planner.md (planner/fit.py); the values and both errors are there.
  job->calib = (plan_calib_t){.hbm_eff = PLAN_HBM_EFF, .nvlink_eff = PLAN_NVLINK_EFF,
                              .nic_eff = PLAN_NIC_EFF, .reserve_bytes = PLAN_RESERVE_GIB * PLAN_GIB,
                              .kernel_gap = PLAN_KERNEL_GAP_US * 1e-6,
                              .attn_half_len = PLAN_ATTN_HALF_LEN, .jitter = PLAN_JITTER,
                              .step_overhead = PLAN_STEP_OVERHEAD,
                              .engine_mb_overhead = PLAN_ENGINE_MB_OVERHEAD};
  job->zero = job->recompute = job->schedule = -1;
}

const char *plan_verdict_name(plan_verdict_t v) {
  static const char *const names[] = {"feasible", "divisibility", "memory", "bubble", "bandwidth"};
  return v <= PLAN_REJECT_BANDWIDTH ? names[v] : "?";
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

static int check_parallel(const plan_model_t *m, const plan_cluster_t *c, const plan_job_t *j,
                          const plan_layout_t *l, plan_result_t *r) {
  int t = l->tp, cp = l->cp, ep = l->ep, p = l->pp, d = l->dp;
  if (t < 1 || cp < 1 || ep < 1 || p < 1 || d < 1 || l->micro_batch < 1 || l->interleave < 1 ||
      l->zero < 0 || l->zero > 3)
    return reject(r, PLAN_REJECT_DIVISIBILITY,
                  "tp, cp, pp, dp, ep, micro-batch and v must be >= 1, zero 0..3");
  if ((long long)t * cp * p * d != j->gpus)
    return reject(r, PLAN_REJECT_DIVISIBILITY, "tp x cp x pp x dp = %lld is not the %d GPUs",
                  (long long)t * cp * p * d, j->gpus);
  if (t <= c->gpus_per_node && c->gpus_per_node % t != 0)
    return reject(r, PLAN_REJECT_DIVISIBILITY, "tp %d does not divide %d GPUs per node", t,
                  c->gpus_per_node);
  if (m->heads % t || m->kv_heads % t || m->ffn % t || (m->experts && m->expert_ffn % t))
    return reject(r, PLAN_REJECT_DIVISIBILITY, "tp %d does not divide heads %d, kv-heads %d and ffn %d%s",
                  t, m->heads, m->kv_heads, m->ffn, m->experts ? " (and expert-ffn)" : "");
  if (cp > 1 && !m->flash_attention)
    return reject(r, PLAN_REJECT_DIVISIBILITY, "cp %d needs fused attention (--flash on)", cp);
  if (cp > 1 && m->seq % (2 * cp))
    return reject(r, PLAN_REJECT_DIVISIBILITY, "cp %d does not split seq %d into 2 x cp chunks", cp,
                  m->seq);
  if (j->sequence_parallel && (m->seq / cp) % t)
    return reject(r, PLAN_REJECT_DIVISIBILITY, "sequence parallel: tp %d does not divide the %d tokens"
                  " of a cp rank", t, m->seq / cp);
  if (ep > 1 && !plan_model_is_moe(m))
    return reject(r, PLAN_REJECT_DIVISIBILITY, "ep %d needs a mixture-of-experts model", ep);
  if (ep > 1 && (d % ep || m->experts % ep))
    return reject(r, PLAN_REJECT_DIVISIBILITY, "ep %d does not divide dp %d and experts %d", ep, d,
                  m->experts);
  if (plan_model_is_moe(m) && t > 1 && !j->sequence_parallel)
    return reject(r, PLAN_REJECT_DIVISIBILITY, "MoE with tp %d needs sequence parallelism (--sp on)", t);
  return 0;
}

static int check_divisibility(const plan_model_t *m, const plan_cluster_t *c, const plan_job_t *j,
                              const plan_layout_t *l, plan_result_t *r) {
  if (check_parallel(m, c, j, l, r) != 0) return -1;
  int p = l->pp, d = l->dp, v = l->interleave;
  if (p > m->layers)
    return reject(r, PLAN_REJECT_DIVISIBILITY, "pp %d is more stages than the %d layers", p,
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
    int most = plan_stage_max_layers(m, p);
    if (p < 2 || v < 2)
      return reject(r, PLAN_REJECT_DIVISIBILITY, "interleaving needs pp >= 2 and v >= 2");
    if (most % v != 0)
      return reject(r, PLAN_REJECT_DIVISIBILITY, "v %d does not divide the %d layers of a stage", v,
                    most);
    if (fmod(mbs, p) != 0)
      return reject(r, PLAN_REJECT_DIVISIBILITY,
                    "interleaving needs micro-batches (%.0f) to be a multiple of pp %d", mbs, p);
  } else if (v != 1) {
    return reject(r, PLAN_REJECT_DIVISIBILITY, "v > 1 needs the interleaved schedule");
  }
  if (j->engine == PLAN_ENGINE_DEEPSPEED && l->schedule != PLAN_SCHED_1F1B)
    return reject(r, PLAN_REJECT_DIVISIBILITY, "DeepSpeed's pipeline engine runs 1F1B only");
  if (j->engine == PLAN_ENGINE_DEEPSPEED && p > 1 && l->zero >= 2)
    return reject(r, PLAN_REJECT_DIVISIBILITY,
                  "DeepSpeed's pipeline engine takes ZeRO-0 or 1 only (ZeRO-%d with pp %d)", l->zero, p);
  return 0;
}

// Parameters one GPU of stage i holds: dense (replicated over dp x cp) and
// routed-expert (over dp x cp / ep) shares.
static void stage_params(const plan_model_t *m, const plan_layout_t *l, const plan_stage_t *st, int i,
                         double *dense, double *expert) {
  int p = l->pp, last = i == p - 1, ep = l->ep > 0 ? l->ep : 1;
  double per_expert_layer = plan_model_layer_expert_params(m);
  double d = (st->count - st->moe) * plan_model_layer_params(m, 0) +
             st->moe * (plan_model_layer_params(m, 1) - per_expert_layer);
  if (i == 0) d += plan_model_embedding_params(m);
  if (last) d += (m->tied_embeddings && p > 1 ? (double)m->vocab * m->hidden
                                               : plan_model_head_params(m)) + m->hidden;
  *dense = d / l->tp;
  *expert = st->moe * per_expert_layer / l->tp / ep;
}

typedef struct {
  double act_dense, act_moe;       // one layer, one micro-batch, at the chosen recompute
  double none_dense, none_moe;     // the same without recompute (rebuilt one at a time)
} acts_t;

// Memory of pipeline stage i (bytes); fills the result's parts when `keep`.
static double stage_memory(const plan_model_t *m, const plan_job_t *j, const plan_layout_t *l,
                           int i, const acts_t *a, double mbs, plan_result_t *r, int keep, FILE *why) {
  plan_stage_t st;
  plan_stage_split(m, l->pp, i, &st);
  int p = l->pp, t = l->tp, cp = l->cp > 0 ? l->cp : 1, ep = l->ep > 0 ? l->ep : 1, last = i == p - 1;
  double dense, expert;
  stage_params(m, l, &st, i, &dense, &expert);
  if (why && expert > 0) fprintf(why, "  dense parameters, sharded over dp x cp:\n");
  plan_states_t sd = plan_model_states(dense, l->dp * cp, l->zero, &j->bytes, why);
  if (why && expert > 0) fprintf(why, "  routed experts (1/ep of them), sharded over dp x cp / ep:\n");
  plan_states_t se = plan_model_states(expert, l->dp * cp / ep, l->zero, &j->bytes, expert > 0 ? why : NULL);
  double inflight = plan_inflight_layers(l->schedule, p, l->interleave, i, st.count, mbs);
  double share_moe = st.count ? (double)st.moe / st.count : 0;
  double per_layer = share_moe * a->act_moe + (1 - share_moe) * a->act_dense;
  double act = per_layer * inflight, work = 0, T = l->micro_batch * (double)m->seq / cp;
  if (l->recompute == PLAN_RECOMPUTE_FULL) work += st.moe ? a->none_moe : a->none_dense;
  if (l->zero == 3) {  // two gathered layers
    double biggest = st.moe ? plan_model_layer_params(m, 1) - plan_model_layer_expert_params(m) +
                                  plan_model_layer_expert_params(m) / ep
                            : plan_model_layer_params(m, 0);
    work += 2 * biggest / t * j->bytes.weight;
  }
  if (last) work += T * m->vocab / t * (j->bytes.act + 4);  // logits and their fp32 softmax
  double states = sd.weights + sd.grads + sd.optim + se.weights + se.grads + se.optim;
  double total = states + act + work;
  if (keep) {
    r->mem_weights = sd.weights + se.weights, r->mem_grads = sd.grads + se.grads;
    r->mem_optim = sd.optim + se.optim, r->mem_expert_states = se.weights + se.grads + se.optim;
    r->mem_act = act, r->mem_work = work, r->mem_total = total;
    r->inflight_layers = inflight, r->params_per_gpu = dense + expert;
    r->expert_params_per_gpu = expert, r->fullest_stage = i;
  }
  if (why)
    fprintf(why,
            "  stage %d: %d layers (%d MoE), %.4g params/GPU (%.4g of them routed experts, /ep %d);"
            " activations %.4g MiB x %.4g layer-micro-batches in flight (%s) = %.4g GiB;"
            " working %.4g GiB; total %.4g GiB\n",
            i, st.count, st.moe, dense + expert, expert, ep, per_layer / 1048576, inflight,
            plan_sched_name(l->schedule), act / PLAN_GIB, work / PLAN_GIB, total / PLAN_GIB);
  return total;
}

static double hw_flops_per_token(const plan_model_t *m, plan_recompute_t rc) {
  plan_attn_widths_t w = plan_model_attn_widths(m);
  double attn = 2.0 * m->seq * (w.qk + w.o), sum = 0;
  for (int i = 0; i < m->layers; i++) {
    double layer = plan_model_layer_fwd_flops(m, plan_model_layer_is_moe(m, i));
    sum += 3 * layer + (rc == PLAN_RECOMPUTE_FULL ? layer : 0) +
           (rc == PLAN_RECOMPUTE_SELECTIVE && !m->flash_attention ? attn : 0);
  }
  return sum + 6.0 * m->vocab * m->hidden;
}

typedef struct {
  plan_cost_t dense, moe, emb, head;
} costs_t;

// One micro-batch through stage i: fills the t_* fields and the per-micro-
// batch traffic when it is the busiest so far.
static void stage_time(const plan_model_t *m, const plan_layout_t *l, const costs_t *k, int i,
                       plan_result_t *r, double *busiest, double *tp_bytes, double *cp_bytes,
                       double *ep_bytes) {
  plan_stage_t st;
  plan_stage_split(m, l->pp, i, &st);
  int p = l->pp, first = i == 0, last = i == p - 1, full = l->recompute == PLAN_RECOMPUTE_FULL;
  double nd = st.count - st.moe, nm = st.moe;
  double fwd = nd * k->dense.fwd + nm * k->moe.fwd + (first ? k->emb.fwd : 0) + (last ? k->head.fwd : 0);
  double bwd = nd * k->dense.bwd + nm * k->moe.bwd + (first ? k->emb.bwd : 0) + (last ? k->head.bwd : 0);
  double rec = full ? nd * k->dense.fwd + nm * k->moe.fwd
               : l->recompute == PLAN_RECOMPUTE_SELECTIVE && !m->flash_attention
                   ? nd * k->dense.core_fwd + nm * k->moe.core_fwd
                   : 0;
  double again = full ? 1 : 0;  // full recompute repeats the forward's traffic
  double tp = nd * (k->dense.tp_fwd * (1 + again) + k->dense.tp_bwd) +
              nm * (k->moe.tp_fwd * (1 + again) + k->moe.tp_bwd) +
              (first ? k->emb.tp_fwd + k->emb.tp_bwd : 0) + (last ? k->head.tp_fwd + k->head.tp_bwd : 0);
  double cp = nd * (k->dense.cp_fwd * (1 + again) + k->dense.cp_bwd) +
              nm * (k->moe.cp_fwd * (1 + again) + k->moe.cp_bwd);
  double ep = nm * (k->moe.ep_fwd * (1 + again) + k->moe.ep_bwd);
  double total = fwd + bwd + rec + tp + cp + ep;
  if (total <= *busiest) return;
  *busiest = total;
  r->t_mb = total, r->t_fwd = fwd, r->t_bwd = bwd, r->t_recompute = rec;
  r->t_tp = tp, r->t_cp = cp, r->t_ep = ep, r->stage_layers = st.count;
  double scale = full ? 1.5 : 1;  // one more forward's worth of traffic
  *tp_bytes = (nd * k->dense.tp_bytes + nm * k->moe.tp_bytes) * scale + (first ? k->emb.tp_bytes : 0) +
              (last ? k->head.tp_bytes : 0);
  *cp_bytes = (nd * k->dense.cp_bytes + nm * k->moe.cp_bytes) * (full ? 4.0 / 3 : 1);
  *ep_bytes = nm * k->moe.ep_bytes * scale;
}

// Exposed time of a bucketed collective of `total` seconds run behind
// `window` seconds of compute: what does not fit, and at least the last
// bucket (Megatron-Core's default bucket: max(40M, 1M x dp) parameters,
// DistributedDataParallelConfig.bucket_size).
static double exposed(double total, double window, double params, int ranks, int overlap) {
  if (total <= 0) return 0;
  if (!overlap) return total;
  double bucket = fmax(40e6, 1e6 * ranks), share = params > bucket ? bucket / params : 1;
  return fmax(total - window, total * share);
}

static void data_parallel(const plan_job_t *j, const plan_layout_t *l, const plan_links_t *links,
                          double psi_d, double psi_e, plan_result_t *r) {
  double wb = j->bytes.weight, gb = j->bytes.grad, fwd = r->t_fwd, bwd = r->t_bwd + r->t_recompute;
  int nd = links->dp.n, ne = links->edp.n;
  double grad, gather = 0, bytes;
  if (l->zero == 0) {
    grad = plan_allreduce_time(gb * psi_d, nd, links->dp.busbw, links->dp.lat) +
           plan_allreduce_time(gb * psi_e, ne, links->edp.busbw, links->edp.lat);
    bytes = 2.0 * (nd - 1) / nd * gb * psi_d + (ne > 1 ? 2.0 * (ne - 1) / ne * gb * psi_e : 0);
  } else {
    grad = plan_allgather_time(gb * psi_d, nd, links->dp.busbw, links->dp.lat) +
           plan_allgather_time(gb * psi_e, ne, links->edp.busbw, links->edp.lat);
    gather = plan_allgather_time(wb * psi_d, nd, links->dp.busbw, links->dp.lat) +
             plan_allgather_time(wb * psi_e, ne, links->edp.busbw, links->edp.lat);
    bytes = (nd - 1.0) / nd * (gb + wb) * psi_d + (ne > 1 ? (ne - 1.0) / ne * (gb + wb) * psi_e : 0);
  }
  r->dp_time = grad + gather;
  r->dp_bytes = bytes;
  r->dp_exposed = exposed(grad, bwd, psi_d + psi_e, nd, j->dp_overlap) +
                  exposed(gather, fwd, psi_d + psi_e, nd, j->dp_overlap);
  // ZeRO-2 keeps only its shard of the gradients, so it cannot accumulate
  // them over micro-batches: each micro-batch's gradients are reduce-
  // scattered during its own backward (DeepSpeed's and FSDP's behaviour),
  // hidden behind that micro-batch's compute when the links keep up.
  double mbs = r->micro_batches;
  if (l->zero == 2 && mbs > 1) {
    double window = fwd + bwd;
    r->dp_time += (mbs - 1) * grad;
    r->dp_bytes += (mbs - 1) * ((nd - 1.0) / nd * gb * psi_d + (ne > 1 ? (ne - 1.0) / ne * gb * psi_e : 0));
    r->dp_exposed += (mbs - 1) * (j->dp_overlap ? fmax(0, grad - window) : grad);
  }
}

void plan_evaluate(const plan_model_t *m, const plan_cluster_t *c, const plan_job_t *j,
                   const plan_layout_t *layout, plan_result_t *r, FILE *why) {
  memset(r, 0, sizeof(*r));
  plan_layout_t lay = *layout;
  if (lay.cp < 1) lay.cp = 1;
  if (lay.ep < 1) lay.ep = 1;
  const plan_layout_t *l = &lay;
  if (check_divisibility(m, c, j, l, r) != 0) return;
  int t = l->tp, p = l->pp, d = l->dp, v = l->interleave, cp = l->cp, ep = l->ep;
  int sp = j->sequence_parallel, moe = plan_model_is_moe(m);
  double b = l->micro_batch, mbs = j->global_batch / d / b, e = j->bytes.act;
  plan_links_t links = plan_links(c, &j->calib, t, cp, d, ep);
  r->micro_batches = mbs;

  // Memory: every stage, the fullest one reported.
  acts_t a = {0};
  a.act_dense = plan_layer_activation_bytes(m, 0, b, t, cp, sp, l->recompute, e, NULL);
  a.none_dense = plan_layer_activation_bytes(m, 0, b, t, cp, sp, PLAN_RECOMPUTE_NONE, e, NULL);
  if (moe) {
    a.act_moe = plan_layer_activation_bytes(m, 1, b, t, cp, sp, l->recompute, e, NULL);
    a.none_moe = plan_layer_activation_bytes(m, 1, b, t, cp, sp, PLAN_RECOMPUTE_NONE, e, NULL);
  }
  r->act_per_layer = plan_layer_activation_bytes(m, moe, b, t, cp, sp, l->recompute, e, why);
  int fullest = 0;
  double worst = -1;
  for (int i = 0; i < p; i++) {
    double mem = stage_memory(m, j, l, i, &a, mbs, r, 0, NULL);
    if (mem > worst) worst = mem, fullest = i;
  }
  stage_memory(m, j, l, fullest, &a, mbs, r, 1, why);
  r->mem_usable = c->mem_bytes - j->calib.reserve_bytes;

  // Time of one micro-batch through each stage; the busiest sets the pace.
  int has_dense = plan_model_moe_layers(m) < m->layers;
  costs_t k = {.dense = plan_layer_cost(m, c, j, l, 0, &links, has_dense ? why : NULL),
               .emb = plan_embedding_cost(m, c, j, l, &links),
               .head = plan_head_cost(m, c, j, l, &links)};
  if (moe) k.moe = plan_layer_cost(m, c, j, l, 1, &links, why);
  double busiest = -1, tp_bytes = 0, cp_bytes = 0, ep_bytes = 0;
  for (int i = 0; i < p; i++) stage_time(m, l, &k, i, r, &busiest, &tp_bytes, &cp_bytes, &ep_bytes);
  r->tp_bytes = tp_bytes * mbs, r->cp_bytes = cp_bytes * mbs, r->ep_bytes = ep_bytes * mbs;
  r->tp_time = r->t_tp * mbs, r->cp_time = r->t_cp * mbs, r->ep_time = r->t_ep * mbs;
  double comm_mb = r->t_tp + r->t_cp + r->t_ep, compute_mb = r->t_mb - comm_mb;

  // Parameters of the fullest stage, for the data-parallel traffic.
  double psi_e = r->expert_params_per_gpu, psi_d = r->params_per_gpu - psi_e;

  // ZeRO-3 gathers the weights for every micro-batch (twice, three times
  // with full recompute) and reduce-scatters gradients, layer by layer
  // (each paying the ring's latency); prefetching hides them behind the
  // micro-batch's compute when the links keep up.
  double wb = j->bytes.weight, gb = j->bytes.grad;
  if (l->zero == 3) {
    int gathers = 2 + (l->recompute == PLAN_RECOMPUTE_FULL);
    double blocks = r->stage_layers + 1, bd = psi_d / blocks, be = psi_e / blocks;
    double z3 = blocks * (gathers * (plan_allgather_time(wb * bd, links.dp.n, links.dp.busbw, links.dp.lat) +
                                     plan_allgather_time(wb * be, links.edp.n, links.edp.busbw, links.edp.lat)) +
                          plan_allgather_time(gb * bd, links.dp.n, links.dp.busbw, links.dp.lat) +
                          plan_allgather_time(gb * be, links.edp.n, links.edp.busbw, links.edp.lat));
    int nd = links.dp.n, ne = links.edp.n;
    r->dp_bytes = mbs * (gathers * wb + gb) * ((nd - 1.0) / nd * psi_d + (ne > 1 ? (ne - 1.0) / ne * psi_e : 0));
    r->dp_time = mbs * z3;
    if (z3 > r->t_mb) r->t_mb = z3;
  }

  // Pipeline: fill and drain cost (p - 1)/v micro-batch slots.
  double msg = e * b * m->seq / cp * m->hidden / t;  // scatter/gather (or SP) shards the boundary
  double cross = p > 1 ? plan_p2p_time(msg, links.pp_bw, links.pp_lat) : 0;
  double slots = mbs + (p - 1.0) / v;
  r->bubble = plan_bubble_fraction(p, v, mbs);
  r->t_p2p = slots * 2 * v * cross;
  r->pp_bytes = p > 1 ? 2.0 * v * mbs * msg : 0;
  r->pp_time = r->t_p2p;
  r->t_pipeline = slots * (r->t_mb + 2 * v * cross);

  if (l->zero < 3 && (links.dp.n > 1 || links.edp.n > 1)) data_parallel(j, l, &links, psi_d, psi_e, r);
  // Adam reads and writes its state, reads the gradient, writes the weights.
  double local = l->zero >= 1 ? psi_d / links.dp.n + psi_e / links.edp.n : psi_d + psi_e;
  r->t_optimizer = (2 * j->bytes.optim + gb + wb) * local / plan_mem_rate(c, &j->calib);
  // DeepSpeed's engine pays a host-side cost in every micro-batch slot;
  // every step pays a fixed overhead; and a synchronous step ends when the
  // slowest of N GPUs does: with a relative spread sigma per GPU, about
  // sigma sqrt(2 ln N) later than the mean (the expected maximum of N
  // normal deviates).
  r->t_engine = j->engine == PLAN_ENGINE_DEEPSPEED ? slots * j->calib.engine_mb_overhead : 0;
  r->t_overhead = j->calib.step_overhead;
  double base = r->t_pipeline + r->t_engine + r->dp_exposed + r->t_optimizer + r->t_overhead;
  r->t_jitter = j->gpus > 1 ? base * j->calib.jitter * sqrt(2 * log((double)j->gpus)) : 0;
  r->step_time = base + r->t_jitter;

  double tokens = j->global_batch * m->seq, peak = c->peak_flops;
  double fpt = plan_model_flops_per_token(m, 1, why), fpt6 = plan_model_flops_per_token(m, 0, NULL);
  r->model_flops = fpt * tokens;
  r->hw_flops = hw_flops_per_token(m, l->recompute) * tokens;
  r->model_tflops = r->model_flops / (r->step_time * j->gpus) / 1e12;
  r->hw_tflops = r->hw_flops / (r->step_time * j->gpus) / 1e12;
  r->mfu = r->model_tflops * 1e12 / peak;
  r->hfu = r->hw_tflops * 1e12 / peak;
  r->mfu_causal = r->mfu * (fpt - 0.5 * (fpt - fpt6)) / fpt;
  r->tokens_per_gpu_s = tokens / (r->step_time * j->gpus);
  r->gpu_hours_per_t_tokens = 1e12 / r->tokens_per_gpu_s / 3600;
  double steps = plan_training_tokens(m, j) / tokens;
  r->days = steps * r->step_time / 86400;

  if (why)
    fprintf(why,
            "  micro-batch on the busiest stage (%d layers): fwd %.4g + bwd %.4g + recompute %.4g"
            " + TP %.4g + CP %.4g + EP %.4g = t_mb %.4g s\n"
            "  pipeline: m = %.0f micro-batches, bubble (p-1)/(v m) = %d/(%d x %.0f) = %.4f;"
            " p2p %.4g MB per hop at %.4g GB/s\n"
            "    (m + (p-1)/v)(t_mb + 2 v t_p2p) = %.4g x (%.4g + %.4g) = %.4g s\n"
            "  DP (ZeRO-%d, dense over %d ranks at %.4g GB/s, experts over %d at %.4g GB/s):"
            " %.4g GB per GPU, %.4g s, exposed %.4g s; optimizer %.4g s\n"
            "  engine (%s) %.4g s + per-step overhead %.4g s; slowest of %d GPUs: sigma sqrt(2 ln N)"
            " = %.4g x %.4g = %.4g s\n"
            "  step = %.4g + %.4g + %.4g + %.4g + %.4g = %.4g s; MFU = %.4g / (%.4g s x %d x %.4g)"
            " = %.4f, HFU %.4f\n"
            "  %.4g tokens/s per GPU = %.4g GPU hours per trillion tokens\n"
            "  days = tokens / (batch s) x step = %.4g / %.4g x %.4g s = %.4g days\n",
            r->stage_layers, r->t_fwd, r->t_bwd, r->t_recompute, r->t_tp, r->t_cp, r->t_ep, r->t_mb,
            mbs, p - 1, v, mbs, r->bubble, msg / 1e6, links.pp_bw / 1e9, slots, r->t_mb,
            2 * v * cross, r->t_pipeline, l->zero, links.dp.n, links.dp.busbw / 1e9, links.edp.n,
            links.edp.busbw / 1e9, r->dp_bytes / 1e9, r->dp_time, r->dp_exposed, r->t_optimizer,
            plan_engine_name(j->engine), r->t_engine, r->t_overhead, j->gpus,
            j->gpus > 1 ? j->calib.jitter * sqrt(2 * log((double)j->gpus)) : 0, base, r->t_jitter,
            r->t_pipeline, r->t_engine, r->dp_exposed, r->t_optimizer, r->t_overhead + r->t_jitter,
            r->step_time, r->model_flops,
            r->step_time, j->gpus, peak, r->mfu, r->hfu, r->tokens_per_gpu_s,
            r->gpu_hours_per_t_tokens, plan_training_tokens(m, j), tokens, r->step_time, r->days);

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
    // Waiting on links longer than computing is a warning, not a refusal:
    // the step time above already pays for it, and runs that overlap what
    // the model puts on the critical path (DualPipe, TP overlap) trained so.
    double waiting = mbs * (comm_mb + fmax(0, r->t_mb - compute_mb - comm_mb)) + r->t_p2p + r->dp_exposed;
    double working = mbs * compute_mb;
    if (waiting > working)
      snprintf(r->warning, sizeof(r->warning),
               "communication-bound: %.3g s per step waiting on links vs %.3g s of compute", waiting,
               working);
  }
}
