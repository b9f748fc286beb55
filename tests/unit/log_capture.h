/*
 * log_capture.h — unit tests that read back what the library logged: send
 * NCCL_DEBUG=INFO lines of some subsystems to a per-process file, then
 * count the lines that contain a text.
 */
#ifndef WEFT_TEST_LOG_CAPTURE_H
#define WEFT_TEST_LOG_CAPTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "debug.h"
#include "env.h"

static char log_path[64];

// INFO (and WARN) lines of `subsys` go to /tmp/weft-<tag>-<pid>.log from now on.
static inline void log_to_file(const char *tag, const char *subsys) {
  snprintf(log_path, sizeof(log_path), "/tmp/weft-%s-%d.log", tag, (int)getpid());
  unlink(log_path);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", subsys, 1);
  setenv("NCCL_DEBUG_FILE", log_path, 1);
  weft_env_reset();
  weft_debug_reset();
}

// How many lines of the log contain `needle`.
static inline int log_count(const char *needle) {
  FILE *f = fopen(log_path, "r");
  if (f == NULL) return 0;
  char line[1024];
  int n = 0;
  while (fgets(line, sizeof(line), f) != NULL) n += strstr(line, needle) != NULL;
  fclose(f);
  return n;
}

#endif
