/*
 * plan_time.c — how long one layer takes on one GPU for one micro-batch,
 * kernel by kernel, and what it sends over which link; and the arithmetic
 * of training time.
 *
 * GEMMs. A GEMM of M x K by K x N does 2 M N K FLOPs and moves
 * e (M K + K N + M N) bytes; its time is max(FLOPs / F_eff, bytes / B) plus
 * a launch gap (a roofline: the thin GEMMs that tensor parallelism and small
 * experts make fall off the flat part by themselves). F_eff is the GPU's
 * sustained GEMM rate (peak x the measured gemm_eff of its preset) scaled
 * for the shape as NVIDIA's Matrix Multiplication Background guide explains
 * it: output tiles of 128 x 128 (tile quantisation: a partial tile costs a
 * whole one) run in waves over the SMs, and the last, partial wave leaves
 * SMs idle (wave quantisation), so a GEMM reaches
 *   useful tiles / (ceil(tiles / SMs) x SMs)
 * of F. The backward of a weight GEMM is its two gradient GEMMs, each timed
 * with its own shape (dX = dY W^T: M x N by N x K; dW = X^T dY: K x M by M x N).
 *
 * Attention. A fused (flash) kernel runs at peak x the attention efficiency
 * its paper measured on that GPU (forward and backward separately), with
 * the same wave rule over (batch x heads x query blocks); a causal kernel
 * skips the masked half; its backward does 2.5x the forward's FLOPs (5
 * matmuls against 2, Dao 2023). Without fusion the two s x s products are
 * batched GEMMs and the softmax/dropout are memory-bound.
 *
 * Memory-bound kernels (norms, residual adds with dropout, the activation
 * function, rotary embedding, MoE routing and permutation) cost their bytes
 * over HBM bandwidth x hbm_eff; their backward about twice the bytes.
 *
 * Communication per layer (plan_comm.c gives the links): tensor-parallel
 * collectives (one per attention block and one per MLP each way; an MoE
 * layer's all-gather/reduce-scatter carries topk copies of the tokens) are
 * on the critical path, as in Megatron-LM without communication overlap.
 * The context-parallel ring (Megatron-Core's: K and V blocks passed round
 * cp ranks, each step overlapped with the previous block's attention)
 * exposes only what a step's transfer takes beyond its attention. The
 * expert-parallel all-to-alls (dispatch and combine, each way) are on the
 * critical path.
 */
#include <math.h>

#include "plan_internal.h"

// Output tile edge of the wave model: the 128 x 128 threadblock tile of the
// examples in NVIDIA's "Matrix Multiplication Background User's Guide"
// (tile and wave quantisation sections).
#define TILE 128.0

static double gemm_eff_of(const plan_cluster_t *c, const plan_calib_t *k) {
  return k->gemm_eff > 0 ? k->gemm_eff : c->gemm_eff;
}

// The clock a training job holds, relative to the benchmarks' (1 if unknown).
static double sustain_of(const plan_cluster_t *c) {
  return c->clock_sustain > 0 ? c->clock_sustain : 1;
}

double plan_gemm_rate(const plan_cluster_t *c, const plan_calib_t *k) {
  return c->gemm_flops > 0 ? c->gemm_flops : c->peak_flops * gemm_eff_of(c, k) * sustain_of(c);
}

double plan_mem_rate(const plan_cluster_t *c, const plan_calib_t *k) {
  return c->hbm_bw * k->hbm_eff;
}

typedef struct {
  double F;           // GEMM FLOP/s over the whole GPU
  double Af, Ab;      // fused attention FLOP/s, forward and backward
  double B;           // memory-bound bytes/s
  double e;           // bytes per activation element
  double sms, gap;    // streaming multiprocessors (0 = no wave model), seconds per kernel
} rates_t;

static rates_t rates(const plan_cluster_t *c, const plan_job_t *job) {
  const plan_calib_t *k = &job->calib;
  double ge = gemm_eff_of(c, k);
  double af = k->attn_fwd_eff > 0 ? k->attn_fwd_eff : c->attn_fwd_eff > 0 ? c->attn_fwd_eff : ge;
  double ab = k->attn_bwd_eff > 0 ? k->attn_bwd_eff : c->attn_bwd_eff > 0 ? c->attn_bwd_eff : af;
  rates_t r = {.F = plan_gemm_rate(c, k), .B = plan_mem_rate(c, k), .e = job->bytes.act,
               .sms = c->sms, .gap = k->kernel_gap};
  if (c->gemm_flops > 0) {
    // A measured GEMM rate: attention keeps its published ratio to GEMMs.
    double base = ge > 0 ? ge : 1;
    r.Af = r.F * (ge > 0 ? af / base : 1);
    r.Ab = r.F * (ge > 0 ? ab / base : 1);
  } else {
    r.Af = c->peak_flops * af * sustain_of(c);
    r.Ab = c->peak_flops * ab * sustain_of(c);
  }
  return r;
}

// Fused attention over key blocks of L tokens reaches L / (L + L0) of its
// rate, relative to the PLAN_ATTN_REF_LEN tokens its efficiency was measured
// at: the fixed cost of each query tile's prologue and epilogue.
static double attn_length_use(const plan_job_t *job, double L) {
  double L0 = job->calib.attn_half_len;
  if (L0 <= 0 || L <= 0) return 1;
  return fmin(1, (L / (L + L0)) / (PLAN_ATTN_REF_LEN / (PLAN_ATTN_REF_LEN + L0)));
}

// The last wave of tiles runs on part of the GPU: tiles / (waves x SMs).
static double wave_use(const rates_t *r, double tiles) {
  if (r->sms <= 0 || tiles <= 0) return 1;
  return tiles / (ceil(tiles / r->sms) * r->sms);
}

// One (batched) GEMM kernel: `count` products of M x K by K x N. Partial
// tiles cost whole ones (tile quantisation), partial waves whole waves.
static double gemm(const rates_t *r, double M, double N, double K, double count) {
  if (M <= 0 || N <= 0 || K <= 0 || count <= 0) return 0;
  double flops = 2 * M * N * K * count, bytes = count * r->e * (M * K + K * N + M * N);
  double rows = ceil(M / TILE), cols = ceil(N / TILE), tiles = count * rows * cols;
  double filled = M * N / (rows * cols * TILE * TILE);  // useful share of the tiles
  return fmax(flops / (r->F * wave_use(r, tiles) * filled), bytes / r->B) + r->gap;
}

// A weight GEMM (M tokens, K in, N out) forward and its two gradients.
typedef struct {
  double fwd, bwd;
} pass_t;

static pass_t weight_gemm(const rates_t *r, double M, double N, double K, double count) {
  return (pass_t){gemm(r, M, N, K, count), gemm(r, M, K, N, count) + gemm(r, K, N, M, count)};
}

static void add(pass_t *sum, pass_t p) {
  sum->fwd += p.fwd;
  sum->bwd += p.bwd;
}

// The attention projections of one layer for T tokens on one of t ranks.
static pass_t attention_gemms(const plan_model_t *m, const rates_t *r, double T, double t) {
  double h = m->hidden;
  plan_attn_widths_t w = plan_model_attn_widths(m);
  pass_t p = {0};
  if (m->kv_lora > 0) {
    // Latent attention: the down-projections are whole on every tp rank,
    // the up-projections split over heads.
    if (m->q_lora > 0) {
      add(&p, weight_gemm(r, T, m->q_lora, h, 1));
      add(&p, weight_gemm(r, T, w.qk / t, m->q_lora, 1));
    } else {
      add(&p, weight_gemm(r, T, w.qk / t, h, 1));
    }
    add(&p, weight_gemm(r, T, m->kv_lora + m->rope_dim, h, 1));
    add(&p, weight_gemm(r, T, (double)m->heads * 2 * m->head_dim / t, m->kv_lora, 1));
  } else {
    add(&p, weight_gemm(r, T, (w.qk + w.k + w.v) / t, h, 1));
  }
  add(&p, weight_gemm(r, T, h, w.o / t, 1));
  return p;
}

// The MLP of one layer: dense, or the routed and shared experts of an MoE
// layer (balanced routing: each of the E/ep local experts gets
// T topk ep / E tokens once the all-to-all has gathered them).
static pass_t mlp_gemms(const plan_model_t *m, const rates_t *r, double T, double t, double ep,
                        int moe) {
  double h = m->hidden, up = m->mlp == PLAN_MLP_SWIGLU ? 2 : 1;
  pass_t p = {0};
  if (!moe) {
    add(&p, weight_gemm(r, T, up * m->ffn / t, h, 1));
    add(&p, weight_gemm(r, T, h, m->ffn / t, 1));
    return p;
  }
  double fe = m->expert_ffn, local = m->experts / ep, per_expert = T * m->topk * ep / m->experts;
  add(&p, weight_gemm(r, T, m->experts, h, 1));  // router
  add(&p, weight_gemm(r, per_expert, up * fe / t, h, local));
  add(&p, weight_gemm(r, per_expert, h, fe / t, local));
  if (m->shared_experts > 0) {
    add(&p, weight_gemm(r, T, up * m->shared_experts * fe / t, h, 1));
    add(&p, weight_gemm(r, T, h, m->shared_experts * fe / t, 1));
  }
  return p;
}

plan_cost_t plan_layer_cost(const plan_model_t *m, const plan_cluster_t *c, const plan_job_t *job,
                            const plan_layout_t *l, int moe, const plan_links_t *links, FILE *why) {
  rates_t r = rates(c, job);
  int tp = l->tp, cp = l->cp > 0 ? l->cp : 1, ep = l->ep > 0 ? l->ep : 1;
  double e = r.e, t = tp, b = l->micro_batch, s = m->seq, h = m->hidden, T = b * s / cp;
  plan_attn_widths_t w = plan_model_attn_widths(m);
  double heads = b * m->heads / t, mask = m->dropout ? 1 : 0;
  double rep = job->sequence_parallel ? t : 1;
  double gate = m->mlp == PLAN_MLP_SWIGLU ? 3 : 2;
  plan_cost_t k = {0};

  pass_t g = attention_gemms(m, &r, T, t);
  add(&g, mlp_gemms(m, &r, T, t, ep, moe));
  k.gemm_fwd = g.fwd;

  // Attention core. With cp ranks each holds 2 of 2 cp sequence chunks
  // (causal load balancing), so each does 1/cp of the causal work, in cp
  // steps of s/cp queries against s/cp keys.
  double attn_bwd;
  if (m->flash_attention) {
    double flops = 0.5 * 2 * heads * s * s * (w.qk + w.o) / m->heads / cp;  // causal: half
    double bytes = e * (T * (w.qk + w.o) + b * s * (w.k + w.v)) / t;
    // A block per head and query tile; short key blocks (each cp step sees
    // s/cp keys) run below the long-sequence rate the efficiencies were
    // measured at.
    double use = wave_use(&r, heads * ceil(s / cp / TILE)) * attn_length_use(job, s / cp);
    k.attn_fwd = fmax(flops / (r.Af * use), bytes / r.B) + cp * r.gap;
    attn_bwd = fmax(2.5 * flops / (r.Ab * use), 2 * bytes / r.B) + cp * r.gap;
  } else {
    double dqk = w.qk / m->heads, dv = w.o / m->heads;
    double scores = heads * s * s;  // elements of the s x s score matrices
    double softmax_dropout = scores * (2 * e + mask * (2 * e + 1));
    int kernels = 1 + (m->dropout ? 1 : 0);  // fused scale-mask-softmax, dropout
    double qk = gemm(&r, s, s, dqk, heads), pv = gemm(&r, s, dv, s, heads);
    k.attn_fwd = qk + pv + softmax_dropout / r.B + kernels * r.gap;
    attn_bwd = 2 * (qk + pv) + scores * (3 * e + mask * (2 * e + 1)) / r.B + kernels * r.gap;
  }
  k.core_fwd = k.attn_fwd;

  // Memory-bound kernels: two norms (read + write), two residual adds with
  // dropout (read two, write one, write a mask), the activation function of
  // every MLP a token passes (topk + shared experts in an MoE layer),
  // rotary embedding, and for MoE the router's softmax/top-k and the token
  // permutation before and after the experts.
  double mlp_width = moe ? (m->topk + m->shared_experts) * (double)m->expert_ffn : m->ffn;
  double rotary = m->learned_positions ? 0
                  : m->kv_lora > 0     ? T * 2 * e * ((double)m->heads + 1) * m->rope_dim / t
                                       : T * 2 * e * (w.qk + w.k) / t;
  double bytes = T * (2 * 2 * e * h + 2 * (3 * e + mask) * h) / rep + T * gate * e * mlp_width / t +
                 rotary;
  int kernels = 2 + 2 + 1 + (m->learned_positions ? 0 : 1);
  if (moe) {
    bytes += T / rep * (2 * 4.0 * m->experts + 2 * e * h * (1 + m->topk));
    kernels += 3;
  }
  if (m->kv_lora > 0) {
    bytes += T * 2 * e * (m->q_lora + m->kv_lora);
    kernels += 2;
  }
  k.mem_fwd = bytes / r.B + kernels * r.gap;

  k.fwd = k.gemm_fwd + k.attn_fwd + k.mem_fwd;
  k.bwd = g.bwd + attn_bwd + 2 * k.mem_fwd;

  // Tensor parallel: an AllReduce (or AllGather + ReduceScatter with
  // sequence parallelism, the same bytes) of e T h after attention and after
  // the MLP, each way; an MoE layer's routed tokens go through the
  // collective topk times over, its shared experts once more.
  double act = e * T * h;
  double units = 1 + (moe ? m->topk + (m->shared_experts > 0) : 1);
  double one = plan_allreduce_time(act, tp, links->tp.busbw, links->tp.lat);
  k.tp_fwd = k.tp_bwd = units * one;
  if (job->tp_overlap) {
    // Chunked all-gather/GEMM and GEMM/reduce-scatter pipelines hide the
    // collectives behind the layer's GEMMs; what exceeds them is exposed.
    k.tp_fwd = fmax(0, units * one - g.fwd);
    k.tp_bwd = fmax(0, units * one - g.bwd);
  }
  k.tp_bytes = tp > 1 ? 2 * units * 2.0 * (tp - 1) / tp * act : 0;

  // Context parallel ring: each step passes this rank's K and V block on
  // (backward: K, V and their gradients) while attention runs on the
  // previous one.
  if (cp > 1) {
    double kv = e * T * (w.k + w.v) / t;
    double step_f = plan_p2p_time(kv, links->cp_bw, links->cp_lat);
    double step_b = plan_p2p_time(2 * kv, links->cp_bw, links->cp_lat);
    k.cp_fwd = (cp - 1) * fmax(0, step_f - k.attn_fwd / cp);
    k.cp_bwd = (cp - 1) * fmax(0, step_b - attn_bwd / cp);
    k.cp_bytes = 3.0 * (cp - 1) * kv;
  }

  // Expert parallel: dispatch and combine, forward and backward, each an
  // all-to-all of topk copies of this rank's tokens.
  if (moe && ep > 1) {
    double v = e * m->topk * h * T / t;
    double a2a = plan_alltoall_time(v, ep, links->ep.per_node, links->ep_nvlink_bw,
                                    links->ep_net_bw, links->ep_lat);
    k.ep_fwd = k.ep_bwd = 2 * a2a;
    k.ep_bytes = 4 * v * (ep - 1.0) / ep;
  }

  if (why) {
    fprintf(why,
            "  %s layer forward, micro-batch %g (T = b s/cp = %.0f tokens), tp %d, cp %d:\n"
            "    GEMMs (attention projections, %s): fwd %.3f ms, bwd %.3f ms at F = %.4g TFLOP/s"
            " before wave and tile losses\n"
            "    attention core (%s): %.3f ms; memory-bound kernels %.4g MB at B = %.4g GB/s:"
            " %.3f ms\n"
            "    forward %.3f ms, backward %.3f ms\n"
            "    TP: %g collectives of e T h = %.4g MB each way, 2 (t-1)/t S / busbw (%.4g GB/s)"
            " + 2 (t-1) alpha: %.3f ms per pass\n",
            moe ? "MoE" : "dense", b, T, tp, cp,
            moe ? "router, experts" : "MLP", g.fwd * 1e3, g.bwd * 1e3, r.F / 1e12,
            m->flash_attention ? "fused, causal" : "materialised s x s", k.attn_fwd * 1e3,
            bytes / 1e6, r.B / 1e9, k.mem_fwd * 1e3, k.fwd * 1e3, k.bwd * 1e3, units, act / 1e6,
            links->tp.busbw / 1e9, k.tp_fwd * 1e3);
    if (cp > 1)
      fprintf(why,
              "    CP: %d ring steps of K,V = %.4g MB at %.4g GB/s against %.3f ms of attention"
              " each: exposed %.3f ms fwd, %.3f ms bwd\n",
              cp - 1, e * T * (w.k + w.v) / t / 1e6, links->cp_bw / 1e9, k.attn_fwd / cp * 1e3,
              k.cp_fwd * 1e3, k.cp_bwd * 1e3);
    if (moe && ep > 1)
      fprintf(why,
              "    EP: 2 all-to-alls each way of topk e h T/t = %.4g MB over %d ranks (%d in a node):"
              " %.3f ms per pass\n",
              e * m->topk * h * T / t / 1e6, ep, links->ep.per_node, k.ep_fwd * 1e3);
  }
  return k;
}

plan_cost_t plan_embedding_cost(const plan_model_t *m, const plan_cluster_t *c,
                                const plan_job_t *job, const plan_layout_t *l,
                                const plan_links_t *links) {
  rates_t r = rates(c, job);
  int tp = l->tp, cp = l->cp > 0 ? l->cp : 1;
  double T = l->micro_batch * (double)m->seq / cp, act = r.e * T * m->hidden;
  plan_cost_t k = {0};
  // Gather rows (read + write), backward scatter-adds them; the vocabulary is
  // split over tp ranks and summed with one collective.
  k.mem_fwd = k.fwd = 2 * act / r.B + r.gap;
  k.bwd = 2 * act / r.B + r.gap;
  k.tp_fwd = plan_allreduce_time(act, tp, links->tp.busbw, links->tp.lat);
  k.tp_bytes = tp > 1 ? 2.0 * (tp - 1) / tp * act : 0;
  return k;
}

plan_cost_t plan_head_cost(const plan_model_t *m, const plan_cluster_t *c, const plan_job_t *job,
                           const plan_layout_t *l, const plan_links_t *links) {
  rates_t r = rates(c, job);
  int tp = l->tp, cp = l->cp > 0 ? l->cp : 1;
  double T = l->micro_batch * (double)m->seq / cp, h = m->hidden, vt = (double)m->vocab / tp;
  double act = r.e * T * h;
  plan_cost_t k = {0};
  // Final norm, the vocabulary-parallel output GEMM, cross-entropy over the
  // logits (read them, write their gradient).
  pass_t g = weight_gemm(&r, T, vt, h, 1);
  k.gemm_fwd = g.fwd;
  k.mem_fwd = (2 * act / (job->sequence_parallel ? tp : 1) + 2 * r.e * T * vt) / r.B + 2 * r.gap;
  k.fwd = k.gemm_fwd + k.mem_fwd;
  k.bwd = g.bwd + k.mem_fwd;
  k.tp_fwd = k.tp_bwd = plan_allreduce_time(act, tp, links->tp.busbw, links->tp.lat);
  k.tp_bytes = tp > 1 ? 2 * 2.0 * (tp - 1) / tp * act : 0;
  return k;
}

double plan_training_tokens(const plan_model_t *m, const plan_job_t *job) {
  return job->tokens > 0 ? job->tokens : 20 * plan_model_params(m);  // Chinchilla's 20 per param
}

double plan_days_to_train(double flops, int n, double peak, double mfu, FILE *why) {
  double seconds = flops / (n * peak * mfu);
  if (why)
    fprintf(why, "  T = C / (n F MFU) = %.4g / (%d x %.4g x %.3g) = %.4g s = %.4g days\n", flops,
            n, peak, mfu, seconds, seconds / 86400);
  return seconds / 86400;
}
