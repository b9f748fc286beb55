/*
 * net_ib_hca.c — NCCL_IB_HCA, NCCL's syntax for choosing RDMA devices:
 * a comma list of name[:port]; a leading '^' excludes what matches instead
 * of keeping it; '=' (after any '^') makes names exact, where the default
 * is a prefix match ("mlx5" keeps mlx5_0 and mlx5_1). No port: any port.
 * Malformed text is refused with a message naming the problem, so a typo
 * does not silently select every device.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net_ib.h"

static int valid_name_char(char ch) { return isalnum((unsigned char)ch) || ch == '_' || ch == '-' || ch == '.'; }

// One "name[:port]" of length len at s.
static int parse_one(const char *s, size_t len, weft_ib_hca_spec_t *spec, char *err, size_t errlen) {
  const char *colon = memchr(s, ':', len);
  size_t nlen = colon ? (size_t)(colon - s) : len;
  if (nlen == 0) {
    snprintf(err, errlen, "NCCL_IB_HCA: an entry has no device name");
    return -1;
  }
  if (nlen >= sizeof(spec->name)) {
    snprintf(err, errlen, "NCCL_IB_HCA: device name '%.*s' is longer than %zu characters", (int)nlen, s,
             sizeof(spec->name) - 1);
    return -1;
  }
  for (size_t i = 0; i < nlen; i++)
    if (!valid_name_char(s[i])) {
      snprintf(err, errlen, "NCCL_IB_HCA: '%.*s' is not a device name (character '%c')", (int)nlen, s, s[i]);
      return -1;
    }
  memcpy(spec->name, s, nlen);
  spec->name[nlen] = '\0';
  spec->port = -1;
  if (colon) {
    size_t plen = len - nlen - 1;
    int port = 0;
    if (plen == 0 || plen > 3) port = -1;
    for (size_t i = 0; i < plen && port >= 0; i++)
      port = isdigit((unsigned char)colon[1 + i]) ? port * 10 + (colon[1 + i] - '0') : -1;
    if (port < 1 || port > 255) {
      snprintf(err, errlen, "NCCL_IB_HCA: '%.*s' has a bad port (want 1..255)", (int)len, s);
      return -1;
    }
    spec->port = port;
  }
  return 0;
}

int weft_ib_hca_parse(const char *text, weft_ib_hca_list_t *list, char *err, size_t errlen) {
  memset(list, 0, sizeof(*list));
  if (err && errlen) err[0] = '\0';
  if (text == NULL || text[0] == '\0') return 0;
  const char *s = text;
  if (*s == '^') list->exclude = 1, s++;
  if (*s == '=') list->exact = 1, s++;
  if (*s == '\0') {
    snprintf(err, errlen, "NCCL_IB_HCA '%s' names no device", text);
    return -1;
  }
  for (;;) {
    const char *comma = strchr(s, ',');
    size_t len = comma ? (size_t)(comma - s) : strlen(s);
    if (list->n == WEFT_IB_MAX_DEVS) {
      snprintf(err, errlen, "NCCL_IB_HCA: more than %d entries", WEFT_IB_MAX_DEVS);
      memset(list, 0, sizeof(*list));
      return -1;
    }
    if (parse_one(s, len, &list->specs[list->n], err, errlen) != 0) {
      memset(list, 0, sizeof(*list));
      return -1;
    }
    list->n++;
    if (!comma) break;
    s = comma + 1;
  }
  return 0;
}

int weft_ib_hca_match(const weft_ib_hca_list_t *list, const char *dev, int port) {
  if (list->n == 0) return 1;
  int hit = 0;
  for (int i = 0; i < list->n && !hit; i++) {
    const weft_ib_hca_spec_t *s = &list->specs[i];
    int name_ok = list->exact ? strcmp(dev, s->name) == 0 : strncmp(dev, s->name, strlen(s->name)) == 0;
    hit = name_ok && (s->port < 0 || s->port == port);
  }
  return list->exclude ? !hit : hit;
}
