/*
 * test_config.c — how weft reads ncclConfig_t (src/boot/config.c): a 2.28
 * caller's smaller struct, placed against an unreadable page so that one
 * byte read past its size would crash the test, works and gives the new
 * fields their defaults; a struct that says 2.28 in its version has its
 * newer fields ignored whatever they hold; every field NCCL checks is
 * refused when out of range, naming it, and accepted at its edges;
 * numRmaCtx=0 turns off one-sided calls (and ncclCommQueryProperties says
 * so), and ncclCommSplit with a NULL config inherits that while a config
 * of its own resets it.
 */
#include <criterion/criterion.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "nccl_device.h"

// NCCL_COMM_PROPERTIES_INITIALIZER (NCCL's, kept identical) names only the
// header fields and leaves the rest zero, which -Wextra would flag.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

// The size of NCCL 2.28.9's ncclConfig_t: it ended at nvlinkCentricSched.
#define CONFIG_SIZE_2_28 (offsetof(ncclConfig_t, nvlinkCentricSched) + sizeof(int))

static ncclComm_t one_rank(ncclConfig_t *cfg, ncclResult_t want) {
  ncclUniqueId id;
  cr_assert_eq(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = NULL;
  cr_expect_eq(ncclCommInitRankConfig(&comm, 1, id, 0, cfg), want);
  if (want != ncclSuccess) cr_expect_null(comm, "a refused config left a communicator");
  return comm;
}

// Whether one-sided calls work on comm (a put into its own window, signalled
// and waited for), or are refused as a communicator without RMA contexts.
static ncclResult_t self_put(ncclComm_t comm) {
  int32_t buf[8] = {0}, v = 42;
  ncclWindow_t win = NULL;
  cr_assert_eq(ncclCommWindowRegister(comm, buf, sizeof(buf), &win, NCCL_WIN_DEFAULT), ncclSuccess);
  ncclResult_t r = ncclPutSignal(&v, 1, ncclInt32, 0, win, 4 * sizeof(int32_t), 0, 0, 0, comm, NULL);
  if (r == ncclSuccess) {
    ncclWaitSignalDesc_t d = {.opCnt = 1, .peer = 0};
    cr_expect_eq(ncclWaitSignal(1, &d, comm, NULL), ncclSuccess);
    cr_expect_eq(buf[4], 42, "the put did not land: %d", buf[4]);
  } else {
    cr_expect_eq(ncclSignal(0, 0, 0, 0, comm, NULL), r, "ncclSignal must be refused like ncclPutSignal");
    ncclWaitSignalDesc_t d = {.opCnt = 1, .peer = 0};
    cr_expect_eq(ncclWaitSignal(1, &d, comm, NULL), r, "ncclWaitSignal must be refused like ncclPutSignal");
  }
  cr_expect_eq(ncclCommWindowDeregister(comm, win), ncclSuccess);
  return r;
}

static int host_rma(ncclComm_t comm) {
  ncclCommProperties_t p = NCCL_COMM_PROPERTIES_INITIALIZER;
  cr_assert_eq(ncclCommQueryProperties(comm, &p), ncclSuccess);
  cr_expect(!p.deviceApiSupport && !p.multimemSupport && p.ginType == NCCL_GIN_TYPE_NONE,
            "weft has no device API: deviceApiSupport %d multimemSupport %d ginType %d", p.deviceApiSupport,
            p.multimemSupport, (int)p.ginType);
  return p.hostRmaSupport;
}

Test(config, a_2_28_struct_is_read_by_its_size, .timeout = 30) {
  weft_test_env_timeout(10);
  long page = sysconf(_SC_PAGESIZE);
  char *two = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert_neq(two, MAP_FAILED);
  cr_assert_eq(mprotect(two + page, (size_t)page, PROT_NONE), 0);
  // The 2.28 struct ends exactly where the unreadable page starts.
  ncclConfig_t *old = (ncclConfig_t *)(two + page - CONFIG_SIZE_2_28);
  ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
  memcpy(old, &init, CONFIG_SIZE_2_28);
  old->size = CONFIG_SIZE_2_28;
  old->version = NCCL_VERSION(2, 28, 9);
  old->commName = "from-2.28";
  ncclComm_t comm = one_rank(old, ncclSuccess);
  cr_assert_not_null(comm);
  cr_expect_eq(self_put(comm), ncclSuccess, "numRmaCtx must default to 1 for a 2.28 caller");
  cr_expect(host_rma(comm), "a 2.28 caller's communicator has host RMA");
  cr_expect_eq(ncclCommDestroy(comm), ncclSuccess);
  // Non-blocking through the same small struct.
  old->blocking = 0;
  comm = NULL;
  ncclUniqueId id;
  cr_assert_eq(ncclGetUniqueId(&id), ncclSuccess);
  ncclResult_t r = ncclCommInitRankConfig(&comm, 1, id, 0, old);
  cr_expect(r == ncclSuccess || r == ncclInProgress, "non-blocking init through a 2.28 struct: %d", (int)r);
  cr_assert_not_null(comm);
  ncclResult_t async = ncclInProgress;
  for (int i = 0; i < 5000 && async == ncclInProgress; i++) {
    cr_assert_eq(ncclCommGetAsyncError(comm, &async), ncclSuccess);
    if (async == ncclInProgress) weft_test_sleep_ms(2);
  }
  cr_expect_eq(async, ncclSuccess);
  cr_expect_eq(ncclCommDestroy(comm), ncclSuccess);
  munmap(two, 2 * (size_t)page);
}

Test(config, fields_newer_than_the_callers_version_are_ignored, .timeout = 30) {
  weft_test_env_timeout(10);
  // A full-size struct whose version says 2.28: what lies in the 2.30 fields
  // is not the caller's, so neither the bad values nor numRmaCtx=0 count.
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.version = NCCL_VERSION(2, 28, 9);
  cfg.graphUsageMode = 77;
  cfg.numRmaCtx = 0;
  cfg.maxP2pPeers = -5;
  cfg.graphStreamOrdering = 9;
  ncclComm_t comm = one_rank(&cfg, ncclSuccess);
  cr_assert_not_null(comm);
  cr_expect_eq(self_put(comm), ncclSuccess, "numRmaCtx past the caller's version must be ignored");
  cr_expect_eq(ncclCommDestroy(comm), ncclSuccess);
  // 2.29 had numRmaCtx but not maxP2pPeers or graphStreamOrdering.
  cfg.version = NCCL_VERSION(2, 29, 2);
  cfg.graphUsageMode = 1;
  comm = one_rank(&cfg, ncclSuccess);
  cr_assert_not_null(comm);
  cr_expect_eq(self_put(comm), ncclInvalidArgument, "a 2.29 caller's numRmaCtx=0 counts");
  cr_expect_eq(ncclCommDestroy(comm), ncclSuccess);
}

typedef struct {
  const char *field;
  size_t offset;
  int bad, good;
} case_t;

#define CASE(f, bad, good) {#f, offsetof(ncclConfig_t, f), bad, good}

Test(config, every_checked_field_refuses_bad_values, .timeout = 60) {
  weft_test_env_timeout(10);
  static const case_t cases[] = {
      CASE(blocking, 2, 1),           CASE(cgaClusterSize, -1, 0),     CASE(minCTAs, 0, 1),
      CASE(maxCTAs, -3, 64),          CASE(splitShare, 2, 1),          CASE(collnetEnable, -1, 1),
      CASE(CTAPolicy, 4, 3),          CASE(shrinkShare, 7, 1),         CASE(nvlsCTAs, 0, 16),
      CASE(nChannelsPerNetPeer, 65, 64), CASE(nvlinkCentricSched, 2, 1), CASE(graphUsageMode, 3, 0),
      CASE(graphUsageMode, -1, 2),    CASE(numRmaCtx, -1, 0),          CASE(maxP2pPeers, 0, 1),
      CASE(graphStreamOrdering, 2, 0),
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    memcpy((char *)&cfg + cases[i].offset, &cases[i].bad, sizeof(int));
    ncclComm_t comm = NULL;
    ncclUniqueId id;
    cr_assert_eq(ncclGetUniqueId(&id), ncclSuccess);
    cr_expect_eq(ncclCommInitRankConfig(&comm, 1, id, 0, &cfg), ncclInvalidArgument, "config->%s=%d was accepted",
                 cases[i].field, cases[i].bad);
    cr_expect_null(comm);
    const char *last = ncclGetLastError(NULL);
    cr_expect(last != NULL && strstr(last, cases[i].field) != NULL, "the error does not name %s: %s", cases[i].field,
              last ? last : "(null)");
    memcpy((char *)&cfg + cases[i].offset, &cases[i].good, sizeof(int));
    comm = one_rank(&cfg, ncclSuccess);
    cr_expect_not_null(comm, "config->%s=%d was refused", cases[i].field, cases[i].good);
    if (comm != NULL) cr_expect_eq(ncclCommDestroy(comm), ncclSuccess);
  }
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.minCTAs = 8;
  cfg.maxCTAs = 4;
  one_rank(&cfg, ncclInvalidArgument);
  cfg.size = 4;  // smaller than the header every layout has
  cfg.minCTAs = NCCL_CONFIG_UNDEF_INT;
  one_rank(&cfg, ncclInvalidArgument);
}

Test(config, num_rma_ctx_zero_turns_one_sided_calls_off, .timeout = 30) {
  weft_test_env_timeout(10);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.numRmaCtx = 0;
  ncclComm_t comm = one_rank(&cfg, ncclSuccess);
  cr_assert_not_null(comm);
  cr_expect_eq(self_put(comm), ncclInvalidArgument);
  cr_expect(!host_rma(comm), "hostRmaSupport with numRmaCtx=0");
  // Collectives are unaffected.
  int32_t one = 1, sum = 0;
  cr_expect_eq(ncclAllReduce(&one, &sum, 1, ncclInt32, ncclSum, comm, NULL), ncclSuccess);
  cr_expect_eq(sum, 1);
  // A split without a config inherits it; one with a config starts afresh.
  ncclComm_t child = NULL;
  cr_assert_eq(ncclCommSplit(comm, 0, 0, &child, NULL), ncclSuccess);
  cr_expect_eq(self_put(child), ncclInvalidArgument, "a NULL config must inherit numRmaCtx=0");
  cr_expect_eq(ncclCommDestroy(child), ncclSuccess);
  ncclConfig_t fresh = NCCL_CONFIG_INITIALIZER;
  fresh.numRmaCtx = 2;  // more than one context: accepted, ctx 0 is the one
  cr_assert_eq(ncclCommSplit(comm, 0, 0, &child, &fresh), ncclSuccess);
  cr_expect_eq(self_put(child), ncclSuccess);
  cr_expect(host_rma(child));
  cr_expect_eq(ncclCommDestroy(child), ncclSuccess);
  cr_expect_eq(ncclCommDestroy(comm), ncclSuccess);
}

Test(config, graph_knobs_and_max_p2p_peers_are_accepted, .timeout = 30) {
  weft_test_env_timeout(10);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.graphUsageMode = 0;
  cfg.graphStreamOrdering = 0;
  cfg.maxP2pPeers = 1;
  ncclComm_t comm = one_rank(&cfg, ncclSuccess);
  cr_assert_not_null(comm);
  float x = 2.0f, y = 0.0f;
  cr_expect_eq(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, NULL), ncclSuccess);
  cr_expect_eq(y, 2.0f);
  cr_expect_eq(ncclCommDestroy(comm), ncclSuccess);
  // graphStreamOrdering=0 with graph mixing (graphUsageMode 2, the default)
  // falls back to 1 with a WARN, as in NCCL: accepted.
  ncclConfig_t mix = NCCL_CONFIG_INITIALIZER;
  mix.graphStreamOrdering = 0;
  comm = one_rank(&mix, ncclSuccess);
  cr_assert_not_null(comm);
  cr_expect_eq(ncclCommDestroy(comm), ncclSuccess);
}

Test(config, query_properties_checks_its_struct, .timeout = 30) {
  weft_test_env_timeout(10);
  ncclComm_t comm = one_rank(NULL, ncclSuccess);
  cr_assert_not_null(comm);
  ncclCommProperties_t p = NCCL_COMM_PROPERTIES_INITIALIZER;
  cr_expect_eq(ncclCommQueryProperties(comm, NULL), ncclInvalidArgument);
  cr_expect_eq(ncclCommQueryProperties(NULL, &p), ncclInvalidArgument);
  p.magic = 0;
  cr_expect_eq(ncclCommQueryProperties(comm, &p), ncclInvalidUsage);
  ncclCommProperties_t q = NCCL_COMM_PROPERTIES_INITIALIZER;
  q.version = NCCL_VERSION(2, 99, 0);  // from a newer header than the library
  cr_expect_eq(ncclCommQueryProperties(comm, &q), ncclInvalidUsage);
  ncclCommProperties_t ok = NCCL_COMM_PROPERTIES_INITIALIZER;
  cr_expect_eq(ncclCommQueryProperties(comm, &ok), ncclSuccess);
  cr_expect(ok.rank == 0 && ok.nRanks == 1 && ok.nLsaTeams == 1 && ok.hostRmaSupport,
            "rank %d nRanks %d nLsaTeams %d hostRmaSupport %d", ok.rank, ok.nRanks, ok.nLsaTeams, ok.hostRmaSupport);
  // A 2.29.3 caller's struct gets only the fields it had.
  ncclCommProperties_t old = NCCL_COMM_PROPERTIES_INITIALIZER;
  old.version = NCCL_VERSION(2, 29, 3);
  old.nLsaTeams = -7;
  cr_expect_eq(ncclCommQueryProperties(comm, &old), ncclSuccess);
  cr_expect(old.nRanks == 1 && old.nLsaTeams == -7, "nRanks %d nLsaTeams %d", old.nRanks, old.nLsaTeams);
  cr_expect_eq(ncclCommDestroy(comm), ncclSuccess);
}
