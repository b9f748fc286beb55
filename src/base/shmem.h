/*
 * shmem.h — named POSIX shared-memory segments: a unique name, create or
 * map. The core's control segments (src/core/segment.c) and the
 * shared-memory transport's FIFO segments (transports/shm/) are made this way.
 */
#ifndef WEFT_SHMEM_H
#define WEFT_SHMEM_H

#include <stddef.h>

#include "nccl.h"

// A name no other segment has: "/<prefix>-<pid>-<random>-r<rank>" (weft-status
// finds control segments by the prefix "weft" and the owner's pid).
void weft_shmem_name(char *buf, size_t len, const char *prefix, int rank);
// Map the segment `name` of `bytes` bytes, creating it (exclusively, sized
// with ftruncate) when `create`; WARNs and removes a half-made segment on failure.
ncclResult_t weft_shmem_map(const char *name, size_t bytes, int create, void **out);

#endif
