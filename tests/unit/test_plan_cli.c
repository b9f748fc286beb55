/*
 * test_plan_cli.c — weft-plan as a user runs it: the seed-text tables read
 * back from its output, the published runs read back from --json, --help
 * naming every flag, and bad input ending in a sentence and a non-zero exit
 * rather than a crash. The binary is $WEFT_BUILD_DIR/bin/weft-plan.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plan.h"

#define NEAR(x, want, rel, ...) cr_expect(fabs((x) / (want) - 1) <= (rel), __VA_ARGS__)

typedef struct {
  char *out;  // stdout and stderr together
  int status;
} run_t;

// Runs weft-plan with `args` (shell words) and collects its output.
static run_t run(const char *args) {
  const char *dir = getenv("WEFT_BUILD_DIR");
  char cmd[2048];
  snprintf(cmd, sizeof(cmd), "'%s/bin/weft-plan' %s 2>&1", dir && *dir ? dir : "build", args);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p, "popen %s", cmd);
  size_t cap = 1 << 16, len = 0;
  char *out = malloc(cap);
  cr_assert_not_null(out);
  size_t n;
  while ((n = fread(out + len, 1, cap - len - 1, p)) > 0) {
    len += n;
    if (len + 1 == cap) {
      out = realloc(out, cap *= 2);
      cr_assert_not_null(out);
    }
  }
  out[len] = '\0';
  int status = pclose(p);
  run_t r = {out, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)};
  cr_assert_neq(r.status, 127, "cannot run %s (build it: make %s/bin/weft-plan)", cmd, dir ? dir : "build");
  return r;
}

// The number on the output line that starts with `lead` (after spaces), in column `col`.
static double column(const char *out, const char *lead, int col) {
  for (const char *line = out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
    const char *p = line;
    while (*p == ' ') p++;
    if (strncmp(p, lead, strlen(lead)) != 0) continue;
    char buf[512];
    size_t n = strcspn(p, "\n");
    snprintf(buf, sizeof(buf), "%.*s", (int)(n < sizeof(buf) ? n : sizeof(buf) - 1), p);
    char *save = NULL, *tok = strtok_r(buf, " ", &save);
    for (int i = 0; tok && i < col; i++) tok = strtok_r(NULL, " ", &save);
    return tok ? atof(tok) : NAN;
  }
  return NAN;
}

Test(plan_cli, zero_table_is_16_bytes_per_parameter, .timeout = 30) {
  const struct {
    const char *params;
    const char *total;
  } rows[] = {{"1e9", "16 GB"}, {"7B", "112 GB"}, {"70e9", "1.12 TB"}};
  for (int i = 0; i < 3; i++) {
    char args[128];
    snprintf(args, sizeof(args), "--params %s --zero-table", rows[i].params);
    run_t r = run(args);
    cr_expect_eq(r.status, 0, "%s", r.out);
    char want[64];
    snprintf(want, sizeof(want), "(w + g + o) P");
    const char *row = strstr(r.out, want);
    cr_assert_not_null(row, "%s", r.out);
    cr_expect(strstr(row, rows[i].total) != NULL && strstr(row, rows[i].total) < strchr(row, '\n'),
              "%s parameters: %s in\n%s", rows[i].params, rows[i].total, r.out);
    free(r.out);
  }
  // The ZeRO paper's 7.5B on 64 ranks, read back as JSON.
  run_t r = run("--params 7.5e9 --dp 64 --zero-table --json");
  char err[200];
  plan_json_t *doc = plan_json_parse(r.out, err, sizeof(err));
  cr_assert_not_null(doc, "%s: %s", err, r.out);
  const double want[4] = {120e9, 31.4e9, 16.6e9, 1.88e9};
  int z = 0;
  for (const plan_json_t *s = plan_json_get(doc, "stages")->child; s; s = s->next, z++)
    NEAR(plan_json_number(s, "total", 0), want[z], 0.01, "ZeRO-%d", z);
  cr_expect_eq(z, 4);
  plan_json_free(doc);
  free(r.out);
}

Test(plan_cli, activation_table_reproduces_qwen3_4b, .timeout = 30) {
  run_t r = run("--model qwen3-4b --act-table");
  cr_expect_eq(r.status, 0, "%s", r.out);
  const char *seqs[] = {"1024", "2048", "4096", "8192", "16384"};
  const double gib[] = {5.27, 10.5, 21.1, 42.2, 84.4};
  for (int i = 0; i < 5; i++)
    NEAR(column(r.out, seqs[i], 1), gib[i], 0.002, "seq %s:\n%s", seqs[i], r.out);
  // The detailed count is below the rule for this model (GQA, fused attention).
  cr_expect_lt(column(r.out, "4096", 2), column(r.out, "4096", 1));
  cr_expect_lt(column(r.out, "4096", 4), column(r.out, "4096", 2) / 10, "full recompute");
  free(r.out);
}

Test(plan_cli, time_table_reproduces_70b_on_h100, .timeout = 30) {
  run_t r = run("--params 70e9 --tokens 1.4T --peak-tflops 900 --mfu 0.5 --time-table 1,8,64,512,1024");
  cr_expect_eq(r.status, 0, "%s", r.out);
  cr_expect(strstr(r.out, "C = 5.88e+23") != NULL, "%s", r.out);
  const char *words[] = {"41.4 years", "5.2 years", "7.8 months", "4.2 weeks", "2.1 weeks"};
  const char *gpus[] = {"1 ", "8 ", "64 ", "512 ", "1024 "};
  for (int i = 0; i < 5; i++) {
    const char *hit = strstr(r.out, words[i]);
    cr_expect_not_null(hit, "'%s' in\n%s", words[i], r.out);
    NEAR(column(r.out, gpus[i], 2), 5.88e23 / (atof(gpus[i]) * 450e12) / 86400, 0.002, "%s GPUs", gpus[i]);
  }
  free(r.out);
}

static plan_json_t *plan_json_of(const char *args, run_t *r) {
  *r = run(args);
  char err[200];
  plan_json_t *doc = plan_json_parse(r->out, err, sizeof(err));
  cr_assert_not_null(doc, "%s: %s", err, r->out);
  return doc;
}

Test(plan_cli, llama3_405b_published_layout_ranks_in_the_top_three, .timeout = 60) {
  run_t r;
  plan_json_t *doc = plan_json_of("--model llama3-405b --cluster h100-80g --gpus 8192 --batch-tokens 16.78M "
                                  "--tokens 15.6T --json --top 3", &r);
  cr_expect_eq(r.status, 0);
  cr_expect_eq(plan_json_number(plan_json_get(doc, "job"), "global_batch", 0), 2048);
  int found = 0;
  for (const plan_json_t *l = plan_json_get(doc, "layouts")->child; l; l = l->next) {
    if (plan_json_number(l, "tp", 0) != 8 || plan_json_number(l, "pp", 0) != 16 ||
        plan_json_number(l, "dp", 0) != 64)
      continue;
    found = 1;
    NEAR(plan_json_number(l, "mfu", 0), 0.43, 0.25, "MFU %.3f", plan_json_number(l, "mfu", 0));
  }
  cr_expect(found, "TP8 PP16 DP64 in the top three:\n%s", r.out);
  plan_json_free(doc);
  free(r.out);
}

Test(plan_cli, megatron_2021_runs_read_back_from_json, .timeout = 60) {
  const struct {
    const char *args;
    double tflops;
  } runs[] = {{"megatron-1.7b --gpus 32 --tp 1 --pp 1 --batch 512", 137},
              {"megatron-18.4b --gpus 256 --tp 8 --pp 1 --batch 1024", 135},
              {"megatron-145.6b --gpus 1536 --tp 8 --pp 8 --batch 2304", 148},
              {"megatron-529.6b --gpus 2520 --tp 8 --pp 35 --batch 2520", 163},
              {"megatron-1008b --gpus 3072 --tp 8 --pp 64 --batch 3072", 163}};
  for (int i = 0; i < 5; i++) {
    char args[256];
    snprintf(args, sizeof(args), "--model %s --cluster a100-80g --recompute full --sp off --json --top 1",
             runs[i].args);
    run_t r;
    plan_json_t *doc = plan_json_of(args, &r);
    cr_expect_eq(r.status, 0, "%s", r.out);
    const plan_json_t *l = plan_json_get(doc, "layouts")->child;
    cr_assert_not_null(l, "%s", r.out);
    NEAR(plan_json_number(l, "hw_tflops", 0), runs[i].tflops, 0.25, "%s: %.1f vs %.0f", runs[i].args,
         plan_json_number(l, "hw_tflops", 0), runs[i].tflops);
    plan_json_free(doc);
    free(r.out);
  }
}

Test(plan_cli, table_and_explain_show_the_numbers, .timeout = 30) {
  run_t r = run("--model llama3-8b --cluster h100-80g --nodes 8 --batch 512 --tp 8 --pp 4 "
                "--interleave 2 --micro-batch 1 --recompute full --explain");
  cr_expect_eq(r.status, 0, "%s", r.out);
  cr_expect_eq(column(r.out, "1 ", 1), 8, "rank 1 is tp 8:\n%s", r.out);
  cr_expect_eq(column(r.out, "1 ", 2), 4);
  cr_expect_eq(column(r.out, "1 ", 3), 2);
  // m = 512 / 2 = 256 micro-batches, bubble (p-1)/(v m) = 3/(2 x 256).
  cr_expect(strstr(r.out, "bubble (p-1)/(v m) = 3/(2 x 256) = 0.0059") != NULL, "%s", r.out);
  cr_expect(strstr(r.out, "model states, ZeRO-") != NULL);
  cr_expect(strstr(r.out, "activations/layer (full recompute") != NULL);
  cr_expect(strstr(r.out, "T = b s = 8192 tokens") != NULL);
  cr_expect(strstr(r.out, "MFU = ") != NULL);
  free(r.out);
  r = run("--model megatron-18.4b --cluster a100-80g --gpus 256 --tp 8 --pp 1 --batch 1024 "
          "--sp off --recompute none --micro-batch 1 --explain");
  cr_expect(strstr(r.out, "(Korthikanti: s b h (10 + 24/t + 5 a s/(h t)))") != NULL, "%s", r.out);
  free(r.out);
}

Test(plan_cli, help_documents_every_flag, .timeout = 30) {
  run_t r = run("--help");
  cr_expect_eq(r.status, 0);
  const char *flags[] = {
      "--model", "--params", "--layers", "--hidden", "--heads", "--kv-heads", "--head-dim", "--ffn",
      "--vocab", "--seq", "--mlp", "--tied", "--positions", "--biases", "--flash", "--dropout",
      "--cluster", "--cluster-file", "--intra-json", "--inter-json", "--gpus", "--nodes",
      "--gpus-per-node", "--gpu-mem-gib", "--peak-tflops", "--hbm-gbs", "--nvlink-gbs", "--nics",
      "--nic-gbps", "--sms", "--gemm-gflops", "--batch", "--batch-tokens", "--tokens",
      "--weight-bytes", "--grad-bytes", "--optim-bytes", "--act-bytes", "--sp", "--tp", "--pp",
      "--dp", "--zero", "--micro-batch", "--interleave", "--recompute", "--schedule",
      "--max-bubble", "--gemm-eff", "--attn-eff", "--hbm-eff", "--link-eff", "--reserve-gib",
      "--kernel-gap-us", "--json", "--explain", "--top", "--zero-table", "--act-table",
      "--act-seqs", "--act-k", "--time-table", "--mfu", "--list", "--help"};
  for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
    char line[64];
    snprintf(line, sizeof(line), "  %s ", flags[i]);
    cr_expect(strstr(r.out, line) != NULL, "--help documents %s", flags[i]);
  }
  free(r.out);
  r = run("--list");
  cr_expect(strstr(r.out, "llama3-405b") && strstr(r.out, "b200") && strstr(r.out, "megatron-1008b"), "%s", r.out);
  free(r.out);
}

Test(plan_cli, bad_input_is_a_sentence_and_a_nonzero_exit, .timeout = 60) {
  char *path = strdup("/tmp/weft-plan-cli-XXXXXX");
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  cr_assert_eq(write(fd, "{\"results\": [", 13), 13);
  close(fd);
  char broken[256];
  snprintf(broken, sizeof(broken), "--model llama3-8b --cluster h100-80g --gpus 8 --batch 8 --intra-json %s", path);
  const struct {
    const char *args, *says;
    int status;
  } cases[] = {
      {"--model gpt-7 --cluster h100-80g --gpus 8 --batch 8", "unknown model preset 'gpt-7'", 2},
      {"--model llama3-8b --cluster tpu-v5 --gpus 8 --batch 8", "unknown cluster preset 'tpu-v5'", 2},
      {"--model llama3-8b --cluster h100-80g --gpus 8 --batch -5", "--batch: '-5' is not a non-negative number", 2},
      {"--model llama3-8b --cluster h100-80g --gpus -8 --batch 8", "--gpus: '-8' is not a non-negative whole number", 2},
      {"--layers 0 --hidden 64 --heads 4 --vocab 10 --seq 8 --act-table", "--layers must be >= 1", 2},
      {"--model llama3-8b --cluster h100-80g --gpus 8 --batch 8 --zero 4", "--zero: 4 is out of range", 2},
      {"--model llama3-8b --cluster h100-80g --gpus 8 --batch 8 --tp", "--tp needs a value", 2},
      {"--model llama3-8b --cluster h100-80g --gpus 8 --batch 8 --frobnicate 1", "unknown flag '--frobnicate'", 2},
      {"--model llama3-8b --cluster h100-80g --gpus 8 --batch 8 --gemm-eff 1.5", "at most 1", 2},
      {"--model llama3-8b --cluster h100-80g --gpus 8 --batch 8 --tp 8 --pp 2 --dp 2", "does not multiply out to 8 GPUs", 2},
      {"--model llama3-8b --cluster h100-80g --gpus 56 --batch 56 --tp 8 --pp 7", "pp 7 does not divide layers 32", 1},
      {"--model llama3-8b --cluster h100-80g --gpus 24 --batch 24 --tp 3 --pp 1", "tp 3 does not divide 8 GPUs per node", 1},
      {"--model llama3-405b --cluster h100-80g --gpus 8 --batch 8", "no feasible layout", 1},
      {"--model llama3-8b --gpus 8 --batch 8", "a plan needs a cluster", 2},
      {"--model llama3-8b --cluster h100-80g --batch 8", "give the job size", 2},
      {"--params 7e9 --cluster h100-80g --gpus 8 --batch 8", "a bare --params gives", 2},
      {"--params 7e9 --time-table 1,x", "--time-table: '1,x' is not a comma-separated list", 2},
      {"--model llama3-8b --cluster-file /nonexistent/node.cfg --gpus 8 --batch 8", "cannot open '/nonexistent/node.cfg'", 2},
      {broken, "not JSON", 2},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    run_t r = run(cases[i].args);
    cr_expect_eq(r.status, cases[i].status, "weft-plan %s: exit %d\n%s", cases[i].args, r.status, r.out);
    cr_expect(strstr(r.out, cases[i].says) != NULL, "weft-plan %s says '%s':\n%s", cases[i].args,
              cases[i].says, r.out);
    free(r.out);
  }
  unlink(path);
  free(path);
}

Test(plan_cli, measured_bandwidth_and_gemm_rate_drive_the_plan, .timeout = 30) {
  // The input path for "this machine": a node file and a perf -J AllReduce report.
  char node[] = "/tmp/weft-plan-node-XXXXXX", perf[] = "/tmp/weft-plan-perf-XXXXXX";
  int fd = mkstemp(node);
  cr_assert_geq(fd, 0);
  const char *cfg = "name = host\ngpus_per_node = 4\nmem_gib = 16\npeak_tflops = 1\nhbm_gbs = 20\n"
                    "nvlink_gbs = 10\nnics = 1\nnic_gbps = 10\nsms = 0\n";
  cr_assert_eq(write(fd, cfg, strlen(cfg)), (ssize_t)strlen(cfg));
  close(fd);
  fd = mkstemp(perf);
  cr_assert_geq(fd, 0);
  const char *js = "{\"config\":{\"devices\":[{},{},{},{}]},\"results\":[{\"size\":1048576,"
                   "\"out_of_place\":{\"time\":500.0,\"alg_bw\":2.0,\"bus_bw\":3.0,\"nwrong\":0}}]}";
  cr_assert_eq(write(fd, js, strlen(js)), (ssize_t)strlen(js));
  close(fd);
  char args[512];
  const char *base = "--layers 4 --hidden 256 --heads 4 --vocab 1024 --seq 128 --gpus 4 --batch 16 "
                     "--tp 1 --pp 1 --micro-batch 4 --zero 0 --recompute none --json";
  snprintf(args, sizeof(args), "%s --cluster-file %s --intra-json %s --gemm-gflops 50", base, node, perf);
  run_t r;
  plan_json_t *doc = plan_json_of(args, &r);
  cr_expect_eq(r.status, 0, "%s", r.out);
  const plan_json_t *c = plan_json_get(doc, "cluster");
  cr_expect_eq(plan_json_number(c, "intra_busbw", 0), 3e9);
  cr_expect_eq(plan_json_number(c, "gemm_flops", 0), 50e9);
  double slow = plan_json_number(plan_json_get(plan_json_get(doc, "layouts")->child, "time"), "step", 0);
  plan_json_free(doc);
  free(r.out);
  snprintf(args, sizeof(args), "%s --cluster-file %s --intra-json %s --gemm-gflops 100", base, node, perf);
  doc = plan_json_of(args, &r);
  double fast = plan_json_number(plan_json_get(plan_json_get(doc, "layouts")->child, "time"), "step", 0);
  cr_expect_lt(fast, slow, "a faster measured GEMM rate shortens the step");
  cr_expect_gt(fast, slow / 2, "but not past what memory and traffic take");
  plan_json_free(doc);
  free(r.out);
  unlink(node);
  unlink(perf);
}
