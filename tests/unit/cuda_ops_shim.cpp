/*
 * cuda_ops_shim.cpp — src/kernels/reduce_ops.cuh compiled as host C++17 behind
 * a C interface (cuda_ops_shim.h), so a C unit test can compare the device
 * functors with the host backend without a GPU or nvcc.
 *
 * It mirrors reduce_kernels.cu's launchers: the same span plan, the same
 * dispatch, the same entry-point rules (plain copy when nothing transforms),
 * with each simulated thread's grid-stride loop run in turn.
 */
#include "cuda_ops_shim.h"

#include "reduce_ops.cuh"

using namespace weft_cuda;

namespace {

template <class Fn>
struct HostReduce {
  static int run(const weft_redop_t *op, const void *scalar, void *dst, const void *in,
                 const void *local, size_t count, int final, size_t nthreads) {
    typedef typename Fn::T T;
    Fn fn = Fn::make(op, final);
    if (scalar != nullptr) fn.scale_from(scalar);
    const void *ptrs[3] = {dst, in, local};
    Span s = plan_span(sizeof(T), count, ptrs, 3);
    for (size_t t = 0; t < nthreads; t++) reduce_span(fn, dst, in, local, s, t, nthreads);
    return 0;
  }
};

template <class Ty>
struct HostFirst {
  static int run(const weft_redop_t *op, const void *scalar, void *dst, const void *src,
                 size_t count, int final, size_t nthreads) {
    typedef ReduceFn<Ty, WEFT_RED_SUM> Fn;
    typedef typename Fn::T T;
    Fn fn = Fn::make(op, final);
    if (scalar != nullptr) fn.scale_from(scalar);
    const void *ptrs[2] = {dst, src};
    Span s = plan_span(sizeof(T), count, ptrs, 2);
    for (size_t t = 0; t < nthreads; t++) map_span(FirstOf<Fn>{fn}, dst, src, s, t, nthreads);
    return 0;
  }
};

}  // namespace

extern "C" int weft_cuda_host_copy(void *dst, const void *src, size_t bytes, size_t nthreads) {
  if (bytes == 0 || dst == src) return 0;
  if (dst == nullptr || src == nullptr || nthreads == 0) return -1;
  const void *ptrs[2] = {dst, src};
  Span s = plan_span(1, bytes, ptrs, 2);
  for (size_t t = 0; t < nthreads; t++)
    map_span(Identity<unsigned char>{}, dst, src, s, t, nthreads);
  return 0;
}

extern "C" int weft_cuda_host_reduce(const weft_redop_t *op, const void *scalar, void *dst,
                                     const void *in, const void *local, size_t count, int final,
                                     size_t nthreads) {
  if (count == 0) return 0;
  if (!op_ok(op, count) || dst == nullptr || in == nullptr || local == nullptr || nthreads == 0)
    return -1;
  return with_fn<HostReduce>(raw_enum(&op->dtype), raw_enum(&op->kind), -1, op, scalar, dst, in,
                             local, count, final, nthreads);
}

extern "C" int weft_cuda_host_reduce_first(const weft_redop_t *op, const void *scalar, void *dst,
                                           const void *src, size_t count, int final,
                                           size_t nthreads) {
  if (count == 0) return 0;
  if (op == nullptr && scalar == nullptr) return weft_cuda_host_copy(dst, src, count, nthreads);
  if (!op_ok(op, count) || dst == nullptr || src == nullptr || nthreads == 0) return -1;
  size_t bytes = count * dtype_size(raw_enum(&op->dtype));
  if (scalar == nullptr && !op->prescale && !(final && op->postdiv > 1))
    return weft_cuda_host_copy(dst, src, bytes, nthreads);
  return with_type<HostFirst>(raw_enum(&op->dtype), -1, op, scalar, dst, src, count, final,
                              nthreads);
}

extern "C" int weft_cuda_host_plan(size_t size, size_t count, const void *a, const void *b,
                                   const void *c, size_t *head, size_t *nvec) {
  const void *ptrs[3] = {a, b, c};
  Span s = plan_span(size, count, ptrs, c != nullptr ? 3 : 2);
  *head = s.head;
  *nvec = s.nvec;
  return s.ea;
}

extern "C" float weft_cuda_host_widen(ncclDataType_t dt, uint32_t bits) {
  switch (dt) {
    case ncclFloat16:
      return half_to_float((uint16_t)bits);
    case ncclBfloat16:
      return bf16_to_float((uint16_t)bits);
    case ncclFloat8e4m3:
      return e4m3_to_float((uint8_t)bits);
    case ncclFloat8e5m2:
      return e5m2_to_float((uint8_t)bits);
    default:
      return u2f(bits);
  }
}

extern "C" uint32_t weft_cuda_host_narrow(ncclDataType_t dt, float f) {
  switch (dt) {
    case ncclFloat16:
      return float_to_half(f);
    case ncclBfloat16:
      return float_to_bf16(f);
    case ncclFloat8e4m3:
      return float_to_e4m3(f);
    case ncclFloat8e5m2:
      return float_to_e5m2(f);
    default:
      return f2u(f);
  }
}
