/*
 * common_args.c — the benchmarks' command line: nccl-tests' short and long
 * flags and defaults, checked strictly (a bad value or an unknown flag is a
 * usage error naming it, exit status 2). GPU-only flags are accepted and
 * ignored with a note in the report's header, so nccl-tests command lines
 * run unchanged.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common_internal.h"
#include "prog_util.h"

perf_opts_t perf_opts = {.nthreads = 1,
                         .ngpus = 1,
                         .iters = 20,
                         .warmup = 1,
                         .agg = 1,
                         .check = 1,
                         .average = 1,
                         .cycles = 1,
                         .type = ncclFloat32,
                         .minbytes = 32 << 20,
                         .maxbytes = 32 << 20,
                         .stepbytes = 1 << 20,
                         .stepfactor = 1};
const char *perf_notes[PERF_MAX_NOTES];
int perf_nnotes;

static void usage(FILE *f) {
  fprintf(f,
          "USAGE: %s [flags]\n"
          "  -t,--nthreads <n>        threads per process, one or more ranks each (1)\n"
          "  -g,--ngpus <n>           ranks per thread, driven in one group (1)\n"
          "  -b,--minbytes <size>     smallest message, K/M/G suffixes (32M)\n"
          "  -e,--maxbytes <size>     largest message (32M)\n"
          "  -i,--stepbytes <size>    size increment (1M)\n"
          "  -f,--stepfactor <n>      size multiplier, used when > 1\n"
          "  -n,--iters <n>           timed iterations (20)\n"
          "  -m,--agg_iters <n>       calls aggregated in one group per iteration (1)\n"
          "  -w,--warmup_iters <n>    warm-up iterations per size (1)\n"
          "  -N,--run_cycles <n>      repeat the sweep n times, 0 = forever (1)\n"
          "  -c,--check <n>           check results n times per size, 0 = off (1)\n"
          "  -o,--op <op>             sum prod max min avg mulsum (premulsum) all (sum)\n"
          "  -d,--datatype <type>     int8 uint8 int32 uint32 int64 uint64 half float double\n"
          "                           bfloat16 f8e4m3 f8e5m2 all (float)\n"
          "  -r,--root <rank>         root of rooted collectives, -1 or all = every rank (0)\n"
          "  -z,--blocking <0-3>      0 weft stream, synchronized per batch; 1 NULL stream and\n"
          "                           a barrier per call; 2 NULL stream; 3 stream synchronized\n"
          "                           and barrier per iteration, barrier not timed (0)\n"
          "  -y,--stream_null <0/1>   issue on the NULL stream (0)\n"
          "  -a,--average <0-3>       time across ranks: 0 rank 0, 1 mean, 2 min, 3 max (1)\n"
          "  -C,--report_cputime <0/1> report the time before the final synchronize (0)\n"
          "  -R,--local_register <0/1/2> register buffers: 1 ncclCommRegister, 2 symmetric windows (0)\n"
          "  -u,--unalign <n>         offset buffers by n elements (0)\n"
          "  -J,--output_file <file>  also write every row as JSON\n"
          "  --device <0/1>           buffers in GPU memory, calls on CUDA streams (0)\n"
          "  -G -T -S -I -K -M -p -x -D -V: accepted for nccl-tests compatibility, ignored\n"
          "  -h,--help\n"
          "Ranks: one process (-t), weftrun -n P (P*t*g ranks), or torchrun/Slurm/MPI\n"
          "environments (one rank per process).\n",
          perf_prog);
}

static int bad(int c, const char *val, const char *what) {
  fprintf(stderr, "%s: invalid value '%s' for -%c: %s\nRun '%s -h' for usage.\n", perf_prog, val, c,
          what, perf_prog);
  return 2;
}

static int parse_long(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 0);
  if (errno || end == s || *end || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

// Index of `s` among the type (or op) names; -1 for "all", -2 if unknown.
static int lookup(const char *s, int types) {
  if (strcmp(s, "all") == 0) return -1;
  if (!types && strcmp(s, "premulsum") == 0) return PERF_OP_PREMUL;
  for (int i = 0; i < (types ? PERF_NTYPES : PERF_NOPS); i++)
    if (strcmp(s, types ? perf_types[i].name : perf_opnames[i]) == 0) return i;
  return -2;
}

static void note(const char *text) {
  for (int i = 0; i < perf_nnotes; i++)
    if (perf_notes[i] == text) return;
  if (perf_nnotes < PERF_MAX_NOTES) perf_notes[perf_nnotes++] = text;
}

// Flags without a value beyond a range check.
static int int_flag(int c, const char *val, int *done) {
  perf_opts_t *o = &perf_opts;
  static const struct {
    int c;
    size_t off;
    long lo, hi;
    const char *what;
  } ints[] = {
      {'t', offsetof(perf_opts_t, nthreads), 1, 1024, "threads must be 1..1024"},
      {'g', offsetof(perf_opts_t, ngpus), 1, 1024, "ranks per thread must be 1..1024"},
      {'n', offsetof(perf_opts_t, iters), 1, 1 << 30, "iterations must be at least 1"},
      {'m', offsetof(perf_opts_t, agg), 1, 1 << 20, "aggregated calls must be at least 1"},
      {'w', offsetof(perf_opts_t, warmup), 0, 1 << 30, "warm-up iterations must be 0 or more"},
      {'N', offsetof(perf_opts_t, cycles), 0, 1 << 30, "cycles must be 0 (forever) or more"},
      {'c', offsetof(perf_opts_t, check), 0, 1 << 20, "check count must be 0 or more"},
      {'z', offsetof(perf_opts_t, blocking), 0, 3, "blocking mode must be 0..3"},
      {'y', offsetof(perf_opts_t, stream_null), 0, 1, "must be 0 or 1"},
      {'a', offsetof(perf_opts_t, average), 0, 3, "must be 0..3"},
      {'C', offsetof(perf_opts_t, cputime), 0, 1, "must be 0 or 1"},
      {'R', offsetof(perf_opts_t, reg), 0, 2, "must be 0, 1 or 2"},
      {'u', offsetof(perf_opts_t, unalign), 0, 1 << 20, "must be 0 or more"},
      {'E', offsetof(perf_opts_t, device), 0, 1, "--device must be 0 or 1"}};
  *done = 0;
  for (size_t k = 0; k < sizeof(ints) / sizeof(ints[0]); k++) {
    long v;
    if (ints[k].c != c) continue;
    if (parse_long(val, ints[k].lo, ints[k].hi, &v)) return bad(c, val, ints[k].what);
    *(int *)((char *)o + ints[k].off) = (int)v;
    *done = 1;
  }
  return 0;
}

int perf_args_parse(int argc, char **argv) {
  // clang-format off
  static const struct option longopts[] = {
      {"nthreads", 1, 0, 't'}, {"ngpus", 1, 0, 'g'}, {"minbytes", 1, 0, 'b'},
      {"maxbytes", 1, 0, 'e'}, {"stepbytes", 1, 0, 'i'}, {"stepfactor", 1, 0, 'f'},
      {"iters", 1, 0, 'n'}, {"agg_iters", 1, 0, 'm'}, {"warmup_iters", 1, 0, 'w'},
      {"run_cycles", 1, 0, 'N'}, {"parallel_init", 1, 0, 'p'}, {"check", 1, 0, 'c'},
      {"op", 1, 0, 'o'}, {"datatype", 1, 0, 'd'}, {"root", 1, 0, 'r'},
      {"blocking", 1, 0, 'z'}, {"stream_null", 1, 0, 'y'}, {"timeout", 1, 0, 'T'},
      {"cudagraph", 1, 0, 'G'}, {"report_cputime", 1, 0, 'C'},
      {"report_timestamps", 1, 0, 'S'}, {"output_file", 1, 0, 'J'}, {"average", 1, 0, 'a'},
      {"local_register", 1, 0, 'R'}, {"cta_policy", 1, 0, 'x'},
      {"device_implementation", 1, 0, 'D'}, {"device_cta_count", 1, 0, 'V'},
      {"memory", 1, 0, 'M'}, {"unalign", 1, 0, 'u'}, {"per_iter_timing", 1, 0, 'I'},
      {"per_iter_skip", 1, 0, 'K'}, {"device", 1, 0, 'E'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
  // clang-format on
  static const char shortopts[] = "t:g:b:e:i:f:n:m:w:N:p:I:K:c:o:d:r:z:y:T:hG:C:a:R:x:D:V:J:S:M:u:";
  perf_opts_t *o = &perf_opts;
  int c;
  opterr = 0;
  while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
    long v;
    size_t sz;
    int done, rc = int_flag(c, optarg, &done);
    if (rc) return rc;
    if (done) continue;
    switch (c) {
      case 'b':
      case 'e':
      case 'i':
        if (weft_prog_parse_size(optarg, &sz))
          return bad(c, optarg, "expected a size such as 64, 8K, 1M, 2G");
        *(c == 'b' ? &o->minbytes : c == 'e' ? &o->maxbytes : &o->stepbytes) = sz;
        break;
      case 'f':
        if (parse_long(optarg, 1, 1 << 20, &v)) return bad(c, optarg, "step factor must be >= 1");
        o->stepfactor = (size_t)v;
        break;
      case 'o':
        if ((o->op = lookup(optarg, 0)) == -2)
          return bad(c, optarg, "ops are sum prod max min avg mulsum premulsum all");
        break;
      case 'd':
        if ((o->type = lookup(optarg, 1)) == -2)
          return bad(c, optarg,
                     "types are int8 uint8 int32 uint32 int64 uint64 half float double "
                     "bfloat16 f8e4m3 f8e5m2 all");
        break;
      case 'r':
        if (strcmp(optarg, "all") == 0)
          o->root = -1;
        else if (parse_long(optarg, -1, 1 << 30, &v))
          return bad(c, optarg, "root must be a rank, -1 or all");
        else
          o->root = (int)v;
        break;
      case 'J':
        o->json = optarg;
        break;
      case 'G':
        note("-G (CUDA graphs) has no meaning on host memory; ignored");
        break;
      case 'T':
        note("-T (timeout) ignored; WEFT_TIMEOUT bounds a stalled collective");
        break;
      case 'p':
        note("-p ignored: every rank always initialises in its own thread");
        break;
      case 'S':
      case 'I':
      case 'K':
      case 'M':
      case 'x':
      case 'D':
      case 'V':
        note("-S/-I/-K/-M/-x/-D/-V are GPU or report options without a host meaning; ignored");
        break;
      case 'h':
        usage(stdout);
        return 0;
      default:
        if (optopt && strchr(shortopts, optopt))
          fprintf(stderr, "%s: option '-%c' needs a value\n", perf_prog, optopt);
        else if (optopt)
          fprintf(stderr, "%s: invalid option '-%c'\n", perf_prog, optopt);
        else
          fprintf(stderr, "%s: invalid option '%s'\n", perf_prog, argv[optind - 1]);
        usage(stderr);
        return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "%s: unexpected argument '%s'\n", perf_prog, argv[optind]);
    usage(stderr);
    return 2;
  }
  if (o->minbytes > o->maxbytes) {
    fprintf(stderr, "%s: invalid sizes for 'minbytes' and 'maxbytes': %zu > %zu\n", perf_prog,
            o->minbytes, o->maxbytes);
    return 2;
  }
  if (o->stepfactor <= 1 && o->stepbytes == 0 && o->minbytes < o->maxbytes) {
    fprintf(stderr, "%s: -i step must be > 0 when -f is not > 1\n", perf_prog);
    return 2;
  }
  return -1;
}
