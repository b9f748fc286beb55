/*
 * test_trainer_layouts.c — weft-train learns exactly like one rank in
 * every parallel layout: at the same global batch (one rank accumulates
 * what the data-parallel ranks split), the first 20 losses of DP (ZeRO
 * 0-3), TP, PP (1F1B and GPipe over the accumulation's micro-batches) and
 * their products under weftrun equal the one-rank run to 1e-5 relative
 * (fp32; in practice they agree to the printed digit). Every (tp, pp, dp)
 * factorisation of 4 ranks runs, and a representative set of 8; context
 * parallelism (CP2, CP2 x DP2, TP2 x CP2) learns like one rank too; with
 * activation recomputation the one-rank losses are bitwise the same; and
 * ranks launched by torchrun- or Slurm-style environment variables learn
 * like ranks launched by weftrun. Sequence parallelism (--sp) and the
 * interleaved schedule (--schedule interleaved --chunks 2) alone, with DP
 * and ZeRO, and all together on 8 ranks, learn like one rank too.
 * Mixture-of-experts layouts (EP with DP, TP, CP, PP, ZeRO, sequence
 * parallelism and the interleaved schedule) equal the one-rank run of the
 * same MoE model.
 * Gradient clipping is on, so the global norm is checked across layouts.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

enum { STEPS = 20, BATCH = 2, GLOBAL_MICRO = 8 };

static const char *build_dir(void) {
  const char *b = getenv("WEFT_BUILD_DIR");
  return b != NULL ? b : "build";
}

// Runs weft-train on `ranks` ranks with extra flags; returns the losses read from its CSV log.
static void run(int ranks, const char *flags, int grad_accum, double *loss) {
  char csv[] = "/tmp/weft-train-layout-XXXXXX";
  int fd = mkstemp(csv);
  cr_assert(fd >= 0);
  close(fd);
  char cmd[1024];
  snprintf(cmd, sizeof(cmd),
           "NCCL_SOCKET_IFNAME=lo timeout 240 %s/bin/weftrun -n %d %s/bin/weft-train --steps %d --batch %d "
           "--grad-accum %d --warmup 0 --lr 3e-3 --clip 0.5 --eval-every 0 --eval-batches 1 --eval-problems 8 "
           "--seq 16 --layers 4 --hidden 32 --heads 8 --ffn 64 %s --log %s >/dev/null 2>&1",
           build_dir(), ranks, build_dir(), STEPS, BATCH, grad_accum, flags, csv);
  cr_assert_eq(system(cmd), 0, "failed: %s", cmd);
  FILE *f = fopen(csv, "r");
  cr_assert_not_null(f);
  char line[256];
  int n = 0;
  while (fgets(line, sizeof(line), f) != NULL && n < STEPS) {
    int step;
    double l;
    if (sscanf(line, "%d,%lf,", &step, &l) == 2 && strstr(line, ",,,,,,") == NULL) loss[n++] = l;
  }
  fclose(f);
  unlink(csv);
  cr_assert_eq(n, STEPS, "%d losses in the log of: %s", n, cmd);
}

// The one-rank run every layout is compared with.
static const double *reference(void) {
  static double loss[STEPS];
  static int have;
  if (!have) {
    run(1, "", GLOBAL_MICRO, loss);
    have = 1;
  }
  return loss;
}

static void expect_same(const char *name, int ranks, const char *flags, int dp) {
  const double *ref = reference();
  double loss[STEPS];
  run(ranks, flags, GLOBAL_MICRO / dp, loss);
  for (int s = 0; s < STEPS; s++)
    cr_expect(fabs(loss[s] - ref[s]) <= 1e-5 * fabs(ref[s]), "%s step %d: loss %.7f, one rank %.7f", name, s + 1,
              loss[s], ref[s]);
  cr_expect(ref[STEPS - 1] < ref[0], "the loss falls: %.4f -> %.4f", ref[0], ref[STEPS - 1]);
}

// Activation recomputation redoes the same arithmetic: the same bits on one
// rank, and like every layout on several.
Test(trainer_layouts, recompute_bitwise, .timeout = 240) {
  const double *ref = reference();
  double loss[STEPS];
  run(1, "--recompute 1", GLOBAL_MICRO, loss);
  for (int s = 0; s < STEPS; s++) cr_expect(loss[s] == ref[s], "step %d: %.9g, without recompute %.9g", s + 1, loss[s], ref[s]);
}
Test(trainer_layouts, tp2_pp2_dp2_recompute, .timeout = 240) {
  expect_same("tp2 pp2 dp2 zero3 recompute", 8, "--tp 2 --pp 2 --dp 2 --zero 3 --recompute 1", 2);
}

// Two ranks.
Test(trainer_layouts, dp2_zero0, .timeout = 240) { expect_same("dp2 zero0", 2, "--dp 2 --zero 0", 2); }
Test(trainer_layouts, dp2_zero1, .timeout = 240) { expect_same("dp2 zero1", 2, "--dp 2 --zero 1", 2); }
Test(trainer_layouts, dp2_zero2, .timeout = 240) { expect_same("dp2 zero2", 2, "--dp 2 --zero 2", 2); }
Test(trainer_layouts, dp2_zero3, .timeout = 240) { expect_same("dp2 zero3", 2, "--dp 2 --zero 3", 2); }
Test(trainer_layouts, tp2, .timeout = 240) { expect_same("tp2", 2, "--tp 2", 1); }
Test(trainer_layouts, pp2, .timeout = 240) { expect_same("pp2", 2, "--pp 2", 1); }
Test(trainer_layouts, pp2_gpipe, .timeout = 240) { expect_same("pp2 gpipe", 2, "--pp 2 --schedule gpipe", 1); }
// Context parallel: each sequence in 2 * cp chunks, attention over the ring.
Test(trainer_layouts, cp2, .timeout = 240) { expect_same("cp2", 2, "--cp 2", 1); }
Test(trainer_layouts, cp2_dp2_zero1, .timeout = 240) { expect_same("cp2 dp2 zero1", 4, "--cp 2 --dp 2 --zero 1", 2); }
Test(trainer_layouts, tp2_cp2, .timeout = 240) { expect_same("tp2 cp2", 4, "--tp 2 --cp 2", 1); }
// Every (tp, pp, dp) factorisation of four ranks, ZeRO 0-3 among them.
Test(trainer_layouts, tp4, .timeout = 240) { expect_same("tp4", 4, "--tp 4", 1); }
Test(trainer_layouts, pp4, .timeout = 240) { expect_same("pp4", 4, "--pp 4", 1); }
Test(trainer_layouts, dp4_zero0, .timeout = 240) { expect_same("dp4 zero0", 4, "--dp 4 --zero 0", 4); }
Test(trainer_layouts, dp4_zero1, .timeout = 240) { expect_same("dp4 zero1", 4, "--dp 4 --zero 1", 4); }
Test(trainer_layouts, dp4_zero2, .timeout = 240) { expect_same("dp4 zero2", 4, "--dp 4 --zero 2", 4); }
Test(trainer_layouts, dp4_zero3, .timeout = 240) { expect_same("dp4 zero3", 4, "--dp 4 --zero 3", 4); }
Test(trainer_layouts, tp2_pp2, .timeout = 240) { expect_same("tp2 pp2", 4, "--tp 2 --pp 2", 1); }
Test(trainer_layouts, tp2_dp2_zero1, .timeout = 240) { expect_same("tp2 dp2 zero1", 4, "--tp 2 --dp 2 --zero 1", 2); }
Test(trainer_layouts, tp2_dp2_zero3, .timeout = 240) { expect_same("tp2 dp2 zero3", 4, "--tp 2 --dp 2 --zero 3", 2); }
Test(trainer_layouts, pp2_dp2_zero0, .timeout = 240) { expect_same("pp2 dp2 zero0", 4, "--pp 2 --dp 2 --zero 0", 2); }
Test(trainer_layouts, pp2_dp2_zero1, .timeout = 240) { expect_same("pp2 dp2 zero1", 4, "--pp 2 --dp 2 --zero 1", 2); }
Test(trainer_layouts, pp2_dp2_zero2, .timeout = 240) { expect_same("pp2 dp2 zero2", 4, "--pp 2 --dp 2 --zero 2", 2); }
Test(trainer_layouts, pp2_dp2_zero3, .timeout = 240) { expect_same("pp2 dp2 zero3", 4, "--pp 2 --dp 2 --zero 3", 2); }
// A representative set of eight.
Test(trainer_layouts, tp2_pp2_dp2_zero1, .timeout = 240) {
  expect_same("tp2 pp2 dp2 zero1", 8, "--tp 2 --pp 2 --dp 2 --zero 1", 2);
}
Test(trainer_layouts, tp2_pp2_dp2_zero3, .timeout = 240) {
  expect_same("tp2 pp2 dp2 zero3", 8, "--tp 2 --pp 2 --dp 2 --zero 3", 2);
}
Test(trainer_layouts, tp8, .timeout = 240) { expect_same("tp8", 8, "--tp 8", 1); }
Test(trainer_layouts, dp8_zero2, .timeout = 240) { expect_same("dp8 zero2", 8, "--dp 8 --zero 2", 8); }
Test(trainer_layouts, tp4_dp2_zero3, .timeout = 240) { expect_same("tp4 dp2 zero3", 8, "--tp 4 --dp 2 --zero 3", 2); }
Test(trainer_layouts, pp4_dp2_gpipe, .timeout = 240) {
  expect_same("pp4 dp2 gpipe", 8, "--pp 4 --dp 2 --zero 1 --schedule gpipe", 2);
}
Test(trainer_layouts, tp2_pp4, .timeout = 240) { expect_same("tp2 pp4", 8, "--tp 2 --pp 4", 1); }
Test(trainer_layouts, pp2_dp4_zero3, .timeout = 240) { expect_same("pp2 dp4 zero3", 8, "--pp 2 --dp 4 --zero 3", 4); }
// Sequence parallelism and the interleaved schedule (2 chunks of the 4 layers' 2 per stage), alone and combined.
Test(trainer_layouts, tp2_sp, .timeout = 240) { expect_same("tp2 sp", 2, "--tp 2 --sp 1", 1); }
Test(trainer_layouts, pp2_interleaved, .timeout = 240) {
  expect_same("pp2 interleaved", 2, "--pp 2 --schedule interleaved --chunks 2", 1);
}
Test(trainer_layouts, tp2_sp_dp2_zero1, .timeout = 240) {
  expect_same("tp2 sp dp2 zero1", 4, "--tp 2 --sp 1 --dp 2 --zero 1", 2);
}
Test(trainer_layouts, pp2_interleaved_dp2, .timeout = 240) {
  expect_same("pp2 interleaved dp2", 4, "--pp 2 --schedule interleaved --chunks 2 --dp 2", 2);
}
Test(trainer_layouts, pp2_interleaved_dp2_zero2, .timeout = 240) {
  expect_same("pp2 interleaved dp2 zero2", 4, "--pp 2 --schedule interleaved --chunks 2 --dp 2 --zero 2", 2);
}
// Context parallelism with the sequence-parallel TP group and with the interleaved pipeline.
Test(trainer_layouts, tp2_sp_cp2, .timeout = 240) { expect_same("tp2 sp cp2", 4, "--tp 2 --sp 1 --cp 2", 1); }
Test(trainer_layouts, cp2_pp2_interleaved, .timeout = 240) {
  expect_same("cp2 pp2 interleaved", 4, "--cp 2 --pp 2 --schedule interleaved --chunks 2", 1);
}
Test(trainer_layouts, tp2_sp_pp2_interleaved_dp2_zero3, .timeout = 240) {
  expect_same("tp2 sp pp2 interleaved dp2 zero3", 8,
              "--tp 2 --sp 1 --pp 2 --schedule interleaved --chunks 2 --dp 2 --zero 3 --recompute 1", 2);
}

// Mixture of experts: every layout against the one-rank run of the same MoE
// model (EP = 1). Routing is a step function of the router, so a top-k or
// capacity decision within rounding of a tie would part the runs; these
// configurations have none in their 20 steps.
static void expect_same_moe(const char *name, int ranks, const char *moe, const char *layout, int dp) {
  double ref[STEPS], loss[STEPS];
  char flags[512];
  run(1, moe, GLOBAL_MICRO, ref);
  snprintf(flags, sizeof(flags), "%s %s", moe, layout);
  run(ranks, flags, GLOBAL_MICRO / dp, loss);
  for (int s = 0; s < STEPS; s++)
    cr_expect(fabs(loss[s] - ref[s]) <= 1e-5 * fabs(ref[s]), "%s step %d: loss %.7f, one rank %.7f", name, s + 1,
              loss[s], ref[s]);
  cr_expect(ref[STEPS - 1] < ref[0], "the MoE loss falls: %.4f -> %.4f", ref[0], ref[STEPS - 1]);
}
#define MOE_TOP2 "--experts 4 --topk 2 --capacity-factor 1.0"
Test(trainer_layouts, moe_dp2_ep2, .timeout = 240) { expect_same_moe("dp2 ep2", 2, MOE_TOP2, "--dp 2 --ep 2", 2); }
Test(trainer_layouts, moe_dp4_ep2_top2, .timeout = 240) {
  expect_same_moe("dp4 ep2 dropless", 4, "--experts 4 --topk 2", "--dp 4 --ep 2", 4);
}
Test(trainer_layouts, moe_dp4_ep4_top1, .timeout = 240) {
  expect_same_moe("dp4 ep4 top-1", 4, "--experts 4 --topk 1 --capacity-factor 1.0", "--dp 4 --ep 4 --zero 1", 4);
}
Test(trainer_layouts, moe_tp2_dp2_ep2, .timeout = 240) {
  expect_same_moe("tp2 dp2 ep2", 4, MOE_TOP2, "--tp 2 --dp 2 --ep 2", 2);
}
Test(trainer_layouts, moe_pp2_dp2_ep2_zero3, .timeout = 240) {
  expect_same_moe("pp2 dp2 ep2 zero3", 4, MOE_TOP2, "--pp 2 --dp 2 --ep 2 --zero 3", 2);
}
// Context parallel ranks route one micro-batch's tokens together: the capacity
// (0.5 here, so experts drop) and the load-balancing loss are the whole call's.
#define MOE_TOP2_DROPS "--experts 4 --topk 2 --capacity-factor 0.5"
Test(trainer_layouts, moe_cp2_dp2_ep2, .timeout = 240) {
  expect_same_moe("cp2 dp2 ep2", 4, MOE_TOP2_DROPS, "--cp 2 --dp 2 --ep 2", 2);
}
Test(trainer_layouts, moe_tp2_cp2, .timeout = 240) { expect_same_moe("tp2 cp2", 4, MOE_TOP2_DROPS, "--tp 2 --cp 2", 1); }
Test(trainer_layouts, moe_every_2nd_block_pp2_gpipe, .timeout = 240) {
  expect_same_moe("moe-every 2, pp2 dp2 ep2 gpipe", 4, "--experts 4 --topk 2 --moe-every 2",
                  "--pp 2 --dp 2 --ep 2 --schedule gpipe", 2);
}
// Sequence parallelism: the MoE MLP gathers the TP group's rows, routes all
// of them on every TP rank, and keeps its own rows of the output.
Test(trainer_layouts, moe_tp2_sp_dp2_ep2, .timeout = 240) {
  expect_same_moe("tp2 sp dp2 ep2", 4, MOE_TOP2, "--tp 2 --sp 1 --dp 2 --ep 2", 2);
}
// The interleaved schedule (two chunks of one block per stage): the experts'
// engine holds the MoE blocks of both chunks; with --moe-every 2 stage 0
// holds blocks 0 and 2 (both MoE) and stage 1 none.
Test(trainer_layouts, moe_pp2_interleaved_dp2_ep2, .timeout = 240) {
  expect_same_moe("pp2 interleaved dp2 ep2", 4, MOE_TOP2, "--pp 2 --schedule interleaved --chunks 2 --dp 2 --ep 2",
                  2);
}
Test(trainer_layouts, moe_tp2_sp_pp2_interleaved_dp2_ep2_zero3, .timeout = 240) {
  expect_same_moe("tp2 sp pp2 interleaved dp2 ep2 zero3 recompute", 8, MOE_TOP2,
                  "--tp 2 --sp 1 --pp 2 --schedule interleaved --chunks 2 --dp 2 --ep 2 --zero 3 --recompute 1", 2);
}
Test(trainer_layouts, moe_every_2nd_block_pp2_interleaved_zero1, .timeout = 240) {
  expect_same_moe("moe-every 2, pp2 interleaved dp2 ep2 zero1", 4, "--experts 4 --topk 2 --moe-every 2",
                  "--pp 2 --schedule interleaved --chunks 2 --dp 2 --ep 2 --zero 1", 2);
}

// Context parallelism with the gathered sequence shards and with the interleaved pipeline.
Test(trainer_layouts, moe_tp2_sp_cp2, .timeout = 240) {
  expect_same_moe("tp2 sp cp2", 4, MOE_TOP2_DROPS, "--tp 2 --sp 1 --cp 2", 1);
}
Test(trainer_layouts, moe_cp2_pp2_interleaved, .timeout = 240) {
  expect_same_moe("cp2 pp2 interleaved", 4, MOE_TOP2_DROPS, "--cp 2 --pp 2 --schedule interleaved --chunks 2", 1);
}

// Layouts MoE cannot run are refused at start, naming the flag and numbers.
Test(trainer_layouts, moe_refusals, .timeout = 60) {
  struct {
    const char *flags, *says;
  } cases[] = {
      {"--ep 2", "--ep 2 needs --experts"},
      {"--experts 4 --topk 5", "--topk 5 is above --experts 4"},
      {"--experts 4 --dp 2 --ep 4", "--ep 4 does not divide --dp 2"},
      {"--experts 6 --dp 4 --ep 4", "--ep 4 does not divide --experts 6"},
      {"--experts 4 --capacity-factor -1", "--capacity-factor -1"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "%s/bin/weft-train --steps 1 %s 2>&1 >/dev/null | grep -qF -- '%s'", build_dir(),
             cases[i].flags, cases[i].says);
    cr_expect_eq(system(cmd), 0, "'%s' does not say '%s'", cases[i].flags, cases[i].says);
    snprintf(cmd, sizeof(cmd), "%s/bin/weft-train --steps 1 %s >/dev/null 2>&1", build_dir(), cases[i].flags);
    int status = system(cmd);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 2, "'%s' exited with status %d", cases[i].flags, status);
  }
}

// Launched the way torchrun and Slurm launch ranks (environment variables
// and a rendezvous at MASTER_ADDR:MASTER_PORT) instead of weftrun: DP2
// learns like one rank.
static void env_launched(const char *rank_var, const char *size_var) {
  int port = weft_test_free_port() - 1;  // + WEFT_MASTER_PORT_OFFSET (1): the free one
  cr_assert(port > 0);
  char csv[] = "/tmp/weft-train-env-XXXXXX";
  int fd = mkstemp(csv);
  cr_assert(fd >= 0);
  close(fd);
  char cmd[2048];
  snprintf(cmd, sizeof(cmd),
           "export NCCL_SOCKET_IFNAME=lo MASTER_ADDR=127.0.0.1 MASTER_PORT=%d %s=2; "
           "flags='--dp 2 --steps %d --batch %d --grad-accum %d --warmup 0 --lr 3e-3 --clip 0.5 --eval-every 0 "
           "--eval-batches 1 --eval-problems 8 --seq 16 --layers 4 --hidden 32 --heads 8 --ffn 64'; "
           "%s=1 timeout 120 %s/bin/weft-train $flags >/dev/null 2>&1 & "
           "%s=0 timeout 120 %s/bin/weft-train $flags --log %s >/dev/null 2>&1; a=$?; "
           "[ $a -eq 0 ] || kill $! 2>/dev/null; wait $!; b=$?; "
           "[ $a -eq 0 ] && [ $b -eq 0 ]",
           port, size_var, STEPS, BATCH, GLOBAL_MICRO / 2, rank_var, build_dir(), rank_var, build_dir(), csv);
  cr_assert_eq(system(cmd), 0, "failed: %s", cmd);
  FILE *f = fopen(csv, "r");
  cr_assert_not_null(f);
  const double *ref = reference();
  char line[256];
  int n = 0;
  while (fgets(line, sizeof(line), f) != NULL && n < STEPS) {
    double l;
    if (sscanf(line, "%*d,%lf,", &l) == 1 && strstr(line, ",,,,,,") == NULL) {
      cr_expect(fabs(l - ref[n]) <= 1e-5 * fabs(ref[n]), "%s step %d: %.7f, one rank %.7f", rank_var, n + 1, l, ref[n]);
      n++;
    }
  }
  fclose(f);
  unlink(csv);
  cr_expect_eq(n, STEPS);
}
Test(trainer_layouts, torchrun_environment, .timeout = 240) {
  env_launched("RANK", "WORLD_SIZE");
}
Test(trainer_layouts, slurm_environment, .timeout = 240) {
  env_launched("SLURM_PROCID", "SLURM_NTASKS");
}

// Bad input is refused with a message and exit code 2, never a crash.
Test(trainer_layouts, bad_input, .timeout = 60) {
  char cmd[512];
  const char *cases[] = {"--zero 7", "--steps x", "--bogus 1", "--data /nonexistent/file.txt", "--pp 2",
                         "--heads 3", "--lr", "--pp 3", "--schedule zigzag", "--recompute 2", "--cp 3", "--cp 0"};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    snprintf(cmd, sizeof(cmd), "%s/bin/weft-train --steps 1 %s >/dev/null 2>&1", build_dir(), cases[i]);
    int status = system(cmd);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 2, "'%s' exited with status %d", cases[i], status);
  }
  snprintf(cmd, sizeof(cmd), "NCCL_SOCKET_IFNAME=lo %s/bin/weftrun -n 2 %s/bin/weft-train --dp 3 --steps 1 >/dev/null 2>&1",
           build_dir(), build_dir());
  cr_expect_neq(system(cmd), 0, "a layout that does not match the ranks fails");
}

// --sp and the interleaved schedule refuse what cannot work, naming the flags and the numbers.
Test(trainer_layouts, bad_sp_and_interleaved_flags, .timeout = 60) {
  struct { const char *flags, *says; } cases[] = {
      {"--sp 1", "--tp is 1"},
      {"--tp 2 --sp 1 --seq 15 --batch 1", "15 rows (--seq 15 x --batch 1) do not split over --tp 2"},
      {"--pp 2 --schedule interleaved --chunks 3", "--chunks 3 does not divide the 2 layers per stage"},
      {"--pp 2 --schedule interleaved --chunks 2 --micro-batches 3", "--micro-batches 3 is not a multiple of --pp 2"},
      {"--pp 3 --schedule interleaved --chunks 2", "--layers 4 does not split into --pp 3"},
      {"--schedule interleaved --chunks 2", "--pp is 1"},
      {"--chunks 2", "--chunks 2 needs --schedule interleaved"},
      {"--schedule zigzag", "expected 1f1b, gpipe or interleaved"},
  };
  char out[] = "/tmp/weft-train-bad-XXXXXX";
  int fd = mkstemp(out);
  cr_assert(fd >= 0);
  close(fd);
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char cmd[512], text[4096] = "";
    snprintf(cmd, sizeof(cmd), "%s/bin/weft-train --steps 1 --layers 4 %s >%s 2>&1", build_dir(), cases[i].flags, out);
    int status = system(cmd);
    FILE *f = fopen(out, "r");
    cr_assert_not_null(f);
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    text[n] = '\0';
    fclose(f);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 2, "'%s' exited with status %d", cases[i].flags, status);
    cr_expect(strstr(text, cases[i].says) != NULL, "'%s' should say '%s', said: %s", cases[i].flags, cases[i].says, text);
  }
  unlink(out);
}
