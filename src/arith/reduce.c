/*
 * reduce.c — the host memory backend's reduction entry points.
 *
 * Chooses the typed loops (reduce_int.c, reduce_float.c, and for the 16- and
 * 8-bit floats reduce_small_*.c) at the level reduce_simd.c picked for the
 * process, and makes their `restrict` promises true. The common cases run as
 * one call over the whole range: dst distinct from both operands (3-operand
 * loop), or dst equal to one of them (2-operand in-place loop). Everything
 * else goes chunk by chunk through small stack buffers: the prescale (the
 * local operand is scaled into a buffer, then combined), the final integer
 * division (applied to each chunk while it is still in cache), operands that
 * partly overlap dst (copied aside first; outside the contract, but kept
 * safe), and pointers not aligned to the element size (bounced through
 * aligned buffers, so the loops never see a misaligned element).
 *
 * Invalid arguments (unknown datatype or operation, NULL pointers) leave dst
 * untouched: callers validate at the API boundary and this layer has no way
 * to return an error.
 */
#include "reduce.h"

#include <stdint.h>
#include <string.h>

#include "dtype.h"
#include "reduce_kern.h"
#include "reduce_simd.h"

// Bytes per chunk on the slow paths; each stack buffer is this large.
#define CHUNK_BYTES 4096

typedef union {
  uint64_t u64[CHUNK_BYTES / sizeof(uint64_t)];
  double f64[CHUNK_BYTES / sizeof(double)];
} chunk_buf_t;

static int overlaps(const void *p, const void *q, size_t bytes) {
  uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;
  return a < b + bytes && b < a + bytes;
}

static int misaligned(const void *p, size_t size) { return ((uintptr_t)p & (size - 1)) != 0; }

static int op_valid(const weft_redop_t *op) {
  return op != NULL && weft_dtype_size(op->dtype) != 0 && (unsigned)op->kind <= WEFT_RED_MIN;
}

int weft_redop_transforms(const weft_redop_t *op) {
  return op != NULL && (op->prescale || op->postdiv > 1);
}

// d = a OP b; each of a and b either is d or does not overlap it, and they
// are not both d.
static void native_dispatch(const weft_reduce_kern_t *k, int kind, char *d, const char *a,
                            const char *b, size_t m) {
  if (a == d)
    k->combine2[kind](m, d, b);
  else if (b == d)
    k->combine2r[kind](m, d, a);
  else
    k->combine3[kind](m, d, a, b);
}

// d = a OP b over m elements, whatever the overlap; ta and tb hold copies
// of an operand when the loops cannot take it as it is.
static void native_combine(const weft_reduce_kern_t *k, int kind, char *d, const char *a,
                           const char *b, size_t m, void *ta, void *tb) {
  size_t bytes = m * k->size;
  if (a != d && overlaps(a, d, bytes)) a = memcpy(ta, a, bytes);
  if (b != d && overlaps(b, d, bytes)) b = memcpy(tb, b, bytes);
  if (a == d && b == d) b = memcpy(tb, b, bytes);
  native_dispatch(k, kind, d, a, b, m);
}

static void native_reduce(const weft_reduce_kern_t *k, const weft_redop_t *op, char *d,
                          const char *a, const char *b, size_t n, int div) {
  size_t size = k->size, bytes = n * size;
  int kind = (int)op->kind;
  if (!op->prescale && div <= 1) {
    int clean_a = a == d || !overlaps(a, d, bytes);
    int clean_b = b == d || !overlaps(b, d, bytes);
    if (clean_a && clean_b && !(a == d && b == d)) {
      native_dispatch(k, kind, d, a, b, n);
      return;
    }
  }
  chunk_buf_t ta, tb;
  size_t per = CHUNK_BYTES / size;
  for (size_t off = 0; off < n; off += per) {
    size_t m = n - off < per ? n - off : per;
    const char *bb = b + off * size;
    if (op->prescale) {
      k->scale(m, &tb, bb, op);
      bb = (const char *)&tb;
    }
    native_combine(k, kind, d + off * size, a + off * size, bb, m, &ta, &tb);
    if (div > 1) k->postdiv(m, d + off * size, div);
  }
}

// Pointers aligned, no partial overlaps beyond what the callees handle.
// The 16- and 8-bit formats' vector loops take d equal to an operand but
// not a partial overlap; the portable loop's block order defines that case.
static void reduce_aligned(const weft_redop_t *op, void *d, const void *a, const void *b,
                           size_t n, int div) {
  const weft_simd_impl_t *impl = weft_simd_current();
  const weft_reduce_kern_t *k = impl->native(op->dtype);
  size_t bytes = n * weft_dtype_size(op->dtype);
  if (k != NULL)
    native_reduce(k, op, d, a, b, n, div);
  else if ((a != d && overlaps(a, d, bytes)) || (b != d && overlaps(b, d, bytes)))
    weft_reduce_small(op, d, a, b, n, div);
  else
    impl->small(op, d, a, b, n, div);
}

void weft_reduce(const weft_redop_t *op, void *dst, const void *in, const void *local,
                 size_t count, int final) {
  if (count == 0 || !op_valid(op) || dst == NULL || in == NULL || local == NULL) return;
  size_t size = weft_dtype_size(op->dtype);
  if (count > SIZE_MAX / size) return;
  int div = final && op->postdiv > 1 ? op->postdiv : 0;
  if (!misaligned(dst, size) && !misaligned(in, size) && !misaligned(local, size)) {
    reduce_aligned(op, dst, in, local, count, div);
    return;
  }
  // Bounce through aligned buffers; each chunk of both operands is read
  // before the chunk of dst is written.
  chunk_buf_t ta, tb;
  size_t per = CHUNK_BYTES / size;
  for (size_t off = 0; off < count; off += per) {
    size_t m = count - off < per ? count - off : per;
    memcpy(&ta, (const char *)in + off * size, m * size);
    memcpy(&tb, (const char *)local + off * size, m * size);
    reduce_aligned(op, &ta, &ta, &tb, m, div);
    memcpy((char *)dst + off * size, &ta, m * size);
  }
}

// dst = pre(src), then post; dst equals src or does not overlap it.
static void first_aligned(const weft_redop_t *op, char *d, const char *s, size_t n, int div) {
  const weft_simd_impl_t *impl = weft_simd_current();
  const weft_reduce_kern_t *k = impl->native(op->dtype);
  if (k == NULL) {
    impl->small_first(op, d, s, n, div);
    return;
  }
  size_t size = k->size, per = CHUNK_BYTES / size;
  for (size_t off = 0; off < n; off += per) {
    size_t m = n - off < per ? n - off : per;
    char *dc = d + off * size;
    const char *sc = s + off * size;
    if (!op->prescale) {
      if (dc != sc) memcpy(dc, sc, m * size);
    } else if (dc != sc) {
      k->scale(m, dc, sc, op);
    } else {
      k->scale_inplace(m, dc, op);
    }
    if (div > 1) k->postdiv(m, dc, div);
  }
}

void weft_reduce_first(const weft_redop_t *op, void *dst, const void *src, size_t count,
                       int final) {
  if (count == 0 || dst == NULL || src == NULL) return;
  if (op == NULL) {  // plain copy; without a datatype, count is in bytes
    if (dst != src) memmove(dst, src, count);
    return;
  }
  size_t size = weft_dtype_size(op->dtype);
  if (size == 0 || count > SIZE_MAX / size) return;
  size_t bytes = count * size;
  int div = final && op->postdiv > 1 ? op->postdiv : 0;
  if (!op->prescale && div <= 1) {
    if (dst != src) memmove(dst, src, bytes);
    return;
  }
  // Partial overlap: move first, then transform in place.
  if (dst != src && overlaps(dst, src, bytes)) {
    memmove(dst, src, bytes);
    src = dst;
  }
  if (!misaligned(dst, size) && !misaligned(src, size)) {
    first_aligned(op, dst, src, count, div);
    return;
  }
  chunk_buf_t t;
  size_t per = CHUNK_BYTES / size;
  for (size_t off = 0; off < count; off += per) {
    size_t m = count - off < per ? count - off : per;
    memcpy(&t, (const char *)src + off * size, m * size);
    first_aligned(op, (char *)&t, (const char *)&t, m, div);
    memcpy((char *)dst + off * size, &t, m * size);
  }
}
