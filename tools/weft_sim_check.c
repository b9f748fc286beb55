/*
 * weft_sim_check.c — weft-sim: check schedules with the simulator, or print them.
 *
 *   weft-sim [options] [COLLECTIVE|all]
 *     -n N        exactly N ranks (default: sweep 1..-N)
 *     -N MAX      sweep 1..MAX ranks (default 8; 64 is the full sweep)
 *     -a ALGO     only this algorithm (default: every one that runs the collective)
 *     -H LAYOUT   hosts: one, kK (hosts of K consecutive ranks), uneven (hosts of
 *                 3, 1, 2, 3, 1, 2 ... ranks), alt (two hosts, ranks alternating)
 *                 or all (default: every layout for algorithms that look at
 *                 hosts — one, k1, k2, k4, k8, uneven, alt — else one)
 *     -M LAYOUT   NUMA nodes inside the hosts, in -H's words (kK: nodes of K
 *                 ranks; default: every layout for the numa algorithm, else one)
 *     -c COUNT    NCCL count (default: sweep 0, 1, n-1, n+1, 3n+5, 1000)
 *     -s SLICE    elements per step (default: sweep 1, 7, 64)
 *     -k CAP      connection capacity (default: the algorithm's minimum)
 *     -r ROOT     root or Send/Recv shift (default: sweep 0, n-1, n/2)
 *     -i / -o     in place only / out of place only (default: both)
 *     -R RUNS     random interleavings per configuration (default 1)
 *     -S SEED     seed of the random interleavings
 *     -d          print every rank's schedule instead of checking
 *
 * Exits 0 when every configuration checks out, 1 on the first failure (its
 * message names the configuration and the fault), 2 on bad usage. It is the
 * quickest way to see what an algorithm does and to test a new one. Layouts
 * an algorithm cannot run (hier on hosts of different sizes, numa on NUMA
 * nodes of different sizes) are skipped.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "sim.h"
#include "weft_sim_cost.h"
#include "prog_util.h"

static void usage(void) {
  fprintf(stderr,
          "usage: weft-sim [-n N | -N MAX] [-a ALGO] [-H LAYOUT] [-M LAYOUT] [-c COUNT] [-s SLICE] [-k CAP]\n"
          "                [-r ROOT] [-i|-o] [-R RUNS] [-S SEED] [-d] [COLLECTIVE|all]\n"
          "       weft-sim cost [options]   AllReduce at scale through the cost model (cost --help)\n"
          "layouts: one kK uneven alt all\ncollectives:");
  for (int c = 0; c < WEFT_NUM_COLLS; c++) fprintf(stderr, " %s", weft_coll_name((weft_coll_t)c));
  fprintf(stderr, "\nalgorithms:");
  for (int a = 0; a < WEFT_NUM_ALGOS; a++) fprintf(stderr, " %s", weft_algo_name((weft_algo_t)a));
  fprintf(stderr, "\n");
}

static int parse_layout(const char *s, weft_sim_layout_t *out) {
  char *end;
  if (strcmp(s, "one") == 0) *out = (weft_sim_layout_t){WEFT_SIM_ONE_HOST, 0};
  else if (strcmp(s, "uneven") == 0) *out = (weft_sim_layout_t){WEFT_SIM_UNEVEN, 0};
  else if (strcmp(s, "alt") == 0) *out = (weft_sim_layout_t){WEFT_SIM_ALTERNATING, 0};
  else if (s[0] == 'k' && (out->k = (int)strtol(s + 1, &end, 10)) >= 1 && *end == '\0' && out->k <= 64)
    out->kind = WEFT_SIM_HOSTS_OF_K;
  else return -1;
  return 0;
}

// "hosts of 4", or for NUMA nodes (numa) "NUMA nodes of 4".
static const char *layout_name(const weft_sim_layout_t *l, int numa, char *buf, size_t len) {
  static const char *const names[] = {"one %s", "", "uneven %ss", "alternating %ss"};
  const char *what = numa ? "NUMA node" : "host";
  if (l->kind == WEFT_SIM_HOSTS_OF_K) snprintf(buf, len, "%ss of %d", what, l->k);
  else snprintf(buf, len, names[l->kind], what);
  return buf;
}

// Does the algorithm's schedule depend on where ranks sit?
static int looks_at_hosts(weft_algo_t a) {
  return a == WEFT_ALGO_RING || a == WEFT_ALGO_CHAIN || a == WEFT_ALGO_TREE || a == WEFT_ALGO_RECURSIVE ||
         a == WEFT_ALGO_RABENSEIFNER || a == WEFT_ALGO_HIER || a == WEFT_ALGO_NUMA;
}

static int rooted(weft_coll_t c) {
  return c == WEFT_COLL_BROADCAST || c == WEFT_COLL_REDUCE || c == WEFT_COLL_GATHER ||
         c == WEFT_COLL_SCATTER || c == WEFT_COLL_SEND || c == WEFT_COLL_RECV;
}

// "send[4..+3]" or "-" for a step's buffer region.
static const char *region(char *out, size_t len, int buf, uint64_t off, uint64_t count) {
  if (buf == WEFT_BUF_SEND || buf == WEFT_BUF_RECV)
    snprintf(out, len, "%s[%llu..+%llu]", buf == WEFT_BUF_SEND ? "send" : "recv",
             (unsigned long long)off, (unsigned long long)count);
  else
    snprintf(out, len, "-");
  return out;
}

// "rank 2's send[4..+3]": the peer region of a READ* or WRITE step.
static const char *remote(char *out, size_t len, const weft_step_t *st) {
  char r[48];
  snprintf(out, len, "%d:%s", (int)st->rem_peer, region(r, sizeof(r), st->rem_buf, st->rem_off, st->count));
  return out;
}

static void dump(weft_coll_t coll, weft_algo_t algo, int n, int root, size_t count, size_t slice,
                 const int *host_of, int nhosts, const int *numa_of, int nnuma) {
  char src[64], dst[64];
  printf("(a peer's region reads PEER:buf[off..+count])\n");
  for (int r = 0; r < n; r++) {
    weft_coll_args_t a = {.coll = coll, .nranks = n, .rank = r, .root = root, .count = count, .slice = slice,
                          .host_of = host_of, .nhosts = host_of ? nhosts : 1, .numa_of = numa_of,
                          .nnuma = nnuma};
    weft_schedule_t s = {0};
    if (weft_schedule_build(&a, algo, &s) != ncclSuccess) {
      printf("rank %d: build failed\n", r);
      continue;
    }
    printf("rank %d (%s): %u steps in %u lanes\n", r, weft_algo_name(algo), s.nsteps, s.nlanes);
    for (uint32_t l = 0; l < s.nlanes; l++)
      for (uint32_t i = s.lanes[l].first; i < s.lanes[l].first + s.lanes[l].count; i++) {
        const weft_step_t *st = &s.steps[i];
        printf("  lane %-3u %-16s to %-3d from %-3d %-18s -> %-18s%s%s%s\n", l,
               weft_step_kind_name(st->kind), (int)st->send_peer, (int)st->recv_peer,
               st->kind == WEFT_STEP_READ || st->kind == WEFT_STEP_READ_REDUCE
                   ? remote(src, sizeof(src), st)
                   : region(src, sizeof(src), st->src_buf, st->src_off, st->count),
               st->kind == WEFT_STEP_WRITE ? remote(dst, sizeof(dst), st)
                                           : region(dst, sizeof(dst), st->dst_buf, st->dst_off, st->count),
               st->flags & WEFT_STEP_REDUCE_INPUT ? " REDUCE_INPUT" : "",
               st->flags & WEFT_STEP_ACCUMULATE ? " ACCUMULATE" : "", st->flags & WEFT_STEP_FINAL ? " FINAL" : "");
      }
    weft_schedule_free(&s);
  }
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "cost") == 0) return weft_sim_cost_main(argc - 1, argv + 1);
  int nfix = 0, nmax = 8, inplace_mask = 3, dump_only = 0, runs_random = 1, opt, algo_pick = -1;
  weft_sim_layout_t layout_fix = {WEFT_SIM_ONE_HOST, 0}, numa_fix = {WEFT_SIM_ONE_HOST, 0};
  int layout_given = 0, numa_given = 0;
  long long root_fix = -1;
  size_t count_fix = (size_t)-1, slice_fix = 0, cap_fix = 0, tmp;
  unsigned long long seed = 0;
  while ((opt = getopt(argc, argv, "n:N:a:H:M:c:s:k:r:ioR:S:dh")) != -1) {
    int bad = 0;
    switch (opt) {
      case 'a':
        for (int a = 0; a < WEFT_NUM_ALGOS; a++)
          if (strcasecmp(optarg, weft_algo_name((weft_algo_t)a)) == 0) algo_pick = a;
        bad = algo_pick < 0;
        break;
      case 'H':
        layout_given = strcmp(optarg, "all") != 0;
        bad = layout_given && parse_layout(optarg, &layout_fix);
        break;
      case 'M':
        numa_given = strcmp(optarg, "all") != 0;
        bad = numa_given && parse_layout(optarg, &numa_fix);
        break;
      case 'n':
        bad = weft_prog_parse_size(optarg, &tmp) || tmp < 1 || tmp > WEFT_SIM_MAX_RANKS;
        nfix = (int)tmp;
        break;
      case 'N':
        bad = weft_prog_parse_size(optarg, &tmp) || tmp < 1 || tmp > WEFT_SIM_MAX_RANKS;
        nmax = (int)tmp;
        break;
      case 'c': bad = weft_prog_parse_size(optarg, &count_fix); break;
      case 's': bad = weft_prog_parse_size(optarg, &slice_fix) || slice_fix == 0; break;
      case 'k': bad = weft_prog_parse_size(optarg, &cap_fix) || cap_fix == 0; break;
      case 'r':
        bad = weft_prog_parse_size(optarg, &tmp) || tmp >= WEFT_SIM_MAX_RANKS;
        root_fix = (long long)tmp;
        break;
      case 'i': inplace_mask = 2; break;
      case 'o': inplace_mask = 1; break;
      case 'R':
        bad = weft_prog_parse_size(optarg, &tmp) || tmp > 100000;
        runs_random = (int)tmp;
        break;
      case 'S':
        bad = weft_prog_parse_size(optarg, &tmp);
        seed = tmp;
        break;
      case 'd': dump_only = 1; break;
      default: usage(); return opt == 'h' ? 0 : 2;
    }
    if (bad) {
      fprintf(stderr, "weft-sim: bad value '%s' for -%c\n", optarg, opt);
      return 2;
    }
  }
  int coll_pick = -1;
  if (optind < argc && strcasecmp(argv[optind], "all") != 0) {
    for (int c = 0; c < WEFT_NUM_COLLS; c++)
      if (strcasecmp(argv[optind], weft_coll_name((weft_coll_t)c)) == 0) coll_pick = c;
    if (coll_pick < 0) {
      fprintf(stderr, "weft-sim: unknown collective '%s'\n", argv[optind]);
      usage();
      return 2;
    }
  }
  if (dump_only) {
    if (coll_pick < 0 || !nfix || count_fix == (size_t)-1) {
      fprintf(stderr, "weft-sim: -d needs a collective, -n and -c\n");
      return 2;
    }
    if (root_fix >= nfix) {
      fprintf(stderr, "weft-sim: root %lld outside [0, %d)\n", root_fix, nfix);
      return 2;
    }
    int host_of[WEFT_SIM_MAX_RANKS], numa_of[WEFT_SIM_MAX_RANKS];
    int nhosts = weft_sim_layout_fill(&layout_fix, nfix, host_of);
    int nnuma = weft_sim_numa_fill(&numa_fix, nhosts ? host_of : NULL, nhosts, nfix, numa_of);
    for (int al = 0; al < WEFT_NUM_ALGOS; al++)
      if (weft_algo_supports((weft_algo_t)al, (weft_coll_t)coll_pick) && (algo_pick < 0 || al == algo_pick))
        dump((weft_coll_t)coll_pick, (weft_algo_t)al, nfix, root_fix < 0 ? 0 : (int)root_fix,
             count_fix, slice_fix ? slice_fix : 64, nhosts ? host_of : NULL, nhosts, nnuma ? numa_of : NULL, nnuma);
    return 0;
  }
  long checked = 0;
  char err[4096], lname[32];
  for (int c = 0; c < WEFT_NUM_COLLS; c++) {
    if (coll_pick >= 0 && c != coll_pick) continue;
    for (int al = 0; al < WEFT_NUM_ALGOS; al++) {
      if (!weft_algo_supports((weft_algo_t)al, (weft_coll_t)c) || (algo_pick >= 0 && al != algo_pick)) continue;
      int nlayouts = layout_given || !looks_at_hosts((weft_algo_t)al) ? 1 : weft_sim_nlayouts;
      int nsplits = numa_given || al != WEFT_ALGO_NUMA ? 1 : weft_sim_nlayouts;  // NUMA layouts per host layout
      for (int li = 0; li < nlayouts * nsplits; li++) {
        const weft_sim_layout_t *lay = layout_given ? &layout_fix : &weft_sim_layouts[li / nsplits];
        const weft_sim_layout_t *split = numa_given ? &numa_fix : &weft_sim_layouts[li % nsplits];
        long before = checked;
        for (int n = nfix ? nfix : 1; n <= (nfix ? nfix : nmax); n++) {
          int host_of[WEFT_SIM_MAX_RANKS], nhosts = weft_sim_layout_fill(lay, n, host_of);
          int numa_of[WEFT_SIM_MAX_RANKS], nnuma = weft_sim_numa_fill(split, nhosts ? host_of : NULL, nhosts, n, numa_of);
          if (nnuma == 0 && split->kind != WEFT_SIM_ONE_HOST) continue;  // no host split: as with one node
          size_t un = (size_t)n, counts[] = {0, 1, un - 1, un + 1, 3 * un + 5, 1000};
          size_t slices[] = {1, 7, 64};
          long long roots[] = {0, n - 1, n / 2};
          weft_coll_args_t probe = {.coll = (weft_coll_t)c, .nranks = n, .count = 1, .slice = 1,
                                    .host_of = nhosts ? host_of : NULL, .nhosts = nhosts ? nhosts : 1,
                                    .numa_of = nnuma ? numa_of : NULL, .nnuma = nnuma};
          if (!weft_algo_fits((weft_algo_t)al, &probe, NULL, 0)) continue;
          for (int ci = 0; ci < 6; ci++)
            for (int si = 0; si < 3; si++)
              for (int ri = 0; ri < 3; ri++)
                for (int ip = 0; ip < 2; ip++) {
                  if ((count_fix != (size_t)-1 && ci) || (slice_fix && si) || (root_fix >= 0 && ri)) continue;
                  if (!(inplace_mask & (1 << ip))) continue;
                  if (ri && (!rooted((weft_coll_t)c) || roots[ri] == roots[0] || (ri == 2 && roots[2] == roots[1])))
                    continue;
                  weft_sim_config_t cfg = {0};
                  cfg.coll = (weft_coll_t)c;
                  cfg.algo = (weft_algo_t)al;
                  cfg.nranks = n;
                  cfg.root = (int)(root_fix >= 0 ? root_fix : roots[ri]);
                  cfg.count = count_fix != (size_t)-1 ? count_fix : counts[ci];
                  cfg.slice = slice_fix ? slice_fix : slices[si];
                  cfg.capacity = cap_fix ? cap_fix : weft_schedule_min_capacity(cfg.algo, cfg.slice);
                  cfg.in_place = ip;
                  cfg.random_runs = runs_random;
                  cfg.seed = seed;
                  cfg.host_of = nhosts ? host_of : NULL;
                  cfg.nhosts = nhosts;
                  cfg.numa_of = nnuma ? numa_of : NULL;
                  cfg.nnuma = nnuma;
                  if (cfg.root >= n) continue;
                  ncclResult_t rc = weft_sim_run(&cfg, err, sizeof(err));
                  checked++;
                  if (rc != ncclSuccess) {
                    printf("FAIL %s\n", err);
                    return 1;
                  }
                }
        }
        char sname[48] = "";
        if (numa_given || nsplits > 1) {
          char part[32];
          snprintf(sname, sizeof(sname), ", %s", layout_name(split, 1, part, sizeof(part)));
        }
        printf("ok   %s/%s, %s%s (%ld)\n", weft_coll_name((weft_coll_t)c), weft_algo_name((weft_algo_t)al),
               layout_name(lay, 0, lname, sizeof(lname)), sname, checked - before);
      }
    }
  }
  printf("%ld configurations checked\n", checked);
  return 0;
}
