/*
 * api.h — how an exported entry point is defined.
 *
 * The library is compiled with -fvisibility=hidden, so nothing is exported
 * unless marked here. Every NCCL entry point has two names: pncclX is the
 * real definition, ncclX a weak alias of it. Applications call ncclX; a
 * profiling or interposing library may define its own ncclX and forward to
 * pncclX, and the dynamic linker then prefers the strong one.
 *
 * Usage, in the .c file that implements the call (after including nccl.h):
 *
 *   NCCL_API(ncclResult_t, ncclGetVersion, int *version);
 *   ncclResult_t pncclGetVersion(int *version) {
 *     ...
 *   }
 *
 *   NCCL_API(ncclResult_t, ncclGroupStart, void);   // no parameters
 *
 *   WEFT_API(ncclResult_t, weftGetVersion, int *version);
 *   ncclResult_t weftGetVersion(int *version) { ... }
 *
 * The macro redeclares both names with the parameter list it is given, so a
 * signature that drifts from the public header fails to compile. The alias
 * must live in the same file as the pncclX definition. Internal code calls
 * pncclX (or a weft_<module>_<verb> helper), never the interposable ncclX.
 */
#ifndef WEFT_API_H
#define WEFT_API_H

#define WEFT_EXPORT __attribute__((visibility("default")))

// Declare pncclX (exported) and ncclX (weak exported alias of pncclX).
#define NCCL_API(ret, func, ...)                                          \
  WEFT_EXPORT ret p##func(__VA_ARGS__);                                   \
  ret func(__VA_ARGS__) __attribute__((weak, alias("p" #func), visibility("default")))

// Declare an exported weft extension weftX.
#define WEFT_API(ret, func, ...) WEFT_EXPORT ret func(__VA_ARGS__)

#endif
