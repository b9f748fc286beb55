/*
 * plan.h — weft-plan's model of training a dense transformer on a GPU cluster.
 *
 * The planner answers "how should I lay out model X on cluster Y, and how
 * long will it take?". It is a tool on top of weft, not part of libweft: it
 * uses libm only and no library symbol, so it builds and runs anywhere.
 *
 *   plan_model.c    presets, parameter count (GQA, SwiGLU/GELU), FLOPs per token
 *   plan_cluster.c  node presets, key=value cluster files, perf -J bandwidths
 *   plan_json.c     a small JSON reader for the perf files (and the tests)
 *   plan_memory.c   model states per ZeRO stage, activations (Korthikanti
 *                   et al. 2022), micro-batches held per pipeline stage
 *   plan_comm.c     alpha-beta collectives and the traffic of each dimension
 *   plan_time.c     per-layer roofline cost, step time, bubble, MFU, days
 *   plan_search.c   enumerate (tp, pp, dp, zero, micro-batch, recompute, v),
 *                   reject with reasons, rank the rest
 *   plan_eval.c     one layout: checks, memory per stage, step time, MFU
 *   plan_out.c      human tables; plan_out_json.c the same as JSON
 *
 * Units: bytes, seconds, FLOP and FLOP/s inside; presets are written in the
 * units their data sheets use and converted once on load. Every function that
 * takes a `FILE *why` prints its formula with the numbers substituted there
 * when it is not NULL (that is --explain), so formula and code stay together.
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
} plan_model_t;

int plan_model_preset(const char *name, plan_model_t *out);  // 0, or -1 if unknown
const char *plan_model_preset_name(int i);                   // NULL past the last
const char *plan_model_preset_about(int i);
// Fills derived defaults (kv_heads = heads, head_dim = hidden/heads, ffn) and
// checks every field; on error writes a sentence to err and returns -1.
int plan_model_check(plan_model_t *m, char *err, size_t errlen);
int plan_model_is_bare(const plan_model_t *m);  // only a parameter count is known
double plan_model_params(const plan_model_t *m);
double plan_model_layer_params(const plan_model_t *m);       // one transformer layer
double plan_model_layer_matmul_params(const plan_model_t *m);
double plan_model_embedding_params(const plan_model_t *m);   // token (+ position) table
double plan_model_head_params(const plan_model_t *m);        // 0 when tied
// Forward FLOPs per token of one layer: 2 x matmul weights + 4 s q (scores and
// context, the full s x s products as Megatron-LM counts them).
double plan_model_layer_fwd_flops(const plan_model_t *m);
// Model FLOPs per trained token: 3 x forward (6N for matmul weights incl. the
// output layer) + 12 L s q attention; with_attention = 0 gives plain 6N.
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
const char *plan_recompute_name(plan_recompute_t r);
const char *plan_sched_name(plan_sched_t s);

// Bytes per parameter and per activation element. Mixed-precision Adam is
// 2 (16-bit weights) + 2 (16-bit gradients) + 12 (fp32 master, m, v).
typedef struct {
  double weight, grad, optim, act;
} plan_bytes_t;

// The few global constants of the time model (docs/planner.md states them).
typedef struct {
  double gemm_eff;          // fraction of the tensor peak a large GEMM reaches
  double attn_eff;          // fraction of the tensor peak a fused attention kernel reaches
  double hbm_eff;           // fraction of HBM bandwidth memory-bound kernels reach
  double link_eff;          // fraction of NVLink / NIC bandwidth collectives reach
  double reserve_bytes;     // per-GPU memory kept for the runtime (context, workspaces)
  double kernel_gap;        // seconds between two kernels (launch and tail), per kernel
} plan_calib_t;

#define PLAN_GEMM_EFF 0.70
#define PLAN_ATTN_EFF 0.50
#define PLAN_HBM_EFF 0.70
#define PLAN_LINK_EFF 0.80
#define PLAN_RESERVE_GIB 2.0
#define PLAN_KERNEL_GAP_US 5.0
#define PLAN_MAX_BUBBLE 1.0

typedef struct {
  int gpus;
  double global_batch;      // sequences per optimizer step
  double tokens;            // tokens to train on (0 = 20 per parameter)
  plan_bytes_t bytes;
  int sequence_parallel;    // TP with sequence parallelism (Korthikanti et al.)
  double max_bubble;        // reject pipelines idle longer than this x the work
  plan_calib_t calib;
  // Constraints: 0 (or -1 for zero, recompute, schedule) lets the search choose.
  int tp, pp, dp, zero, micro_batch, interleave;
  int recompute, schedule;
} plan_job_t;

void plan_job_defaults(plan_job_t *job);

typedef struct {
  int tp, pp, dp, zero, micro_batch;
  int interleave;           // v: model chunks per GPU (1 unless interleaved)
  plan_recompute_t recompute;
  plan_sched_t schedule;
} plan_layout_t;

// ---------------------------------------------------------------- memory

typedef struct {
  double weights, grads, optim;
} plan_states_t;

// Model states per GPU for psi parameters sharded over n data-parallel ranks.
plan_states_t plan_model_states(double psi, int n, int zero, const plan_bytes_t *b, FILE *why);
// Activation bytes one layer keeps for one micro-batch of b sequences.
double plan_layer_activation_bytes(const plan_model_t *m, double b, int tp, int sp,
                                   plan_recompute_t rc, double act_bytes, FILE *why);
// The rule of thumb M = k b s L h e (k = 30 in the seed text).
double plan_activation_rule_bytes(const plan_model_t *m, double k, double b, double act_bytes);
// Layer-micro-batches of activations held at once by pipeline stage `stage`
// (0-based) with `layers` layers, for m micro-batches.
double plan_inflight_layers(plan_sched_t s, int p, int v, int stage, int layers, double m);

// ---------------------------------------------------------------- communication

double plan_allreduce_time(double bytes, int n, double busbw, double hop_lat);
double plan_allgather_time(double bytes, int n, double busbw, double hop_lat);  // also reduce-scatter
double plan_p2p_time(double bytes, double bw, double lat);

typedef struct {
  double tp_busbw, dp_busbw, pp_bw;   // bytes/s each dimension's collectives reach
  double tp_lat, dp_lat, pp_lat;      // seconds per hop
  int dp_crosses_nodes, pp_crosses_nodes;
} plan_links_t;

// Which links each dimension uses: tp is innermost, then dp, then pp.
plan_links_t plan_links(const plan_cluster_t *c, const plan_calib_t *k, int tp, int dp);

// ---------------------------------------------------------------- evaluation

typedef enum { PLAN_FEASIBLE = 0, PLAN_REJECT_DIVISIBILITY, PLAN_REJECT_MEMORY,
               PLAN_REJECT_BUBBLE, PLAN_REJECT_BANDWIDTH } plan_verdict_t;
const char *plan_verdict_name(plan_verdict_t v);

typedef struct {
  plan_verdict_t verdict;
  char reason[200];
  // Memory per GPU on the fullest stage, bytes.
  double mem_weights, mem_grads, mem_optim, mem_act, mem_work, mem_total, mem_usable;
  double act_per_layer;     // one layer, one micro-batch
  double inflight_layers;   // layer-micro-batches held by the fullest stage
  int stage_layers;         // layers on the busiest stage
  double params_per_gpu;
  // Communication per GPU per step: bytes sent and time each takes.
  double tp_bytes, tp_time, pp_bytes, pp_time, dp_bytes, dp_time, dp_exposed;
  // Time.
  double micro_batches;     // per pipeline per step
  double t_fwd, t_bwd, t_recompute, t_tp;   // per micro-batch on the busiest stage
  double t_mb;              // one micro-batch through the busiest stage, comm included
  double bubble;            // (p - 1) / (v m)
  double t_pipeline, t_p2p, t_optimizer, step_time;
  double model_flops, hw_flops;             // per step, all GPUs
  double mfu, hfu, model_tflops, hw_tflops; // per GPU
  double days;
} plan_result_t;

// Evaluates one layout (checks, memory, traffic, time); always fills out.
void plan_evaluate(const plan_model_t *m, const plan_cluster_t *c, const plan_job_t *job,
                   const plan_layout_t *l, plan_result_t *out, FILE *why);

// Days to train `flops` on n GPUs of `peak` FLOP/s at utilisation mfu.
double plan_days_to_train(double flops, int n, double peak, double mfu, FILE *why);
double plan_training_tokens(const plan_model_t *m, const plan_job_t *job);

// ---------------------------------------------------------------- search

typedef struct {
  plan_layout_t layout;
  plan_result_t result;
} plan_candidate_t;

typedef struct {
  plan_candidate_t *ranked;    // feasible, fastest first, one per (tp, pp, dp)
  int nranked;
  plan_candidate_t *rejected;  // (tp, pp, dp) with nothing feasible: the nearest miss
  int nrejected;
  int evaluated;
  int count[5];                // candidates per verdict
} plan_search_t;

// Searches every layout allowed by the job's constraints; -1 with a sentence
// when the constraints themselves are impossible (e.g. tp*pp*dp != gpus).
int plan_search(const plan_model_t *m, const plan_cluster_t *c, const plan_job_t *job,
                plan_search_t *out, char *err, size_t errlen);
void plan_search_free(plan_search_t *s);

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
