/*
 * test_parallel_math.c — the parallel layer's arithmetic, no ranks:
 * ZeRO memory accounting against the paper's formulas (and the table for
 * Ψ = 1e6, N = 1, 2, 4, 8), padding of uneven shards, pipeline schedules
 * (every micro-batch once forward then backward, 1F1B's in-flight bound),
 * stage balancing and the simulated bubble against (P-1)/M, 16-bit
 * conversion, the vectorisable exp and GELU against libm, and rejection
 * of bad arguments.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>

#include "dp.h"
#include "par_math.h"
#include "par_util.h"
#include "pp.h"

static const char *stage_name[] = {"DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3"};

Test(parallel_math, memory_equals_paper_formulas_when_shards_are_even, .timeout = 10) {
  size_t sizes[3] = {400000, 520000, 80000};  // Ψ = 1e6, every layer divisible by 8
  for (int prec = WEFT_DP_FP32; prec <= WEFT_DP_FP16; prec++)
    for (int stage = 0; stage <= 3; stage++)
      for (int n = 1; n <= 8; n *= 2) {
        weft_dp_memory_t m;
        cr_assert_eq(weft_dp_memory_model(stage, prec, n, 3, sizes, &m), ncclSuccess);
        double psi = 1e6, want;
        if (prec == WEFT_DP_FP32)
          want = stage == 0 ? 16 * psi : stage == 1 ? 8 * psi + 8 * psi / n : stage == 2 ? 4 * psi + 12 * psi / n : 16 * psi / n;
        else
          want = stage == 0 ? 16 * psi : stage == 1 ? 4 * psi + 12 * psi / n : stage == 2 ? 2 * psi + 14 * psi / n : 16 * psi / n;
        cr_expect_eq((double)m.total_bytes, want, "%s prec %d N=%d: %zu bytes, formula %.0f", stage_name[stage], prec,
                     n, m.total_bytes, want);
        cr_expect_eq(m.paper_bytes, want);
        cr_expect_eq(m.padding_bytes, 0.0);
        cr_expect_eq(m.param_bytes + m.grad_bytes + m.optim_bytes, m.total_bytes);
      }
}

Test(parallel_math, memory_table_for_one_million_parameters, .timeout = 10) {
  size_t psi = 1000000;
  printf("\nPer-rank model-state bytes for Psi = 1e6 (mixed precision: 2+2+12 bytes/param; fp32: 4+4+8)\n");
  printf("%-8s %-6s %3s %14s %14s %14s %14s\n", "stage", "prec", "N", "params", "grads", "optimizer", "total");
  for (int prec = WEFT_DP_FP32; prec <= WEFT_DP_BF16; prec++)
    for (int stage = 0; stage <= 3; stage++)
      for (int n = 1; n <= 8; n *= 2) {
        weft_dp_memory_t m;
        cr_assert_eq(weft_dp_memory_model(stage, prec, n, 1, &psi, &m), ncclSuccess);
        printf("%-8s %-6s %3d %14zu %14zu %14zu %14zu\n", stage_name[stage], prec ? "mixed" : "fp32", n, m.param_bytes,
               m.grad_bytes, m.optim_bytes, m.total_bytes);
        cr_expect_eq((double)m.total_bytes, weft_dp_paper_bytes(stage, prec, 1e6, n));
      }
  weft_dp_memory_t m;
  cr_assert_eq(weft_dp_memory_model(WEFT_DP_ZERO3, WEFT_DP_BF16, 8, 1, &psi, &m), ncclSuccess);
  cr_expect_eq(m.total_bytes, (size_t)2000000, "ZeRO-3 mixed on 8 ranks: 16Ψ/8 = 2 MB");
}

Test(parallel_math, uneven_layers_add_exactly_their_padding, .timeout = 10) {
  size_t sizes[3] = {10, 7, 1};  // N = 4: shards 3, 2, 1 -> padded 12 + 8 + 4 = 24
  weft_dp_memory_t m;
  cr_assert_eq(weft_dp_memory_model(WEFT_DP_ZERO2, WEFT_DP_BF16, 4, 3, sizes, &m), ncclSuccess);
  cr_expect_eq(m.psi, (size_t)18);
  cr_expect_eq(m.psi_padded, (size_t)24);
  cr_expect_eq(m.param_bytes, (size_t)(2 * 24));
  cr_expect_eq(m.grad_bytes, (size_t)(2 * 6));
  cr_expect_eq(m.optim_bytes, (size_t)(12 * 6));
  cr_expect_eq((double)m.total_bytes, weft_dp_paper_bytes(WEFT_DP_ZERO2, WEFT_DP_BF16, 24, 4));
  cr_expect_float_eq(m.padding_bytes, (double)m.total_bytes - (2 * 18 + 14 * 18 / 4.0), 1e-9);
  cr_expect_gt(m.padding_bytes, 0);
}

Test(parallel_math, memory_model_rejects_bad_arguments, .timeout = 10) {
  size_t sizes[2] = {5, 0};
  weft_dp_memory_t m;
  cr_expect_eq(weft_dp_memory_model(WEFT_DP_ZERO1, WEFT_DP_FP32, 2, 2, sizes, &m), ncclInvalidArgument);
  cr_expect_eq(weft_dp_memory_model(WEFT_DP_ZERO1, WEFT_DP_FP32, 0, 1, sizes, &m), ncclInvalidArgument);
  cr_expect_eq(weft_dp_memory_model((weft_dp_stage_t)4, WEFT_DP_FP32, 2, 1, sizes, &m), ncclInvalidArgument);
  cr_expect_eq(weft_dp_memory_model(WEFT_DP_ZERO1, (weft_dp_precision_t)9, 2, 1, sizes, &m), ncclInvalidArgument);
  cr_expect_eq(weft_dp_memory_model(WEFT_DP_ZERO1, WEFT_DP_FP32, 2, 1, sizes, NULL), ncclInvalidArgument);
}

// Every micro-batch appears once forward and once backward, backward after
// forward; returns the most micro-batches in flight at once.
static int check_schedule(weft_pp_kind_t kind, int p, int s, int m) {
  weft_pp_op_t ops[64];
  cr_assert_eq(weft_pp_schedule(kind, p, s, m, ops), ncclSuccess);
  int fwd[32] = {0}, bwd[32] = {0}, live = 0, most = 0;
  for (int k = 0; k < 2 * m; k++) {
    int mb = ops[k].micro;
    cr_assert(mb >= 0 && mb < m);
    if (!ops[k].backward) {
      cr_expect_eq(fwd[mb]++, 0);
      live++;
    } else {
      cr_expect(fwd[mb] == 1 && bwd[mb] == 0, "micro %d backward before its forward", mb);
      bwd[mb]++;
      live--;
    }
    most = live > most ? live : most;
  }
  return most;
}

Test(parallel_math, schedules_are_complete_and_1f1b_bounds_memory, .timeout = 10) {
  for (int p = 1; p <= 4; p++)
    for (int m = 1; m <= 8; m++)
      for (int s = 0; s < p; s++) {
        cr_expect_eq(check_schedule(WEFT_PP_GPIPE, p, s, m), m);
        int bound = p - s < m ? p - s : m;
        cr_expect_eq(check_schedule(WEFT_PP_1F1B, p, s, m), bound, "1F1B p=%d s=%d m=%d", p, s, m);
      }
  weft_pp_op_t ops[4];
  cr_expect_eq(weft_pp_schedule(WEFT_PP_1F1B, 2, 2, 2, ops), ncclInvalidArgument);
  cr_expect_eq(weft_pp_schedule(WEFT_PP_1F1B, 2, 0, 0, ops), ncclInvalidArgument);
  cr_expect_eq(weft_pp_schedule((weft_pp_kind_t)7, 2, 0, 2, ops), ncclInvalidArgument);
}

Test(parallel_math, simulated_bubble_is_p_minus_1_over_m, .timeout = 10) {
  printf("\nPipeline bubble (idle/busy), simulated with tb = 2 tf:\n");
  for (int kind = WEFT_PP_GPIPE; kind <= WEFT_PP_1F1B; kind++)
    for (int p = 1; p <= 8; p *= 2)
      for (int m = 1; m <= 16; m *= 2) {
        double b = -1;
        cr_assert_eq(weft_pp_simulate(kind, p, m, 1.0, 2.0, &b), ncclSuccess);
        double want = (double)(p - 1) / m;
        cr_expect(fabs(b - want) < 1e-12, "%s P=%d M=%d: bubble %g, (P-1)/M = %g", kind ? "1F1B" : "GPipe", p, m, b, want);
        if (p == 4) printf("  %-5s P=%d M=%2d  bubble %.4f  (P-1)/M %.4f\n", kind ? "1F1B" : "GPipe", p, m, b, want);
      }
}

Test(parallel_math, balance_minimises_the_slowest_stage, .timeout = 10) {
  double cost[6] = {1, 1, 1, 1, 1, 1}, skew[5] = {5, 1, 1, 1, 4};
  int first[5];
  cr_assert_eq(weft_pp_balance(cost, 6, 3, first), ncclSuccess);
  for (int s = 0; s <= 3; s++) cr_expect_eq(first[s], 2 * s);
  cr_assert_eq(weft_pp_balance(skew, 5, 2, first), ncclSuccess);  // {5,1} | {1,1,4} -> max 6
  cr_expect(first[0] == 0 && first[2] == 5);
  double a = 0, b = 0;
  for (int l = 0; l < 5; l++) *(l < first[1] ? &a : &b) += skew[l];
  cr_expect_eq(a > b ? a : b, 6.0);
  cr_expect_eq(weft_pp_balance(cost, 2, 3, first), ncclInvalidArgument);
  cost[1] = 0;
  cr_expect_eq(weft_pp_balance(cost, 6, 2, first), ncclInvalidArgument);
}

Test(parallel_math, sixteen_bit_conversion_rounds_to_nearest_even, .timeout = 10) {
  cr_expect_eq(weft_par_to_bf16(1.0f), 0x3f80);
  cr_expect_eq(weft_par_to_fp16(1.0f), 0x3c00);
  cr_expect_eq(weft_par_to_fp16(65504.0f), 0x7bff);
  cr_expect_eq(weft_par_to_fp16(1e6f), 0x7c00);
  cr_expect_eq(weft_par_to_fp16(5.9604645e-08f), 0x0001);
  cr_expect_eq(weft_par_from_bf16(weft_par_to_bf16(3.140625f)), 3.140625f);
  cr_expect_eq(weft_par_from_fp16(weft_par_to_fp16(-2.5f)), -2.5f);
  // 1 + 2^-8 is halfway between two bf16 values: ties to the even one (1.0).
  cr_expect_eq(weft_par_to_bf16(1.00390625f), 0x3f80);
  cr_expect_eq(weft_par_to_bf16(1.01171875f), 0x3f82);  // 1 + 3*2^-8: ties up to even
}

// weft_par_expf: within 4 ulp of exp over its whole range, and never
// subnormal or zero at the clamps; GELU and its derivative within 1e-6
// (relative to max(1, |x|)) of the tanh formula in double; the array
// versions (one clone per CPU level) give the inline function's bits.
Test(parallel_math, exp_and_gelu_match_libm, .timeout = 10) {
  double worst = 0;
  for (float x = -86.0f; x <= 80.0f; x += 0.00731f) {
    double want = exp((double)x), got = weft_par_expf(x);
    worst = fmax(worst, fabs(got - want) / want);
  }
  cr_expect_lt(worst, 4 * 5.97e-8, "exp: worst relative error %.3g", worst);
  cr_expect(isnormal(weft_par_expf(-1000.0f)) && isnormal(weft_par_expf(1000.0f)));
  cr_expect(isnormal(1.0f / (1.0f + weft_par_expf(1000.0f))));
  enum { N = 4001 };
  static float x[N], y[N], dy[N];
  for (int i = 0; i < N; i++) x[i] = -12.0f + 24.0f * (float)i / (N - 1), dy[i] = 1.0f + (float)i / N;
  weft_par_gelu_rows(x, y, N);
  for (int i = 0; i < N; i++) {
    double v = x[i], u = 0.7978845608028654 * (v + 0.044715 * v * v * v), t = tanh(u);
    double gelu = 0.5 * v * (1 + t), grad = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * v * v);
    double scale = fmax(1.0, fabs(v));
    cr_expect_leq(fabs(weft_par_gelu(x[i]) - gelu), 1e-6 * scale, "gelu(%g)", v);
    cr_expect_leq(fabs(weft_par_gelu_grad(x[i]) - grad), 1e-6 * scale, "gelu'(%g)", v);
    cr_expect_eq(y[i], weft_par_gelu(x[i]), "gelu_rows(%g) differs from gelu", v);
  }
  float want[N];
  for (int i = 0; i < N; i++) want[i] = dy[i] * weft_par_gelu_grad(x[i]);
  weft_par_gelu_grad_mul(x, dy, N);
  cr_expect_arr_eq(dy, want, sizeof(want));
  for (int i = 0; i < N; i++) y[i] = x[i], want[i] = weft_par_expf(x[i] - 3.0f);
  weft_par_exp_shift(y, N, 3.0f);
  cr_expect_arr_eq(y, want, sizeof(want));
}
