/*
 * weft_status.c — what every rank of a running job is doing, from outside.
 *
 *   weft-status [PID...]
 *   weft-status --ras[=HOST:PORT] [--json] [--verbose] [--timeout S] [--monitor[=GROUPS]] [--for S]
 *
 * With --ras it asks the job's RAS thread (NCCL_RAS_ADDR) for the whole
 * job, every host included (weft_status_ras.c). Otherwise:
 *
 * Each rank keeps the state of its latest operation in the header of its
 * control segment (src/core/segment.h, written by src/core/engine_status.c):
 * the call, its sequence number, whether it runs, waits (on which rank,
 * since when, with how many bytes moved of how many), finished or failed. The segment's name is
 * unlinked once the ranks have mapped it, so this tool finds it in
 * /proc/PID/maps ("/dev/shm/weft-PID-...-rR (deleted)") and reads the
 * header with process_vm_readv. With no PID it looks at every process.
 * Reading another process needs ptrace permission: weftrun (the ranks'
 * parent) runs this on SIGUSR1; otherwise run it as the job's user where
 * /proc/sys/kernel/yama/ptrace_scope is 0, or as root.
 *
 * Prints one line per rank; exits 1 when no rank was found.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "dtype.h"
#include "schedule.h"
#include "segment.h"
#include "util.h"
#include "weft_status_ras.h"

static const char *state_name(int s) {
  return s == WEFT_STATUS_IDLE ? "idle after" : s == WEFT_STATUS_RUNNING ? "running" : s == WEFT_STATUS_WAITING ? "waiting in" : "failed in";
}

static int read_remote(pid_t pid, uint64_t addr, void *dst, size_t len) {
  struct iovec local = {dst, len}, far = {(void *)(uintptr_t)addr, len};
  return process_vm_readv(pid, &local, 1, &far, 1, 0) == (ssize_t)len ? 0 : -1;
}

// One rank's segment header at addr in pid: print its status line.
static int show(pid_t pid, uint64_t addr, int64_t now) {
  weft_segment_header_t h;
  weft_status_t s;
  if (read_remote(pid, addr, &h, sizeof(h)) != 0) {
    fprintf(stderr, "weft-status: cannot read process %d: %s\n", (int)pid, strerror(errno));
    return 0;
  }
  if (h.magic != WEFT_SEGMENT_MAGIC) return 0;
  uint64_t field = addr + (uint64_t)((char *)&h.status - (char *)&h);
  int tries = 0;
  do {  // a consistent copy: the version is even and unchanged around it
    if (read_remote(pid, field, &s, sizeof(s)) != 0) return 0;
    weft_status_t again;
    if (read_remote(pid, field, &again, sizeof(again)) != 0) return 0;
    if ((atomic_load(&s.version) & 1) == 0 && atomic_load(&s.version) == atomic_load(&again.version)) break;
  } while (++tries < 100);
  printf("pid %d rank %u/%u: ", (int)pid, h.rank, h.nranks);
  if (s.ops_done == 0 && s.state == WEFT_STATUS_IDLE) {
    printf("no operation yet\n");
    return 1;
  }
  printf("%s %s #%" PRIu64 " (count %" PRIu64 ", %s, algo %s)", state_name(s.state), weft_coll_name((weft_coll_t)s.coll),
         s.seq, s.count, weft_dtype_name((ncclDataType_t)s.dtype), weft_algo_name((weft_algo_t)s.algo));
  if (s.state == WEFT_STATUS_WAITING)
    printf(", waiting on rank %d for %.1f s, %" PRIu64 " of %" PRIu64 " bytes moved", s.waiting_on,
           (double)(now - s.since_ns) / 1e9, s.bytes_moved, s.bytes_total);
  else if (s.state == WEFT_STATUS_RUNNING && s.since_ns != 0)  // launch does not read the clock
    printf(" for %.1f s", (double)(now - s.since_ns) / 1e9);
  printf("; %" PRIu64 " operations done\n", s.ops_done);
  return 1;
}

// Every segment pid owns (its name carries the owner's pid): print each.
static int show_pid(pid_t pid) {
  char path[64], line[1024];
  snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return 0;
  int shown = 0;
  char own[32];
  snprintf(own, sizeof(own), "/dev/shm/weft-%d-", (int)pid);
  while (fgets(line, sizeof(line), f) != NULL) {
    uint64_t start = 0;
    if (strstr(line, own) == NULL || sscanf(line, "%" SCNx64 "-", &start) != 1) continue;
    shown += show(pid, start, weft_now_ns());
  }
  fclose(f);
  return shown;
}

// --ras and its options; 2 for bad usage.
static int ras_main(int argc, char **argv) {
  const char *env = getenv("NCCL_RAS_ADDR");
  weft_ras_args_t a = {.addr = env != NULL && env[0] ? env : "localhost:28028", .timeout_s = 5};
  for (int i = 1; i < argc; i++) {
    const char *s = argv[i];
    if (strncmp(s, "--ras=", 6) == 0) a.addr = s + 6;
    else if (strcmp(s, "--ras") == 0) continue;
    else if (strcmp(s, "--json") == 0) a.json = 1;
    else if (strcmp(s, "--verbose") == 0) a.verbose = 1;
    else if (strcmp(s, "--monitor") == 0) a.monitor = "";
    else if (strncmp(s, "--monitor=", 10) == 0) a.monitor = s + 10;
    else if ((strcmp(s, "--timeout") == 0 || strcmp(s, "--for") == 0) && i + 1 < argc) {
      char *end;
      long v = strtol(argv[i + 1], &end, 10);
      if (*end || v < 0) {
        fprintf(stderr, "weft-status: %s needs whole seconds, not '%s'\n", s, argv[i + 1]);
        return 2;
      }
      *(strcmp(s, "--for") == 0 ? &a.for_s : &a.timeout_s) = (int)v;
      i++;
    } else {
      fprintf(stderr, "weft-status: unknown option '%s'\n", s);
      return 2;
    }
  }
  return weft_status_ras(&a);
}

int main(int argc, char **argv) {
  if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
    printf("usage: weft-status [PID...]   (no PID: every process with a weft communicator on this host)\n"
           "       weft-status --ras[=HOST:PORT] [--json] [--verbose] [--timeout S] [--monitor[=GROUPS]] [--for S]\n"
           "                                 (the whole job, from its RAS threads)\n");
    return 0;
  }
  if (argc > 1 && strncmp(argv[1], "--ras", 5) == 0) return ras_main(argc, argv);
  int shown = 0;
  for (int i = 1; i < argc; i++) {
    char *end;
    long pid = strtol(argv[i], &end, 10);
    if (*end || pid <= 0) {
      fprintf(stderr, "weft-status: '%s' is not a process id\n", argv[i]);
      return 2;
    }
    shown += show_pid((pid_t)pid);
  }
  if (argc == 1) {
    DIR *d = opendir("/proc");
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
      if (isdigit((unsigned char)e->d_name[0])) shown += show_pid((pid_t)atol(e->d_name));
    if (d != NULL) closedir(d);
  }
  if (shown == 0) fprintf(stderr, "weft-status: no weft communicator found%s\n", argc > 1 ? " in those processes" : "");
  return shown ? 0 : 1;
}
