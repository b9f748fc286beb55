/*
 * test_plan.c — the planner's model, function by function: parameter
 * counts, the ZeRO and Korthikanti formulas, pipeline bubbles and in-flight
 * micro-batches, alpha-beta times, traffic per dimension, refusals, and its
 * readers (JSON, cluster files, perf -J reports) on good and bad input.
 * test_plan_parallel.c covers context and expert parallelism, MoE and the
 * presets; test_plan_cli.c and test_plan_accuracy.c run weft-plan itself.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

Test(plan, parameter_counts_match_the_published_sizes, .timeout = 10) {
  plan_model_t gpt2 = model("gpt2-124m");
  cr_expect_eq(plan_model_params(&gpt2), 124439808.0, "GPT-2 small has 124,439,808 parameters");
  cr_expect_eq(plan_model_params(&(plan_model_t){.params = 7e9}), 7e9, "a bare count is itself");
  const struct {
    const char *name;
    double params;
  } sizes[] = {{"gpt3-175b", 174.6e9}, {"llama3-8b", 8.03e9}, {"llama3-70b", 70.55e9},
               {"llama3-405b", 405.9e9}, {"qwen3-4b", 4.02e9}, {"megatron-18.4b", 18.4e9},
               {"megatron-145.6b", 145.6e9}, {"megatron-529.6b", 529.6e9}, {"megatron-1008b", 1008e9}};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    plan_model_t m = model(sizes[i].name);
    NEAR(plan_model_params(&m), sizes[i].params, 0.005, "%s: %.4g parameters", sizes[i].name,
         plan_model_params(&m));
  }
  // Megatron-LM's own formula: 12 l h^2 (1 + 13/(12 h) + (V + s)/(12 l h)).
  plan_model_t m = model("megatron-1.7b");
  double l = m.layers, h = m.hidden;
  double formula = 12 * l * h * h * (1 + 13 / (12 * h) + (m.vocab + m.seq) / (12 * l * h));
  NEAR(plan_model_params(&m), formula, 1e-3, "1.7B: %.6g vs %.6g", plan_model_params(&m), formula);
  // Grouped-query attention: K and V shrink with kv-heads.
  plan_model_t mha = model("llama3-8b");
  mha.kv_heads = mha.heads;
  plan_model_t gqa = model("llama3-8b");
  double kv_saving = 2.0 * 4096 * (4096 - 1024) * 32;
  cr_expect_eq(plan_model_params(&mha) - plan_model_params(&gqa), kv_saving);
}

Test(plan, flops_per_token_is_6n_plus_the_attention_term, .timeout = 10) {
  plan_model_t m = model("megatron-1008b");
  double l = m.layers, h = m.hidden, s = m.seq, V = m.vocab;
  // Megatron-LM: 72 l h^2 (1 + s/(6h) + V/(12 l h)) per token without recompute.
  double want = 72 * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
  NEAR(plan_model_flops_per_token(&m, 1, NULL), want, 1e-9, "Megatron-LM's FLOPs per token");
  plan_model_t bare = {.params = 70e9};
  cr_expect_eq(plan_model_flops_per_token(&bare, 1, NULL), 6 * 70e9);
  NEAR(plan_days_to_train(6 * 70e9 * 1.4e12, 1, 900e12, 0.5, NULL) / 365.25, 41.4, 0.002, "70B: 41.4 years");
  NEAR(plan_days_to_train(5.88e23, 1024, 900e12, 0.5, NULL) / 7, 2.1, 0.02, "1024 GPUs: 2.1 weeks");
}

Test(plan, zero_stages_follow_the_zero_paper, .timeout = 10) {
  plan_bytes_t b = {2, 2, 12, 2};
  double psi = 7.5e9, want[4] = {120, 31.4, 16.6, 1.88};  // GB, the paper's Figure 1
  for (int z = 0; z < 4; z++) {
    plan_states_t s = plan_model_states(psi, 64, z, &b, NULL);
    NEAR((s.weights + s.grads + s.optim) / 1e9, want[z], 0.01, "ZeRO-%d", z);
  }
  plan_states_t one = plan_model_states(70e9, 1, 0, &b, NULL);
  cr_expect_eq(one.weights + one.grads + one.optim, 16 * 70e9, "16 bytes per parameter");
  plan_states_t z3 = plan_model_states(1e9, 8, 3, &b, NULL);
  cr_expect_eq(z3.weights + z3.grads + z3.optim, 16e9 / 8);
}

Test(plan, activations_reduce_to_korthikanti_for_gpt, .timeout = 10) {
  plan_model_t m = model("megatron-18.4b");  // GELU, dropout, materialised attention
  double s = m.seq, h = m.hidden, a = m.heads, b = 2, t = 8;
  double sbh = s * b * h;
  cr_expect_eq(plan_layer_activation_bytes(&m, 0, b, 1, 1, 0, PLAN_RECOMPUTE_NONE, 2, NULL),
               sbh * (34 + 5 * a * s / h), "no parallelism");
  NEAR(plan_layer_activation_bytes(&m, 0, b, 8, 1, 0, PLAN_RECOMPUTE_NONE, 2, NULL),
       sbh * (10 + 24 / t + 5 * a * s / (h * t)), 1e-12, "tensor parallel");
  NEAR(plan_layer_activation_bytes(&m, 0, b, 8, 1, 1, PLAN_RECOMPUTE_NONE, 2, NULL),
       sbh * (34 / t + 5 * a * s / (h * t)), 1e-12, "tensor + sequence parallel");
  NEAR(plan_layer_activation_bytes(&m, 0, b, 8, 1, 1, PLAN_RECOMPUTE_SELECTIVE, 2, NULL), sbh * 34 / t,
       1e-12, "selective recompute");
  cr_expect_eq(plan_layer_activation_bytes(&m, 0, b, 1, 1, 0, PLAN_RECOMPUTE_FULL, 2, NULL), 2 * sbh,
               "full recompute keeps the layer input");
  // Fused attention keeps no s x s scores, so selective has nothing to drop.
  plan_model_t f = model("llama3-8b");
  cr_expect_eq(plan_layer_activation_bytes(&f, 0, 1, 1, 1, 0, PLAN_RECOMPUTE_NONE, 2, NULL),
               plan_layer_activation_bytes(&f, 0, 1, 1, 1, 0, PLAN_RECOMPUTE_SELECTIVE, 2, NULL));
}

Test(plan, activation_rule_of_thumb_reproduces_the_qwen3_table, .timeout = 10) {
  plan_model_t m = model("qwen3-4b");
  const double gib[] = {5.27, 10.5, 21.1, 42.2, 84.4};
  for (int i = 0; i < 5; i++) {
    m.seq = 1024 << i;
    NEAR(plan_activation_rule_bytes(&m, 30, 1, 2) / PLAN_GIB, gib[i], 0.005, "seq %d", m.seq);
  }
}

Test(plan, pipeline_stages_hold_the_right_micro_batches, .timeout = 10) {
  cr_expect_eq(plan_inflight_layers(PLAN_SCHED_GPIPE, 4, 1, 0, 10, 16), 160, "GPipe holds all m");
  cr_expect_eq(plan_inflight_layers(PLAN_SCHED_1F1B, 4, 1, 0, 10, 16), 40, "1F1B stage 0 holds p");
  cr_expect_eq(plan_inflight_layers(PLAN_SCHED_1F1B, 4, 1, 3, 10, 16), 10, "the last stage one");
  cr_expect_eq(plan_inflight_layers(PLAN_SCHED_1F1B, 8, 1, 0, 10, 3), 30, "never more than m");
  // Interleaved, p = 4, v = 2: (p - 1) 2 + (v - 1) p + 1 = 11 chunks of 5 layers.
  cr_expect_eq(plan_inflight_layers(PLAN_SCHED_INTERLEAVED, 4, 2, 0, 10, 16), 55);
  cr_expect_eq(plan_inflight_layers(PLAN_SCHED_1F1B, 1, 1, 0, 10, 16), 10, "no pipeline");
}

static plan_job_t job(int gpus, double batch) {
  plan_job_t j;
  plan_job_defaults(&j);
  j.gpus = gpus;
  j.global_batch = batch;
  j.bytes.grad = 2;  // the ZeRO paper's 2-byte gradients: the formulas below are its
  return j;
}

Test(plan, bubble_is_p_minus_1_over_v_m, .timeout = 10) {
  plan_model_t m = model("llama3-8b");
  plan_cluster_t c = cluster("h100-80g");
  plan_job_t j = job(64, 256);
  plan_result_t one, inter, gpipe;
  plan_layout_t l = {.tp = 8, .pp = 4, .dp = 2, .zero = 1, .micro_batch = 2, .interleave = 1,
                     .recompute = PLAN_RECOMPUTE_FULL, .schedule = PLAN_SCHED_1F1B};
  plan_evaluate(&m, &c, &j, &l, &one, NULL);
  cr_assert_eq(one.verdict, PLAN_FEASIBLE, "%s", one.reason);
  cr_expect_eq(one.micro_batches, 64);
  cr_expect_eq(one.bubble, 3.0 / 64);
  l.schedule = PLAN_SCHED_INTERLEAVED, l.interleave = 4;
  plan_evaluate(&m, &c, &j, &l, &inter, NULL);
  cr_assert_eq(inter.verdict, PLAN_FEASIBLE, "%s", inter.reason);
  cr_expect_eq(inter.bubble, 3.0 / (4 * 64));
  cr_expect_lt(inter.step_time, one.step_time, "interleaving shrinks the bubble");
  l.schedule = PLAN_SCHED_GPIPE, l.interleave = 1;
  plan_evaluate(&m, &c, &j, &l, &gpipe, NULL);
  cr_expect_eq(gpipe.bubble, one.bubble);
  cr_expect_eq(gpipe.step_time, one.step_time, "same bubble, same time");
  cr_expect_gt(gpipe.mem_act, 10 * one.mem_act, "GPipe keeps every micro-batch");
  // Pipeline time = (m + (p - 1)/v) x (t_mb + 2 v t_p2p).
  NEAR(one.t_pipeline, (64 + 3) * one.t_mb + one.t_p2p, 1e-9, "pipeline time");
}

Test(plan, collectives_follow_alpha_beta, .timeout = 10) {
  cr_expect_eq(plan_allreduce_time(8e9, 8, 100e9, 0), 2.0 * 7 / 8 * 8e9 / 100e9);
  cr_expect_eq(plan_allreduce_time(8e9, 8, 100e9, 1e-6), 2.0 * 7 * 1e-6 + 2.0 * 7 / 8 * 0.08);
  cr_expect_eq(plan_allgather_time(8e9, 4, 100e9, 0), 0.75 * 0.08);
  cr_expect_eq(plan_allreduce_time(8e9, 1, 100e9, 1), 0, "one rank sends nothing");
  plan_cluster_t c = cluster("h100-80g");
  plan_calib_t k = {.nvlink_eff = 1, .nic_eff = 1};
  plan_links_t in = plan_links(&c, &k, 2, 1, 4, 1), across = plan_links(&c, &k, 8, 1, 4, 1);
  cr_expect_eq(in.dp.crosses_nodes, 0);
  cr_expect_eq(in.dp.busbw, 450e9, "tp 2 x dp 4 stays on NVLink");
  cr_expect_eq(across.dp.crosses_nodes, 1);
  cr_expect_eq(across.dp.busbw, 50e9, "one member per node: one 400 Gb/s NIC");
  plan_links_t two = plan_links(&c, &k, 4, 1, 16, 1);
  cr_expect_eq(two.dp.busbw, 100e9, "two members per node: two NICs");
}

Test(plan, traffic_per_dimension_matches_the_formulas, .timeout = 10) {
  plan_model_t m = model("llama3-8b");
  plan_cluster_t c = cluster("h100-80g");
  plan_job_t j = job(64, 64);
  plan_result_t r;
  plan_layout_t l = {.tp = 1, .pp = 1, .dp = 64, .zero = 0, .micro_batch = 1, .interleave = 1,
                     .recompute = PLAN_RECOMPUTE_FULL, .schedule = PLAN_SCHED_1F1B};
  plan_evaluate(&m, &c, &j, &l, &r, NULL);
  double psi = plan_model_params(&m);
  NEAR(r.dp_bytes, 2 * psi * 2 * 63 / 64, 1e-9, "DP AllReduce: 2 psi (d-1)/d of 2-byte gradients");
  l.zero = 3;
  plan_evaluate(&m, &c, &j, &l, &r, NULL);
  NEAR(r.dp_bytes, (3 * 2 + 2) * psi * 63 / 64, 1e-9, "ZeRO-3 with full recompute: 3 gathers + 1 scatter");
  l = (plan_layout_t){.tp = 8, .pp = 2, .dp = 4, .zero = 1, .micro_batch = 1, .interleave = 1,
                      .recompute = PLAN_RECOMPUTE_NONE, .schedule = PLAN_SCHED_1F1B};
  plan_evaluate(&m, &c, &j, &l, &r, NULL);
  double bsh = 2.0 * m.seq * m.hidden, layers = m.layers / 2;
  // Per layer 4 collectives of b s h (2 fwd, 2 bwd), 2 (t-1)/t each, plus the stage's end block.
  cr_expect_geq(r.tp_bytes, r.micro_batches * layers * 4 * 2 * 7.0 / 8 * bsh);
  cr_expect_leq(r.tp_bytes, r.micro_batches * (layers + 1) * 4 * 2 * 7.0 / 8 * bsh);
  NEAR(r.pp_bytes, 2 * r.micro_batches * bsh / 8, 1e-9, "PP: b s h per micro-batch each way, sharded over tp");
}

Test(plan, impossible_layouts_say_why, .timeout = 30) {
  plan_model_t m = model("llama3-8b");
  plan_cluster_t c = cluster("h100-80g");
  plan_job_t j = job(48, 96);
  plan_result_t r;
  plan_job_t wide = job(320, 320);
  plan_layout_t l = {.tp = 8, .pp = 40, .dp = 1, .zero = 1, .micro_batch = 1, .interleave = 1,
                     .recompute = PLAN_RECOMPUTE_FULL, .schedule = PLAN_SCHED_1F1B};
  plan_evaluate(&m, &c, &wide, &l, &r, NULL);
  cr_expect_eq(r.verdict, PLAN_REJECT_DIVISIBILITY);
  cr_expect(strstr(r.reason, "pp 40 is more stages than the 32 layers") != NULL, "%s", r.reason);
  // Uneven stages are allowed: 32 layers on 3 stages are 10, 11, 11... as long as
  // interleaving's v divides the fullest stage.
  l = (plan_layout_t){.tp = 8, .pp = 3, .dp = 2, .zero = 1, .micro_batch = 1, .interleave = 1,
                      .recompute = PLAN_RECOMPUTE_FULL, .schedule = PLAN_SCHED_1F1B};
  plan_evaluate(&m, &c, &j, &l, &r, NULL);
  cr_expect_eq(r.verdict, PLAN_FEASIBLE, "%s", r.reason);
  cr_expect_eq(r.stage_layers, 11);
  l = (plan_layout_t){.tp = 3, .pp = 1, .dp = 16, .zero = 1, .micro_batch = 1, .interleave = 1};
  plan_evaluate(&m, &c, &j, &l, &r, NULL);
  cr_expect(strstr(r.reason, "tp 3 does not divide 8 GPUs per node") != NULL, "%s", r.reason);
  l = (plan_layout_t){.tp = 1, .pp = 1, .dp = 48, .zero = 0, .micro_batch = 4, .interleave = 1};
  plan_evaluate(&m, &c, &j, &l, &r, NULL);
  cr_expect(strstr(r.reason, "micro-batch 4 does not divide the 2 sequences") != NULL, "%s", r.reason);
  // 405B on one node: nothing fits, every rejection is about memory or bubbles.
  plan_model_t big = model("llama3-405b");
  plan_job_t small = job(8, 64);
  plan_search_t s;
  char err[200];
  cr_assert_eq(plan_search(&big, &c, &small, &s, err, sizeof(err)), 0, "%s", err);
  cr_expect_eq(s.nranked, 0);
  cr_expect_gt(s.count[PLAN_REJECT_MEMORY], 0);
  for (int i = 0; i < s.nrejected; i++)
    cr_expect(s.rejected[i].result.verdict != PLAN_FEASIBLE && s.rejected[i].result.reason[0]);
  plan_search_free(&s);
  small.tp = 8, small.pp = 2, small.dp = 2;
  cr_expect_eq(plan_search(&big, &c, &small, &s, err, sizeof(err)), -1, "8 x 2 x 2 is not 8 GPUs");
  cr_expect(strstr(err, "the forced layout (--tp 8 x --pp 2 x --dp 2 = 32) is more than the 8 GPUs") != NULL,
            "%s", err);
  small.cp = 1, small.gpus = 64;
  cr_expect_eq(plan_search(&big, &c, &small, &s, err, sizeof(err)), -1, "8 x 1 x 2 x 2 is not 64 GPUs");
  cr_expect(strstr(err, "= 32) does not multiply out to 64 GPUs") != NULL, "%s", err);
}

Test(plan, json_reader_accepts_good_and_refuses_bad_input, .timeout = 10) {
  char err[200];
  plan_json_t *v = plan_json_parse("{\"a\":[1,2.5e3,-3],\"b\":{\"c\":\"x\\u00e9\\n\"},\"t\":true,\"n\":null}",
                                   err, sizeof(err));
  cr_assert_not_null(v, "%s", err);
  const plan_json_t *a = plan_json_get(v, "a");
  cr_assert_not_null(a);
  cr_expect_eq(a->child->next->number, 2500);
  cr_expect_eq(a->child->next->next->number, -3);
  cr_expect_str_eq(plan_json_get(plan_json_get(v, "b"), "c")->string, "x\xc3\xa9\n");
  cr_expect_eq(plan_json_number(v, "t", -1), -1, "a bool is not a number");
  cr_expect_null(plan_json_get(v, "missing"));
  plan_json_free(v);
  const char *bad[] = {"", "{", "[1,]", "{\"a\" 1}", "\"unterminated", "{\"a\":1}}", "[01x]",
                       "\"\\u12\"", "\"\\q\"", "nul", "[-]", "{1:2}", "[\"a\nb\"]"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    err[0] = '\0';
    cr_expect_null(plan_json_parse(bad[i], err, sizeof(err)), "'%s' must not parse", bad[i]);
    cr_expect(strstr(err, "at byte") != NULL, "'%s': %s", bad[i], err);
  }
  char deep[400];
  memset(deep, '[', sizeof(deep) - 1);
  deep[sizeof(deep) - 1] = '\0';
  cr_expect_null(plan_json_parse(deep, err, sizeof(err)));
  cr_expect(strstr(err, "nested too deeply") != NULL, "%s", err);
}

static char *temp_file(const char *text) {
  static char path[64];
  snprintf(path, sizeof(path), "/tmp/weft-plan-test-XXXXXX");
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  return path;
}

Test(plan, perf_json_gives_bus_bandwidth_and_latency, .timeout = 10) {
  const char *report =
      "{\"version\":3,\"config\":{\"devices\":[{\"rank\":0},{\"rank\":1},{\"rank\":2},{\"rank\":3}]},"
      "\"results\":[{\"size\":8,\"count\":2,\"type\":\"float\",\"redop\":\"sum\",\"root\":\"    -1\","
      "\"out_of_place\":{\"time\":12.0,\"alg_bw\":0.0,\"bus_bw\":0.0,\"nwrong\":0},"
      "\"in_place\":{\"time\":11.0,\"alg_bw\":0.0,\"bus_bw\":0.0,\"nwrong\":0}},"
      "{\"size\":134217728,\"count\":33554432,\"type\":\"float\",\"redop\":\"sum\",\"root\":\"-1\","
      "\"out_of_place\":{\"time\":20000.0,\"alg_bw\":6.71,\"bus_bw\":10.07,\"nwrong\":0}}]}";
  char *path = temp_file(report), err[300];
  double bw = 0, lat = 0;
  cr_assert_eq(plan_perf_json_bandwidth(path, &bw, &lat, err, sizeof(err)), 0, "%s", err);
  cr_expect_eq(bw, 10.07e9, "bus_bw of the largest size");
  NEAR(lat, 12e-6 / 6, 1e-12, "12 us over 2 (n - 1) hops of 4 ranks");
  unlink(path);
  path = temp_file("{\"results\":[{\"size\":8}]}");
  cr_expect_eq(plan_perf_json_bandwidth(path, &bw, &lat, err, sizeof(err)), -1);
  cr_expect(strstr(err, "no result rows") != NULL, "%s", err);
  unlink(path);
  path = temp_file("# nThread 1 nGpus 1 (the text report, not -J)\n");
  cr_expect_eq(plan_perf_json_bandwidth(path, &bw, &lat, err, sizeof(err)), -1);
  cr_expect(strstr(err, "not JSON") != NULL, "%s", err);
  unlink(path);
  cr_expect_eq(plan_perf_json_bandwidth("/nonexistent/weft.json", &bw, &lat, err, sizeof(err)), -1);
  cr_expect(strstr(err, "cannot open") != NULL, "%s", err);
}

Test(plan, cluster_files_set_keys_and_name_bad_lines, .timeout = 10) {
  char *path = temp_file("# this host\nbase = h100-80g\nname = lab\ngpus_per_node = 4  # half\n"
                         "intra_busbw_gbs = 300\ngemm_gflops = 600000\n");
  plan_cluster_t c = {0};
  char err[300];
  cr_assert_eq(plan_cluster_load_file(path, &c, err, sizeof(err)), 0, "%s", err);
  cr_expect_str_eq(c.name, "lab");
  cr_expect_eq(c.gpus_per_node, 4);
  cr_expect_eq(c.peak_flops, 989e12, "from the base preset");
  cr_expect_eq(c.intra_busbw, 300e9);
  cr_expect_eq(c.gemm_flops, 600e12);
  cr_expect_eq(plan_cluster_check(&c, err, sizeof(err)), 0, "%s", err);
  unlink(path);
  const char *bad[] = {"gpus_per_node = 0\n", "nvlink_gbs = -3\n", "colour = blue\n", "just words\n",
                       "base = tpu\n", "hbm_gbs = 12abc\n", "gemm_eff = 1.5\n"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    path = temp_file(bad[i]);
    cr_expect_eq(plan_cluster_load_file(path, &c, err, sizeof(err)), -1, "'%s'", bad[i]);
    cr_expect(strstr(err, ":1: ") != NULL, "names the line: %s", err);
    unlink(path);
  }
  plan_cluster_t empty = {0};
  cr_expect_eq(plan_cluster_check(&empty, err, sizeof(err)), -1);
}

Test(plan, model_checks_refuse_bad_shapes, .timeout = 10) {
  char err[200];
  plan_model_t m = {.layers = 4, .hidden = 100, .heads = 3, .vocab = 10, .seq = 8};
  cr_expect_eq(plan_model_check(&m, err, sizeof(err)), -1);
  cr_expect(strstr(err, "not a multiple of --heads") != NULL, "%s", err);
  m = (plan_model_t){.layers = 4, .hidden = 96, .heads = 8, .kv_heads = 3, .vocab = 10, .seq = 8};
  cr_expect_eq(plan_model_check(&m, err, sizeof(err)), -1);
  m = (plan_model_t){.layers = 4, .hidden = 96, .heads = 8, .vocab = 0, .seq = 8};
  cr_expect_eq(plan_model_check(&m, err, sizeof(err)), -1);
  cr_expect(strstr(err, "--vocab") != NULL, "%s", err);
  m = (plan_model_t){0};
  cr_expect_eq(plan_model_check(&m, err, sizeof(err)), -1, "nothing known");
  cr_expect_eq(plan_model_preset("gpt-5", &m), -1);
}
