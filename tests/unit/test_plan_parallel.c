/*
 * test_plan_parallel.c — the planner's context and expert parallelism,
 * mixture-of-experts models and the presets: memory and traffic of each
 * dimension on small cases worked out by hand, the all-to-all and the links
 * each group crosses, how stages split the layers, the schedules' bubble,
 * and the constraints weft-plan refuses with a sentence naming the flag.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plan.h"

#define NEAR(x, want, rel, ...) cr_expect(fabs((x) / (want) - 1) <= (rel), __VA_ARGS__)

static plan_model_t model(const char *name) {
  plan_model_t m = {0};
  cr_assert_eq(plan_model_preset(name, &m), 0, "preset %s", name);
  char err[200];
  cr_assert_eq(plan_model_check(&m, err, sizeof(err)), 0, "%s", err);
  return m;
}

static plan_cluster_t cluster(const char *name) {
  plan_cluster_t c;
  cr_assert_eq(plan_cluster_preset(name, &c), 0, "preset %s", name);
  return c;
}

static plan_job_t job(int gpus, double batch) {
  plan_job_t j;
  plan_job_defaults(&j);
  j.gpus = gpus;
  j.global_batch = batch;
  j.bytes.grad = 2;  // the ZeRO paper's 2-byte gradients: the formulas below are its
  return j;
}

// A model small enough to check by hand: 2 layers, hidden 64, 4 heads of 16,
// MLP 256 (SwiGLU), fused attention, sequence 32, vocabulary 100.
static plan_model_t tiny(int experts) {
  plan_model_t m = {.layers = 2, .hidden = 64, .heads = 4, .kv_heads = 4, .head_dim = 16,
                    .ffn = 256, .vocab = 100, .seq = 32, .mlp = PLAN_MLP_SWIGLU,
                    .flash_attention = 1, .experts = experts, .topk = experts ? 2 : 0,
                    .expert_ffn = experts ? 128 : 0};
  char err[200];
  cr_assert_eq(plan_model_check(&m, err, sizeof(err)), 0, "%s", err);
  return m;
}

Test(plan_parallel, every_preset_loads_and_moe_presets_have_their_published_sizes, .timeout = 10) {
  int n = 0;
  for (int i = 0; plan_model_preset_name(i); i++, n++) {
    plan_model_t m = model(plan_model_preset_name(i));
    cr_expect_gt(plan_model_params(&m), 1e8, "%s", m.name);
    cr_expect_leq(plan_model_active_params(&m), plan_model_params(&m), "%s", m.name);
  }
  cr_expect_eq(n, 21, "the presets docs/planner.md lists");
  const struct {
    const char *name;
    double total, active, rel;
  } moe[] = {{"mixtral-8x7b", 46.7e9, 12.9e9, 0.005},  // Jiang et al. 2024: 47B, 13B active
             {"deepseek-v2", 236e9, 21e9, 0.02},      // DeepSeek-AI 2024: 236B, 21B
             {"deepseek-v3", 671e9, 37e9, 0.02}};     // 671B, 37B (without the MTP module)
  for (size_t i = 0; i < sizeof(moe) / sizeof(moe[0]); i++) {
    plan_model_t m = model(moe[i].name);
    NEAR(plan_model_params(&m), moe[i].total, moe[i].rel, "%s: %.4g", moe[i].name, plan_model_params(&m));
    NEAR(plan_model_active_params(&m), moe[i].active, moe[i].rel, "%s: %.4g active", moe[i].name,
         plan_model_active_params(&m));
  }
  plan_model_t v2 = model("deepseek-v2");
  cr_expect_eq(plan_model_moe_layers(&v2), 59, "all but the first layer");
  cr_expect_eq(plan_model_layer_is_moe(&v2, 0), 0);
  cr_expect_eq(plan_model_layer_is_moe(&v2, 1), 1);
  // MLA of DeepSeek-V2 by hand: 5120x1536 + 1536x128x192 + 5120x576 + 512x128x256 + 128x128x5120.
  cr_expect_eq(plan_model_attention_params(&v2),
               5120.0 * 1536 + 1536.0 * 128 * 192 + 5120.0 * 576 + 512.0 * 128 * 256 + 128.0 * 128 * 5120);
}

Test(plan_parallel, stages_split_layers_into_floor_and_ceil_with_short_end_stages, .timeout = 10) {
  plan_model_t l = model("llama3-405b");
  // Llama 3: 126 layers on 16 stages, the first and last one layer short.
  plan_result_t r;
  plan_cluster_t c = cluster("h100-80g");
  plan_job_t j = job(8192, 2048);
  plan_layout_t lay = {.tp = 8, .pp = 16, .dp = 64, .zero = 1, .micro_batch = 1, .interleave = 1,
                       .recompute = PLAN_RECOMPUTE_FULL, .schedule = PLAN_SCHED_1F1B};
  plan_evaluate(&l, &c, &j, &lay, &r, NULL);
  cr_assert_eq(r.verdict, PLAN_FEASIBLE, "%s", r.reason);
  cr_expect_eq(r.stage_layers, 8, "the busiest stage holds ceil(126/16)");
  // Interleaving needs v to divide the fullest stage: 8 does, 7 does not.
  lay.schedule = PLAN_SCHED_INTERLEAVED, lay.interleave = 7;
  plan_evaluate(&l, &c, &j, &lay, &r, NULL);
  cr_expect(strstr(r.reason, "v 7 does not divide the 8 layers of a stage") != NULL, "%s", r.reason);
}

Test(plan_parallel, interleaved_bubble_is_p_minus_1_over_v_m, .timeout = 10) {
  cr_expect_eq(plan_bubble_fraction(16, 8, 32), 15.0 / 256);
  cr_expect_eq(plan_bubble_fraction(4, 1, 64), 3.0 / 64);
  cr_expect_eq(plan_bubble_fraction(1, 1, 8), 0, "no pipeline, no bubble");
  // Narayanan et al. 2021: interleaving keeps (1 + (p - 1)/(p v)) x 1F1B's
  // activations on the first stage: p v + p - 1 chunks of L/v layers.
  double p = 8, v = 4, layers = 16;
  double one = plan_inflight_layers(PLAN_SCHED_1F1B, 8, 1, 0, 16, 64);
  double inter = plan_inflight_layers(PLAN_SCHED_INTERLEAVED, 8, 4, 0, 16, 64);
  cr_expect_eq(inter, (p * v + p - 1) * layers / v);
  NEAR(inter / one, 1 + (p - 1) / (p * v), 1e-12, "the interleaved memory factor");
}

Test(plan_parallel, context_parallel_divides_activations_by_cp, .timeout = 10) {
  plan_model_t m = tiny(0);
  // Per token, e = 2: kept 4 e h = 512; split e (q + k + v) + e o + 3 e f + 4 a
  // = 384 + 128 + 1536 + 16 = 2064; 16 of the 32 tokens on each of 2 cp ranks.
  cr_expect_eq(plan_layer_activation_bytes(&m, 0, 1, 1, 2, 0, PLAN_RECOMPUTE_NONE, 2, NULL),
               16 * (512 + 2064.0));
  cr_expect_eq(plan_layer_activation_bytes(&m, 0, 1, 1, 1, 0, PLAN_RECOMPUTE_NONE, 2, NULL),
               32 * (512 + 2064.0));
  plan_model_t big = model("llama3-70b");
  for (int rc = 0; rc < PLAN_RECOMPUTE_COUNT; rc++)
    NEAR(plan_layer_activation_bytes(&big, 0, 1, 8, 8, 1, rc, 2, NULL),
         plan_layer_activation_bytes(&big, 0, 1, 8, 1, 1, rc, 2, NULL) / 8, 1e-12, "recompute %d", rc);
  // An MoE layer: topk 2 experts of 128 (SwiGLU: 3 e f each) instead of the
  // MLP's 3 e 256, plus 2 e k h of dispatched/returned tokens and 4 E of router.
  plan_model_t moe = tiny(8);
  cr_expect_eq(plan_layer_activation_bytes(&moe, 1, 1, 1, 1, 0, PLAN_RECOMPUTE_NONE, 2, NULL),
               32 * (512 + (384 + 128 + 2 * 3 * 2 * 128 + 16) + 2 * 2 * 2 * 64 + 4 * 8.0));
}

Test(plan_parallel, expert_parallel_divides_expert_states_by_ep, .timeout = 10) {
  plan_model_t m = tiny(8);
  plan_cluster_t c = cluster("h100-80g");
  plan_job_t j = job(8, 64);
  plan_layout_t l = {.tp = 1, .pp = 1, .dp = 8, .ep = 4, .zero = 0, .micro_batch = 1,
                     .interleave = 1, .recompute = PLAN_RECOMPUTE_NONE, .schedule = PLAN_SCHED_1F1B};
  plan_result_t r;
  plan_evaluate(&m, &c, &j, &l, &r, NULL);
  cr_assert_eq(r.verdict, PLAN_FEASIBLE, "%s", r.reason);
  // 2 layers x 8 experts of 3 x 64 x 128 weights, 2 of the experts on each of 4 ep ranks.
  double experts = 2 * 8 * 3 * 64 * 128.0 / 4;
  cr_expect_eq(r.expert_params_per_gpu, experts);
  cr_expect_eq(r.mem_expert_states, 16 * experts, "ZeRO-0: 16 bytes each");
  l.zero = 1;  // optimizer state sharded over dp x cp / ep = 2 ranks for experts
  plan_evaluate(&m, &c, &j, &l, &r, NULL);
  cr_expect_eq(r.mem_expert_states, 4 * experts + 12 * experts / 2);
  l.ep = 1;
  plan_evaluate(&m, &c, &j, &l, &r, NULL);
  cr_expect_eq(r.expert_params_per_gpu, 4 * experts, "without ep every rank holds every expert");
}

Test(plan_parallel, cp_and_ep_traffic_match_the_formulas, .timeout = 10) {
  plan_model_t m = tiny(8);
  plan_cluster_t c = cluster("h100-80g");
  plan_job_t j = job(16, 16);
  // tp 1, cp 2, dp 8 (ep 4): 16 / 8 = 2 sequences per replica, micro-batches of 1.
  plan_layout_t l = {.tp = 1, .cp = 2, .pp = 1, .dp = 8, .ep = 4, .zero = 1, .micro_batch = 1,
                     .interleave = 1, .recompute = PLAN_RECOMPUTE_NONE, .schedule = PLAN_SCHED_1F1B};
  plan_result_t r;
  plan_evaluate(&m, &c, &j, &l, &r, NULL);
  cr_assert_eq(r.verdict, PLAN_FEASIBLE, "%s", r.reason);
  cr_expect_eq(r.micro_batches, 2);
  double e = 2, T = 32 / 2, kv = 64 + 64;  // tokens per cp rank; K and V widths
  // CP ring: per layer and micro-batch, (cp - 1) K/V blocks forward, twice that backward.
  cr_expect_eq(r.cp_bytes, 2 * 2 * 3 * (2 - 1) * e * T * kv, "micro-batches x layers x 3 (cp-1) e T (k+v)");
  // EP: dispatch + combine, forward + backward, topk copies, (ep - 1)/ep leaves the GPU.
  cr_expect_eq(r.ep_bytes, 2 * 2 * 4 * e * 2 * 64 * T * 3 / 4, "mbs x layers x 4 e k h T (ep-1)/ep");
  cr_expect_eq(r.tp_bytes, 0, "tp 1 sends nothing");
  cr_expect_gt(r.t_ep, 0, "the all-to-alls are on the critical path");
}

Test(plan_parallel, all_to_all_and_group_links, .timeout = 10) {
  // 16 ranks, 8 in this node: 7/16 over NVLink, 8/16 over the NIC, at once.
  cr_expect_eq(plan_alltoall_time(8e6, 16, 8, 100e9, 10e9, 0), 8e6 * 8 / 16 / 10e9);
  cr_expect_eq(plan_alltoall_time(8e6, 8, 8, 100e9, 10e9, 1e-6), 1e-6 + 8e6 * 7 / 8 / 100e9);
  cr_expect_eq(plan_alltoall_time(8e6, 1, 1, 100e9, 10e9, 1e-6), 0);
  plan_cluster_t c = cluster("h100-80g");
  plan_calib_t k = {.nvlink_eff = 1, .nic_eff = 1};
  plan_links_t a = plan_links(&c, &k, 8, 2, 4, 1);
  cr_expect(a.cp.crosses_nodes, "tp 8 fills the node: cp neighbours are a node apart");
  cr_expect_eq(a.cp_bw, 50e9, "a ring step through one 400 Gb/s NIC");
  cr_expect_eq(a.dp.n, 8, "dense gradients are reduced over dp x cp");
  plan_links_t b = plan_links(&c, &k, 2, 4, 8, 8);
  cr_expect_eq(b.cp.crosses_nodes, 0, "tp 2 x cp 4 fits a node");
  cr_expect_eq(b.cp_bw, 450e9);
  cr_expect_eq(b.ep.per_node, 1, "ep ranks are tp x cp = 8 apart: one per node");
  cr_expect_eq(b.edp.n, 4, "experts' gradients: dp x cp / ep = 8 x 4 / 8 ranks");
  plan_links_t e = plan_links(&c, &k, 1, 1, 64, 8);
  cr_expect_eq(e.ep.per_node, 8, "ep 8 of tp 1 is one node");
  cr_expect_eq(e.ep.crosses_nodes, 0);
}

static void refused(const plan_model_t *m, plan_job_t j, const char *says) {
  plan_cluster_t c = cluster("h100-80g");
  plan_search_t s;
  char err[300] = "";
  cr_expect_eq(plan_search(m, &c, &j, &s, err, sizeof(err)), -1, "must refuse: %s", says);
  cr_expect(strstr(err, says) != NULL, "'%s' in '%s'", says, err);
}

Test(plan_parallel, impossible_cp_and_ep_layouts_are_refused_naming_the_flag, .timeout = 10) {
  plan_model_t dense = model("llama3-8b"), moe = model("mixtral-8x7b"), gpt = model("megatron-18.4b");
  plan_job_t j = job(64, 64);
  j.ep = 8;
  refused(&dense, j, "--ep 8 needs a mixture-of-experts model");
  j.ep = 3;
  refused(&moe, j, "--ep 3 does not divide --experts 8");
  j.ep = 8, j.dp = 4;
  refused(&moe, j, "--ep 8 does not divide --dp 4");
  j = job(64, 64);
  j.cp = 2;
  refused(&gpt, j, "--cp 2 needs fused attention (--flash on)");
  j.cp = 32;
  plan_model_t odd = dense;
  odd.seq = 8160;
  refused(&odd, j, "--cp 32 does not split --seq 8160 into 2 x cp = 64 equal chunks");
  j = job(64, 64);
  j.tp = 8, j.cp = 4, j.pp = 4, j.dp = 4;
  refused(&dense, j, "(--tp 8 x --cp 4 x --pp 4 x --dp 4 = 512) is more than the 64 GPUs");
  // A layout the search reaches but cannot run says why.
  plan_cluster_t c = cluster("h100-80g");
  plan_job_t nosp = job(64, 64);
  nosp.sequence_parallel = 0;
  plan_layout_t l = {.tp = 2, .pp = 1, .dp = 32, .ep = 8, .zero = 1, .micro_batch = 1,
                     .interleave = 1, .recompute = PLAN_RECOMPUTE_FULL, .schedule = PLAN_SCHED_1F1B};
  plan_result_t r;
  plan_evaluate(&moe, &c, &nosp, &l, &r, NULL);
  cr_expect_eq(r.verdict, PLAN_REJECT_DIVISIBILITY);
  cr_expect(strstr(r.reason, "MoE with tp 2 needs sequence parallelism") != NULL, "%s", r.reason);
}

Test(plan_parallel, llama3_long_context_layout_has_memory_traffic_and_mfu, .timeout = 30) {
  plan_model_t m = model("llama3-405b");
  m.seq = 131072;
  plan_cluster_t c = cluster("h100-80g");
  plan_job_t j = job(16384, 128);  // 16M tokens of 131072
  j.tp = 8, j.cp = 16, j.pp = 16;
  plan_search_t s;
  char err[300];
  cr_assert_eq(plan_search(&m, &c, &j, &s, err, sizeof(err)), 0, "%s", err);
  cr_assert_gt(s.nranked, 0, "the published layout fits");
  const plan_candidate_t *b = &s.ranked[0];
  cr_expect_eq(b->layout.dp, 8, "16384 / (8 x 16 x 16)");
  cr_expect_gt(b->result.mem_total, 0);
  cr_expect_leq(b->result.mem_total, b->result.mem_usable);
  cr_expect_gt(b->result.cp_bytes, 0);
  cr_expect_gt(b->result.tp_bytes, 0);
  cr_expect_gt(b->result.pp_bytes, 0);
  cr_expect_gt(b->result.dp_bytes, 0);
  cr_expect(b->result.mfu > 0 && b->result.mfu < 1, "MFU %g", b->result.mfu);
  cr_expect_lt(b->result.mfu_causal, b->result.mfu, "counting causal attention as half");
  plan_search_free(&s);
}
