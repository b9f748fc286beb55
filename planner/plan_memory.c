/*
 * plan_memory.c — what a GPU holds: model states per ZeRO stage, the
 * activations one layer keeps for the backward pass, and how many
 * micro-batches of them a pipeline stage holds at once.
 *
 * Model states follow the ZeRO paper (Rajbhandari et al. 2020): with w, g, o
 * bytes per parameter for weights, gradients and optimizer state (2, 2, 12
 * for mixed-precision Adam), stage 0 keeps (w + g + o) psi, stage 1 shards the
 * optimizer, stage 2 also the gradients, stage 3 also the weights.
 *
 * Activations follow Korthikanti et al. 2022 ("Reducing Activation
 * Recomputation in Large Transformer Models"), generalised to grouped-query
 * and latent attention, SwiGLU, fused (flash) attention, dropout-free models,
 * mixture-of-experts layers and context parallelism (a GPU of a cp group
 * holds s/cp of the tokens, so every term is divided by cp). Per token of
 * one layer, at e bytes per element:
 *   kept by every TP rank unless sequence parallel:  4 e h (inputs of the two
 *     norms, of QKV and of the first MLP matmul) + 2 h (dropout masks)
 *   split over TP ranks:  e (q + 2 kv) (Q, K, V) + e q (attention output)
 *     + 2 e f (GELU in/out) or 3 e f (SwiGLU: gate and up, their product)
 *   attention scores, split:  a s (e + 1 + e) (softmax out, dropout mask and
 *     out), or 4 a bytes of log-sum-exp when the attention is fused.
 * For GPT (q = kv = h, f = 4h, dropout, e = 2) this is Korthikanti's
 * s b h (34 + 5 a s / h) without parallelism, s b h (10 + 24/t + 5 a s/(h t))
 * with tensor parallelism, and s b h (34/t + 5 a s/(h t)) with sequence
 * parallelism. Selective recompute drops the scores; full recompute keeps
 * only each layer's input, e h per token (divided by t with SP).
 */
#include <math.h>

#include "plan.h"

const char *plan_recompute_name(plan_recompute_t r) {
  static const char *const names[] = {"none", "selective", "full"};
  return r >= 0 && r < PLAN_RECOMPUTE_COUNT ? names[r] : "?";
}

const char *plan_sched_name(plan_sched_t s) {
  static const char *const names[] = {"1f1b", "gpipe", "interleaved"};
  return s >= PLAN_SCHED_1F1B && s <= PLAN_SCHED_INTERLEAVED ? names[s] : "?";
}

const char *plan_engine_name(plan_engine_t e) {
  return e == PLAN_ENGINE_DEEPSPEED ? "deepspeed" : "megatron";
}

plan_states_t plan_model_states(double psi, int n, int zero, const plan_bytes_t *b, FILE *why) {
  double N = n > 0 ? n : 1;
  plan_states_t s = {b->weight * psi, b->grad * psi, b->optim * psi};
  if (zero >= 1) s.optim /= N;
  if (zero >= 2) s.grads /= N;
  if (zero >= 3) s.weights /= N;
  if (why) {
    static const char *const forms[] = {"(w + g + o) P", "(w + g) P + o P/N", "w P + (g + o) P/N",
                                        "(w + g + o) P/N"};
    fprintf(why,
            "  model states, ZeRO-%d: %s, w g o = %g %g %g bytes, P = %.4g, N = %d\n"
            "    = %.4g + %.4g + %.4g = %.4g GB\n",
            zero, forms[zero < 0 ? 0 : zero > 3 ? 3 : zero], b->weight, b->grad, b->optim, psi, n,
            s.weights / PLAN_GB, s.grads / PLAN_GB, s.optim / PLAN_GB,
            (s.weights + s.grads + s.optim) / PLAN_GB);
  }
  return s;
}

double plan_layer_activation_bytes(const plan_model_t *m, int moe, double b, int tp, int cp,
                                   int sp, plan_recompute_t rc, double e, FILE *why) {
  double c = cp > 0 ? cp : 1, s = m->seq / c, h = m->hidden, f = m->ffn, a = m->heads;
  double t = tp > 0 ? tp : 1;
  plan_attn_widths_t w = plan_model_attn_widths(m);
  double mask = m->dropout ? 1 : 0;
  double rep_div = sp ? t : 1;  // sequence parallelism shards the replicated part
  if (rc == PLAN_RECOMPUTE_FULL) {
    double bytes = s * b * e * h / rep_div;
    if (why)
      fprintf(why, "  activations/layer (full recompute: the layer input) = (s/cp) b e h%s = %.4g MiB\n",
              sp ? " / t" : "", bytes / 1048576);
    return bytes;
  }
  double gate = m->mlp == PLAN_MLP_SWIGLU ? 3 : 2;
  // Latent attention keeps the two normalised latents its up-projections read.
  double rep = 4 * e * h + 2 * mask * h + (m->kv_lora > 0 ? e * (m->q_lora + m->kv_lora) : 0);
  double split = e * (w.qk + w.k + w.v) + e * w.o;
  // An MoE layer keeps, for each of the topk experts a token visits and for
  // each shared expert, what a dense MLP keeps; plus the dispatched tokens
  // and the experts' outputs before they are combined (every tp rank holds
  // them whole after the all-gather) and the router's fp32 probabilities.
  double routed = 0;
  if (moe) {
    split += (m->topk + m->shared_experts) * gate * e * m->expert_ffn;
    routed = 2 * e * m->topk * h + 4.0 * m->experts;
  } else {
    split += gate * e * f;
  }
  double scores = 0;
  if (m->flash_attention) split += 4 * a;
  else if (rc == PLAN_RECOMPUTE_NONE) scores = a * m->seq * (e + mask * (1 + e));
  double bytes = s * b * (rep / rep_div + routed + (split + scores) / t);
  if (why) {
    fprintf(why,
            "  activations/layer = (s/cp) b [kept/%s%s + (split + scores)/t]\n"
            "    kept = 4 e h + 2 h mask%s = %.0f, split = e (qk + k + v) + e o + %s%s = %.0f,"
            " scores = %s = %.0f bytes/token%s\n"
            "    = %.0f x %g x [%.0f/%g + %.0f + (%.0f + %.0f)/%g] = %.4g MiB",
            sp ? "t" : "1", moe ? " + routed" : "", m->kv_lora > 0 ? " + e (latents)" : "", rep,
            moe ? "(topk + shared) g e f_e" : "g e f", m->flash_attention ? " + 4 a" : "", split,
            m->flash_attention ? "0 (fused attention)" : rc == PLAN_RECOMPUTE_NONE
                                                             ? "a s (e + mask (1 + e))"
                                                             : "0 (selective recompute)",
            scores, moe ? ", routed = 2 e k h + 4 E" : "", s, b, rep, rep_div, routed, split,
            scores, t, bytes / 1048576);
    if (!m->flash_attention && m->dropout && e == 2 && w.qk == h && w.k == h && f == 4 * h &&
        m->mlp == PLAN_MLP_GELU && !moe && c == 1)
      fprintf(why, "  (Korthikanti: s b h (%s%s))", sp ? "34/t" : "10 + 24/t",
              rc == PLAN_RECOMPUTE_NONE ? " + 5 a s/(h t)" : "");
    fputc('\n', why);
  }
  return bytes;
}

double plan_activation_rule_bytes(const plan_model_t *m, double k, double b, double e) {
  return k * b * m->seq * (double)m->layers * m->hidden * e;
}

double plan_inflight_layers(plan_sched_t sched, int p, int v, int stage, int layers, double m) {
  if (p <= 1) return layers;  // gradient accumulation: one micro-batch at a time
  switch (sched) {
    case PLAN_SCHED_GPIPE: return layers * m;  // every forward before any backward
    case PLAN_SCHED_INTERLEAVED: {
      // Megatron's interleaved 1F1B: stage i runs (p - i - 1) 2 + (v - 1) p
      // chunk forwards before its first backward, then one in, one out.
      double chunks = fmin(m * v, (p - stage - 1) * 2.0 + (v - 1.0) * p + 1);
      return chunks * layers / v;
    }
    default: return layers * fmin(m, (double)(p - stage));  // 1F1B
  }
}

double plan_bubble_fraction(int p, int v, double m) {
  if (p <= 1 || !(m > 0)) return 0;
  return (p - 1.0) / ((v > 0 ? v : 1) * m);
}
