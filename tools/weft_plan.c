/*
 * weft_plan.c — `weft-plan`: how should I train model X on cluster Y, and
 * how long will it take?
 *
 *   weft-plan --model llama3-70b --cluster h100-80g --nodes 64 --batch 512
 *   weft-plan --model qwen3-4b --act-table
 *   weft-plan --params 70e9 --tokens 1.4e12 --peak-tflops 900 --mfu 0.5 --time-table 1,8,64
 *
 * The model lives in planner/ (see docs/planner.md); this file only
 * reads the command line, applies presets before the flags that override
 * them, and picks the output. Exit status: 0 done, 1 no feasible layout,
 * 2 bad input (with a sentence on stderr saying which flag and why).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

#define MAX_LIST 32
// Without --cluster the plan is for DGX H100 nodes, and without --batch a
// step is 16M tokens (2^24: the batch of Llama 3 405B's pre-training, Llama
// Team 2024, Table 4); both are said on stderr when assumed.
#define DEFAULT_CLUSTER "h100-80g"
#define DEFAULT_BATCH_TOKENS 16777216.0

typedef struct {
  plan_model_t model;
  plan_cluster_t cluster;
  plan_job_t job;
  int have_cluster, default_cluster, nodes, json, explain, check, top, zero_table, act_table;
  int time_gpus[MAX_LIST], ntime, act_seqs[MAX_LIST], nact;
  double batch_tokens, mfu, act_k;
  const char *intra_json, *inter_json;
} cli_t;

typedef enum { T_MODEL_INT, T_CLUSTER, T_JOB_INT, T_NUM, T_SWITCH, T_WORD, T_FLAG, T_LIST, T_NAME } kind_t;

typedef struct {
  const char *name, *arg, *help;
  kind_t kind;
  const char *section;
} opt_t;

static const opt_t opts[] = {
    {"--model", "NAME", "model preset (see --list)", T_NAME, "model"},
    {"--params", "N", "a bare parameter count (only --zero-table, --time-table)", T_NUM, NULL},
    {"--layers", "N", "transformer layers", T_MODEL_INT, NULL},
    {"--hidden", "N", "hidden size h", T_MODEL_INT, NULL},
    {"--heads", "N", "attention heads a", T_MODEL_INT, NULL},
    {"--kv-heads", "N", "key/value heads (grouped-query attention; default = heads)", T_MODEL_INT, NULL},
    {"--head-dim", "N", "per-head width (default hidden/heads, also after --hidden/--heads)", T_MODEL_INT, NULL},
    {"--ffn", "N", "MLP width f (default 4 hidden)", T_MODEL_INT, NULL},
    {"--vocab", "N", "vocabulary size V", T_MODEL_INT, NULL},
    {"--seq", "N", "sequence length s", T_MODEL_INT, NULL},
    {"--mlp", "gelu|swiglu", "MLP kind: two matrices (GELU) or three (SwiGLU)", T_WORD, NULL},
    {"--tied", "on|off", "output layer shares the input embedding", T_SWITCH, NULL},
    {"--positions", "learned|rotary", "learned position table (GPT) or rotary", T_WORD, NULL},
    {"--biases", "on|off", "linear layers and norms have biases", T_SWITCH, NULL},
    {"--flash", "on|off", "fused (flash) attention: no s x s scores in memory", T_SWITCH, NULL},
    {"--dropout", "on|off", "dropout on attention probabilities and residuals", T_SWITCH, NULL},
    {"--experts", "N", "routed experts per MoE layer (0: a dense model)", T_MODEL_INT, NULL},
    {"--topk", "K", "experts each token is routed to", T_MODEL_INT, NULL},
    {"--expert-ffn", "N", "MLP width of one expert (default --ffn)", T_MODEL_INT, NULL},
    {"--shared-experts", "N", "always-on experts per MoE layer (DeepSeek; default 0)", T_MODEL_INT, NULL},
    {"--moe-every", "K", "every K-th layer is MoE (default 1: all)", T_MODEL_INT, NULL},
    {"--dense-layers", "N", "the first N layers are dense (DeepSeek: 1 or 3; default 0)", T_MODEL_INT, NULL},
    {"--q-lora", "N", "latent attention: query rank (0: a full query projection)", T_MODEL_INT, NULL},
    {"--kv-lora", "N", "latent attention: key/value rank (0: ordinary attention)", T_MODEL_INT, NULL},
    {"--rope-dim", "N", "latent attention: rotary channels per head added to queries and keys", T_MODEL_INT, NULL},
    {"--cluster", "NAME", "node preset (see --list; default h100-80g)", T_NAME, "cluster"},
    {"--cluster-file", "PATH", "key=value node description (docs/planner.md)", T_NAME, NULL},
    {"--intra-json", "PATH", "perf -J AllReduce inside a node: measured NVLink bus bandwidth", T_NAME, NULL},
    {"--inter-json", "PATH", "perf -J AllReduce, one rank per node: measured per-GPU network bandwidth", T_NAME, NULL},
    {"--gpus", "N", "GPUs in the job", T_JOB_INT, NULL},
    {"--nodes", "N", "nodes in the job (GPUs = nodes x GPUs per node)", T_JOB_INT, NULL},
    {"--gpus-per-node", "N", "override: GPUs per node", T_CLUSTER, NULL},
    {"--gpu-mem-gib", "X", "override: memory per GPU, GiB", T_CLUSTER, NULL},
    {"--peak-tflops", "X", "override: dense 16-bit peak per GPU, TFLOP/s", T_CLUSTER, NULL},
    {"--hbm-gbs", "X", "override: HBM bandwidth, GB/s", T_CLUSTER, NULL},
    {"--nvlink-gbs", "X", "override: NVLink bandwidth per GPU, one direction, GB/s", T_CLUSTER, NULL},
    {"--nics", "N", "override: NICs per node", T_CLUSTER, NULL},
    {"--nic-gbps", "X", "override: speed of each NIC, Gb/s", T_CLUSTER, NULL},
    {"--sms", "N", "override: streaming multiprocessors per GPU (0 turns off the wave model)", T_CLUSTER, NULL},
    {"--clock-sustain", "X", "override: clock held under load / clock of the kernel benchmarks", T_CLUSTER, NULL},
    {"--gemm-gflops", "X", "measured GEMM rate per GPU, GFLOP/s (replaces peak x --gemm-eff)", T_CLUSTER, NULL},
    {"--batch", "N", "global batch, sequences per optimizer step (default: 16M tokens)", T_NUM, "training"},
    {"--batch-tokens", "N", "global batch in tokens (rounded to whole sequences)", T_NUM, NULL},
    {"--tokens", "N", "tokens to train on (default 20 per parameter)", T_NUM, NULL},
    {"--weight-bytes", "X", "bytes per parameter for weights (default 2)", T_NUM, NULL},
    {"--grad-bytes", "X", "bytes per gradient element, kept and reduced (default 4: fp32; 2 for fp16/bf16)", T_NUM, NULL},
    {"--optim-bytes", "X", "bytes per parameter for optimizer state (default 12: fp32 master, m, v)", T_NUM, NULL},
    {"--act-bytes", "X", "bytes per activation element (default 2)", T_NUM, NULL},
    {"--sp", "on|off", "sequence parallelism with tensor parallelism (default on)", T_SWITCH, NULL},
    {"--dp-overlap", "on|off", "gradient reduction overlaps the backward, bucket by bucket (default on)", T_SWITCH, NULL},
    {"--tp-overlap", "on|off", "TP collectives overlap the GEMMs (Megatron-Core --tp-comm-overlap; default off)", T_SWITCH, NULL},
    {"--engine", "megatron|deepspeed", "pipeline engine: Megatron's schedules, or DeepSpeed's 1F1B (default megatron)", T_WORD, NULL},
    {"--tp", "N", "force tensor-parallel size", T_JOB_INT, "layout (default: search; GPUs = tp x cp x pp x dp)"},
    {"--cp", "N", "force context-parallel size (the sequence split over N ranks in 2N chunks)", T_JOB_INT, NULL},
    {"--pp", "N", "force pipeline-parallel size", T_JOB_INT, NULL},
    {"--dp", "N", "force data-parallel size (also N of --zero-table)", T_JOB_INT, NULL},
    {"--ep", "N", "force expert-parallel size (experts split over N of the dp ranks)", T_JOB_INT, NULL},
    {"--zero", "0-3", "force the ZeRO stage", T_JOB_INT, NULL},
    {"--micro-batch", "N", "force the micro-batch size (sequences)", T_JOB_INT, NULL},
    {"--interleave", "V", "force V model chunks per GPU (interleaved schedule)", T_JOB_INT, NULL},
    {"--recompute", "none|selective|full", "force activation recomputation", T_WORD, NULL},
    {"--schedule", "1f1b|gpipe|interleaved", "force the pipeline schedule", T_WORD, NULL},
    {"--max-bubble", "X", "reject pipelines whose bubble (p-1)/(v m) exceeds X (default 1)", T_NUM, NULL},
    {"--gemm-eff", "X", "fraction of peak a large GEMM sustains (default: the cluster preset's)", T_NUM, "calibration"},
    {"--attn-eff", "X", "fraction of peak a fused attention forward reaches (default: the preset's)", T_NUM, NULL},
    {"--attn-bwd-eff", "X", "fraction of peak a fused attention backward reaches (default: the preset's)", T_NUM, NULL},
    {"--hbm-eff", "X", "fraction of HBM bandwidth memory-bound kernels reach (default 0.80)", T_NUM, NULL},
    {"--nvlink-eff", "X", "fraction of NVLink bandwidth collectives reach (default 0.82)", T_NUM, NULL},
    {"--nic-eff", "X", "fraction of NIC line rate collectives reach (default 0.85)", T_NUM, NULL},
    {"--link-eff", "X", "set both --nvlink-eff and --nic-eff", T_NUM, NULL},
    {"--reserve-gib", "X", "memory per GPU kept for the runtime (default 2)", T_NUM, NULL},
    {"--kernel-gap-us", "X", "time between two kernels, microseconds (default 5)", T_NUM, NULL},
    {"--attn-half-len", "N", "key length at which fused attention runs at half its rate (default 200)", T_NUM, NULL},
    {"--jitter", "X", "relative spread of one GPU's step time (default: the fitted value)", T_NUM, NULL},
    {"--step-overhead", "S", "seconds per step outside the pipeline (default: the fitted value)", T_NUM, NULL},
    {"--engine-overhead", "S", "seconds per micro-batch slot of the DeepSpeed engine (default: fitted)", T_NUM, NULL},
    {"--json", NULL, "JSON instead of the table", T_FLAG, "output"},
    {"--explain", NULL, "every formula with its numbers for the best layout, why it wins, its MFU range", T_FLAG, NULL},
    {"--check", NULL, "compare the layout the flags force with the best one the search finds", T_FLAG, NULL},
    {"--top", "N", "show the N best layouts (default 10; 0 = all)", T_JOB_INT, NULL},
    {"--zero-table", NULL, "model states per ZeRO stage for --params/--model on --dp ranks", T_FLAG, NULL},
    {"--act-table", NULL, "activation memory by sequence length", T_FLAG, NULL},
    {"--act-seqs", "LIST", "sequence lengths of --act-table (default 1024,...,16384)", T_LIST, NULL},
    {"--act-k", "K", "k of the rule of thumb k b s L h e in --act-table (default 30)", T_NUM, NULL},
    {"--time-table", "LIST", "days to train on each GPU count in LIST (needs --tokens, --mfu)", T_LIST, NULL},
    {"--mfu", "X", "utilisation assumed by --time-table", T_NUM, NULL},
    {"--list", NULL, "list the model and cluster presets", T_FLAG, NULL},
    {"--help", NULL, "this text", T_FLAG, NULL},
};
#define NOPTS ((int)(sizeof(opts) / sizeof(opts[0])))

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "weft-plan: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n(weft-plan --help lists every flag)\n");
  va_end(ap);
  return 2;
}

static void print_help(void) {
  printf("usage: weft-plan [flags]\n"
         "Plans tensor, context, pipeline, data and expert parallelism for a transformer (dense or\n"
         "mixture of experts) on a GPU cluster: memory per GPU, traffic per dimension, step time,\n"
         "MFU and days to train, with the rejected layouts and why. Numbers take k, M, G (or B)\n"
         "and T suffixes (1e3 .. 1e12). See docs/planner.md.\n");
  for (int i = 0; i < NOPTS; i++) {
    if (opts[i].section) printf("\n%s:\n", opts[i].section);
    char left[64];
    snprintf(left, sizeof(left), "%s%s%s", opts[i].name, opts[i].arg ? " " : "",
             opts[i].arg ? opts[i].arg : "");
    printf("  %-34s %s\n", left, opts[i].help);
  }
  printf("\nexit status: 0 done, 1 no feasible layout, 2 bad input\n");
}

static void print_list(void) {
  printf("models:\n");
  for (int i = 0; plan_model_preset_name(i); i++)
    printf("  %-18s %s\n", plan_model_preset_name(i), plan_model_preset_about(i));
  printf("clusters:\n");
  for (int i = 0; plan_cluster_preset_name(i); i++)
    printf("  %-18s %s\n", plan_cluster_preset_name(i), plan_cluster_preset_about(i));
}

// A finite non-negative number with an optional k/M/G/B/T suffix.
static int parse_number(const char *s, double *out) {
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || errno != 0) return -1;
  const char *suffixes = "kMGBT";
  const double scale[] = {1e3, 1e6, 1e9, 1e9, 1e12};
  const char *hit = *end ? strchr(suffixes, *end) : NULL;
  if (hit) v *= scale[hit - suffixes], end++;
  if (*end != '\0' || !isfinite(v) || v < 0) return -1;
  *out = v;
  return 0;
}

static int parse_int(const char *s, int *out) {
  double v;
  if (parse_number(s, &v) != 0 || v != floor(v) || v > INT_MAX) return -1;
  *out = (int)v;
  return 0;
}

static int parse_list(const char *s, int *out, int *n) {
  char buf[512];
  snprintf(buf, sizeof(buf), "%s", s);
  *n = 0;
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (*n == MAX_LIST || parse_int(tok, &out[*n]) != 0 || out[*n] < 1) return -1;
    (*n)++;
  }
  return *n > 0 ? 0 : -1;
}

static int parse_switch(const char *s, int *out) {
  if (strcmp(s, "on") == 0 || strcmp(s, "1") == 0 || strcmp(s, "yes") == 0) return *out = 1, 0;
  if (strcmp(s, "off") == 0 || strcmp(s, "0") == 0 || strcmp(s, "no") == 0) return *out = 0, 0;
  return -1;
}

static int word_index(const char *s, const char *const *words, int n) {
  for (int i = 0; i < n; i++)
    if (strcmp(s, words[i]) == 0) return i;
  return -1;
}

// Applies one option (the presets were applied before any of these).
static int apply(cli_t *c, const opt_t *o, const char *v) {
  const char *name = o->name;
  double x = 0;
  int i = 0;
  if ((o->kind == T_NUM || o->kind == T_CLUSTER) && parse_number(v, &x) != 0)
    return usage_error("%s: '%s' is not a non-negative number", name, v);
  if ((o->kind == T_MODEL_INT || o->kind == T_JOB_INT) && parse_int(v, &i) != 0)
    return usage_error("%s: '%s' is not a non-negative whole number", name, v);
  if (o->kind == T_SWITCH && parse_switch(v, &i) != 0)
    return usage_error("%s: '%s' is not on or off", name, v);
  plan_model_t *m = &c->model;
  plan_cluster_t *k = &c->cluster;
  plan_job_t *j = &c->job;
  int *model_ints[] = {&m->layers, &m->hidden, &m->heads, &m->kv_heads, &m->head_dim, &m->ffn,
                       &m->vocab, &m->seq, &m->experts, &m->topk, &m->expert_ffn,
                       &m->shared_experts, &m->moe_every, &m->dense_layers, &m->q_lora,
                       &m->kv_lora, &m->rope_dim};
  const char *model_names[] = {"--layers", "--hidden", "--heads", "--kv-heads", "--head-dim",
                               "--ffn", "--vocab", "--seq", "--experts", "--topk", "--expert-ffn",
                               "--shared-experts", "--moe-every", "--dense-layers", "--q-lora",
                               "--kv-lora", "--rope-dim"};
  const int model_min[] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 0, 1, 0, 0, 0, 0};
  for (int n = 0; n < (int)(sizeof(model_min) / sizeof(model_min[0])); n++)
    if (strcmp(name, model_names[n]) == 0) {
      if (i < model_min[n]) return usage_error("%s must be >= %d (got %s)", name, model_min[n], v);
      *model_ints[n] = i;
      if (n == 1 || n == 2) m->head_dim = 0;  // re-derived from the new shape
      if (n == 8 && i == 0) m->topk = m->expert_ffn = m->shared_experts = m->dense_layers = 0;
      return 0;
    }
  struct { const char *name; int *dst; int min, max; } job_ints[] = {
      {"--gpus", &j->gpus, 1, INT_MAX}, {"--nodes", &c->nodes, 1, INT_MAX},
      {"--tp", &j->tp, 1, 65536}, {"--cp", &j->cp, 1, 65536}, {"--pp", &j->pp, 1, 65536},
      {"--dp", &j->dp, 1, INT_MAX}, {"--ep", &j->ep, 1, 65536},
      {"--zero", &j->zero, 0, 3}, {"--micro-batch", &j->micro_batch, 1, 65536},
      {"--interleave", &j->interleave, 1, 4096}, {"--top", &c->top, 0, INT_MAX}};
  for (size_t n = 0; n < sizeof(job_ints) / sizeof(job_ints[0]); n++)
    if (strcmp(name, job_ints[n].name) == 0) {
      if (i < job_ints[n].min || i > job_ints[n].max)
        return usage_error("%s: %s is out of range", name, v);
      *job_ints[n].dst = i;
      return 0;
    }
  struct { const char *name; double *dst, scale; int positive; } nums[] = {
      {"--params", &m->params, 1, 1}, {"--batch", &j->global_batch, 1, 1},
      {"--batch-tokens", &c->batch_tokens, 1, 1}, {"--tokens", &j->tokens, 1, 1},
      {"--weight-bytes", &j->bytes.weight, 1, 0}, {"--grad-bytes", &j->bytes.grad, 1, 0},
      {"--optim-bytes", &j->bytes.optim, 1, 0}, {"--act-bytes", &j->bytes.act, 1, 1},
      {"--max-bubble", &j->max_bubble, 1, 0}, {"--gemm-eff", &j->calib.gemm_eff, 1, 1},
      {"--hbm-eff", &j->calib.hbm_eff, 1, 1}, {"--attn-eff", &j->calib.attn_fwd_eff, 1, 1},
      {"--attn-bwd-eff", &j->calib.attn_bwd_eff, 1, 1}, {"--nvlink-eff", &j->calib.nvlink_eff, 1, 1},
      {"--nic-eff", &j->calib.nic_eff, 1, 1}, {"--link-eff", &j->calib.nvlink_eff, 1, 1},
      {"--reserve-gib", &j->calib.reserve_bytes, PLAN_GIB, 0},
      {"--kernel-gap-us", &j->calib.kernel_gap, 1e-6, 0}, {"--act-k", &c->act_k, 1, 1},
      {"--attn-half-len", &j->calib.attn_half_len, 1, 0}, {"--jitter", &j->calib.jitter, 1, 0},
      {"--step-overhead", &j->calib.step_overhead, 1, 0},
      {"--engine-overhead", &j->calib.engine_mb_overhead, 1, 0},
      {"--mfu", &c->mfu, 1, 1}, {"--gpu-mem-gib", &k->mem_bytes, PLAN_GIB, 1},
      {"--peak-tflops", &k->peak_flops, 1e12, 1}, {"--hbm-gbs", &k->hbm_bw, 1e9, 1},
      {"--nvlink-gbs", &k->nvlink_bw, 1e9, 1}, {"--nic-gbps", &k->nic_bw, 1e9 / 8, 1},
      {"--gemm-gflops", &k->gemm_flops, 1e9, 1}, {"--clock-sustain", &k->clock_sustain, 1, 1}};
  for (size_t n = 0; n < sizeof(nums) / sizeof(nums[0]); n++)
    if (strcmp(name, nums[n].name) == 0) {
      if (nums[n].positive && x <= 0) return usage_error("%s must be > 0 (got %s)", name, v);
      if ((strstr(name, "-eff") || !strcmp(name, "--mfu") || !strcmp(name, "--clock-sustain")) && x > 1)
        return usage_error("%s is a fraction of peak, at most 1 (got %s)", name, v);
      *nums[n].dst = x * nums[n].scale;
      if (strcmp(name, "--link-eff") == 0) j->calib.nic_eff = x;
      return 0;
    }
  if (!strcmp(name, "--gpus-per-node") || !strcmp(name, "--nics") || !strcmp(name, "--sms")) {
    int sms = strcmp(name, "--sms") == 0;
    if (parse_int(v, &i) != 0 || i < !sms || i > 1024)
      return usage_error("%s: '%s' is out of range (whole number, at most 1024)", name, v);
    *(sms ? &k->sms : name[2] == 'g' ? &k->gpus_per_node : &k->nics) = i;
    return 0;
  }
  struct { const char *name; int *dst; } switches[] = {
      {"--tied", &m->tied_embeddings}, {"--biases", &m->biases}, {"--flash", &m->flash_attention},
      {"--dropout", &m->dropout}, {"--sp", &j->sequence_parallel}, {"--dp-overlap", &j->dp_overlap},
      {"--tp-overlap", &j->tp_overlap}};
  for (size_t n = 0; n < sizeof(switches) / sizeof(switches[0]); n++)
    if (strcmp(name, switches[n].name) == 0) {
      *switches[n].dst = i;
      return 0;
    }
  static const char *const mlps[] = {"gelu", "swiglu"}, *const pos[] = {"rotary", "learned"};
  static const char *const rcs[] = {"none", "selective", "full"};
  static const char *const scheds[] = {"1f1b", "gpipe", "interleaved"};
  static const char *const engines[] = {"megatron", "deepspeed"};
  int engine = -1;
  int mlp = -1;
  struct { const char *name; const char *const *words; int n; int *dst; } words[] = {
      {"--mlp", mlps, 2, &mlp}, {"--positions", pos, 2, &m->learned_positions},
      {"--recompute", rcs, 3, &j->recompute}, {"--schedule", scheds, 3, &j->schedule},
      {"--engine", engines, 2, &engine}};
  for (size_t n = 0; n < sizeof(words) / sizeof(words[0]); n++)
    if (strcmp(name, words[n].name) == 0) {
      if ((i = word_index(v, words[n].words, words[n].n)) < 0)
        return usage_error("%s: '%s' is not one of the choices in --help", name, v);
      *words[n].dst = i;
      if (mlp >= 0) m->mlp = mlp == 1 ? PLAN_MLP_SWIGLU : PLAN_MLP_GELU;
      if (engine >= 0) j->engine = (plan_engine_t)engine;
      return 0;
    }
  if (strcmp(name, "--time-table") == 0 || strcmp(name, "--act-seqs") == 0) {
    int is_time = name[2] == 't';
    if (parse_list(v, is_time ? c->time_gpus : c->act_seqs, is_time ? &c->ntime : &c->nact) != 0)
      return usage_error("%s: '%s' is not a comma-separated list of up to 32 whole numbers >= 1", name, v);
    return 0;
  }
  if (strcmp(name, "--intra-json") == 0) c->intra_json = v;
  else if (strcmp(name, "--inter-json") == 0) c->inter_json = v;
  return 0;
}

static const opt_t *find_opt(const char *arg) {
  if (strcmp(arg, "-h") == 0) arg = "--help";
  for (int i = 0; i < NOPTS; i++)
    if (strcmp(arg, opts[i].name) == 0) return &opts[i];
  return NULL;
}

// Presets first, then the cluster file, so later flags override both.
static int apply_presets(cli_t *c, int argc, char **argv) {
  const char *file = NULL;
  for (int i = 1; i < argc; i++) {
    const opt_t *o = find_opt(argv[i]);
    if (o == NULL) return usage_error("unknown flag '%s'", argv[i]);
    if (o->kind == T_FLAG) continue;
    if (i + 1 >= argc) return usage_error("%s needs a value (%s)", o->name, o->arg);
    const char *v = argv[++i];
    if (strcmp(o->name, "--model") == 0 && plan_model_preset(v, &c->model) != 0)
      return usage_error("unknown model preset '%s' (weft-plan --list shows them)", v);
    if (strcmp(o->name, "--cluster") == 0) {
      if (plan_cluster_preset(v, &c->cluster) != 0)
        return usage_error("unknown cluster preset '%s' (weft-plan --list shows them)", v);
      c->have_cluster = 1;
    }
    if (strcmp(o->name, "--cluster-file") == 0) file = v;
  }
  if (file != NULL) {
    char err[300];
    if (plan_cluster_load_file(file, &c->cluster, err, sizeof(err)) != 0)
      return usage_error("%s", err);
    c->have_cluster = 1;
  }
  if (!c->have_cluster) {  // the override flags then apply to the default
    plan_cluster_preset(DEFAULT_CLUSTER, &c->cluster);
    c->default_cluster = 1;
  }
  return 0;
}

static int apply_flags(cli_t *c, int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const opt_t *o = find_opt(argv[i]);
    if (o->kind == T_FLAG) {
      int *flag = strcmp(o->name, "--json") == 0      ? &c->json
                  : strcmp(o->name, "--explain") == 0 ? &c->explain
                  : strcmp(o->name, "--check") == 0   ? &c->check
                  : strcmp(o->name, "--zero-table") == 0 ? &c->zero_table
                                                         : &c->act_table;
      *flag = 1;
      continue;
    }
    const char *v = argv[++i];
    if (o->kind == T_NAME && strcmp(o->name, "--intra-json") != 0 && strcmp(o->name, "--inter-json") != 0)
      continue;  // presets, already applied
    if (o->kind == T_CLUSTER) c->have_cluster = 1;
    int rc = apply(c, o, v);
    if (rc != 0) return rc;
  }
  char err[300];
  double bw, lat;
  if (c->intra_json) {
    if (plan_perf_json_bandwidth(c->intra_json, &bw, &lat, err, sizeof(err)) != 0)
      return usage_error("--intra-json: %s", err);
    c->cluster.intra_busbw = bw, c->cluster.intra_lat = lat;
  }
  if (c->inter_json) {
    if (plan_perf_json_bandwidth(c->inter_json, &bw, &lat, err, sizeof(err)) != 0)
      return usage_error("--inter-json: %s", err);
    c->cluster.inter_busbw = bw, c->cluster.inter_lat = lat;
  }
  return 0;
}

// --zero-table, --act-table, --time-table: stand-alone tables.
static int print_tables(cli_t *c) {
  plan_model_t *m = &c->model;
  plan_job_t *j = &c->job;
  if (c->zero_table) {
    int n = j->dp > 0 ? j->dp : j->gpus > 0 ? j->gpus : 1;
    plan_print_zero_table(stdout, plan_model_params(m), n, &j->bytes, c->json);
  }
  if (c->act_table) {
    if (plan_model_is_bare(m))
      return usage_error("--act-table needs a model shape (--model or --layers/--hidden/...), "
                         "not only --params");
    static const int seqs[] = {1024, 2048, 4096, 8192, 16384};
    if (c->nact == 0) memcpy(c->act_seqs, seqs, sizeof(seqs)), c->nact = 5;
    plan_print_activation_table(stdout, m, j, c->act_seqs, c->nact, c->act_k, c->json);
  }
  if (c->ntime > 0) {
    if (!(j->tokens > 0) || !(c->mfu > 0) || !(c->cluster.peak_flops > 0))
      return usage_error("--time-table needs --tokens, --mfu and a peak (--peak-tflops or "
                         "--cluster)");
    double flops = plan_model_flops_per_token(m, !plan_model_is_bare(m), NULL) * j->tokens;
    plan_print_time_table(stdout, flops, c->time_gpus, c->ntime, c->cluster.peak_flops, c->mfu,
                          c->json);
  }
  return 0;
}

// --check: the layout the flags force against the best of a free search
// (the layout, ZeRO, micro-batch, recompute and schedule flags lifted).
static void check_against_best(cli_t *c, const plan_search_t *yours) {
  plan_job_t free_job = c->job;
  free_job.tp = free_job.cp = free_job.pp = free_job.dp = free_job.ep = 0;
  free_job.micro_batch = free_job.interleave = 0;
  free_job.zero = free_job.recompute = free_job.schedule = -1;
  plan_search_t all;
  char err[300];
  FILE *f = c->json ? stderr : stdout;
  if (plan_search(&c->model, &c->cluster, &free_job, &all, err, sizeof(err)) != 0) {
    fprintf(stderr, "weft-plan: --check: %s\n", err);
    return;
  }
  const plan_candidate_t *mine = yours->nranked ? &yours->ranked[0]
                                 : yours->nrejected ? &yours->rejected[0]
                                                    : NULL;
  if (mine) plan_print_check(f, mine, all.nranked ? &all.ranked[0] : NULL);
  plan_search_free(&all);
}

static int plan(cli_t *c) {
  plan_model_t *m = &c->model;
  plan_job_t *j = &c->job;
  char err[300];
  if (plan_model_is_bare(m))
    return usage_error("a bare --params gives --zero-table and --time-table only; a plan needs "
                       "--model or the shape flags");
  if (c->default_cluster)
    fprintf(stderr, "weft-plan: no --cluster given: %s assumed\n", DEFAULT_CLUSTER);
  if (plan_cluster_check(&c->cluster, err, sizeof(err)) != 0) return usage_error("%s", err);
  if (c->nodes > 0) {
    if ((long long)c->nodes * c->cluster.gpus_per_node > INT_MAX)
      return usage_error("--nodes is too large");
    if (j->gpus > 0 && j->gpus != c->nodes * c->cluster.gpus_per_node)
      return usage_error("--gpus and --nodes disagree");
    j->gpus = c->nodes * c->cluster.gpus_per_node;
  }
  if (j->gpus == 0 && j->tp && j->pp && j->dp) j->gpus = j->tp * (j->cp ? j->cp : 1) * j->pp * j->dp;
  if (j->gpus == 0) return usage_error("give the job size: --gpus N or --nodes N");
  if (!(j->global_batch > 0) && !(c->batch_tokens > 0)) {
    c->batch_tokens = DEFAULT_BATCH_TOKENS;
    fprintf(stderr, "weft-plan: no --batch given: %.0f tokens per step assumed (--batch-tokens 16M,"
                    " Llama 3 405B's)\n", c->batch_tokens);
  }
  if (c->batch_tokens > 0) j->global_batch = fmax(1, round(c->batch_tokens / m->seq));
  plan_search_t s;
  if (plan_search(m, &c->cluster, j, &s, err, sizeof(err)) != 0) return usage_error("%s", err);
  if (c->json) plan_print_json(stdout, m, &c->cluster, j, &s, c->top);
  else plan_print_table(stdout, m, &c->cluster, j, &s, c->top);
  const plan_candidate_t *best = s.nranked ? &s.ranked[0] : s.nrejected ? &s.rejected[0] : NULL;
  if (c->explain && best != NULL) {
    FILE *why = c->json ? stderr : stdout;
    plan_result_t r;
    fprintf(why, "\nexplain: tp %d x cp %d x pp %d x dp %d, ep %d (%s)\n", best->layout.tp,
            best->layout.cp, best->layout.pp, best->layout.dp, best->layout.ep,
            s.nranked ? "the best layout" : "the nearest miss");
    plan_evaluate(m, &c->cluster, j, &best->layout, &r, why);
    plan_print_advice(why, m, &c->cluster, j, &s);
  }
  if (c->check) check_against_best(c, &s);
  int rc = 0;
  if (s.nranked == 0) {
    fprintf(stderr, "weft-plan: no feasible layout");
    if (s.nrejected == 1)
      fprintf(stderr, ": tp %d x cp %d x pp %d x dp %d, ep %d: %s: %s", s.rejected[0].layout.tp,
              s.rejected[0].layout.cp, s.rejected[0].layout.pp, s.rejected[0].layout.dp,
              s.rejected[0].layout.ep,
              plan_verdict_name(s.rejected[0].result.verdict), s.rejected[0].result.reason);
    fprintf(stderr, "\n");
    rc = 1;
  }
  plan_search_free(&s);
  return rc;
}

int main(int argc, char **argv) {
  static cli_t c;
  plan_job_defaults(&c.job);
  c.top = 10;
  c.act_k = 30;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return print_help(), 0;
    if (strcmp(argv[i], "--list") == 0) return print_list(), 0;
  }
  if (argc == 1) return print_help(), 2;
  int rc = apply_presets(&c, argc, argv);
  if (rc == 0) rc = apply_flags(&c, argc, argv);
  if (rc != 0) return rc;
  char err[300];
  if (plan_model_check(&c.model, err, sizeof(err)) != 0) return usage_error("%s", err);
  if (c.zero_table || c.act_table || c.ntime > 0) return print_tables(&c);
  return plan(&c);
}
