/*
 * test_topo_bind.c — WEFT_BIND: the CPUs each local rank gets on the test
 * topologies (pure function), SMT siblings kept together, bad arguments,
 * binding this process at init and reading the binding back, and the
 * NCCL_TOPO_DUMP_FILE written at communicator init loading back.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env.h"
#include "nccl.h"
#include "topo.h"

static weft_topo_t *load(const char *path) {
  char err[512] = "";
  weft_topo_t *t = weft_topo_load_xml(path, err, sizeof(err));
  cr_assert_not_null(t, "%s: %s", path, err);
  return t;
}

static void plan(const weft_topo_t *t, int r, int n, weft_topo_bind_t *b) {
  char err[256] = "";
  cr_assert_eq(weft_topo_bind_plan(t, r, n, NULL, 0, b, err, sizeof(err)), 0, "%s", err);
}

static int all_parity(const weft_topo_bind_t *b, int parity) {
  for (int i = 0; i < b->ncpus; i++)
    if (b->cpus[i] % 2 != parity) return 0;
  return 1;
}

// cpu-2socket.xml: 20 cores per socket, even cores on socket 0, odd on 1;
// one NIC on socket 0.
Test(topo_bind, cpu_2socket_spreads_over_sockets, .timeout = 30) {
  weft_topo_t *t = load("tests/topologies/cpu-2socket.xml");
  weft_topo_bind_t b;
  for (int r = 0; r < 2; r++) { // 2 ranks: one per socket, the whole socket
    plan(t, r, 2, &b);
    cr_expect_eq(b.ncpus, 20);
    cr_expect_eq(b.numa, r);
    cr_expect(all_parity(&b, r), "rank %d got the other socket's cores", r);
    cr_expect_eq(b.gpu, -1);
    cr_expect_eq(b.nic, -1);
    weft_topo_bind_free(&b);
  }
  // 4 ranks: two per socket, 10 consecutive cores each.
  int expect_first[4] = {0, 20, 1, 21};
  for (int r = 0; r < 4; r++) {
    plan(t, r, 4, &b);
    cr_expect_eq(b.ncpus, 10, "rank %d", r);
    cr_expect_eq(b.numa, r / 2);
    cr_expect_eq(b.cpus[0], expect_first[r], "rank %d starts at %d", r, b.cpus[0]);
    cr_expect_eq(b.share, r % 2);
    cr_expect_eq(b.sharers, 2);
    weft_topo_bind_free(&b);
  }
  // One rank: it sits next to the NIC (socket 0).
  plan(t, 0, 1, &b);
  cr_expect_eq(b.ncpus, 20);
  cr_expect_eq(b.numa, 0);
  cr_expect_geq(b.nic, 0);
  weft_topo_bind_free(&b);
  // 3 ranks: rank 0 on socket 0, ranks 1 and 2 share socket 1; no overlap.
  int used[64] = {0};
  for (int r = 0; r < 3; r++) {
    plan(t, r, 3, &b);
    cr_expect_eq(b.numa, r == 0 ? 0 : 1, "rank %d numa %d", r, b.numa);
    cr_expect_eq(b.ncpus, r == 0 ? 20 : 10, "rank %d", r);
    for (int i = 0; i < b.ncpus; i++) cr_expect_eq(used[b.cpus[i]]++, 0, "cpu %d given twice", b.cpus[i]);
    weft_topo_bind_free(&b);
  }
  // 80 ranks on 40 cores: every rank gets one core, each core two ranks.
  for (int r = 0; r < 80; r++) {
    plan(t, r, 80, &b);
    cr_expect_eq(b.ncpus, 1);
    weft_topo_bind_free(&b);
  }
  weft_topo_free(t);
}

// dgx-h100.xml: GPUs 0-3 on socket 0, 4-7 on socket 1.
Test(topo_bind, dgx_h100_ranks_sit_by_their_gpu, .timeout = 30) {
  weft_topo_t *t = load("tests/topologies/dgx-h100.xml");
  weft_topo_bind_t b;
  int prev_numa = -1, ncpu0 = 0;
  for (int r = 0; r < 8; r++) {
    plan(t, r, 8, &b);
    cr_assert_geq(b.gpu, 0);
    cr_expect_eq(b.numa, t->nodes[b.gpu].numa, "rank %d", r);
    cr_expect_eq(b.sharers, 4);
    cr_expect_eq(b.share, r % 4);
    if (r == 0) ncpu0 = b.ncpus;
    cr_expect_eq(b.ncpus, ncpu0, "equal shares");
    cr_expect_geq(b.numa, prev_numa);
    prev_numa = b.numa;
    weft_topo_bind_free(&b);
  }
  cr_expect_eq(prev_numa, 1);
  weft_topo_free(t);
}

Test(topo_bind, smt_siblings_stay_together, .timeout = 30) {
  // 1 socket, 4 cores x 2 threads, Linux numbering: CPU c and c+4 are siblings.
  const char *xml = "<system version=\"1\"><cpu numaid=\"0\" affinity=\"000000ff\" arch=\"x86_64\" "
                    "vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"85\"/></system>";
  char err[256] = "";
  weft_topo_t *t = weft_topo_load_xml_mem(xml, strlen(xml), "smt", err, sizeof(err));
  cr_assert_not_null(t, "%s", err);
  int core_of[8] = {0, 1, 2, 3, 0, 1, 2, 3};
  weft_topo_bind_t b;
  cr_assert_eq(weft_topo_bind_plan(t, 1, 2, core_of, 8, &b, err, sizeof(err)), 0, "%s", err);
  cr_assert_eq(b.ncpus, 4);
  int want[4] = {2, 3, 6, 7};
  for (int i = 0; i < 4; i++) cr_expect_eq(b.cpus[i], want[i]);
  char list[64];
  weft_topo_cpulist(b.cpus, b.ncpus, list, sizeof(list));
  cr_expect_str_eq(list, "2-3,6-7");
  weft_topo_bind_free(&b);
  weft_topo_free(t);
}

Test(topo_bind, bad_arguments_are_refused, .timeout = 30) {
  weft_topo_t *t = load("tests/topologies/cpu-2socket.xml");
  weft_topo_bind_t b;
  char err[256] = "";
  cr_expect_eq(weft_topo_bind_plan(t, 2, 2, NULL, 0, &b, err, sizeof(err)), -1);
  cr_expect(strstr(err, "local rank 2 of 2") != NULL, "%s", err);
  cr_expect_eq(weft_topo_bind_plan(t, 0, 0, NULL, 0, &b, err, sizeof(err)), -1);
  cr_expect_null(b.cpus);
  weft_topo_free(t);
  const char *xml = "<system version=\"1\"><cpu numaid=\"0\"/></system>"; // no affinity
  t = weft_topo_load_xml_mem(xml, strlen(xml), "no-affinity", err, sizeof(err));
  cr_assert_not_null(t, "%s", err);
  cr_expect_eq(weft_topo_bind_plan(t, 0, 1, NULL, 0, &b, err, sizeof(err)), -1);
  cr_expect(strstr(err, "no CPU affinity") != NULL, "%s", err);
  weft_topo_free(t);
}

// This machine: what WEFT_BIND does at init is what the plan says, and the
// process's binding reads back as that.
Test(topo_bind, init_binds_this_process, .timeout = 60) {
  setenv("WEFT_BIND", "1", 1);
  unsetenv("NCCL_TOPO_FILE");
  unsetenv("NCCL_TOPO_DUMP_FILE");
  weft_env_reset();
  char err[512] = "";
  const weft_topo_t *t = weft_topo_system(err, sizeof(err));
  cr_assert_not_null(t, "%s", err);
  int *core_of = NULL, ncore = weft_topo_core_map(&core_of);
  weft_topo_bind_t b;
  cr_assert_eq(weft_topo_bind_plan(t, 1, 2, core_of, ncore, &b, err, sizeof(err)), 0, "%s", err);
  free(core_of);
  cr_assert_eq(weft_topo_comm_init(1, 2, 1), 0);
  weft_topo_cpubind_t now;
  cr_assert_eq(weft_topo_cpubind_get(&now), 0);
  char want[256];
  weft_topo_cpulist(b.cpus, b.ncpus, want, sizeof(want));
  cr_expect_str_eq(now.list, want);
  cr_expect_eq(now.ncpus, b.ncpus);
  weft_topo_bind_free(&b);
  // Ranks that are threads of one process are left alone.
  cr_assert_eq(weft_topo_comm_init(0, 2, 2), 0);
  cr_assert_eq(weft_topo_cpubind_get(&now), 0);
  cr_expect_str_eq(now.list, want);
  unsetenv("WEFT_BIND");
  weft_env_reset();
}

// NCCL_TOPO_DUMP_FILE at ncclCommInitAll: local rank 0 writes it; it loads
// back as the graph that NCCL_TOPO_FILE described.
Test(topo_bind, dump_at_init_loads_back, .timeout = 60) {
  char dump[] = "/tmp/weft-init-dump-XXXXXX", err[512] = "";
  int fd = mkstemp(dump);
  cr_assert_geq(fd, 0);
  close(fd);
  unlink(dump);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("WEFT_TIMEOUT", "20", 1);
  setenv("NCCL_TOPO_FILE", "tests/topologies/dgx-a100.xml", 1);
  setenv("NCCL_TOPO_DUMP_FILE", dump, 1);
  weft_env_reset();
  ncclComm_t comms[2];
  cr_assert_eq(ncclCommInitAll(comms, 2, NULL), ncclSuccess);
  for (int i = 0; i < 2; i++) ncclCommDestroy(comms[i]);
  weft_topo_t *a = load("tests/topologies/dgx-a100.xml"), *b = weft_topo_load_xml(dump, err, sizeof(err));
  cr_assert_not_null(b, "%s", err);
  char *sa = weft_topo_signature(a), *sb = weft_topo_signature(b);
  cr_expect_str_eq(sa, sb);
  free(sa), free(sb);
  weft_topo_free(a), weft_topo_free(b);
  unlink(dump);
  // An unwritable dump path fails init with a clear error.
  setenv("NCCL_TOPO_DUMP_FILE", "/nonexistent-dir/topo.xml", 1);
  weft_env_reset();
  cr_expect_neq(ncclCommInitAll(comms, 1, NULL), ncclSuccess);
  cr_expect(strstr(ncclGetLastError(NULL), "nonexistent-dir") != NULL, "%s", ncclGetLastError(NULL));
  unsetenv("NCCL_TOPO_FILE");
  unsetenv("NCCL_TOPO_DUMP_FILE");
  weft_env_reset();
}
