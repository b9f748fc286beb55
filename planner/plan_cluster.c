/*
 * plan_cluster.c — what one node of the cluster offers: GPUs, memory, peak,
 * HBM, NVLink and NICs, from a preset, a key=value file, or bandwidths that
 * weft's own perf tools measured (the -J JSON, nccl-tests' format).
 *
 * Presets are data-sheet figures (dense 16-bit tensor peak, memory as the
 * driver reports it). Measured values, when given, replace what the planner
 * would otherwise derive from the data sheet and the link efficiency.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "plan.h"

#define MIB 1048576.0

typedef struct {
  const char *name, *about;
  int gpus_per_node, sms;
  double mem_mib, peak_tflops, hbm_gbs, nvlink_gbs;
  int nics;
  double nic_gbps;
  double gemm_eff, attn_fwd_eff, attn_bwd_eff, clock_sustain;
} node_preset_t;

// Data-sheet figures: dense 16-bit tensor peak, HBM bandwidth, NVLink per GPU
// and direction (half the bidirectional figure NVIDIA quotes), memory as the
// driver reports it, SMs (NVIDIA A100/H100/H200/H800/B200 data sheets and
// the A100 and Hopper architecture whitepapers).
//
// Kernel efficiencies, fraction of that peak:
//   gemm_eff: the Maximum Achievable Matmul FLOPS table of Bekman's
//     ml-engineering (compute/accelerator/README.md), BF16 matmul swept over
//     shapes with compute/accelerator/benchmarks/mamf-finder.py: A100 SXM
//     271.2 of 312 (0.869), H100 SXM 794.5 of 989 (0.803, "H200 is the
//     same"; the H800 has the same die), B200 1745.0 of 2250 (0.776).
//   attn_*_eff: the fused attention kernel of that generation's paper:
//     A100, FlashAttention-2 (Dao 2023, arXiv 2307.08691, section 4): "up to
//     230 TFLOPs/s, 73% of the theoretical maximum" (no separate backward
//     figure is stated; the same fraction is used for both). Hopper,
//     FlashAttention-3 (Shah et al. 2024, arXiv 2407.08608), its figures
//     of attention speed at head dim 128 on H100 SXM5, 16k tokens: forward
//     648 TFLOP/s (0.655), backward 561 (0.567); the "up to 740" of its
//     introduction is a larger head dimension. B200: no
//     published measurement was at hand; Hopper's fractions are assumed.
//   clock_sustain: those are short benchmarks at boost clock; a GPU held at
//     its power limit by a training job runs slower. A100: "peak 1410 MHz
//     --> ~1200 MHz" under FlashAttention-2 load (liangan1/GPU_travel,
//     performance/flash-attn/README.md, logged with nvidia-smi
//     --query-gpu=timestamp,clocks.sm,clocks.max.sm,power.draw,power.limit,
//     clocks_throttle_reasons.active --format=csv -lms 10): 1200/1410 = 0.851.
//     Hopper: fitted (PLAN_HOPPER_CLOCK, planner/fit.py on the fit set of
//     docs/planner.md): the rate an H100 sustains in a training job relative
//     to those benchmarks; it carries the clock held at 700 W and whatever
//     else the benchmarks' kernels do better than a whole job's. Blackwell:
//     no run to fit it on, so 1 (the planner is optimistic there by what
//     the clock loses).
static const node_preset_t presets[] = {
    {"a100-80g", "DGX A100: 8x A100-SXM 80GB, NVLink 3, 8x HDR 200 Gb/s", 8, 108, 81920, 312, 2039,
     300, 8, 200, 0.869, 0.73, 0.73, 0.851},
    {"h100-80g", "DGX H100: 8x H100-SXM 80GB, NVLink 4, 8x NDR 400 Gb/s", 8, 132, 81559, 989, 3350,
     450, 8, 400, 0.803, 0.655, 0.567, PLAN_HOPPER_CLOCK},
    {"h200", "HGX H200: 8x H200 141GB, NVLink 4, 8x NDR 400 Gb/s", 8, 132, 143771, 989, 4800, 450, 8,
     400, 0.803, 0.655, 0.567, PLAN_HOPPER_CLOCK},
    // H800: the H100 die with NVLink cut to 400 GB/s both ways; one 400 Gb/s
    // InfiniBand NIC per GPU as in DeepSeek-AI's clusters (arXiv 2412.19437,
    // section 3.1: "IB (50 GB/s)").
    {"h800", "HGX H800: 8x H800-SXM 80GB, NVLink 400 GB/s, 8x NDR 400 Gb/s", 8, 132, 81559, 989,
     3350, 200, 8, 400, 0.803, 0.655, 0.567, PLAN_HOPPER_CLOCK},
    {"b200", "DGX B200: 8x B200 180GB, NVLink 5, 8x 400 Gb/s", 8, 148, 183359, 2250, 8000, 900, 8,
     400, 0.776, 0.655, 0.567, 1},
};
#define NPRESETS ((int)(sizeof(presets) / sizeof(presets[0])))

// Per-hop latency of a ring step: NVLink inside a node, the network across.
// Assumed values of the order nccl-tests reports for small messages; a
// measured report replaces them (--intra-json, --inter-json).
#define INTRA_HOP_US 3.0
#define INTER_HOP_US 6.0

const char *plan_cluster_preset_name(int i) { return i >= 0 && i < NPRESETS ? presets[i].name : NULL; }
const char *plan_cluster_preset_about(int i) { return i >= 0 && i < NPRESETS ? presets[i].about : NULL; }

int plan_cluster_preset(const char *name, plan_cluster_t *out) {
  for (int i = 0; i < NPRESETS; i++) {
    const node_preset_t *p = &presets[i];
    if (strcasecmp(name, p->name) != 0) continue;
    memset(out, 0, sizeof(*out));
    snprintf(out->name, sizeof(out->name), "%s", p->name);
    out->gpus_per_node = p->gpus_per_node;
    out->sms = p->sms;
    out->mem_bytes = p->mem_mib * MIB;
    out->peak_flops = p->peak_tflops * 1e12;
    out->hbm_bw = p->hbm_gbs * 1e9;
    out->nvlink_bw = p->nvlink_gbs * 1e9;
    out->nics = p->nics;
    out->nic_bw = p->nic_gbps * 1e9 / 8;
    out->gemm_eff = p->gemm_eff;
    out->attn_fwd_eff = p->attn_fwd_eff;
    out->attn_bwd_eff = p->attn_bwd_eff;
    out->clock_sustain = p->clock_sustain;
    out->intra_lat = INTRA_HOP_US * 1e-6;
    out->inter_lat = INTER_HOP_US * 1e-6;
    return 0;
  }
  return -1;
}

int plan_cluster_check(const plan_cluster_t *c, char *err, size_t errlen) {
  const struct {
    const char *key;
    double v;
  } need[] = {{"gpus_per_node", c->gpus_per_node}, {"mem_gib", c->mem_bytes},
              {"peak_tflops", c->peak_flops}, {"hbm_gbs", c->hbm_bw},
              {"nvlink_gbs", c->nvlink_bw}, {"nics", c->nics}, {"nic_gbps", c->nic_bw},
              {"gemm_eff", c->gemm_flops > 0 ? 1 : c->gemm_eff}};
  for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
    if (!(need[i].v > 0) || !isfinite(need[i].v)) {
      snprintf(err, errlen, "cluster '%s': %s must be positive (give a preset with --cluster, "
                            "a file with --cluster-file, or the flag)",
               c->name[0] ? c->name : "?", need[i].key);
      return -1;
    }
  if (c->attn_fwd_eff < 0 || c->attn_bwd_eff < 0) {
    snprintf(err, errlen, "cluster '%s': attn_fwd_eff and attn_bwd_eff must be >= 0",
             c->name[0] ? c->name : "?");
    return -1;
  }
  return 0;
}

// Reads a whole (small) file; NULL with a sentence in err on failure.
static char *read_text(const char *path, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap + 1);
  while (buf != NULL) {
    len += fread(buf + len, 1, cap - len, f);
    if (len < cap) break;
    if (cap >= ((size_t)64 << 20)) {
      snprintf(err, errlen, "'%s' is larger than 64 MiB", path);
      free(buf);
      fclose(f);
      return NULL;
    }
    char *bigger = realloc(buf, cap * 2 + 1);
    if (bigger == NULL) free(buf);
    buf = bigger;
    cap *= 2;
  }
  int bad = ferror(f);
  fclose(f);
  if (buf == NULL || bad) {
    snprintf(err, errlen, "cannot read '%s'", path);
    free(buf);
    return NULL;
  }
  buf[len] = '\0';
  return buf;
}

static char *trim(char *s) {
  while (*s == ' ' || *s == '\t') s++;
  char *end = s + strlen(s);
  while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r')) *--end = '\0';
  return s;
}

// One "key = value" line applied to c; -1 with a sentence on a bad key/value.
static int apply_key(plan_cluster_t *c, const char *key, const char *val, char *err, size_t errlen) {
  if (strcmp(key, "base") == 0) {
    if (plan_cluster_preset(val, c) == 0) return 0;
    snprintf(err, errlen, "unknown base preset '%s'", val);
    return -1;
  }
  if (strcmp(key, "name") == 0) {
    snprintf(c->name, sizeof(c->name), "%s", val);
    return 0;
  }
  const struct {
    const char *key;
    double *dst, scale;
  } keys[] = {{"mem_gib", &c->mem_bytes, PLAN_GIB},      {"peak_tflops", &c->peak_flops, 1e12},
              {"gemm_eff", &c->gemm_eff, 1},             {"attn_fwd_eff", &c->attn_fwd_eff, 1},
              {"attn_bwd_eff", &c->attn_bwd_eff, 1},     {"clock_sustain", &c->clock_sustain, 1},
              {"hbm_gbs", &c->hbm_bw, 1e9},              {"nvlink_gbs", &c->nvlink_bw, 1e9},
              {"nic_gbps", &c->nic_bw, 1e9 / 8},         {"intra_busbw_gbs", &c->intra_busbw, 1e9},
              {"inter_busbw_gbs", &c->inter_busbw, 1e9}, {"intra_lat_us", &c->intra_lat, 1e-6},
              {"inter_lat_us", &c->inter_lat, 1e-6},     {"gemm_gflops", &c->gemm_flops, 1e9}};
  int *ints[] = {&c->gpus_per_node, &c->nics, &c->sms};
  const char *int_keys[] = {"gpus_per_node", "nics", "sms"};
  int real = -1, whole = -1;
  for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
    if (strcmp(key, keys[i].key) == 0) real = (int)i;
  for (int i = 0; i < 3; i++)
    if (strcmp(key, int_keys[i]) == 0) whole = i;
  if (real < 0 && whole < 0) {
    snprintf(err, errlen, "unknown key '%s' (see docs/planner.md for the keys)", key);
    return -1;
  }
  char *end = NULL;
  errno = 0;
  double v = strtod(val, &end);
  if (end == val || *end != '\0' || errno != 0 || !isfinite(v) || v < 0) {
    snprintf(err, errlen, "%s: '%s' is not a non-negative number", key, val);
    return -1;
  }
  if (real >= 0 && (strstr(key, "_eff") != NULL || strcmp(key, "clock_sustain") == 0) && v > 1) {
    snprintf(err, errlen, "%s: '%s' is a fraction of peak, at most 1", key, val);
    return -1;
  }
  if (real >= 0) {
    *keys[real].dst = v * keys[real].scale;
    return 0;
  }
  int lowest = whole == 2 ? 0 : 1;  // sms = 0 turns the wave model off
  if (v != floor(v) || v < lowest || v > 1024) {
    snprintf(err, errlen, "%s: '%s' is not a whole number from %d to 1024", key, val, lowest);
    return -1;
  }
  *ints[whole] = (int)v;
  return 0;
}

int plan_cluster_load_file(const char *path, plan_cluster_t *c, char *err, size_t errlen) {
  char *text = read_text(path, err, errlen);
  if (text == NULL) return -1;
  int lineno = 0, rc = 0;
  char *save = NULL;
  for (char *line = strtok_r(text, "\n", &save); line != NULL && rc == 0;
       line = strtok_r(NULL, "\n", &save)) {
    lineno++;
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    line = trim(line);
    if (*line == '\0') continue;
    char *eq = strchr(line, '=');
    char msg[200];
    if (eq == NULL) {
      snprintf(msg, sizeof(msg), "expected key = value, got '%.60s'", line);
      rc = -1;
    } else {
      *eq = '\0';
      rc = apply_key(c, trim(line), trim(eq + 1), msg, sizeof(msg));
    }
    if (rc != 0) snprintf(err, errlen, "%s:%d: %s", path, lineno, msg);
  }
  free(text);
  if (rc == 0 && c->name[0] == '\0') snprintf(c->name, sizeof(c->name), "%s", path);
  return rc;
}

// One result row's half ("out_of_place" or "in_place"): bus_bw and time.
static int row_half(const plan_json_t *row, double *busbw, double *us) {
  const plan_json_t *half = plan_json_get(row, "out_of_place");
  if (half == NULL || half->kind != PLAN_JSON_OBJECT) half = plan_json_get(row, "in_place");
  if (half == NULL || half->kind != PLAN_JSON_OBJECT) return -1;
  *busbw = plan_json_number(half, "bus_bw", -1);
  *us = plan_json_number(half, "time", plan_json_number(half, "cpu_time", -1));
  return *busbw >= 0 && *us >= 0 ? 0 : -1;
}

int plan_perf_json_bandwidth(const char *path, double *busbw, double *hop_lat, char *err,
                             size_t errlen) {
  char *text = read_text(path, err, errlen);
  if (text == NULL) return -1;
  char msg[160];
  plan_json_t *doc = plan_json_parse(text, msg, sizeof(msg));
  free(text);
  if (doc == NULL) {
    snprintf(err, errlen, "%s: not JSON: %s", path, msg);
    return -1;
  }
  const plan_json_t *results = plan_json_get(doc, "results");
  double big = -1, big_bw = 0, small = INFINITY, small_us = 0;
  int rows = 0;
  for (const plan_json_t *r = results && results->kind == PLAN_JSON_ARRAY ? results->child : NULL;
       r != NULL; r = r->next) {
    double size = plan_json_number(r, "size", -1), bw, us;
    if (size <= 0 || row_half(r, &bw, &us) != 0) continue;
    rows++;
    if (size > big) big = size, big_bw = bw;
    if (size < small) small = size, small_us = us;
  }
  // Ranks in the run: one entry per device in "config".
  int nranks = 0;
  const plan_json_t *devs = plan_json_get(plan_json_get(doc, "config"), "devices");
  for (const plan_json_t *d = devs && devs->kind == PLAN_JSON_ARRAY ? devs->child : NULL; d;
       d = d->next)
    nranks++;
  plan_json_free(doc);
  if (rows == 0 || !(big_bw > 0)) {
    snprintf(err, errlen, "%s: no result rows with a positive size and bus_bw (expected the "
                          "JSON that a perf tool writes with -J)", path);
    return -1;
  }
  *busbw = big_bw * 1e9;
  // A ring AllReduce of a tiny message is 2 (n - 1) hops of pure latency.
  *hop_lat = small_us * 1e-6 / (nranks >= 2 ? 2.0 * (nranks - 1) : 2.0);
  return 0;
}
