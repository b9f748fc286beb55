/*
 * test_hygiene.c — nothing leaks across communicator lifetimes.
 *
 * One process creates two ranks with ncclCommInitAll, runs an AllReduce on
 * them (grouped: one thread drives both), and destroys them — 1,000 times.
 * After a warm-up (allocator pools, the per-thread operation cache), the
 * open descriptors and threads must not grow at all, and the resident
 * memory by no more than 2 MiB (allocator noise; not checked under
 * AddressSanitizer, whose quarantine holds freed memory, and whose leak
 * check covers memory there). The same with ncclCommAbort instead of destroy.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <unistd.h>

#include "harness.h"

static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) n += e->d_name[0] != '.';
  closedir(d);
  return n;  // for /proc/self/fd this counts opendir's own descriptor too: the same every time
}

static long resident_kib(void) {
  long pages = 0, rss = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f == NULL) return -1;
  if (fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = -1;
  fclose(f);
  return rss < 0 ? -1 : rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static void cycle(int abort_instead) {
  ncclComm_t comms[2];
  int devs[2] = {0, 1};
  cr_assert_eq(ncclCommInitAll(comms, 2, devs), ncclSuccess);
  float x[2] = {1, 2}, y[2] = {0, 0};
  cr_assert_eq(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; r++) ncclAllReduce(&x[r], &y[r], 1, ncclFloat32, ncclSum, comms[r], NULL);
  cr_assert_eq(ncclGroupEnd(), ncclSuccess);
  cr_assert(y[0] == 3 && y[1] == 3, "AllReduce gave %g and %g", y[0], y[1]);
  for (int r = 0; r < 2; r++)
    cr_assert_eq(abort_instead ? ncclCommAbort(comms[r]) : ncclCommDestroy(comms[r]), ncclSuccess);
}

static void run_cycles(int abort_instead) {
  weft_test_env_defaults();
  for (int i = 0; i < 50; i++) cycle(abort_instead);
  int fds = count_entries("/proc/self/fd"), threads = count_entries("/proc/self/task");
  long rss = resident_kib();
  double t0 = weft_test_now();
  for (int i = 0; i < 1000; i++) cycle(abort_instead);
  double secs = weft_test_now() - t0;
  int fds2 = count_entries("/proc/self/fd"), threads2 = count_entries("/proc/self/task");
  long rss2 = resident_kib();
  cr_log_info("1000 init/%s cycles in %.1f s: descriptors %d -> %d, threads %d -> %d, resident %ld -> %ld KiB",
              abort_instead ? "abort" : "destroy", secs, fds, fds2, threads, threads2, rss, rss2);
  cr_expect_eq(fds2, fds, "open descriptors grew from %d to %d", fds, fds2);
  cr_expect_eq(threads2, threads, "threads grew from %d to %d", threads, threads2);
#if defined(__SANITIZE_ADDRESS__)
  (void)rss2;  // AddressSanitizer keeps freed memory in quarantine: resident size says nothing here
#else
  cr_expect_lt(rss2 - rss, 2048, "resident memory grew by %ld KiB", rss2 - rss);
#endif
}

Test(hygiene, thousand_init_destroy_cycles_stay_flat, .timeout = 240) { run_cycles(0); }
Test(hygiene, thousand_init_abort_cycles_stay_flat, .timeout = 240) { run_cycles(1); }
