/*
 * test_plugins_tp.c — NCCL tuner and profiler plugins loaded into weft:
 * the example plugins from build/lib (plugins/tuner/example,
 * plugins/profiler/example) drive real collectives on forked ranks.
 *
 * Tuner: a CSV of overrides forces tree for small AllReduce calls and
 * Rabenseifner (PAT, Simple) for large ones; the TUNING log lines show the
 * plugin's choice and the results stay exact. A plugin that is missing, or
 * whose init fails, is reported with a WARN and the built-in tuner serves;
 * "none" loads nothing. Profiler: the Chrome trace each rank writes parses
 * as JSON and holds one Coll event per collective and one P2p event per
 * send or receive, with their names, also for calls on a weft stream.
 * Logs go to files (NCCL_DEBUG_FILE) in a scratch folder the test removes.
 */
#include <criterion/criterion.h>
#include <glob.h>
#include <limits.h>

#include "harness.h"

static char dir[64], lib[PATH_MAX], v4lib[PATH_MAX];  // scratch folder; absolute build/lib, build/tests/plugins

static void setup(void) {
  weft_test_env_defaults();
  snprintf(dir, sizeof(dir), "/tmp/weft-plugins-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  const char *b = getenv("WEFT_BUILD_DIR");
  char rel[PATH_MAX];
  snprintf(rel, sizeof(rel), "%s/lib", b != NULL ? b : "build");
  cr_assert_not_null(realpath(rel, lib), "no %s", rel);
  snprintf(rel, sizeof(rel), "%s/tests/plugins", b != NULL ? b : "build");
  cr_assert_not_null(realpath(rel, v4lib), "no %s", rel);
  char logs[128];
  snprintf(logs, sizeof(logs), "%s/log.%%p", dir);
  setenv("NCCL_DEBUG_FILE", logs, 1);
}

static void teardown(void) {
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  cr_expect_eq(system(cmd), 0);
}

// Lines of the folder's log files that contain `text`.
static int log_count(const char *text) {
  char pattern[128];
  snprintf(pattern, sizeof(pattern), "%s/log.*", dir);
  glob_t g;
  if (glob(pattern, 0, NULL, &g) != 0) return 0;
  int n = 0;
  char line[2048];
  for (size_t i = 0; i < g.gl_pathc; i++) {
    FILE *f = fopen(g.gl_pathv[i], "r");
    if (f == NULL) continue;
    while (fgets(line, sizeof(line), f) != NULL) n += strstr(line, text) != NULL;
    fclose(f);
  }
  globfree(&g);
  return n;
}

// AllReduce (sum, int32) of `count` elements, checked exactly.
static void allreduce_check(ncclComm_t comm, int rank, int nranks, size_t count, cudaStream_t stream) {
  int32_t *buf = malloc(count * sizeof(int32_t));
  WEFT_TEST_CHECK(buf != NULL, "malloc");
  if (buf == NULL) return;
  for (size_t i = 0; i < count; i++) buf[i] = (int32_t)(rank + 1) * (int32_t)(i % 1000);
  WEFT_TEST_CHECK_RES(ncclAllReduce(buf, buf, count, ncclInt32, ncclSum, comm, stream), ncclSuccess);
  if (stream != NULL) WEFT_TEST_CHECK_RES(weftStreamSynchronize(stream), ncclSuccess);
  size_t bad = 0;
  int32_t f = nranks * (nranks + 1) / 2;
  for (size_t i = 0; i < count; i++) bad += buf[i] != f * (int32_t)(i % 1000);
  WEFT_TEST_CHECK(bad == 0, "%zu of %zu elements wrong", bad, count);
  free(buf);
}

/* ---------- tuner ---------- */

static int tuner_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  (void)arg;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return weft_test_failures();
  allreduce_check(comm, rank, nranks, 1000, NULL);     // 4000 bytes
  allreduce_check(comm, rank, nranks, 100000, NULL);   // 400000 bytes
  allreduce_check(comm, rank, nranks, 1000, NULL);     // again: the same choice, not logged twice
  int32_t x[3] = {rank, rank, rank}, all[12];
  WEFT_TEST_CHECK_RES(ncclAllGather(x, all, 3, ncclInt32, comm, NULL), ncclSuccess);
  for (int r = 0; r < nranks; r++) WEFT_TEST_CHECK(all[3 * r] == r, "allgather[%d] = %d", 3 * r, all[3 * r]);
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  return weft_test_failures();
}

static void write_csv(const char *name, const char *text) {
  char path[128];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
  setenv("WEFT_TUNER_EXAMPLE_CSV", path, 1);
}

// nranks forked ranks run tuner_body with `plugin` (a name or a path),
// logging TUNING at INFO into the scratch folder.
static void run_tuner(const char *plugin, int nranks) {
  setenv("NCCL_TUNER_PLUGIN", plugin, 1);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "TUNING", 1);
  cr_assert_eq(weft_test_fork_ranks(nranks, tuner_body, NULL, 90), 0);
}

Test(plugins_tuner, csv_forces_algorithm, .init = setup, .fini = teardown, .timeout = 120) {
  write_csv("rules.csv",
            "# collective,minBytes,maxBytes,algorithm,protocol,channels,nNodes,nRanks\n"
            "allreduce,0,65536,tree,simple,-1,-1,3\n"
            "allreduce,65537,1000000000,pat,simple,2,-1,-1\n");
  run_tuner("example", 3);  // by name: libnccl-tuner-example.so beside libweft
  cr_expect_eq(log_count("tuner plugin 'weft-example' loaded (ncclTunerPlugin_v6)"), 3, "the newest version wins");
  cr_expect_eq(log_count("example tuner: 2 overrides"), 3);
  cr_expect_eq(log_count("tuner plugin: AllReduce of 4000 bytes, 3 ranks on 1 hosts: tree"), 3);
  cr_expect_eq(log_count("tuner plugin: AllReduce of 400000 bytes, 3 ranks on 1 hosts: rabenseifner"), 3);
  cr_expect_eq(log_count("weft has no channels"), 3);
  cr_expect_eq(log_count("AllGather of 36 bytes, 3 ranks on 1 hosts: unchanged"), 3);
}

Test(plugins_tuner, v4_plugin, .init = setup, .fini = teardown, .timeout = 120) {
  write_csv("rules.csv", "allreduce,0,65536,tree,simple,-1,-1,-1\n");
  char path[PATH_MAX + 64];
  snprintf(path, sizeof(path), "%s/libnccl-tuner-v4only.so", v4lib);
  run_tuner(path, 2);
  cr_expect_eq(log_count("loaded (ncclTunerPlugin_v4)"), 2);
  cr_expect_eq(log_count("tuner plugin: AllReduce of 4000 bytes, 2 ranks on 1 hosts: tree"), 2);
}

// Version 6's getChunkSize: smaller steps, exact results; a larger chunk is
// clamped to what weft's buffers allow.
Test(plugins_tuner, v6_chunk_size, .init = setup, .fini = teardown, .timeout = 120) {
  write_csv("rules.csv", "allreduce,0,65536,tree,simple,-1,-1,-1\n");
  setenv("WEFT_TUNER_EXAMPLE_CHUNK", "4096", 1);
  run_tuner("example", 2);
  cr_expect_eq(log_count("AllReduce of 400000 bytes: chunk 4096 bytes (asked 4096"), 2);
  cr_expect_eq(log_count("AllReduce of 4000 bytes: chunk 4096 bytes"), 2, "logged once per rank, not per call");
  unsetenv("WEFT_TUNER_EXAMPLE_CHUNK");
}

Test(plugins_tuner, v6_chunk_size_is_clamped, .init = setup, .fini = teardown, .timeout = 120) {
  write_csv("rules.csv", "# none\n");
  setenv("WEFT_TUNER_EXAMPLE_CHUNK", "1073741824", 1);
  run_tuner("example", 2);
  cr_expect_eq(log_count("(asked 1073741824, at most"), 6, "two AllReduce sizes and an AllGather on two ranks");
  cr_expect_eq(log_count("AllReduce of 4000 bytes: chunk 524288 bytes (asked 1073741824, at most 524288)"), 2,
               "the most is half a connection's buffer (8 of its 16 slots of 64 KiB)");
  cr_expect_eq(log_count("chunk 1073741824 bytes"), 0);
  unsetenv("WEFT_TUNER_EXAMPLE_CHUNK");
}

Test(plugins_tuner, v2_plugin, .init = setup, .fini = teardown, .timeout = 120) {
  write_csv("rules.csv", "allreduce,0,65536,tree,simple,-1,-1,-1\nallreduce,65537,1000000000,pat,-1,-1,-1,-1\n");
  char path[PATH_MAX + 64];
  snprintf(path, sizeof(path), "%s/libnccl-tuner-v2only.so", v4lib);
  run_tuner(path, 2);
  cr_expect_eq(log_count("loaded (ncclTunerPlugin_v2)"), 2);
  cr_expect_eq(log_count("tuner plugin: AllReduce of 4000 bytes, 2 ranks on 1 hosts: tree"), 2);
  // PAT with Simple is rabenseifner (recursive doubling is PAT with LL).
  cr_expect_eq(log_count("tuner plugin: AllReduce of 400000 bytes, 2 ranks on 1 hosts: rabenseifner"), 2);
}

Test(plugins_tuner, rule_for_other_ranks_changes_nothing, .init = setup, .fini = teardown, .timeout = 120) {
  write_csv("rules.csv", "allreduce,0,65536,tree,simple,-1,-1,4\n");  // 4 ranks only
  run_tuner("example", 3);
  cr_expect_eq(log_count("AllReduce of 4000 bytes, 3 ranks on 1 hosts: unchanged"), 3);
  cr_expect_eq(log_count(": tree"), 0);
}

Test(plugins_tuner, nccl_algo_narrows_first, .init = setup, .fini = teardown, .timeout = 120) {
  // NCCL_ALGO takes tree away, so the plugin's 0 lands on an entry weft marked -1: weft's choice stands.
  write_csv("rules.csv", "allreduce,0,65536,tree,simple,-1,-1,-1\n");
  setenv("NCCL_ALGO", "ring,recursive,rabenseifner", 1);
  run_tuner("example", 2);
  cr_expect_eq(log_count("AllReduce of 4000 bytes, 2 ranks on 1 hosts: unchanged (weft's own choice: ring)"), 2);
}

Test(plugins_tuner, missing_plugin_falls_back, .init = setup, .fini = teardown, .timeout = 120) {
  setenv("NCCL_TUNER_PLUGIN", "no-such-tuner", 1);
  setenv("NCCL_DEBUG", "WARN", 1);
  cr_assert_eq(weft_test_fork_ranks(2, tuner_body, NULL, 90), 0);
  cr_expect_eq(log_count("tuner plugin 'no-such-tuner' could not be loaded"), 2);
}

Test(plugins_tuner, failed_init_falls_back, .init = setup, .fini = teardown, .timeout = 120) {
  char path[PATH_MAX + 64];
  snprintf(path, sizeof(path), "%s/libnccl-tuner-example.so", lib);  // by path
  setenv("NCCL_TUNER_PLUGIN", path, 1);
  setenv("WEFT_TUNER_EXAMPLE_CSV", "/nonexistent/rules.csv", 1);  // the example refuses to init
  setenv("NCCL_DEBUG", "WARN", 1);
  cr_assert_eq(weft_test_fork_ranks(2, tuner_body, NULL, 90), 0);
  cr_expect_eq(log_count("init failed"), 2);
  cr_expect_eq(log_count("uses the built-in tuner"), 2);
}

Test(plugins_tuner, none_loads_nothing, .init = setup, .fini = teardown, .timeout = 120) {
  setenv("NCCL_TUNER_PLUGIN", "none", 1);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT,TUNING", 1);
  cr_assert_eq(weft_test_fork_ranks(2, tuner_body, NULL, 90), 0);
  cr_expect_eq(log_count("tuner plugin disabled"), 2);
  cr_expect_eq(log_count("tuner plugin:"), 0);
  cr_expect_eq(log_count("WARN"), 0);
}

/* ---------- profiler ---------- */

enum { PROF_ALLREDUCE = 5, PROF_BCAST = 2 };

static int profiler_body(int rank, int nranks, ncclUniqueId id, void *arg) {
  int use_stream = arg != NULL;
  ncclComm_t comm = weft_test_init_rank(nranks, id, rank);
  if (comm == NULL) return weft_test_failures();
  cudaStream_t s = NULL;
  if (use_stream) WEFT_TEST_CHECK_RES(weftStreamCreate(&s), ncclSuccess);
  for (int i = 0; i < PROF_ALLREDUCE; i++) allreduce_check(comm, rank, nranks, 100 + 1000 * (size_t)i, s);
  double v[64];
  for (int i = 0; i < PROF_BCAST; i++) {
    for (int k = 0; k < 64; k++) v[k] = rank == 1 ? k : -1;
    WEFT_TEST_CHECK_RES(ncclBroadcast(v, v, 64, ncclFloat64, 1, comm, s), ncclSuccess);
    if (s != NULL) WEFT_TEST_CHECK_RES(weftStreamSynchronize(s), ncclSuccess);
    WEFT_TEST_CHECK(v[63] == 63, "broadcast gave %g", v[63]);
  }
  // A ring exchange in one group: one Send and one Recv event per rank, one Group.
  float out[16], in[16];
  for (int k = 0; k < 16; k++) out[k] = (float)rank;
  WEFT_TEST_CHECK_RES(ncclGroupStart(), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclSend(out, 16, ncclFloat32, (rank + 1) % nranks, comm, s), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclRecv(in, 16, ncclFloat32, (rank + nranks - 1) % nranks, comm, s), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclGroupEnd(), ncclSuccess);
  if (s != NULL) WEFT_TEST_CHECK_RES(weftStreamSynchronize(s), ncclSuccess);
  WEFT_TEST_CHECK(in[0] == (float)((rank + nranks - 1) % nranks), "received %g", in[0]);
  if (s != NULL) WEFT_TEST_CHECK_RES(weftStreamDestroy(s), ncclSuccess);
  WEFT_TEST_CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
  return weft_test_failures();
}

// Runs a checker over every trace file; returns its last line of output.
static void check_traces(int nranks, char *out, size_t len) {
  char cmd[1536];
  snprintf(cmd, sizeof(cmd),
           "python3 - %s <<'EOF'\n"
           "import glob, json, sys\n"
           "files = sorted(glob.glob(sys.argv[1] + '/trace-*.json'))\n"
           "res = [len(files)]\n"
           "for f in files:\n"
           "    ev = json.load(open(f))['traceEvents']\n"
           "    x = [e for e in ev if e.get('ph') == 'X']\n"
           "    n = lambda c, name=None: sum(1 for e in x if e['cat'] == c and (name is None or e['name'] == name))\n"
           "    ok = all(e['dur'] >= 0 and 'ts' in e for e in x)\n"
           "    algo = all(e['args'].get('algo') and e['args'].get('datatype', '').startswith('nccl')"
           " for e in x if e['cat'] == 'Coll')\n"
           "    res += [n('Coll', 'AllReduce'), n('Coll', 'Broadcast'), n('P2p', 'Send'), n('P2p', 'Recv'),"
           " n('Group'), n('CollApi'), int(ok and algo)]\n"
           "print(' '.join(map(str, res)))\n"
           "EOF\n",
           dir);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  out[0] = '\0';
  char line[512];
  while (fgets(line, sizeof(line), p) != NULL) snprintf(out, len, "%s", line);
  pclose(p);
  (void)nranks;
}

static void expect_traces(int nranks, int api_events) {
  char got[512], want[512] = "";
  check_traces(nranks, got, sizeof(got));
  // Per rank: 5 AllReduce, 2 Broadcast, 1 Send, 1 Recv; groups: one per collective + the p2p group.
  size_t at = (size_t)snprintf(want, sizeof(want), "%d", nranks);
  for (int r = 0; r < nranks; r++)
    at += (size_t)snprintf(want + at, sizeof(want) - at, " %d %d 1 1 %d %d 1", PROF_ALLREDUCE, PROF_BCAST,
                           PROF_ALLREDUCE + PROF_BCAST + 1, api_events ? PROF_ALLREDUCE + PROF_BCAST : 0);
  snprintf(want + at, sizeof(want) - at, "\n");
  cr_expect_str_eq(got, want);
}

static void profiler_env(void) {
  char path[PATH_MAX + 64];
  snprintf(path, sizeof(path), "%s/libnccl-profiler-example.so", lib);
  setenv("NCCL_PROFILER_PLUGIN", path, 1);
  setenv("WEFT_PROFILER_EXAMPLE_DIR", dir, 1);
  setenv("NCCL_DEBUG", "WARN", 1);
}

Test(plugins_profiler, chrome_trace_per_rank, .init = setup, .fini = teardown, .timeout = 120) {
  profiler_env();
  cr_assert_eq(weft_test_fork_ranks(3, profiler_body, NULL, 90), 0);
  expect_traces(3, 1);
  cr_expect_eq(log_count("WARN"), 0);
}

Test(plugins_profiler, calls_on_a_stream, .init = setup, .fini = teardown, .timeout = 120) {
  profiler_env();
  cr_assert_eq(weft_test_fork_ranks(2, profiler_body, (void *)1, 90), 0);
  expect_traces(2, 1);
}

Test(plugins_profiler, v4_plugin, .init = setup, .fini = teardown, .timeout = 120) {
  profiler_env();
  char path[PATH_MAX + 64];
  snprintf(path, sizeof(path), "%s/libnccl-profiler-v4only.so", v4lib);
  setenv("NCCL_PROFILER_PLUGIN", path, 1);
  cr_assert_eq(weft_test_fork_ranks(2, profiler_body, NULL, 90), 0);
  expect_traces(2, 0);  // v4 has no API events
}

Test(plugins_profiler, failed_init_falls_back, .init = setup, .fini = teardown, .timeout = 120) {
  profiler_env();
  setenv("WEFT_PROFILER_EXAMPLE_DIR", "/nonexistent/traces", 1);  // the example cannot write there
  cr_assert_eq(weft_test_fork_ranks(2, profiler_body, NULL, 90), 0);
  cr_expect_eq(log_count("init failed"), 2);
  cr_expect_eq(log_count("no profiler on rank"), 2);
}

Test(plugins_profiler, missing_plugin_falls_back, .init = setup, .fini = teardown, .timeout = 120) {
  setenv("NCCL_PROFILER_PLUGIN", "no-such-profiler", 1);
  setenv("NCCL_DEBUG", "WARN", 1);
  cr_assert_eq(weft_test_fork_ranks(2, profiler_body, NULL, 90), 0);
  cr_expect_eq(log_count("profiler plugin 'no-such-profiler' could not be loaded"), 2);
}

// Three ranks as communicators of one process (ncclCommInitAll), driven by
// one thread in groups that span them: a Group event per communicator.
Test(plugins_profiler, one_thread_many_comms, .init = setup, .fini = teardown, .timeout = 120) {
  enum { N = 3, ITERS = 4, COUNT = 5000 };
  profiler_env();
  ncclComm_t comms[N];
  cr_assert_eq(ncclCommInitAll(comms, N, NULL), ncclSuccess);
  static float buf[N][COUNT];
  for (int it = 0; it < ITERS; it++) {
    for (int r = 0; r < N; r++)
      for (int i = 0; i < COUNT; i++) buf[r][i] = (float)(r + i % 7);
    cr_assert_eq(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < N; r++)
      cr_assert_eq(ncclAllReduce(buf[r], buf[r], COUNT, ncclFloat32, ncclSum, comms[r], NULL), ncclSuccess);
    cr_assert_eq(ncclGroupEnd(), ncclSuccess);
    for (int r = 0; r < N; r++) cr_expect_eq(buf[r][8], (float)(3 + 3 * 1), "rank %d: %g", r, buf[r][8]);
  }
  for (int r = 0; r < N; r++) cr_expect_eq(ncclCommDestroy(comms[r]), ncclSuccess);
  char got[512], want[512];
  check_traces(N, got, sizeof(got));
  size_t at = (size_t)snprintf(want, sizeof(want), "%d", N);
  for (int r = 0; r < N; r++) at += (size_t)snprintf(want + at, sizeof(want) - at, " %d 0 0 0 %d %d 1", ITERS, ITERS, ITERS);
  snprintf(want + at, sizeof(want) - at, "\n");
  cr_expect_str_eq(got, want);
}

// ProxyOp (one per lane of each operation) and ProxyStep (one per step)
// events when the plugin asks for them: per file, the steps recorded match
// the steps the ProxyOp events announce, and every operation has a ProxyOp.
Test(plugins_profiler, proxy_steps, .init = setup, .fini = teardown, .timeout = 120) {
  profiler_env();
  setenv("NCCL_PROFILE_EVENT_MASK", "0x61f", 1);
  cr_assert_eq(weft_test_fork_ranks(2, profiler_body, NULL, 90), 0);
  char cmd[1024];
  snprintf(cmd, sizeof(cmd),
           "python3 - %s <<'EOF'\n"
           "import glob, json, sys\n"
           "out = []\n"
           "for f in sorted(glob.glob(sys.argv[1] + '/trace-*.json')):\n"
           "    x = [e for e in json.load(open(f))['traceEvents'] if e.get('ph') == 'X']\n"
           "    ops = [e for e in x if e['cat'] == 'ProxyOp']\n"
           "    steps = sum(1 for e in x if e['cat'] == 'ProxyStep')\n"
           "    calls = sum(1 for e in x if e['cat'] in ('Coll', 'P2p'))\n"
           "    out.append(int(steps > 0 and steps == sum(e['args']['nSteps'] for e in ops) and len(ops) >= calls))\n"
           "print(' '.join(map(str, out)))\n"
           "EOF\n",
           dir);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  char line[256] = "";
  cr_expect_not_null(fgets(line, sizeof(line), p));
  pclose(p);
  cr_expect_str_eq(line, "1 1\n");
}
