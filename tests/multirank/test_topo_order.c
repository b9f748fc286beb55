/*
 * test_topo_order.c — the communicator's ring follows the machine.
 *
 * Ranks sit where a topology file (NCCL_TOPO_FILE) says their CPUs or GPUs
 * are, and each test checks the ring weft logs (NCCL's "Channel 00/01 :"
 * line on rank 0, "Ring 00 : prev -> rank -> next" on every rank) against
 * what the machine calls for, and that every collective is still exact in
 * that order under each algorithm that follows it:
 *   - host-memory ranks bound alternately to the CPUs of two NUMA nodes
 *     (this machine's CPUs 0 and 1, described as two sockets): each socket's
 *     ranks side by side, so the ring crosses the socket link once each way;
 *   - ranks driving GPUs (the stand-in CUDA driver's devices, seated by
 *     FAKE_CUDA_BUSIDS on the GPUs of tests/topologies/pcie-8gpu.xml in a
 *     scrambled order): the GPUs of each PCI switch side by side, each
 *     socket's switches together;
 *   - ranks that sit alike (all unbound): rank order, as before;
 *   - the same two sockets under the NUMA-hierarchical AllReduce (numa:
 *     reduce inside each socket, exchange across, gather inside), forced
 *     and chosen by the tuner, and forced where the sockets hold unequal
 *     ranks (weft's own choice instead): AllReduce sum of every datatype,
 *     in and out of place, exact.
 */
#include <criterion/criterion.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_driver.h"
#include "harness.h"
#include "rank_logs.h"
#include "nccl.h"

#define MAX_N 8

typedef struct {
  int cpu_of_rank;  // bind rank r to CPU r % 2 (1), or leave it unbound (0)
  int gpus;         // use the stand-in driver's device r (1)
  int sums;         // run check_sums instead of check_collectives (1)
  char log_dir[256];
} setup_t;

// Two NUMA nodes holding this machine's CPU 0 and CPU 1, a NIC on the second.
static const char two_sockets_xml[] =
    "<system version=\"1\">\n"
    "  <cpu numaid=\"0\" affinity=\"00000001\" arch=\"x86_64\" vendor=\"AuthenticAMD\" familyid=\"25\" modelid=\"1\"/>\n"
    "  <cpu numaid=\"1\" affinity=\"00000002\" arch=\"x86_64\" vendor=\"AuthenticAMD\" familyid=\"25\" modelid=\"1\">\n"
    "    <pci busid=\"0000:41:00.0\" class=\"0x020000\" vendor=\"0x15b3\" device=\"0x1021\" link_speed=\"16.0 GT/s PCIe\""
    " link_width=\"16\">\n"
    "      <nic><net name=\"mlx5_0\" dev=\"0\" speed=\"200000\" port=\"1\" guid=\"0x1\" maxconn=\"131072\" gdr=\"0\"/></nic>\n"
    "    </pci>\n"
    "  </cpu>\n"
    "</system>\n";

static void make_log_dir(setup_t *s) {
  cr_assert_eq(weft_test_log_per_rank(s->log_dir, sizeof(s->log_dir), "weft-topo-order", "INFO", "INIT,GRAPH"), 0);
}

// The ring rank 0 logged: ring[0..n-1], or -1 when not found.
static int logged_ring(const char *dir, int *ring, int n) {
  char rest[512];
  if (!weft_test_log_line(dir, "Channel 00/01 :", rest, sizeof(rest))) return -1;
  int k = 0;
  for (char *p = rest, *end; k < n; p = end) {
    long v = strtol(p, &end, 10);
    if (end == p) break;
    ring[k++] = (int)v;
  }
  return k;
}

// Every collective of every ring-ordered algorithm, small (the LL path) and
// large, exact.
static int check_collectives(ncclComm_t comm, int rank, int n) {
  static const size_t counts[] = {3, 1000, 70000};
  for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
    size_t c = counts[ci];
    int *in = malloc(sizeof(int) * c * n), *out = malloc(sizeof(int) * c * n);
    if (in == NULL || out == NULL) return 1;
    for (size_t i = 0; i < c * n; i++) in[i] = (int)(rank * 100003 + i);
    WEFT_TEST_CHECK_RES(ncclAllReduce(in, out, c, ncclInt32, ncclSum, comm, NULL), ncclSuccess);
    for (size_t i = 0; i < c; i++) {
      long want = 0;
      for (int r = 0; r < n; r++) want += r * 100003 + (long)i;
      if (out[i] != (int)want) {
        WEFT_TEST_CHECK(0, "AllReduce count %zu: element %zu is %d, not %ld", c, i, out[i], want);
        break;
      }
    }
    WEFT_TEST_CHECK_RES(ncclAllGather(in, out, c, ncclInt32, comm, NULL), ncclSuccess);
    for (int r = 0; r < n; r++)
      if (out[(size_t)r * c] != r * 100003 || out[(size_t)r * c + c - 1] != r * 100003 + (int)c - 1)
        WEFT_TEST_CHECK(0, "AllGather count %zu: block %d wrong", c, r);
    WEFT_TEST_CHECK_RES(ncclReduceScatter(in, out, c, ncclInt32, ncclSum, comm, NULL), ncclSuccess);
    for (size_t i = 0; i < c; i++) {
      long want = 0;
      for (int r = 0; r < n; r++) want += r * 100003 + (long)(rank * c + i);
      if (out[i] != (int)want) {
        WEFT_TEST_CHECK(0, "ReduceScatter count %zu: element %zu is %d, not %ld", c, i, out[i], want);
        break;
      }
    }
    for (int root = 0; root < n; root += n - 1) {
      WEFT_TEST_CHECK_RES(ncclBroadcast(in, out, c, ncclInt32, root, comm, NULL), ncclSuccess);
      if (out[0] != root * 100003 || out[c - 1] != root * 100003 + (int)c - 1)
        WEFT_TEST_CHECK(0, "Broadcast count %zu from %d wrong", c, root);
      WEFT_TEST_CHECK_RES(ncclReduce(in, out, c, ncclInt32, ncclSum, root, comm, NULL), ncclSuccess);
      long want = 0;
      for (int r = 0; r < n; r++) want += r * 100003;
      if (rank == root && out[0] != (int)want) WEFT_TEST_CHECK(0, "Reduce count %zu to %d wrong", c, root);
    }
    free(in);
    free(out);
  }
  return 0;
}

// AllReduce sum of every datatype, out of place and in place, small (one
// hop or forced numa) and large: element i of rank r is (r + i) % 3, so
// every partial sum of 4 ranks is an integer up to 8, exact in each type.
static int check_sums(ncclComm_t comm, int rank, int n) {
  static const size_t counts[] = {1, 1000, 70000};
  for (int dt = 0; dt < ncclNumTypes; dt++)
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
      const weft_test_dtype_t *t = weft_test_dtype((ncclDataType_t)dt);
      size_t c = counts[ci];
      unsigned char *in = malloc(c * t->size), *out = malloc(c * t->size);
      if (in == NULL || out == NULL) return 1;
      for (int inplace = 0; inplace < 2; inplace++) {
        unsigned char *dst = inplace ? in : out;
        for (size_t i = 0; i < c; i++)
          weft_test_store(in + i * t->size, t->size, weft_test_encode_int(t, (rank + (long)i) % 3));
        WEFT_TEST_CHECK_RES(ncclAllReduce(in, dst, c, (ncclDataType_t)dt, ncclSum, comm, NULL), ncclSuccess);
        for (size_t i = 0; i < c; i++) {
          long want = 0;
          for (int r = 0; r < n; r++) want += (r + (long)i) % 3;
          uint64_t got = weft_test_load(dst + i * t->size, t->size);
          if (got != weft_test_encode_int(t, want)) {
            WEFT_TEST_CHECK(0, "%s AllReduce count %zu %s: element %zu is %g, not %ld", t->name, c,
                            inplace ? "in place" : "out of place", i, weft_test_value(t, got), want);
            break;
          }
        }
      }
      free(in);
      free(out);
    }
  return 0;
}

static int rank_main(int rank, int n, ncclUniqueId id, void *arg) {
  const setup_t *s = arg;
  if (s->cpu_of_rank) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(rank % 2, &set);
    WEFT_TEST_CHECK(sched_setaffinity(0, sizeof(set), &set) == 0, "bind to CPU %d", rank % 2);
  }
  if (s->gpus) {
    tcu_t cu;
    WEFT_TEST_CHECK(tcu_open(&cu) == 0 && tcu_use_device(&cu, rank) == 0, "device %d", rank);
  }
  ncclComm_t comm = weft_test_init_rank(n, id, rank);
  if (comm == NULL) return weft_test_failures();
  if (s->sums)
    check_sums(comm, rank, n);
  else
    check_collectives(comm, rank, n);
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  return weft_test_failures();
}

static void run(setup_t *s, int n, const char *algo) {
  if (algo != NULL) setenv("NCCL_ALGO", algo, 1);
  cr_assert_eq(weft_test_fork_ranks(n, rank_main, s, 120), 0, "ranks failed (NCCL_ALGO=%s)", algo ? algo : "");
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f, "%s", path);
  fputs(text, f);
  fclose(f);
}

// Ranks 0 and 2 on socket 0, 1 and 3 on socket 1: each socket's pair side by
// side in the ring (it crosses the socket link once each way).
static void two_sockets(const char *algo) {
  weft_test_env_defaults();
  setup_t s = {.cpu_of_rank = 1};
  make_log_dir(&s);
  char topo[600];
  snprintf(topo, sizeof(topo), "%s/two-sockets.xml", s.log_dir);
  write_file(topo, two_sockets_xml);
  setenv("NCCL_TOPO_FILE", topo, 1);
  run(&s, 4, algo);
  int ring[4];
  cr_assert_eq(logged_ring(s.log_dir, ring, 4), 4, "rank 0 logged no ring of 4 (logs in %s)", s.log_dir);
  cr_expect_eq(ring[0], 0, "NCCL's channel line starts at rank 0");
  int crossings = 0;
  for (int p = 0; p < 4; p++) crossings += ring[p] % 2 != ring[(p + 1) % 4] % 2;
  cr_expect_eq(crossings, 2, "ring %d %d %d %d crosses the socket link %d times", ring[0], ring[1], ring[2], ring[3],
               crossings);
  char rest[256];
  cr_expect(weft_test_log_line(s.log_dir, "Ring 00 : ", rest, sizeof(rest)), "no Ring line");
  cr_expect(weft_test_log_line(s.log_dir, "Trees [0] ", rest, sizeof(rest)), "no Trees line");
  weft_test_logs_remove(s.log_dir);
}

Test(topo_order, two_sockets_default, .timeout = 150) { two_sockets(NULL); }
Test(topo_order, two_sockets_ring, .timeout = 150) { two_sockets("ring"); }
Test(topo_order, two_sockets_tree, .timeout = 150) { two_sockets("tree"); }
Test(topo_order, two_sockets_recursive, .timeout = 150) { two_sockets("recursive"); }

// n ranks bound alternately to the two sockets, every datatype's sum under
// NCCL_ALGO=algo (NULL: the tuner's choice); whether the ranks saw two NUMA
// groups (the communicator's GRAPH line).
static int two_sockets_sums(int n, const char *algo) {
  weft_test_env_defaults();
  setup_t s = {.cpu_of_rank = 1, .sums = 1};
  make_log_dir(&s);
  char topo[600], rest[256];
  snprintf(topo, sizeof(topo), "%s/two-sockets.xml", s.log_dir);
  write_file(topo, two_sockets_xml);
  setenv("NCCL_TOPO_FILE", topo, 1);
  run(&s, n, algo);
  int grouped = weft_test_log_line(s.log_dir, "NUMA group ", rest, sizeof(rest));
  weft_test_logs_remove(s.log_dir);
  return grouped;
}

// 2 + 2 ranks: the tuner takes numa for the large calls (test_algos_numa.c).
Test(topo_order, two_sockets_numa_default, .timeout = 150) {
  cr_expect(two_sockets_sums(4, NULL), "the ranks did not see two NUMA groups");
}
Test(topo_order, two_sockets_numa_forced, .timeout = 150) { two_sockets_sums(4, "numa"); }
// 2 + 1 ranks: numa cannot run; weft's own choice, exact all the same.
Test(topo_order, two_sockets_numa_uneven, .timeout = 150) { two_sockets_sums(3, "numa"); }

// Unbound ranks sit alike: rank order, whatever the file says.
Test(topo_order, unbound_ranks_keep_rank_order, .timeout = 150) {
  weft_test_env_defaults();
  setup_t s = {0};
  make_log_dir(&s);
  char topo[600];
  snprintf(topo, sizeof(topo), "%s/two-sockets.xml", s.log_dir);
  write_file(topo, two_sockets_xml);
  setenv("NCCL_TOPO_FILE", topo, 1);
  run(&s, 4, NULL);
  int ring[4];
  cr_assert_eq(logged_ring(s.log_dir, ring, 4), 4);
  for (int p = 0; p < 4; p++) cr_expect_eq(ring[p], p, "position %d holds rank %d", p, ring[p]);
  weft_test_logs_remove(s.log_dir);
}

// Eight ranks on the eight GPUs of a two-socket PCIe server, device d of
// rank d seated on the GPUs in the order below: switches A (0000:12, 13)
// and B (52, 53) on socket 0, C (92, 93) and D (d2, d3) on socket 1.
Test(topo_order, pcie_gpus_follow_switches, .timeout = 200) {
  weft_test_env_defaults();
  static const char *seat[MAX_N] = {"0000:12:00.0", "0000:52:00.0", "0000:92:00.0", "0000:d2:00.0",
                                    "0000:13:00.0", "0000:53:00.0", "0000:93:00.0", "0000:d3:00.0"};
  static const int sw[MAX_N] = {0, 1, 2, 3, 0, 1, 2, 3};  // the switch of each rank's GPU
  char list[256] = "";
  for (int r = 0; r < MAX_N; r++) snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", r ? "," : "", seat[r]);
  setenv("FAKE_CUDA_BUSIDS", list, 1);
  setenv("FAKE_CUDA_DEVICES", "8", 1);
  tcu_use_fake_driver();
  setenv("NCCL_TOPO_FILE", "tests/topologies/pcie-8gpu.xml", 1);
  setup_t s = {.gpus = 1};
  make_log_dir(&s);
  run(&s, MAX_N, NULL);
  int ring[MAX_N];
  cr_assert_eq(logged_ring(s.log_dir, ring, MAX_N), MAX_N, "rank 0 logged no ring of 8 (logs in %s)", s.log_dir);
  int switch_changes = 0, socket_changes = 0;
  for (int p = 0; p < MAX_N; p++) {
    int a = sw[ring[p]], z = sw[ring[(p + 1) % MAX_N]];
    switch_changes += a != z;
    socket_changes += a / 2 != z / 2;
  }
  cr_expect_eq(switch_changes, 4, "the ring leaves a PCI switch %d times (4: each switch's GPUs together)",
               switch_changes);
  cr_expect_eq(socket_changes, 2, "the ring crosses sockets %d times (2: once each way)", socket_changes);
  char rest[256];
  cr_expect(weft_test_log_line(s.log_dir, "reordered by the topology", rest, sizeof(rest)), "no rank said it was reordered");
  weft_test_logs_remove(s.log_dir);
}
