/*
 * plan_model.c — the transformer being planned: presets, checks, parameter
 * count and FLOPs per token.
 *
 * A layer is attention (query width q = heads x head_dim, key/value width
 * kv = kv_heads x head_dim, so grouped-query attention shrinks K and V) and an
 * MLP of width ffn, either GELU (two matrices) or SwiGLU (three). The preset
 * shapes are the published ones; the Megatron-LM 2021 models are there so the
 * published-run checks in docs/planner.md can be rerun by name.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "plan.h"

typedef struct {
  const char *name, *about;
  plan_model_t m;
} preset_t;

// GPT-style: GELU, biases, learned positions, tied embeddings.
#define GPT(L, h, a, V, s, flash, drop) \
  {.layers = L, .hidden = h, .heads = a, .ffn = 4 * (h), .vocab = V, .seq = s, \
   .mlp = PLAN_MLP_GELU, .tied_embeddings = 1, .learned_positions = 1, .biases = 1, \
   .flash_attention = flash, .dropout = drop}
// Llama-style: SwiGLU, rotary, no biases, grouped-query attention.
#define LLAMA(L, h, a, kv, dh, f, V, s, tied) \
  {.layers = L, .hidden = h, .heads = a, .kv_heads = kv, .head_dim = dh, .ffn = f, \
   .vocab = V, .seq = s, .mlp = PLAN_MLP_SWIGLU, .tied_embeddings = tied, \
   .flash_attention = 1}

static const preset_t presets[] = {
    {"gpt2-124m", "GPT-2 small (Radford et al. 2019)", GPT(12, 768, 12, 50257, 1024, 1, 0)},
    {"gpt3-175b", "GPT-3 (Brown et al. 2020)", GPT(96, 12288, 96, 50257, 2048, 1, 0)},
    {"llama3-8b", "Llama 3 8B (Llama Team 2024)", LLAMA(32, 4096, 32, 8, 128, 14336, 128256, 8192, 0)},
    {"llama3-70b", "Llama 3 70B", LLAMA(80, 8192, 64, 8, 128, 28672, 128256, 8192, 0)},
    {"llama3-405b", "Llama 3 405B", LLAMA(126, 16384, 128, 8, 128, 53248, 128256, 8192, 0)},
    {"qwen3-4b", "Qwen3-4B (head_dim 128, tied embeddings)", LLAMA(36, 2560, 32, 8, 128, 9728, 151936, 4096, 1)},
    // Narayanan et al. 2021, Table 1: fp16, no fused attention, dropout 0.1.
    {"megatron-1.7b", "Megatron-LM 2021 GPT 1.7B", GPT(24, 2304, 24, 51200, 2048, 0, 1)},
    {"megatron-18.4b", "Megatron-LM 2021 GPT 18.4B", GPT(40, 6144, 48, 51200, 2048, 0, 1)},
    {"megatron-145.6b", "Megatron-LM 2021 GPT 145.6B", GPT(80, 12288, 96, 51200, 2048, 0, 1)},
    {"megatron-529.6b", "Megatron-LM 2021 GPT 529.6B", GPT(105, 20480, 128, 51200, 2048, 0, 1)},
    {"megatron-1008b", "Megatron-LM 2021 GPT 1T", GPT(128, 25600, 160, 51200, 2048, 0, 1)},
};
#define NPRESETS ((int)(sizeof(presets) / sizeof(presets[0])))

const char *plan_model_preset_name(int i) { return i >= 0 && i < NPRESETS ? presets[i].name : NULL; }
const char *plan_model_preset_about(int i) { return i >= 0 && i < NPRESETS ? presets[i].about : NULL; }

int plan_model_preset(const char *name, plan_model_t *out) {
  for (int i = 0; i < NPRESETS; i++) {
    if (strcasecmp(name, presets[i].name) != 0) continue;
    *out = presets[i].m;
    snprintf(out->name, sizeof(out->name), "%s", presets[i].name);
    return 0;
  }
  return -1;
}

int plan_model_is_bare(const plan_model_t *m) { return m->layers == 0; }

int plan_model_check(plan_model_t *m, char *err, size_t errlen) {
  if (plan_model_is_bare(m)) {
    if (!(m->params > 0 && isfinite(m->params))) {
      snprintf(err, errlen, "the model needs a preset (--model), a shape (--layers, --hidden, "
                            "--heads, ...) or a parameter count (--params)");
      return -1;
    }
    return 0;
  }
  if (m->kv_heads == 0) m->kv_heads = m->heads;
  if (m->head_dim == 0 && m->heads > 0) m->head_dim = m->hidden / m->heads;
  if (m->ffn == 0) m->ffn = 4 * m->hidden;
  const struct {
    const char *flag;
    int v;
  } need[] = {{"--layers", m->layers}, {"--hidden", m->hidden}, {"--heads", m->heads},
              {"--kv-heads", m->kv_heads}, {"--head-dim", m->head_dim}, {"--ffn", m->ffn},
              {"--vocab", m->vocab}, {"--seq", m->seq}};
  for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
    if (need[i].v <= 0) {
      snprintf(err, errlen, "%s must be a positive integer (got %d)", need[i].flag, need[i].v);
      return -1;
    }
  if (m->heads % m->kv_heads != 0) {
    snprintf(err, errlen, "--heads %d is not a multiple of --kv-heads %d", m->heads, m->kv_heads);
    return -1;
  }
  if (m->hidden % m->heads != 0 && m->head_dim == m->hidden / m->heads) {
    snprintf(err, errlen, "--hidden %d is not a multiple of --heads %d (give --head-dim)",
             m->hidden, m->heads);
    return -1;
  }
  if (m->name[0] == '\0') snprintf(m->name, sizeof(m->name), "custom");
  return 0;
}

static double q_width(const plan_model_t *m) { return (double)m->heads * m->head_dim; }
static double kv_width(const plan_model_t *m) { return (double)m->kv_heads * m->head_dim; }
static double mlp_mats(const plan_model_t *m) { return m->mlp == PLAN_MLP_SWIGLU ? 3 : 2; }

double plan_model_layer_matmul_params(const plan_model_t *m) {
  double h = m->hidden, q = q_width(m), kv = kv_width(m);
  return h * q + 2 * h * kv + q * h + mlp_mats(m) * h * m->ffn;
}

double plan_model_layer_params(const plan_model_t *m) {
  double h = m->hidden, q = q_width(m), kv = kv_width(m);
  double biases = m->biases ? q + 2 * kv + h + (mlp_mats(m) - 1) * m->ffn + h : 0;
  double norms = 2 * h * (m->biases ? 2 : 1);  // LayerNorm has a bias, RMSNorm does not
  return plan_model_layer_matmul_params(m) + biases + norms;
}

double plan_model_embedding_params(const plan_model_t *m) {
  return (double)m->vocab * m->hidden + (m->learned_positions ? (double)m->seq * m->hidden : 0);
}

double plan_model_head_params(const plan_model_t *m) {
  return m->tied_embeddings ? 0 : (double)m->vocab * m->hidden;
}

double plan_model_params(const plan_model_t *m) {
  if (plan_model_is_bare(m)) return m->params;
  double final_norm = (double)m->hidden * (m->biases ? 2 : 1);
  return m->layers * plan_model_layer_params(m) + plan_model_embedding_params(m) +
         plan_model_head_params(m) + final_norm;
}

double plan_model_layer_fwd_flops(const plan_model_t *m) {
  return 2 * plan_model_layer_matmul_params(m) + 4.0 * m->seq * q_width(m);
}

double plan_model_flops_per_token(const plan_model_t *m, int with_attention, FILE *why) {
  if (plan_model_is_bare(m)) {
    double f = 6 * m->params;
    if (why) fprintf(why, "  FLOPs/token = 6 N = 6 x %.4g = %.4g\n", m->params, f);
    return f;
  }
  // The input embedding is a lookup, not a matmul; the output layer is one
  // (V x h, tied or not).
  double matmul = m->layers * plan_model_layer_matmul_params(m) + (double)m->vocab * m->hidden;
  double attn = with_attention ? 12.0 * m->layers * m->seq * q_width(m) : 0;
  if (why) {
    fprintf(why, "  FLOPs/token = 6 (L P_layer + V h) + 12 L s q\n"
                 "              = 6 (%d x %.4g + %d x %d) + 12 x %d x %d x %.0f\n"
                 "              = %.4g + %.4g = %.4g\n",
            m->layers, plan_model_layer_matmul_params(m), m->vocab, m->hidden, m->layers, m->seq,
            q_width(m), 6 * matmul, attn, 6 * matmul + attn);
  }
  return 6 * matmul + attn;
}
