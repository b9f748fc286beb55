/*
 * weftrun.c — start the ranks of a weft job on this host.
 *
 *   weftrun -n N [-t SECONDS] [--tag-output] [--keep-going] [--] prog [args...]
 *   weftrun -n N --nranks TOTAL [--first-rank R] [-t SECONDS] [--tag-output] [--keep-going]
 *           (--id-out FILE | --id ID | --id-file FILE) [--] prog [args...]
 *
 * weftrun creates the job's ncclUniqueId (unless it joins one, below; its
 * process hosts the rendezvous in a library thread, so it stays alive
 * until the ranks finish), then starts N copies of prog with
 * WEFT_UNIQUE_ID, WEFT_RANK, WEFT_NRANKS, WEFT_LOCAL_RANK and
 * WEFT_LOCAL_SIZE set; weftInitFromEnv turns those into a communicator.
 * The ranks share one new process group. On SIGUSR1 weftrun prints what
 * every rank is doing (it runs weft-status, from its own directory, on the
 * ranks). It forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGUSR2 to them (a second
 * terminating signal kills them outright), and when a rank fails it stops
 * the others (SIGTERM, SIGKILL 3 s later) and exits with that rank's status
 * (128+signal for a signal); with --keep-going it lets them run on (to see
 * how the survivors of a failure fare) and exits with the first failure's
 * status once all have ended. -t bounds the wall time (exit 124).
 * --tag-output prefixes every output line with "[rank] ". Ranks other than
 * 0 read stdin from /dev/null.
 *
 * A job that spans hosts is one weftrun per host, each starting its share
 * of the ranks: --nranks is the size of the whole job and --first-rank the
 * global rank of this host's first rank (WEFT_RANK = R + local rank,
 * WEFT_NRANKS = TOTAL, WEFT_LOCAL_RANK/SIZE count this host's ranks). One
 * weftrun creates the id, and so hosts the rendezvous, and writes it to
 * --id-out FILE (256 hex digits and a newline, mode 0600, replaced
 * atomically, before any rank starts); the others join with --id ID or
 * --id-file FILE. Each weftrun supervises only its own ranks; stopping the
 * other hosts' weftruns when one fails is the caller's job. A job entirely
 * on this host gets its bootstrap on loopback unless NCCL_SOCKET_IFNAME or
 * NCCL_COMM_ID say otherwise; a job that spans hosts keeps the caller's
 * NCCL_SOCKET_IFNAME.
 *
 * Everything waits in one poll() on a signalfd (SIGCHLD and the forwarded
 * signals, blocked in every thread) and the output pipes: no busy waiting.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"
#include "weft.h"
#include "prog_util.h"

extern char **environ;

#define MAX_RANKS 1024
#define GRACE_MS 3000  // SIGTERM -> SIGKILL
#define DRAIN_MS 1000  // how long output may trail the last rank's exit
#define LINE_CAP 8192  // longer lines are split

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};  // SIGUSR1: status
static const char *const weft_vars[] = {"WEFT_UNIQUE_ID", "WEFT_RANK", "WEFT_NRANKS",
                                        "WEFT_LOCAL_RANK", "WEFT_LOCAL_SIZE"};

typedef struct {
  pid_t pid;
  int running;
  char **envp;
  char exec_error[256];  // preformatted for the child
} rank_t;

typedef struct {  // one rank's stdout or stderr under --tag-output
  int fd, dest, rank;
  size_t len;
  char buf[LINE_CAP];
} stream_t;

// The one job of this process. Static, so its allocations stay reachable.
static struct {
  int n, tag_output, keep_going;
  int nranks, first_rank;  // the whole job's size; global rank of local rank 0
  const char *id_text;     // --id: join this job instead of creating one
  const char *id_file;     // --id-file: the same, read from a file
  const char *id_out;      // --id-out: where to write the id this weftrun creates
  double time_limit;  // seconds; 0 = none
  char **argv;        // prog and its arguments
  char *path;         // prog resolved through PATH
  int running, open_streams, stopping, exit_code, term_signals;
  pid_t pgid;
  rank_t *ranks;
  stream_t *streams;          // 2 per rank under --tag-output, else NULL
  int64_t limit_at, kill_at;  // -1 when not armed
} job = {.limit_at = -1, .kill_at = -1};

static void usage(FILE *out) {
  fprintf(out,
          "usage: weftrun -n N [-t SECONDS] [--tag-output] [--] prog [args...]\n"
          "       weftrun -n N --nranks TOTAL [--first-rank R] [-t SECONDS] [--tag-output]\n"
          "               (--id-out FILE | --id ID | --id-file FILE) [--] prog [args...]\n"
          "  -n N              number of ranks to start on this host (1-%d)\n"
          "  -t SECONDS        kill the job after this wall time and exit 124\n"
          "  --tag-output      prefix each output line with \"[rank] \"\n"
          "  --keep-going      when a rank fails, let the others run on\n"
          "  --nranks TOTAL    ranks in the whole job, on every host (default N)\n"
          "  --first-rank R    global rank of this host's first rank (default 0)\n"
          "  --id-out FILE     create the job's id here, write it to FILE (this weftrun\n"
          "                    hosts the rendezvous and must live until the job ends)\n"
          "  --id ID           join the job whose id (256 hex digits) another weftrun made\n"
          "  --id-file FILE    the same, with the id read from FILE\n",
          MAX_RANKS);
}

__attribute__((format(printf, 1, 2), noreturn)) static void usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "weftrun: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  usage(stderr);
  exit(2);
}

// A non-negative decimal int, or -1.
static long parse_count(const char *text) {
  char *end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno || end == text || *end || v < 0 || v > INT_MAX) return -1;
  return v;
}

static void parse_args(int argc, char **argv) {
  enum { OPT_TAG = 'T', OPT_NRANKS = 256, OPT_FIRST, OPT_ID, OPT_ID_FILE, OPT_ID_OUT, OPT_KEEP };
  static const struct option longopts[] = {{"tag-output", no_argument, NULL, OPT_TAG},
                                           {"keep-going", no_argument, NULL, OPT_KEEP},
                                           {"nranks", required_argument, NULL, OPT_NRANKS},
                                           {"first-rank", required_argument, NULL, OPT_FIRST},
                                           {"id", required_argument, NULL, OPT_ID},
                                           {"id-file", required_argument, NULL, OPT_ID_FILE},
                                           {"id-out", required_argument, NULL, OPT_ID_OUT},
                                           {"help", no_argument, NULL, 'h'},
                                           {NULL, 0, NULL, 0}};
  opterr = 0;  // our own messages
  job.nranks = -1;
  int c;
  while ((c = getopt_long(argc, argv, "+n:t:h", longopts, NULL)) != -1) {
    char *end;
    errno = 0;
    if (c == 'n') {
      long n = strtol(optarg, &end, 10);
      if (errno || end == optarg || *end || n < 1 || n > MAX_RANKS)
        usage_error("-n '%s': expected a number of ranks from 1 to %d", optarg, MAX_RANKS);
      job.n = (int)n;
    } else if (c == 't') {
      double t = strtod(optarg, &end);
      if (errno || end == optarg || *end || !(t > 0) || t > 1e9)
        usage_error("-t '%s': expected a positive number of seconds", optarg);
      job.time_limit = t;
    } else if (c == OPT_TAG) {
      job.tag_output = 1;
    } else if (c == OPT_KEEP) {
      job.keep_going = 1;
    } else if (c == OPT_NRANKS) {
      long v = parse_count(optarg);
      if (v < 1)
        usage_error("--nranks '%s': expected a number of ranks from 1 to %d", optarg, INT_MAX);
      job.nranks = (int)v;
    } else if (c == OPT_FIRST) {
      long v = parse_count(optarg);
      if (v < 0)
        usage_error("--first-rank '%s': expected a rank from 0 to %d", optarg, INT_MAX - 1);
      job.first_rank = (int)v;
    } else if (c == OPT_ID) {
      job.id_text = optarg;
    } else if (c == OPT_ID_FILE) {
      job.id_file = optarg;
    } else if (c == OPT_ID_OUT) {
      job.id_out = optarg;
    } else if (c == 'h') {
      usage(stdout);
      exit(0);
    } else if (optopt == 'n' || optopt == 't') {
      usage_error("option -%c needs a value", optopt);
    } else if (optopt >= OPT_NRANKS && optopt <= OPT_ID_OUT) {
      usage_error("option '%s' needs a value", argv[optind - 1]);
    } else {
      usage_error("unknown option '%s'", argv[optind - 1]);
    }
  }
  if (job.n == 0) usage_error("-n N is required");
  if (job.nranks < 0) job.nranks = job.n;
  if (job.first_rank > job.nranks - job.n)
    usage_error("--first-rank %d with -n %d does not fit in --nranks %d", job.first_rank, job.n,
                job.nranks);
  if ((job.id_text != NULL) + (job.id_file != NULL) + (job.id_out != NULL) > 1)
    usage_error("--id, --id-file and --id-out exclude each other");
  if (job.nranks > job.n && job.id_text == NULL && job.id_file == NULL && job.id_out == NULL)
    usage_error("--nranks %d spans other hosts: give --id-out FILE to start the job, "
                "or --id/--id-file to join it",
                job.nranks);
  if (optind >= argc) usage_error("no program given");
  job.argv = argv + optind;
}

__attribute__((noreturn)) static void out_of_memory(void) {
  fprintf(stderr, "weftrun: out of memory\n");
  exit(1);
}

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n, size);
  if (p == NULL) out_of_memory();
  return p;
}

__attribute__((format(printf, 1, 2))) static char *xformat(const char *fmt, ...) {
  char *text;
  va_list ap;
  va_start(ap, fmt);
  int n = vasprintf(&text, fmt, ap);
  va_end(ap);
  if (n < 0) out_of_memory();
  return text;
}

// PATH lookup done before forking, so "not found" is one clear message.
static char *resolve_program(const char *name) {
  if (strchr(name, '/')) return xformat("%s", name);
  const char *dirs = getenv("PATH") ? getenv("PATH") : "/usr/local/bin:/usr/bin:/bin";
  for (;;) {
    size_t len = strcspn(dirs, ":");
    char *cand = xformat("%.*s/%s", len ? (int)len : 1, len ? dirs : ".", name);  // "" is "."
    struct stat st;
    if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0) return cand;
    free(cand);
    if (dirs[len] == '\0') return NULL;
    dirs += len + 1;
  }
}

// environ without stale WEFT_* entries, plus the five variables of local rank `local`.
static char **build_env(int local, char *id_var) {
  size_t n = 0, k = 0;
  while (environ[n]) n++;
  char **env = xcalloc(n + 6, sizeof(char *));  // the last stays NULL
  for (size_t i = 0; i < n; i++) {
    int stale = 0;
    for (size_t v = 0; v < sizeof(weft_vars) / sizeof(weft_vars[0]); v++) {
      size_t len = strlen(weft_vars[v]);
      stale |= strncmp(environ[i], weft_vars[v], len) == 0 && environ[i][len] == '=';
    }
    if (!stale) env[k++] = environ[i];
  }
  env[k++] = id_var;
  env[k++] = xformat("WEFT_RANK=%d", job.first_rank + local);
  env[k++] = xformat("WEFT_NRANKS=%d", job.nranks);
  env[k++] = xformat("WEFT_LOCAL_RANK=%d", local);
  env[k++] = xformat("WEFT_LOCAL_SIZE=%d", job.n);
  return env;
}

static void write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // the reader went away: drop the output
    p += w;
    n -= (size_t)w;
  }
}

// In the forked child: only async-signal-safe calls until execve.
static void child_exec(rank_t *r, pid_t parent, const sigset_t *oldmask, int in, int out, int err) {
  setpgid(0, job.pgid);
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // a killed weftrun takes its ranks along
  if (getppid() != parent) _exit(127);
  sigprocmask(SIG_SETMASK, oldmask, NULL);
  if (in >= 0) dup2(in, 0);
  if (out >= 0) dup2(out, 1);
  if (err >= 0) dup2(err, 2);
  close_range(3, ~0u, 0);
  execve(job.path, job.argv, r->envp);
  const char *why = strerrordesc_np(errno);  // a static string: safe here
  write_all(2, r->exec_error, strlen(r->exec_error));
  write_all(2, why, why ? strlen(why) : 0);
  write_all(2, "\n", 1);
  _exit(127);
}

// Sends sig to the job's process group, and directly to any rank that left it.
static void signal_ranks(int sig) {
  if (job.pgid > 0) kill(-job.pgid, sig);
  for (int r = 0; r < job.n; r++)
    if (job.ranks[r].running && getpgid(job.ranks[r].pid) != job.pgid) kill(job.ranks[r].pid, sig);
}

// SIGTERM now, SIGKILL after the grace period; later deaths are not news.
static void stop_job(void) {
  job.stopping = 1;
  job.limit_at = -1;
  if (job.running == 0) return;
  signal_ranks(SIGTERM);
  job.kill_at = (weft_prog_now_ns() / 1000000) + GRACE_MS;
}

static void report_still_running(const char *then) {
  fprintf(stderr, "weftrun: ranks still running:");
  for (int r = 0; r < job.n; r++)
    if (job.ranks[r].running)
      fprintf(stderr, " %d (pid %d)", job.first_rank + r, (int)job.ranks[r].pid);
  fprintf(stderr, "; %s\n", then);
}

// Copies complete lines from a rank's pipe to our stdout/stderr with "[rank] ".
// Returns 1 at end of file (the stream is closed then).
static int pump(stream_t *s) {
  ssize_t got = read(s->fd, s->buf + s->len, LINE_CAP - s->len);
  if (got < 0 && (errno == EINTR || errno == EAGAIN)) return 0;
  int eof = got <= 0;
  s->len += got > 0 ? (size_t)got : 0;
  char out[LINE_CAP + 32];
  int tag = snprintf(out, 32, "[%d] ", s->rank);
  size_t start = 0;
  while (start < s->len) {
    char *nl = memchr(s->buf + start, '\n', s->len - start);
    size_t end = nl ? (size_t)(nl - s->buf) + 1 : s->len;  // one past the line
    if (!nl && !eof && !(start == 0 && s->len == LINE_CAP)) break;  // wait for the rest
    memcpy(out + tag, s->buf + start, end - start);
    size_t olen = (size_t)tag + end - start;
    if (!nl) out[olen++] = '\n';
    write_all(s->dest, out, olen);
    start = end;
  }
  memmove(s->buf, s->buf + start, s->len - start);
  s->len -= start;
  if (eof) {
    close(s->fd);
    s->fd = -1;
  }
  return eof;
}

// Forks every rank; returns 0, or 1 if some could not be started.
static int start_ranks(const sigset_t *oldmask) {
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  pid_t self = getpid();
  fflush(NULL);  // nothing buffered may be written twice
  for (int r = 0; r < job.n; r++) {
    int out[2] = {-1, -1}, err[2] = {-1, -1};
    if (job.tag_output && (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC))) {
      perror("weftrun: pipe");
      return 1;
    }
    pid_t pid = fork();
    if (pid == 0) child_exec(&job.ranks[r], self, oldmask, r ? devnull : -1, out[1], err[1]);
    if (pid < 0) {
      perror("weftrun: fork");
      return 1;
    }
    if (job.pgid == 0) job.pgid = pid;
    setpgid(pid, job.pgid);  // also here, so the group exists before we signal it
    job.ranks[r].pid = pid;
    job.ranks[r].running = 1;
    job.running++;
    for (int k = 0; job.tag_output && k < 2; k++) {
      close(k ? err[1] : out[1]);
      int fd = k ? err[0] : out[0];
      fcntl(fd, F_SETFL, O_NONBLOCK);
      job.streams[2 * r + k] = (stream_t){.fd = fd, .dest = 1 + k, .rank = job.first_rank + r};
      job.open_streams++;
    }
  }
  return 0;
}

// SIGUSR1: weft-status (next to this program) on the running ranks, its
// output on our stderr. Waited for: it only reads, and quickly.
static void show_status(void) {
  char self[4096], tool[4200];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return;
  self[n] = '\0';
  char *slash = strrchr(self, '/');
  if (slash != NULL) *slash = '\0';
  snprintf(tool, sizeof(tool), "%s/weft-status", self);
  char **argv = xcalloc((size_t)job.n + 2, sizeof(char *));
  int argc = 0;
  argv[argc++] = tool;
  for (int r = 0; r < job.n; r++)
    if (job.ranks[r].running) argv[argc++] = xformat("%d", (int)job.ranks[r].pid);
  fprintf(stderr, "weftrun: status of %d running ranks:\n", argc - 1);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(2, 1);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execv(tool, argv);
    fprintf(stderr, "weftrun: cannot run %s: %s\n", tool, strerror(errno));
    _exit(127);
  }
  if (pid > 0)
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
  for (int i = 1; i < argc; i++) free(argv[i]);
  free(argv);
}

// Forwards signals read from the signalfd; returns whether a child changed state.
static int handle_signals(int sfd) {
  struct signalfd_siginfo si;
  int child_changed = 0;
  while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
    int sig = (int)si.ssi_signo;
    if (sig == SIGCHLD) {
      child_changed = 1;
      continue;
    }
    if (sig == SIGUSR1) {
      show_status();
      continue;
    }
    signal_ranks(sig);
    if ((sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT) &&
        ++job.term_signals == 2) {
      fprintf(stderr, "weftrun: second terminating signal; killing all ranks\n");
      signal_ranks(SIGKILL);
    }
  }
  return child_changed;
}

// Collects exited ranks; the first failure sets the exit status and stops the rest.
static void reap(void) {
  for (int r = 0; r < job.n; r++) {
    rank_t *rk = &job.ranks[r];
    int st;
    if (!rk->running || waitpid(rk->pid, &st, WNOHANG) != rk->pid) continue;
    rk->running = 0;
    job.running--;
    if ((WIFEXITED(st) && WEXITSTATUS(st) == 0) || job.stopping) continue;
    int first = job.exit_code == 0;
    if (WIFEXITED(st)) {
      if (first) job.exit_code = WEXITSTATUS(st);
      fprintf(stderr, "weftrun: rank %d (pid %d) exited with status %d\n", job.first_rank + r,
              (int)rk->pid, WEXITSTATUS(st));
    } else {
      int sig = WTERMSIG(st);
      if (first) job.exit_code = 128 + sig;
      fprintf(stderr, "weftrun: rank %d (pid %d) killed by signal %d (SIG%s)\n", job.first_rank + r,
              (int)rk->pid, sig, sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
    }
    if (!job.keep_going) stop_job();
  }
}

// Waits for the ranks (and their output) while enforcing the deadlines.
static void supervise(int sfd) {
  int64_t drain_until = -1;
  struct pollfd *pfd = xcalloc(1 + 2 * (size_t)job.n, sizeof(struct pollfd));
  int *which = xcalloc(1 + 2 * (size_t)job.n, sizeof(int));  // pfd index -> stream
  while (job.running > 0 || job.open_streams > 0) {
    int64_t now = (weft_prog_now_ns() / 1000000);
    if (job.running == 0) {
      if (drain_until < 0) drain_until = now + DRAIN_MS;
      if (now >= drain_until) break;  // a stray descendant holds a pipe open
    }
    if (job.limit_at >= 0 && now >= job.limit_at) {
      fprintf(stderr, "weftrun: time limit of %g s reached\n", job.time_limit);
      report_still_running("sending SIGTERM");
      stop_job();
      job.exit_code = 124;
    }
    if (job.kill_at >= 0 && now >= job.kill_at) {
      if (job.running > 0) report_still_running("sending SIGKILL");
      signal_ranks(SIGKILL);
      job.kill_at = -1;
    }
    int64_t wake = -1, deadlines[3] = {job.limit_at, job.kill_at, drain_until};
    for (int k = 0; k < 3; k++)
      if (deadlines[k] >= 0 && (wake < 0 || deadlines[k] < wake)) wake = deadlines[k];

    int nfds = 0;
    pfd[nfds++] = (struct pollfd){.fd = sfd, .events = POLLIN};
    for (int k = 0; job.streams && k < 2 * job.n; k++)
      if (job.streams[k].fd >= 0) {
        which[nfds] = k;
        pfd[nfds++] = (struct pollfd){.fd = job.streams[k].fd, .events = POLLIN};
      }
    if (poll(pfd, (nfds_t)nfds, wake < 0 ? -1 : (int)(wake > now ? wake - now : 0)) < 0) {
      if (errno == EINTR) continue;
      perror("weftrun: poll");
      exit(1);
    }
    for (int k = 1; k < nfds; k++)
      if (pfd[k].revents) job.open_streams -= pump(&job.streams[which[k]]);
    if ((pfd[0].revents & POLLIN) && handle_signals(sfd)) reap();
  }
  free(pfd);
  free(which);
}

// --id-file: the text of FILE without surrounding white space, or NULL (reported).
static char *read_id_file(const char *path) {
  FILE *f = fopen(path, "re");
  if (f == NULL) {
    fprintf(stderr, "weftrun: --id-file %s: %s\n", path, strerror(errno));
    return NULL;
  }
  char buf[2 * WEFT_UNIQUE_ID_STRLEN];
  size_t got = fread(buf, 1, sizeof(buf) - 1, f);
  int failed = ferror(f);
  fclose(f);
  if (failed) {
    fprintf(stderr, "weftrun: --id-file %s: read error\n", path);
    return NULL;
  }
  buf[got] = '\0';
  char *start = buf + strspn(buf, " \t\r\n");
  size_t len = strcspn(start, " \t\r\n");
  return xformat("%.*s", (int)len, start);
}

// --id-out: writes a temporary file beside `path` and renames it into
// place, so a reader polling for `path` never sees part of an id. Mode
// 0600: the id carries the job's secret. Returns 0, or -1 (reported).
static int write_id_file(const char *path, const char *text) {
  char *tmp = xformat("%s.tmp.%d", path, (int)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  int ok = fd >= 0;
  if (ok) {
    char *line = xformat("%s\n", text);
    size_t len = strlen(line), off = 0;
    while (ok && off < len) {
      ssize_t w = write(fd, line + off, len - off);
      if (w < 0 && errno == EINTR) continue;
      ok = w > 0;
      off += w > 0 ? (size_t)w : 0;
    }
    free(line);
    ok = close(fd) == 0 && ok;
  }
  ok = ok && rename(tmp, path) == 0;
  if (!ok) {
    fprintf(stderr, "weftrun: --id-out %s: %s\n", path, strerror(errno));
    unlink(tmp);
  }
  free(tmp);
  return ok ? 0 : -1;
}

// The job's id as text in id_text: taken from --id/--id-file, or created
// here (this process then hosts the rendezvous) and written to --id-out.
// Returns 0, or the exit status for a failure it has reported.
static int job_id(char *id_text) {
  ncclUniqueId id;
  if (job.id_text != NULL || job.id_file != NULL) {
    char *from_file = job.id_file ? read_id_file(job.id_file) : NULL;
    if (job.id_file != NULL && from_file == NULL) return 1;
    const char *text = from_file ? from_file : job.id_text;
    int bad = weftUniqueIdFromString(text, &id) != ncclSuccess;
    free(from_file);
    if (bad && job.id_file == NULL)
      usage_error("--id: not a job id (%s)", ncclGetLastError(NULL));
    if (bad) {
      fprintf(stderr, "weftrun: --id-file %s: not a job id (%s)\n", job.id_file,
              ncclGetLastError(NULL));
      return 2;
    }
    weftUniqueIdToString(&id, id_text, WEFT_UNIQUE_ID_STRLEN);  // canonical lowercase
    return 0;
  }
  ncclResult_t res = ncclGetUniqueId(&id);
  if (res == ncclSuccess) res = weftUniqueIdToString(&id, id_text, WEFT_UNIQUE_ID_STRLEN);
  if (res != ncclSuccess) {
    fprintf(stderr, "weftrun: cannot create the job's unique id: %s (%s)\n",
            ncclGetErrorString(res), ncclGetLastError(NULL));
    return 1;
  }
  if (job.id_out != NULL && write_id_file(job.id_out, id_text) != 0) return 1;
  return 0;
}

int main(int argc, char **argv) {
  parse_args(argc, argv);
  job.path = resolve_program(job.argv[0]);
  if (job.path == NULL) {
    fprintf(stderr, "weftrun: %s: command not found\n", job.argv[0]);
    return 127;
  }

  // A job entirely on this host: keep bootstrap on loopback unless told otherwise.
  int local_job = job.nranks == job.n && job.id_text == NULL && job.id_file == NULL;
  if (local_job && getenv("NCCL_SOCKET_IFNAME") == NULL && getenv("NCCL_COMM_ID") == NULL)
    setenv("NCCL_SOCKET_IFNAME", "lo", 1);

  // Block before the library starts its threads, so they inherit the mask
  // and every one of these signals reaches the signalfd. SIGPIPE is blocked
  // too: a closed stdout must not kill us before the ranks are reaped.
  sigset_t mask, oldmask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  for (size_t k = 0; k < sizeof(forwarded) / sizeof(forwarded[0]); k++)
    sigaddset(&mask, forwarded[k]);
  sigaddset(&mask, SIGPIPE);
  sigprocmask(SIG_BLOCK, &mask, &oldmask);
  sigdelset(&mask, SIGPIPE);
  int sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sfd < 0) {
    perror("weftrun: signalfd");
    return 1;
  }

  char id_text[WEFT_UNIQUE_ID_STRLEN];
  int status = job_id(id_text);
  if (status != 0) return status;

  // Everything the children need is built before the first fork.
  char *id_var = xformat("WEFT_UNIQUE_ID=%s", id_text);
  job.ranks = xcalloc((size_t)job.n, sizeof(rank_t));
  job.streams = job.tag_output ? xcalloc(2 * (size_t)job.n, sizeof(stream_t)) : NULL;
  for (int r = 0; r < job.n; r++) {
    job.ranks[r].envp = build_env(r, id_var);
    snprintf(job.ranks[r].exec_error, sizeof(job.ranks[r].exec_error),
             "weftrun: rank %d: cannot execute '%s': ", job.first_rank + r, job.path);
  }

  if (start_ranks(&oldmask) != 0) {
    job.exit_code = 1;
    stop_job();
  } else if (job.time_limit > 0) {
    job.limit_at = (weft_prog_now_ns() / 1000000) + (int64_t)(job.time_limit * 1000);
  }
  supervise(sfd);
  return job.exit_code;
}
