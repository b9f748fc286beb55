/*
 * rank_logs.h — reading what every rank logged: a test points the NCCL log
 * of each forked rank at a file of its own in a fresh folder, runs, then
 * counts the files with a given line. Header-only, like harness.h.
 */
#ifndef WEFT_TEST_RANK_LOGS_H
#define WEFT_TEST_RANK_LOGS_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Makes the folder /tmp/<name>-XXXXXX (its path into dir, len bytes) and
// sends the NCCL log of every process started after this, at `level` for
// `subsys`, to a file per process in it. Returns 0, or -1 when the folder
// cannot be made.
static inline int weft_test_log_per_rank(char *dir, size_t len, const char *name, const char *level,
                                         const char *subsys) {
  char file[600];
  snprintf(dir, len, "/tmp/%s-XXXXXX", name);
  if (mkdtemp(dir) == NULL) return -1;
  snprintf(file, sizeof(file), "%s/rank.%%p", dir);
  setenv("NCCL_DEBUG", level, 1);
  setenv("NCCL_DEBUG_SUBSYS", subsys, 1);
  setenv("NCCL_DEBUG_FILE", file, 1);
  return 0;
}

// How many files in dir have a line that contains a (and b, unless NULL).
static inline int weft_test_logs_with(const char *dir, const char *a, const char *b) {
  DIR *d = opendir(dir);
  int found = 0;
  for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    char path[600], line[2048];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "r");
    int hit = 0;
    while (f != NULL && !hit && fgets(line, sizeof(line), f) != NULL)
      hit = strstr(line, a) != NULL && (b == NULL || strstr(line, b) != NULL);
    if (f != NULL) fclose(f);
    found += hit;
  }
  if (d != NULL) closedir(d);
  return found;
}

// Removes dir and the logs in it.
static inline void weft_test_logs_remove(const char *dir) {
  DIR *d = opendir(dir);
  for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    char path[600];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    unlink(path);
  }
  if (d != NULL) closedir(d);
  rmdir(dir);
}

#endif
