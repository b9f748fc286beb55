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
 * send or receive, whose fields match the calls, also for calls on a weft
 * stream; at every ABI version (the example exports v6 ... v1; a build of
 * it exporting one older version each), with that version's events and
 * fields, and the log naming the version loaded.
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

// The checker of the example's trace files (argv: folder, ranks, ABI
// version, "body" for profiler_body's calls or "counts" for counts only).
// Prints the number of files, then per file (by rank) "abi:AllReduce,
// Broadcast,Send,Recv,Group,GroupApi,CollApi,P2pApi:ok" or the checks
// that failed instead of "ok": fields against the calls made, parents,
// each version's own fields (commHash, trafficBytes, op, ...).
static const char trace_checker[] =
    "import glob, json, sys\n"
    "d, n, v, body = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == 'body'\n"
    "files, out, hashes = glob.glob(d + '/trace-*.json'), [], set()\n"
    "for f in files:\n"
    "    ev = json.load(open(f))['traceEvents']\n"
    "    meta = [e for e in ev if e.get('ph') == 'M']\n"
    "    x = [e for e in ev if e.get('ph') == 'X']\n"
    "    rank, abi = meta[0]['pid'], meta[0]['args'].get('abi')\n"
    "    of = lambda c, name=None: [e for e in x if e['cat'] == c and (name is None or e['name'] == name)]\n"
    "    a = lambda e: e['args']\n"
    "    ar, bc, se, rc = of('Coll', 'AllReduce'), of('Coll', 'Broadcast'), of('P2p', 'Send'), of('P2p', 'Recv')\n"
    "    ga, ca, pa = of('GroupApi'), of('CollApi'), of('P2pApi')\n"
    "    bad = []\n"
    "    if abi != v: bad.append('abi')\n"
    "    if any(e['dur'] < 0 or e['pid'] != rank for e in x): bad.append('times')\n"
    "    if any(not a(e)['parent'] for e in ar + bc + se + rc): bad.append('parent')\n"
    "    if any(a(e)['algo'] in ('', '?', 'unknown') or a(e)['proto'] in ('', '?', 'unknown') for e in ar + bc):\n"
    "        bad.append('algo')\n"
    "    if v >= 5 and any(not a(e)['parent'] for e in ca + pa): bad.append('api-parent')\n"
    "    if v >= 5 and any(not (a(e)['startApiOver'] and a(e)['endApiBegun']) for e in ga): bad.append('api-states')\n"
    "    if body:\n"
    "        if sorted(a(e)['count'] for e in ar) != [100 + 1000 * i for i in range(5)]: bad.append('ar-count')\n"
    "        if any(a(e)['datatype'] != 'ncclInt32' or a(e)['root'] != 0 for e in ar): bad.append('ar-type')\n"
    "        if any((a(e)['count'], a(e)['datatype'], a(e)['root']) != (64, 'ncclFloat64', 1) for e in bc):\n"
    "            bad.append('bcast')\n"
    "        if any((a(e)['count'], a(e)['datatype']) != (16, 'ncclFloat32') for e in se + rc): bad.append('p2p')\n"
    "        if any(a(e)['peer'] != (rank + 1) % n for e in se) or \\\n"
    "                any(a(e)['peer'] != (rank + n - 1) % n for e in rc):\n"
    "            bad.append('peer')\n"
    "        if v >= 5 and sorted(a(e)['groupDepth'] for e in ga) != [1] * 7 + [2]: bad.append('depth')\n"
    "        if v >= 5 and sorted((e['name'], a(e)['count']) for e in ca) != sorted([('AllReduce', 100 + 1000 * i)\n"
    "                for i in range(5)] + [('Broadcast', 64)] * 2): bad.append('coll-api')\n"
    "    if v <= 3:\n"
    "        h = {a(e).get('commHash') for e in ar + bc + se + rc}\n"
    "        hashes |= h\n"
    "        if len(h) != 1 or None in h or '0' * 16 in h: bad.append('commHash')\n"
    "    if v <= 2 and (any(a(e).get('trafficBytes') != a(e)['count'] * 4 * 2 for e in ar) or\n"
    "                   any(a(e).get('trafficBytes') != a(e)['count'] * 8 for e in bc)): bad.append('traffic')\n"
    "    v1 = lambda e: (a(e).get('op'), a(e).get('isCollnet'), a(e).get('isNvls'), a(e)['proto'])\n"
    "    if v == 1 and any(v1(e) != (0, 0, 0, 'SIMPLE') for e in ar): bad.append('v1')\n"
    "    counts = [len(ar), len(bc), len(se), len(rc), len(of('Group')), len(ga), len(ca), len(pa)]\n"
    "    out.append((rank, '%s:%s:%s' % (abi, ','.join(map(str, counts)), '+'.join(bad) or 'ok')))\n"
    "tail = ['hashes-differ'] if len(hashes) > 1 else []\n"
    "print(' '.join([str(len(files))] + [t for r, t in sorted(out)] + tail))\n";

// Runs trace_checker over the scratch folder; returns its line of output.
static void check_traces(int nranks, int version, const char *mode, char *out, size_t len) {
  char script[128];
  snprintf(script, sizeof(script), "%s/check.py", dir);
  FILE *f = fopen(script, "w");
  cr_assert_not_null(f);
  fputs(trace_checker, f);
  fclose(f);
  char cmd[512];
  snprintf(cmd, sizeof(cmd), "python3 %s %s %d %d %s", script, dir, nranks, version, mode);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  out[0] = '\0';
  char line[1024];
  while (fgets(line, sizeof(line), p) != NULL) snprintf(out, len, "%s", line);
  pclose(p);
}

// profiler_body's events at `version`, per rank: 5 AllReduce, 2 Broadcast,
// 1 Send, 1 Recv; a Group per collective and one for the p2p group; from
// version 5 on as many GroupApi events, a CollApi per collective and a
// P2pApi per send and receive. And the log names the version loaded.
static void expect_traces(int nranks, int version) {
  char got[1024], want[1024] = "";
  check_traces(nranks, version, "body", got, sizeof(got));
  int api = version >= 5, groups = PROF_ALLREDUCE + PROF_BCAST + 1;
  size_t at = (size_t)snprintf(want, sizeof(want), "%d", nranks);
  for (int r = 0; r < nranks; r++)
    at += (size_t)snprintf(want + at, sizeof(want) - at, " %d:%d,%d,1,1,%d,%d,%d,%d:ok", version, PROF_ALLREDUCE,
                           PROF_BCAST, groups, api ? groups : 0, api ? PROF_ALLREDUCE + PROF_BCAST : 0, api ? 2 : 0);
  snprintf(want + at, sizeof(want) - at, "\n");
  cr_expect_str_eq(got, want);
  char loaded[64];
  snprintf(loaded, sizeof(loaded), "loaded (ncclProfiler_v%d)", version);
  cr_expect_eq(log_count(loaded), nranks, "the log names v%d on every rank", version);
}

static void profiler_env(void) {
  char path[PATH_MAX + 64];
  snprintf(path, sizeof(path), "%s/libnccl-profiler-example.so", lib);
  setenv("NCCL_PROFILER_PLUGIN", path, 1);
  setenv("WEFT_PROFILER_EXAMPLE_DIR", dir, 1);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT", 1);
}

// The example built to export only ncclProfiler_v<version>.
static void profiler_env_only(int version) {
  profiler_env();
  char path[PATH_MAX + 64];
  snprintf(path, sizeof(path), "%s/libnccl-profiler-v%donly.so", v4lib, version);
  setenv("NCCL_PROFILER_PLUGIN", path, 1);
}

Test(plugins_profiler, chrome_trace_per_rank, .init = setup, .fini = teardown, .timeout = 120) {
  profiler_env();  // the full example: v6 is its newest
  cr_assert_eq(weft_test_fork_ranks(3, profiler_body, NULL, 90), 0);
  expect_traces(3, 6);
  cr_expect_eq(log_count("WARN"), 0);
}

Test(plugins_profiler, calls_on_a_stream, .init = setup, .fini = teardown, .timeout = 120) {
  profiler_env();
  cr_assert_eq(weft_test_fork_ranks(2, profiler_body, (void *)1, 90), 0);
  expect_traces(2, 6);
}

// Each older version alone: its own descriptor layout, its events only.
Test(plugins_profiler, v5_plugin, .init = setup, .fini = teardown, .timeout = 120) {
  profiler_env_only(5);
  cr_assert_eq(weft_test_fork_ranks(2, profiler_body, NULL, 90), 0);
  expect_traces(2, 5);
}

Test(plugins_profiler, v4_plugin, .init = setup, .fini = teardown, .timeout = 120) {
  profiler_env_only(4);
  cr_assert_eq(weft_test_fork_ranks(2, profiler_body, NULL, 90), 0);
  expect_traces(2, 4);  // no API events before v5
}

Test(plugins_profiler, v3_plugin, .init = setup, .fini = teardown, .timeout = 120) {
  profiler_env_only(3);
  cr_assert_eq(weft_test_fork_ranks(2, profiler_body, NULL, 90), 0);
  expect_traces(2, 3);  // the communicator's hash in each Coll / P2p descriptor
}

Test(plugins_profiler, v2_plugin, .init = setup, .fini = teardown, .timeout = 120) {
  profiler_env_only(2);
  cr_assert_eq(weft_test_fork_ranks(2, profiler_body, NULL, 90), 0);
  expect_traces(2, 2);  // and trafficBytes
}

Test(plugins_profiler, v1_plugin, .init = setup, .fini = teardown, .timeout = 120) {
  profiler_env_only(1);
  cr_assert_eq(weft_test_fork_ranks(2, profiler_body, NULL, 90), 0);
  expect_traces(2, 1);  // numbers for the call, type, reduction, algorithm and protocol
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
  char got[1024], want[1024];
  check_traces(N, 6, "counts", got, sizeof(got));
  // One GroupApi event per group, on the communicator of its first call (rank 0).
  size_t at = (size_t)snprintf(want, sizeof(want), "%d", N);
  for (int r = 0; r < N; r++)
    at += (size_t)snprintf(want + at, sizeof(want) - at, " 6:%d,0,0,0,%d,%d,%d,0:ok", ITERS, ITERS, r == 0 ? ITERS : 0,
                           ITERS);
  snprintf(want + at, sizeof(want) - at, "\n");
  cr_expect_str_eq(got, want);
}

// Runs Python lines `body` over each of the scratch folder's traces (by
// name), which set `ok` from that file's complete events `x` and `v` (the
// argument); *line gets "1 0 ...": ok per file.
static void check_each_trace(const char *body, int v, char *line, size_t len) {
  char cmd[4096];
  snprintf(cmd, sizeof(cmd),
           "python3 - %s %d <<'EOF'\n"
           "import glob, json, sys\n"
           "v, out = int(sys.argv[2]), []\n"
           "for f in sorted(glob.glob(sys.argv[1] + '/trace-*.json')):\n"
           "    x = [e for e in json.load(open(f))['traceEvents'] if e.get('ph') == 'X']\n"
           "    a = lambda e: e['args']\n"
           "%s"
           "    out.append(int(ok))\n"
           "print(' '.join(map(str, out)))\n"
           "EOF\n",
           dir, v, body);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  line[0] = '\0';
  cr_expect_not_null(fgets(line, (int)len, p));
  pclose(p);
}

// ProxyOp (one per lane of each operation) and ProxyStep (one per step)
// events when the plugin asks for them alone: per file, the steps recorded
// match the steps the ProxyOp events announce, every operation has a
// ProxyOp, and the operations' own events come too, as their parents (9
// Coll / P2p per rank), as in NCCL.
Test(plugins_profiler, proxy_steps, .init = setup, .fini = teardown, .timeout = 120) {
  profiler_env();
  setenv("NCCL_PROFILE_EVENT_MASK", "0x18", 1);
  cr_assert_eq(weft_test_fork_ranks(2, profiler_body, NULL, 90), 0);
  char line[256];
  check_each_trace("    ops = [e for e in x if e['cat'] == 'ProxyOp']\n"
                   "    steps = sum(1 for e in x if e['cat'] == 'ProxyStep')\n"
                   "    calls = sum(1 for e in x if e['cat'] in ('Coll', 'P2p'))\n"
                   "    ok = steps > 0 and steps == sum(a(e)['nSteps'] for e in ops) and len(ops) >= calls == 9\n",
                   0, line, sizeof(line));
  cr_expect_str_eq(line, "1 1\n");
}

// KernelCh events (one per lane: the lane's run on the host engine) when
// the plugin asks for Coll and KernelCh (0x42): per file, as many as the
// Coll and P2p events' nChannels (the P2p events come as their parents),
// each with a parent; from version 4 on with timers, CLOCK_MONOTONIC
// nanoseconds, so they fall inside the example's own microseconds of the
// same clock (start taken just before the event starts, stop just before
// it stops); version 3 has no timers (and no P2p channel count).
static void expect_kernel_channels(int version) {
  setenv("NCCL_PROFILE_EVENT_MASK", "0x42", 1);
  cr_assert_eq(weft_test_fork_ranks(2, profiler_body, NULL, 90), 0);
  char line[256];
  check_each_trace(
      "    k = [e for e in x if e['cat'] == 'KernelCh']\n"
      "    lanes = sum(a(e)['nChannels'] for e in x if e['cat'] in ('Coll', 'P2p'))\n"
      "    p2p = sum(1 for e in x if e['cat'] == 'P2p')\n"
      "    ok = len(k) > 0 and p2p == 2 and all(a(e)['parent'] for e in k)\n"
      "    if v >= 4:\n"
      "        ok = ok and len(k) == lanes and all(0 < a(e)['startTimer'] <= a(e)['stopTimer'] and\n"
      "            0 <= e['ts'] - a(e)['startTimer'] / 1e3 < 1e5 and a(e)['stopTimer'] / 1e3 <= e['ts'] + e['dur'] + 1\n"
      "            for e in k)\n"
      "    else:\n"
      "        ok = ok and len(k) >= lanes and all(a(e)['startTimer'] == a(e)['stopTimer'] == 0 for e in k)\n",
      version, line, sizeof(line));
  cr_expect_str_eq(line, "1 1\n", "version %d", version);
}

Test(plugins_profiler, kernel_channels, .init = setup, .fini = teardown, .timeout = 120) {
  profiler_env();
  expect_kernel_channels(6);
}

Test(plugins_profiler, kernel_channels_v4, .init = setup, .fini = teardown, .timeout = 120) {
  profiler_env_only(4);
  expect_kernel_channels(4);
}

Test(plugins_profiler, kernel_channels_v3, .init = setup, .fini = teardown, .timeout = 120) {
  profiler_env_only(3);
  expect_kernel_channels(3);
}
