/*
 * test_group_simulate.c — ncclGroupSimulateEnd prices a group with the
 * cost model the tuner uses, calibrated by the tuning file weft-calibrate
 * writes (WEFT_TUNE_FILE), and runs nothing.
 *
 * Two forked ranks simulate the same groups under two tuning files whose
 * shared-memory bandwidths differ tenfold: a bandwidth-bound AllReduce must
 * be priced near its bytes over that bandwidth, ten times apart, a small
 * one far below it, and a Send/Recv pair as one transfer.
 */
#include <criterion/criterion.h>

#include "harness.h"

enum { BIG = 16 << 20, SMALL = 256 };  // floats: 64 MiB and 1 KiB

typedef struct {
  float big[2], small[2], p2p[2];  // estimatedTime per rank
  int ran[2];                      // the simulated AllReduce left the buffer alone
} sim_out_t;

static sim_out_t *out;

static float simulate(ncclComm_t comm, int kind, float *buf, size_t count, int peer) {
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  WEFT_TEST_CHECK_RES(ncclGroupStart(), ncclSuccess);
  if (kind == 0) {
    WEFT_TEST_CHECK_RES(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, NULL), ncclSuccess);
  } else {
    WEFT_TEST_CHECK_RES(ncclSend(buf, count, ncclFloat32, peer, comm, NULL), ncclSuccess);
    WEFT_TEST_CHECK_RES(ncclRecv(buf + count, count, ncclFloat32, peer, comm, NULL), ncclSuccess);
  }
  WEFT_TEST_CHECK_RES(ncclGroupSimulateEnd(&info), ncclSuccess);
  return info.estimatedTime;
}

static int body(int rank, int nranks, ncclUniqueId *ids, void *arg) {
  (void)arg;
  ncclComm_t comm = NULL;
  WEFT_TEST_CHECK_RES(ncclCommInitRank(&comm, nranks, ids[0], rank), ncclSuccess);
  if (comm == NULL) return weft_test_failures();
  float *buf = malloc((size_t)BIG * 2 * sizeof(float));
  WEFT_TEST_CHECK(buf != NULL, "malloc");
  if (buf == NULL) return weft_test_failures();
  buf[0] = 1.0f;
  out->big[rank] = simulate(comm, 0, buf, BIG, 0);
  out->small[rank] = simulate(comm, 0, buf, SMALL, 0);
  out->p2p[rank] = simulate(comm, 1, buf, BIG, 1 - rank);
  out->ran[rank] = buf[0] != 1.0f;
  // The communicator still works after simulated groups.
  WEFT_TEST_CHECK_RES(ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, comm, NULL), ncclSuccess);
  WEFT_TEST_CHECK(buf[0] == 2.0f, "rank %d: all-reduce after simulation gave %g", rank, buf[0]);
  free(buf);
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  return weft_test_failures();
}

// Runs the two ranks with shared memory at `gbps` GB/s and 1 us per message.
static sim_out_t run_with_bandwidth(double gbps) {
  char path[] = "/tmp/weft-simtune-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  FILE *f = fdopen(fd, "w");
  cr_assert_not_null(f);
  fprintf(f, "intra 1.0 %g\ninter 25 1.2\n", gbps);
  fclose(f);
  setenv("WEFT_TUNE_FILE", path, 1);  // read once by each forked rank
  out = weft_test_shared_alloc(sizeof(*out));
  cr_assert_not_null(out);
  WEFT_TEST_EXPECT_FORK_OK(2, 1, body, NULL, 30);
  sim_out_t got = *out;
  weft_test_shared_free(out, sizeof(*out));
  unsetenv("WEFT_TUNE_FILE");
  unlink(path);
  return got;
}

Test(group_simulate, prices_with_the_calibrated_cost_model, .timeout = 60) {
  weft_test_env_timeout(20);
  sim_out_t slow = run_with_bandwidth(1.0), fast = run_with_bandwidth(10.0);
  double bytes = (double)BIG * sizeof(float);
  for (int r = 0; r < 2; r++) {
    cr_log_info("rank %d: 64 MiB all-reduce %.4f s at 1 GB/s, %.4f s at 10 GB/s; 1 KiB %.2e s; "
                "64 MiB send+recv %.4f s at 1 GB/s", r, slow.big[r], fast.big[r], slow.small[r], slow.p2p[r]);
    cr_expect_eq(slow.ran[r] + fast.ran[r], 0, "rank %d: a simulated group ran", r);
    // Every algorithm moves at least the buffer once over the link: bytes / bandwidth, and not much more than 2x.
    cr_expect(slow.big[r] >= 0.5 * bytes / 1e9 && slow.big[r] <= 4 * bytes / 1e9,
              "rank %d: 64 MiB at 1 GB/s priced %.4f s", r, slow.big[r]);
    double ratio = slow.big[r] / fast.big[r];
    cr_expect(ratio > 7 && ratio < 13, "rank %d: ten times the bandwidth gave %.2f times the speed", r, ratio);
    cr_expect(slow.small[r] > 0 && slow.small[r] < 1e-3, "rank %d: 1 KiB priced %.2e s", r, slow.small[r]);
    // A send and a receive of 64 MiB each: one transfer each way over the link.
    cr_expect(slow.p2p[r] >= bytes / 1e9 && slow.p2p[r] <= 3 * bytes / 1e9,
              "rank %d: send+recv of 64 MiB at 1 GB/s priced %.4f s", r, slow.p2p[r]);
    cr_expect_float_eq(slow.big[r], slow.big[1 - r], 1e-6, "the ranks price the same group alike");
  }
}
