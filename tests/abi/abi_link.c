/*
 * abi_link.c — an application built only against NVIDIA's nccl.h, run on
 * weft's libnccl.so.2.
 *
 * This is the drop-in promise in its smallest form: nothing here knows
 * about weft at compile time. It first proves (by looking up weftGetVersion
 * at run time) that the library it got is weft and not NVIDIA's, then uses a
 * single-rank communicator the way an application would: version, unique id,
 * ncclCommInitAll, ncclCommInitRankConfig with NCCL_CONFIG_INITIALIZER,
 * AllReduce and Broadcast on host arrays with a NULL stream, a group,
 * queries, error strings, rejection of bad arguments, destroy.
 * Prints "ok ..." and exits 0 on success; prints the failed check and
 * exits 1 otherwise.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nccl.h>

#define N 37  // odd on purpose: no whole-vector fast path hides a tail bug

static int fail(const char *what) {
  fprintf(stderr, "abi_link: FAIL: %s\n", what);
  return 1;
}

// Run a call that must succeed; on failure report it with its error text.
#define MUST(call)                                                             \
  do {                                                                         \
    ncclResult_t r_ = (call);                                                  \
    if (r_ != ncclSuccess) {                                                   \
      fprintf(stderr, "abi_link: FAIL: %s returned %d (%s)\n", #call, (int)r_, \
              ncclGetErrorString(r_));                                         \
      return 1;                                                                \
    }                                                                          \
  } while (0)

// The library must be weft: its extension symbol is visible process-wide.
static int check_is_weft(void) {
  typedef ncclResult_t (*weft_version_fn)(int *);
  void *sym = dlsym(RTLD_DEFAULT, "weftGetVersion");
  if (sym == NULL) return fail("weftGetVersion not found: this is not weft's libnccl.so.2");

  Dl_info info;
  memset(&info, 0, sizeof(info));
  if (dladdr((void *)ncclGetVersion, &info) && info.dli_fname)
    printf("abi_link: ncclGetVersion comes from %s\n", info.dli_fname);

  weft_version_fn weft_version;
  memcpy(&weft_version, &sym, sizeof(weft_version));  // object -> function pointer
  int v = -1;
  MUST(weft_version(&v));
  if (v < 0) return fail("weftGetVersion returned a negative version");
  printf("abi_link: weft version %d\n", v);
  return 0;
}

// Sum over one rank is the identity: out-of-place, then in-place.
static int check_allreduce(ncclComm_t comm) {
  float in[N], out[N], inplace[N];
  for (int i = 0; i < N; i++) {
    in[i] = (float)i * 0.5f - 3.0f;
    out[i] = -999.0f;
    inplace[i] = in[i];
  }
  MUST(ncclAllReduce(in, out, N, ncclFloat32, ncclSum, comm, NULL));
  MUST(ncclAllReduce(inplace, inplace, N, ncclFloat, ncclSum, comm, NULL));
  for (int i = 0; i < N; i++) {
    if (out[i] != in[i]) return fail("ncclAllReduce (out of place) changed the data");
    if (inplace[i] != in[i]) return fail("ncclAllReduce (in place) changed the data");
  }
  return 0;
}

static int check_broadcast(ncclComm_t comm) {
  double src[N], dst[N];
  for (int i = 0; i < N; i++) {
    src[i] = 1.0 / (i + 1);
    dst[i] = 0.0;
  }
  MUST(ncclBroadcast(src, dst, N, ncclDouble, 0, comm, NULL));
  if (memcmp(src, dst, sizeof(src)) != 0) return fail("ncclBroadcast did not copy root's data");
  return 0;
}

// A second communicator made with a config struct, driven inside a group.
static int check_config_init(void) {
  ncclUniqueId id;
  MUST(ncclGetUniqueId(&id));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  config.commName = "abi_link";
  ncclComm_t comm = NCCL_COMM_NULL;
  MUST(ncclCommInitRankConfig(&comm, 1, id, 0, &config));
  if (comm == NCCL_COMM_NULL) return fail("ncclCommInitRankConfig returned a NULL comm");

  int a[N], b[N];
  for (int i = 0; i < N; i++) a[i] = i * 7 - 50, b[i] = 0;
  MUST(ncclGroupStart());
  MUST(ncclAllReduce(a, b, N, ncclInt32, ncclMax, comm, NULL));
  MUST(ncclGroupEnd());
  if (memcmp(a, b, sizeof(a)) != 0) return fail("grouped ncclAllReduce(max) changed the data");

  ncclResult_t async = ncclInternalError;
  MUST(ncclCommGetAsyncError(comm, &async));
  if (async != ncclSuccess) return fail("ncclCommGetAsyncError reports an error");
  MUST(ncclCommDestroy(comm));
  return 0;
}

// Bad arguments must come back as errors, not crashes.
static int check_rejects(ncclComm_t comm) {
  float x = 1.0f;
  if (ncclGetVersion(NULL) == ncclSuccess) return fail("ncclGetVersion(NULL) succeeded");
  if (ncclCommCount(comm, NULL) == ncclSuccess) return fail("ncclCommCount(comm, NULL) succeeded");
  if (ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, NULL, NULL) == ncclSuccess)
    return fail("ncclAllReduce on a NULL comm succeeded");
  if (ncclAllReduce(&x, &x, 1, (ncclDataType_t)ncclNumTypes, ncclSum, comm, NULL) == ncclSuccess)
    return fail("ncclAllReduce with an invalid datatype succeeded");
  return 0;
}

int main(void) {
  if (check_is_weft()) return 1;

  int version = 0;
  MUST(ncclGetVersion(&version));
  printf("abi_link: ncclGetVersion %d (header %d)\n", version, NCCL_VERSION_CODE);
  if (version < NCCL_VERSION(2, 28, 0)) return fail("library reports a version below 2.28.0");

  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  MUST(ncclGetUniqueId(&id));
  static const ncclUniqueId zero;
  if (memcmp(&id, &zero, sizeof(id)) == 0) return fail("ncclGetUniqueId left the id all zero");

  ncclComm_t comms[1] = {NCCL_COMM_NULL};
  MUST(ncclCommInitAll(comms, 1, NULL));
  if (comms[0] == NCCL_COMM_NULL) return fail("ncclCommInitAll returned a NULL comm");

  int count = -1, rank = -1;
  MUST(ncclCommCount(comms[0], &count));
  MUST(ncclCommUserRank(comms[0], &rank));
  if (count != 1) return fail("ncclCommCount is not 1");
  if (rank != 0) return fail("ncclCommUserRank is not 0");

  if (check_allreduce(comms[0])) return 1;
  if (check_broadcast(comms[0])) return 1;
  if (check_rejects(comms[0])) return 1;

  const char *msg = ncclGetErrorString(ncclInvalidArgument);
  if (msg == NULL || msg[0] == '\0') return fail("ncclGetErrorString(ncclInvalidArgument) is empty");
  if (ncclGetLastError(NULL) == NULL) return fail("ncclGetLastError returned NULL");

  MUST(ncclCommDestroy(comms[0]));
  if (check_config_init()) return 1;

  printf("ok abi_link: weft runs a program built against NVIDIA's nccl.h %d\n", NCCL_VERSION_CODE);
  return 0;
}
