/*
 * topo_xml_dump.c — writes the graph as NCCL's topology XML
 * (NCCL_TOPO_DUMP_FILE, weft-topo --xml).
 *
 * The tree is written back with every attribute it was loaded with plus the
 * defaults finalisation filled in, and each GPU's NVLinks as described (bw=
 * where the description gave MB/s per link), so loading the dump gives the
 * same graph. NVSwitches that are not PCI devices appear only as NVLink
 * targets, as in NCCL's own dumps; links between NVSwitches are written as
 * <nvswitchlink> under the switch's <pci> (NCCL skips the element). Links
 * finalisation made itself (NVSwitch groups joined) are not written: loading
 * makes them again.
 */
#include "topo.h"

#include <errno.h>
#include <libxml/tree.h>
#include <string.h>

static xmlNode *element(xmlNode *parent, const char *name, const weft_topo_attrs_t *attrs) {
  xmlNode *e = xmlNewChild(parent, NULL, (const xmlChar *)name, NULL);
  for (int i = 0; e && attrs && i < attrs->count; i++)
    xmlNewProp(e, (const xmlChar *)attrs->items[i].key, (const xmlChar *)attrs->items[i].value);
  return e;
}

// The NVLinks described from node `from`, as <name> children of e.
static void dump_nvlinks(const weft_topo_t *t, int from, xmlNode *e, const char *name) {
  for (int i = 0; i < t->nnvlinks; i++) {
    const weft_topo_nvlink_t *nv = &t->nvlinks[i];
    if (nv->from != from) continue;
    xmlNode *l = xmlNewChild(e, NULL, (const xmlChar *)name, NULL);
    char buf[32];
    xmlNewProp(l, (const xmlChar *)"target", (const xmlChar *)nv->target);
    snprintf(buf, sizeof(buf), "%d", nv->count);
    xmlNewProp(l, (const xmlChar *)"count", (const xmlChar *)buf);
    if (nv->tclass >= 0) {
      snprintf(buf, sizeof(buf), "0x%06x", nv->tclass);
      xmlNewProp(l, (const xmlChar *)"tclass", (const xmlChar *)buf);
    }
    if (nv->mbps > 0) {
      snprintf(buf, sizeof(buf), "%d", nv->mbps);
      xmlNewProp(l, (const xmlChar *)"bw", (const xmlChar *)buf);
    }
  }
}

static void dump_node(const weft_topo_t *t, int i, xmlNode *parent);

static void dump_children(const weft_topo_t *t, int i, xmlNode *e) {
  for (int c = i + 1; c < t->nnodes; c++)
    if (t->nodes[c].parent == i) dump_node(t, c, e);
}

static void dump_node(const weft_topo_t *t, int i, xmlNode *parent) {
  const weft_topo_node_t *n = &t->nodes[i];
  xmlNode *e = NULL;
  switch (n->kind) {
  case WEFT_TOPO_CPU:
    e = element(parent, "cpu", &n->attrs);
    break;
  case WEFT_TOPO_NET:
    element(parent, "net", &n->attrs);
    return;
  case WEFT_TOPO_GPU:
    e = element(parent, "pci", &n->attrs);
    if (e) dump_nvlinks(t, i, element(e, "gpu", &n->dev), "nvlink");
    break;
  case WEFT_TOPO_NIC:
    e = n->on_pci ? element(parent, "pci", &n->attrs) : parent;
    if (e) e = element(e, "nic", &n->dev);
    break;
  default: // PCI, and NVSwitches that are PCI devices
    if (n->kind == WEFT_TOPO_NVS && !n->on_pci) return;
    e = element(parent, "pci", &n->attrs);
    if (e && n->kind == WEFT_TOPO_NVS) dump_nvlinks(t, i, e, "nvswitchlink");
    break;
  }
  if (e) dump_children(t, i, e);
}

int weft_topo_dump_xml(const weft_topo_t *t, const char *path, char *err, size_t errlen) {
  xmlDoc *doc = xmlNewDoc((const xmlChar *)"1.0");
  xmlNode *root = doc ? xmlNewNode(NULL, (const xmlChar *)"system") : NULL;
  if (!root) {
    xmlFreeDoc(doc);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  xmlDocSetRootElement(doc, root);
  for (int i = 0; i < t->system.count; i++)
    xmlNewProp(root, (const xmlChar *)t->system.items[i].key, (const xmlChar *)t->system.items[i].value);
  if (!weft_topo_attr_get(&t->system, "version")) xmlNewProp(root, (const xmlChar *)"version", (const xmlChar *)"1");
  for (int i = 0; i < t->nnodes; i++)
    if (t->nodes[i].parent < 0 && t->nodes[i].kind == WEFT_TOPO_CPU) dump_node(t, i, root);
  FILE *f = fopen(path, "w"); // opened here so that a bad path gives errno, not libxml2's stderr text
  if (!f) {
    snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
    xmlFreeDoc(doc);
    return -1;
  }
  doc->encoding = xmlStrdup((const xmlChar *)"UTF-8");
  int rc = doc->encoding ? xmlDocFormatDump(f, doc, 1) : -1;
  xmlFreeDoc(doc);
  if (fclose(f) != 0 || rc < 0) {
    snprintf(err, errlen, "%s: cannot write: %s", path, rc < 0 ? "libxml2 failed" : strerror(errno));
    return -1;
  }
  return 0;
}
