/*
 * plan.h — weft-plan's model of training a transformer (dense or mixture of
 * experts) on a GPU cluster.
 *
 * The planner answers "how should I lay out model X on cluster Y, and how
 * long will it take?". It is a tool on top of weft, not part of libweft: it
 * uses libm only and no library symbol, so it builds and runs anywhere.
 *
 *   plan_model.c    presets, parameter count (GQA, MLA, SwiGLU/GELU, MoE),
 *                   FLOPs per token
 *   plan_cluster.c  node presets (with the measured kernel efficiencies and
 *                   their sources), key=value cluster files, perf -J bandwidths
 *   plan_json.c     a small JSON reader for the perf files (and the tests)
 *   plan_memory.c   model states per ZeRO stage, activations (Korthikanti
 *                   et al. 2022), micro-batches held per pipeline stage
 *   plan_comm.c     alpha-beta collectives, all-to-all, and the links each
 *                   dimension (tp, cp, ep, dp, pp) crosses
 *   plan_time.c     per-layer kernel times: GEMMs by shape, fused attention,
 *                   memory-bound kernels, and each layer's TP/CP/EP traffic
 *   plan_stage.c    which layers each pipeline stage holds, its memory
 *   plan_eval.c     one layout: checks, memory per stage, step time, MFU
 *   plan_search.c   enumerate (tp, cp, pp, dp, ep, zero, micro-batch,
 *                   recompute, v), reject with reasons, rank the rest
 *   plan_out.c      human tables; plan_out_json.c the same as JSON
 *
 * Units: bytes, seconds, FLOP and FLOP/s inside; presets are written in the
 * units their data sheets use and converted once on load. Every function that
 * takes a `FILE *why` prints its formula with the numbers substituted there
 * when it is not NULL (that is --explain), so formula and code stay together.
 *
 * Ranks are laid out as Megatron-Core does: tp fastest, then cp, then dp
 * (whose innermost ep ranks form an expert-parallel group), then pp; the
 * world is tp x cp x pp x dp.
 */
#ifndef WEFT_PLAN_H
#define WEFT_PLAN_H

#include <stddef.h>
#include <stdio.h>

#define PLAN_NAME_MAX 48
#define PLAN_GIB 1073741824.0
#define PLAN_GB 1e9

// ---------------------------------------------------------------- model

typedef enum { PLAN_MLP_GELU = 0, PLAN_MLP_SWIGLU = 1 } plan_mlp_t;

typedef struct {
  char name[PLAN_NAME_MAX];
  double params;            // bare parameter count; used only when layers == 0
  int layers, hidden, heads, kv_heads, head_dim, ffn, vocab, seq;
  plan_mlp_t mlp;
  int tied_embeddings;      // the output layer reuses the input embedding
  int learned_positions;    // a learned table of seq x hidden positions (GPT); else rotary
  int biases;               // linear layers and norms have biases (GPT, Megatron-LM)
  int flash_attention;      // fused attention: no s x s scores kept or written to memory
  int dropout;              // dropout on attention probabilities and residual branches
  // Mixture of experts (experts == 0: dense). Layer i (0-based) is an MoE
  // layer when i >= dense_layers and (i - dense_layers) % moe_every == 0;
  // its MLP is `experts` routed experts of width expert_ffn, of which each
  // token uses topk, plus shared_experts always-on experts of the same width
  // and a router (hidden x experts). `ffn` stays the dense layers' width.
  int experts, topk, expert_ffn, shared_experts, moe_every, dense_layers;
  // Multi-head latent attention (DeepSeek-V2/V3): queries through a rank
  // q_lora bottleneck (0: a full projection), keys and values through a rank
  // kv_lora bottleneck, and rope_dim extra query/key channels per head that
  // carry the rotary position. kv_lora == 0: ordinary (grouped-query) attention.
  int q_lora, kv_lora, rope_dim;
} plan_model_t;

int plan_model_preset(const char *name, plan_model_t *out);  // 0, or -1 if unknown
const char *plan_model_preset_name(int i);                   // NULL past the last
const char *plan_model_preset_about(int i);
// Fills derived defaults (kv_heads = heads, head_dim = hidden/heads, ffn,
// expert_ffn, moe_every) and checks every field; on error writes a sentence
// naming the flag to err and returns -1.
int plan_model_check(plan_model_t *m, char *err, size_t errlen);
int plan_model_is_bare(const plan_model_t *m);  // only a parameter count is known
int plan_model_is_moe(const plan_model_t *m);
int plan_model_layer_is_moe(const plan_model_t *m, int layer);
int plan_model_moe_layers(const plan_model_t *m);  // how many layers are MoE
double plan_model_params(const plan_model_t *m);
double plan_model_active_params(const plan_model_t *m);  // what one token uses
// One transformer layer (moe: an MoE layer, else a dense one).
double plan_model_layer_params(const plan_model_t *m, int moe);
double plan_model_layer_matmul_params(const plan_model_t *m, int moe);
double plan_model_layer_active_matmul_params(const plan_model_t *m, int moe);
double plan_model_layer_expert_params(const plan_model_t *m);  // routed experts of one MoE layer
double plan_model_attention_params(const plan_model_t *m);     // projections of one layer
double plan_model_embedding_params(const plan_model_t *m);     // token (+ position) table
double plan_model_head_params(const plan_model_t *m);          // 0 when tied

// Attention widths per token: queries and keys carry head_dim + rope_dim
// channels per head, values and the output head_dim.
typedef struct {
  double qk;   // query width, heads x (head_dim + rope_dim)
  double k;    // key width, kv_heads x (head_dim + rope_dim)
  double v;    // value width, kv_heads x head_dim
  double o;    // attention output width, heads x head_dim
} plan_attn_widths_t;
plan_attn_widths_t plan_model_attn_widths(const plan_model_t *m);
// Forward FLOPs per token of one layer: 2 x active matmul weights + the
// score and context products counted in full (s x s), as Megatron-LM counts
// them: 2 s (qk + o) (= 4 s q for ordinary attention).
double plan_model_layer_fwd_flops(const plan_model_t *m, int moe);
// Model FLOPs per trained token: 3 x forward (6N over the active matmul
// weights incl. the output layer) + the attention products; with_attention
// = 0 gives plain 6N.
double plan_model_flops_per_token(const plan_model_t *m, int with_attention, FILE *why);

// ---------------------------------------------------------------- cluster

typedef struct {
  char name[PLAN_NAME_MAX];
  int gpus_per_node;
  int sms;                  // streaming multiprocessors per GPU (0: no wave model)
  double mem_bytes;         // HBM per GPU
  double peak_flops;        // dense 16-bit tensor peak per GPU
  double hbm_bw;            // bytes/s
  double nvlink_bw;         // bytes/s per GPU, one direction
  int nics;                 // per node
  double nic_bw;            // bytes/s each
  // Fractions of peak this GPU's kernels were measured to reach (the preset
  // table in plan_cluster.c names each measurement).
  double gemm_eff;          // a large, well-shaped GEMM (a short benchmark)
  double attn_fwd_eff;      // a fused attention kernel, forward (a short benchmark)
  double attn_bwd_eff;      // and backward
  // The SM clock the GPU holds under sustained training load, as a fraction
  // of the clock those short benchmarks ran at (power-limit throttling);
  // 1 where no measurement is at hand. Scales every tensor-core rate.
  double clock_sustain;
  // Measured values override the data-sheet ones (0 = not measured).
  double intra_busbw, inter_busbw;  // bytes/s, nccl-tests bus bandwidth
  double intra_lat, inter_lat;      // seconds per ring hop
  double gemm_flops;                // achieved GEMM rate per GPU
} plan_cluster_t;

int plan_cluster_preset(const char *name, plan_cluster_t *out);
const char *plan_cluster_preset_name(int i);
const char *plan_cluster_preset_about(int i);
// key=value file (see docs/planner.md); `base = h100` starts from a preset.
int plan_cluster_load_file(const char *path, plan_cluster_t *c, char *err, size_t errlen);
// nccl-tests / weft perf -J output: bus bandwidth of the largest size and the
// per-hop latency from the smallest; returns -1 with a sentence on bad input.
int plan_perf_json_bandwidth(const char *path, double *busbw, double *hop_lat, char *err,
                             size_t errlen);
int plan_cluster_check(const plan_cluster_t *c, char *err, size_t errlen);

// ---------------------------------------------------------------- JSON (reader)

typedef enum { PLAN_JSON_NULL, PLAN_JSON_BOOL, PLAN_JSON_NUMBER, PLAN_JSON_STRING,
               PLAN_JSON_ARRAY, PLAN_JSON_OBJECT } plan_json_kind_t;

typedef struct plan_json {
  plan_json_kind_t kind;
  double number;            // NUMBER, BOOL (0/1)
  char *string;             // STRING
  char *key;                // the member name inside an object
  struct plan_json *child;  // first element / member
  struct plan_json *next;   // next sibling
} plan_json_t;

plan_json_t *plan_json_parse(const char *text, char *err, size_t errlen);
void plan_json_free(plan_json_t *v);
const plan_json_t *plan_json_get(const plan_json_t *obj, const char *key);
double plan_json_number(const plan_json_t *obj, const char *key, double fallback);

// ---------------------------------------------------------------- the job

typedef enum { PLAN_RECOMPUTE_NONE, PLAN_RECOMPUTE_SELECTIVE, PLAN_RECOMPUTE_FULL,
               PLAN_RECOMPUTE_COUNT } plan_recompute_t;
typedef enum { PLAN_SCHED_1F1B, PLAN_SCHED_GPIPE, PLAN_SCHED_INTERLEAVED } plan_sched_t;
// The pipeline engine: Megatron-LM/Megatron-Core (the schedules as
// modelled) or DeepSpeed's (1F1B with a host-side cost per micro-batch).
typedef enum { PLAN_ENGINE_MEGATRON, PLAN_ENGINE_DEEPSPEED } plan_engine_t;
const char *plan_engine_name(plan_engine_t e);
const char *plan_recompute_name(plan_recompute_t r);
const char *plan_sched_name(plan_sched_t s);

// Bytes per parameter and per activation element. Mixed-precision Adam is
// 2 (16-bit weights) + 2 (16-bit gradients) + 12 (fp32 master, m, v).
typedef struct {
  double weight, grad, optim, act;
} plan_bytes_t;

// The global constants of the time model; docs/planner.md and the comments
// at their defaults (plan_eval.c) give each one's source. The kernel
// efficiencies are per GPU (plan_cluster_t); a non-zero value here
// overrides the cluster's (--gemm-eff, --attn-eff, --attn-bwd-eff).
typedef struct {
  double gemm_eff;          // 0: the cluster's
  double attn_fwd_eff;      // 0: the cluster's
  double attn_bwd_eff;      // 0: the cluster's
  double hbm_eff;           // fraction of HBM bandwidth memory-bound kernels reach
  double nvlink_eff;        // fraction of NVLink bandwidth collectives reach
  double nic_eff;           // fraction of a NIC's line rate collectives reach
  double reserve_bytes;     // per-GPU memory kept for the runtime (context, workspaces)
  double kernel_gap;        // seconds between two kernels (launch and tail), per kernel
  // Fused attention reaches L / (L + attn_half_len) of its long-sequence
  // rate on key blocks of L tokens (s, or s/cp per context-parallel step).
  double attn_half_len;
  // Fitted on the fit set of docs/planner.md (each names a physical thing):
  double jitter;            // relative spread of one GPU's step time; a step waits for the slowest
  double step_overhead;     // seconds per step outside the pipeline (data, logging, launches)
  double engine_mb_overhead;  // seconds per micro-batch slot a non-Megatron pipeline engine adds
} plan_calib_t;

#define PLAN_HBM_EFF 0.80
#define PLAN_NVLINK_EFF 0.82
#define PLAN_NIC_EFF 0.85
#define PLAN_RESERVE_GIB 2.0
#define PLAN_KERNEL_GAP_US 50.0
#define PLAN_MAX_BUBBLE 1.0
#define PLAN_ATTN_HALF_LEN 200.0
#define PLAN_ATTN_REF_LEN 16384.0
// Fitted by planner/fit.py on the fit set of docs/planner.md ("Calibration"),
// each with its standard error: the relative spread of a GPU's step time,
// seconds per step outside the pipeline, seconds per DeepSpeed micro-batch
// slot, and Hopper's sustained clock (plan_cluster.c). The kernel gap
// (PLAN_KERNEL_GAP_US) is fitted too and sits at its declared bound.
#define PLAN_JITTER 0.0092
#define PLAN_JITTER_SE 0.0076
#define PLAN_STEP_OVERHEAD 0.089
#define PLAN_STEP_OVERHEAD_SE 0.031
#define PLAN_ENGINE_MB_OVERHEAD 0.0366
#define PLAN_ENGINE_MB_OVERHEAD_SE 0.0089
#define PLAN_HOPPER_CLOCK 0.775
#define PLAN_CLOCK_SE 0.029

typedef struct {
  int gpus;
  double global_batch;      // sequences per optimizer step
  double tokens;            // tokens to train on (0 = 20 per parameter)
  plan_bytes_t bytes;
  int sequence_parallel;    // TP with sequence parallelism (Korthikanti et al.)
  int dp_overlap;           // gradient reduction overlaps the backward (bucketed)
  int tp_overlap;           // TP collectives overlap the layer's GEMMs (Megatron-Core --tp-comm-overlap)
  plan_engine_t engine;
  double max_bubble;        // reject pipelines idle longer than this x the work
  plan_calib_t calib;
  // Constraints: 0 (or -1 for zero, recompute, schedule) lets the search choose.
  int tp, cp, pp, dp, ep, zero, micro_batch, interleave;
  int recompute, schedule;
} plan_job_t;

void plan_job_defaults(plan_job_t *job);

typedef struct {
  int tp, pp, dp, zero, micro_batch;
  int interleave;           // v: model chunks per GPU (1 unless interleaved)
  plan_recompute_t recompute;
  plan_sched_t schedule;
  int cp;                   // context parallel: the sequence split over cp ranks (0 reads as 1)
  int ep;                   // expert parallel: experts split over ep of the dp ranks (0 reads as 1)
} plan_layout_t;

// ---------------------------------------------------------------- memory

typedef struct {
  double weights, grads, optim;
} plan_states_t;

// Model states per GPU for psi parameters sharded over n data-parallel ranks.
plan_states_t plan_model_states(double psi, int n, int zero, const plan_bytes_t *b, FILE *why);
// Activation bytes one layer (an MoE layer when moe) keeps for one
// micro-batch of b sequences on one GPU of a tp x cp group.
double plan_layer_activation_bytes(const plan_model_t *m, int moe, double b, int tp, int cp,
                                   int sp, plan_recompute_t rc, double act_bytes, FILE *why);
// The rule of thumb M = k b s L h e (k = 30 in the seed text).
double plan_activation_rule_bytes(const plan_model_t *m, double k, double b, double act_bytes);
// Layer-micro-batches of activations held at once by pipeline stage `stage`
// (0-based) with `layers` layers, for m micro-batches.
double plan_inflight_layers(plan_sched_t s, int p, int v, int stage, int layers, double m);

// ---------------------------------------------------------------- communication

double plan_allreduce_time(double bytes, int n, double busbw, double hop_lat);
double plan_allgather_time(double bytes, int n, double busbw, double hop_lat);  // also reduce-scatter
double plan_p2p_time(double bytes, double bw, double lat);
// All-to-all of `bytes` per rank over n ranks, m of them in this rank's node:
// (m - 1)/n of it over NVLink, (n - m)/n over the network, concurrently.
double plan_alltoall_time(double bytes, int n, int m, double nvlink_bw, double net_bw,
                          double lat);

typedef struct {
  double busbw, lat;        // bus bandwidth (bytes/s) and per-hop latency of its ring
  int n, per_node;          // members, and members inside one node
  int crosses_nodes;
} plan_group_t;

typedef struct {
  plan_group_t tp, cp, dp, edp, ep;   // dp: dense gradients (dp x cp ranks); edp: experts' (dp x cp / ep)
  double cp_bw, cp_lat;               // one ring step of context parallelism (point to point)
  double ep_nvlink_bw, ep_net_bw, ep_lat;  // all-to-all, inside and across nodes
  double pp_bw, pp_lat;
  int pp_crosses_nodes;
} plan_links_t;

// Which links each dimension uses (tp innermost, then cp, ep, dp, pp).
plan_links_t plan_links(const plan_cluster_t *c, const plan_calib_t *k, int tp, int cp, int dp,
                        int ep);

// ---------------------------------------------------------------- evaluation

typedef enum { PLAN_FEASIBLE = 0, PLAN_REJECT_DIVISIBILITY, PLAN_REJECT_MEMORY,
               PLAN_REJECT_BUBBLE, PLAN_REJECT_BANDWIDTH } plan_verdict_t;
const char *plan_verdict_name(plan_verdict_t v);

typedef struct {
  plan_verdict_t verdict;
  char reason[240];
  // Memory per GPU on the fullest stage, bytes.
  double mem_weights, mem_grads, mem_optim, mem_act, mem_work, mem_total, mem_usable;
  double mem_expert_states; // of weights + grads + optim, the routed experts' share
  double act_per_layer;     // one layer (an MoE layer if any), one micro-batch
  double inflight_layers;   // layer-micro-batches held by the fullest stage
  int stage_layers;         // layers on the busiest stage
  int fullest_stage;        // the stage whose memory is reported
  double params_per_gpu;    // on the fullest stage
  double expert_params_per_gpu;
  // Communication per GPU per step: bytes sent and time each takes.
  double tp_bytes, tp_time, pp_bytes, pp_time, dp_bytes, dp_time, dp_exposed;
  double cp_bytes, cp_time, cp_exposed, ep_bytes, ep_time;
  // Time.
  double micro_batches;     // per pipeline per step
  double t_fwd, t_bwd, t_recompute, t_tp;   // per micro-batch on the busiest stage
  double t_cp, t_ep;        // per micro-batch: exposed CP ring time, all-to-all time
  double t_mb;              // one micro-batch through the busiest stage, comm included
  double bubble;            // (p - 1) / (v m)
  double t_pipeline, t_p2p, t_optimizer, step_time;
  double t_engine;          // the pipeline engine's own cost per step (0 for Megatron)
  double t_overhead;        // fixed per-step cost outside the pipeline
  double t_jitter;          // waiting for the slowest of the job's GPUs
  char warning[200];        // a feasible layout's caveat (e.g. communication-bound), or ""

  double model_flops, hw_flops;             // per step, all GPUs
  double mfu, hfu, model_tflops, hw_tflops; // per GPU
  double mfu_causal;        // MFU with the attention products counted over the causal half
  double tokens_per_gpu_s;                  // trained tokens per second per GPU
  double gpu_hours_per_t_tokens;            // GPU hours per 1e12 trained tokens
  double days;
} plan_result_t;

// Evaluates one layout (checks, memory, traffic, time); always fills out.
void plan_evaluate(const plan_model_t *m, const plan_cluster_t *c, const plan_job_t *job,
                   const plan_layout_t *l, plan_result_t *out, FILE *why);

// Days to train `flops` on n GPUs of `peak` FLOP/s at utilisation mfu.
double plan_days_to_train(double flops, int n, double peak, double mfu, FILE *why);
double plan_training_tokens(const plan_model_t *m, const plan_job_t *job);
// The bubble of a pipeline schedule as a fraction of the ideal (bubble-free)
// time: (p - 1)/(v m) for 1F1B and GPipe (v = 1) and interleaved 1F1B
// (Narayanan et al. 2021, section 2.2.2).
double plan_bubble_fraction(int p, int v, double m);

// ---------------------------------------------------------------- search

typedef struct {
  plan_layout_t layout;
  plan_result_t result;
  int departures;           // from the rule of thumb (plan_rule_departures)
} plan_candidate_t;

typedef struct {
  plan_candidate_t *ranked;    // feasible, fastest first, one per (tp, cp, pp, dp, ep)
  int nranked;
  plan_candidate_t *rejected;  // (tp, cp, pp, dp, ep) with nothing feasible: the nearest miss
  int nrejected;
  int evaluated;
  int count[5];                // candidates per verdict
} plan_search_t;

// Searches every layout allowed by the job's constraints; -1 with a sentence
// naming the flag when the constraints themselves are impossible (e.g.
// tp x cp x pp x dp != gpus, --ep on a dense model, --cp that does not
// split the sequence).
int plan_search(const plan_model_t *m, const plan_cluster_t *c, const plan_job_t *job,
                plan_search_t *out, char *err, size_t errlen);
void plan_search_free(plan_search_t *s);
// How often a layout departs from the rule of thumb for 3D parallelism (TP
// inside a node as wide as it goes, PP across nodes until the model fits,
// DP for the rest, CP only where the sequence needs it): +1 for tp below
// the node, +1 for cp leaving a rank under PLAN_CP_RULE_TOKENS tokens, +1
// for ZeRO-3.
int plan_rule_departures(const plan_model_t *m, const plan_cluster_t *c, const plan_layout_t *l);
// The widest tp the rule asks for: the node, as far as heads and ffn divide.
int plan_rule_widest_tp(const plan_model_t *m, const plan_cluster_t *c);
#define PLAN_CP_RULE_TOKENS 8192
// Step times closer than this are a tie the model cannot resolve (its RMS
// error on the validation set of docs/planner.md); ties go to the layout
// that departs least from the rule.
#define PLAN_TIE_BAND 0.05

// ---------------------------------------------------------------- advice (plan_advice.c)

// MFU of a layout with every fitted constant one standard error slower and
// faster.
void plan_mfu_range(const plan_model_t *m, const plan_cluster_t *c, const plan_job_t *j,
                    const plan_layout_t *l, double *lo, double *hi);
// Why layout 1 beats layout 2, how it relates to the rule of thumb, and its
// MFU range (--explain).
void plan_print_advice(FILE *f, const plan_model_t *m, const plan_cluster_t *c, const plan_job_t *j,
                       const plan_search_t *s);
// A user's layout against the best (--check); best may be NULL.
void plan_print_check(FILE *f, const plan_candidate_t *yours, const plan_candidate_t *best);

// ---------------------------------------------------------------- output

void plan_print_table(FILE *f, const plan_model_t *m, const plan_cluster_t *c,
                      const plan_job_t *job, const plan_search_t *s, int top);
void plan_print_json(FILE *f, const plan_model_t *m, const plan_cluster_t *c,
                     const plan_job_t *job, const plan_search_t *s, int top);
void plan_print_zero_table(FILE *f, double psi, int n, const plan_bytes_t *b, int json);
void plan_print_activation_table(FILE *f, const plan_model_t *m, const plan_job_t *job,
                                 const int *seqs, int nseqs, double k, int json);
void plan_print_time_table(FILE *f, double flops, const int *gpus, int ngpus, double peak,
                           double mfu, int json);
const char *plan_human_duration(double days, char *buf, size_t n);
const char *plan_human_bytes(double bytes, char *buf, size_t n);  // GB / TB (1e9, 1e12)
void plan_json_write_string(FILE *f, const char *s);

#endif
