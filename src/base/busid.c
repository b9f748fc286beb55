/*
 * busid.c — PCI bus ids: one parser for every place that reads them.
 */
#include "busid.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int weft_busid_parse(const char *in, char *out, size_t len) {
  unsigned dom, bus, dev, fn;
  char tail;
  if (in == NULL || in[strspn(in, "0123456789abcdefABCDEF:.")] != '\0' ||  // no "0x", signs or spaces
      sscanf(in, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) != 4)
    return 0;
  snprintf(out, len, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
  return 1;
}

void weft_busid_of_link(const char *path, char *out, size_t len) {
  char real[PATH_MAX];
  if (len > 0) out[0] = '\0';
  if (realpath(path, real) == NULL) return;
  const char *base = strrchr(real, '/');
  weft_busid_parse(base ? base + 1 : real, out, len);
}
