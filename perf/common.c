/*
 * common.c — the driver every *_perf benchmark shares: rank setup, the
 * timing loop and the run as a whole, on host memory. Flags, checks and
 * the report live in common_args.c, common_check.c and common_out.c.
 *
 * Ranks: each process drives nThread threads of nGpus ranks each (a thread
 * issues its ranks' calls in one group). A process is alone (ranks from
 * ncclGetUniqueId), one of `weftrun -n P` (WEFT_UNIQUE_ID/WEFT_RANK/
 * WEFT_NRANKS: global rank = proc*t*g + local), or one rank of a torchrun/
 * Slurm/MPI job (weftInitFromEnv; t*g must be 1). Every rank initialises in
 * its own thread. Process 0's thread 0 prints.
 *
 * The loop follows nccl-tests: per type/op/root, warm up every size
 * (doubling), then per size time -n iterations of -m calls out-of-place and
 * in-place (buffers rotating through the -e allocation), combine the time
 * across ranks (-a), and check one more call on fresh inputs. A failed call
 * ends the process at once with a message: the other ranks would otherwise
 * wait for it forever.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common_internal.h"
#include "prog_util.h"

const perf_coll_t *perf_coll;
const char *perf_prog;
int perf_nranks, perf_proc;

static perf_opts_t *const o = &perf_opts;  // short for the options
#define NCCLCHECK(call)                                   \
  do {                                                    \
    ncclResult_t r_ = (call);                             \
    if (r_ != ncclSuccess) die_nccl(r_, #call, __LINE__); \
  } while (0)

static void die_nccl(ncclResult_t r, const char *what, int line) {
  char host[64] = "?";
  gethostname(host, sizeof(host) - 1);
  fprintf(stderr, "%s: Test NCCL failure %s:%d '%s / %s' (%s)\n", host, __FILE__, line,
          ncclGetErrorString(r), ncclGetLastError(NULL), what);
  fflush(NULL);
  _exit(3);
}

static void die(int status, const char *msg) {
  fprintf(stderr, "%s: %s\n", perf_prog, msg);
  fflush(NULL);
  _exit(status);
}

// ---- Calls on one thread's ranks

// In-place all-reduce of one 8-byte value per rank, NULL stream: done on return.
static void small_allreduce(perf_thread_t *th, void *vals, ncclDataType_t t, ncclRedOp_t op) {
  NCCLCHECK(ncclGroupStart());
  for (int l = 0; l < o->ngpus; l++) {
    char *p = (char *)vals + 8 * l;
    NCCLCHECK(ncclAllReduce(p, p, 1, t, op, th->comms[l], NULL));
  }
  NCCLCHECK(ncclGroupEnd());
}

// Every rank of every process: an all-reduce cannot finish before all join.
static void barrier(perf_thread_t *th) { small_allreduce(th, th->itmp, ncclInt64, ncclSum); }

static int64_t sum_i64(perf_thread_t *th, int64_t v) {
  for (int l = 0; l < o->ngpus; l++) th->itmp[l] = l == 0 ? v : 0;
  small_allreduce(th, th->itmp, ncclInt64, ncclSum);
  return th->itmp[0];
}

// A thread's time over all ranks as -a asks: 0 rank 0, 1 mean, 2 min, 3 max.
static double combine_time(perf_thread_t *th, double sec) {
  for (int l = 0; l < o->ngpus; l++) th->dtmp[l] = o->average == 0 && th->first + l != 0 ? 0 : sec;
  small_allreduce(th, th->dtmp, ncclFloat64,
                  o->average == 2   ? ncclMin
                  : o->average == 3 ? ncclMax
                                    : ncclSum);
  return o->average == 1 ? th->dtmp[0] / perf_nranks : th->dtmp[0];
}

static void sync_streams(perf_thread_t *th) {
  for (int l = 0; l < o->ngpus; l++)
    if (o->device) perf_dev_sync(th->streams[l]);
    else if (th->streams[l] != NULL) NCCLCHECK(weftStreamSynchronize(th->streams[l]));
}

// Issues call number `iter` on every rank of th.
static void start(perf_thread_t *th, int t, int op, int root, int inplace, int iter) {
  size_t e = (size_t)perf_types[t].size;
  size_t total = (th->c.send > th->c.recv ? th->c.send : th->c.recv) * e;
  size_t steps = total ? o->maxbytes / total : 1;
  size_t shift = total * ((size_t)iter % (steps ? steps : 1));  // rotate through the buffer
  int nsteps = perf_coll->steps ? perf_coll->steps(perf_nranks) : 1;
  for (int step = 0; step < nsteps; step++) {
    if (o->ngpus > 1) NCCLCHECK(ncclGroupStart());
    for (int l = 0; l < o->ngpus; l++) {
      int rank = th->first + l;
      char *recv = perf_recv_base(th, l, t) + shift, *send = perf_send_base(th, l, t) + shift;
      perf_call_t call = {.send = inplace ? recv + th->c.send_inplace * (size_t)rank * e : send,
                          .recv = recv + (inplace ? th->c.recv_inplace * (size_t)rank * e : 0),
                          .count = th->c.param,
                          .type = (ncclDataType_t)t,
                          .op = (ncclRedOp_t)op,
                          .root = root,
                          .rank = rank,
                          .nranks = perf_nranks,
                          .step = step,
                          .comm = th->comms[l],
                          .stream = th->streams[l]};
      if (op == PERF_OP_PREMUL) {
        uint64_t scalar = 0;
        perf_check_put(t, &scalar, 0, perf_check_scalar(rank));
        NCCLCHECK(ncclRedOpCreatePreMulSum(&call.op, &scalar, (ncclDataType_t)t,
                                           ncclScalarHostImmediate, th->comms[l]));
      }
      NCCLCHECK(perf_coll->run(&call));
      if (op == PERF_OP_PREMUL) NCCLCHECK(ncclRedOpDestroy(call.op, th->comms[l]));
    }
    if (o->ngpus > 1) NCCLCHECK(ncclGroupEnd());
  }
  if (o->blocking) sync_streams(th);
  if (o->blocking == 1 && o->agg <= 1) barrier(th);
}

static void complete(perf_thread_t *th) {
  if (o->blocking && o->agg <= 1) return;  // already waited for in start()
  sync_streams(th);
}

// ---- The benchmark loop (every thread)

static int printer(const perf_thread_t *th) { return perf_proc == 0 && th->thread == 0; }

static void bench(perf_thread_t *th, int t, int op, int root, int inplace) {
  if (o->check) perf_check_fill(th, t, op, 99, inplace);
  start(th, t, op, root, inplace, 0);
  complete(th);
  barrier(th);

  double coll_only = 0, t0 = weft_prog_now_s();
  for (int iter = 0; iter < o->iters; iter++) {
    double ti = o->blocking == 3 ? weft_prog_now_s() : 0;  // -z 3 times each call; the others only the loop
    if (o->agg > 1) NCCLCHECK(ncclGroupStart());
    for (int a = 0; a < o->agg; a++) start(th, t, op, root, inplace, iter * o->agg + a);
    if (o->agg > 1) NCCLCHECK(ncclGroupEnd());
    if (o->blocking == 3) {
      sync_streams(th);
      coll_only += weft_prog_now_s() - ti;
      barrier(th);
    }
  }
  double n = (double)o->iters * o->agg;
  double cpu = (o->blocking == 3 ? coll_only : weft_prog_now_s() - t0) / n;
  complete(th);
  double sec = combine_time(th, (o->blocking == 3 ? coll_only : weft_prog_now_s() - t0) / n);
  double alg = 0, bus = 0;
  perf_coll->bw(th->c.param, (size_t)perf_types[t].size, sec, perf_nranks, &alg, &bus);
  barrier(th);

  int report = o->check && (!inplace || perf_coll->check_inplace);
  int64_t wrong = 0;
  th->rep++;
  for (int k = 0; report && k < o->check; k++) {
    perf_check_fill(th, t, op, (uint64_t)th->rep, inplace);
    start(th, t, op, root, inplace, 0);
    complete(th);
    int64_t mine = perf_check_count(th, t, op, root, (uint64_t)th->rep, inplace);
    if (mine) th->errors++;
    if ((wrong = sum_i64(th, mine)) != 0) break;
  }
  if (printer(th)) perf_out_half((o->cputime ? cpu : sec) * 1e6, alg, bus, report, wrong, inplace);
  th->bw_sum += bus;
  th->bw_count++;
}

// The size after s (a factor sweep goes on from 0 to 1); 0 past maxbytes.
static size_t next_size(size_t s, size_t factor, size_t step) {
  size_t n;
  if (factor > 1)
    n = s == 0 ? 1 : s > o->maxbytes / factor ? 0 : s * factor;
  else
    n = step > o->maxbytes - s ? 0 : s + step;
  return n <= s ? 0 : n;
}

static void time_test(perf_thread_t *th, int t, int op, int root) {
  size_t e = (size_t)perf_types[t].size;
  const char *opname = perf_coll->opname ? perf_coll->opname : perf_opnames[op];
  barrier(th);
  for (size_t s = o->minbytes;; s = next_size(s, 2, 0)) {  // warm up every size, doubling
    perf_coll->counts(s / e, e, perf_nranks, &th->c);
    for (int w = 0; w < o->warmup; w++) start(th, t, op, root, 0, w);
    complete(th);
    if (next_size(s, 2, 0) == 0) break;
  }
  long cycles = o->cycles;
  do {
    for (size_t s = o->minbytes;; s = next_size(s, o->stepfactor, o->stepbytes)) {
      perf_coll->counts(s / e, e, perf_nranks, &th->c);
      size_t bytes = (th->c.send > th->c.recv ? th->c.send : th->c.recv) * e;
      if (printer(th)) perf_out_row_start(bytes, th->c.param, t, opname, root);
      bench(th, t, op, root, 0);
      bench(th, t, op, root, 1);
      if (printer(th)) perf_out_row_end();
      if (next_size(s, o->stepfactor, o->stepbytes) == 0) break;
    }
  } while (--cycles != 0);  // -N 0: forever
}

static void *thread_main(void *arg) {
  perf_thread_t *th = arg;
  if (o->device) perf_dev_bind(th->first);
  const perf_coll_t *c = perf_coll;
  int t0 = o->type < 0 ? 0 : o->type, t1 = o->type < 0 ? PERF_NTYPES - 1 : o->type;
  int o0 = c->opname || o->op < 0 ? 0 : o->op, o1 = c->opname   ? 0
                                                    : o->op < 0 ? PERF_NOPS - 1
                                                                : o->op;
  int r0 = !c->rooted ? -1 : o->root < 0 ? 0 : o->root;
  int r1 = !c->rooted ? -1 : o->root < 0 ? perf_nranks - 1 : o->root;
  for (int t = t0; t <= t1; t++)
    for (int o = o0; o <= o1; o++)
      for (int r = r0; r <= r1; r++) time_test(th, t, o, r);
  return NULL;
}

// ---- Ranks and buffers

typedef struct {
  ncclComm_t *slot;
  ncclUniqueId id;
  int rank;
  ncclResult_t res;
} init_job_t;

static void *init_one(void *arg) {
  init_job_t *j = arg;
  if (o->device) perf_dev_bind(j->rank);  // as with NCCL: the communicator belongs to the current device
  j->res = ncclCommInitRank(j->slot, perf_nranks, j->id, j->rank);
  return NULL;
}

// World size a torchrun/Slurm/MPI launcher announced, 0 if none did.
static int launcher_world(void) {
  static const char *const vars[][2] = {{"RANK", "WORLD_SIZE"},
                                        {"SLURM_PROCID", "SLURM_NTASKS"},
                                        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                        {"PMI_RANK", "PMI_SIZE"}};
  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
    if (getenv(vars[i][0]) && getenv(vars[i][1])) return atoi(getenv(vars[i][1]));
  return 0;
}

static int env_int(const char *name, int lo, int *out) {
  const char *s = getenv(name);
  char *end;
  long v = s ? strtol(s, &end, 10) : -1;
  if (s == NULL || end == s || *end || v < lo || v > 1 << 20) return -1;
  *out = (int)v;
  return 0;
}

// Makes this process's `local` communicators: global ranks proc*local + i.
static void make_comms(ncclComm_t *comms, int local) {
  const char *text = getenv("WEFT_UNIQUE_ID");
  ncclUniqueId id;
  int nprocs = 1;
  if (text == NULL && launcher_world() > 1) {
    if (local != 1)
      die(2,
          "under torchrun/Slurm/MPI each process is one rank: -t and -g must be 1 "
          "(use weftrun for several ranks per process)");
    if (o->device) perf_dev_bind(getenv("LOCAL_RANK") ? atoi(getenv("LOCAL_RANK")) : 0);
    NCCLCHECK(weftInitFromEnv(&comms[0]));
    NCCLCHECK(ncclCommUserRank(comms[0], &perf_proc));
    NCCLCHECK(ncclCommCount(comms[0], &perf_nranks));
    return;
  }
  if (text != NULL) {
    if (env_int("WEFT_RANK", 0, &perf_proc) || env_int("WEFT_NRANKS", 1, &nprocs) ||
        perf_proc >= nprocs)
      die(2, "WEFT_UNIQUE_ID is set but WEFT_RANK/WEFT_NRANKS are missing or invalid");
    NCCLCHECK(weftUniqueIdFromString(text, &id));
  } else {
    NCCLCHECK(ncclGetUniqueId(&id));
  }
  perf_nranks = nprocs * local;
  init_job_t *jobs = calloc((size_t)local, sizeof(*jobs));
  pthread_t *tids = calloc((size_t)local, sizeof(*tids));
  if (!jobs || !tids) die(3, "out of memory");
  for (int i = 0; i < local; i++) {
    jobs[i] = (init_job_t){.slot = &comms[i], .id = id, .rank = perf_proc * local + i};
    if (local > 1 && pthread_create(&tids[i], NULL, init_one, &jobs[i]) != 0)
      die(3, "pthread_create failed");
  }
  if (local == 1) init_one(&jobs[0]);
  for (int i = 0; local > 1 && i < local; i++) pthread_join(tids[i], NULL);
  for (int i = 0; i < local; i++) NCCLCHECK(jobs[i].res);
  free(jobs);
  free(tids);
}

// Every rank's pid and host, for process 0's "# Using devices" block.
static perf_rank_info_t *gather_info(ncclComm_t *comms, int local) {
  perf_rank_info_t *mine = calloc((size_t)local, sizeof(*mine));
  perf_rank_info_t *all = calloc((size_t)local * (size_t)perf_nranks, sizeof(*all));
  if (!mine || !all) die(3, "out of memory");
  for (int i = 0; i < local; i++) {
    mine[i].pid = (int32_t)getpid();
    gethostname(mine[i].host, sizeof(mine[i].host) - 1);
    mine[i].host[strcspn(mine[i].host, ".")] = '\0';
  }
  NCCLCHECK(ncclGroupStart());
  for (int i = 0; i < local; i++)
    NCCLCHECK(ncclAllGather(&mine[i], all + (size_t)i * perf_nranks, sizeof(*mine), ncclInt8,
                            comms[i], NULL));
  NCCLCHECK(ncclGroupEnd());
  free(mine);
  return all;  // the first perf_nranks entries: every rank in order
}

// All-reduce over the whole job of one int64 per local rank: v from this
// process's first rank, `rest` from its others.
static int64_t job_reduce(ncclComm_t *comms, int local, int64_t *tmp, int64_t v, int64_t rest,
                          ncclRedOp_t op) {
  for (int i = 0; i < local; i++) tmp[i] = i == 0 ? v : rest;
  NCCLCHECK(ncclGroupStart());
  for (int i = 0; i < local; i++)
    NCCLCHECK(ncclAllReduce(tmp + i, tmp + i, 1, ncclInt64, op, comms[i], NULL));
  NCCLCHECK(ncclGroupEnd());
  return tmp[0];
}

// Like nccl-tests on a GPU: lower -e when this host's memory cannot hold
// every local rank's buffers (send, receive and, when checking, a copy),
// keeping a reserve; the smallest limit of any rank wins. Returns 1 if lowered.
static int limit_maxbytes(ncclComm_t *comms, int local, int64_t *tmp) {
  const char *ls =
      getenv("WEFT_LOCAL_SIZE") ? getenv("WEFT_LOCAL_SIZE") : getenv("LOCAL_WORLD_SIZE");
  double here = (double)local * (ls && atoi(ls) > 0 ? atoi(ls) : 1), gib = 1073741824.0;
  double phys = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
  double budget = phys - fmin(ceil(phys / (16 * gib)) * gib, 4 * gib) - gib;
  double fit = budget / (here * (o->check ? 3 : 2)) - 8.0 * o->unalign - 64;
  int64_t mine = fit < 4096 ? 4096 : fit > 9e18 ? (int64_t)9e18 : (int64_t)fit;
  int64_t lim = job_reduce(comms, local, tmp, mine, mine, ncclMin);
  if ((uint64_t)lim >= o->maxbytes) return 0;
  o->maxbytes = (size_t)lim;
  if (o->minbytes > o->maxbytes) o->minbytes = o->maxbytes;
  return 1;
}

int perf_main(const perf_coll_t *c, int argc, char **argv) {
  perf_coll = c;
  perf_prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
  setvbuf(stdout, NULL, _IOLBF, 0);
  int rc = perf_args_parse(argc, argv);
  if (rc >= 0) return rc;

  int T = o->nthreads, G = o->ngpus, local = T * G;
  ncclComm_t *comms = calloc((size_t)local, sizeof(*comms));
  cudaStream_t *streams = calloc((size_t)local, sizeof(*streams));
  char **bufs = calloc(5 * (size_t)local, sizeof(*bufs));  // send, recv, snap; --device: host send, recv
  void **handles = calloc(2 * (size_t)local, sizeof(*handles));
  perf_thread_t *th = calloc((size_t)T, sizeof(*th));
  double *dtmp = calloc((size_t)local, 8);
  int64_t *itmp = calloc((size_t)local, 8);
  if (!comms || !streams || !bufs || !handles || !th || !dtmp || !itmp) die(3, "out of memory");
  if (o->device) perf_dev_open();
  make_comms(comms, local);
  if (c->rooted && o->root >= perf_nranks) {
    if (perf_proc == 0)
      fprintf(stderr, "%s: -r %d is not a rank (there are %d)\n", perf_prog, o->root, perf_nranks);
    fflush(NULL);
    _exit(2);
  }
  perf_rank_info_t *info = gather_info(comms, local);
  int reduced = limit_maxbytes(comms, local, itmp);

  size_t bytes = o->maxbytes + 8 * (size_t)o->unalign + 64;
  if (o->reg == 2 && local > 1) {  // window registration is collective: one communicator per thread of control
    if (perf_proc == 0) fprintf(stderr, "%s: -R 2 needs one rank per process; using -R 1\n", perf_prog);
    o->reg = 1;
  }
  for (int i = 0; i < local; i++) {
    if (o->device) perf_dev_bind(perf_proc * local + i);  // ncclMemAlloc gives memory of the current device
    for (int k = 0; k < 2; k++) {
      if (ncclMemAlloc((void **)&bufs[k * local + i], bytes) != ncclSuccess)
        die(3, "cannot allocate the message buffers; lower -e");
      if (o->reg == 2)  // every rank's buffers in its part of a symmetric window (NCCL 2.27's -R 2)
        NCCLCHECK(ncclCommWindowRegister(comms[i], bufs[k * local + i], bytes, (ncclWindow_t *)&handles[k * local + i],
                                         NCCL_WIN_COLL_SYMMETRIC));
      else if (o->reg)
        NCCLCHECK(ncclCommRegister(comms[i], bufs[k * local + i], bytes, &handles[k * local + i]));
    }
    if (o->check && (bufs[2 * local + i] = malloc(bytes)) == NULL)
      die(3, "cannot allocate the check buffers; lower -e or use -c 0");
    for (int k = 0; k < 2; k++) {  // what the checks read and write
      bufs[(3 + k) * local + i] = !o->device ? bufs[k * local + i] : o->check ? malloc(bytes) : NULL;
      if (o->device && o->check && bufs[(3 + k) * local + i] == NULL) die(3, "cannot allocate the host copies");
    }
    if (o->device)
      streams[i] = o->stream_null ? NULL : perf_dev_stream();
    else if (!(o->stream_null || o->blocking == 1 || o->blocking == 2))
      NCCLCHECK(weftStreamCreate(&streams[i]));
  }

  int pow2 = (perf_nranks & (perf_nranks - 1)) == 0;
  if (perf_proc == 0) {
    if (o->json) perf_out_json_open(argc, argv);
    perf_out_header(info, reduced);
    if (c->pow2_only && !pow2) printf("nRanks %d is not a power of 2, skipping\n", perf_nranks);
  }
  for (int t = 0; t < T; t++)
    th[t] = (perf_thread_t){.thread = t,
                            .first = perf_proc * local + t * G,
                            .comms = comms + t * G,
                            .streams = streams + t * G,
                            .send = bufs + t * G,
                            .recv = bufs + local + t * G,
                            .snap = bufs + 2 * local + t * G,
                            .hsend = bufs + 3 * local + t * G,
                            .hrecv = bufs + 4 * local + t * G,
                            .dtmp = dtmp + t * G,
                            .itmp = itmp + t * G};
  if (!c->pow2_only || pow2) {
    for (int t = 1; t < T; t++)
      if (pthread_create(&th[t].tid, NULL, thread_main, &th[t]) != 0)
        die(3, "pthread_create failed");
    thread_main(&th[0]);
    for (int t = 1; t < T; t++) pthread_join(th[t].tid, NULL);
  }

  // nccl-tests' "Out of bounds values": checks that found errors, per thread, whole job.
  int64_t errors = 0;
  double bw = 0;
  int bw_count = 0;
  for (int t = 0; t < T; t++)
    errors += th[t].errors, bw += th[t].bw_sum, bw_count += th[t].bw_count;
  errors = job_reduce(comms, local, itmp, errors, 0, ncclSum);
  bw = bw_count ? bw / bw_count : 0;
  const char *minbw = getenv("NCCL_TESTS_MIN_BW");
  int slow = minbw && bw < atof(minbw) * 0.9;
  if (perf_proc == 0) perf_out_footer(errors, bw, minbw != NULL, slow);

  for (int i = 0; i < local; i++) {
    if (o->device && streams[i]) perf_dev_stream_destroy(streams[i]);
    else if (streams[i]) NCCLCHECK(weftStreamDestroy(streams[i]));
    if (o->device) free(bufs[3 * local + i]), free(bufs[4 * local + i]);
    for (int k = 0; k < 2; k++) {
      if (o->reg == 2) NCCLCHECK(ncclCommWindowDeregister(comms[i], (ncclWindow_t)handles[k * local + i]));
      else if (o->reg) NCCLCHECK(ncclCommDeregister(comms[i], handles[k * local + i]));
      NCCLCHECK(ncclMemFree(bufs[k * local + i]));
    }
    free(bufs[2 * local + i]);
    NCCLCHECK(ncclCommDestroy(comms[i]));
  }
  free(comms), free(streams), free(bufs), free(handles), free(th), free(dtmp), free(itmp);
  free(info);
  return errors || slow ? 1 : 0;
}
