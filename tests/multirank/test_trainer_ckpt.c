/*
 * test_trainer_ckpt.c — weft-train's checkpoints and loss curve: a run
 * split by --stop-after / --save / --resume prints exactly the losses of
 * the run it was cut from (same layout, pipeline stages included:
 * bitwise, compared as the CSV's text); a checkpoint written in one layout
 * (DP2 ZeRO-1, PP2 x DP2 ZeRO-3, TP2, CP2 x DP2 ZeRO-3) resumes in another
 * (TP2, one rank, TP2 x PP2, CP4) with the one-rank losses to 1e-5
 * relative, and CP2 splits bitwise like the others; the same with
 * sequence parallelism and the interleaved schedule (TP2 SP x PP2
 * interleaved bitwise; PP2 interleaved x DP2 -> TP2 SP x DP2 ZeRO-3, TP2
 * SP -> PP2 interleaved), and a mixture-of-experts one under another EP
 * (DP2 EP2 bitwise; DP4 EP4 -> TP2 x DP2, PP2 x DP2 EP2 -> one rank,
 * CP2 x DP2 EP2 -> TP2 x CP2; PP2 interleaved x DP2 EP2 bitwise and ->
 * TP2 SP); bad
 * files exit 2 with a message;
 * --plot writes a PNG, or says gnuplot is missing and still succeeds.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { STEPS = 12, HALF = 6, MAXL = 256 };

static const char *build_dir(void) {
  const char *b = getenv("WEFT_BUILD_DIR");
  return b != NULL ? b : "build";
}

static char dir[64], bin[PATH_MAX]; // a scratch folder; the absolute build/bin

static void setup(void) {
  snprintf(dir, sizeof(dir), "/tmp/weft-ckpt-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  char rel[PATH_MAX];
  snprintf(rel, sizeof(rel), "%s/bin", build_dir());
  cr_assert_not_null(realpath(rel, bin), "no %s", rel);
}

static void teardown(void) {
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  cr_expect_eq(system(cmd), 0);
}

// Runs weft-train in the scratch folder under weftrun; returns its exit status.
static int train(int ranks, int grad_accum, const char *flags) {
  char cmd[2 * PATH_MAX + 1024];
  snprintf(cmd, sizeof(cmd),
           "cd %s && NCCL_SOCKET_IFNAME=lo timeout 60 %s/weftrun -n %d "
           "%s/weft-train --steps %d --batch 2 "
           "--grad-accum %d --warmup 0 --lr 3e-3 --clip 0.5 --eval-every 0 "
           "--eval-batches 1 --eval-problems 8 "
           "--seq 16 --hidden 32 --heads 4 --ffn 64 %s >>out.txt 2>&1",
           dir, bin, ranks, bin, STEPS, grad_accum, flags);
  int status = system(cmd);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The step lines of a CSV: "step,loss,lr,grad_norm" as text, and the loss.
static int read_steps(const char *name, char lines[][MAXL], double *loss) {
  char path[128], line[MAXL];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "no %s", path);
  int n = 0;
  while (fgets(line, sizeof(line), f) != NULL && n < STEPS) {
    if (strstr(line, ",,,,,,") != NULL || strncmp(line, "step", 4) == 0)
      continue;
    char *cut = line;
    for (int k = 0; k < 4 && cut != NULL; k++)
      cut = strchr(cut + 1, ',');
    if (cut != NULL)
      *cut = '\0';
    snprintf(lines[n], MAXL, "%s", line);
    sscanf(line, "%*d,%lf", &loss[n]);
    n++;
  }
  fclose(f);
  return n;
}

// Straight run vs. HALF steps + save + resume, in one layout: the same text.
static void split_equals_straight(int ranks, int accum, const char *layout) {
  char flags[256], a[STEPS][MAXL], b[STEPS][MAXL];
  double la[STEPS], lb[STEPS];
  snprintf(flags, sizeof(flags), "%s --log straight.csv", layout);
  cr_assert_eq(train(ranks, accum, flags), 0);
  snprintf(flags, sizeof(flags),
           "%s --stop-after %d --save ck.bin --log first.csv", layout, HALF);
  cr_assert_eq(train(ranks, accum, flags), 0);
  snprintf(flags, sizeof(flags), "%s --resume ck.bin --log second.csv", layout);
  cr_assert_eq(train(ranks, accum, flags), 0);
  cr_assert_eq(read_steps("straight.csv", a, la), STEPS);
  cr_assert_eq(read_steps("first.csv", b, lb), HALF);
  cr_assert_eq(read_steps("second.csv", b + HALF, lb + HALF), STEPS - HALF);
  for (int s = 0; s < STEPS; s++)
    cr_expect_str_eq(b[s], a[s], "%s step %d", layout, s + 1);
}

TestSuite(trainer_ckpt, .init = setup, .fini = teardown, .timeout = 90);

Test(trainer_ckpt, one_rank_bitwise) { split_equals_straight(1, 4, ""); }
Test(trainer_ckpt, dp2_zero3_bitwise) {
  split_equals_straight(2, 2, "--dp 2 --zero 3");
}
Test(trainer_ckpt, save_every) {
  cr_assert_eq(train(1, 4, "--stop-after 5 --save ck.bin --save-every 2"), 0);
  char cmd[256];
  snprintf(cmd, sizeof(cmd),
           "grep -c '^saved ck.bin after step [245]$' %s/out.txt | grep -qx 3",
           dir);
  cr_expect_eq(system(cmd), 0, "saves after steps 2, 4 and 5 (the last)");
  snprintf(cmd, sizeof(cmd), "ls %s | grep -q tmp", dir);
  cr_expect_neq(system(cmd), 0, "a temporary file was left behind");
  cr_expect_eq(train(1, 4, "--resume ck.bin --stop-after 6"), 0);
}

// Saved in one layout after HALF steps, resumed in another: the one-rank
// losses (of the model `model` flags describe) to 1e-5 relative.
static void resumes_like_one_rank_of(const char *model, int save_ranks, int save_accum, const char *save,
                                     int ranks, int accum, const char *layout) {
  char a[STEPS][MAXL], b[STEPS][MAXL], flags[512];
  double la[STEPS], lb[STEPS];
  snprintf(flags, sizeof(flags), "%s --log straight.csv", model);
  cr_assert_eq(train(1, 4, flags), 0);
  snprintf(flags, sizeof(flags), "%s %s --stop-after %d --save ck.bin", model, save, HALF);
  cr_assert_eq(train(save_ranks, save_accum, flags), 0);
  snprintf(flags, sizeof(flags), "%s %s --resume ck.bin --log resumed.csv", model, layout);
  cr_assert_eq(train(ranks, accum, flags), 0);
  cr_assert_eq(read_steps("straight.csv", a, la), STEPS);
  cr_assert_eq(read_steps("resumed.csv", b, lb), STEPS - HALF);
  for (int s = 0; s < STEPS - HALF; s++)
    cr_expect(fabs(lb[s] - la[HALF + s]) <= 1e-5 * fabs(la[HALF + s]),
              "'%s' -> '%s' step %d: %.6f, one rank %.6f", save, layout,
              HALF + s + 1, lb[s], la[HALF + s]);
}

static void resumes_like_one_rank(int save_ranks, int save_accum, const char *save,
                                  int ranks, int accum, const char *layout) {
  resumes_like_one_rank_of("", save_ranks, save_accum, save, ranks, accum, layout);
}

Test(trainer_ckpt, dp2_to_tp2) {
  resumes_like_one_rank(2, 2, "--dp 2 --zero 1", 2, 4, "--tp 2");
}
// Pipeline stages save their own layers; the file holds the whole model.
Test(trainer_ckpt, pp2_dp2_bitwise) {
  split_equals_straight(4, 2, "--pp 2 --dp 2 --zero 1");
}
Test(trainer_ckpt, pp2_dp2_to_one_rank) {
  resumes_like_one_rank(4, 2, "--pp 2 --dp 2 --zero 3", 1, 4, "");
}
Test(trainer_ckpt, tp2_to_tp2_pp2) {
  resumes_like_one_rank(2, 4, "--tp 2", 4, 4, "--tp 2 --pp 2");
}
// Context parallel ranks share the parameters; the file is the same model.
Test(trainer_ckpt, cp2_dp2_to_cp4) {
  resumes_like_one_rank(4, 2, "--cp 2 --dp 2 --zero 3", 4, 4, "--cp 4");
}
Test(trainer_ckpt, cp2_bitwise) { split_equals_straight(2, 4, "--cp 2"); }

// Sequence parallelism and the interleaved schedule, on a model of four
// layers (two chunks of one layer per stage): bitwise in their own layout,
// and across layouts with the one-rank losses.
static void resumes_four_layers_like_one_rank(int save_ranks, int save_accum, const char *save, int ranks, int accum,
                                              const char *layout) {
  char a[STEPS][MAXL], b[STEPS][MAXL], flags[256];
  double la[STEPS], lb[STEPS];
  cr_assert_eq(train(1, 4, "--layers 4 --log straight.csv"), 0);
  snprintf(flags, sizeof(flags), "--layers 4 %s --stop-after %d --save ck.bin", save, HALF);
  cr_assert_eq(train(save_ranks, save_accum, flags), 0);
  snprintf(flags, sizeof(flags), "--layers 4 %s --resume ck.bin --log resumed.csv", layout);
  cr_assert_eq(train(ranks, accum, flags), 0);
  cr_assert_eq(read_steps("straight.csv", a, la), STEPS);
  cr_assert_eq(read_steps("resumed.csv", b, lb), STEPS - HALF);
  for (int s = 0; s < STEPS - HALF; s++)
    cr_expect(fabs(lb[s] - la[HALF + s]) <= 1e-5 * fabs(la[HALF + s]), "'%s' -> '%s' step %d: %.6f, one rank %.6f",
              save, layout, HALF + s + 1, lb[s], la[HALF + s]);
}
Test(trainer_ckpt, tp2_sp_pp2_interleaved_bitwise) {
  split_equals_straight(4, 2, "--layers 4 --tp 2 --sp 1 --pp 2 --schedule interleaved --chunks 2");
}
Test(trainer_ckpt, pp2_interleaved_dp2_to_tp2_sp_dp2) {
  resumes_four_layers_like_one_rank(4, 2, "--pp 2 --schedule interleaved --chunks 2 --dp 2 --zero 1", 4, 2,
                                    "--tp 2 --sp 1 --dp 2 --zero 3");
}
Test(trainer_ckpt, tp2_sp_to_pp2_interleaved) {
  resumes_four_layers_like_one_rank(2, 4, "--tp 2 --sp 1", 2, 4, "--pp 2 --schedule interleaved --chunks 2");
}

// Mixture of experts: the file holds every expert whole, so a run resumes
// under another EP (and TP, PP, ZeRO) with the one-rank MoE losses.
#define MOE "--experts 4 --topk 2 --capacity-factor 1.25"
Test(trainer_ckpt, moe_dp2_ep2_bitwise) { split_equals_straight(2, 2, "--dp 2 --ep 2 " MOE); }
Test(trainer_ckpt, moe_dp4_ep4_zero3_to_tp2_dp2) {
  resumes_like_one_rank_of(MOE, 4, 1, "--dp 4 --ep 4 --zero 3", 4, 2, "--tp 2 --dp 2 --zero 1");
}
Test(trainer_ckpt, moe_pp2_dp2_ep2_to_one_rank) {
  resumes_like_one_rank_of(MOE, 4, 2, "--pp 2 --dp 2 --ep 2", 1, 4, "");
}
Test(trainer_ckpt, moe_cp2_dp2_ep2_to_cp2_tp2) {
  resumes_like_one_rank_of(MOE, 4, 2, "--cp 2 --dp 2 --ep 2 --zero 1", 4, 4, "--cp 2 --tp 2");
}
// Interleaved, the experts of both chunks a stage holds: bitwise in their
// own layout, and resumed under TP2 SP with the one-rank losses.
Test(trainer_ckpt, moe_pp2_interleaved_dp2_ep2_bitwise) {
  split_equals_straight(4, 2, "--layers 4 --pp 2 --schedule interleaved --chunks 2 --dp 2 --ep 2 " MOE);
}
Test(trainer_ckpt, moe_pp2_interleaved_dp2_ep2_to_tp2_sp) {
  resumes_like_one_rank_of("--layers 4 " MOE, 4, 2, "--pp 2 --schedule interleaved --chunks 2 --dp 2 --ep 2 --zero 1",
                           2, 4, "--tp 2 --sp 1");
}

static void write_file(const char *name, const void *data, size_t n) {
  char path[128];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  if (n > 0)
    cr_assert_eq(fwrite(data, 1, n, f), n);
  fclose(f);
}

// Bad checkpoints exit 2 with a message, never a crash or a hang.
Test(trainer_ckpt, bad_files) {
  cr_assert_eq(train(1, 4, "--stop-after 2 --save ck.bin"), 0);
  char cmd[256];
  snprintf(cmd, sizeof(cmd), "head -c 500 %s/ck.bin > %s/trunc.bin", dir, dir);
  cr_assert_eq(system(cmd), 0);
  char junk[200];
  memset(junk, 'x', sizeof(junk));
  write_file("junk.bin", junk, sizeof(junk));
  write_file("empty.bin", NULL, 0);
  const char *cases[] = {"--resume trunc.bin",
                         "--resume junk.bin",
                         "--resume empty.bin",
                         "--resume missing.bin",
                         "--resume ck.bin --hidden 64",
                         "--resume ck.bin --experts 4",
                         "--resume ck.bin --steps 2",
                         "--save-every 3"};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    cr_expect_eq(train(1, 4, cases[i]), 2, "'%s' should exit 2", cases[i]);
  cr_expect_eq(train(2, 2, "--dp 2 --resume ck.bin --layers 3"), 2,
               "a shape mismatch on 2 ranks exits 2");
}

// --plot: a PNG with gnuplot; without it, a note and success.
Test(trainer_ckpt, plot) {
  if (system("command -v gnuplot >/dev/null 2>&1") == 0) {
    cr_assert_eq(train(1, 4, "--plot loss.png --eval-every 4"), 0);
    char path[128];
    unsigned char head[8] = {0};
    snprintf(path, sizeof(path), "%s/loss.png", dir);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "no PNG written");
    cr_expect_eq(fread(head, 1, 8, f), 8);
    fclose(f);
    cr_expect_eq(memcmp(head, "\x89PNG", 4), 0, "not a PNG");
  }
  char cmd[PATH_MAX + 512];
  snprintf(cmd, sizeof(cmd),
           "cd %s && PATH=/nonexistent %s/weft-train --steps 2 --seq 16 "
           "--hidden 32 --plot none.png >nog.txt 2>&1 && "
           "grep -q 'gnuplot is not installed' nog.txt",
           dir, bin);
  cr_expect_eq(system(cmd), 0, "without gnuplot: a note, and the run succeeds");
}
