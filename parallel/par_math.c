/*
 * par_math.c — the element-wise loops of the layers (GELU forward and
 * backward, softmax's exponentials), compiled once per x86-64 level
 * (AVX-512, AVX2, baseline) and picked at load time through an ifunc, as
 * OpenBLAS and PyTorch pick their kernels. Each clone computes the same
 * function of each element (par_math.h); only the vector width differs.
 */
#include "par_math.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define WEFT_PAR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define WEFT_PAR_CLONES
#endif

WEFT_PAR_CLONES
void weft_par_gelu_rows(const float *restrict x, float *restrict y, size_t n) {
  for (size_t i = 0; i < n; i++) y[i] = weft_par_gelu(x[i]);
}

WEFT_PAR_CLONES
void weft_par_gelu_grad_mul(const float *restrict x, float *restrict dy, size_t n) {
  for (size_t i = 0; i < n; i++) dy[i] *= weft_par_gelu_grad(x[i]);
}

WEFT_PAR_CLONES
void weft_par_exp_shift(float *v, size_t n, float shift) {
  for (size_t i = 0; i < n; i++) v[i] = weft_par_expf(v[i] - shift);
}
