/*
 * weft_sim_cost.c — `weft-sim cost`: AllReduce at scale, on paper.
 *
 * For a described cluster (hosts x ranks per host, an intra-host and an
 * inter-host link, each an alpha and a bandwidth) and for every host count
 * and message size asked for, every AllReduce algorithm's real schedules —
 * weft_schedule_build for every rank — are replayed by the tuner's
 * alpha-beta cost model (weft_cost_call, algorithms/cost.h), and the tuner
 * is asked what it would pick (weft_tuner_choose, with the same links and
 * the slice it sets itself). Printed: predicted time, algbw and busbw
 * (nccl-tests' factor for AllReduce, 2(n-1)/n), as rows, as a matrix of one
 * metric, or as the size at which one algorithm overtakes another.
 *
 * This is how weft shows what its algorithms do at 8 .. 16,384 ranks
 * without the machines: the same code that picks algorithms on a real
 * communicator, run over a cluster that exists only as numbers. The model
 * has no congestion and no flow control (cost.h); it ranks algorithms.
 *
 * Large calls: the cost model replays at most WEFT_COST_MAX_STEPS steps;
 * past that it prices a fraction of the count and scales the time up. Which
 * points were scaled, and by how much, is worked out here by the same rule
 * (rank 0's steps times the rank count) and printed with them. The work —
 * the tuner's pick and each algorithm's price, per point — is shared by one
 * thread per core; everything is printed at the end, in order.
 */
#include "weft_sim_cost.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "cost.h"
#include "env.h"
#include "schedule.h"
#include "tune_file.h"
#include "tuner.h"
#include "prog_util.h"

#define ESIZE 4           // float32 elements
#define MAX_VALUES 64     // host counts or sizes in one sweep
#define MAX_RANKS 65536

typedef struct {
  const char *name;
  int per_host;  // ranks per host; 0: this machine's cores
  weft_links_t links;
  const char *about;
} cluster_t;

// 8 x H100 per node: NVLink 4 (450 GB/s per GPU and direction), eight
// 400 Gb/s NICs (one per GPU: 8 x 50 GB/s = 400 GB/s per host). The alphas
// are assumptions of the order of a GPU collective's per-hop latency.
static const cluster_t presets[] = {
    {"h100-8x400g", 8, {{1.0e-6, 450e9, 0}, {5.0e-6, 400e9, 0}},
     "8 x H100 per host, NVLink 450 GB/s, 8 x 400 Gb/s NICs (alphas assumed)"},
    {"local", 0, WEFT_LINKS_DEFAULT, "this machine's links (WEFT_TUNE_FILE, else weft's defaults)"},
};
#define NUM_PRESETS ((int)(sizeof(presets) / sizeof(presets[0])))

enum { OUT_ROWS, OUT_MATRIX, OUT_CROSSOVER, OUT_CSV, OUT_JSON };
enum { METRIC_TIME, METRIC_ALGBW, METRIC_BUSBW };
enum { PRICE_NONE = 0, PRICE_OK, PRICE_NOFIT, PRICE_FAILED };

typedef struct {
  cluster_t cluster;
  const char *links_from;  // where the links came from, for the header
  int hosts[MAX_VALUES], nhosts_values;
  size_t sizes[MAX_VALUES];
  int nsizes;
  unsigned algos;  // bit a: price algorithm a
  int out, metric, cross_a, cross_b, jobs;
  size_t slice;  // what the tuner set (the same for every point)
} opts_t;

typedef struct {
  int status;
  double seconds;
  double scale;  // > 1: the model priced count / scale and multiplied by it
  char note[128];  // "cannot run this layout: " and a reason of up to 99 characters
} price_t;

typedef struct {
  int hosts;
  size_t bytes;
  price_t price[WEFT_NUM_ALGOS];
  int tuner;         // the tuner's algorithm, -1 when it refused
  int tuner_priced;  // 1: by the cost model (several hosts), 0: by size thresholds
  size_t tuner_slice;  // the slice the tuner set (the prices use o->slice: they must agree)
} point_t;

typedef struct {
  const opts_t *o;
  point_t *points;
  int **host_of;   // [host count index] rank -> host
  int *order;      // tasks, most ranks first
  int ntasks, per_point;
  atomic_int next;
} sweep_t;

// Priced unless --algo says otherwise: every AllReduce algorithm built for
// several hosts. Not read (it maps peers' memory: one host only) nor oneshot
// (everyone sends to everyone: its rank-0 schedule alone has n x size/slice
// steps, gigabytes at 16k ranks and 1 GiB); --algo can name both.
static int priced_by_default(int a) {
  return weft_algo_supports((weft_algo_t)a, WEFT_COLL_ALLREDUCE) && a != WEFT_ALGO_READ && a != WEFT_ALGO_ONESHOT;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: weft-sim cost [options]\n"
          "AllReduce (float32) on a described cluster: every algorithm's real schedules replayed by the\n"
          "tuner's alpha-beta cost model (algorithms/cost.h), and the tuner's pick.\n"
          "\n"
          "cluster:\n"
          "  --cluster NAME         a preset (default h100-8x400g):\n");
  for (int i = 0; i < NUM_PRESETS; i++)
    fprintf(f, "                           %-12s %s\n", presets[i].name, presets[i].about);
  fprintf(f,
          "  --gpus-per-host G      ranks per host (h100-8x400g: 8; local: this machine's cores)\n"
          "  --intra-alpha-us US    latency of one message between ranks of a host\n"
          "  --intra-gbps GBPS      bandwidth between two ranks of a host, GB/s (1e9 bytes/s)\n"
          "  --inter-alpha-us US    latency of one message between hosts\n"
          "  --inter-gbps GBPS      network bandwidth PER HOST, all its NICs together, GB/s: the cost\n"
          "                         model gives it to every connection between hosts and caps each host's\n"
          "                         network traffic at it (8 NICs x 400 Gb/s = 400 GB/s)\n"
          "  --nic-gbps GBPS        network bandwidth PER RANK (each GPU's own NIC), GB/s: sets\n"
          "                         --inter-gbps to G x GBPS (8 x 50 GB/s = 400 GB/s)\n"
          "sweep:\n"
          "  --hosts LIST           host counts: H, a list H1,H2,... or a range MIN..MAX[:F]\n"
          "  --hosts-range MIN..MAX[:F]  the same, multiplying by F (default 2): 1..2048 is the default\n"
          "  --sizes LIST           message sizes in bytes (K, M, G = KiB, MiB, GiB): S, S1,S2,... or\n"
          "                         MIN..MAX[:F] (default 8,256M); multiples of 4\n"
          "  --algo LIST            AllReduce algorithms to price (default");
  for (int a = 0, first = 1; a < WEFT_NUM_ALGOS; a++)
    if (priced_by_default(a)) fprintf(f, "%s%s", first ? " " : ",", weft_algo_name((weft_algo_t)a)), first = 0;
  fprintf(f,
          ";\n"
          "                         oneshot, all-to-all with n x size/slice steps per rank, is priced\n"
          "                         only when named; read maps peers' memory: one host only)\n"
          "  --jobs N               threads pricing points (default: one per core)\n"
          "output (default: one row per host count, size and algorithm):\n"
          "  --matrix METRIC        one row per host count and size, one column per algorithm: time\n"
          "                         (us), algbw or busbw (GB/s), and the tuner's pick\n"
          "  --crossover A,B        per host count, the size from which B is faster than A (prices\n"
          "                         only A and B), and the tuner's picks over the sizes\n"
          "  --csv | --json         every price, machine-readable\n"
          "\n"
          "The tuner is weft_tuner_choose with these links, NCCL_ALGO from the environment, and the slice\n"
          "it sets (WEFT_SLOT_BYTES x WEFT_SLOTS / 2). A time marked '*' was scaled: the replay\n"
          "would have run more than WEFT_COST_MAX_STEPS steps, so the model priced a fraction of the\n"
          "count and multiplied. busbw = algbw x 2(n-1)/n, as nccl-tests. Exit: 0 done (points that\n"
          "could not be priced are listed), 1 out of memory or threads, 2 bad usage.\n");
}

// A value, a comma list, or MIN..MAX[:F] (MIN, MIN*F, ... up to MAX).
// Returns the number of values, -1 when it does not parse or has too many.
static int parse_values(const char *text, size_t *vals, int max) {
  char buf[256];
  if (strlen(text) >= sizeof(buf)) return -1;
  snprintf(buf, sizeof(buf), "%s", text);
  char *dots = strstr(buf, "..");
  if (dots != NULL) {
    size_t lo, hi, factor = 2;
    char *colon = strchr(dots + 2, ':');
    *dots = '\0';
    if (colon != NULL) {
      *colon = '\0';
      char *end;
      factor = strtoul(colon + 1, &end, 10);
      if (*end != '\0' || factor < 2) return -1;
    }
    if (weft_prog_parse_size(buf, &lo) || weft_prog_parse_size(dots + 2, &hi) || lo == 0 || hi < lo) return -1;
    int n = 0;
    for (size_t v = lo; v <= hi; v *= factor) {
      if (n == max) return -1;
      vals[n++] = v;
      if (v > hi / factor) break;
    }
    return n;
  }
  int n = 0;
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
    if (n == max || weft_prog_parse_size(tok, &vals[n])) return -1;
    n++;
  }
  return n > 0 ? n : -1;
}

static int parse_positive(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end != '\0' || !isfinite(v) || v <= 0) return -1;
  *out = v;
  return 0;
}

static int algo_by_name(const char *name) {
  for (int a = 0; a < WEFT_NUM_ALGOS; a++)
    if (strcasecmp(name, weft_algo_name((weft_algo_t)a)) == 0) return a;
  return -1;
}

static int parse_algos(const char *text, unsigned *mask, int *first, int *second) {
  char buf[256];
  int n = 0;
  if (strlen(text) >= sizeof(buf)) return -1;
  snprintf(buf, sizeof(buf), "%s", text);
  *mask = 0;
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save), n++) {
    int a = algo_by_name(tok);
    if (a < 0 || !weft_algo_supports((weft_algo_t)a, WEFT_COLL_ALLREDUCE)) {
      fprintf(stderr, "weft-sim cost: '%s' is not an AllReduce algorithm\n", tok);
      return -1;
    }
    *mask |= 1u << a;
    if (n == 0 && first) *first = a;
    if (n == 1 && second) *second = a;
  }
  return n;
}

static const char *human_size(size_t b, char *buf, size_t len) {
  if (b >= (1u << 30) && b % (1u << 30) == 0) snprintf(buf, len, "%zu GiB", b >> 30);
  else if (b >= (1u << 20) && b % (1u << 20) == 0) snprintf(buf, len, "%zu MiB", b >> 20);
  else if (b >= (1u << 10) && b % (1u << 10) == 0) snprintf(buf, len, "%zu KiB", b >> 10);
  else snprintf(buf, len, "%zu B", b);
  return buf;
}

// The factor weft_cost_call scales a price by (cost.c's rule: rank 0's
// steps times the rank count against WEFT_COST_MAX_STEPS); 0 when rank 0's
// schedule cannot be built.
static double model_scale(const weft_coll_args_t *a, weft_algo_t algo) {
  weft_schedule_t s = {0};
  weft_coll_args_t b = *a;
  b.rank = 0;
  if (weft_schedule_build(&b, algo, &s) != ncclSuccess) {
    weft_schedule_free(&s);
    return 0;
  }
  double steps = (double)s.nsteps * (double)a->nranks;
  weft_schedule_free(&s);
  if (steps <= WEFT_COST_MAX_STEPS) return 1;
  size_t count = (size_t)((double)a->count * WEFT_COST_MAX_STEPS / steps);
  return (double)a->count / (double)(count > 0 ? count : 1);
}

// One task of a point: the tuner's pick (algo < 0) or one algorithm's price.
static void price_task(const opts_t *o, point_t *p, const int *host_of, int algo) {
  weft_coll_args_t a = {.coll = WEFT_COLL_ALLREDUCE, .nranks = p->hosts * o->cluster.per_host, .rank = 0,
                        .root = 0, .count = p->bytes / ESIZE, .slice = o->slice, .host_of = host_of,
                        .nhosts = p->hosts};
  if (algo < 0) {
    weft_tuner_params_t tp = {.slot_bytes = (size_t)weft_env_WEFT_SLOT_BYTES(),
                              .nslots = (size_t)weft_env_WEFT_SLOTS(),
                              .oneshot_max = (size_t)weft_env_WEFT_ONESHOT_MAX_BYTES(),
                              .can_read = 0,  // ranks on different hosts cannot map each other's memory
                              .read_min = weft_env_WEFT_READ_MIN_BYTES(),
                              .algo_spec = weft_env_NCCL_ALGO(),
                              .links = &o->cluster.links};
    weft_algo_t pick;
    p->tuner = weft_tuner_choose(&tp, &a, ESIZE, &pick) == ncclSuccess ? (int)pick : -1;
    p->tuner_priced = p->hosts > 1;
    p->tuner_slice = a.slice;
    return;
  }
  price_t *pr = &p->price[algo];
  char why[100] = "";
  if (algo == WEFT_ALGO_READ && p->hosts > 1) {
    pr->status = PRICE_NOFIT;
    snprintf(pr->note, sizeof(pr->note), "cannot run this layout: it reads peers' memory, one host only");
    return;
  }
  if (!weft_algo_fits((weft_algo_t)algo, &a, why, sizeof(why))) {
    pr->status = PRICE_NOFIT;
    snprintf(pr->note, sizeof(pr->note), "cannot run this layout: %s", why);
    return;
  }
  pr->scale = model_scale(&a, (weft_algo_t)algo);
  ncclResult_t res = weft_cost_call(&a, (weft_algo_t)algo, ESIZE, &o->cluster.links, &pr->seconds);
  if (res == ncclSuccess) {
    pr->status = PRICE_OK;
  } else {
    pr->status = PRICE_FAILED;
    if (pr->scale > 1)
      snprintf(pr->note, sizeof(pr->note), "not priced: over WEFT_COST_MAX_STEPS steps even at a reduced count");
    else
      snprintf(pr->note, sizeof(pr->note), "not priced: %s", ncclGetErrorString(res));
  }
}

// Tasks are (point, k): k = 0 the tuner, k = 1.. the k-th algorithm priced.
static void *worker(void *arg) {
  sweep_t *S = arg;
  for (int i; (i = atomic_fetch_add(&S->next, 1)) < S->ntasks;) {
    int t = S->order[i], pi = t / S->per_point, k = t % S->per_point, algo = -1;
    for (int a = 0; k > 0 && a < WEFT_NUM_ALGOS; a++)
      if ((S->o->algos & (1u << a)) && --k == 0) algo = a;
    price_task(S->o, &S->points[pi], S->host_of[pi / S->o->nsizes], algo);
  }
  return NULL;
}

// Price every point on o->jobs threads. Returns -1 when memory or threads run out.
static int sweep(const opts_t *o, point_t *points) {
  int npoints = o->nhosts_values * o->nsizes, per_point = 1 + __builtin_popcount(o->algos);
  sweep_t S = {.o = o, .points = points, .per_point = per_point, .ntasks = npoints * per_point};
  int rc = 0, started = 0;
  S.host_of = calloc((size_t)o->nhosts_values, sizeof(*S.host_of));
  S.order = malloc((size_t)S.ntasks * sizeof(*S.order));
  pthread_t *th = calloc((size_t)o->jobs, sizeof(*th));
  if (!S.host_of || !S.order || !th) rc = -1;
  for (int h = 0; rc == 0 && h < o->nhosts_values; h++) {
    int n = o->hosts[h] * o->cluster.per_host;
    if ((S.host_of[h] = malloc((size_t)n * sizeof(int))) == NULL) rc = -1;
    for (int r = 0; rc == 0 && r < n; r++) S.host_of[h][r] = r / o->cluster.per_host;
    for (int s = 0; s < o->nsizes; s++)
      points[h * o->nsizes + s] = (point_t){.hosts = o->hosts[h], .bytes = o->sizes[s], .tuner = -1};
  }
  if (rc == 0) {
    // Most ranks first (their schedules take longest to build), so the threads end together.
    int at = 0;
    int *by = malloc((size_t)o->nhosts_values * sizeof(*by));
    if (by == NULL) rc = -1;
    for (int h = 0; by && h < o->nhosts_values; h++) by[h] = h;
    for (int i = 1; by && i < o->nhosts_values; i++)
      for (int j = i; j > 0 && o->hosts[by[j]] > o->hosts[by[j - 1]]; j--) {
        int t = by[j];
        by[j] = by[j - 1], by[j - 1] = t;
      }
    for (int i = 0; by && i < o->nhosts_values; i++)
      for (int t = by[i] * o->nsizes * per_point; t < (by[i] + 1) * o->nsizes * per_point; t++) S.order[at++] = t;
    free(by);
    atomic_init(&S.next, 0);
    for (; rc == 0 && started < o->jobs; started++)
      if (pthread_create(&th[started], NULL, worker, &S) != 0) break;
    if (rc == 0 && started == 0) rc = -1;
    for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
  }
  for (int h = 0; S.host_of && h < o->nhosts_values; h++) free(S.host_of[h]);
  free(S.host_of);
  free(S.order);
  free(th);
  return rc;
}

static double algbw(const point_t *p, const price_t *pr) { return (double)p->bytes / pr->seconds * 1e-9; }

static double busbw(const opts_t *o, const point_t *p, const price_t *pr) {
  int n = p->hosts * o->cluster.per_host;
  return algbw(p, pr) * 2.0 * (n - 1) / n;
}

static const char *tuner_name(const point_t *p) {
  return p->tuner >= 0 ? weft_algo_name((weft_algo_t)p->tuner) : "(refused)";
}

static void print_header(const opts_t *o, const point_t *points, int npoints, FILE *f) {
  const cluster_t *c = &o->cluster;
  const char *spec = weft_env_NCCL_ALGO();
  int priced = 0, scaled = 0, unpriced = 0;
  for (int i = 0; i < npoints; i++)
    for (int a = 0; a < WEFT_NUM_ALGOS; a++) {
      const price_t *pr = &points[i].price[a];
      priced += pr->status == PRICE_OK;
      scaled += pr->status == PRICE_OK && pr->scale > 1;
      unpriced += pr->status == PRICE_NOFIT || pr->status == PRICE_FAILED;
    }
  fprintf(f, "# weft-sim cost: AllReduce of float32, every rank's schedule replayed by the alpha-beta model "
             "of algorithms/cost.h\n");
  fprintf(f, "# cluster %s: %d ranks per host; intra-host %.2f us, %.1f GB/s; inter-host %.2f us, %.1f GB/s per "
             "host (%.1f GB/s per rank)%s%s\n",
          c->name, c->per_host, c->links.intra.alpha * 1e6, c->links.intra.bandwidth * 1e-9,
          c->links.inter.alpha * 1e6, c->links.inter.bandwidth * 1e-9, c->links.inter.bandwidth * 1e-9 / c->per_host,
          o->links_from ? "; links from " : "", o->links_from ? o->links_from : "");
  fprintf(f, "# slice %zu elements (%zu KiB) per step, as the tuner sets it; busbw = algbw x 2(n-1)/n; GB/s = 1e9 "
             "B/s\n", o->slice, o->slice * ESIZE / 1024);
  fprintf(f, "# tuner: weft_tuner_choose with these links, NCCL_ALGO=%s; one host: size thresholds, several: the "
             "cost model\n", spec && spec[0] ? spec : "(unset)");
  fprintf(f, "# %d prices, %d of them scaled (*: the replay would exceed WEFT_COST_MAX_STEPS = %u steps, so the "
             "model priced 1/x of the count and multiplied the time by x), %d not priced\n",
          priced, scaled, (unsigned)WEFT_COST_MAX_STEPS, unpriced);
}

static void print_rows(const opts_t *o, const point_t *points, int npoints, FILE *f) {
  char hs[32];
  fprintf(f, "#%6s %6s %10s  %-13s %12s %10s %10s  %s\n", "hosts", "ranks", "size", "algorithm", "time_us",
          "algbw", "busbw", "note");
  for (int i = 0; i < npoints; i++) {
    const point_t *p = &points[i];
    for (int a = 0; a < WEFT_NUM_ALGOS; a++) {
      const price_t *pr = &p->price[a];
      if (pr->status == PRICE_NONE) continue;
      fprintf(f, " %6d %6d %10s  %-13s", p->hosts, p->hosts * o->cluster.per_host,
              human_size(p->bytes, hs, sizeof(hs)), weft_algo_name((weft_algo_t)a));
      if (pr->status == PRICE_OK) {
        fprintf(f, " %11.1f%c %10.2f %10.2f", pr->seconds * 1e6, pr->scale > 1 ? '*' : ' ', algbw(p, pr),
                busbw(o, p, pr));
        if (pr->scale > 1) fprintf(f, "  scaled x%.0f", pr->scale);
      } else {
        fprintf(f, " %12s %10s %10s  %s", "-", "-", "-", pr->note);
      }
      fprintf(f, "%s\n", p->tuner == a ? "  <- tuner" : "");
    }
    if (p->tuner >= 0 && p->price[p->tuner].status == PRICE_NONE)
      fprintf(f, " %6d %6d %10s  tuner picks %s (not in --algo)\n", p->hosts, p->hosts * o->cluster.per_host,
              human_size(p->bytes, hs, sizeof(hs)), tuner_name(p));
  }
}

// One line per algorithm and host count with sizes it could not price, and why.
static void print_notes(const opts_t *o, const point_t *points, FILE *f) {
  char hs[32];
  for (int h = 0; h < o->nhosts_values; h++)
    for (int a = 0; a < WEFT_NUM_ALGOS; a++) {
      const price_t *last = NULL;
      for (int s = 0; s < o->nsizes; s++) {
        const point_t *p = &points[h * o->nsizes + s];
        if (p->price[a].status != PRICE_NOFIT && p->price[a].status != PRICE_FAILED) continue;
        if (last == NULL) fprintf(f, "# %s, %d hosts, not priced at", weft_algo_name((weft_algo_t)a), p->hosts);
        fprintf(f, "%s %s", last ? "," : "", human_size(p->bytes, hs, sizeof(hs)));
        last = &p->price[a];
      }
      if (last != NULL) fprintf(f, " (%s)\n", last->note);
    }
}

static void print_matrix(const opts_t *o, const point_t *points, int npoints, FILE *f) {
  static const char *const names[] = {"time (us)", "algbw (GB/s)", "busbw (GB/s)"};
  char hs[32];
  fprintf(f, "# %s; - : not priced (notes below)\n#%6s %6s %10s", names[o->metric], "hosts", "ranks", "size");
  for (int a = 0; a < WEFT_NUM_ALGOS; a++)
    if (o->algos & (1u << a)) fprintf(f, " %13s", weft_algo_name((weft_algo_t)a));
  fprintf(f, "  tuner\n");
  for (int i = 0; i < npoints; i++) {
    const point_t *p = &points[i];
    fprintf(f, " %6d %6d %10s", p->hosts, p->hosts * o->cluster.per_host, human_size(p->bytes, hs, sizeof(hs)));
    for (int a = 0; a < WEFT_NUM_ALGOS; a++) {
      const price_t *pr = &p->price[a];
      if (!(o->algos & (1u << a))) continue;
      if (pr->status != PRICE_OK) {
        fprintf(f, " %13s", "-");
        continue;
      }
      double v = o->metric == METRIC_TIME    ? pr->seconds * 1e6
                 : o->metric == METRIC_ALGBW ? algbw(p, pr)
                                             : busbw(o, p, pr);
      fprintf(f, " %12.*f%c", o->metric == METRIC_TIME ? 1 : 2, v, pr->scale > 1 ? '*' : ' ');
    }
    fprintf(f, "  %s\n", tuner_name(p));
  }
  print_notes(o, points, f);
}

// The tuner's picks over the sizes of one host count, as runs: "tree (8 B..64 KiB), ring (128 KiB..1 GiB)".
static void print_picks(const opts_t *o, const point_t *row, FILE *f) {
  char lo[32], hi[32];
  for (int s = 0; s < o->nsizes;) {
    int e = s;
    while (e + 1 < o->nsizes && row[e + 1].tuner == row[s].tuner) e++;
    human_size(row[s].bytes, lo, sizeof(lo));
    human_size(row[e].bytes, hi, sizeof(hi));
    if (e == s) fprintf(f, "%s%s (%s)", s ? ", " : "", tuner_name(&row[s]), lo);
    else fprintf(f, "%s%s (%s..%s)", s ? ", " : "", tuner_name(&row[s]), lo, hi);
    s = e + 1;
  }
}

// Per host count: the smallest swept size from which B is faster than A at
// every larger swept size.
static void print_crossover(const opts_t *o, const point_t *points, FILE *f) {
  const char *an = weft_algo_name((weft_algo_t)o->cross_a), *bn = weft_algo_name((weft_algo_t)o->cross_b);
  char hs[32], at[160];
  fprintf(f, "# where %s overtakes %s: the smallest swept size from which %s is faster at every larger swept "
             "size\n", bn, an, bn);
  fprintf(f, "#%6s %6s  %-56s  %s\n", "hosts", "ranks", "crossover", "tuner's picks");
  for (int h = 0; h < o->nhosts_values; h++) {
    const point_t *row = &points[h * o->nsizes];
    int from = o->nsizes, unknown = -1;
    for (int s = o->nsizes - 1; s >= 0; s--) {
      const price_t *pa = &row[s].price[o->cross_a], *pb = &row[s].price[o->cross_b];
      if (pa->status != PRICE_OK || pb->status != PRICE_OK) {
        unknown = s;
        break;
      }
      if (pb->seconds >= pa->seconds) break;
      from = s;
    }
    if (unknown >= 0 && from == o->nsizes) {
      const char *missing = row[unknown].price[o->cross_a].status == PRICE_OK ? bn : an;
      snprintf(at, sizeof(at), "unknown: %s not priced at %s", missing, human_size(row[unknown].bytes, hs, sizeof(hs)));
    } else if (from == o->nsizes) {
      snprintf(at, sizeof(at), "%s faster at every swept size", an);
    } else {
      const price_t *pa = &row[from].price[o->cross_a], *pb = &row[from].price[o->cross_b];
      int len = snprintf(at, sizeof(at), "%s %s (%s %.1f%s vs %s %.1f%s us)", from == 0 ? "<=" : "at",
                         human_size(row[from].bytes, hs, sizeof(hs)), an, pa->seconds * 1e6, pa->scale > 1 ? "*" : "",
                         bn, pb->seconds * 1e6, pb->scale > 1 ? "*" : "");
      if (unknown >= 0 && len > 0 && (size_t)len < sizeof(at))
        snprintf(at + len, sizeof(at) - (size_t)len, ", unknown below");
    }
    fprintf(f, " %6d %6d  %-56s  ", o->hosts[h], o->hosts[h] * o->cluster.per_host, at);
    print_picks(o, row, f);
    fprintf(f, "\n");
  }
  print_notes(o, points, f);
}

static void print_csv(const opts_t *o, const point_t *points, int npoints, FILE *f) {
  fprintf(f, "hosts,ranks,bytes,algorithm,time_us,algbw_gbps,busbw_gbps,scale,tuner,note\n");
  for (int i = 0; i < npoints; i++) {
    const point_t *p = &points[i];
    for (int a = 0; a < WEFT_NUM_ALGOS; a++) {
      const price_t *pr = &p->price[a];
      if (pr->status == PRICE_NONE) continue;
      fprintf(f, "%d,%d,%zu,%s,", p->hosts, p->hosts * o->cluster.per_host, p->bytes, weft_algo_name((weft_algo_t)a));
      if (pr->status == PRICE_OK)
        fprintf(f, "%.3f,%.4f,%.4f,%.0f,", pr->seconds * 1e6, algbw(p, pr), busbw(o, p, pr), pr->scale);
      else
        fprintf(f, ",,,,");
      fprintf(f, "%s,\"%s\"\n", tuner_name(p), pr->note);
    }
  }
}

static void print_json(const opts_t *o, const point_t *points, int npoints, FILE *f) {
  const cluster_t *c = &o->cluster;
  const char *spec = weft_env_NCCL_ALGO();
  fprintf(f, "{\"collective\": \"AllReduce\", \"dtype\": \"float32\", \"cluster\": {\"name\": \"%s\", "
             "\"ranks_per_host\": %d, \"intra\": {\"alpha_us\": %g, \"gbps\": %g}, \"inter\": {\"alpha_us\": %g, "
             "\"gbps_per_host\": %g}},\n \"slice_elements\": %zu, \"max_steps\": %u, \"nccl_algo\": \"%s\",\n "
             "\"points\": [",
          c->name, c->per_host, c->links.intra.alpha * 1e6, c->links.intra.bandwidth * 1e-9,
          c->links.inter.alpha * 1e6, c->links.inter.bandwidth * 1e-9, o->slice, (unsigned)WEFT_COST_MAX_STEPS,
          spec ? spec : "");
  for (int i = 0; i < npoints; i++) {
    const point_t *p = &points[i];
    fprintf(f, "%s\n  {\"hosts\": %d, \"ranks\": %d, \"bytes\": %zu, \"tuner\": \"%s\", \"tuner_by_cost\": %s, "
               "\"algorithms\": {",
            i ? "," : "", p->hosts, p->hosts * c->per_host, p->bytes, tuner_name(p),
            p->tuner_priced ? "true" : "false");
    int first = 1;
    for (int a = 0; a < WEFT_NUM_ALGOS; a++) {
      const price_t *pr = &p->price[a];
      if (pr->status == PRICE_NONE) continue;
      fprintf(f, "%s\"%s\": ", first ? "" : ", ", weft_algo_name((weft_algo_t)a));
      if (pr->status == PRICE_OK)
        fprintf(f, "{\"time_us\": %.3f, \"algbw_gbps\": %.4f, \"busbw_gbps\": %.4f, \"scale\": %.0f}",
                pr->seconds * 1e6, algbw(p, pr), busbw(o, p, pr), pr->scale);
      else
        fprintf(f, "{\"note\": \"%s\"}", pr->note);  // notes hold no quotes or backslashes
      first = 0;
    }
    fprintf(f, "}}");
  }
  fprintf(f, "\n ]}\n");
}

enum {
  OPT_CLUSTER = 256, OPT_GPUS, OPT_INTRA_ALPHA, OPT_INTRA_GBPS, OPT_INTER_ALPHA, OPT_INTER_GBPS, OPT_NIC_GBPS,
  OPT_HOSTS, OPT_SIZES, OPT_ALGO, OPT_JOBS, OPT_MATRIX, OPT_CROSSOVER, OPT_CSV, OPT_JSON
};

static const struct option long_opts[] = {
    {"cluster", required_argument, NULL, OPT_CLUSTER},
    {"gpus-per-host", required_argument, NULL, OPT_GPUS},
    {"ranks-per-host", required_argument, NULL, OPT_GPUS},
    {"intra-alpha-us", required_argument, NULL, OPT_INTRA_ALPHA},
    {"intra-gbps", required_argument, NULL, OPT_INTRA_GBPS},
    {"inter-alpha-us", required_argument, NULL, OPT_INTER_ALPHA},
    {"inter-gbps", required_argument, NULL, OPT_INTER_GBPS},
    {"nic-gbps", required_argument, NULL, OPT_NIC_GBPS},
    {"hosts", required_argument, NULL, OPT_HOSTS},
    {"hosts-range", required_argument, NULL, OPT_HOSTS},
    {"sizes", required_argument, NULL, OPT_SIZES},
    {"algo", required_argument, NULL, OPT_ALGO},
    {"jobs", required_argument, NULL, OPT_JOBS},
    {"matrix", required_argument, NULL, OPT_MATRIX},
    {"crossover", required_argument, NULL, OPT_CROSSOVER},
    {"csv", no_argument, NULL, OPT_CSV},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

// Options given on the command line; a negative number: not given.
typedef struct {
  const char *cluster;
  double intra_alpha, intra_gbps, inter_alpha, inter_gbps, nic_gbps;
  long per_host;
} overrides_t;

static int bad(const char *opt, const char *val) {
  fprintf(stderr, "weft-sim cost: bad value '%s' for --%s (see --help)\n", val, opt);
  return 2;
}

// Parse the command line into *o. Returns -1 to go on, or the exit status to leave with.
static int parse_args(int argc, char **argv, opts_t *o) {
  overrides_t ov = {"h100-8x400g", -1, -1, -1, -1, -1, -1};
  size_t vals[MAX_VALUES];
  int opt, idx, nv;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  *o = (opts_t){.out = OUT_ROWS, .jobs = cores > 0 ? (int)cores : 1};
  nv = parse_values("1..2048", vals, MAX_VALUES);
  for (int i = 0; i < nv; i++) o->hosts[i] = (int)vals[i];
  o->nhosts_values = nv;
  o->nsizes = parse_values("8,256M", o->sizes, MAX_VALUES);
  for (int a = 0; a < WEFT_NUM_ALGOS; a++)
    if (priced_by_default(a)) o->algos |= 1u << a;
  optind = 1;
  opterr = 0;  // messages below name the subcommand
  while ((opt = getopt_long(argc, argv, ":h", long_opts, &idx)) != -1) {
    if (opt == '?' || opt == ':') {
      fprintf(stderr, "weft-sim cost: %s '%s' (see --help)\n", opt == '?' ? "unknown option" : "missing value for",
              argv[optind - 1]);
      return 2;
    }
    const char *name = opt == 'h' ? "" : long_opts[idx].name;
    double *num = opt == OPT_INTRA_ALPHA ? &ov.intra_alpha
                  : opt == OPT_INTRA_GBPS ? &ov.intra_gbps
                  : opt == OPT_INTER_ALPHA ? &ov.inter_alpha
                  : opt == OPT_INTER_GBPS ? &ov.inter_gbps
                  : opt == OPT_NIC_GBPS ? &ov.nic_gbps
                                        : NULL;
    if (num != NULL) {
      if (parse_positive(optarg, num)) return bad(name, optarg);
      continue;
    }
    switch (opt) {
      case OPT_CLUSTER: ov.cluster = optarg; break;
      case OPT_GPUS: {
        char *end;
        ov.per_host = strtol(optarg, &end, 10);
        if (*end != '\0' || ov.per_host < 1 || ov.per_host > MAX_RANKS) return bad(name, optarg);
        break;
      }
      case OPT_HOSTS:
        if ((nv = parse_values(optarg, vals, MAX_VALUES)) < 0) return bad(name, optarg);
        for (int i = 0; i < nv; i++) {
          if (vals[i] < 1 || vals[i] > MAX_RANKS) return bad(name, optarg);
          o->hosts[i] = (int)vals[i];
        }
        o->nhosts_values = nv;
        break;
      case OPT_SIZES:
        if ((nv = parse_values(optarg, vals, MAX_VALUES)) < 0) return bad(name, optarg);
        for (int i = 0; i < nv; i++)
          if (vals[i] == 0 || vals[i] % ESIZE) return bad(name, optarg);
        memcpy(o->sizes, vals, (size_t)nv * sizeof(vals[0]));
        o->nsizes = nv;
        break;
      case OPT_ALGO:
        if (parse_algos(optarg, &o->algos, NULL, NULL) < 1) return bad(name, optarg);
        break;
      case OPT_JOBS: {
        char *end;
        long j = strtol(optarg, &end, 10);
        if (*end != '\0' || j < 1 || j > 256) return bad(name, optarg);
        o->jobs = (int)j;
        break;
      }
      case OPT_MATRIX:
        o->out = OUT_MATRIX;
        if (strcmp(optarg, "time") == 0) o->metric = METRIC_TIME;
        else if (strcmp(optarg, "algbw") == 0) o->metric = METRIC_ALGBW;
        else if (strcmp(optarg, "busbw") == 0) o->metric = METRIC_BUSBW;
        else return bad(name, optarg);
        break;
      case OPT_CROSSOVER: {
        unsigned pair;
        o->out = OUT_CROSSOVER;
        if (parse_algos(optarg, &pair, &o->cross_a, &o->cross_b) != 2 || o->cross_a == o->cross_b)
          return bad(name, optarg);
        break;
      }
      case OPT_CSV: o->out = OUT_CSV; break;
      case OPT_JSON: o->out = OUT_JSON; break;
      default: usage(stdout); return 0;  // -h, --help
    }
  }
  if (optind < argc) {
    fprintf(stderr, "weft-sim cost: unexpected argument '%s'\n", argv[optind]);
    return 2;
  }
  if (o->out == OUT_CROSSOVER) o->algos = (1u << o->cross_a) | (1u << o->cross_b);

  int found = 0;
  for (int i = 0; i < NUM_PRESETS; i++)
    if (strcasecmp(ov.cluster, presets[i].name) == 0) o->cluster = presets[i], found = 1;
  if (!found) return bad("cluster", ov.cluster);
  if (o->cluster.per_host == 0) {  // local: this machine, one rank per core
    const char *file = weft_env_WEFT_TUNE_FILE();
    o->cluster.links = *weft_links();
    o->cluster.per_host = (int)(cores > 0 ? cores : 1);
    o->links_from = o->cluster.links.intra.measured || o->cluster.links.inter.measured ? file : "weft's defaults";
  }
  if (ov.inter_gbps > 0 && ov.nic_gbps > 0) {
    fprintf(stderr, "weft-sim cost: give --inter-gbps (per host) or --nic-gbps (per rank), not both\n");
    return 2;
  }
  if (ov.per_host > 0) o->cluster.per_host = (int)ov.per_host;
  weft_links_t *l = &o->cluster.links;
  if (ov.intra_alpha > 0) l->intra.alpha = ov.intra_alpha * 1e-6;
  if (ov.intra_gbps > 0) l->intra.bandwidth = ov.intra_gbps * 1e9;
  if (ov.inter_alpha > 0) l->inter.alpha = ov.inter_alpha * 1e-6;
  if (ov.inter_gbps > 0) l->inter.bandwidth = ov.inter_gbps * 1e9;
  if (ov.nic_gbps > 0) l->inter.bandwidth = ov.nic_gbps * 1e9 * o->cluster.per_host;
  for (int h = 0; h < o->nhosts_values; h++)
    if ((long)o->hosts[h] * o->cluster.per_host > MAX_RANKS) {
      fprintf(stderr, "weft-sim cost: %d hosts x %d ranks is more than %d ranks\n", o->hosts[h],
              o->cluster.per_host, MAX_RANKS);
      return 2;
    }
  // The slice the tuner sets (tuner.c): half a connection's slots.
  size_t slot_elems = (size_t)weft_env_WEFT_SLOT_BYTES() / ESIZE, half = (size_t)weft_env_WEFT_SLOTS() / 2;
  o->slice = slot_elems * (half > 0 ? half : 1);
  return -1;
}

int weft_sim_cost_main(int argc, char **argv) {
  opts_t o;
  int rc = parse_args(argc, argv, &o);
  if (rc >= 0) return rc;
  int npoints = o.nhosts_values * o.nsizes;
  point_t *points = calloc((size_t)npoints, sizeof(*points));
  double t0 = weft_prog_now_s();
  if (points == NULL || sweep(&o, points) != 0) {
    fprintf(stderr, "weft-sim cost: out of memory or threads\n");
    free(points);
    return 1;
  }
  double elapsed = weft_prog_now_s() - t0;
  for (int i = 0; i < npoints; i++)
    if (points[i].tuner_slice != o.slice) {  // tuner.c changed how it sets the slice: follow it here
      fprintf(stderr, "weft-sim cost: the tuner set a slice of %zu elements, the prices used %zu\n",
              points[i].tuner_slice, o.slice);
      free(points);
      return 1;
    }
  if (o.out == OUT_CSV) {
    print_csv(&o, points, npoints, stdout);
  } else if (o.out == OUT_JSON) {
    print_json(&o, points, npoints, stdout);
  } else {
    print_header(&o, points, npoints, stdout);
    if (o.out == OUT_MATRIX) print_matrix(&o, points, npoints, stdout);
    else if (o.out == OUT_CROSSOVER) print_crossover(&o, points, stdout);
    else print_rows(&o, points, npoints, stdout);
    printf("# %d points priced in %.1f s on %d threads\n", npoints, elapsed, o.jobs);
  }
  free(points);
  return 0;
}
