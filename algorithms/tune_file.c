/*
 * tune_file.c — the measured link constants the cost model prices with.
 *
 * weft-calibrate measures a link (one-way time t(s) = alpha + s / bandwidth
 * between two ranks) and writes one line per link kind into a tuning file:
 *
 *   # comment
 *   intra 0.42 6.10      (shared memory: alpha in us, bandwidth in GB/s)
 *   inter 28.5 1.15      (the network)
 *
 * WEFT_TUNE_FILE names the file; without it the defaults in tune_file.h
 * stand, and so does any kind the file does not list. A line that does not
 * parse, or a value that is not positive and finite, is reported once and
 * ignored. The file is read once per process.
 */
#include "tune_file.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "checks.h"
#include "env.h"

static weft_links_t links = WEFT_LINKS_DEFAULT;

static void load(void) {
  const char *path = weft_env_WEFT_TUNE_FILE();
  if (path == NULL || path[0] == '\0') return;
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    INFO(WEFT_LOG_TUNING, "WEFT_TUNE_FILE=%s cannot be read: the tuner uses its default link constants", path);
    return;
  }
  char line[256];
  for (int no = 1; fgets(line, sizeof(line), f) != NULL; no++) {
    char kind[32];
    double alpha_us, gbps;
    if (line[0] == '#' || line[strspn(line, " \t\r\n")] == '\0') continue;
    if (sscanf(line, "%31s %lf %lf", kind, &alpha_us, &gbps) != 3 || !isfinite(alpha_us) || !isfinite(gbps) ||
        alpha_us < 0 || gbps <= 0 || (strcmp(kind, "intra") != 0 && strcmp(kind, "inter") != 0)) {
      WARN("WEFT_TUNE_FILE=%s line %d is not 'intra|inter ALPHA_US BANDWIDTH_GBPS'; ignored", path, no);
      continue;
    }
    weft_link_t *l = strcmp(kind, "intra") == 0 ? &links.intra : &links.inter;
    l->alpha = alpha_us * 1e-6;
    l->bandwidth = gbps * 1e9;
    l->measured = 1;
  }
  fclose(f);
  INFO(WEFT_LOG_TUNING, "link constants: intra %.2f us %.2f GB/s (%s), inter %.2f us %.2f GB/s (%s)",
       links.intra.alpha * 1e6, links.intra.bandwidth * 1e-9, links.intra.measured ? path : "default",
       links.inter.alpha * 1e6, links.inter.bandwidth * 1e-9, links.inter.measured ? path : "default");
}

const weft_links_t *weft_links(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, load);
  return &links;
}
