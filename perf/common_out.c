/*
 * common_out.c — the benchmarks' report, written by process 0 only:
 * nccl-tests' text layout (header, "# Using devices", the two-line column
 * header, one row per size, the footer) and, with -J, the same results as
 * nccl-tests' JSON document (same keys, written as the rows are printed).
 */
#include <errno.h>
#include <stdio.h>
#include <time.h>

#include "common_internal.h"

#define FORMAT_VERSION "2.19.6"  // the nccl-tests release whose report this follows

static FILE *json;
static int json_rows;

// nccl-tests' number cells: 2, 1 or 0 decimals, whichever fits, else exponent.
static const char *cell(char *buf, double v, int width) {
  static const char *const fmts[] = {"%*.2f", "%*.1f", "%*.0f"};
  for (int i = 0; i < 3; i++)
    if (snprintf(buf, (size_t)width + 1, fmts[i], width, v) <= width) return buf;
  snprintf(buf, (size_t)width + 1, width >= 7 ? "%*.1e" : "%*.0e", width, v);
  return buf;
}

static void json_str(const char *s) {
  fputc('"', json);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      fprintf(json, "\\%c", ch);
    else if (ch < 0x20)
      fprintf(json, "\\u%04x", ch);
    else
      fputc(ch, json);
  }
  fputc('"', json);
}

static void json_time(const char *key) {
  char buf[64];
  time_t t = time(NULL);
  strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", localtime(&t));
  fprintf(json, "\"%s\":", key);
  json_str(buf);
}

// Creates the -J file without overwriting one: name, name.0, name.1, ...
void perf_out_json_open(int argc, char **argv) {
  char path[4096];
  snprintf(path, sizeof(path), "%s", perf_opts.json);
  for (int i = 0; (json = fopen(path, "wx")) == NULL && errno == EEXIST && i < 1000; i++)
    snprintf(path, sizeof(path), "%s.%d", perf_opts.json, i);
  if (json == NULL) {
    printf("# skipping json output; %s not accessible\n", path);
    return;
  }
  printf("# Writing JSON output to %s\n", path);
  int version = 0;
  ncclGetVersion(&version);
  fprintf(json, "{\"version\":3,");
  json_time("start_time");
  fprintf(json, ",\"args\":[");
  for (int i = 0; i < argc; i++) {
    if (i) fputc(',', json);
    json_str(argv[i]);
  }
  fprintf(json, "],\"nccl_version\":%d", version);
}

static void json_config(const perf_rank_info_t *info) {
  const perf_opts_t *o = &perf_opts;
  int factor = o->stepfactor > 1;
  fprintf(json,
          ",\"config\":{\"nthreads\":%d,\"ngpus\":%d,\"minimum_bytes\":%zu,"
          "\"maximum_bytes\":%zu,\"%s\":%zu,\"warmup_iters\":%d,\"iterations\":%d,"
          "\"aggregated_iterations\":%d,\"validation\":%d,\"graph\":0,"
          "\"blocking_collectives\":\"%s\",\"parallel_init\":\"false\",\"devices\":[",
          o->nthreads, o->ngpus, o->minbytes, o->maxbytes, factor ? "step_factor" : "step_bytes",
          factor ? o->stepfactor : o->stepbytes, o->warmup, o->iters, o->agg, o->check,
          o->blocking ? "true" : "false");
  for (int r = 0; r < perf_nranks; r++) {
    fprintf(json, "%s{\"rank\":%d,\"group\":0,\"pid\":%d,\"hostname\":", r ? "," : "", r,
            (int)info[r].pid);
    json_str(info[r].host);
    fprintf(json, ",\"device\":-1,\"device_hex\":\"host\",\"device_info\":\"host memory\"}");
  }
  fprintf(json, "]},\"results\":[");
}

void perf_out_header(const perf_rank_info_t *info, int reduced) {
  const perf_opts_t *o = &perf_opts;
  int version = 0, wv = 0;
  ncclGetVersion(&version);
  weftGetVersion(&wv);
  printf("# weft perf (nccl-tests %s format) weft %d.%d.%d nccl-headers=%d nccl-library=%d\n",
         FORMAT_VERSION, wv / 10000, wv / 100 % 100, wv % 100, NCCL_VERSION_CODE, version);
  printf("# Collective test starting: %s\n", perf_prog);
  int factor = o->stepfactor > 1;
  printf(
      "# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
      "agg iters: %d validation: %d graph: 0 unalign: %d\n",
      o->nthreads, o->ngpus, o->minbytes, o->maxbytes, factor ? o->stepfactor : o->stepbytes,
      factor ? "factor" : "bytes", o->warmup, o->iters, o->agg, o->check, o->unalign);
  static const char *const blocking[] = {
      NULL, "wait and barrier after each inner iteration (-m)",
      "wait after each inner iteration (-m), no barrier",
      "wait and barrier after each outer iteration (-n); time excludes barrier"};
  if (o->blocking) printf("# Blocking Enabled: %s \n", blocking[o->blocking]);
  for (int i = 0; i < perf_nnotes; i++) printf("# %s\n", perf_notes[i]);
  printf("#\n# Using devices\n");
  for (int r = 0; r < perf_nranks; r++)
    printf("#  Rank %2d Group %2d Pid %6d on %10s device %2d %s\n", r, 0, (int)info[r].pid, info[r].host,
           o->device ? perf_dev_of(r) : -1, o->device ? "[cuda] device memory" : "[host] host memory");
  if (reduced) printf("#\n# Reducing maxBytes to %zu due to memory limitation\n", o->maxbytes);

  const char *tcol = o->cputime ? "cputime" : "time";
  const char *lbl[2][13] = {{"size", "count", "type", "redop", "root", tcol, "algbw", "busbw",
                             "#wrong", tcol, "algbw", "busbw", "#wrong"},
                            {"(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "",
                             "(us)", "(GB/s)", "(GB/s)", ""}};
  printf("#\n#%62s%s%23s%s%10s\n", "", "out-of-place", "", "in-place", "");
  for (int k = 0; k < 2; k++)
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s \n", lbl[k][0],
           lbl[k][1], lbl[k][2], lbl[k][3], lbl[k][4], lbl[k][5], lbl[k][6], lbl[k][7], lbl[k][8],
           lbl[k][9], lbl[k][10], lbl[k][11], lbl[k][12]);
  if (json) json_config(info);
}

void perf_out_row_start(size_t bytes, size_t count, int t, const char *op, int root) {
  printf("%12zu  %12zu  %8s  %6s  %6d", bytes, count, perf_types[t].name, op, root);
  if (json == NULL) return;
  fprintf(json, "%s{\"size\":%zu,\"count\":%zu,\"type\":\"%s\",\"redop\":\"%s\",\"root\":\"%6d\"",
          json_rows++ ? "," : "", bytes, count, perf_types[t].name, op, root);
}

void perf_out_half(double us, double alg, double bus, int report, int64_t wrong, int inplace) {
  char a[16], b[16], c[16];
  printf("  %7s  %6s  %6s", cell(a, us, 7), cell(b, alg, 6), cell(c, bus, 6));
  if (report)
    printf("  %6g", (double)wrong);
  else
    printf("    N/A");
  if (json == NULL) return;
  fprintf(json, ",\"%s\":{\"%s\":%f,\"alg_bw\":%f,\"bus_bw\":%f,\"nwrong\":",
          inplace ? "in_place" : "out_of_place", perf_opts.cputime ? "cpu_time" : "time", us, alg,
          bus);
  if (report)
    fprintf(json, "%f}", (double)wrong);
  else
    fprintf(json, "null}");
}

void perf_out_row_end(void) {
  printf("\n");
  if (json) fprintf(json, ",\"actual_iterations\":%d,\"experiment_name\":\"\"}", perf_opts.iters);
}

void perf_out_footer(int64_t errors, double bw, int minbw_set, int slow) {
  printf("# %-20s : %lld %s\n", "Out of bounds values", (long long)errors,
         errors ? "FAILED" : "OK");
  printf("# %-20s : %g %s\n", "Avg bus bandwidth", bw, !minbw_set ? "" : slow ? "FAILED" : "OK");
  printf("#\n# Collective test concluded: %s\n#\n", perf_prog);
  const char *last = ncclGetLastError(NULL);
  if (last && *last)
    printf("# error: %s\n", last);
  else
    printf("\n");
  if (json == NULL) return;
  fprintf(json,
          "],\"out_of_bounds\":{\"count\":%lld,\"okay\":\"%s\"},"
          "\"average_bus_bandwidth\":{\"bandwidth\":%f,\"okay\":\"%s\"},\"errors\":[",
          (long long)errors, errors ? "false" : "true", bw,
          !minbw_set ? "unchecked"
          : slow     ? "false"
                     : "true");
  if (last && *last) json_str(last);
  fprintf(json, "],");
  json_time("end_time");
  fprintf(json, "}\n");
  fclose(json);
  json = NULL;
}
