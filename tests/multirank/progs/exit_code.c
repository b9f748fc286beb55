/*
 * exit_code.c — a rank that fails on demand, for weftrun's process-control
 * tests. No communicator: it only reads weftrun's environment.
 *
 *   exit_code FAIL_RANK CODE DIR [SLEEP_S]
 *
 * Every rank checks the WEFT_* variables weftrun sets (exit 99 if wrong),
 * writes its pid to DIR/pid.<rank>, prints one line to stdout and one to
 * stderr, and on SIGTERM creates DIR/term.<rank> and dies by SIGTERM. Rank
 * FAIL_RANK waits until every rank has written its pid, then exits with
 * CODE (CODE < 0: kills itself with signal -CODE). The other ranks sleep
 * SLEEP_S seconds (default 60) and exit 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char term_path[4096];

static void on_term(int sig) {
  int fd = open(term_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) close(fd);
  signal(sig, SIG_DFL);
  raise(sig);
}

static int env_int(const char *name) {
  const char *v = getenv(name);
  if (v == NULL) {
    fprintf(stderr, "exit_code: %s is not set\n", name);
    exit(99);
  }
  return atoi(v);
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: exit_code FAIL_RANK CODE DIR [SLEEP_S]\n");
    return 98;
  }
  int fail_rank = atoi(argv[1]), code = atoi(argv[2]);
  const char *dir = argv[3];
  int sleep_s = argc > 4 ? atoi(argv[4]) : 60;

  int rank = env_int("WEFT_RANK"), nranks = env_int("WEFT_NRANKS");
  const char *id = getenv("WEFT_UNIQUE_ID");
  if (id == NULL || strlen(id) != 256 || env_int("WEFT_LOCAL_RANK") != rank ||
      env_int("WEFT_LOCAL_SIZE") != nranks || rank < 0 || rank >= nranks) {
    fprintf(stderr, "exit_code: inconsistent WEFT_* environment\n");
    return 99;
  }

  snprintf(term_path, sizeof(term_path), "%s/term.%d", dir, rank);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_term;
  sigaction(SIGTERM, &sa, NULL);

  char path[4096], tmp[4096];
  snprintf(path, sizeof(path), "%s/pid.%d", dir, rank);
  snprintf(tmp, sizeof(tmp), "%s/.pid.%d.tmp", dir, rank);
  FILE *f = fopen(tmp, "w");
  if (f == NULL || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0 ||
      rename(tmp, path) != 0) {
    perror("exit_code: writing the pid file");
    return 97;
  }
  printf("rank %d of %d pid %d\n", rank, nranks, (int)getpid());
  fflush(stdout);
  fprintf(stderr, "rank %d stderr line\n", rank);

  if (rank == fail_rank) {
    for (int waited = 0; waited < 10000; waited += 10) {  // all pids written?
      int all = 1;
      for (int r = 0; r < nranks && all; r++) {
        snprintf(path, sizeof(path), "%s/pid.%d", dir, r);
        all = access(path, F_OK) == 0;
      }
      if (all) break;
      sleep_ms(10);
    }
    if (code < 0) {
      signal(-code, SIG_DFL);
      raise(-code);
    }
    return code;
  }
  sleep_ms(sleep_s * 1000L);
  return 0;
}
