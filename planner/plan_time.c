/*
 * plan_time.c — how long one layer takes on one GPU, and the arithmetic of
 * training time.
 *
 * Every kernel is timed with a roofline, max(FLOPs / F, bytes / B), plus a
 * fixed launch gap, where F = peak x gemm_eff (or a measured GEMM rate) and
 * B = HBM bandwidth x hbm_eff. A GEMM of M x K by K x N does 2 M N K FLOPs and
 * moves e (M K + K N + M N) bytes, so the matmuls that tensor parallelism
 * makes thin, and the s x s attention products (K = head_dim), fall off the
 * flat part of the roof by themselves. Its 128 x 128 output tiles run in
 * waves over the GPU's SMs; a last, partial wave leaves SMs idle, so small
 * GEMMs reach only tiles / (waves x SMs) of F. Memory-bound kernels (norms, residual adds,
 * dropout, activation functions, softmax) cost their bytes over B. The
 * backward pass is two GEMMs per forward GEMM and about twice the bytes of
 * each memory-bound kernel. A fused (flash) attention kernel runs at
 * peak x attn_eff (its softmax runs on the slower special-function units, so
 * it stays below a GEMM), its backward does 2.5x its forward FLOPs, and a
 * causal fused kernel skips the masked half of s x s.
 * Tensor-parallel collectives (two per layer each way: AllReduce, or
 * AllGather + ReduceScatter with sequence parallelism) are on the critical
 * path, as in Megatron-LM without communication overlap.
 */
#include <math.h>

#include "plan_internal.h"

#define TILE 128.0  // GEMM output tile edge, for the wave model

double plan_gemm_rate(const plan_cluster_t *c, const plan_calib_t *k) {
  return c->gemm_flops > 0 ? c->gemm_flops : c->peak_flops * k->gemm_eff;
}

double plan_mem_rate(const plan_cluster_t *c, const plan_calib_t *k) {
  return c->hbm_bw * k->hbm_eff;
}

typedef struct {
  double F, A, B, e;  // GEMM FLOP/s, fused-attention FLOP/s, memory bytes/s, bytes per element
  double sms, gap;    // streaming multiprocessors (0 = no wave model), seconds per kernel
} rates_t;

// The last wave of output tiles runs on part of the GPU: tiles / (waves x SMs).
static double wave_use(const rates_t *r, double tiles) {
  if (r->sms <= 0 || tiles <= 0) return 1;
  return tiles / (ceil(tiles / r->sms) * r->sms);
}

// One (batched) GEMM kernel: count products of M x K by K x N.
static double gemm(const rates_t *r, double M, double N, double K, double count) {
  double flops = 2 * M * N * K * count, bytes = count * r->e * (M * K + K * N + M * N);
  double tiles = count * ceil(M / TILE) * ceil(N / TILE);
  return fmax(flops / (r->F * wave_use(r, tiles)), bytes / r->B) + r->gap;
}

static rates_t rates(const plan_cluster_t *c, const plan_job_t *job) {
  double F = plan_gemm_rate(c, &job->calib);
  return (rates_t){F, F * job->calib.attn_eff / job->calib.gemm_eff, plan_mem_rate(c, &job->calib),
                   job->bytes.act, c->sms, job->calib.kernel_gap};
}

plan_cost_t plan_layer_cost(const plan_model_t *m, const plan_cluster_t *c, const plan_job_t *job,
                            int tp, double b, const plan_links_t *links, FILE *why) {
  rates_t r = rates(c, job);
  double e = r.e, t = tp, s = m->seq, h = m->hidden, f = m->ffn, T = b * s;
  double q = (double)m->heads * m->head_dim, kv = (double)m->kv_heads * m->head_dim;
  double heads = b * m->heads / t, dh = m->head_dim, mask = m->dropout ? 1 : 0;
  double rep = job->sequence_parallel ? t : 1;
  int gated = m->mlp == PLAN_MLP_SWIGLU;
  plan_cost_t k = {0};

  // The four weight GEMMs, split over tp ranks.
  k.gemm_fwd = gemm(&r, T, (q + 2 * kv) / t, h, 1) + gemm(&r, T, h, q / t, 1) +
               gemm(&r, T, (gated ? 2 : 1) * f / t, h, 1) + gemm(&r, T, h, f / t, 1);

  // Attention core.
  double attn_bwd;
  if (m->flash_attention) {
    double flops = 0.5 * 4 * heads * s * s * dh;  // causal: half the blocks
    double bytes = e * T * (2 * q + 2 * kv) / t;  // read Q K V, write O
    double use = wave_use(&r, heads * ceil(s / TILE));  // one tile per head and query block
    k.attn_fwd = fmax(flops / (r.A * use), bytes / r.B) + r.gap;
    attn_bwd = fmax(2.5 * flops / (r.A * use), 2 * bytes / r.B) + r.gap;
  } else {
    double scores = heads * s * s;  // elements of the s x s score matrices
    double softmax_dropout = scores * (2 * e + mask * (2 * e + 1));
    int kernels = 1 + (m->dropout ? 1 : 0);  // fused scale-mask-softmax, dropout
    k.attn_fwd = gemm(&r, s, s, dh, heads) + gemm(&r, s, dh, s, heads) + softmax_dropout / r.B +
                 kernels * r.gap;
    attn_bwd = 2 * (gemm(&r, s, s, dh, heads) + gemm(&r, s, dh, s, heads)) +
               scores * (3 * e + mask * (2 * e + 1)) / r.B + kernels * r.gap;
  }
  k.core_fwd = k.attn_fwd;

  // Memory-bound kernels: two norms (read + write), two residual adds with
  // dropout (read two, write one, write a mask), the activation function,
  // rotary embedding of Q and K.
  double bytes = T * (2 * 2 * e * h + 2 * (3 * e + mask) * h) / rep +
                 T * (gated ? 3 : 2) * e * f / t +
                 (m->learned_positions ? 0 : T * 2 * e * (q + kv) / t);
  int kernels = 2 + 2 + 1 + (m->learned_positions ? 0 : 1);
  k.mem_fwd = bytes / r.B + kernels * r.gap;

  k.fwd = k.gemm_fwd + k.attn_fwd + k.mem_fwd;
  k.bwd = 2 * k.gemm_fwd + attn_bwd + 2 * k.mem_fwd;

  double act = e * T * h;  // one collective's buffer
  k.tp_fwd = 2 * plan_allreduce_time(act, tp, links->tp_busbw, links->tp_lat);
  k.tp_bwd = k.tp_fwd;
  k.tp_bytes = tp > 1 ? 4 * 2.0 * (tp - 1) / tp * act : 0;
  if (why) {
    fprintf(why,
            "  layer forward, micro-batch %g (T = b s = %.0f tokens), tp %d:\n"
            "    GEMMs  QKV [%.0f x %.0f] x [%.0f x %.0f], proj, MLP up/down: %.3f ms"
            " at F = %.4g TFLOP/s\n"
            "    attention core (%s): %.3f ms; memory-bound kernels %.4g MB at B = %.4g GB/s:"
            " %.3f ms\n"
            "    forward %.3f ms, backward %.3f ms (2x GEMMs, %s, 2x memory-bound)\n"
            "    TP: 2 collectives of e T h = %.4g MB each way, 2 (t-1)/t S / busbw (%.4g GB/s)"
            " + 2 (t-1) alpha: %.3f ms per pass\n",
            b, T, tp, T, h, h, (q + 2 * kv) / t, k.gemm_fwd * 1e3, r.F / 1e12,
            m->flash_attention ? "fused, causal" : "materialised s x s", k.attn_fwd * 1e3,
            bytes / 1e6, r.B / 1e9, k.mem_fwd * 1e3, k.fwd * 1e3, k.bwd * 1e3,
            m->flash_attention ? "2.5x fused attention" : "2x score GEMMs, softmax/dropout bwd",
            act / 1e6, links->tp_busbw / 1e9, k.tp_fwd * 1e3);
  }
  return k;
}

plan_cost_t plan_embedding_cost(const plan_model_t *m, const plan_cluster_t *c,
                                const plan_job_t *job, int tp, double b, const plan_links_t *links) {
  rates_t r = rates(c, job);
  double T = b * m->seq, act = r.e * T * m->hidden;
  plan_cost_t k = {0};
  // Gather rows (read + write), backward scatter-adds them; the vocabulary is
  // split over tp ranks and summed with one collective.
  k.mem_fwd = k.fwd = 2 * act / r.B + r.gap;
  k.bwd = 2 * act / r.B + r.gap;
  k.tp_fwd = plan_allreduce_time(act, tp, links->tp_busbw, links->tp_lat);
  k.tp_bytes = tp > 1 ? 2.0 * (tp - 1) / tp * act : 0;
  return k;
}

plan_cost_t plan_head_cost(const plan_model_t *m, const plan_cluster_t *c, const plan_job_t *job,
                           int tp, double b, const plan_links_t *links) {
  rates_t r = rates(c, job);
  double T = b * m->seq, h = m->hidden, vt = (double)m->vocab / tp, act = r.e * T * h;
  plan_cost_t k = {0};
  // Final norm, the vocabulary-parallel output GEMM, cross-entropy over the
  // logits (read them, write their gradient).
  k.gemm_fwd = gemm(&r, T, vt, h, 1);
  k.mem_fwd = (2 * act / (job->sequence_parallel ? tp : 1) + 2 * r.e * T * vt) / r.B + 2 * r.gap;
  k.fwd = k.gemm_fwd + k.mem_fwd;
  k.bwd = 2 * k.gemm_fwd + k.mem_fwd;
  k.tp_fwd = k.tp_bwd = plan_allreduce_time(act, tp, links->tp_busbw, links->tp_lat);
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
