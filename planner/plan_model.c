/*
 * plan_model.c — the transformer being planned: presets, checks, parameter
 * count and FLOPs per token.
 *
 * A layer is attention and an MLP. Attention has query width q = heads x
 * head_dim and key/value width kv = kv_heads x head_dim (grouped-query
 * attention shrinks K and V), or, for multi-head latent attention (MLA,
 * DeepSeek-V2/V3), low-rank query and key/value projections through q_lora
 * and kv_lora channels plus rope_dim rotary channels per head. The MLP is
 * GELU (two matrices) or SwiGLU (three); in a mixture-of-experts layer it is
 * `experts` such MLPs of width expert_ffn, topk of them used per token, plus
 * shared experts and a router. Every preset is a published shape; the
 * comment on each line names the paper it comes from.
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
// Llama-style attention with a mixture-of-experts MLP in every layer.
#define MOE(L, h, a, kv, dh, fe, V, s, E, k) \
  {.layers = L, .hidden = h, .heads = a, .kv_heads = kv, .head_dim = dh, .ffn = fe, \
   .vocab = V, .seq = s, .mlp = PLAN_MLP_SWIGLU, .flash_attention = 1, .experts = E, .topk = k, \
   .expert_ffn = fe, .moe_every = 1}
// DeepSeek-style: MLA, `dense` dense layers of width f first, then MoE
// layers of E routed experts (topk k) and S shared experts of width fe.
#define DEEPSEEK(L, h, a, dh, rope, ql, kvl, f, dense, E, k, S, fe, V, s) \
  {.layers = L, .hidden = h, .heads = a, .kv_heads = a, .head_dim = dh, .ffn = f, .vocab = V, \
   .seq = s, .mlp = PLAN_MLP_SWIGLU, .flash_attention = 1, .experts = E, .topk = k, \
   .expert_ffn = fe, .shared_experts = S, .moe_every = 1, .dense_layers = dense, .q_lora = ql, \
   .kv_lora = kvl, .rope_dim = rope}

static const preset_t presets[] = {
    // Radford et al. 2019 (GPT-2), the 124M model.
    {"gpt2-124m", "GPT-2 small (Radford et al. 2019)", GPT(12, 768, 12, 50257, 1024, 1, 0)},
    // Brown et al. 2020 (arXiv 2005.14165), Table 2.1.
    {"gpt3-175b", "GPT-3 (Brown et al. 2020)", GPT(96, 12288, 96, 50257, 2048, 1, 0)},
    // Llama Team 2024 (arXiv 2407.21783), Table 3.
    {"llama3-8b", "Llama 3 8B (Llama Team 2024, Table 3)", LLAMA(32, 4096, 32, 8, 128, 14336, 128256, 8192, 0)},
    {"llama3-70b", "Llama 3 70B (Table 3)", LLAMA(80, 8192, 64, 8, 128, 28672, 128256, 8192, 0)},
    {"llama3-405b", "Llama 3 405B (Table 3)", LLAMA(126, 16384, 128, 8, 128, 53248, 128256, 8192, 0)},
    // Qwen3 technical report (arXiv 2505.09388), the 4B model's config.
    {"qwen3-4b", "Qwen3-4B (head_dim 128, tied embeddings)", LLAMA(36, 2560, 32, 8, 128, 9728, 151936, 4096, 1)},
    // Narayanan et al. 2021 (arXiv 2104.04473), Table 1: fp16, no fused
    // attention, dropout 0.1, vocabulary 51200, sequence 2048.
    {"megatron-1.7b", "Megatron-LM 2021 GPT 1.7B", GPT(24, 2304, 24, 51200, 2048, 0, 1)},
    {"megatron-3.6b", "Megatron-LM 2021 GPT 3.6B", GPT(30, 3072, 32, 51200, 2048, 0, 1)},
    {"megatron-7.5b", "Megatron-LM 2021 GPT 7.5B", GPT(36, 4096, 32, 51200, 2048, 0, 1)},
    {"megatron-18.4b", "Megatron-LM 2021 GPT 18.4B", GPT(40, 6144, 48, 51200, 2048, 0, 1)},
    {"megatron-39.1b", "Megatron-LM 2021 GPT 39.1B", GPT(48, 8192, 64, 51200, 2048, 0, 1)},
    {"megatron-76.1b", "Megatron-LM 2021 GPT 76.1B", GPT(60, 10240, 80, 51200, 2048, 0, 1)},
    {"megatron-145.6b", "Megatron-LM 2021 GPT 145.6B", GPT(80, 12288, 96, 51200, 2048, 0, 1)},
    {"megatron-310.1b", "Megatron-LM 2021 GPT 310.1B", GPT(96, 16384, 128, 51200, 2048, 0, 1)},
    {"megatron-529.6b", "Megatron-LM 2021 GPT 529.6B", GPT(105, 20480, 128, 51200, 2048, 0, 1)},
    {"megatron-1008b", "Megatron-LM 2021 GPT 1T", GPT(128, 25600, 160, 51200, 2048, 0, 1)},
    // Smith et al. 2022 (arXiv 2201.11990), section 3.2: 105 layers, hidden
    // 20480, 128 heads, sequence 2048; GPT-2's vocabulary, padded as Megatron pads it.
    {"mt-nlg-530b", "Megatron-Turing NLG 530B (Smith et al. 2022)", GPT(105, 20480, 128, 51200, 2048, 0, 1)},
    // BigScience 2022 (arXiv 2211.05100), section 3.2 and Table 3: 70 layers,
    // hidden 14336, 112 heads, sequence 2048, vocabulary 250880 (padded), ALiBi
    // (no position table: modelled as the rotary case), tied, no dropout.
    {"bloom-176b", "BLOOM 176B (BigScience 2022)",
     {.layers = 70, .hidden = 14336, .heads = 112, .ffn = 4 * 14336, .vocab = 250880, .seq = 2048,
      .mlp = PLAN_MLP_GELU, .tied_embeddings = 1, .biases = 1}},
    // Jiang et al. 2024 (arXiv 2401.04088), Table 1: 32 layers, dim 4096,
    // head_dim 128, hidden_dim 14336, 32 heads, 8 kv heads, context 32768,
    // vocabulary 32000, 8 experts, top 2.
    {"mixtral-8x7b", "Mixtral 8x7B (Mistral AI, Jiang et al. 2024)",
     MOE(32, 4096, 32, 8, 128, 14336, 32000, 32768, 8, 2)},
    // DeepSeek-AI 2024 (arXiv 2405.04434), section 3.1.1: 60 layers, hidden
    // 5120, 128 heads of 128, MLA with kv rank 512, query rank 1536, rotary
    // 64; every layer but the first MoE with 2 shared + 160 routed experts of
    // 1536, 6 routed per token; first layer dense (12288, its released config);
    // vocabulary 102400, sequence 4096.
    {"deepseek-v2", "DeepSeek-V2 236B, 21B active (DeepSeek-AI 2024)",
     DEEPSEEK(60, 5120, 128, 128, 64, 1536, 512, 12288, 1, 160, 6, 2, 1536, 102400, 4096)},
    // DeepSeek-AI 2024 (arXiv 2412.19437), section 4.2: 61 layers, hidden
    // 7168, 128 heads of 128, MLA (512, 1536, rotary 64); first 3 layers
    // dense (18432), then 1 shared + 256 routed experts of 2048, 8 per token;
    // vocabulary 129280, sequence 4096. The multi-token-prediction module
    // (one more layer, used in training) is left out.
    {"deepseek-v3", "DeepSeek-V3 671B, 37B active (DeepSeek-AI 2024), without the MTP module",
     DEEPSEEK(61, 7168, 128, 128, 64, 1536, 512, 18432, 3, 256, 8, 1, 2048, 129280, 4096)},
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
int plan_model_is_moe(const plan_model_t *m) { return m->experts > 0; }

int plan_model_layer_is_moe(const plan_model_t *m, int i) {
  if (m->experts <= 0 || i < m->dense_layers) return 0;
  return (i - m->dense_layers) % (m->moe_every > 0 ? m->moe_every : 1) == 0;
}

int plan_model_moe_layers(const plan_model_t *m) {
  int n = 0;
  for (int i = 0; i < m->layers; i++) n += plan_model_layer_is_moe(m, i);
  return n;
}

static int check_moe(plan_model_t *m, char *err, size_t errlen) {
  if (m->experts == 0) {
    const struct { const char *flag; int v; } need_experts[] = {
        {"--topk", m->topk}, {"--shared-experts", m->shared_experts},
        {"--expert-ffn", m->expert_ffn}, {"--dense-layers", m->dense_layers}};
    for (size_t i = 0; i < sizeof(need_experts) / sizeof(need_experts[0]); i++)
      if (need_experts[i].v != 0) {
        snprintf(err, errlen, "%s %d needs a mixture-of-experts model (--experts N)",
                 need_experts[i].flag, need_experts[i].v);
        return -1;
      }
    return 0;
  }
  if (m->expert_ffn == 0) m->expert_ffn = m->ffn;
  if (m->moe_every == 0) m->moe_every = 1;
  if (m->topk < 1 || m->topk > m->experts) {
    snprintf(err, errlen, "--topk %d must be from 1 to --experts %d", m->topk, m->experts);
    return -1;
  }
  if (m->dense_layers < 0 || m->dense_layers >= m->layers) {
    snprintf(err, errlen, "--dense-layers %d leaves no MoE layer of the %d layers", m->dense_layers,
             m->layers);
    return -1;
  }
  if (m->expert_ffn < 1 || m->moe_every < 1 || m->shared_experts < 0) {
    snprintf(err, errlen, "--expert-ffn and --moe-every must be >= 1, --shared-experts >= 0");
    return -1;
  }
  return 0;
}

static int check_latent(plan_model_t *m, char *err, size_t errlen) {
  if (m->kv_lora == 0) {
    if (m->q_lora != 0 || m->rope_dim != 0) {
      snprintf(err, errlen, "%s %d needs latent attention (--kv-lora N)",
               m->q_lora ? "--q-lora" : "--rope-dim", m->q_lora ? m->q_lora : m->rope_dim);
      return -1;
    }
    return 0;
  }
  if (m->kv_heads != m->heads) {
    snprintf(err, errlen, "latent attention (--kv-lora %d) has a key and value per head: "
                          "--kv-heads %d must equal --heads %d", m->kv_lora, m->kv_heads, m->heads);
    return -1;
  }
  if (m->q_lora < 0 || m->rope_dim < 0 || m->kv_lora < 0) {
    snprintf(err, errlen, "--q-lora, --kv-lora and --rope-dim must be >= 0");
    return -1;
  }
  return 0;
}

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
  if (check_moe(m, err, errlen) != 0 || check_latent(m, err, errlen) != 0) return -1;
  if (m->name[0] == '\0') snprintf(m->name, sizeof(m->name), "custom");
  return 0;
}

static double mlp_mats(const plan_model_t *m) { return m->mlp == PLAN_MLP_SWIGLU ? 3 : 2; }

plan_attn_widths_t plan_model_attn_widths(const plan_model_t *m) {
  double a = m->heads, akv = m->kv_heads, d = m->head_dim, r = m->rope_dim;
  return (plan_attn_widths_t){.qk = a * (d + r), .k = akv * (d + r), .v = akv * d, .o = a * d};
}

double plan_model_attention_params(const plan_model_t *m) {
  double h = m->hidden;
  plan_attn_widths_t w = plan_model_attn_widths(m);
  if (m->kv_lora > 0) {
    // MLA: W_DQ, W_UQ (or one W_Q), W_DKV with the shared rotary key,
    // W_UK and W_UV out of the kv latent, W_O.
    double q = m->q_lora > 0 ? h * m->q_lora + m->q_lora * w.qk : h * w.qk;
    double kv = h * (m->kv_lora + m->rope_dim) + (double)m->kv_lora * m->heads * 2.0 * m->head_dim;
    return q + kv + w.o * h;
  }
  return h * w.qk + h * (w.k + w.v) + w.o * h;
}

static double dense_mlp_params(const plan_model_t *m) { return mlp_mats(m) * m->hidden * (double)m->ffn; }
static double expert_params(const plan_model_t *m) { return mlp_mats(m) * m->hidden * (double)m->expert_ffn; }

double plan_model_layer_expert_params(const plan_model_t *m) {
  return m->experts > 0 ? m->experts * expert_params(m) : 0;
}

double plan_model_layer_matmul_params(const plan_model_t *m, int moe) {
  double mlp = moe ? (m->experts + m->shared_experts) * expert_params(m) +
                         (double)m->hidden * m->experts
                   : dense_mlp_params(m);
  return plan_model_attention_params(m) + mlp;
}

double plan_model_layer_active_matmul_params(const plan_model_t *m, int moe) {
  if (!moe) return plan_model_layer_matmul_params(m, 0);
  return plan_model_attention_params(m) + (m->topk + m->shared_experts) * expert_params(m) +
         (double)m->hidden * m->experts;
}

// Biases of the linear layers and the norms (LayerNorm has a bias, RMSNorm
// does not; latent attention normalises its two latents).
static double layer_small_params(const plan_model_t *m, int moe) {
  double h = m->hidden;
  plan_attn_widths_t w = plan_model_attn_widths(m);
  double biases = 0;
  if (m->biases)
    biases = w.qk + w.k + w.v + h + (moe ? 0 : (mlp_mats(m) - 1) * m->ffn + h);
  double norms = 2 * h * (m->biases ? 2 : 1) + (m->kv_lora > 0 ? m->q_lora + m->kv_lora : 0);
  return biases + norms;
}

double plan_model_layer_params(const plan_model_t *m, int moe) {
  return plan_model_layer_matmul_params(m, moe) + layer_small_params(m, moe);
}

double plan_model_embedding_params(const plan_model_t *m) {
  return (double)m->vocab * m->hidden + (m->learned_positions ? (double)m->seq * m->hidden : 0);
}

double plan_model_head_params(const plan_model_t *m) {
  return m->tied_embeddings ? 0 : (double)m->vocab * m->hidden;
}

static double final_norm_params(const plan_model_t *m) {
  return (double)m->hidden * (m->biases ? 2 : 1);
}

double plan_model_params(const plan_model_t *m) {
  if (plan_model_is_bare(m)) return m->params;
  double layers = 0;
  for (int i = 0; i < m->layers; i++) layers += plan_model_layer_params(m, plan_model_layer_is_moe(m, i));
  return layers + plan_model_embedding_params(m) + plan_model_head_params(m) + final_norm_params(m);
}

double plan_model_active_params(const plan_model_t *m) {
  if (plan_model_is_bare(m)) return m->params;
  double layers = 0;
  for (int i = 0; i < m->layers; i++) {
    int moe = plan_model_layer_is_moe(m, i);
    layers += plan_model_layer_active_matmul_params(m, moe) + layer_small_params(m, moe);
  }
  return layers + plan_model_embedding_params(m) + plan_model_head_params(m) + final_norm_params(m);
}

static double attention_products_per_token(const plan_model_t *m) {
  plan_attn_widths_t w = plan_model_attn_widths(m);
  return 2.0 * m->seq * (w.qk + w.o);  // QK^T over qk channels, scores x V over o
}

double plan_model_layer_fwd_flops(const plan_model_t *m, int moe) {
  return 2 * plan_model_layer_active_matmul_params(m, moe) + attention_products_per_token(m);
}

double plan_model_flops_per_token(const plan_model_t *m, int with_attention, FILE *why) {
  if (plan_model_is_bare(m)) {
    double f = 6 * m->params;
    if (why) fprintf(why, "  FLOPs/token = 6 N = 6 x %.4g = %.4g\n", m->params, f);
    return f;
  }
  // The input embedding is a lookup, not a matmul; the output layer is one
  // (V x h, tied or not). MoE layers count the experts a token uses.
  int moe_layers = plan_model_moe_layers(m), dense = m->layers - moe_layers;
  double per_dense = plan_model_layer_active_matmul_params(m, 0);
  double per_moe = moe_layers ? plan_model_layer_active_matmul_params(m, 1) : 0;
  double matmul = dense * per_dense + moe_layers * per_moe + (double)m->vocab * m->hidden;
  double attn = with_attention ? 3.0 * m->layers * attention_products_per_token(m) : 0;
  if (why) {
    fprintf(why, "  FLOPs/token = 6 (sum of active matmul weights + V h) + 3 L 2 s (qk + o)\n"
                 "              = 6 (%d x %.4g + %d x %.4g + %d x %d) + 6 x %d x %d x %.0f\n"
                 "              = %.4g + %.4g = %.4g\n",
            dense, per_dense, moe_layers, per_moe, m->vocab, m->hidden, m->layers, m->seq,
            plan_model_attn_widths(m).qk + plan_model_attn_widths(m).o, 6 * matmul, attn,
            6 * matmul + attn);
    if (moe_layers)
      fprintf(why, "    (%d MoE layers of %.4g active matmul weights each: %d of %d experts + %d shared)\n",
              moe_layers, per_moe, m->topk, m->experts, m->shared_experts);
  }
  return 6 * matmul + attn;
}
