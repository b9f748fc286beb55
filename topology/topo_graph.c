/*
 * topo_graph.c — the topology graph's storage: nodes, links, pending NVLink
 * descriptions, attribute lists, bus ids and names.
 *
 * Arrays grow by doubling; indices stay valid while the graph lives, so
 * nodes and links refer to each other by index.
 */
#include "topo.h"
#include "busid.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int grow(void **array, int *cap, int need, size_t elem) {
  if (need <= *cap) return 0;
  int ncap = *cap ? *cap * 2 : 16;
  while (ncap < need) ncap *= 2;
  void *p = realloc(*array, (size_t)ncap * elem);
  if (!p) return -1;
  memset((char *)p + (size_t)*cap * elem, 0, (size_t)(ncap - *cap) * elem);
  *array = p;
  *cap = ncap;
  return 0;
}

weft_topo_t *weft_topo_new(const char *source) {
  weft_topo_t *topo = calloc(1, sizeof(*topo));
  if (topo && source) snprintf(topo->source, sizeof(topo->source), "%s", source);
  return topo;
}

void weft_topo_attrs_free(weft_topo_attrs_t *attrs) {
  for (int i = 0; i < attrs->count; i++) {
    free(attrs->items[i].key);
    free(attrs->items[i].value);
  }
  free(attrs->items);
  memset(attrs, 0, sizeof(*attrs));
}

void weft_topo_free(weft_topo_t *topo) {
  if (!topo) return;
  for (int i = 0; i < topo->nnodes; i++) {
    weft_topo_attrs_free(&topo->nodes[i].attrs);
    weft_topo_attrs_free(&topo->nodes[i].dev);
    free(topo->nodes[i].adj);
  }
  weft_topo_attrs_free(&topo->system);
  free(topo->nodes);
  free(topo->links);
  free(topo->nvlinks);
  free(topo);
}

int weft_topo_add_node(weft_topo_t *topo, weft_topo_kind_t kind, int parent) {
  if (grow((void **)&topo->nodes, &topo->nodes_cap, topo->nnodes + 1, sizeof(weft_topo_node_t))) return -1;
  weft_topo_node_t *n = &topo->nodes[topo->nnodes];
  memset(n, 0, sizeof(*n));
  n->kind = kind;
  n->parent = parent;
  n->cpu = n->numa = n->pci_class = -1;
  return topo->nnodes++;
}

int weft_topo_add_link(weft_topo_t *topo, int a, int b, weft_link_kind_t kind, double bw, int count) {
  if (grow((void **)&topo->links, &topo->links_cap, topo->nlinks + 1, sizeof(weft_topo_link_t))) return -1;
  topo->links[topo->nlinks] = (weft_topo_link_t){
      .a = a, .b = b, .kind = kind, .bw = bw, .lat_us = weft_topo_link_latency_us(kind), .count = count};
  return topo->nlinks++;
}

int weft_topo_add_nvlink(weft_topo_t *topo, int from, const char *target, int count, int tclass, int mbps) {
  if (grow((void **)&topo->nvlinks, &topo->nvlinks_cap, topo->nnvlinks + 1, sizeof(weft_topo_nvlink_t))) return -1;
  weft_topo_nvlink_t *l = &topo->nvlinks[topo->nnvlinks++];
  l->from = from;
  weft_topo_busid_norm(target, l->target, sizeof(l->target));
  l->count = count;
  l->tclass = tclass;
  l->mbps = mbps > 0 ? mbps : 0;
  return 0;
}

int weft_topo_attr_set(weft_topo_attrs_t *attrs, const char *key, const char *value) {
  for (int i = 0; i < attrs->count; i++) {
    if (strcmp(attrs->items[i].key, key) == 0) {
      char *v = strdup(value);
      if (!v) return -1;
      free(attrs->items[i].value);
      attrs->items[i].value = v;
      return 0;
    }
  }
  if (grow((void **)&attrs->items, &attrs->cap, attrs->count + 1, sizeof(weft_topo_attr_t))) return -1;
  char *k = strdup(key), *v = strdup(value);
  if (!k || !v) {
    free(k);
    free(v);
    return -1;
  }
  attrs->items[attrs->count++] = (weft_topo_attr_t){k, v};
  return 0;
}

int weft_topo_attr_setf(weft_topo_attrs_t *attrs, const char *key, const char *fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return weft_topo_attr_set(attrs, key, buf);
}

const char *weft_topo_attr_get(const weft_topo_attrs_t *attrs, const char *key) {
  for (int i = 0; i < attrs->count; i++)
    if (strcmp(attrs->items[i].key, key) == 0) return attrs->items[i].value;
  return NULL;
}

void weft_topo_busid_norm(const char *in, char *out, size_t outlen) {
  if (weft_busid_parse(in, out, outlen)) return;
  size_t i = 0;
  for (; in && in[i] && i + 1 < outlen; i++) out[i] = (char)tolower((unsigned char)in[i]);
  if (outlen) out[i] = '\0';
}

int weft_topo_find_busid(const weft_topo_t *topo, const char *busid) {
  char norm[32];
  weft_topo_busid_norm(busid, norm, sizeof(norm));
  for (int i = 0; i < topo->nnodes; i++) {
    const weft_topo_node_t *n = &topo->nodes[i];
    if (n->busid[0] && strcmp(n->busid, norm) == 0) return i;
  }
  return -1;
}

int weft_topo_count(const weft_topo_t *topo, weft_topo_kind_t kind) {
  int c = 0;
  for (int i = 0; i < topo->nnodes; i++) c += topo->nodes[i].kind == kind;
  return c;
}

const char *weft_topo_label(const weft_topo_t *topo, int node, char *buf, size_t len) {
  const weft_topo_node_t *n = &topo->nodes[node];
  const char *name = weft_topo_attr_get(&n->attrs, "name");
  if (n->kind == WEFT_TOPO_CPU)
    snprintf(buf, len, "numa%d", n->numa);
  else if (n->busid[0])
    snprintf(buf, len, "%s", n->busid);
  else if (n->kind == WEFT_TOPO_NET && name)
    snprintf(buf, len, "%s", name);
  else if (n->kind == WEFT_TOPO_NIC) {
    // A NIC without PCI takes its first port's name.
    for (int i = 0; i < topo->nnodes; i++)
      if (topo->nodes[i].parent == node && (name = weft_topo_attr_get(&topo->nodes[i].attrs, "name"))) {
        snprintf(buf, len, "%s", name);
        return buf;
      }
    snprintf(buf, len, "nic%d", node);
  } else
    snprintf(buf, len, "%s%d", weft_topo_kind_name(n->kind), node);
  return buf;
}

const char *weft_topo_kind_name(weft_topo_kind_t kind) {
  static const char *names[] = {"CPU", "PCI", "GPU", "NVS", "NIC", "NET"};
  return kind < WEFT_TOPO_KINDS ? names[kind] : "?";
}

const char *weft_link_kind_name(weft_link_kind_t kind) {
  static const char *names[] = {"LOC", "NVL", "PCI", "SYS", "NET"};
  return kind <= WEFT_LINK_NET ? names[kind] : "?";
}

const char *weft_path_class_name(weft_path_class_t cls) {
  static const char *names[] = {"LOC", "NVL", "NVB", "PIX", "PXB", "PHB", "SYS", "NET", "DIS"};
  return cls <= WEFT_PATH_DIS ? names[cls] : "?";
}
