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

// The first line of any file in dir that contains `what`: what follows it
// into out (len bytes). 1 when found, else 0.
static inline int weft_test_log_line(const char *dir, const char *what, char *out, size_t len) {
  DIR *d = opendir(dir);
  int found = 0;
  for (struct dirent *e; d != NULL && !found && (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    char path[600], line[2048];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "r");
    while (f != NULL && !found && fgets(line, sizeof(line), f) != NULL) {
      const char *at = strstr(line, what);
      if (at != NULL) {
        snprintf(out, len, "%s", at + strlen(what));
        found = 1;
      }
    }
    if (f != NULL) fclose(f);
  }
  if (d != NULL) closedir(d);
  return found;
}

// Removes dir and the files in it, unless WEFT_TEST_KEEP_LOGS=1 asks to
// keep them (to read by hand; the folder is named on stderr).
static inline void weft_test_logs_remove(const char *dir) {
  const char *keep = getenv("WEFT_TEST_KEEP_LOGS");
  if (keep != NULL && keep[0] == '1') {
    fprintf(stderr, "logs kept in %s\n", dir);
    return;
  }
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
