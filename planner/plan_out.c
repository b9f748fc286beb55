/*
 * plan_out.c — weft-plan's human output: the ranked layouts with the best
 * one broken down, the rejected ones with their reasons, and the three
 * stand-alone tables (model states per ZeRO stage, activations by sequence
 * length, time to train by GPU count). Every table names its units; the
 * JSON twin of each is in plan_out_json.c.
 */
#include <math.h>
#include <stdio.h>

#include "plan.h"

const char *plan_human_bytes(double bytes, char *buf, size_t n) {
  double gb = bytes / PLAN_GB;
  if (gb >= 1000) snprintf(buf, n, "%.3g TB", gb / 1000);
  else snprintf(buf, n, gb >= 100 ? "%.0f GB" : "%.3g GB", gb);
  return buf;
}

const char *plan_human_duration(double days, char *buf, size_t n) {
  if (!isfinite(days)) snprintf(buf, n, "never");
  else if (days >= 365.25) snprintf(buf, n, "%.1f years", days / 365.25);
  else if (days >= 56) snprintf(buf, n, "%.1f months", days / (365.25 / 12));
  else if (days >= 14) snprintf(buf, n, "%.1f weeks", days / 7);
  else if (days >= 2) snprintf(buf, n, "%.1f days", days);
  else snprintf(buf, n, "%.1f hours", days * 24);
  return buf;
}

static void print_header(FILE *f, const plan_model_t *m, const plan_cluster_t *c,
                         const plan_job_t *j) {
  double tokens = plan_training_tokens(m, j), per_step = j->global_batch * m->seq;
  double fpt = plan_model_flops_per_token(m, 1, NULL), f6 = plan_model_flops_per_token(m, 0, NULL);
  int gpn = c->gpus_per_node;
  fprintf(f, "weft-plan  %s on %d GPUs (%s, %d per node), batch %.0f x %d = %.4g tokens/step, "
             "train %.4g tokens%s\n",
          m->name, j->gpus, c->name, gpn, j->global_batch, m->seq, per_step, tokens,
          j->tokens > 0 ? "" : " (20 per parameter; set --tokens)");
  fprintf(f, "model      %.4g parameters; %d layers, hidden %d, %d heads (%d kv, dim %d), ffn %d %s, "
             "vocab %d, seq %d%s%s\n",
          plan_model_params(m), m->layers, m->hidden, m->heads, m->kv_heads, m->head_dim, m->ffn,
          m->mlp == PLAN_MLP_SWIGLU ? "swiglu" : "gelu", m->vocab, m->seq,
          m->flash_attention ? ", fused attention" : "", m->dropout ? ", dropout" : "");
  if (plan_model_is_moe(m))
    fprintf(f, "experts    %d MoE layers of %d experts (ffn %d), %d per token, %d shared; %.4g "
               "parameters active per token\n",
            plan_model_moe_layers(m), m->experts, m->expert_ffn, m->topk, m->shared_experts,
            plan_model_active_params(m));
  if (m->kv_lora > 0)
    fprintf(f, "attention  latent: query rank %d, key/value rank %d, rotary %d per head\n", m->q_lora,
            m->kv_lora, m->rope_dim);
  fprintf(f, "compute    %.4g FLOPs/token (6N %.4g + attention %.4g); C = %.4g FLOPs\n", fpt, f6,
          fpt - f6, fpt * tokens);
  fprintf(f, "cluster    %.1f GiB, %.4g TFLOP/s, HBM %.4g GB/s, NVLink %.4g GB/s, %d x %.4g Gb/s NICs"
             " per node%s%s\n",
          c->mem_bytes / PLAN_GIB, c->peak_flops / 1e12, c->hbm_bw / 1e9, c->nvlink_bw / 1e9, c->nics,
          c->nic_bw * 8 / 1e9, c->intra_busbw > 0 || c->inter_busbw > 0 ? ", measured bandwidth" : "",
          c->gemm_flops > 0 ? ", measured GEMM rate" : "");
}

static void print_row(FILE *f, int rank, const plan_candidate_t *c) {
  const plan_layout_t *l = &c->layout;
  const plan_result_t *r = &c->result;
  fprintf(f, "%4d %3d %3d %3d %6d %3d  %-11s %3d %4d %4d  %-9s  %6.1f / %-6.1f %7.3f %9.4g %6.3f %8.4g %9.4g\n",
          rank, l->tp, l->cp, l->pp, l->dp, l->ep, plan_sched_name(l->schedule), l->interleave,
          l->zero, l->micro_batch, plan_recompute_name(l->recompute), r->mem_total / PLAN_GIB,
          r->mem_usable / PLAN_GIB, r->bubble, r->step_time, r->mfu, r->model_tflops, r->days);
}

static void print_breakdown(FILE *f, const plan_candidate_t *c) {
  const plan_layout_t *l = &c->layout;
  const plan_result_t *r = &c->result;
  fprintf(f, "\nlayout 1: tp %d x cp %d x pp %d x dp %d (ep %d), ZeRO-%d, micro-batch %d, recompute %s, %s",
          l->tp, l->cp, l->pp, l->dp, l->ep, l->zero, l->micro_batch,
          plan_recompute_name(l->recompute), plan_sched_name(l->schedule));
  if (l->interleave > 1) fprintf(f, " v=%d", l->interleave);
  fprintf(f, "\n  memory/GPU (fullest stage %d, GiB): weights %.2f, gradients %.2f, optimizer %.2f "
             "(routed experts %.2f of these), activations %.2f (%.1f layer-micro-batches x %.1f MiB),"
             " working %.2f; total %.2f of %.2f usable\n",
          r->fullest_stage, r->mem_weights / PLAN_GIB, r->mem_grads / PLAN_GIB, r->mem_optim / PLAN_GIB,
          r->mem_expert_states / PLAN_GIB, r->mem_act / PLAN_GIB, r->inflight_layers,
          r->act_per_layer / 1048576, r->mem_work / PLAN_GIB, r->mem_total / PLAN_GIB,
          r->mem_usable / PLAN_GIB);
  fprintf(f, "  traffic/GPU/step: TP %.3g GB (%.3g s, on the critical path), CP %.3g GB (%.3g s exposed),"
             " EP %.3g GB (%.3g s, on the critical path), PP %.3g GB (%.3g s), DP %.3g GB (%.3g s,"
             " %.3g s exposed)\n",
          r->tp_bytes / PLAN_GB, r->tp_time, r->cp_bytes / PLAN_GB, r->cp_time, r->ep_bytes / PLAN_GB,
          r->ep_time, r->pp_bytes / PLAN_GB, r->t_p2p, r->dp_bytes / PLAN_GB, r->dp_time,
          r->dp_exposed);
  fprintf(f, "  time/step: %.0f micro-batches x %.4g s (fwd %.4g, bwd %.4g, recompute %.4g, TP %.4g,"
             " CP %.4g, EP %.4g) + bubble %.3f -> pipeline %.4g s, + DP %.4g s + optimizer %.4g s ="
             " %.4g s\n",
          r->micro_batches, r->t_mb, r->t_fwd, r->t_bwd, r->t_recompute, r->t_tp, r->t_cp, r->t_ep,
          r->bubble, r->t_pipeline, r->dp_exposed, r->t_optimizer, r->step_time);
  fprintf(f, "  MFU %.3f (%.1f TFLOP/s per GPU of model FLOPs; %.3f counting causal attention as"
             " half), HFU %.3f (%.1f TFLOP/s with recompute), %.0f tokens/s per GPU (%.4g GPU hours"
             " per trillion tokens), %.1f days\n",
          r->mfu, r->model_tflops, r->mfu_causal, r->hfu, r->hw_tflops, r->tokens_per_gpu_s,
          r->gpu_hours_per_t_tokens, r->days);
  if (r->warning[0]) fprintf(f, "  warning: %s\n", r->warning);
}

void plan_print_table(FILE *f, const plan_model_t *m, const plan_cluster_t *c, const plan_job_t *j,
                      const plan_search_t *s, int top) {
  print_header(f, m, c, j);
  fprintf(f, "\n%4s %3s %3s %3s %6s %3s  %-11s %3s %4s %4s  %-9s  %-15s %7s %9s %6s %8s %9s\n",
          "rank", "tp", "cp", "pp", "dp", "ep", "schedule", "v", "zero", "mbs", "recompute",
          "mem/GPU GiB", "bubble", "step s", "MFU", "TFLOP/s", "days");
  int shown = top > 0 && top < s->nranked ? top : s->nranked;
  for (int i = 0; i < shown; i++) print_row(f, i + 1, &s->ranked[i]);
  if (s->nranked == 0) fprintf(f, "  (no feasible layout)\n");
  else if (shown < s->nranked) fprintf(f, "  ... %d more feasible (--top N)\n", s->nranked - shown);
  if (s->nranked > 0) print_breakdown(f, &s->ranked[0]);
  if (s->nrejected > 0) {
    fprintf(f, "\nrejected (tp x cp x pp x dp, ep: the nearest miss)\n");
    for (int i = 0; i < s->nrejected; i++) {
      const plan_candidate_t *r = &s->rejected[i];
      fprintf(f, "  tp %d x cp %d x pp %d x dp %d, ep %d: %s: %s\n", r->layout.tp, r->layout.cp,
              r->layout.pp, r->layout.dp, r->layout.ep, plan_verdict_name(r->result.verdict),
              r->result.reason);
    }
  }
  fprintf(f, "\n%d settings evaluated: %d feasible, %d divisibility, %d memory, %d bubble, "
             "%d bandwidth\n",
          s->evaluated, s->count[0], s->count[1], s->count[2], s->count[3], s->count[4]);
}

static const char *const zero_forms[] = {"(w + g + o) P", "(w + g) P + o P/N", "w P + (g + o) P/N",
                                         "(w + g + o) P/N"};

void plan_print_zero_table(FILE *f, double psi, int n, const plan_bytes_t *b, int json) {
  char w[24], g[24], o[24], t[24];
  if (json) fprintf(f, "{\"params\":%.17g,\"ranks\":%d,\"stages\":[", psi, n);
  else
    fprintf(f, "model states for P = %.4g parameters on N = %d data-parallel ranks, w g o = %g %g %g "
               "bytes (GB = 1e9 bytes)\n%-5s  %-18s %10s %10s %10s %10s\n",
            psi, n, b->weight, b->grad, b->optim, "ZeRO", "per GPU", "weights", "gradients",
            "optimizer", "total");
  for (int z = 0; z <= 3; z++) {
    plan_states_t s = plan_model_states(psi, n, z, b, NULL);
    double total = s.weights + s.grads + s.optim;
    if (json)
      fprintf(f, "%s{\"zero\":%d,\"formula\":\"%s\",\"weights\":%.17g,\"grads\":%.17g,"
                 "\"optim\":%.17g,\"total\":%.17g}",
              z ? "," : "", z, zero_forms[z], s.weights, s.grads, s.optim, total);
    else
      fprintf(f, "%-5d  %-18s %10s %10s %10s %10s\n", z, zero_forms[z],
              plan_human_bytes(s.weights, w, sizeof(w)), plan_human_bytes(s.grads, g, sizeof(g)),
              plan_human_bytes(s.optim, o, sizeof(o)), plan_human_bytes(total, t, sizeof(t)));
  }
  if (json) fprintf(f, "]}\n");
}

void plan_print_activation_table(FILE *f, const plan_model_t *model, const plan_job_t *j,
                                 const int *seqs, int nseqs, double k, int json) {
  plan_model_t m = *model;
  int tp = j->tp > 0 ? j->tp : 1, b = j->micro_batch > 0 ? j->micro_batch : 1;
  int cp = j->cp > 0 ? j->cp : 1, moe_layers = plan_model_moe_layers(&m);
  double e = j->bytes.act;
  if (json) {
    fprintf(f, "{\"model\":");
    plan_json_write_string(f, m.name);
    fprintf(f, ",\"micro_batch\":%d,\"tp\":%d,\"cp\":%d,\"k\":%g,\"rows\":[", b, tp, cp, k);
  }
  if (!json)
    fprintf(f, "activations of %s, all %d layers, micro-batch %d, tp %d%s, cp %d, %g-byte elements"
               " (GiB)\n%7s %12s %10s %10s %10s\n",
            m.name, m.layers, b, tp, j->sequence_parallel && tp > 1 ? " with SP" : "", cp, e, "seq",
            "k b s L h e", "none", "selective", "full");
  for (int i = 0; i < nseqs; i++) {
    m.seq = seqs[i];
    double rule = plan_activation_rule_bytes(&m, k, b, e), per[PLAN_RECOMPUTE_COUNT];
    for (int rc = 0; rc < PLAN_RECOMPUTE_COUNT; rc++)
      per[rc] = (m.layers - moe_layers) * plan_layer_activation_bytes(&m, 0, b, tp, cp,
                                                                      j->sequence_parallel,
                                                                      (plan_recompute_t)rc, e, NULL) +
                moe_layers * plan_layer_activation_bytes(&m, 1, b, tp, cp, j->sequence_parallel,
                                                         (plan_recompute_t)rc, e, NULL);
    if (json)
      fprintf(f, "%s{\"seq\":%d,\"rule\":%.17g,\"none\":%.17g,\"selective\":%.17g,\"full\":%.17g}",
              i ? "," : "", seqs[i], rule, per[0], per[1], per[2]);
    else
      fprintf(f, "%7d %12.3g %10.3g %10.3g %10.3g\n", seqs[i], rule / PLAN_GIB, per[0] / PLAN_GIB,
              per[1] / PLAN_GIB, per[2] / PLAN_GIB);
  }
  if (json) fprintf(f, "]}\n");
  else fprintf(f, "(k b s L h e: the rule of thumb with k = %g; the other columns: Korthikanti et al. "
                  "2022's count for this model)\n", k);
}

void plan_print_time_table(FILE *f, double flops, const int *gpus, int ngpus, double peak,
                           double mfu, int json) {
  char buf[32];
  if (json) fprintf(f, "{\"flops\":%.17g,\"peak\":%.17g,\"mfu\":%g,\"rows\":[", flops, peak, mfu);
  else
    fprintf(f, "time to train C = %.4g FLOPs at %.4g TFLOP/s per GPU and MFU %.2f: T = C / (n F MFU)\n"
               "%8s %14s %12s  %s\n",
            flops, peak / 1e12, mfu, "gpus", "seconds", "days", "about");
  for (int i = 0; i < ngpus; i++) {
    double days = plan_days_to_train(flops, gpus[i], peak, mfu, NULL);
    if (json)
      fprintf(f, "%s{\"gpus\":%d,\"seconds\":%.17g,\"days\":%.17g}", i ? "," : "", gpus[i],
              days * 86400, days);
    else
      fprintf(f, "%8d %14.4g %12.2f  %s\n", gpus[i], days * 86400, days,
              plan_human_duration(days, buf, sizeof(buf)));
  }
  if (json) fprintf(f, "]}\n");
}
