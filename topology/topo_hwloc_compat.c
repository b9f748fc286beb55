/*
 * topo_hwloc_compat.c — lets the hwloc 2 library read hwloc 3 XML files.
 *
 * hwloc 3 writes <topology version="3.0"> and OS device types as a bit mask
 * (storage 1, memory 2, GPU 4, coprocessor 8, network 16, OpenFabrics 32,
 * DMA 64) where hwloc 2 has an enumeration (block 0, GPU 1, network 2,
 * OpenFabrics 3, DMA 4, coprocessor 5). The rest of what weft reads (NUMA
 * nodes, packages, PCI bridges and devices, distances) is written alike, so
 * the file is translated in memory and handed to hwloc as a buffer.
 */
#include "topo_hwloc_compat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int osdev_v2(long mask) {
  if (mask & 32) return 3; // OpenFabrics (often also flagged network)
  if (mask & 16) return 2;
  if (mask & 8) return 5;
  if (mask & 4) return 1;
  if (mask & 64) return 4;
  return 0;
}

char *weft_hwloc_xml_v2(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *in = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n + 4096 + 1 > cap) {
      char *p = realloc(in, cap = cap ? cap * 2 : 65536);
      if (!p) {
        free(in);
        fclose(f);
        return NULL;
      }
      in = p;
    }
    size_t r = fread(in + n, 1, 4096, f);
    n += r;
    if (r == 0) break;
  }
  fclose(f);
  in[n] = '\0';
  char *version = strstr(in, "<topology version=\"3.");
  if (!version) {
    free(in);
    return NULL;
  }
  version[strlen("<topology version=\"")] = '2';
  // Rewrite osdev_type="MASK" in place: the new value is one digit, padded
  // with spaces inside the quotes would be invalid, so build a new buffer.
  char *out = malloc(n + 1);
  if (!out) {
    free(in);
    return NULL;
  }
  const char *key = "osdev_type=\"";
  size_t o = 0;
  for (const char *p = in; *p;) {
    const char *hit = strstr(p, key);
    if (!hit) {
      size_t rest = strlen(p);
      memcpy(out + o, p, rest);
      o += rest;
      break;
    }
    size_t head = (size_t)(hit - p) + strlen(key);
    memcpy(out + o, p, head);
    o += head;
    char *end;
    long mask = strtol(hit + strlen(key), &end, 10);
    p = end;
    if (end == hit + strlen(key)) continue; // no number: nothing to rewrite (and no room to add a digit)
    out[o++] = (char)('0' + osdev_v2(mask));
  }
  out[o] = '\0';
  free(in);
  *len = o;
  return out;
}
