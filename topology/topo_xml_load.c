/*
 * topo_xml_load.c — reads NCCL's topology XML (NCCL_TOPO_FILE) with libxml2.
 *
 * The format: <system> holds one <cpu> per NUMA node; under it a tree of
 * <pci> elements (switches, bridges, devices); a GPU is a <pci> holding a
 * <gpu> element whose <nvlink target=busid count=N tclass=C/> children name
 * its NVLinks (weft adds bw=, MB/s per link, where a description gave it);
 * an NVSwitch that is a PCI device may hold <nvswitchlink target=busid
 * count=N tclass=C bw=M/> children, its links to other NVSwitches (weft's
 * own element, which NCCL skips: NCCL treats all NVSwitches as one); a NIC
 * is a <pci> holding <nic> (or a bare <nic> under <cpu>) whose <net>
 * children are its ports. Every attribute is kept as written; elements weft
 * does not model are skipped. Defaults and classification happen in
 * weft_topo_finalize.
 */
#include "topo.h"

#include <errno.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <stdlib.h>
#include <string.h>

static int is(const xmlNode *n, const char *name) {
  return n->type == XML_ELEMENT_NODE && strcmp((const char *)n->name, name) == 0;
}

static int copy_attrs(const xmlNode *n, weft_topo_attrs_t *attrs) {
  for (const xmlAttr *a = n->properties; a; a = a->next) {
    xmlChar *v = xmlNodeGetContent((const xmlNode *)a);
    int rc = weft_topo_attr_set(attrs, (const char *)a->name, v ? (const char *)v : "");
    xmlFree(v);
    if (rc) return -1;
  }
  return 0;
}

static int prop_int(const xmlNode *n, const char *name, int def) {
  xmlChar *v = xmlGetProp(n, (const xmlChar *)name);
  if (!v) return def;
  char *end;
  long x = strtol((const char *)v, &end, 0);
  int ok = end != (char *)v;
  xmlFree(v);
  return ok ? (int)x : def;
}

static int load_nic(weft_topo_t *t, int nic, const xmlNode *x) {
  if (copy_attrs(x, &t->nodes[nic].dev)) return -1;
  for (const xmlNode *c = x->children; c; c = c->next) {
    if (!is(c, "net")) continue;
    int p = weft_topo_add_node(t, WEFT_TOPO_NET, nic);
    if (p < 0 || copy_attrs(c, &t->nodes[p].attrs)) return -1;
  }
  return 0;
}

// <nvlink> (under <gpu>) or <nvswitchlink> (under an NVSwitch's <pci>).
static int load_link(weft_topo_t *t, int from, const xmlNode *c) {
  xmlChar *target = xmlGetProp(c, (const xmlChar *)"target");
  int rc = target ? weft_topo_add_nvlink(t, from, (const char *)target, prop_int(c, "count", 1),
                                         prop_int(c, "tclass", -1), prop_int(c, "bw", 0))
                  : 0;
  xmlFree(target);
  return rc;
}

static int load_gpu(weft_topo_t *t, int gpu, const xmlNode *x) {
  if (copy_attrs(x, &t->nodes[gpu].dev)) return -1;
  for (const xmlNode *c = x->children; c; c = c->next)
    if (is(c, "nvlink") && load_link(t, gpu, c)) return -1;
  return 0;
}

static int load_children(weft_topo_t *t, int parent, const xmlNode *x, int depth);

static int load_pci(weft_topo_t *t, int parent, const xmlNode *x, int depth) {
  int n = weft_topo_add_node(t, WEFT_TOPO_PCI, parent);
  if (n < 0 || copy_attrs(x, &t->nodes[n].attrs)) return -1;
  for (const xmlNode *c = x->children; c; c = c->next) {
    if (is(c, "gpu")) {
      t->nodes[n].kind = WEFT_TOPO_GPU;
      t->nodes[n].on_pci = 1;
      if (load_gpu(t, n, c)) return -1;
    } else if (is(c, "nic")) {
      t->nodes[n].kind = WEFT_TOPO_NIC;
      t->nodes[n].on_pci = 1;
      if (load_nic(t, n, c)) return -1;
    } else if (is(c, "nvswitchlink") && load_link(t, n, c))
      return -1;
  }
  return load_children(t, n, x, depth + 1);
}

static int load_children(weft_topo_t *t, int parent, const xmlNode *x, int depth) {
  if (depth > 64) return 0; // deeper than any real PCI tree: ignore the rest
  for (const xmlNode *c = x->children; c; c = c->next) {
    if (is(c, "pci")) {
      if (load_pci(t, parent, c, depth)) return -1;
    } else if (is(c, "nic") && t->nodes[parent].kind == WEFT_TOPO_CPU) {
      int n = weft_topo_add_node(t, WEFT_TOPO_NIC, parent);
      if (n < 0 || load_nic(t, n, c)) return -1;
    }
  }
  return 0;
}

static weft_topo_t *load_doc(xmlDoc *doc, const char *name, char *err, size_t errlen) {
  if (!doc) {
    const xmlError *e = xmlGetLastError();
    snprintf(err, errlen, "%s: not a readable XML file%s%s", name, e && e->message ? ": " : "",
             e && e->message ? e->message : "");
    size_t len = strlen(err);
    if (len && err[len - 1] == '\n') err[len - 1] = '\0';
    return NULL;
  }
  xmlNode *root = xmlDocGetRootElement(doc);
  if (!root || !is(root, "system")) {
    snprintf(err, errlen, "%s: root element is <%s>, expected NCCL's <system>", name,
             root ? (const char *)root->name : "");
    xmlFreeDoc(doc);
    return NULL;
  }
  char source[300];
  snprintf(source, sizeof(source), "NCCL XML %s", name);
  weft_topo_t *t = weft_topo_new(source);
  int rc = t ? copy_attrs(root, &t->system) : -1;
  for (xmlNode *c = root->children; c && rc == 0; c = c->next) {
    if (!is(c, "cpu")) continue;
    int n = weft_topo_add_node(t, WEFT_TOPO_CPU, -1);
    rc = n < 0 || copy_attrs(c, &t->nodes[n].attrs) || load_children(t, n, c, 0) ? -1 : 0;
  }
  xmlFreeDoc(doc);
  if (rc) {
    snprintf(err, errlen, "%s: out of memory", name);
    weft_topo_free(t);
    return NULL;
  }
  if (weft_topo_finalize(t, err, errlen)) {
    weft_topo_free(t);
    return NULL;
  }
  return t;
}

static const int parse_options = XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING;

weft_topo_t *weft_topo_load_xml(const char *path, char *err, size_t errlen) {
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return NULL;
  }
  fclose(f);
  xmlResetLastError();
  return load_doc(xmlReadFile(path, NULL, parse_options), path, err, errlen);
}

weft_topo_t *weft_topo_load_xml_mem(const char *text, size_t len, const char *name, char *err, size_t errlen) {
  xmlResetLastError();
  return load_doc(xmlReadMemory(text, (int)len, name, NULL, parse_options), name, err, errlen);
}
