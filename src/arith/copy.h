/*
 * copy.h — bulk copies into user buffers.
 *
 * A collective's final output is often written once and not read again
 * until the caller looks at it; when the output is larger than a core's
 * cache, ordinary stores first read every destination line (write-allocate)
 * and then evict it again. Non-temporal stores skip both.
 */
#ifndef WEFT_COPY_H
#define WEFT_COPY_H

#include <stddef.h>

// dst <- src (n bytes, no overlap) with non-temporal stores where the CPU
// has them (plain memcpy elsewhere). Ends with a store fence, so the bytes
// are ordered before any flag the caller publishes next.
void weft_copy_nt(void *dst, const void *src, size_t n);

#endif
