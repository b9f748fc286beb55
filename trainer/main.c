/*
 * main.c — weft-train: trains the reference GPT (model.h) on weft's
 * parallelism layer and prints what it learns.
 *
 *   build/bin/weft-train                                 one process, the addition task
 *   build/bin/weftrun -n 4 build/bin/weft-train --tp 2 --dp 2 --zero 1
 *   build/bin/weftrun -n 4 build/bin/weft-train --pp 2 --dp 2 --micro-batches 4
 *   build/bin/weftrun -n 4 build/bin/weft-train --tp 2 --sp 1 --pp 2 --schedule interleaved --chunks 2 --layers 4
 *   build/bin/weft-train --data file.txt | --data tokens.bin (llm.c format)
 *
 * Ranks come from a launcher's environment (weftInitFromEnv: weftrun,
 * torchrun, Slurm, MPI); with none, it runs as one rank.
 */
#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt.h"
#include "model_moe.h"
#include "plot.h"
#include "report.h"
#include "train.h"
#include "weft.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: weft-train [options]   (under weftrun -n N for several ranks)\n"
          "  parallelism: --tp T --pp P --dp D (T*C*P*D = ranks)  --zero 0..3  --grad-accum K\n"
          "               --micro-batches M (the same as --grad-accum; the pipeline's micro-batches)\n"
          "               --schedule 1f1b|gpipe|interleaved (pipeline schedule, default 1f1b)\n"
          "               --chunks V (interleaved: model chunks per stage; V divides the layers per stage,\n"
          "               and --micro-batches is a multiple of --pp)\n"
          "               --sp 1 (sequence parallelism with --tp: activations between blocks are sequence\n"
          "               shards; --tp divides --seq x --batch)\n"
          "               --cp C (context parallel: ring attention, --seq split in 2*C chunks)\n"
          "  model:       --layers L --hidden H --heads A --ffn F --seq S\n"
          "               --recompute 1 (keep block inputs only; recompute activations in backward)\n"
          "  experts:     --experts E (MoE MLPs; 0: dense) --topk K (default 2) --moe-every N (MoE in blocks\n"
          "               0, N, 2N..; default 1) --ep N (expert parallel: divides --dp and E; E/N experts a rank)\n"
          "               --capacity-factor X (C = ceil(X*tokens*K/E) per expert and micro-batch; 0: dropless)\n"
          "               --aux-loss-coef X (Switch load-balancing loss, default 0.01)\n"
          "  data:        --data FILE (text bytes, or an llm.c token file)  --digits N (addition task)\n"
          "  training:    --steps N --batch B (sequences per micro-batch) --lr X --min-lr X --warmup N\n"
          "               --weight-decay X --clip X (0: off) --beta1 X --beta2 X --seed N\n"
          "  output:      --eval-every N --eval-batches N --eval-problems N --print-every N --log out.csv\n"
          "               --plot loss.png (gnuplot)\n"
          "  checkpoints: --save FILE (at the end)  --save-every N  --resume FILE\n"
          "               --stop-after N (stop after step N of the --steps schedule)\n");
}

// Strict number parsing: the whole text must be a number in range.
static int parse_int(const char *flag, const char *text, long lo, long hi, int *out) {
  char *end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) {
    fprintf(stderr, "weft-train: %s %s: expected an integer in %ld..%ld\n", flag, text, lo, hi);
    return -1;
  }
  *out = (int)v;
  return 0;
}

static int parse_float(const char *flag, const char *text, float *out) {
  char *end;
  errno = 0;
  float v = strtof(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !(v >= 0)) {
    fprintf(stderr, "weft-train: %s %s: expected a non-negative number\n", flag, text);
    return -1;
  }
  *out = v;
  return 0;
}

static void defaults(train_cfg_t *c) {
  memset(c, 0, sizeof(*c));
  c->dims = (gpt_dims_t){0, 32, 2, 64, 4, 256, 0, 2, 1, 0.0f, 0.01f};  // dense; MoE: top-2, every block, dropless
  c->batch = 16;
  c->grad_accum = 1;
  c->tp = c->pp = c->dp = c->ep = 1;
  c->cp = 1;
  c->schedule = WEFT_PP_1F1B;
  c->chunks = 1;
  c->steps = 1500;
  c->eval_every = 500;
  c->eval_batches = 4;
  c->eval_problems = 256;
  c->print_every = 100;
  c->lr = (lr_schedule_t){3e-3f, 3e-4f, 20, 0};
  c->beta1 = 0.9f, c->beta2 = 0.95f, c->eps = 1e-8f, c->weight_decay = 0.1f, c->clip = 1.0f;
  c->digits = 2;
  c->seed = 1337;
}

static int parse_args(int argc, char **argv, train_cfg_t *c, int *seed_given) {
  int seed = (int)c->seed;
  struct { const char *flag; int *ival; long lo, hi; float *fval; } opts[] = {
      {"--tp", &c->tp, 1, 1024, NULL}, {"--pp", &c->pp, 1, 1024, NULL}, {"--dp", &c->dp, 1, 1 << 20, NULL},
      {"--zero", &c->zero, 0, 3, NULL}, {"--grad-accum", &c->grad_accum, 1, 1 << 16, NULL},
      {"--micro-batches", &c->grad_accum, 1, 1 << 16, NULL},
      {"--layers", &c->dims.layers, 1, 1024, NULL}, {"--hidden", &c->dims.hidden, 1, 1 << 16, NULL},
      {"--heads", &c->dims.heads, 1, 1024, NULL}, {"--ffn", &c->dims.ffn, 1, 1 << 18, NULL},
      {"--seq", &c->dims.seq, 2, 1 << 16, NULL}, {"--digits", &c->digits, 1, 9, NULL},
      {"--steps", &c->steps, 1, 1 << 30, NULL}, {"--batch", &c->batch, 1, 1 << 16, NULL},
      {"--warmup", &c->lr.warmup, 0, 1 << 30, NULL}, {"--seed", &seed, 0, 1L << 30, NULL},
      {"--eval-every", &c->eval_every, 0, 1 << 30, NULL}, {"--eval-batches", &c->eval_batches, 0, 1 << 20, NULL},
      {"--eval-problems", &c->eval_problems, 0, 1 << 24, NULL}, {"--print-every", &c->print_every, 1, 1 << 30, NULL},
      {"--lr", NULL, 0, 0, &c->lr.lr}, {"--min-lr", NULL, 0, 0, &c->lr.min_lr},
      {"--weight-decay", NULL, 0, 0, &c->weight_decay}, {"--clip", NULL, 0, 0, &c->clip},
      {"--beta1", NULL, 0, 0, &c->beta1}, {"--beta2", NULL, 0, 0, &c->beta2},
      {"--save-every", &c->save_every, 0, 1 << 30, NULL}, {"--stop-after", &c->stop_after, 0, 1 << 30, NULL},
      {"--recompute", &c->recompute, 0, 1, NULL},
      {"--cp", &c->cp, 1, 1024, NULL},
      {"--sp", &c->sp, 0, 1, NULL}, {"--chunks", &c->chunks, 1, 1024, NULL},
      {"--ep", &c->ep, 1, 1024, NULL}, {"--experts", &c->dims.experts, 0, 1024, NULL},
      {"--topk", &c->dims.topk, 1, 1024, NULL}, {"--moe-every", &c->dims.moe_every, 1, 1024, NULL},
      {"--capacity-factor", NULL, 0, 0, &c->dims.capacity_factor}, {"--aux-loss-coef", NULL, 0, 0, &c->dims.aux_coef},
  };
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      exit(0);
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "weft-train: %s needs a value (or is unknown)\n", a);
      return -1;
    }
    const char *v = argv[++i];
    if (!strcmp(a, "--data")) { c->data_path = v; continue; }
    if (!strcmp(a, "--log")) { c->log_path = v; continue; }
    if (!strcmp(a, "--save")) { c->save_path = v; continue; }
    if (!strcmp(a, "--resume")) { c->resume_path = v; continue; }
    if (!strcmp(a, "--plot")) { c->plot_path = v; continue; }
    if (!strcmp(a, "--schedule")) {
      if (strcmp(v, "1f1b") != 0 && strcmp(v, "gpipe") != 0 && strcmp(v, "interleaved") != 0) {
        fprintf(stderr, "weft-train: --schedule %s: expected 1f1b, gpipe or interleaved\n", v);
        return -1;
      }
      c->schedule = !strcmp(v, "gpipe") ? WEFT_PP_GPIPE : !strcmp(v, "interleaved") ? WEFT_PP_INTERLEAVED : WEFT_PP_1F1B;
      continue;
    }
    if (!strcmp(a, "--seed")) *seed_given = 1;
    size_t k = 0, n = sizeof(opts) / sizeof(opts[0]);
    while (k < n && strcmp(a, opts[k].flag) != 0) k++;
    if (k == n) {
      fprintf(stderr, "weft-train: unknown option %s (see --help)\n", a);
      return -1;
    }
    int bad = opts[k].ival != NULL ? parse_int(a, v, opts[k].lo, opts[k].hi, opts[k].ival)
                                   : parse_float(a, v, opts[k].fval);
    if (bad) return -1;
  }
  c->seed = (unsigned long long)seed;
  c->lr.steps = c->steps;
  if (c->save_every > 0 && c->save_path == NULL) {
    fprintf(stderr, "weft-train: --save-every needs --save FILE\n");
    return -1;
  }
  return 0;
}

// Before any rank starts: a checkpoint to resume must be readable, and
// its data seed is the run's unless --seed says otherwise.
static int check_resume(train_cfg_t *c, int seed_given) {
  if (c->resume_path == NULL) return 0;
  ckpt_header_t h;
  char err[512];
  if (ckpt_read_header(c->resume_path, &h, err, sizeof(err)) != 0) {
    fprintf(stderr, "weft-train: --resume %s\n", err);
    return -1;
  }
  if (seed_given && h.seed != c->seed)
    fprintf(stderr, "weft-train: note: --seed %llu, but the checkpoint was trained with seed %llu\n", c->seed,
            (unsigned long long)h.seed);
  if (!seed_given) c->seed = h.seed;
  return 0;
}

// A launcher's environment, or one rank on its own.
static ncclResult_t init_world(ncclComm_t *world) {
  const char *vars[] = {"WEFT_UNIQUE_ID", "RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"};
  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
    if (getenv(vars[i]) != NULL) return weftInitFromEnv(world);
  return ncclCommInitAll(world, 1, NULL);
}

// The loss curve from the run's CSV (rank 0, at the end).
static void plot(const train_cfg_t *cfg, const char *csv, int evals, const eval_result_t *ev) {
  if (cfg->plot_path == NULL || csv == NULL) return;
  plot_loss(csv, cfg->plot_path, evals > 0 && cfg->eval_batches > 0, evals > 0 && ev->accuracy >= 0);
}

static ncclResult_t run(const train_cfg_t *cfg, trainer_t *t, int rank) {
  const weft_mesh_t *mesh = trainer_mesh(t);
  int first = 0, end = cfg->stop_after > 0 && cfg->stop_after < cfg->steps ? cfg->stop_after : cfg->steps;
  double peak = report_measure_peak();
  ncclResult_t res = ncclAllReduce(&peak, &peak, 1, ncclFloat64, ncclSum, mesh->world, NULL);
  if (res != ncclSuccess) return res;
  double tokens = (double)cfg->dp * cfg->grad_accum * cfg->batch * cfg->dims.seq;
  report_t rep;
  if (rank == 0) {
    printf("weft-train: %d ranks (tp %d%s x cp %d x pp %d%s x dp %d, ZeRO-%d), GPT %zu parameters (L=%d h=%d heads=%d ffn=%d seq=%d)\n",
           mesh->nranks, cfg->tp, cfg->sp ? " sp" : "", cfg->cp, cfg->pp,
           cfg->schedule == WEFT_PP_INTERLEAVED ? " interleaved" : "", cfg->dp, cfg->zero, trainer_param_count(t), cfg->dims.layers,
           cfg->dims.hidden, cfg->dims.heads, cfg->dims.ffn, cfg->dims.seq);
    if (cfg->dims.experts > 0) {
      const gpt_dims_t *d = &cfg->dims;
      printf("experts: %d (ffn %d) in %d of %d blocks, top-%d (%s weights), ep %d (%d experts a rank), ", d->experts,
             d->ffn, gpt_moe_blocks(d), d->layers, d->topk, d->topk > 1 ? "renormalised" : "probability", cfg->ep,
             d->experts / cfg->ep);
      if (d->capacity_factor > 0)
        printf("capacity factor %g (%d tokens an expert, lowest router probabilities dropped)", d->capacity_factor,
               trainer_moe_capacity(t));
      else
        printf("dropless");
      printf(", aux loss coefficient %g\n", d->aux_coef);
    }
    printf("data: %s\n", data_describe(trainer_data(t)));
    printf("batch: %.0f tokens per step (%d x %d micro-batches x %d sequences x %d), %d steps, sgemm peak %.1f GFLOP/s\n",
           tokens, cfg->dp, cfg->grad_accum, cfg->batch, cfg->dims.seq, cfg->steps, peak * 1e-9);
    printf("activations: %.2f MiB on rank 0%s\n", (double)trainer_activation_bytes(t) / (1 << 20),
           cfg->recompute ? " (recomputed in backward: block inputs kept)" : "");
    fflush(stdout);
  }
  if (cfg->resume_path != NULL) {
    ncclResult_t r = trainer_resume(t, cfg->resume_path, &first);
    if (r != ncclSuccess) return r;
    if (first >= end) {
      if (rank == 0) fprintf(stderr, "weft-train: the checkpoint is at step %d; --stop-after %d leaves nothing to do\n", first, end);
      return ncclInvalidArgument;
    }
    if (rank == 0) printf("resumed from %s after step %d\n", cfg->resume_path, first);
  }
  // --plot without --log: the curve comes from a temporary CSV.
  char tmp_csv[] = "/tmp/weft-train-XXXXXX.csv";
  const char *csv = cfg->log_path;
  if (rank == 0 && csv == NULL && cfg->plot_path != NULL) {
    int fd = mkstemps(tmp_csv, 4);
    if (fd >= 0) close(fd), csv = tmp_csv;
  }
  if (report_open(&rep, rank == 0 ? csv : NULL, cfg->steps, cfg->print_every, tokens, trainer_flops_per_step(t),
                  peak) != 0)
    return ncclInvalidArgument;  // the other ranks fail at the next collective
  rep.first = first;
  eval_result_t ev = {0};
  int evals = 0;
  for (int s = first; s < end && res == ncclSuccess; s++) {
    step_result_t sr;
    if ((res = trainer_step(t, s, &sr)) != ncclSuccess) break;
    if (rank == 0) report_step(&rep, s, &sr);
    int last = s + 1 == end;
    if (last || (cfg->eval_every > 0 && (s + 1) % cfg->eval_every == 0)) {
      if ((res = trainer_eval(t, &ev)) == ncclSuccess && rank == 0) report_eval(&rep, s + 1, &ev);
      evals++;
    }
    if (res == ncclSuccess && cfg->save_path != NULL && (last || (cfg->save_every > 0 && (s + 1) % cfg->save_every == 0))) {
      if ((res = trainer_save(t, cfg->save_path, s + 1)) == ncclSuccess && rank == 0)
        printf("saved %s after step %d\n", cfg->save_path, s + 1);
    }
  }
  if (res == ncclSuccess && rank == 0) {
    printf("final: val loss %.4f", ev.val_loss);
    if (ev.accuracy >= 0) printf(", accuracy %.1f%%", 100 * ev.accuracy);
    printf(", %.1f s training, %.0f tokens/s\n", rep.train_seconds, tokens * (end - first) / rep.train_seconds);
  }
  report_close(&rep);
  if (res == ncclSuccess && rank == 0) plot(cfg, csv, evals, &ev);
  if (csv == tmp_csv) unlink(tmp_csv);
  return res;
}

int main(int argc, char **argv) {
  train_cfg_t cfg;
  defaults(&cfg);
  int seed_given = 0;
  if (parse_args(argc, argv, &cfg, &seed_given) != 0 || check_resume(&cfg, seed_given) != 0) return 2;
  if (getenv("OPENBLAS_NUM_THREADS") == NULL) openblas_set_num_threads(1);  // one core per rank
  ncclComm_t world = NULL;
  trainer_t *t = NULL;
  int rank = 0;
  ncclResult_t res = init_world(&world);
  if (res == ncclSuccess) res = ncclCommUserRank(world, &rank);
  if (res == ncclSuccess) res = trainer_create(&cfg, world, &t);
  if (res == ncclSuccess) res = run(&cfg, t, rank);
  trainer_destroy(t);
  if (world != NULL) ncclCommDestroy(world);
  if (res != ncclSuccess) {
    if (res == ncclInvalidArgument)
      fprintf(stderr, "weft-train: rank %d stopped: bad input (see above)\n", rank);
    else
      fprintf(stderr, "weft-train: rank %d failed: %s\n", rank, ncclGetErrorString(res));
    return res == ncclInvalidArgument ? 2 : 1;
  }
  return 0;
}
