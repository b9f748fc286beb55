/*
 * plan_out_json.c — weft-plan --json: the same answer as the table, for
 * programs. Sizes are bytes, times seconds, rates FLOP/s or bytes/s, so
 * nothing needs a unit suffix; names and reasons are JSON-escaped.
 */
#include <math.h>
#include <stdio.h>

#include "plan.h"

void plan_json_write_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
    else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
    else fputc(ch, f);
  }
  fputc('"', f);
}

static void key(FILE *f, const char *k, int first) { fprintf(f, "%s\"%s\":", first ? "" : ",", k); }

// A number, or null where the model produced none (JSON has no inf or NaN).
static void num(FILE *f, const char *k, double v) {
  key(f, k, 0);
  if (isfinite(v)) fprintf(f, "%.10g", v);
  else fprintf(f, "null");
}

static void object(FILE *f, const char *name, const char *const *keys, const double *vals, int n) {
  fprintf(f, ",\"%s\":{", name);
  for (int i = 0; i < n; i++) {
    if (isfinite(vals[i])) fprintf(f, "%s\"%s\":%.10g", i ? "," : "", keys[i], vals[i]);
    else fprintf(f, "%s\"%s\":null", i ? "," : "", keys[i]);
  }
  fputc('}', f);
}

static void candidate(FILE *f, const plan_candidate_t *c, int rank) {
  const plan_layout_t *l = &c->layout;
  const plan_result_t *r = &c->result;
  fprintf(f, "{\"rank\":%d,\"tp\":%d,\"cp\":%d,\"pp\":%d,\"dp\":%d,\"ep\":%d,\"zero\":%d,"
             "\"micro_batch\":%d,\"interleave\":%d,\"schedule\":\"%s\",\"recompute\":\"%s\","
             "\"verdict\":\"%s\"",
          rank, l->tp, l->cp, l->pp, l->dp, l->ep, l->zero, l->micro_batch, l->interleave,
          plan_sched_name(l->schedule), plan_recompute_name(l->recompute),
          plan_verdict_name(r->verdict));
  key(f, "reason", 0);
  plan_json_write_string(f, r->reason);
  key(f, "warning", 0);
  plan_json_write_string(f, r->warning);
  static const char *const mem[] = {"weights", "grads", "optim", "activations", "working", "total",
                                    "usable", "per_layer", "inflight_layers", "params_per_gpu",
                                    "expert_params_per_gpu", "expert_states", "fullest_stage"};
  double memv[] = {r->mem_weights, r->mem_grads, r->mem_optim, r->mem_act, r->mem_work, r->mem_total,
                   r->mem_usable, r->act_per_layer, r->inflight_layers, r->params_per_gpu,
                   r->expert_params_per_gpu, r->mem_expert_states, r->fullest_stage};
  object(f, "memory", mem, memv, 13);
  static const char *const comm[] = {"tp_bytes", "tp_time", "cp_bytes", "cp_exposed", "ep_bytes",
                                     "ep_time", "pp_bytes", "pp_time", "dp_bytes", "dp_time",
                                     "dp_exposed"};
  double commv[] = {r->tp_bytes, r->tp_time, r->cp_bytes, r->cp_time, r->ep_bytes, r->ep_time,
                    r->pp_bytes, r->t_p2p, r->dp_bytes, r->dp_time, r->dp_exposed};
  object(f, "comm", comm, commv, 11);
  static const char *const time[] = {"micro_batches", "t_mb", "fwd", "bwd", "recompute", "tp",
                                     "cp", "ep", "bubble", "pipeline", "optimizer", "engine",
                                     "overhead", "jitter", "step"};
  double timev[] = {r->micro_batches, r->t_mb, r->t_fwd, r->t_bwd, r->t_recompute, r->t_tp,
                    r->t_cp, r->t_ep, r->bubble, r->t_pipeline, r->t_optimizer, r->t_engine,
                    r->t_overhead, r->t_jitter, r->step_time};
  object(f, "time", time, timev, 15);
  num(f, "mfu", r->mfu);
  num(f, "hfu", r->hfu);
  num(f, "mfu_causal", r->mfu_causal);
  num(f, "model_tflops", r->model_tflops);
  num(f, "hw_tflops", r->hw_tflops);
  num(f, "tokens_per_gpu_s", r->tokens_per_gpu_s);
  num(f, "gpu_hours_per_t_tokens", r->gpu_hours_per_t_tokens);
  num(f, "days", r->days);
  fputc('}', f);
}

void plan_print_json(FILE *f, const plan_model_t *m, const plan_cluster_t *c, const plan_job_t *j,
                     const plan_search_t *s, int top) {
  fprintf(f, "{\"model\":{\"name\":");
  plan_json_write_string(f, m->name);
  fprintf(f, ",\"layers\":%d,\"hidden\":%d,\"heads\":%d,\"kv_heads\":%d,\"head_dim\":%d,\"ffn\":%d,"
             "\"vocab\":%d,\"seq\":%d,\"mlp\":\"%s\"",
          m->layers, m->hidden, m->heads, m->kv_heads, m->head_dim, m->ffn, m->vocab, m->seq,
          m->mlp == PLAN_MLP_SWIGLU ? "swiglu" : "gelu");
  fprintf(f, ",\"experts\":%d,\"topk\":%d,\"expert_ffn\":%d,\"shared_experts\":%d,"
             "\"moe_layers\":%d,\"q_lora\":%d,\"kv_lora\":%d,\"rope_dim\":%d",
          m->experts, m->topk, m->expert_ffn, m->shared_experts, plan_model_moe_layers(m), m->q_lora,
          m->kv_lora, m->rope_dim);
  num(f, "params", plan_model_params(m));
  num(f, "active_params", plan_model_active_params(m));
  num(f, "flops_per_token", plan_model_flops_per_token(m, 1, NULL));
  num(f, "flops_per_token_6n", plan_model_flops_per_token(m, 0, NULL));
  fprintf(f, "},\"cluster\":{\"name\":");
  plan_json_write_string(f, c->name);
  fprintf(f, ",\"gpus_per_node\":%d,\"nics\":%d,\"sms\":%d", c->gpus_per_node, c->nics, c->sms);
  num(f, "mem_bytes", c->mem_bytes);
  num(f, "peak_flops", c->peak_flops);
  num(f, "hbm_bw", c->hbm_bw);
  num(f, "nvlink_bw", c->nvlink_bw);
  num(f, "nic_bw", c->nic_bw);
  num(f, "intra_busbw", c->intra_busbw);
  num(f, "inter_busbw", c->inter_busbw);
  num(f, "gemm_flops", c->gemm_flops);
  num(f, "gemm_eff", c->gemm_eff);
  num(f, "attn_fwd_eff", c->attn_fwd_eff);
  num(f, "attn_bwd_eff", c->attn_bwd_eff);
  num(f, "clock_sustain", c->clock_sustain);
  fprintf(f, "},\"job\":{\"gpus\":%d", j->gpus);
  num(f, "global_batch", j->global_batch);
  num(f, "tokens", plan_training_tokens(m, j));
  num(f, "training_flops", plan_model_flops_per_token(m, 1, NULL) * plan_training_tokens(m, j));
  fprintf(f, ",\"sequence_parallel\":%d,\"bytes\":{\"weight\":%g,\"grad\":%g,\"optim\":%g,\"act\":%g}",
          j->sequence_parallel, j->bytes.weight, j->bytes.grad, j->bytes.optim, j->bytes.act);
  fprintf(f, ",\"dp_overlap\":%d,\"calibration\":{\"gemm_eff\":%g,\"attn_fwd_eff\":%g,"
             "\"attn_bwd_eff\":%g,\"hbm_eff\":%g,\"nvlink_eff\":%g,\"nic_eff\":%g,"
             "\"reserve_bytes\":%.10g,\"kernel_gap\":%g}}",
          j->dp_overlap, j->calib.gemm_eff > 0 ? j->calib.gemm_eff : c->gemm_eff,
          j->calib.attn_fwd_eff > 0 ? j->calib.attn_fwd_eff : c->attn_fwd_eff,
          j->calib.attn_bwd_eff > 0 ? j->calib.attn_bwd_eff : c->attn_bwd_eff, j->calib.hbm_eff,
          j->calib.nvlink_eff, j->calib.nic_eff, j->calib.reserve_bytes, j->calib.kernel_gap);
  fprintf(f, ",\"layouts\":[");
  int shown = top > 0 && top < s->nranked ? top : s->nranked;
  for (int i = 0; i < shown; i++) {
    if (i) fputc(',', f);
    candidate(f, &s->ranked[i], i + 1);
  }
  fprintf(f, "],\"feasible\":%d,\"rejected\":[", s->nranked);
  for (int i = 0; i < s->nrejected; i++) {
    if (i) fputc(',', f);
    candidate(f, &s->rejected[i], 0);
  }
  fprintf(f, "],\"counts\":{\"evaluated\":%d,\"feasible\":%d,\"divisibility\":%d,\"memory\":%d,"
             "\"bubble\":%d,\"bandwidth\":%d}}\n",
          s->evaluated, s->count[0], s->count[1], s->count[2], s->count[3], s->count[4]);
}
