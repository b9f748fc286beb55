/*
 * reduce_ops.cuh — the device memory backend's arithmetic: element-wise
 * reduction functors for all 12 NCCL datatypes and every op weft lowers to
 * (sum, prod, max, min, with PreMulSum/Avg as a prescale of the local operand
 * and integer Avg as a final divide), plus the loops that walk a buffer with
 * 16-byte vectors and a scalar head and tail.
 *
 * Everything here is `__host__ __device__` under nvcc and plain inline C++17
 * under a host compiler, so the same code the kernels run (reduce_kernels.cu)
 * is evaluated on the CPU by the unit tests (tests/unit/cuda_ops_shim.cpp)
 * and compared bit for bit with the host backend (src/arith/reduce.c). The
 * semantics are exactly those of weft_redop_t (src/arith/reduce.h):
 *   dst = post(in OP pre(local)),  first: dst = post(pre(src))
 * integers computed unsigned (wrap), max/min compared in the type itself,
 * the integer divide truncating in the widths reduce_int.c uses; float32 and
 * float64 native, one rounding per operation; fp16, bf16 and fp8 widened to
 * float, computed in float and rounded to nearest even once. Max/min return
 * x when x is NaN and y when y is (FMAX/FMIN of reduce_float.c).
 *
 * The narrow-format converters and the float arithmetic (explicit
 * round-to-nearest intrinsics on the device, so no prescale and sum can fuse
 * into an FMA) are in float_formats.cuh.
 */
#ifndef WEFT_CUDA_REDUCE_OPS_CUH
#define WEFT_CUDA_REDUCE_OPS_CUH

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "float_formats.cuh"
#include "reduce.h"

namespace weft_cuda {

// ---- element access: typed on the device, memcpy on the host ----

// ea: the pointer is aligned to sizeof(T); when not, the device goes byte
// by byte (the host's memcpy copes either way).
template <class T>
WEFT_HD T load_elem(const void *p, size_t i, int ea) {
  T v;
#ifdef __CUDA_ARCH__
  if (ea) return ((const T *)p)[i];
  const unsigned char *s = (const unsigned char *)p + i * sizeof(T);
  unsigned char *d = (unsigned char *)&v;
  for (size_t b = 0; b < sizeof(T); b++) d[b] = s[b];
#else
  (void)ea;
  memcpy(&v, (const char *)p + i * sizeof(T), sizeof(T));
#endif
  return v;
}

template <class T>
WEFT_HD void store_elem(void *p, size_t i, T v, int ea) {
#ifdef __CUDA_ARCH__
  if (ea) {
    ((T *)p)[i] = v;
    return;
  }
  unsigned char *d = (unsigned char *)p + i * sizeof(T);
  const unsigned char *s = (const unsigned char *)&v;
  for (size_t b = 0; b < sizeof(T); b++) d[b] = s[b];
#else
  (void)ea;
  memcpy((char *)p + i * sizeof(T), &v, sizeof(T));
#endif
}

// 16 bytes, moved as one load/store on the device.
struct alignas(16) Vec16 {
  uint64_t w[2];
};

template <class T>
union Lanes {
  Vec16 v;
  T e[sizeof(Vec16) / sizeof(T)];
};

WEFT_HD Vec16 load16(const void *p, size_t j) {
#ifdef __CUDA_ARCH__
  return ((const Vec16 *)p)[j];
#else
  Vec16 v;
  memcpy(&v, (const char *)p + j * sizeof(Vec16), sizeof v);
  return v;
#endif
}

WEFT_HD void store16(void *p, size_t j, Vec16 v) {
#ifdef __CUDA_ARCH__
  ((Vec16 *)p)[j] = v;
#else
  memcpy((char *)p + j * sizeof(Vec16), &v, sizeof v);
#endif
}

// ---- datatype traits: storage T, computed in Acc, prescale scalar Scale ----

// Integers: T, its unsigned twin U, division done in Div (as reduce_int.c).
template <class T_, class U, class Div>
struct IntType {
  typedef T_ T;
  typedef T_ Acc;
  typedef U Scale;
  static WEFT_HD Acc load(T v) { return v; }
  static WEFT_HD T store(Acc a) { return a; }
  static WEFT_HD Acc sum(Acc x, Acc y) { return (T)((U)x + (U)y); }
  static WEFT_HD Acc prod(Acc x, Acc y) { return (T)((U)x * (U)y); }
  static WEFT_HD Acc max(Acc x, Acc y) { return x > y ? x : y; }
  static WEFT_HD Acc min(Acc x, Acc y) { return x < y ? x : y; }
  static WEFT_HD Acc scale(Acc x, Scale k) { return (T)((U)x * k); }
  static WEFT_HD Acc divide(Acc x, int div) { return (T)((Div)x / (Div)div); }
  static Scale host_scale(const weft_redop_t *op) { return (Scale)(uint64_t)op->scale_i; }
  // A scalar of this type in memory, as redop.c reads it (only the low
  // bits of the widened value matter).
  static WEFT_HD Scale read_scale(const void *p) { return (Scale)load_elem<T>(p, 0, 0); }
};

// Max/min that propagate NaN: x wins when it is NaN; y wins when it is,
// because every comparison with NaN is false.
template <class F>
WEFT_HD F nan_max(F x, F y) {
  return (x > y || x != x) ? x : y;
}
template <class F>
WEFT_HD F nan_min(F x, F y) {
  return (x < y || x != x) ? x : y;
}

// Arithmetic in float (float32 and the narrow formats).
struct FloatMath {
  typedef float Acc;
  typedef float Scale;
  static WEFT_HD Acc sum(Acc x, Acc y) { return fadd(x, y); }
  static WEFT_HD Acc prod(Acc x, Acc y) { return fmul(x, y); }
  static WEFT_HD Acc max(Acc x, Acc y) { return nan_max(x, y); }
  static WEFT_HD Acc min(Acc x, Acc y) { return nan_min(x, y); }
  static WEFT_HD Acc scale(Acc x, Scale k) { return fmul(x, k); }
  static WEFT_HD Acc divide(Acc x, int div) { return fdiv(x, (float)div); }
  static Scale host_scale(const weft_redop_t *op) { return (float)op->scale_f; }
};

struct F32Type : FloatMath {
  typedef float T;
  static WEFT_HD Acc load(T v) { return v; }
  static WEFT_HD T store(Acc a) { return a; }
  static WEFT_HD Scale read_scale(const void *p) { return load_elem<float>(p, 0, 0); }
};

struct F64Type {
  typedef double T;
  typedef double Acc;
  typedef double Scale;
  static WEFT_HD Acc load(T v) { return v; }
  static WEFT_HD T store(Acc a) { return a; }
  static WEFT_HD Acc sum(Acc x, Acc y) { return dadd(x, y); }
  static WEFT_HD Acc prod(Acc x, Acc y) { return dmul(x, y); }
  static WEFT_HD Acc max(Acc x, Acc y) { return nan_max(x, y); }
  static WEFT_HD Acc min(Acc x, Acc y) { return nan_min(x, y); }
  static WEFT_HD Acc scale(Acc x, Scale k) { return dmul(x, k); }
  static WEFT_HD Acc divide(Acc x, int div) { return ddiv(x, (double)div); }
  static Scale host_scale(const weft_redop_t *op) { return op->scale_f; }
  static WEFT_HD Scale read_scale(const void *p) { return load_elem<double>(p, 0, 0); }
};

// fp16, bf16, fp8: widened to float, rounded once when stored.
#define WEFT_CUDA_SMALL_TYPE(NAME, TYPE, WIDEN, NARROW)                           \
  struct NAME : FloatMath {                                                       \
    typedef TYPE T;                                                               \
    static WEFT_HD Acc load(T v) { return WIDEN(v); }                             \
    static WEFT_HD T store(Acc a) { return NARROW(a); }                           \
    static WEFT_HD Scale read_scale(const void *p) { return WIDEN(load_elem<T>(p, 0, 0)); } \
  };
WEFT_CUDA_SMALL_TYPE(HalfType, uint16_t, half_to_float, float_to_half)
WEFT_CUDA_SMALL_TYPE(Bf16Type, uint16_t, bf16_to_float, float_to_bf16)
WEFT_CUDA_SMALL_TYPE(E4m3Type, uint8_t, e4m3_to_float, float_to_e4m3)
WEFT_CUDA_SMALL_TYPE(E5m2Type, uint8_t, e5m2_to_float, float_to_e5m2)
#undef WEFT_CUDA_SMALL_TYPE

typedef IntType<int8_t, uint8_t, int32_t> I8Type;
typedef IntType<uint8_t, uint8_t, uint32_t> U8Type;
typedef IntType<int32_t, uint32_t, int64_t> I32Type;
typedef IntType<uint32_t, uint32_t, uint32_t> U32Type;
typedef IntType<int64_t, uint64_t, int64_t> I64Type;
typedef IntType<uint64_t, uint64_t, uint64_t> U64Type;

// ---- the functor: one (datatype, op) pair with its scalar and divisor ----

template <class Ty, int Kind>
struct ReduceFn {
  typedef typename Ty::T T;
  typedef typename Ty::Acc Acc;
  typename Ty::Scale k;  // the prescale scalar, in the type it multiplies in
  int prescale;          // 1: local operands are multiplied by k first
  int div;               // > 1: results are divided by it (final integer Avg)

  // From the host-side op; `final` enables the post-division as in
  // weft_reduce.
  static ReduceFn make(const weft_redop_t *op, int final) {
    ReduceFn f;
    f.k = Ty::host_scale(op);
    f.prescale = op->prescale != 0;
    f.div = final && op->postdiv > 1 ? op->postdiv : 0;
    return f;
  }
  // ncclScalarDevice: the scalar lives in (device) memory at p.
  WEFT_HD void scale_from(const void *p) {
    k = Ty::read_scale(p);
    prescale = 1;
  }
  WEFT_HD Acc pre(Acc y) const { return prescale ? Ty::scale(y, k) : y; }
  WEFT_HD Acc post(Acc r) const { return div > 1 ? Ty::divide(r, div) : r; }
  static WEFT_HD Acc combine(Acc x, Acc y) {
    if constexpr (Kind == WEFT_RED_SUM) return Ty::sum(x, y);
    else if constexpr (Kind == WEFT_RED_PROD) return Ty::prod(x, y);
    else if constexpr (Kind == WEFT_RED_MAX) return Ty::max(x, y);
    else return Ty::min(x, y);
  }
  // dst = post(in OP pre(local)): `in` is already inside the reduction.
  WEFT_HD T operator()(T in, T local) const {
    return Ty::store(post(combine(Ty::load(in), pre(Ty::load(local)))));
  }
  // dst = post(pre(src)): a local operand entering the reduction first.
  WEFT_HD T first(T src) const { return Ty::store(post(pre(Ty::load(src)))); }
};

// Unary adaptors for map_span.
template <class Fn>
struct FirstOf {
  typedef typename Fn::T T;
  Fn fn;
  WEFT_HD T operator()(T v) const { return fn.first(v); }
};

template <class T_>
struct Identity {
  typedef T_ T;
  WEFT_HD T operator()(T v) const { return v; }
};

// ---- walking a buffer: scalar head, 16-byte vector body, scalar tail ----

// How a range of `count` elements splits: [0, head) one at a time, then
// nvec 16-byte vectors, then the rest one at a time. Vectors are used only
// when every pointer has the same offset modulo 16 and is element-aligned.
struct Span {
  size_t count;
  size_t head;
  size_t nvec;
  int ea;  // every pointer is aligned to the element size
};

inline Span plan_span(size_t size, size_t count, const void *const *ptrs, int nptrs) {
  Span s = {count, count, 0, 1};
  uintptr_t off = (uintptr_t)ptrs[0] % sizeof(Vec16);
  int same = 1;
  for (int p = 0; p < nptrs; p++) {
    if ((uintptr_t)ptrs[p] % size != 0) s.ea = 0;
    if ((uintptr_t)ptrs[p] % sizeof(Vec16) != off) same = 0;
  }
  if (!s.ea || !same) return s;
  size_t lanes = sizeof(Vec16) / size;
  size_t head = (sizeof(Vec16) - off) % sizeof(Vec16) / size;
  if (head >= count) return s;
  s.head = head;
  s.nvec = (count - head) / lanes;
  return s;
}

// Work items of a span: scalar elements and vectors, each a grid-stride
// loop of its own; a launch wants max(scalar_items, nvec) threads.
inline size_t span_scalar_items(const Span &s, size_t size) {
  return s.count - s.nvec * (sizeof(Vec16) / size);
}

// The index of the j-th scalar element (head first, then tail).
WEFT_HD size_t span_scalar_index(const Span &s, size_t j, size_t lanes) {
  return j < s.head ? j : s.head + s.nvec * lanes + (j - s.head);
}

// dst[i] = fn(in[i], local[i]) for thread tid of nthreads. dst may equal
// in or local (each element is read before the same thread writes it).
template <class Fn>
WEFT_HD void reduce_span(const Fn &fn, void *dst, const void *in, const void *local, const Span &s,
                         size_t tid, size_t nthreads) {
  typedef typename Fn::T T;
  const size_t lanes = sizeof(Vec16) / sizeof(T);
  size_t nscalar = s.count - s.nvec * lanes;
  for (size_t j = tid; j < nscalar; j += nthreads) {
    size_t i = span_scalar_index(s, j, lanes);
    store_elem<T>(dst, i, fn(load_elem<T>(in, i, s.ea), load_elem<T>(local, i, s.ea)), s.ea);
  }
  size_t hb = s.head * sizeof(T);
  void *vd = (char *)dst + hb;
  const void *va = (const char *)in + hb, *vb = (const char *)local + hb;
  for (size_t j = tid; j < s.nvec; j += nthreads) {
    Lanes<T> a, b, d;
    a.v = load16(va, j);
    b.v = load16(vb, j);
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (size_t l = 0; l < lanes; l++) d.e[l] = fn(a.e[l], b.e[l]);
    store16(vd, j, d.v);
  }
}

// dst[i] = fn(src[i]); dst may equal src.
template <class Fn>
WEFT_HD void map_span(const Fn &fn, void *dst, const void *src, const Span &s, size_t tid,
                      size_t nthreads) {
  typedef typename Fn::T T;
  const size_t lanes = sizeof(Vec16) / sizeof(T);
  size_t nscalar = s.count - s.nvec * lanes;
  for (size_t j = tid; j < nscalar; j += nthreads) {
    size_t i = span_scalar_index(s, j, lanes);
    store_elem<T>(dst, i, fn(load_elem<T>(src, i, s.ea)), s.ea);
  }
  size_t hb = s.head * sizeof(T);
  void *vd = (char *)dst + hb;
  const void *vs = (const char *)src + hb;
  for (size_t j = tid; j < s.nvec; j += nthreads) {
    Lanes<T> a, d;
    a.v = load16(vs, j);
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (size_t l = 0; l < lanes; l++) d.e[l] = fn(a.e[l]);
    store16(vd, j, d.v);
  }
}

// ---- host-side dispatch from (datatype, op kind) to a template ----

// An enum field of a C struct as a plain int: C callers may store any value
// there (an invalid one is what the checks below are for), and C++ may not
// load a value outside the enum's range as the enum type.
template <class E>
inline int raw_enum(const E *p) {
  static_assert(sizeof(E) == sizeof(int), "C enums are int-sized");
  int v;
  memcpy(&v, p, sizeof v);
  return v;
}

inline size_t dtype_size(int dt) {
  switch (dt) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

// Calls L<Type>::run(a...) for the datatype; `bad` when it is unknown.
template <template <class> class L, class R, class... A>
inline R with_type(int dt, R bad, A... a) {
  switch (dt) {
    case ncclInt8: return L<I8Type>::run(a...);
    case ncclUint8: return L<U8Type>::run(a...);
    case ncclInt32: return L<I32Type>::run(a...);
    case ncclUint32: return L<U32Type>::run(a...);
    case ncclInt64: return L<I64Type>::run(a...);
    case ncclUint64: return L<U64Type>::run(a...);
    case ncclFloat16: return L<HalfType>::run(a...);
    case ncclFloat32: return L<F32Type>::run(a...);
    case ncclFloat64: return L<F64Type>::run(a...);
    case ncclBfloat16: return L<Bf16Type>::run(a...);
    case ncclFloat8e4m3: return L<E4m3Type>::run(a...);
    case ncclFloat8e5m2: return L<E5m2Type>::run(a...);
    default: return bad;
  }
}

// Calls L<ReduceFn<Type, kind>>::run(a...); `bad` for an unknown pair.
template <template <class> class L>
struct KindDispatch {
  template <class Ty>
  struct On {
    template <class R, class... A>
    static R run(int kind, R bad, A... a) {
      switch (kind) {
        case WEFT_RED_SUM: return L<ReduceFn<Ty, WEFT_RED_SUM>>::run(a...);
        case WEFT_RED_PROD: return L<ReduceFn<Ty, WEFT_RED_PROD>>::run(a...);
        case WEFT_RED_MAX: return L<ReduceFn<Ty, WEFT_RED_MAX>>::run(a...);
        case WEFT_RED_MIN: return L<ReduceFn<Ty, WEFT_RED_MIN>>::run(a...);
        default: return bad;
      }
    }
  };
};

template <template <class> class L, class R, class... A>
inline R with_fn(int dt, int kind, R bad, A... a) {
  return with_type<KindDispatch<L>::template On, R>(dt, bad, kind, bad, a...);
}

// A known datatype and kind, and count elements fit in size_t bytes.
inline bool op_ok(const weft_redop_t *op, size_t count) {
  if (op == nullptr) return false;
  int kind = raw_enum(&op->kind);
  size_t size = dtype_size(raw_enum(&op->dtype));
  return kind >= WEFT_RED_SUM && kind <= WEFT_RED_MIN && size != 0 && count <= SIZE_MAX / size;
}

}  // namespace weft_cuda

#endif
